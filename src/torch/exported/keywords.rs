//! The order in which an exported program takes the keyword arguments it was exported with
//! (`torch.export.export(m, (x,), kwargs={"attention_mask": mask})`): after the positional
//! ones, in the order of the keys of the root module's `in_spec`, the pytree spec of
//! `(args, kwargs)`: `[1, {"type": "builtins.tuple", "children_spec": [<args>, {"type":
//! "builtins.dict", "context": "[\"attention_mask\"]", ...}]}]`. The archive's sample inputs
//! are fed in that order, so they reach the placeholders they were traced with.

use serde_json::Value;

/// The keyword names of `in_spec`, in the program's order; empty when it takes none or the
/// spec is not one this reader knows.
pub fn keyword_order(in_spec: &str) -> Vec<String> {
    let Ok(Value::Array(parts)) = serde_json::from_str::<Value>(in_spec) else {
        return Vec::new();
    };
    let kwargs = parts
        .get(1)
        .and_then(|spec| spec.get("children_spec")?.as_array()?.get(1).cloned());
    kwargs
        .as_ref()
        .and_then(|k| k.get("context")?.as_str())
        .and_then(|c| serde_json::from_str::<Vec<Value>>(c).ok())
        .map(|keys| {
            keys.iter()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_come_in_the_specs_order() {
        let spec = r#"[1, {"type": "builtins.tuple", "context": "null", "children_spec": [
            {"type": "builtins.tuple", "context": "null", "children_spec": [
                {"type": null, "context": null, "children_spec": []}]},
            {"type": "builtins.dict", "context": "[\"mask\", \"ids\"]", "children_spec": [
                {"type": null, "context": null, "children_spec": []},
                {"type": null, "context": null, "children_spec": []}]}]}]"#;
        assert_eq!(keyword_order(spec), ["mask", "ids"]);
        assert!(keyword_order("").is_empty());
    }
}

//! The names of an exported program's outputs, as the TorchScript side names the leaves of
//! what `forward` returns (`output` for a lone tensor, `0`, `1` for a tuple's elements,
//! `logits` for a dict's key, `1.hidden` nested), which is how outputs are matched to the
//! ONNX model's. They come from the root module's `out_spec`, the pytree spec `torch.export`
//! records of the returned structure: `[1, {"type": "builtins.tuple", "context": "null",
//! "children_spec": [...]}]`, a leaf having type null and a dict its keys, as JSON text, in
//! `context`.

use serde_json::Value;

/// The leaf names of `out_spec`, or positions (`output` alone) when the spec does not give
/// `n` leaves.
pub fn leaf_names(out_spec: &str, n: usize) -> Vec<String> {
    let mut names = Vec::new();
    if let Ok(Value::Array(parts)) = serde_json::from_str::<Value>(out_spec) {
        if let Some(spec) = parts.get(1) {
            walk(spec, "", &mut names);
        }
    }
    if names.len() == n {
        return names;
    }
    match n {
        1 => vec!["output".to_string()],
        _ => (0..n).map(|i| i.to_string()).collect(),
    }
}

fn walk(spec: &Value, path: &str, out: &mut Vec<String>) {
    let children = spec
        .get("children_spec")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if spec.get("type").is_none_or(Value::is_null) {
        out.push(if path.is_empty() { "output" } else { path }.to_string());
        return;
    }
    // A dict's (or dataclass's) keys, where the context lists one per child.
    let keys: Option<Vec<String>> = spec
        .get("context")
        .and_then(Value::as_str)
        .and_then(|c| serde_json::from_str::<Vec<Value>>(c).ok())
        .filter(|k| k.len() == children.len())
        .map(|k| {
            k.iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .collect()
        });
    for (i, child) in children.iter().enumerate() {
        let key = keys
            .as_ref()
            .map_or_else(|| i.to_string(), |k| k[i].clone());
        let joined = if path.is_empty() {
            key
        } else {
            format!("{path}.{key}")
        };
        walk(child, &joined, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuples_dicts_and_lone_tensors_are_named_like_torchscripts_leaves() {
        let leaf = r#"{"type": null, "context": null, "children_spec": []}"#;
        let tuple = format!(
            r#"[1, {{"type": "builtins.tuple", "context": "null", "children_spec": [{leaf}, {leaf}]}}]"#
        );
        assert_eq!(leaf_names(&tuple, 2), ["0", "1"]);
        let dict = format!(
            r#"[1, {{"type": "builtins.dict", "context": "[\"logits\", \"boxes\"]", "children_spec": [{leaf}, {leaf}]}}]"#
        );
        assert_eq!(leaf_names(&dict, 2), ["logits", "boxes"]);
        let one = format!(
            r#"[1, {{"type": "builtins.tuple", "context": "null", "children_spec": [{leaf}]}}]"#
        );
        assert_eq!(leaf_names(&one, 1), ["0"]);
        assert_eq!(leaf_names(&format!("[1, {leaf}]"), 1), ["output"]);
        assert_eq!(leaf_names("", 3), ["0", "1", "2"]);
    }
}

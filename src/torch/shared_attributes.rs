//! One module held under several attributes of one parent, named the way TorchScript and the
//! legacy exporter name it.
//!
//! A network may register one instance under several attributes of the same parent (timm's
//! CoaT: `self.mlp2 = self.mlp3 = self.mlp4 = Mlp(...)`). `torch.jit.trace` names every call
//! by the parent's first attribute holding it (`named_children()` skips the repeats), and the
//! legacy exporter alike (`mlp2/fc1_1` for the second call); torch.export records the
//! attribute each call went through (`mlp3.fc1`). Those calls of a `.pt2` then met no module
//! of a legacy ONNX export, went unpaired, and a fault inside them was found only at the
//! parent.
//!
//! Both archives say which attributes are one instance: they list each attribute's state
//! (`mlp3.fc1.weight` beside `mlp2.fc1.weight`) and store a shared tensor once (one file,
//! offset and layout in a `.pt2`; one storage in TorchScript, whose shim reports where each
//! tensor's data is). Two children of one parent whose whole state, relative names and storage
//! alike, is the same and not empty, and that are of one class, are one instance (a tied
//! weight alone does not make an LM head its embedding); the later is named as the earlier,
//! in the order the state is listed (the order the parent registered them). The `.pt2` reader
//! names its values so; for TorchScript, which names them so itself, the aliases serve to read
//! a dynamo export's scopes (`capture::module_aliases`). A module without state cannot be told
//! from a twin this way and keeps its attribute's name; so does an instance shared across
//! parents (CoaT's `cpe1` handed to each serial block as `cpe`), whose calls TorchScript names
//! by the attribute read too.

use crate::capture::module_aliases::ModuleAliases;
use std::collections::{BTreeMap, HashMap};

/// The aliases among the modules owning `state`: each stored tensor's full name in the
/// signature's order, with a key that is equal for two names of one tensor. `class_of` gives
/// the class a module was called as, `None` for one never called.
pub fn from_state<'a>(
    state: impl IntoIterator<Item = (&'a str, &'a str)>,
    class_of: impl Fn(&str) -> Option<&'a str>,
) -> ModuleAliases {
    // Each module's state as (name below it, storage key), in signature order, and the
    // children of each parent in the order their state first appears.
    let mut owned: HashMap<String, Vec<(String, String)>> = HashMap::new();
    let mut children: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, storage) in state {
        let segments: Vec<&str> = name.split('.').collect();
        for depth in 1..segments.len() {
            let module = segments[..depth].join(".");
            let below = segments[depth..].join(".");
            let entries = owned.entry(module.clone()).or_default();
            if entries.is_empty() {
                let parent = segments[..depth - 1].join(".");
                children.entry(parent).or_default().push(module);
            }
            entries.push((below, storage.to_string()));
        }
    }
    let same_class = |a: &str, b: &str| class_of(a).is_some_and(|c| class_of(b) == Some(c));
    let mut aliases = HashMap::new();
    for siblings in children.values() {
        let mut first_of: HashMap<Vec<(String, String)>, &String> = HashMap::new();
        for child in siblings {
            let mut state = owned[child].clone();
            state.sort();
            match first_of.get(&state) {
                Some(first) if same_class(first, child) => {
                    aliases.insert(child.clone(), (*first).clone());
                }
                Some(_) => {}
                None => {
                    first_of.insert(state, child);
                }
            }
        }
    }
    ModuleAliases::new(aliases)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CoaT's shape: one Mlp under three attributes of each block, the storage of each
    /// attribute's tensors the same file.
    #[test]
    fn siblings_with_one_storage_are_named_as_the_first() {
        let state = [
            ("blocks.0.norm.weight", "w0"),
            ("blocks.0.mlp2.fc1.weight", "w1"),
            ("blocks.0.mlp2.fc2.weight", "w2"),
            ("blocks.0.mlp3.fc1.weight", "w1"),
            ("blocks.0.mlp3.fc2.weight", "w2"),
            ("blocks.0.mlp4.fc1.weight", "w1"),
            ("blocks.0.mlp4.fc2.weight", "w2"),
            ("blocks.1.mlp2.fc1.weight", "w3"),
            ("blocks.1.mlp3.fc1.weight", "w3"),
            ("head.weight", "w4"),
        ];
        let class_of = |path: &str| {
            let last = path.rsplit('.').next().unwrap_or(path);
            Some(if last.starts_with("mlp") {
                "Mlp"
            } else {
                "Linear"
            })
        };
        let aliases = from_state(state, class_of);
        assert_eq!(aliases.canonical("blocks.0.mlp3.fc1"), "blocks.0.mlp2.fc1");
        assert_eq!(aliases.canonical("blocks.0.mlp4"), "blocks.0.mlp2");
        assert_eq!(aliases.canonical("blocks.0.mlp2.act"), "blocks.0.mlp2.act");
        assert_eq!(aliases.canonical("blocks.1.mlp3.fc1"), "blocks.1.mlp2.fc1");
        // Equal state under different parents is no alias: blocks.1 is not blocks.0.
        assert_eq!(aliases.canonical("blocks.1"), "blocks.1");
        assert_eq!(aliases.canonical("head"), "head");
        assert_eq!(aliases.canonical(""), "");
    }

    /// A tied weight alone does not make two modules one (an LM head tied to the
    /// embedding: other classes), nor does a shared piece of otherwise own state.
    #[test]
    fn partly_shared_state_is_no_alias() {
        let state = [
            ("embed.weight", "w0"),
            ("head.weight", "w0"),
            ("a.fc.weight", "w2"),
            ("a.norm.weight", "w3"),
            ("b.fc.weight", "w2"),
            ("b.norm.weight", "w4"),
        ];
        let class_of = |path: &str| match path {
            "embed" => Some("Embedding"),
            "head" | "a.fc" | "b.fc" => Some("Linear"),
            _ => Some("Block"),
        };
        let aliases = from_state(state, class_of);
        assert_eq!(aliases.canonical("head"), "head");
        assert_eq!(aliases.canonical("b"), "b");
        // The shared child itself is one instance under two parents: kept.
        assert_eq!(aliases.canonical("b.fc"), "b.fc");
        // Siblings of one class and one state, one of them never called: not known as one.
        let never_called = from_state([("p.weight", "w0"), ("q.weight", "w0")], |path| {
            (path == "p").then_some("Linear")
        });
        assert!(never_called.is_empty());
    }
}

//! Module paths a shared instance's later attributes are read as: a module registered under
//! several attributes of one parent (`self.mlp2 = self.mlp3 = Mlp(...)`) is named by its
//! first attribute (`blocks.0.mlp2`), as TorchScript and the legacy exporter name every call
//! of it. Both references find these (`torch::shared_attributes`); the `.pt2` reader names
//! its own values that way, and an ONNX export (the dynamo exporter writes the attribute each
//! call went through) is read the same way before pairing, so both sides name one module
//! alike.

use super::Capture;
use std::collections::HashMap;

/// Later attribute paths of a shared instance, each with the path of its first attribute.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ModuleAliases(HashMap<String, String>);

impl ModuleAliases {
    pub fn new(aliases: HashMap<String, String>) -> ModuleAliases {
        ModuleAliases(aliases)
    }

    /// `path` with every attribute that repeats a sibling's instance read as that sibling,
    /// from the root down (an alias inside an alias is read in its first attribute too).
    pub fn canonical(&self, path: &str) -> String {
        if self.0.is_empty() || path.is_empty() {
            return path.to_string();
        }
        let mut out = String::new();
        for segment in path.split('.') {
            let next = if out.is_empty() {
                segment.to_string()
            } else {
                format!("{out}.{segment}")
            };
            out = self.0.get(&next).cloned().unwrap_or(next);
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Capture {
    /// Every value's module scope read through `aliases` (the other side's).
    pub fn read_scopes_as(&mut self, aliases: &ModuleAliases) {
        if aliases.is_empty() {
            return;
        }
        for value in &mut self.values {
            for level in &mut value.scope {
                level.path = aliases.canonical(&level.path);
            }
        }
    }
}

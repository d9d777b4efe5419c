//! Where an exported node came from, in the forms the TorchScript side gives: the module
//! hierarchy as `getNodesModuleHierarchy` writes it (`layer1(Sequential).0(BasicBlock)`), and
//! the source line and stack as `file:line`.
//!
//! `torch.export` records a node's modules in `nn_module_stack`: `key,path,class` entries,
//! outermost first, separated by `;` (`L__self__,,__main__.Net;L__self__conv1,conv1,
//! torch.nn.modules.conv.Conv2d`). Its paths are mostly the full dotted ones `named_modules()`
//! gives, iterated containers included (`layers.1`); `module_frames` makes the others full
//! (sliced containers, paths that restart below a module). Each frame is then named relative
//! to the frame above it and the hierarchy resolves against the module tree exactly as
//! TorchScript's does.
//! `stack_trace` is a Python traceback, outermost frame first (`File "m.py", line 10, in
//! forward`).

use std::collections::HashSet;

/// One module frame: its full path and its class (the qualified Python name's last part).
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub path: String,
    pub class: String,
}

/// The frames of an `nn_module_stack` string, root (`path` "") included, outermost first,
/// each with its full path from the root.
///
/// Two things in the paths torch.export writes are not `named_modules()` paths. Iterating a
/// slice of a container (Ultralytics' `for m in self.model[:-1]`) makes the slice a segment
/// of its own (`model.slice(None, -1, None).7`): its index is turned into the container's
/// (`model.7`). And inside a module reached other than by attribute from the root, paths
/// restart from that module: below `model.6`, Ultralytics' C3k2 has `m.0`, then `m.0.m`,
/// `m.0.m.1`, each extending the one above, and a Conv's `conv` restarts again. So a path
/// that neither extends the raw path above it nor starts at a module the root calls (`top`,
/// from `top_level`) is relative to the full path of the frame above, and the paths that
/// then extend it share that base. Without this a third of RT-DETR's layers had no module
/// and went unpaired.
pub fn module_frames(stack: &str, top: &HashSet<String>) -> Vec<Frame> {
    let mut frames: Vec<Frame> = Vec::new();
    let mut base = String::new();
    let mut above = String::new();
    for entry in stack.split(';') {
        let Some([_, path, class]) = split_fields(entry) else {
            continue;
        };
        let raw = container_indices(path);
        let extends = (raw.strip_prefix(above.as_str())).is_some_and(|r| r.starts_with('.'));
        if raw.is_empty() || top.contains(first_segment(&raw)) {
            base.clear();
        } else if !extends {
            base = frames.last().map_or(String::new(), |f| {
                if f.path.is_empty() {
                    String::new()
                } else {
                    format!("{}.", f.path)
                }
            });
        }
        let class = class.rsplit('.').next().unwrap_or(class);
        frames.push(Frame {
            path: format!("{base}{raw}"),
            class: class.to_string(),
        });
        above = raw;
    }
    frames
}

/// The first path segment of every module the root calls directly, over all the stacks.
pub fn top_level<'a>(stacks: impl Iterator<Item = &'a str>) -> HashSet<String> {
    let mut top = HashSet::new();
    for stack in stacks {
        let first = stack
            .split(';')
            .find_map(|entry| match split_fields(entry) {
                Some([_, path, _]) if !path.is_empty() => Some(container_indices(path)),
                _ => None,
            });
        if let Some(path) = first {
            top.insert(first_segment(&path).to_string());
        }
    }
    top
}

fn first_segment(path: &str) -> &str {
    path.split('.').next().unwrap_or(path)
}

/// `key,path,class` split at the commas outside brackets, as torch's `metadata_split` reads
/// them back: a key and path may hold `slice(None, -1, None)`. Anything else is no frame.
fn split_fields(entry: &str) -> Option<[&str; 3]> {
    match split_outside_brackets(entry, ',')[..] {
        [key, path, class] => Some([key, path, class]),
        _ => None,
    }
}

/// A path with each `slice(start, stop, step).k` segment pair turned into the container's
/// own index `start + k * step`; a slice from the end (negative start) is left as it is,
/// its container's length being unknown here.
fn container_indices(path: &str) -> String {
    let segments = split_outside_brackets(path, '.');
    let mut out: Vec<String> = Vec::new();
    let mut k = 0;
    while k < segments.len() {
        let segment = segments[k];
        let index = (segment
            .strip_prefix("slice(")
            .and_then(|s| s.strip_suffix(')')))
        .and_then(|args| {
            let bound = |s: &str, default: i64| match s.trim() {
                "None" => Some(default),
                x => x.parse::<i64>().ok(),
            };
            let parts: Vec<&str> = args.split(',').collect();
            let start = bound(parts.first()?, 0)?;
            let step = bound(parts.get(2)?, 1)?;
            let position = segments.get(k + 1)?.parse::<i64>().ok()?;
            (start >= 0 && step > 0).then_some(start + position * step)
        });
        match index {
            Some(i) => {
                out.push(i.to_string());
                k += 2;
            }
            None => {
                out.push(segment.to_string());
                k += 1;
            }
        }
    }
    out.join(".")
}

/// `text` split at each `separator` outside brackets (the dots and commas inside
/// `slice(None, -1, None)` are not separators).
fn split_outside_brackets(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (k, c) in text.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            c if c == separator && depth == 0 => {
                parts.push(&text[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// The hierarchy string of the frames below the root, each named relative to the one above.
pub fn hierarchy(frames: &[Frame]) -> String {
    let mut parts = Vec::new();
    let mut parent = "";
    for frame in frames.iter().filter(|f| !f.path.is_empty()) {
        let name = match frame.path.strip_prefix(parent) {
            Some(rest) if !parent.is_empty() && rest.starts_with('.') => &rest[1..],
            _ => frame.path.as_str(),
        };
        parts.push(format!("{name}({})", frame.class));
        parent = &frame.path;
    }
    parts.join(".")
}

/// Every frame of a traceback as `file:line`, outermost first.
pub fn stack_frames(trace: &str) -> Vec<String> {
    trace
        .lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix("File \"")?;
            let (file, rest) = rest.split_once("\", line ")?;
            let number: String = rest.chars().take_while(char::is_ascii_digit).collect();
            (!number.is_empty()).then(|| format!("{file}:{number}"))
        })
        .collect()
}

/// The user's own line: the innermost frame outside the torch package (the rule the
/// TorchScript shim applies), else the innermost frame.
pub fn source_line(frames: &[String]) -> String {
    frames
        .iter()
        .rev()
        .find(|f| !f.contains("/torch/"))
        .or(frames.last())
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_stacks_become_hierarchies_of_relative_names() {
        let none = HashSet::new();
        let frames = module_frames(
            "L__self__,,__main__.Net;L__self__layer1,layer1,torch.nn.modules.container.Sequential;\
             L__self__layer1_0,layer1.0,models.BasicBlock;L__self__layer1_0_conv1,layer1.0.conv1,\
             torch.nn.modules.conv.Conv2d",
            &none,
        );
        assert_eq!(frames[0].path, "");
        assert_eq!(frames[0].class, "Net");
        assert_eq!(
            hierarchy(&frames),
            "layer1(Sequential).0(BasicBlock).conv1(Conv2d)"
        );
        // An iterated container never called: the frame keeps the container's level.
        let iterated = module_frames(
            "L__self__,,m.Net;L__self__layers_1,layers.1,x.Linear",
            &none,
        );
        assert_eq!(hierarchy(&iterated), "layers.1(Linear)");
        assert_eq!(hierarchy(&module_frames("", &none)), "");
    }

    /// Ultralytics iterates `self.model[:-1]`: torch.export writes the slice into the paths
    /// (with commas, which torch's own reader splits around) and names a module called
    /// inside a module reached through it relative to that module (`conv`). A module passed
    /// in and called from elsewhere (RT-DETR's decoder calls its owner's `dec_bbox_head`)
    /// keeps its full path.
    #[test]
    fn sliced_containers_and_relative_paths_become_full_paths() {
        let conv = "L__self__,,t.Model;\
             L__self__model.slice(None, -1, None).7,model.slice(None, -1, None).7,b.HGBlock;\
             L__self__model.slice(None, -1, None).7.m.1,model.slice(None, -1, None).7.m.1,c.Light;\
             L__self__conv@54,conv,torch.nn.modules.conv.Conv2d";
        let head = "L__self__,,t.Model;L__self__model.28,model.28,h.Decoder;\
             L__self__model.28.decoder,model.28.decoder,h.Layers;\
             L__self__model.28.dec_bbox_head.0,model.28.dec_bbox_head.0,h.MLP";
        let top = top_level([conv, head].into_iter());
        assert_eq!(top, HashSet::from(["model".to_string()]));
        let paths = |stack| -> Vec<String> {
            module_frames(stack, &top)
                .into_iter()
                .map(|f| f.path)
                .collect()
        };
        assert_eq!(
            paths(conv),
            ["", "model.7", "model.7.m.1", "model.7.m.1.conv"]
        );
        assert_eq!(
            paths(head),
            [
                "",
                "model.28",
                "model.28.decoder",
                "model.28.dec_bbox_head.0"
            ]
        );
        assert_eq!(
            hierarchy(&module_frames(conv, &top)),
            "model.7(HGBlock).m.1(Light).conv(Conv2d)"
        );
        // Paths restart below a module and then extend each other (Ultralytics' C3k2).
        let c3k2 = "L__self__,,t.Model;L__self__model.6,model.6,b.C3k2;\
             L__self__m.0@2,m.0,b.C3k;L__self__m.0.m,m.0.m,c.Sequential;\
             L__self__m.0.m.1,m.0.m.1,b.Bottleneck;L__self__conv@16,conv,c.Conv2d";
        assert_eq!(
            paths(c3k2),
            [
                "",
                "model.6",
                "model.6.m.0",
                "model.6.m.0.m",
                "model.6.m.0.m.1",
                "model.6.m.0.m.1.conv"
            ]
        );
        // A slice that starts later, with a step; one from the end stays as written.
        assert_eq!(
            container_indices("layers.slice(2, None, 2).1.fc"),
            "layers.4.fc"
        );
        assert_eq!(
            container_indices("layers.slice(-2, None, None).0"),
            "layers.slice(-2, None, None).0"
        );
    }

    #[test]
    fn tracebacks_give_the_users_line() {
        let trace = "File \"/src/model.py\", line 10, in forward\n    x = self.conv1(x)\n  \
                     File \"/env/site-packages/torch/nn/modules/conv.py\", line 565, in forward\n    \
                     return self._conv_forward(input, self.weight, self.bias)";
        let frames = stack_frames(trace);
        assert_eq!(
            frames,
            [
                "/src/model.py:10",
                "/env/site-packages/torch/nn/modules/conv.py:565"
            ]
        );
        assert_eq!(source_line(&frames), "/src/model.py:10");
        assert_eq!(source_line(&[]), "");
    }
}

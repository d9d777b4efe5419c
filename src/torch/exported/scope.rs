//! Where an exported node came from, in the forms the TorchScript side gives: the module
//! hierarchy as `getNodesModuleHierarchy` writes it (`layer1(Sequential).0(BasicBlock)`), and
//! the source line and stack as `file:line`.
//!
//! `torch.export` records a node's modules in `nn_module_stack`: `key,path,class` entries,
//! outermost first, separated by `;` (`L__self__,,__main__.Net;L__self__conv1,conv1,
//! torch.nn.modules.conv.Conv2d`). Its paths are the full dotted ones `named_modules()` gives,
//! iterated containers included (`layers.1`), so each frame is named relative to the frame
//! above it and the hierarchy resolves against the module tree exactly as TorchScript's does.
//! `stack_trace` is a Python traceback, outermost frame first (`File "m.py", line 10, in
//! forward`).

/// One module frame: its full path and its class (the qualified Python name's last part).
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub path: String,
    pub class: String,
}

/// The frames of an `nn_module_stack` string, root (`path` "") included, outermost first.
pub fn module_frames(stack: &str) -> Vec<Frame> {
    stack
        .split(';')
        .filter_map(|entry| {
            // The key never holds a comma; the class is after the last one.
            let (_, rest) = entry.split_once(',')?;
            let (path, class) = rest.rsplit_once(',')?;
            let class = class.rsplit('.').next().unwrap_or(class);
            Some(Frame {
                path: path.to_string(),
                class: class.to_string(),
            })
        })
        .collect()
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
        let frames = module_frames(
            "L__self__,,__main__.Net;L__self__layer1,layer1,torch.nn.modules.container.Sequential;\
             L__self__layer1_0,layer1.0,models.BasicBlock;L__self__layer1_0_conv1,layer1.0.conv1,\
             torch.nn.modules.conv.Conv2d",
        );
        assert_eq!(frames[0].path, "");
        assert_eq!(frames[0].class, "Net");
        assert_eq!(
            hierarchy(&frames),
            "layer1(Sequential).0(BasicBlock).conv1(Conv2d)"
        );
        // An iterated container never called: the frame keeps the container's level.
        let iterated = module_frames("L__self__,,m.Net;L__self__layers_1,layers.1,x.Linear");
        assert_eq!(hierarchy(&iterated), "layers.1(Linear)");
        assert_eq!(hierarchy(&module_frames("")), "");
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

//! libtorch's error messages turned into the one line a user needs.
//!
//! libtorch says why something failed at the end of a long message: the interpreter's header
//! ("The following operation failed in the TorchScript interpreter."), two tracebacks, then
//! `RuntimeError: <the reason>`. The reason, and the line of the model's own code it points
//! at, are kept; the rest is dropped. Load errors with a known cause (a foreign or damaged
//! zip, a newer file format, an unregistered custom op) are said in words that lead to the fix.

/// A load refused for an operator no loaded library registers (`torchvision::nms`): a value
/// the caller can act on (`app::op_libraries` finds the library), worded as the refusal.
#[derive(Debug)]
pub struct UnregisteredOperator {
    /// The qualified operator, `namespace::name`.
    pub op: String,
    explained: String,
}

impl std::fmt::Display for UnregisteredOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.explained)
    }
}

impl std::error::Error for UnregisteredOperator {}

/// `explain_load_error` as an error value: an `UnregisteredOperator` for an unknown
/// operator, else the explained message.
pub fn load_error(message: &str) -> anyhow::Error {
    let explained = explain_load_error(message);
    match unknown_builtin_op(&first_line(message)) {
        Some(op) => anyhow::Error::new(UnregisteredOperator {
            op: op.to_string(),
            explained,
        }),
        None => anyhow::anyhow!(explained),
    }
}

/// The one-line reason libtorch gave for failing to load an archive, with its fix where known.
pub fn explain_load_error(message: &str) -> String {
    if let Some((file, supported)) = newer_file_format(message) {
        let libtorch = env!("ALIGN_CHECK_LIBTORCH_VERSION");
        let release = libtorch.split('+').next().unwrap_or(libtorch);
        return format!(
            "it is written in TorchScript file format version {file}, but align-check's libtorch \
             ({libtorch}) reads versions up to {supported}: save it with PyTorch {release} or \
             older (the torch version scripts/requirements.txt pins)"
        );
    }
    let message = first_line(message);
    let detail = match message.find("] ") {
        Some(i) if message.starts_with("[enforce fail") => {
            message[i + 2..].trim_start_matches(". ")
        }
        _ => &message,
    };
    if message.contains("PytorchStreamReader") || message.contains("inline_container") {
        format!("not a readable TorchScript archive (damaged, or not written by torch.jit.save): {detail}")
    } else if let Some(op) = unknown_builtin_op(&message) {
        format!(
            "it calls the operator `{op}`, which is not registered: if it is a custom op, pass \
             --torch-ops LIB with the library that registers it (TORCH_LIBRARY) \
             (libtorch said: {detail})"
        )
    } else {
        detail.to_string()
    }
}

/// The one-line reason a run failed: the innermost error libtorch raised, followed by the
/// line of the model's source it happened at when the archive kept it (shown as reports show
/// source lines: relative to the working directory where it can be).
pub fn explain_run_error(message: &str) -> String {
    let reason = innermost_reason(message);
    match original_location(message) {
        Some(at) => format!(
            "{reason} (at {})",
            crate::capture::location::display_location(&at)
        ),
        None => reason,
    }
}

/// The text of the last `SomethingError: reason` line, which is the innermost exception in
/// libtorch's tracebacks; the first line when there is none.
fn innermost_reason(message: &str) -> String {
    let raised = message.lines().rev().find_map(|line| {
        let (class, reason) = line.split_once(": ")?;
        let is_class = (class.ends_with("Error") || class.ends_with("Exception"))
            && !class.is_empty()
            && class
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
        (is_class && !reason.trim().is_empty()).then(|| reason.trim().to_string())
    });
    raised.unwrap_or_else(|| first_line(message))
}

/// `file:line` of the innermost frame of the traceback in the model's original code that is
/// not inside PyTorch. Scripted code lists Python-style frames (`File "x.py", line 68`, the
/// innermost last); a trace lists the recorded Python stack (`x.py(77): forward`, the
/// innermost first, followed by the tracer's own frames).
fn original_location(message: &str) -> Option<String> {
    let (_, original) = message.split_once("Traceback of TorchScript, original code")?;
    let lines: Vec<&str> = original.lines().map(str::trim).collect();
    let scripted: Vec<(&str, &str)> = lines
        .iter()
        .filter_map(|l| {
            let rest = l.strip_prefix("File \"")?;
            let file = rest.split('"').next()?;
            let line = rest.split(", line ").nth(1)?.split(',').next()?.trim();
            Some((file, line))
        })
        .collect();
    let traced = lines.iter().filter_map(|l| {
        let (head, _) = l.rsplit_once("): ")?;
        let (file, line) = head.rsplit_once('(')?;
        line.chars()
            .all(|c| c.is_ascii_digit())
            .then_some((file, line))
    });
    let users = |(file, _): &(&str, &str)| !file.contains("/torch/");
    let (file, line) = if scripted.is_empty() {
        traced.into_iter().find(users)
    } else {
        scripted.into_iter().rev().find(users)
    }?;
    Some(format!("{file}:{line}"))
}

/// The two versions of "Attempted to read a PyTorch file with version 99, but the maximum
/// supported version for reading is 10".
fn newer_file_format(message: &str) -> Option<(&str, &str)> {
    let number_after = |marker: &str| -> Option<&str> {
        let rest = message.split(marker).nth(1)?;
        let n = rest.split(|c: char| !c.is_ascii_digit()).next()?;
        (!n.is_empty()).then_some(n)
    };
    Some((
        number_after("read a PyTorch file with version ")?,
        number_after("maximum supported version for reading is ")?,
    ))
}

/// The op of libtorch's "Unknown builtin op: my_ops::my_add." (a model calling an op that no
/// loaded library registered).
fn unknown_builtin_op(message: &str) -> Option<&str> {
    let (_, rest) = message.split_once("Unknown builtin op: ")?;
    let op = rest.split_whitespace().next()?.trim_end_matches('.');
    (!op.is_empty()).then_some(op)
}

/// libtorch messages can run to many lines (source excerpts, traces); a report needs one.
fn first_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("unknown error")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERPRETER: &str = "The following operation failed in the TorchScript interpreter.\n\
        Traceback of TorchScript, serialized code (most recent call last):\n  \
        File \"code/__torch__.py\", line 11, in forward\n    bias = torch.zeros([2])\n\n\
        Traceback of TorchScript, original code (most recent call last):\n  \
        File \"/home/me/net.py\", line 68, in forward\n    def forward(self, x):\n\
        RuntimeError: Found no NVIDIA driver on your system.\n";

    #[test]
    fn run_errors_keep_the_innermost_reason_and_the_users_line() {
        assert_eq!(
            explain_run_error(INTERPRETER),
            "Found no NVIDIA driver on your system. (at /home/me/net.py:68)"
        );
        assert_eq!(explain_run_error("plain failure\nmore"), "plain failure");
        let traced = "The following operation failed in the TorchScript interpreter.\n\
            Traceback of TorchScript, original code (most recent call last):\n\
            /home/me/net.py(77): forward\n\
            /venv/lib/python3.11/site-packages/torch/nn/modules/module.py(1768): _slow_forward\n\
            /home/me/export.py(12): main\n\
            RuntimeError: shape '[1, 4]' is invalid for input of size 8\n";
        assert_eq!(
            explain_run_error(traced),
            "shape '[1, 4]' is invalid for input of size 8 (at /home/me/net.py:77)"
        );
    }

    #[test]
    fn newer_file_format_names_both_versions() {
        let msg = "PytorchStreamReader failed reading file: Attempted to read a PyTorch file \
                   with version 99, but the maximum supported version for reading is 10. The \
                   version of your PyTorch installation may be too old";
        let said = explain_load_error(msg);
        assert!(
            said.contains("version 99") && said.contains("up to 10"),
            "{said}"
        );
    }
}

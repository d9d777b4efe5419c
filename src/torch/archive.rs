//! What a file given as the TorchScript model is when it is not TorchScript, and how to get
//! the TorchScript file from it.
//!
//! The classic first mistake is passing what `torch.save` wrote. It is a zip archive like
//! `torch.jit.save`'s, and libtorch answers it with "constants.pkl not found ... your
//! checkpoint file is corrupted", which sends the user the wrong way. The zip's entry names
//! tell them apart without unpickling anything: TorchScript has `code/` and `constants.pkl`, a
//! `torch.save` checkpoint has only `data.pkl` and its tensors. (A `torch.export` archive,
//! with `archive_format`, is a reference of its own: `exported` reads it.) The legacy
//! (pre-zip) `torch.save` format starts with a pickled magic number.

use std::io::Read;
use std::path::Path;

/// The fix every message ends with: a trace of the module in eval mode, or its exported
/// program.
const TRACE: &str = "model.eval(); torch.jit.trace(model, example_inputs).save(\"model.pt\") \
                     or torch.export.save(torch.export.export(model, example_inputs), \
                     \"model.pt2\") (scripts/export_pair.py writes them with model.onnx)";

/// The pickled magic number the legacy `torch.save` format starts with.
const LEGACY_SAVE_MAGIC: &[u8] = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19";

/// What the zip archive at `path` is, when it is not TorchScript: one line saying so and
/// how to make the TorchScript file. `None` for TorchScript and for zips it cannot tell.
pub fn explain_zip(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut zip = zip::ZipArchive::new(file).ok()?;
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let has = |suffix: &str| names.iter().any(|n| n.ends_with(suffix));
    if names.iter().any(|n| n.contains("/code/")) || has("/constants.pkl") {
        return None;
    }
    let data = names.iter().find(|n| n.ends_with("/data.pkl"))?.clone();
    let mut pickle = Vec::new();
    zip.by_name(&data).ok()?.read_to_end(&mut pickle).ok()?;
    Some(describe_checkpoint(&pickle))
}

/// The TorchScript file-format version an archive records (`.data/version`, or `version` in
/// older archives), when it records one.
pub fn format_version(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut zip = zip::ZipArchive::new(file).ok()?;
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let entry = names
        .iter()
        .find(|n| n.ends_with("/.data/version"))
        .or_else(|| names.iter().find(|n| n.ends_with("/version")))?
        .clone();
    let mut text = String::new();
    zip.by_name(&entry).ok()?.read_to_string(&mut text).ok()?;
    Some(text.trim().to_string())
}

/// What a file that is not a zip is, when it is a legacy-format `torch.save` checkpoint.
pub fn explain_legacy(head: &[u8]) -> Option<String> {
    head.starts_with(LEGACY_SAVE_MAGIC).then(|| {
        format!(
            "this is a torch.save checkpoint in the legacy (pre-zip) format, not TorchScript: \
             {}",
            checkpoint_fix("load")
        )
    })
}

/// A `torch.save` checkpoint, judged from its pickle: a whole module pickles its
/// `_parameters`; a state dict is an `OrderedDict` of tensors.
fn describe_checkpoint(pickle: &[u8]) -> String {
    let contains = |needle: &[u8]| pickle.windows(needle.len()).any(|w| w == needle);
    if contains(b"_parameters") {
        format!(
            "this is a torch.save checkpoint of a whole pickled module, not TorchScript: load it \
             with model = torch.load(PATH, weights_only=False), then {TRACE}"
        )
    } else if contains(b"OrderedDict") {
        format!(
            "this is a torch.save checkpoint of a state_dict (weights only), not TorchScript: {}",
            checkpoint_fix("state_dict")
        )
    } else {
        format!(
            "this is a torch.save checkpoint, not TorchScript: {}",
            checkpoint_fix("load")
        )
    }
}

fn checkpoint_fix(kind: &str) -> String {
    let load = if kind == "state_dict" {
        "build the model in Python, model.load_state_dict(torch.load(PATH))"
    } else {
        "load it in Python into the model it came from"
    };
    format!("{load}, then {TRACE}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_are_told_apart_by_their_pickle() {
        let module = describe_checkpoint(b"\x80\x02c__main__\nNet\nq\x00X\x0b_parameters");
        assert!(module.contains("whole pickled module"), "{module}");
        let state = describe_checkpoint(b"ccollections\nOrderedDict\nq\x00");
        assert!(state.contains("state_dict"), "{state}");
        assert!(state.contains("torch.jit.trace"), "{state}");
    }

    #[test]
    fn legacy_magic_is_recognised() {
        let mut head = LEGACY_SAVE_MAGIC.to_vec();
        head.extend_from_slice(b".\x80");
        assert!(explain_legacy(&head).unwrap().contains("legacy"));
        assert!(explain_legacy(b"\x80\x02c__main__").is_none());
    }
}

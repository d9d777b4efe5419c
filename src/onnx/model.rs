//! Reading an `.onnx` file into the prost-generated `ModelProto`, with one-line errors.
//!
//! This is the first thing a user's ONNX path meets, so every way it can be wrong (missing,
//! empty, a TorchScript archive passed in the wrong position, truncated, not protobuf at all,
//! a protobuf without a graph) gets its own message that names the file. A panic is never an
//! answer. The model's folder is remembered when initializers live in external data files,
//! because the session is built from memory and ONNX Runtime then cannot know where the
//! model came from.

use super::proto;
use anyhow::{bail, Result};
use prost::bytes::Bytes;
use prost::Message;
use std::path::{Path, PathBuf};

/// An ONNX model as read from disk.
#[derive(Debug, Clone)]
pub struct OnnxModel {
    /// The path the user gave.
    pub path: PathBuf,
    pub proto: proto::ModelProto,
    /// Folder that external-data paths are relative to, when some tensor's data lives outside
    /// the `.onnx` file; `None` when everything is inline.
    pub external_data_dir: Option<PathBuf>,
}

impl OnnxModel {
    /// Opset version of the default (`ai.onnx`) domain; 0 when the model imports none.
    pub fn opset(&self) -> i64 {
        opset_of(&self.proto)
    }

    /// The main graph. `load` guarantees it exists; a hand-built `OnnxModel` without one
    /// gets an empty graph rather than a panic.
    pub fn graph(&self) -> &proto::GraphProto {
        static EMPTY: std::sync::OnceLock<proto::GraphProto> = std::sync::OnceLock::new();
        self.proto
            .graph
            .as_ref()
            .unwrap_or_else(|| EMPTY.get_or_init(proto::GraphProto::default))
    }

    /// Builds a model from an in-memory proto (tests, generated models); no validation.
    pub fn from_proto(path: impl Into<PathBuf>, proto: proto::ModelProto) -> OnnxModel {
        let path = path.into();
        let external_data_dir = uses_external_data(&proto).then(|| model_dir(&path));
        OnnxModel {
            path,
            proto,
            external_data_dir,
        }
    }
}

/// Default-domain opset of a model proto; 0 when absent.
pub fn opset_of(model: &proto::ModelProto) -> i64 {
    model
        .opset_import
        .iter()
        .filter(|o| matches!(o.domain(), "" | "ai.onnx"))
        .map(|o| o.version())
        .max()
        .unwrap_or(0)
}

/// Reads and decodes `path`. Every error is one line that starts with the file's name. The
/// decoded weights are slices of the file's bytes, not copies: a large model's weights are
/// held once until a session copies them.
pub fn load(path: &Path) -> Result<OnnxModel> {
    let model = decode(path, Bytes::from(read(path)?))?;
    check_external_files(&model)?;
    Ok(model)
}

/// The file's bytes, with a one-line error that names it.
pub(super) fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).or_else(|e| {
        let what = match e.kind() {
            std::io::ErrorKind::NotFound => "file not found".to_string(),
            _ if path.is_dir() => "is a directory, not a file".to_string(),
            _ => format!("cannot read: {e}"),
        };
        bail!("ONNX model {}: {what}", path.display())
    })
}

/// A model whose weights live in external data files that are not where the model says:
/// usually the `.onnx` was moved or copied without its `.data` file. Named here with where
/// it was looked for, instead of ONNX Runtime's internal path-validation message.
pub(super) fn check_external_files(model: &OnnxModel) -> Result<()> {
    let Some(dir) = &model.external_data_dir else {
        return Ok(());
    };
    let external = model
        .graph()
        .initializer
        .iter()
        .filter(|t| t.data_location() == proto::tensor_proto::DataLocation::External);
    for tensor in external {
        let Some(location) = tensor
            .external_data
            .iter()
            .find(|e| e.key() == "location")
            .map(|e| e.value())
        else {
            continue;
        };
        let expected = dir.join(location);
        if !expected.is_file() {
            bail!(
                "ONNX model {}: its weights are stored in the external data file '{location}', \
                 which is not there (looked for {}): keep the .data file next to the .onnx when \
                 moving it, or re-save the model with its weights inside \
                 (onnx.save_model(onnx.load(PATH), OUT) when under 2 GB)",
                model.path.display(),
                expected.display()
            );
        }
    }
    Ok(())
}

/// Decodes the contents of an `.onnx` file already in memory; `path` only names the file in
/// errors and anchors external data. `load` is this plus the read, and the fuzz targets call
/// it directly so they need no file per input.
pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<OnnxModel> {
    decode(path, Bytes::copy_from_slice(bytes))
}

/// `from_bytes` over shared bytes, which the decoded weights slice instead of copying.
fn decode(path: &Path, bytes: Bytes) -> Result<OnnxModel> {
    let shown = path.display();
    if bytes.is_empty() {
        bail!("ONNX model {shown}: file is empty");
    }
    // torch.jit.save writes a zip archive; swapping the two positional arguments is the
    // commonest way to get here, so say so instead of reporting a protobuf error.
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        bail!("ONNX model {shown}: looks like a TorchScript archive (zip), not an ONNX model");
    }
    let mut proto = match proto::ModelProto::decode(bytes) {
        Ok(p) => p,
        Err(e) => bail!(
            "ONNX model {shown}: not a valid ONNX protobuf (truncated or corrupt file: {})",
            shorten_field_path(&one_line(&e.to_string()))
        ),
    };
    // Arbitrary bytes sometimes decode as a protobuf full of unknown fields; a model without
    // a graph is how that shows.
    let Some(graph) = proto.graph.as_ref() else {
        bail!("ONNX model {shown}: not an ONNX model (the protobuf has no graph)");
    };
    if graph.node.is_empty() {
        bail!("ONNX model {shown}: the graph has no nodes");
    }
    super::owned_tensors::own_all_but_weights(&mut proto);
    Ok(OnnxModel::from_proto(path, proto))
}

/// The folder holding the model file; `.` for a bare file name.
fn model_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether any tensor of the model (initializers, tensor attributes, in subgraphs too) keeps
/// its data in an external file.
pub fn uses_external_data(model: &proto::ModelProto) -> bool {
    model.graph.as_ref().is_some_and(graph_uses_external_data)
}

fn graph_uses_external_data(g: &proto::GraphProto) -> bool {
    let external =
        |t: &proto::TensorProto| t.data_location() == proto::tensor_proto::DataLocation::External;
    g.initializer.iter().any(external)
        || g.sparse_initializer
            .iter()
            .any(|s| s.values.as_ref().is_some_and(external))
        || g.node.iter().flat_map(|n| &n.attribute).any(|a| {
            a.t.as_ref().is_some_and(external)
                || a.tensors.iter().any(external)
                || a.g.as_ref().is_some_and(graph_uses_external_data)
                || a.graphs.iter().any(graph_uses_external_data)
        })
}

/// prost names every enclosing field of a decode error, innermost first; for deeply nested
/// subgraphs that is a hundred fields. Keeps the innermost few and the reason.
fn shorten_field_path(message: &str) -> String {
    let parts: Vec<&str> = message.split(": ").collect();
    if parts.len() <= 8 {
        return message.to_string();
    }
    let (head, tail) = (&parts[..4], &parts[parts.len() - 2..]);
    format!("{}: ...: {}", head.join(": "), tail.join(": "))
}

/// Collapses the whitespace (newlines included) of a foreign message so errors stay on one
/// line.
pub(crate) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_model() -> proto::ModelProto {
        proto::ModelProto {
            ir_version: Some(9),
            opset_import: vec![proto::OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(17),
            }],
            graph: Some(proto::GraphProto {
                node: vec![proto::NodeProto {
                    op_type: Some("Relu".into()),
                    input: vec!["x".into()],
                    output: vec!["y".into()],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    fn err(path: &Path) -> String {
        let e = load(path).unwrap_err().to_string();
        assert!(!e.contains('\n'), "error must be one line: {e}");
        assert!(
            e.contains(&path.display().to_string()),
            "error names the file: {e}"
        );
        e
    }

    #[test]
    fn loads_a_valid_model_and_reads_opset() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "m.onnx", &tiny_model().encode_to_vec());
        let m = load(&p).unwrap();
        assert_eq!(m.opset(), 17);
        assert_eq!(m.graph().node.len(), 1);
        assert!(m.external_data_dir.is_none());
    }

    #[test]
    fn every_broken_file_gets_a_one_line_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.onnx");
        assert!(err(&missing).contains("file not found"));
        assert!(err(&write(dir.path(), "empty.onnx", b"")).contains("file is empty"));
        let zip = write(dir.path(), "model.pt", b"PK\x03\x04rest-of-archive");
        assert!(err(&zip).contains("looks like a TorchScript archive (zip)"));
        let full = tiny_model().encode_to_vec();
        let cut = write(dir.path(), "cut.onnx", &full[..full.len() - 3]);
        assert!(err(&cut).contains("not a valid ONNX protobuf"));
        let junk = write(dir.path(), "junk.onnx", &[0xff; 64]);
        assert!(err(&junk).contains("ONNX"));
        let mut no_nodes = tiny_model();
        no_nodes.graph.as_mut().unwrap().node.clear();
        let p = write(dir.path(), "nonodes.onnx", &no_nodes.encode_to_vec());
        assert!(err(&p).contains("no nodes"));
        let mut no_graph = tiny_model();
        no_graph.graph = None;
        let p = write(dir.path(), "nograph.onnx", &no_graph.encode_to_vec());
        assert!(err(&p).contains("no graph"));
        assert!(err(dir.path()).contains("directory"));
    }

    #[test]
    fn external_data_remembers_the_models_folder() {
        let mut m = tiny_model();
        m.graph
            .as_mut()
            .unwrap()
            .initializer
            .push(proto::TensorProto {
                name: Some("w".into()),
                data_location: Some(proto::tensor_proto::DataLocation::External as i32),
                ..Default::default()
            });
        let om = OnnxModel::from_proto("/some/dir/m.onnx", m.clone());
        assert_eq!(om.external_data_dir, Some(PathBuf::from("/some/dir")));
        let om = OnnxModel::from_proto("m.onnx", m);
        assert_eq!(om.external_data_dir, Some(PathBuf::from(".")));
    }
}

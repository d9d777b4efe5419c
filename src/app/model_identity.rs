//! What a model file is, in the few lines `align-check inspect` prints before its value
//! listing: the format and its version, whether it runs in training mode, and for ONNX the
//! producer, opset, exporter and external data. It answers "is this the file I think it is?"
//! before any question about values.

use crate::onnx::proto::tensor_proto::DataLocation;
use crate::onnx::OnnxModel;
use crate::torch::TorchModel;
use std::fmt::Write;

/// Metadata key prefix the dynamo exporter writes on every node it makes.
const DYNAMO_METADATA: &str = "pkg.torch.onnx";

pub fn torchscript(model: &TorchModel) -> String {
    let mut out = String::new();
    let version = crate::torch::format_version(&model.path)
        .map(|v| format!("file format version {v}"))
        .unwrap_or_else(|| "no file format version recorded".to_string());
    let format = crate::torch::exported_format(&model.path)
        .unwrap_or_else(|| format!("TorchScript archive, {version}"));
    let _ = writeln!(out, "file: {format}");
    let saved = if model.saved_training() {
        "root module saved in training mode (align-check switches it to eval)"
    } else {
        "root module saved in eval mode"
    };
    let graph = model
        .training_mode()
        .unwrap_or_else(|| "no op fixed in training mode".to_string());
    let _ = writeln!(out, "training: {saved}; {graph}");
    out
}

pub fn onnx(model: &OnnxModel) -> String {
    let mut out = String::new();
    let proto = &model.proto;
    let opsets: Vec<String> = proto
        .opset_import
        .iter()
        .map(|o| match o.domain() {
            "" | "ai.onnx" => format!("ai.onnx {}", o.version()),
            domain => format!("{domain} {}", o.version()),
        })
        .collect();
    let _ = writeln!(
        out,
        "file: ONNX model, IR version {}, opset {}",
        proto.ir_version(),
        opsets.join(", ")
    );
    let _ = writeln!(
        out,
        "producer: {} {}; exporter: {}",
        or_unknown(proto.producer_name()),
        proto.producer_version(),
        exporter(model)
    );
    let _ = writeln!(out, "external data: {}", external_data(model));
    let training = crate::onnx::training::training_mode(model)
        .unwrap_or_else(|| "no node runs in training mode".to_string());
    let _ = writeln!(out, "training: {training}");
    out
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() {
        "(none recorded)"
    } else {
        s
    }
}

/// Which PyTorch exporter wrote the graph: dynamo marks every node with its metadata, the
/// legacy exporter names nodes after their module path (`/layer1/conv/Conv`).
fn exporter(model: &OnnxModel) -> String {
    let graph = model.graph();
    let dynamo = graph.node.iter().any(|n| {
        n.metadata_props
            .iter()
            .any(|p| p.key().starts_with(DYNAMO_METADATA))
    });
    if dynamo {
        "dynamo (torch.onnx.export(..., dynamo=True))".to_string()
    } else if model.proto.producer_name() == "pytorch" {
        "legacy TorchScript-based (torch.onnx.export(..., dynamo=False))".to_string()
    } else {
        "not PyTorch's own (or rewritten since): scopes come from node names".to_string()
    }
}

/// The external data files the initializers point at, and whether each is where the model
/// says.
fn external_data(model: &OnnxModel) -> String {
    let Some(dir) = &model.external_data_dir else {
        return "none (weights inside the .onnx file)".to_string();
    };
    let mut files: Vec<(String, usize)> = Vec::new();
    let external = model
        .graph()
        .initializer
        .iter()
        .filter(|t| t.data_location() == DataLocation::External);
    for tensor in external {
        let location = tensor
            .external_data
            .iter()
            .find(|e| e.key() == "location")
            .map(|e| e.value().to_string())
            .unwrap_or_default();
        match files.iter_mut().find(|(f, _)| *f == location) {
            Some((_, n)) => *n += 1,
            None => files.push((location, 1)),
        }
    }
    let described: Vec<String> = files
        .iter()
        .map(|(file, n)| {
            let found = if dir.join(file).is_file() {
                "found"
            } else {
                "MISSING"
            };
            format!("{n} tensor(s) in {} ({found})", dir.join(file).display())
        })
        .collect();
    described.join(", ")
}

//! Moving a model's weights out of the protobuf into a temporary external-data file.
//!
//! Under a memory budget the ONNX side runs several sessions, each exposing one group of
//! values (ONNX Runtime keeps every graph output of a run alive until the run ends, fetched
//! or not, so exposing everything at once would hold all activations). Building a session
//! per group from a model whose weights are inline would need a serialised copy of the
//! weights each time; with the weights in an external-data file the protobuf shrinks to the
//! graph's structure, and each session reads the weights from the file.
//!
//! The file lives in a temporary folder that is removed with the runner; nothing is written
//! next to the user's model. Models that already keep their weights in external files are
//! left as they are (their tensors are already outside the protobuf).

use super::proto::{tensor_proto::DataLocation, ModelProto, StringStringEntryProto};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

/// Name of the weights file inside the temporary folder.
const WEIGHTS_FILE: &str = "weights.bin";
/// Tensors smaller than this stay inline: not worth a file read each.
const MIN_EXTERNAL_BYTES: usize = 1024;
/// Offsets are page-aligned so that ONNX Runtime can map the file instead of copying it.
const ALIGN: u64 = 4096;

/// Writes the inline raw data of `model`'s initializers to `dir/weights.bin` and points the
/// initializers at it. Returns the bytes moved.
pub fn externalize(model: &mut ModelProto, dir: &Path) -> Result<u64> {
    let Some(graph) = model.graph.as_mut() else {
        return Ok(0);
    };
    let path = dir.join(WEIGHTS_FILE);
    let file = std::fs::File::create(&path)
        .with_context(|| format!("cannot create {} for --max-memory", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let mut offset = 0u64;
    for init in &mut graph.initializer {
        let Some(raw) = init.raw_data.as_ref() else {
            continue;
        };
        if raw.len() < MIN_EXTERNAL_BYTES {
            continue;
        }
        let padding = offset.next_multiple_of(ALIGN) - offset;
        out.write_all(&vec![0u8; padding as usize])?;
        offset += padding;
        out.write_all(raw)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let entry = |k: &str, v: String| StringStringEntryProto {
            key: Some(k.to_string()),
            value: Some(v),
        };
        init.external_data = vec![
            entry("location", WEIGHTS_FILE.to_string()),
            entry("offset", offset.to_string()),
            entry("length", raw.len().to_string()),
        ];
        offset += raw.len() as u64;
        init.raw_data = None;
        init.data_location = Some(DataLocation::External as i32);
    }
    out.flush()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(offset)
}

/// Reads the external data of `model`'s initializers (relative to `dir`) into the protobuf,
/// so that the model stands alone: a repro bundle's segment holds a few of a large model's
/// weights and must not point at files that stay behind.
pub fn inline_external(model: &mut ModelProto, dir: &Path) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let Some(graph) = model.graph.as_mut() else {
        return Ok(());
    };
    for init in &mut graph.initializer {
        if init.data_location != Some(DataLocation::External as i32) {
            continue;
        }
        let field = |key: &str| {
            init.external_data
                .iter()
                .find(|e| e.key() == key)
                .map(|e| e.value().to_string())
        };
        let location = field("location").unwrap_or_default();
        let offset: u64 = field("offset").and_then(|v| v.parse().ok()).unwrap_or(0);
        let path = dir.join(&location);
        let mut file = std::fs::File::open(&path)
            .with_context(|| format!("cannot read external weights {}", path.display()))?;
        let mut raw = Vec::new();
        file.seek(SeekFrom::Start(offset))?;
        match field("length").and_then(|v| v.parse::<u64>().ok()) {
            Some(length) => file.take(length).read_to_end(&mut raw)?,
            None => file.read_to_end(&mut raw)?,
        };
        init.raw_data = Some(raw.into());
        init.external_data.clear();
        init.data_location = Some(DataLocation::Default as i32);
    }
    Ok(())
}

//! Reading the zip archive `torch.export.save` writes (the PT2 archive; its layout is
//! libtorch's `torch/csrc/export/pt2_archive_constants.h`): one folder holding
//! `archive_format` (`pt2`), `archive_version`, `models/<name>.json` (the program in the export
//! serialization schema), `data/weights/` and `data/constants/` (raw tensor bytes, described by
//! `<name>_weights_config.json` and `<name>_constants_config.json`) and
//! `data/sample_inputs/<name>.pt`.
//!
//! What it cannot read it refuses in one line that says what the file is and what to save
//! instead: an archive version newer than the one this reader knows, an archive holding only
//! an AOTInductor-compiled model (no graph), a schema major version it was not written for,
//! pickled tensors (tensor subclasses).

use super::graph::{Model, SCHEMA_MAJOR};
use super::keywords::keyword_order;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use tch::{Kind, Tensor};

/// The PT2 archive version this reader knows (`ARCHIVE_VERSION_VALUE`).
const ARCHIVE_VERSION: u64 = 0;

/// How to write the file this reader takes, for refusals.
const SAVE: &str =
    "save the program itself with torch.export.save(torch.export.export(model.eval(), \
                    example_inputs), \"model.pt2\") (or scripts/export_pair.py --pt2)";

/// A read archive: the program, and every weight and constant by the name the program's
/// signature stores it under (`conv1.weight`, `lifted_tensor_0`).
pub struct Archive {
    pub model: Model,
    pub tensors: HashMap<String, Tensor>,
    /// libtorch's name of the first floating-point parameter's element type (`Float`).
    pub parameter_dtype: String,
    /// Each stored tensor's name with where its bytes are (file, offset, sizes, strides): two
    /// names of one tensor (a module held under two attributes) have the same.
    pub storage: HashMap<String, String>,
}

/// Whether the zip at `path` is a PT2 archive: it has an `archive_format` entry at its root
/// folder.
pub fn is_archive(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let Ok(zip) = zip::ZipArchive::new(file) else {
        return false;
    };
    let names: Vec<&str> = zip.file_names().collect();
    root_of(&names).is_some()
}

/// What the archive at `path` is, in words, when it is a PT2 archive: its format and
/// version, for `inspect`.
pub fn format_line(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let zip = zip::ZipArchive::new(file).ok()?;
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let root = root_of(&refs)?;
    let mut zip = Zip { zip, root, names };
    let version = zip.text("archive_version").unwrap_or_else(|_| "0".into());
    Some(format!(
        "torch.export archive (.pt2), PT2 archive version {}",
        version.trim()
    ))
}

/// The archive's sample inputs: the bytes of `data/sample_inputs/<model>.pt` (the
/// `(args, kwargs)` torch.export.export was given, as torch.save writes them), that entry's
/// name, and the order the program takes the keyword arguments in; `None` when the archive
/// holds none.
pub struct SampleInputs {
    pub entry: String,
    pub bytes: Vec<u8>,
    pub keywords: Vec<String>,
}

pub fn sample_input_bytes(path: &Path) -> Result<Option<SampleInputs>> {
    let file = std::fs::File::open(path).map_err(|e| anyhow!("cannot open it: {e}"))?;
    let zip = zip::ZipArchive::new(file).map_err(|e| anyhow!("not a readable zip: {e}"))?;
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let root = root_of(&refs).ok_or_else(|| anyhow!("not a PT2 archive (no archive_format)"))?;
    let mut zip = Zip { zip, root, names };
    let model_name = model_name(&zip)?;
    let entry = format!("data/sample_inputs/{model_name}.pt");
    if !zip.has_under(&entry) {
        return Ok(None);
    }
    let bytes = zip.bytes(&entry)?;
    let model: Model = serde_json::from_str(&zip.text(&format!("models/{model_name}.json"))?)
        .with_context(|| format!("models/{model_name}.json is not an exported program"))?;
    let root_call = (model.graph_module.module_call_graph.iter()).find(|c| c.fqn.is_empty());
    let keywords = root_call
        .and_then(|c| c.signature.as_ref())
        .map(|s| keyword_order(&s.in_spec))
        .unwrap_or_default();
    Ok(Some(SampleInputs {
        entry,
        bytes,
        keywords,
    }))
}

/// The folder the archive's entries sit in (`model/`), found by its `archive_format` entry.
fn root_of(names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| {
        let root = n.strip_suffix("archive_format")?;
        (root.is_empty() || root.ends_with('/') && !root[..root.len() - 1].contains('/'))
            .then(|| root.to_string())
    })
}

struct Zip {
    zip: zip::ZipArchive<std::fs::File>,
    root: String,
    names: Vec<String>,
}

impl Zip {
    fn bytes(&mut self, entry: &str) -> Result<Vec<u8>> {
        let name = format!("{}{entry}", self.root);
        let mut file = self
            .zip
            .by_name(&name)
            .map_err(|_| anyhow!("the archive has no entry {name}"))?;
        let mut out = Vec::with_capacity(file.size() as usize);
        file.read_to_end(&mut out)
            .with_context(|| format!("reading {name}"))?;
        Ok(out)
    }

    fn text(&mut self, entry: &str) -> Result<String> {
        String::from_utf8(self.bytes(entry)?).map_err(|_| anyhow!("{entry} is not UTF-8 text"))
    }

    fn has_under(&self, folder: &str) -> bool {
        let prefix = format!("{}{folder}", self.root);
        self.names.iter().any(|n| n.starts_with(&prefix))
    }
}

/// Reads the archive at `path`: its first model (`model` when there are several) with its
/// weights and constants.
pub fn read(path: &Path) -> Result<Archive> {
    let file = std::fs::File::open(path).map_err(|e| anyhow!("cannot open it: {e}"))?;
    let zip = zip::ZipArchive::new(file).map_err(|e| anyhow!("not a readable zip: {e}"))?;
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let root = root_of(&refs).ok_or_else(|| anyhow!("not a PT2 archive (no archive_format)"))?;
    let mut zip = Zip { zip, root, names };
    check_version(&mut zip)?;
    let model_name = model_name(&zip)?;
    let model: Model = serde_json::from_str(&zip.text(&format!("models/{model_name}.json"))?)
        .with_context(|| format!("models/{model_name}.json is not an exported program"))?;
    if let Some(v) = &model.schema_version {
        if v.major > SCHEMA_MAJOR {
            bail!(
                "its program is in export schema version {}.{} (written by torch {}), newer than \
                 the {SCHEMA_MAJOR}.x this reader knows: {SAVE} with the torch version \
                 scripts/requirements.txt pins",
                v.major,
                v.minor,
                model.torch_version
            );
        }
    }
    let mut stored = Stored::default();
    let weights = payloads(
        &mut zip,
        "data/weights/",
        &model_name,
        "weights",
        &mut stored,
    )?;
    payloads(
        &mut zip,
        "data/constants/",
        &model_name,
        "constants",
        &mut stored,
    )?;
    Ok(Archive {
        model,
        tensors: stored.tensors,
        parameter_dtype: weights,
        storage: stored.storage,
    })
}

fn check_version(zip: &mut Zip) -> Result<()> {
    let format = zip.text("archive_format")?;
    if format.trim() != "pt2" {
        bail!("its archive_format is {:?}, not pt2", format.trim());
    }
    let version = zip.text("archive_version").unwrap_or_else(|_| "0".into());
    match version.trim().parse::<u64>() {
        Ok(v) if v == ARCHIVE_VERSION => Ok(()),
        _ => bail!(
            "it is a PT2 archive of version {}, newer than the version {ARCHIVE_VERSION} this \
             reader knows: {SAVE} with the torch version scripts/requirements.txt pins",
            version.trim()
        ),
    }
}

/// The model the archive holds a graph for; an archive with only AOTInductor's compiled
/// artifacts has none.
fn model_name(zip: &Zip) -> Result<String> {
    let prefix = format!("{}models/", zip.root);
    let mut models: Vec<String> = zip
        .names
        .iter()
        .filter_map(|n| n.strip_prefix(&prefix)?.strip_suffix(".json"))
        .filter(|n| !n.contains('/'))
        .map(str::to_string)
        .collect();
    models.sort();
    if models.is_empty() {
        if zip.has_under("data/aotinductor/") {
            bail!(
                "this .pt2 holds only an AOTInductor-compiled model (written by \
                 torch._inductor.aoti_compile_and_package), which keeps no graph to compare: \
                 {SAVE}"
            );
        }
        bail!("the archive holds no program (no models/<name>.json): {SAVE}");
    }
    Ok(if models.iter().any(|m| m == "model") {
        "model".to_string()
    } else {
        models.remove(0)
    })
}

/// The tensors read so far and where each one's bytes are, by stored name.
#[derive(Default)]
struct Stored {
    tensors: HashMap<String, Tensor>,
    storage: HashMap<String, String>,
}

/// Reads the tensors a payload config describes into `out` (by the name the program stores
/// them under); returns the element type of the first floating-point parameter.
fn payloads(
    zip: &mut Zip,
    folder: &str,
    model: &str,
    what: &str,
    out: &mut Stored,
) -> Result<String> {
    let config_entry = format!("{folder}{model}_{what}_config.json");
    if !zip.has_under(&config_entry) {
        return Ok(String::new());
    }
    let config: Value = serde_json::from_str(&zip.text(&config_entry)?)
        .with_context(|| format!("{config_entry} is not JSON"))?;
    let empty = serde_json::Map::new();
    let entries = config
        .get("config")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    // Tensors sharing storage share one file: each file is read once, as flat bytes.
    let mut files: HashMap<String, Tensor> = HashMap::new();
    let mut parameter_dtype = String::new();
    for (name, meta) in entries {
        if meta.get("use_pickle").and_then(Value::as_bool) == Some(true) {
            bail!(
                "its {what} entry {name} is a pickled tensor (a tensor subclass), which this \
                 reader does not read: export the module with plain tensors"
            );
        }
        let tensor_meta = meta.get("tensor_meta").unwrap_or(&Value::Null);
        let kind = kind_of(
            tensor_meta
                .get("dtype")
                .and_then(Value::as_i64)
                .unwrap_or(0),
        )
        .ok_or_else(|| anyhow!("{what} entry {name} has an element type this reader lacks"))?;
        let path_name = meta.get("path_name").and_then(Value::as_str).unwrap_or("");
        if !files.contains_key(path_name) {
            let bytes = zip.bytes(&format!("{folder}{path_name}"))?;
            let element = kind.elt_size_in_bytes();
            let flat = Tensor::f_from_data_size(&bytes, &[(bytes.len() / element) as i64], kind)?;
            files.insert(path_name.to_string(), flat);
        }
        let ints = |field: &str| -> Vec<i64> {
            let list = tensor_meta.get(field).and_then(Value::as_array);
            list.map(|l| l.iter().filter_map(sym_int).collect())
                .unwrap_or_default()
        };
        let offset = tensor_meta.get("storage_offset").and_then(sym_int);
        let (sizes, strides) = (ints("sizes"), ints("strides"));
        out.storage.insert(
            name.clone(),
            format!("{folder}{path_name}@{offset:?}:{sizes:?}:{strides:?}"),
        );
        let tensor = files[path_name]
            .f_as_strided(sizes, strides, offset)
            .with_context(|| format!("{what} entry {name}"))?;
        // Each tensor is what ep.module() holds: not a view (torch.export.load wraps the view
        // in an nn.Parameter, which detaches it) and with the archive's requires_grad flag.
        // Kernels choose their path by both even under no_grad (a linear on a 3-D input that
        // is not contiguous folds it into one mm only for such a weight), and another path
        // sums in another order.
        let requires_grad = tensor_meta.get("requires_grad").and_then(Value::as_bool);
        let tensor = tensor
            .detach()
            .set_requires_grad(requires_grad == Some(true));
        let is_param = meta.get("is_param").and_then(Value::as_bool) == Some(true);
        if is_param && parameter_dtype.is_empty() && tensor.is_floating_point() {
            parameter_dtype = libtorch_name(kind).to_string();
        }
        out.tensors.insert(name.clone(), tensor);
    }
    Ok(parameter_dtype)
}

/// The integer of a `{"as_int": n}` (a size, stride or storage offset).
fn sym_int(v: &Value) -> Option<i64> {
    v.get("as_int").and_then(Value::as_i64)
}

/// The tch element kind of the schema's `ScalarType` number.
pub fn kind_of(scalar_type: i64) -> Option<Kind> {
    Some(match scalar_type {
        1 => Kind::Uint8,
        2 => Kind::Int8,
        3 => Kind::Int16,
        4 => Kind::Int,
        5 => Kind::Int64,
        6 => Kind::Half,
        7 => Kind::Float,
        8 => Kind::Double,
        9 => Kind::ComplexHalf,
        10 => Kind::ComplexFloat,
        11 => Kind::ComplexDouble,
        12 => Kind::Bool,
        13 => Kind::BFloat16,
        _ => return None,
    })
}

fn libtorch_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Half => "Half",
        Kind::BFloat16 => "BFloat16",
        Kind::Double => "Double",
        _ => "Float",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_folder_is_where_archive_format_is() {
        assert_eq!(
            root_of(&["m/models/model.json", "m/archive_format"]),
            Some("m/".into())
        );
        assert_eq!(root_of(&["archive_format"]), Some(String::new()));
        assert_eq!(root_of(&["m/data/x/archive_format"]), None);
        assert_eq!(root_of(&["m/code/m.py", "m/constants.pkl"]), None);
    }

    /// A zip at a temporary path with the given entries.
    fn zip_of(entries: &[(&str, &str)]) -> tempfile::TempPath {
        use std::io::Write;
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut zip = zip::ZipWriter::new(file.reopen().unwrap());
        for (name, text) in entries {
            zip.start_file(*name, zip::write::FileOptions::default())
                .unwrap();
            zip.write_all(text.as_bytes()).unwrap();
        }
        zip.finish().unwrap();
        file.into_temp_path()
    }

    fn refusal(entries: &[(&str, &str)]) -> String {
        let path = zip_of(entries);
        assert!(is_archive(&path));
        match read(&path) {
            Ok(_) => panic!("read an archive it should refuse"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn newer_archives_and_compiled_only_archives_are_refused_in_one_line() {
        let newer = refusal(&[("m/archive_format", "pt2"), ("m/archive_version", "1")]);
        assert!(newer.contains("version 1, newer"), "{newer}");
        let compiled = refusal(&[
            ("m/archive_format", "pt2"),
            ("m/archive_version", "0"),
            ("m/data/aotinductor/model/model.so", ""),
        ]);
        assert!(
            compiled.contains("only an AOTInductor-compiled model"),
            "{compiled}"
        );
        assert!(compiled.contains("torch.export.save("), "{compiled}");
        let schema = refusal(&[
            ("m/archive_format", "pt2"),
            ("m/archive_version", "0"),
            (
                "m/models/model.json",
                r#"{"graph_module": {"graph": {"nodes": []}, "signature": {"input_specs": [],
                   "output_specs": []}}, "schema_version": {"major": 99, "minor": 0}}"#,
            ),
        ]);
        assert!(schema.contains("schema version 99.0"), "{schema}");
        for message in [newer, compiled, schema] {
            assert_eq!(message.lines().count(), 1, "{message}");
        }
    }
}

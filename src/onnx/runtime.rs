//! The ONNX Runtime process environment and sessions built the way a comparison needs them.
//!
//! ort is built with `load-dynamic`: the shared library is found at run time, in this order:
//! `--ort-lib`, `ORT_DYLIB_PATH`, then the library of the bootstrapped Python environment
//! recorded by build.rs. ONNX Runtime allows one environment per process, so it is created
//! once and kept for the life of the process. Capture sessions run with graph optimisation
//! disabled so that no intermediate value is fused away (`--ort-optimization` can raise it;
//! the production session is built at the user's own level and config entries), are built
//! from memory (the instrumented
//! model never touches disk), and turn ONNX Runtime's "unknown op" failures into a message
//! that says what to pass.

use super::expose::op_name;
use super::model::{one_line, OnnxModel};
use crate::onnx::session_settings::OptLevel;
use anyhow::{anyhow, bail, Result};
use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

/// The environment and the library it was loaded from; set once per process.
static ENV: OnceLock<(Environment, PathBuf)> = OnceLock::new();
/// Serialises the first initialisation (loading a library twice is not allowed).
static INIT: Mutex<()> = Mutex::new(());

/// ORT session option naming the folder external-data paths are relative to when the model
/// is loaded from memory.
const EXTERNAL_DATA_FOLDER_KEY: &str = "session.model_external_initializers_file_folder_path";

/// What to tell a user whose ONNX Runtime cannot be found.
const NOT_FOUND_HINT: &str = "pass --ort-lib /path/to/libonnxruntime.so.1.31.x, set ORT_DYLIB_PATH, or run scripts/bootstrap.sh";

/// Loads ONNX Runtime and creates the process environment. Idempotent: later calls return
/// `Ok` and keep the first library, whatever they ask for.
///
/// `threads` is accepted so that callers configure the runtime in one place; thread pools
/// are per session here (see [`session`]), so the environment itself creates none.
pub fn init(lib: Option<&Path>, threads: usize) -> Result<()> {
    let _ = threads;
    if ENV.get().is_some() {
        return Ok(());
    }
    let _guard = INIT.lock().unwrap_or_else(|e| e.into_inner());
    if ENV.get().is_some() {
        return Ok(());
    }
    let path = resolve_library(lib)?;
    let builder = ort::init_from(&path).map_err(|e| {
        anyhow!(
            "cannot load ONNX Runtime from {}: {} (align-check needs ONNX Runtime 1.31)",
            path.display(),
            one_line(&e.to_string())
        )
    })?;
    let env = builder
        .with_name("align-check")
        .with_telemetry(false)
        .build()
        .map_err(|e| {
            anyhow!(
                "cannot start ONNX Runtime from {}: {}",
                path.display(),
                one_line(&e.to_string())
            )
        })?;
    let _ = ENV.set((env, path));
    Ok(())
}

/// The library the environment was loaded from, once [`init`] has succeeded.
pub fn loaded_library() -> Option<&'static Path> {
    ENV.get().map(|(_, p)| p.as_path())
}

/// The library to load: explicit path, `ORT_DYLIB_PATH`, then the compile-time default.
fn resolve_library(lib: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = lib {
        if !p.is_file() {
            bail!(
                "ONNX Runtime library {} (from --ort-lib) does not exist",
                p.display()
            );
        }
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!(
                "ONNX Runtime library {} (from ORT_DYLIB_PATH) does not exist",
                p.display()
            );
        }
        return Ok(p);
    }
    let default = env!("ALIGN_CHECK_DEFAULT_ORT_LIB");
    if !default.is_empty() && Path::new(default).is_file() {
        return Ok(PathBuf::from(default));
    }
    bail!("ONNX Runtime library not found: {NOT_FOUND_HINT}")
}

/// The optimisation level of every capture session (`--ort-optimization`; disabled unless
/// set, so that no intermediate value is fused away). Process-wide like the environment.
static CAPTURE_LEVEL: AtomicU8 = AtomicU8::new(0);

/// Sets the level [`session`] builds capture sessions at.
pub fn set_capture_level(level: OptLevel) {
    CAPTURE_LEVEL.store(level as u8, Ordering::Relaxed);
}

/// The level capture sessions are built at.
pub fn capture_level() -> OptLevel {
    OptLevel::ALL[usize::from(CAPTURE_LEVEL.load(Ordering::Relaxed)).min(3)]
}

/// How a session is optimised and threaded, beyond what every session shares.
pub struct Tuning<'a> {
    pub level: OptLevel,
    /// Intra-op threads (0: ONNX Runtime's default).
    pub threads: usize,
    /// Session config entries (`--ort-config KEY=VALUE`).
    pub config: &'a [(String, String)],
    /// Under a memory budget: no memory pattern, the block ONNX Runtime reserves up front
    /// for every intermediate (allocation only; results are the same).
    pub lean: bool,
}

fn ort_level(level: OptLevel) -> GraphOptimizationLevel {
    match level {
        OptLevel::Disable => GraphOptimizationLevel::Disable,
        OptLevel::Basic => GraphOptimizationLevel::Level1,
        OptLevel::Extended => GraphOptimizationLevel::Level2,
        OptLevel::All => GraphOptimizationLevel::All,
    }
}

/// A capture session over `bytes` (the serialised form of `model`, possibly instrumented),
/// at the capture level (optimisation disabled by default), `threads` intra-op threads (0:
/// ONNX Runtime's default), one inter-op thread, and the custom-op library if given.
/// Initialises the runtime with its defaults when [`init`] has not been called.
pub fn session(
    model: &OnnxModel,
    bytes: &[u8],
    threads: usize,
    custom_ops_lib: Option<&Path>,
) -> Result<Session> {
    let tuning = Tuning {
        level: capture_level(),
        threads,
        config: &[],
        lean: false,
    };
    session_tuned(model, bytes, custom_ops_lib, &tuning)
}

/// A session as [`session`] builds it, at `tuning`'s level, threads and config entries.
pub fn session_tuned(
    model: &OnnxModel,
    bytes: &[u8],
    custom_ops_lib: Option<&Path>,
    tuning: &Tuning<'_>,
) -> Result<Session> {
    let mut builder = builder_tuned(&model.path, custom_ops_lib, tuning)?;
    if let Some(dir) = &model.external_data_dir {
        builder = builder
            .with_config_entry(EXTERNAL_DATA_FOLDER_KEY, dir.to_string_lossy())
            .map_err(|e| {
                anyhow!(
                    "ONNX Runtime session options for {}: {e}",
                    model.path.display()
                )
            })?;
    }
    builder
        .commit_from_memory(bytes)
        .map_err(|e| anyhow!(explain_session_error(model, &e.to_string(), custom_ops_lib)))
}

/// A session of the file at `path` exactly as saved, as [`session_tuned`] builds it. ONNX
/// Runtime reads the file itself (external data next to it included), so the file is
/// never held whole in this process. A failure is explained from the model decoded then.
pub fn session_tuned_from_file(
    path: &Path,
    custom_ops_lib: Option<&Path>,
    tuning: &Tuning<'_>,
) -> Result<Session> {
    builder_tuned(path, custom_ops_lib, tuning)?
        .commit_from_file(path)
        .map_err(|e| match super::model_without_weights::load(path) {
            Ok(model) => anyhow!(explain_session_error(
                &model,
                &e.to_string(),
                custom_ops_lib
            )),
            Err(unreadable) => unreadable,
        })
}

/// The session builder both constructors share: `tuning`'s level, threads and config
/// entries, no arena, the custom-op library. `path` names the model in messages.
fn builder_tuned(
    path: &Path,
    custom_ops_lib: Option<&Path>,
    tuning: &Tuning<'_>,
) -> Result<ort::session::builder::SessionBuilder> {
    init(None, tuning.threads)?;
    let (env, _) = ENV.get().expect("initialised above");
    let shown = path.display();
    let opt = |e: ort::Error<_>| anyhow!("ONNX Runtime session options for {shown}: {e}");

    let mut builder = Session::builder(env)
        .map_err(|e| anyhow!("ONNX Runtime session for {shown}: {e}"))?
        .with_optimization_level(ort_level(tuning.level))
        .map_err(opt)?
        .with_intra_threads(tuning.threads)
        .map_err(opt)?
        .with_inter_threads(1)
        .map_err(opt)?
        .with_memory_pattern(!tuning.lean)
        .map_err(opt)?
        // No arena: freed outputs go back to the allocator (and large ones to the OS) instead
        // of staying reserved by the session, which matters when every value is an output.
        .with_execution_providers([ort::ep::CPU::default().with_arena_allocator(false).build()])
        .map_err(opt)?;
    for (key, value) in tuning.config {
        builder = builder.with_config_entry(key, value).map_err(|e| {
            anyhow!(
                "ONNX Runtime refused session config entry {key}={value}: {}",
                one_line(&e.to_string())
            )
        })?;
    }
    if let Some(lib) = custom_ops_lib {
        builder = builder.with_operator_library(lib).map_err(|e| {
            let msg = one_line(&e.to_string());
            // A library that loads but lacks the entry point is usually the wrong one of a
            // pair (the TorchScript op library, say).
            let hint = if msg.contains("RegisterCustomOps") {
                " (an ONNX Runtime custom-op library exports RegisterCustomOps)"
            } else {
                ""
            };
            anyhow!(
                "--ort-custom-ops {}: cannot load the library: {msg}{hint}",
                lib.display()
            )
        })?;
    }
    Ok(builder)
}

/// ONNX Runtime's session-creation failure, rephrased when it is about an op it does not
/// know (a custom op without its library is the usual cause).
pub fn explain_session_error(
    model: &OnnxModel,
    ort_message: &str,
    custom_ops_lib: Option<&Path>,
) -> String {
    let msg = tidy_message(ort_message);
    let shown = model.path.display();
    let unknown_op = [
        "is not a registered function/op",
        "No opset import for domain",
        "No Op registered for",
        "Could not find an implementation for",
    ]
    .iter()
    .any(|p| msg.contains(p));
    if let Some(supported) = msg
        .split("Current official support for domain ai.onnx is till opset ")
        .nth(1)
    {
        // Said after a C++ signature and a paragraph about released opsets: the two numbers
        // are what the user needs.
        let supported = supported.trim_end_matches('.').trim();
        return format!(
            "ONNX Runtime cannot load {shown}: it imports ai.onnx opset {}, but this ONNX Runtime supports ai.onnx up to opset {supported}: export again with torch.onnx.export(..., opset_version={supported}) or lower",
            model.opset(),
        );
    }
    if let Some((file, supported)) = ir_versions(&msg) {
        return format!(
            "ONNX Runtime cannot load {shown}: it is ONNX IR version {file}, but this ONNX Runtime reads IR versions up to {supported}: save it with the onnx package that matches onnxruntime (scripts/requirements.txt pins both) or convert it with onnx.version_converter"
        );
    }
    if !unknown_op {
        return format!("ONNX Runtime cannot load {shown}: {msg}");
    }
    let op = op_from_message(&msg)
        .or_else(|| custom_ops(model).into_iter().next())
        .unwrap_or_else(|| "an op".to_string());
    // A standard op without a kernel is a precision the CPU provider lacks (bfloat16 Gemm),
    // not a custom op: say which element type.
    if msg.contains("Could not find an implementation for") {
        if let Some(dtype) = kernel_dtype(model, &msg) {
            return format!("ONNX Runtime's CPU provider has no {dtype} kernel for op `{op}` used by {shown}: export the model in a precision it supports (float32 or float16 for most ops) (ONNX Runtime said: {msg})");
        }
    }
    let hint = match custom_ops_lib {
        None => "if it is a custom op, pass --ort-custom-ops LIB with the library that implements it".to_string(),
        Some(lib) => format!(
            "the custom-op library {} does not provide it; pass the library that does with --ort-custom-ops LIB",
            lib.display()
        ),
    };
    format!("ONNX Runtime has no implementation of op `{op}` used by {shown}: {hint} (ONNX Runtime said: {msg})")
}

/// The two numbers of ONNX Runtime's "Unsupported model IR version: 99, max supported IR
/// version: 13": the file's IR version and the newest this runtime reads.
fn ir_versions(msg: &str) -> Option<(&str, &str)> {
    let number_after = |marker: &str| -> Option<&str> {
        let rest = msg.split(marker).nth(1)?;
        let n = rest.split(|c: char| !c.is_ascii_digit()).next()?;
        (!n.is_empty()).then_some(n)
    };
    Some((
        number_after("Unsupported model IR version: ")?,
        number_after("max supported IR version: ")?,
    ))
}

/// The element type of the node ONNX Runtime names in "... node with name 'X'" (its first
/// input whose type the graph states), when that node is a standard (default-domain) op.
fn kernel_dtype(model: &OnnxModel, msg: &str) -> Option<String> {
    let name = msg.split("node with name '").nth(1)?.split('\'').next()?;
    let graph = model.graph();
    let node = graph.node.iter().find(|n| n.name() == name)?;
    if !matches!(node.domain(), "" | "ai.onnx") {
        return None;
    }
    let type_of = |input: &String| {
        graph
            .input
            .iter()
            .chain(&graph.value_info)
            .chain(&graph.output)
            .filter(|v| v.name() == input)
            .find_map(|v| match v.r#type.as_ref()?.value.as_ref()? {
                super::proto::type_proto::Value::TensorType(t) => t.elem_type,
                _ => None,
            })
            .or_else(|| {
                graph
                    .initializer
                    .iter()
                    .find(|t| t.name() == input)
                    .and_then(|t| t.data_type)
            })
    };
    let elem = node.input.iter().find_map(type_of)?;
    Some(match super::signature::dtype_from_onnx(elem) {
        Some(d) => d.name().to_string(),
        None => super::signature::onnx_type_name(elem),
    })
}

/// ONNX Runtime's message on one line, without the C++ source location and function
/// signature it sometimes starts with (`/onnxruntime_src/onnxruntime/core/graph/model.cc:256
/// onnxruntime::Model::Model(onnx::ModelProto&&, ...) Unsupported model IR version: 14`):
/// they say nothing to a user.
pub(crate) fn tidy_message(ort_message: &str) -> String {
    let msg = one_line(ort_message);
    let Some(pos) = msg
        .find("/onnxruntime_src/")
        .or_else(|| msg.find("onnxruntime/core/"))
    else {
        return msg;
    };
    // Keep what precedes the location, e.g. "Load model from memory failed:".
    let prefix = msg[..pos].trim_end();
    let mut rest = &msg[pos..];
    // "<file>:<line> "
    let Some((loc, after)) = rest.split_once(' ') else {
        return msg;
    };
    if !loc
        .rsplit(':')
        .next()
        .is_some_and(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_digit()))
    {
        return msg;
    }
    rest = after;
    // "<qualified::function>(<args>) " when present.
    let head = rest.split(' ').next().unwrap_or("");
    if head.contains("::") && head.contains('(') {
        let mut depth = 0usize;
        for (i, c) in rest.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        rest = rest[i + 1..].trim_start();
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    if prefix.is_empty() {
        rest.to_string()
    } else {
        format!("{prefix} {rest}")
    }
}

/// Finds the op a message is about, written `domain::Op` (or `Op` for the default domain).
fn op_from_message(msg: &str) -> Option<String> {
    // "Fatal error: custom.ops:MyAdd(-1) is not a registered function/op"
    if let Some(before) = msg
        .split(" is not a registered function/op")
        .next()
        .filter(|b| b.len() < msg.len())
    {
        let token = before.rsplit(' ').next()?;
        let token = token.split('(').next()?;
        return Some(match token.rsplit_once(':') {
            Some((d, op)) if !d.is_empty() => format!("{d}::{op}"),
            Some((_, op)) => op.to_string(),
            None => token.to_string(),
        });
    }
    // "Could not find an implementation for MyOp(1) node with name 'n'"
    // "No Op registered for MyOp with domain_version of 17"
    for prefix in [
        "Could not find an implementation for ",
        "No Op registered for ",
    ] {
        if let Some((_, rest)) = msg.split_once(prefix) {
            let op: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.' || *c == ':')
                .collect();
            if !op.is_empty() {
                return Some(op);
            }
        }
    }
    None
}

/// Ops of the model outside the domains ONNX Runtime implements itself.
pub fn custom_ops(model: &OnnxModel) -> Vec<String> {
    const BUILTIN: [&str; 6] = [
        "",
        "ai.onnx",
        "ai.onnx.ml",
        "com.microsoft",
        "com.microsoft.nchwc",
        "ai.onnx.preview.training",
    ];
    let mut ops: Vec<String> = Vec::new();
    for node in model
        .graph()
        .node
        .iter()
        .filter(|n| !BUILTIN.contains(&n.domain()))
    {
        let op = op_name(node);
        if !ops.contains(&op) {
            ops.push(op);
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::proto;

    fn model_with_custom_op() -> OnnxModel {
        let node = proto::NodeProto {
            name: Some("n".into()),
            op_type: Some("MyAdd".into()),
            domain: Some("custom.ops".into()),
            ..Default::default()
        };
        OnnxModel::from_proto(
            "dir/m.onnx",
            proto::ModelProto {
                graph: Some(proto::GraphProto {
                    node: vec![node],
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
    }

    #[test]
    fn unknown_op_messages_name_the_op_and_the_flag() {
        let m = model_with_custom_op();
        let e = explain_session_error(
            &m,
            "Load model from memory failed:Fatal error: custom.ops:MyAdd(-1) is not a registered function/op",
            None,
        );
        assert!(
            e.contains("`custom.ops::MyAdd`") && e.contains("--ort-custom-ops LIB"),
            "{e}"
        );
        assert!(e.contains("dir/m.onnx"), "{e}");
        let e = explain_session_error(
            &m,
            "This is an invalid model.\nError: No opset import for domain 'custom.ops'",
            None,
        );
        assert!(
            e.contains("`custom.ops::MyAdd`") && !e.contains('\n'),
            "{e}"
        );
        let e = explain_session_error(
            &m,
            "Could not find an implementation for Foo(13) node with name 'x'",
            None,
        );
        assert!(e.contains("`Foo`"), "{e}");
        let e = explain_session_error(&m, "something else\nentirely", None);
        assert_eq!(
            e,
            "ONNX Runtime cannot load dir/m.onnx: something else entirely"
        );
    }

    #[test]
    fn source_locations_are_stripped_from_ort_messages() {
        let raw = "/onnxruntime_src/onnxruntime/core/graph/model.cc:256 onnxruntime::Model::Model(onnx::ModelProto&&, \
                   const onnxruntime::PathString&, const onnxruntime::ModelOptions&) Unsupported model IR version: 14, \
                   max supported IR version: 13";
        assert_eq!(
            tidy_message(raw),
            "Unsupported model IR version: 14, max supported IR version: 13"
        );
        let raw = "Load model from memory failed:/onnxruntime_src/x.cc:12 void f(int) bad thing";
        assert_eq!(
            tidy_message(raw),
            "Load model from memory failed: void f(int) bad thing"
        );
        assert_eq!(tidy_message("plain\nmessage"), "plain message");
    }

    #[test]
    fn an_explicit_library_that_does_not_exist_is_named() {
        let e = resolve_library(Some(Path::new("/no/such/libonnxruntime.so")))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "ONNX Runtime library /no/such/libonnxruntime.so (from --ort-lib) does not exist"
        );
    }

    #[test]
    fn custom_ops_are_listed() {
        assert_eq!(custom_ops(&model_with_custom_op()), ["custom.ops::MyAdd"]);
    }

    #[test]
    fn missing_standard_kernel_names_the_element_type() {
        let node = proto::NodeProto {
            name: Some("/fc/Gemm".into()),
            op_type: Some("Gemm".into()),
            input: vec!["x".into(), "w".into()],
            ..Default::default()
        };
        let weight = proto::TensorProto {
            name: Some("w".into()),
            data_type: Some(proto::tensor_proto::DataType::Bfloat16 as i32),
            ..Default::default()
        };
        let graph = |input: Vec<proto::ValueInfoProto>| proto::GraphProto {
            node: vec![node.clone()],
            initializer: vec![weight.clone()],
            input,
            ..Default::default()
        };
        let x = proto::ValueInfoProto {
            name: Some("x".into()),
            r#type: Some(proto::TypeProto {
                value: Some(proto::type_proto::Value::TensorType(
                    proto::type_proto::Tensor {
                        elem_type: Some(proto::tensor_proto::DataType::Bfloat16 as i32),
                        shape: None,
                    },
                )),
                ..Default::default()
            }),
            ..Default::default()
        };
        let ort = "Could not find an implementation for Gemm(13) node with name '/fc/Gemm'";
        for g in [graph(vec![x]), graph(vec![])] {
            let m = OnnxModel::from_proto(
                "m.onnx",
                proto::ModelProto {
                    graph: Some(g),
                    ..Default::default()
                },
            );
            let e = explain_session_error(&m, ort, None);
            assert!(e.contains("bfloat16") && e.contains("`Gemm`"), "{e}");
            assert!(!e.contains("--ort-custom-ops"), "{e}");
        }
    }
}

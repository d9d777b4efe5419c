//! Process-wide runtime setup shared by every command: thread counts, extra operator
//! libraries, the ONNX Runtime environment, and the versions a report says computed it.
//!
//! Both runtimes get the same thread count so that neither side's timing is an accident of
//! its defaults. Operator libraries are opened once and kept open for the whole process:
//! libtorch registers ops when the library loads, and unloading would leave dangling kernels.

use crate::cli::config::RuntimeConfig;
use crate::onnx;
use crate::outcome::Environment;
use anyhow::{anyhow, bail, Result};
use std::sync::{Once, OnceLock};

static TORCH_OP_LIBS: OnceLock<Vec<libloading::Library>> = OnceLock::new();

static TORCH_THREADS: Once = Once::new();

pub fn init(rt: &RuntimeConfig, need_onnx: bool) -> Result<()> {
    // libtorch refuses (aborts) to change its inter-op pool once any parallel work ran, so
    // the thread counts are set exactly once per process, before the first model runs.
    TORCH_THREADS.call_once(|| {
        tch::set_num_threads(rt.threads as i32);
        tch::set_num_interop_threads(1);
    });
    if TORCH_OP_LIBS.get().is_none() {
        let mut libs = Vec::new();
        for path in &rt.torch_ops {
            // SAFETY: loading a user-named operator library runs its static initialisers,
            // which is the documented way TorchScript custom ops register themselves.
            let lib = unsafe { libloading::Library::new(path) }.map_err(|e| {
                anyhow!(
                    "--torch-ops {}: cannot load the library: {e}",
                    path.display()
                )
            })?;
            libs.push(lib);
        }
        let _ = TORCH_OP_LIBS.set(libs);
    }
    if need_onnx {
        crate::onnx::runtime::init(rt.ort_lib.as_deref(), rt.threads)?;
        // ONNX Runtime opens this library only when the first session is built, after the
        // TorchScript run; a path that is plainly wrong should not cost that run. (A bare
        // file name is left to the dynamic loader's search path.)
        let missing = |p: &&std::path::Path| p.to_string_lossy().contains('/') && !p.is_file();
        if let Some(lib) = rt.ort_custom_ops.as_deref().filter(missing) {
            bail!(
                "--ort-custom-ops {}: cannot load the library: no such file",
                lib.display()
            );
        }
    }
    Ok(())
}

/// The versions of align-check and both runtimes, and the threads each ran with.
pub fn environment(threads: usize) -> Environment {
    // Release builds say "git-branch=rel-1.31.1" in their build info; the PyPI wheel says
    // "HEAD", but its library file carries the version (libonnxruntime.so.1.31.1).
    let info = ort::info();
    let from_branch = info
        .split(", ")
        .find_map(|part| part.split("git-branch=rel-").nth(1))
        .map(str::to_string);
    let from_file = onnx::runtime::loaded_library()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .and_then(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            name.split_once(".so.").map(|(_, v)| v.to_string())
        });
    let onnxruntime = from_branch
        .or(from_file)
        .unwrap_or_else(|| info.to_string());
    Environment {
        align_check: env!("CARGO_PKG_VERSION").to_string(),
        libtorch: env!("ALIGN_CHECK_LIBTORCH_VERSION").to_string(),
        onnxruntime,
        threads,
    }
}

//! Process-wide runtime setup shared by every command: thread counts, extra operator
//! libraries, and the ONNX Runtime environment.
//!
//! Both runtimes get the same thread count so that neither side's timing is an accident of
//! its defaults. Operator libraries are opened once and kept open for the whole process:
//! libtorch registers ops when the library loads, and unloading would leave dangling kernels.

use crate::cli::config::RuntimeConfig;
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

//! Loading the ONNX side of a check: the model read and decoded, its signature, how it is
//! quantised, its training mode judged, and the instrumented ONNX Runtime session built.
//!
//! This is the slowest part of loading (decoding the protobuf, exposing every value,
//! serialising it again, ONNX Runtime building its session) and it shares nothing with
//! libtorch, so a check can do it on a thread of its own while libtorch loads and runs the
//! TorchScript model (`spawn`). The signature is handed over as soon as it is read, since
//! the TorchScript side needs it to resolve its inputs long before the session is ready.
//! Errors keep the order of a sequential load: whatever the ONNX side refuses is reported
//! before anything the TorchScript side refuses (`OnnxLoading::first_error`).

use crate::app::training_mode;
use crate::capture::available_memory::available_bytes;
use crate::capture::memory;
use crate::cli::config::CheckConfig;
use crate::onnx;
use crate::onnx::capture::OnnxRunner;
use crate::onnx::signature::InputSpec;
use crate::quantized::detect::Quantization;
use anyhow::{anyhow, Result};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

/// How many times the two model files' bytes must be free for loading them at once: the
/// ONNX side holds its weights about twice while it builds its session (the file's bytes,
/// which the decoded protobuf slices, then the serialised instrumented model next to ONNX
/// Runtime's own copy) while
/// libtorch holds its copy and runs the first sample; the rest is headroom for the values.
const ROOM_FOR_PARALLEL_LOADING: u64 = 4;

/// Whether the ONNX side loads on its own thread. Not under `--max-memory`: loading one side
/// after the other peaks lower, and the budget's check of the loading peak keeps its
/// meaning. Not with one core, where there is nothing to overlap with, nor where the
/// machine lacks the memory for both loads at once (the budget the automatic memory plan
/// then chooses would be set after a higher peak).
pub fn in_parallel(cfg: &CheckConfig) -> bool {
    if cfg.runtime.max_memory.is_some() {
        return false;
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return false;
    }
    let size = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
    // Weights in external data files are not counted: the headroom covers them.
    let files = size(&cfg.torch_path) + size(&cfg.onnx_path);
    available_bytes().is_some_and(|free| free >= ROOM_FOR_PARALLEL_LOADING * files)
}

/// What loading needs from the configuration, owned so that it can move to a thread.
#[derive(Clone)]
pub struct OnnxSettings {
    pub path: PathBuf,
    pub threads: usize,
    pub custom_ops: Option<PathBuf>,
    pub allow_training_mode: bool,
    /// Prepare for fetching values in groups (a memory budget).
    pub per_group: bool,
}

/// The loaded ONNX side.
pub struct LoadedOnnx {
    pub runner: OnnxRunner,
    pub specs: Vec<InputSpec>,
    pub quantization: Option<Quantization>,
    /// What the ONNX graph runs in training mode (allowed by `--allow-training-mode`).
    pub training_mode: Vec<String>,
    /// Seconds the loading took, on whichever thread it ran.
    pub seconds: f64,
}

/// Loads the ONNX side on the calling thread; `on_specs` gets the signature as soon as it
/// is read.
pub fn load(settings: &OnnxSettings, on_specs: impl FnOnce(&[InputSpec])) -> Result<LoadedOnnx> {
    let t0 = Instant::now();
    let model = onnx::model::load(&settings.path)?;
    let specs = onnx::signature::inputs(&model)?;
    on_specs(&specs);
    let quantization = crate::quantized::detect::detect(&model);
    // Refused before ONNX Runtime builds a session, which is the slow part of loading.
    let training_mode = training_mode::judge(
        [None, onnx::training::training_mode(&model)],
        settings.allow_training_mode,
    )?;
    let runner = OnnxRunner::from_model(
        model,
        settings.threads,
        settings.custom_ops.as_deref(),
        settings.per_group,
    )?;
    // The file's bytes and the serialised model are freed by now; glibc would keep their pages.
    memory::release_freed();
    Ok(LoadedOnnx {
        runner,
        specs,
        quantization,
        training_mode,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The ONNX side loading on its own thread.
pub struct OnnxLoading {
    specs: mpsc::Receiver<Vec<InputSpec>>,
    /// `None` once joined.
    handle: Option<JoinHandle<Result<LoadedOnnx>>>,
}

/// Starts loading the ONNX side on a new thread.
pub fn spawn(settings: OnnxSettings) -> OnnxLoading {
    let (sender, specs) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        load(&settings, |specs| {
            // The receiver only goes away when the check has already failed.
            let _ = sender.send(specs.to_vec());
        })
    });
    OnnxLoading {
        specs,
        handle: Some(handle),
    }
}

impl OnnxLoading {
    /// The ONNX signature, once it is read; the loading's error if it failed before that.
    pub fn specs(&mut self) -> Result<Vec<InputSpec>> {
        match self.specs.recv() {
            Ok(specs) => Ok(specs),
            // The sender is gone without sending: the thread ended, with an error.
            Err(_) => Err(self.join().err().unwrap_or_else(|| {
                anyhow!("internal error: the ONNX model loaded without its signature")
            })),
        }
    }

    /// Waits for the loaded ONNX side.
    pub fn finish(mut self) -> Result<LoadedOnnx> {
        self.join()
    }

    fn join(&mut self) -> Result<LoadedOnnx> {
        self.handle
            .take()
            .ok_or_else(|| anyhow!("internal error: the ONNX loading was already joined"))?
            .join()
            .map_err(|_| anyhow!("internal error while loading the ONNX model"))?
    }

    /// The error a sequential load would have reported for a TorchScript-side `error`:
    /// the ONNX side's own, when it failed too (it is loaded first), else `error`.
    pub fn first_error(mut self, error: anyhow::Error) -> anyhow::Error {
        if self.handle.is_none() {
            return error;
        }
        match self.join() {
            Err(onnx) => onnx,
            Ok(_) => error,
        }
    }
}

//! Raw declarations of the C++ shim's entry points (`shim.cpp`) and the safe owner of a
//! loaded module.
//!
//! Everything unsafe about the TorchScript side is in this file: strings and tensor arrays
//! allocated by C++ are taken over or freed here, and every call that can fail comes back as
//! an `anyhow::Error` carrying the shim's message.

use anyhow::{anyhow, Result};
use std::ffi::{c_char, c_void, CStr, CString};
use std::path::Path;

extern "C" {
    fn ac_free_string(s: *mut c_char);
    fn ac_load(path: *const c_char, err: *mut *mut c_char) -> *mut c_void;
    fn ac_free(plan: *mut c_void);
    fn ac_meta(plan: *mut c_void) -> *const c_char;
    fn ac_capture(
        plan: *mut c_void,
        inputs: *mut *mut c_void,
        n_inputs: usize,
        sink: SinkFn,
        ctx: *mut c_void,
        n_outputs: *mut usize,
        err: *mut *mut c_char,
    ) -> *mut *mut c_void;
    fn ac_forward(
        plan: *mut c_void,
        inputs: *mut *mut c_void,
        n_inputs: usize,
        n_outputs: *mut usize,
        err: *mut *mut c_char,
    ) -> *mut *mut c_void;
    fn ac_free_array(arr: *mut *mut c_void);
}

/// Called by the shim's observe nodes with a heap at::Tensor the callee takes over.
type SinkFn = extern "C" fn(ctx: *mut c_void, id: usize, tensor: *mut c_void);

/// What a capture run hands each observed value to, and the first error it returned.
struct SinkState<'a> {
    receive: &'a mut dyn FnMut(usize, tch::Tensor) -> Result<()>,
    error: Option<anyhow::Error>,
}

extern "C" fn sink_trampoline(ctx: *mut c_void, id: usize, tensor: *mut c_void) {
    // SAFETY: the shim passes back the `SinkState` pointer given to ac_capture, which
    // outlives the run, and a heap at::Tensor whose ownership passes to tch here.
    let state = unsafe { &mut *(ctx as *mut SinkState<'_>) };
    let tensor = unsafe { tch::Tensor::from_ptr(tensor as *mut torch_sys::C_tensor) };
    if state.error.is_some() {
        return;
    }
    // A panic must not unwind into C++: it becomes the run's error.
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (state.receive)(id, tensor)));
    state.error = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(_) => Some(anyhow!("internal error while taking captured value {id}")),
    };
}

/// Takes ownership of a C++ error string.
fn take_error(err: *mut c_char) -> String {
    if err.is_null() {
        return "unknown error in the TorchScript shim".to_string();
    }
    // SAFETY: the shim allocates `err` with malloc as a NUL-terminated string.
    let message = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    unsafe { ac_free_string(err) };
    message
}

/// A TorchScript module loaded with its instrumented `forward` prepared.
pub struct ModulePlan {
    ptr: *mut c_void,
}

// The plan is only used from one thread at a time; libtorch modules are safe to move.
unsafe impl Send for ModulePlan {}

/// What one run returned: the flattened graph outputs.
pub struct RunTensors {
    pub outputs: Vec<tch::Tensor>,
}

impl ModulePlan {
    pub fn load(path: &Path) -> Result<ModulePlan> {
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| anyhow!("the path contains a NUL byte"))?;
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: valid C string; the shim catches every C++ exception.
        let ptr = unsafe { ac_load(c_path.as_ptr(), &mut err) };
        if ptr.is_null() {
            return Err(anyhow!(take_error(err)));
        }
        Ok(ModulePlan { ptr })
    }

    /// The static description of the instrumented graph, as JSON (see `meta.rs`).
    pub fn meta_json(&self) -> String {
        // SAFETY: the string lives as long as the plan.
        unsafe { CStr::from_ptr(ac_meta(self.ptr)) }
            .to_string_lossy()
            .into_owned()
    }

    /// Runs the instrumented graph; `receive(id, tensor)` gets every captured value (ids
    /// index the metadata's `values`) as soon as it is computed. Its first error ends the
    /// capture with that error.
    pub fn capture(
        &self,
        inputs: &[tch::Tensor],
        receive: &mut dyn FnMut(usize, tch::Tensor) -> Result<()>,
    ) -> Result<RunTensors> {
        let mut state = SinkState {
            receive,
            error: None,
        };
        let ctx = &mut state as *mut SinkState<'_> as *mut c_void;
        let outputs = self.call(inputs, |plan, ptrs, n, n_outputs, err| {
            // SAFETY: `ctx` points at `state`, alive until this call returns.
            unsafe { ac_capture(plan, ptrs, n, sink_trampoline, ctx, n_outputs, err) }
        });
        match state.error {
            Some(e) => Err(e),
            None => outputs,
        }
    }

    pub fn forward(&self, inputs: &[tch::Tensor]) -> Result<RunTensors> {
        // SAFETY: arguments are forwarded unchanged from `call`.
        self.call(inputs, |plan, ptrs, n, n_outputs, err| unsafe {
            ac_forward(plan, ptrs, n, n_outputs, err)
        })
    }

    fn call(
        &self,
        inputs: &[tch::Tensor],
        entry: impl FnOnce(
            *mut c_void,
            *mut *mut c_void,
            usize,
            *mut usize,
            *mut *mut c_char,
        ) -> *mut *mut c_void,
    ) -> Result<RunTensors> {
        let mut ptrs: Vec<*mut c_void> = inputs.iter().map(|t| t.as_ptr() as *mut c_void).collect();
        let mut n_outputs = 0usize;
        let mut err: *mut c_char = std::ptr::null_mut();
        // The input pointers are live at::Tensor objects owned by `inputs`.
        let arr = entry(
            self.ptr,
            ptrs.as_mut_ptr(),
            ptrs.len(),
            &mut n_outputs,
            &mut err,
        );
        if arr.is_null() {
            return Err(anyhow!(take_error(err)));
        }
        let mut all = Vec::new();
        let mut i = 0;
        loop {
            // SAFETY: the array is NULL-terminated; each element is a heap at::Tensor whose
            // ownership passes to tch.
            let p = unsafe { *arr.add(i) };
            if p.is_null() {
                break;
            }
            all.push(unsafe { tch::Tensor::from_ptr(p as *mut torch_sys::C_tensor) });
            i += 1;
        }
        unsafe { ac_free_array(arr) };
        debug_assert_eq!(all.len(), n_outputs);
        Ok(RunTensors { outputs: all })
    }
}

impl Drop for ModulePlan {
    fn drop(&mut self) {
        // SAFETY: created by ac_load, freed once.
        unsafe { ac_free(self.ptr) };
    }
}

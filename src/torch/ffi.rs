//! Raw declarations of the C++ shim's entry points (`shim.cpp`) and the safe owner of a
//! loaded module.
//!
//! Everything unsafe about the TorchScript side is in this file: strings and tensor arrays
//! allocated by C++ are taken over or freed here, and every call that can fail comes back as
//! an `anyhow::Error` carrying the shim's message.

use super::args::EncodedArgs;
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
        args: *const AcArgs,
        sink: SinkFn,
        ctx: *mut c_void,
        n_outputs: *mut usize,
        names: *mut *mut c_char,
        err: *mut *mut c_char,
    ) -> *mut *mut c_void;
    fn ac_forward(
        plan: *mut c_void,
        args: *const AcArgs,
        n_outputs: *mut usize,
        names: *mut *mut c_char,
        err: *mut *mut c_char,
    ) -> *mut *mut c_void;
    fn ac_free_array(arr: *mut *mut c_void);
    fn ac_to_float64(plan: *mut c_void, err: *mut *mut c_char) -> i32;
    // The exported-program interpreter (program.cpp).
    fn ac_program_load(
        text: *const c_char,
        constants: *const *mut c_void,
        n_constants: usize,
        err: *mut *mut c_char,
    ) -> *mut c_void;
    fn ac_program_free(program: *mut c_void);
    fn ac_program_run(
        program: *mut c_void,
        args: *const AcArgs,
        sink: Option<SinkFn>,
        ctx: *mut c_void,
        n_outputs: *mut usize,
        names: *mut *mut c_char,
        err: *mut *mut c_char,
    ) -> *mut *mut c_void;
    fn ac_program_to_float64(program: *mut c_void, err: *mut *mut c_char) -> i32;
    fn ac_pickled_sample_inputs(
        data: *const c_char,
        len: usize,
        keywords: *const c_char,
        n: *mut usize,
        err: *mut *mut c_char,
    ) -> *mut *mut c_void;
}

/// The shim's view of encoded forward arguments (`AcArgs` in ac_args.h): pointers into an
/// `EncodedArgs`, which outlives the call.
#[repr(C)]
struct AcArgs {
    codes: *const i64,
    n_codes: usize,
    floats: *const f64,
    n_floats: usize,
    strings: *const *const c_char,
    n_strings: usize,
    tensors: *const *mut c_void,
    n_tensors: usize,
}

/// Called by the shim's observe nodes with a heap at::Tensor the callee takes over (null for
/// an undefined tensor).
type SinkFn = extern "C" fn(ctx: *mut c_void, id: usize, tensor: *mut c_void);

/// What a capture run hands each observed value to, and the first error it returned.
struct SinkState<'a> {
    receive: &'a mut dyn FnMut(usize, Option<tch::Tensor>) -> Result<()>,
    error: Option<anyhow::Error>,
}

extern "C" fn sink_trampoline(ctx: *mut c_void, id: usize, tensor: *mut c_void) {
    // SAFETY: the shim passes back the `SinkState` pointer given to ac_capture, which
    // outlives the run, and a heap at::Tensor whose ownership passes to tch here.
    let state = unsafe { &mut *(ctx as *mut SinkState<'_>) };
    // A null tensor is an undefined one (an optional result the op did not compute).
    let tensor = (!tensor.is_null())
        .then(|| unsafe { tch::Tensor::from_ptr(tensor as *mut torch_sys::C_tensor) });
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
    take_string(err).unwrap_or_else(|| "unknown error in the TorchScript shim".to_string())
}

/// Takes ownership of a string the shim allocated; `None` for a null pointer.
fn take_string(s: *mut c_char) -> Option<String> {
    if s.is_null() {
        return None;
    }
    // SAFETY: the shim allocates strings with malloc, NUL-terminated.
    let text = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
    unsafe { ac_free_string(s) };
    Some(text)
}

/// A TorchScript module loaded with its instrumented `forward` prepared, or an exported
/// program ready for the interpreter (`program`); both run and capture alike.
pub struct ModulePlan {
    ptr: *mut c_void,
    program: bool,
}

// The plan is only used from one thread at a time; libtorch modules are safe to move.
unsafe impl Send for ModulePlan {}

/// What one run returned: the flattened graph outputs, each with its path in the returned
/// value (`0`, `last_hidden_state`, `output` for a lone tensor).
pub struct RunTensors {
    pub outputs: Vec<tch::Tensor>,
    pub names: Vec<String>,
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
        Ok(ModulePlan {
            ptr,
            program: false,
        })
    }

    /// An exported program's text (`exported::translate`) with the stored tensors its
    /// `bind` lines name, in order.
    pub fn load_program(text: &str, constants: &[tch::Tensor]) -> Result<ModulePlan> {
        let c_text =
            CString::new(text).map_err(|_| anyhow!("the program text contains a NUL byte"))?;
        let pointers: Vec<*mut c_void> = constants
            .iter()
            .map(|t| t.as_ptr() as *mut c_void)
            .collect();
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: valid C string and tensor pointers alive for the call (the interpreter
        // copies the tensors); every C++ exception is caught there.
        let ptr = unsafe {
            ac_program_load(c_text.as_ptr(), pointers.as_ptr(), pointers.len(), &mut err)
        };
        if ptr.is_null() {
            return Err(anyhow!(take_error(err)));
        }
        Ok(ModulePlan { ptr, program: true })
    }

    /// The static description of the instrumented graph, as JSON (see `meta.rs`).
    pub fn meta_json(&self) -> String {
        // SAFETY: the string lives as long as the plan.
        unsafe { CStr::from_ptr(ac_meta(self.ptr)) }
            .to_string_lossy()
            .into_owned()
    }

    /// Runs the instrumented graph; `receive(id, tensor)` gets every captured value (ids
    /// index the metadata's `values`) as soon as it is computed, `None` for an undefined
    /// tensor. Its first error ends the capture with that error.
    pub fn capture(
        &self,
        inputs: &EncodedArgs,
        receive: &mut dyn FnMut(usize, Option<tch::Tensor>) -> Result<()>,
    ) -> Result<RunTensors> {
        let mut state = SinkState {
            receive,
            error: None,
        };
        let ctx = &mut state as *mut SinkState<'_> as *mut c_void;
        let program = self.program;
        let outputs = self.call(inputs, |plan, args, n_outputs, names, err| {
            // SAFETY: `ctx` points at `state`, alive until this call returns.
            unsafe {
                if program {
                    let sink: SinkFn = sink_trampoline;
                    ac_program_run(plan, args, Some(sink), ctx, n_outputs, names, err)
                } else {
                    ac_capture(plan, args, sink_trampoline, ctx, n_outputs, names, err)
                }
            }
        });
        match state.error {
            Some(e) => Err(e),
            None => outputs,
        }
    }

    pub fn forward(&self, inputs: &EncodedArgs) -> Result<RunTensors> {
        let program = self.program;
        // SAFETY: arguments are forwarded unchanged from `call`.
        self.call(inputs, |plan, args, n_outputs, names, err| unsafe {
            if program {
                let null = std::ptr::null_mut();
                ac_program_run(plan, args, None, null, n_outputs, names, err)
            } else {
                ac_forward(plan, args, n_outputs, names, err)
            }
        })
    }

    /// Casts the module's floating-point parameters and buffers to float64.
    pub fn cast_to_float64(&mut self) -> Result<()> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: the plan is alive and owned by `self`; the shim catches every C++ exception.
        let status = if self.program {
            unsafe { ac_program_to_float64(self.ptr, &mut err) }
        } else {
            unsafe { ac_to_float64(self.ptr, &mut err) }
        };
        match status {
            0 => Ok(()),
            _ => Err(anyhow!(take_error(err))),
        }
    }

    fn call(
        &self,
        inputs: &EncodedArgs,
        entry: impl FnOnce(
            *mut c_void,
            *const AcArgs,
            *mut usize,
            *mut *mut c_char,
            *mut *mut c_char,
        ) -> *mut *mut c_void,
    ) -> Result<RunTensors> {
        let strings: Vec<*const c_char> = inputs.strings.iter().map(|s| s.as_ptr()).collect();
        let tensors: Vec<*mut c_void> = inputs
            .tensors
            .iter()
            .map(|t| t.as_ptr() as *mut c_void)
            .collect();
        // Pointers into `inputs` and the two vectors above, all alive until `entry` returns.
        let args = AcArgs {
            codes: inputs.codes.as_ptr(),
            n_codes: inputs.codes.len(),
            floats: inputs.floats.as_ptr(),
            n_floats: inputs.floats.len(),
            strings: strings.as_ptr(),
            n_strings: strings.len(),
            tensors: tensors.as_ptr(),
            n_tensors: tensors.len(),
        };
        let mut n_outputs = 0usize;
        let mut names: *mut c_char = std::ptr::null_mut();
        let mut err: *mut c_char = std::ptr::null_mut();
        let arr = entry(self.ptr, &args, &mut n_outputs, &mut names, &mut err);
        if arr.is_null() {
            return Err(anyhow!(take_error(err)));
        }
        // SAFETY: a non-null array from the shim, as `take_tensors` takes it.
        let all = unsafe { take_tensors(arr) };
        debug_assert_eq!(all.len(), n_outputs);
        // The shim joins the paths with newlines; no outputs is an empty string.
        let names = match take_string(names) {
            Some(joined) if !all.is_empty() => joined.split('\n').map(str::to_string).collect(),
            _ => Vec::new(),
        };
        Ok(RunTensors {
            outputs: all,
            names,
        })
    }
}

/// Takes over a null-terminated array of heap `at::Tensor`s the shim returned, freeing the
/// array itself.
///
/// # Safety
/// `arr` is non-null, null-terminated, and each element a heap tensor no one else owns.
unsafe fn take_tensors(arr: *mut *mut c_void) -> Vec<tch::Tensor> {
    let mut all = Vec::new();
    let mut i = 0;
    loop {
        let p = *arr.add(i);
        if p.is_null() {
            break;
        }
        all.push(tch::Tensor::from_ptr(p as *mut torch_sys::C_tensor));
        i += 1;
    }
    ac_free_array(arr);
    all
}

/// The tensors of a `.pt2` archive's sample inputs (the bytes of
/// `data/sample_inputs/<model>.pt`), read by libtorch's unpickler: the positional ones, then
/// the keyword ones in `keywords`' order (the program's).
pub fn pickled_sample_inputs(bytes: &[u8], keywords: &[String]) -> Result<Vec<tch::Tensor>> {
    let keywords = CString::new(keywords.join("\n"))
        .map_err(|_| anyhow!("a keyword argument's name holds a NUL byte"))?;
    let mut n = 0usize;
    let mut err: *mut c_char = std::ptr::null_mut();
    // SAFETY: the bytes outlive the call (the shim copies them); every C++ exception is
    // caught there.
    let arr = unsafe {
        ac_pickled_sample_inputs(
            bytes.as_ptr() as *const c_char,
            bytes.len(),
            keywords.as_ptr(),
            &mut n,
            &mut err,
        )
    };
    if arr.is_null() {
        return Err(anyhow!(take_error(err)));
    }
    // SAFETY: a non-null array the shim made for this call.
    Ok(unsafe { take_tensors(arr) })
}

impl Drop for ModulePlan {
    fn drop(&mut self) {
        // SAFETY: created by ac_load or ac_program_load, freed once by its own kind.
        if self.program {
            unsafe { ac_program_free(self.ptr) };
        } else {
            unsafe { ac_free(self.ptr) };
        }
    }
}

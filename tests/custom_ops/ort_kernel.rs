//! An elementwise two-input float custom operator for ONNX Runtime, written against the raw C
//! API (ort-sys types), shared by the `ort_my_add` and `ort_my_add_wrong` operator libraries.
//!
//! ONNX Runtime loads such a library with `RegisterCustomOpsLibrary` and calls its exported
//! `RegisterCustomOps(OrtSessionOptions*, const OrtApiBase*)`; everything the library needs from
//! the runtime (reading inputs, allocating the output, error statuses) comes through the
//! `OrtApi` table it is handed, so the library links against nothing. The PyPI wheel ships no C
//! headers, which is why the types come from ort-sys (the crate that `ort` itself binds with).
//!
//! Each library declares its op as a `static ElementwiseOp` (name + formula) and registers it
//! with [`register`]; only the formula differs between the correct and the wrong kernel.

use ort_sys::{
    c_char, c_int, c_void, ONNXTensorElementDataType, OrtApi, OrtApiBase, OrtCustomOp,
    OrtCustomOpDomain, OrtCustomOpInputOutputCharacteristic, OrtErrorCode, OrtKernelContext,
    OrtKernelInfo, OrtMemType, OrtSessionOptions, OrtStatus, OrtStatusPtr, OrtValue,
};
use std::ffi::CStr;
use std::ptr;

/// The C API version asked for and declared in `OrtCustomOp::version`. 17 (ONNX Runtime 1.17)
/// is the oldest ort-sys describes and has everything used here (CreateKernelV2,
/// KernelComputeV2, op version ranges), so the library should not need a newer runtime than
/// that (tested with 1.31); ONNX Runtime reads only the `OrtCustomOp` fields that exist at
/// the declared version.
const API_VERSION: u32 = 17;

/// One custom op: ONNX Runtime sees the leading `OrtCustomOp` (hence `repr(C)` with it
/// first), and every callback casts the op pointer back to reach the name and the formula.
#[repr(C)]
pub struct ElementwiseOp {
    op: OrtCustomOp,
    name: &'static CStr,
    formula: fn(f32, f32) -> f32,
}

/// What a kernel instance needs at compute time.
struct Kernel {
    api: &'static OrtApi,
    formula: fn(f32, f32) -> f32,
}

impl ElementwiseOp {
    /// An op `name(a: float, b: float) -> float` computing `formula(a[i], b[i])` for every
    /// element of two same-shaped tensors.
    pub const fn new(name: &'static CStr, formula: fn(f32, f32) -> f32) -> ElementwiseOp {
        ElementwiseOp {
            op: OrtCustomOp {
                version: API_VERSION,
                CreateKernel: None,
                GetName: Some(get_name),
                GetExecutionProviderType: Some(get_execution_provider_type),
                GetInputType: Some(get_float_type),
                GetInputTypeCount: Some(get_two),
                GetOutputType: Some(get_float_type),
                GetOutputTypeCount: Some(get_one),
                KernelCompute: None,
                KernelDestroy: Some(destroy_kernel),
                GetInputCharacteristic: Some(get_required),
                GetOutputCharacteristic: Some(get_required),
                GetInputMemoryType: Some(get_default_memory),
                GetVariadicInputMinArity: Some(get_one_int),
                GetVariadicInputHomogeneity: Some(get_zero_int),
                GetVariadicOutputMinArity: Some(get_one_int),
                GetVariadicOutputHomogeneity: Some(get_zero_int),
                CreateKernelV2: Some(create_kernel),
                KernelComputeV2: Some(compute_kernel),
                InferOutputShapeFn: None,
                GetStartVersion: Some(get_start_version),
                GetEndVersion: Some(get_end_version),
                // Not read at API_VERSION 17; present in the struct when ort-sys is built
                // with a newer API level.
                GetMayInplace: None,
                ReleaseMayInplace: None,
                GetAliasMap: None,
                ReleaseAliasMap: None,
            },
            name,
            formula,
        }
    }
}

/// Registers `ops` in a new custom-op domain of `options`.
///
/// # Safety
/// `options` and `api_base` must be what ONNX Runtime passes to `RegisterCustomOps`.
pub unsafe fn register(
    options: *mut OrtSessionOptions,
    api_base: *const OrtApiBase,
    domain: &'static CStr,
    ops: &'static [ElementwiseOp],
) -> *mut OrtStatus {
    let Some(base) = (unsafe { api_base.as_ref() }) else {
        return ptr::null_mut();
    };
    let api = unsafe { (base.GetApi)(API_VERSION) };
    let Some(api) = (unsafe { api.as_ref() }) else {
        // No API table means no way to report an error either; the runtime is older than
        // 1.17 and will fail on the unknown op with its own message.
        return ptr::null_mut();
    };
    let mut handle: *mut OrtCustomOpDomain = ptr::null_mut();
    let status = unsafe { (api.CreateCustomOpDomain)(domain.as_ptr(), &mut handle) };
    if !status.0.is_null() {
        return status.0;
    }
    for op in ops {
        let status = unsafe { (api.CustomOpDomain_Add)(handle, &op.op) };
        if !status.0.is_null() {
            return status.0;
        }
    }
    // The domain must outlive every session built from these options, which the library
    // cannot know about; it is never released (a few bytes per registration).
    unsafe { (api.AddCustomOpDomain)(options, handle) }.0
}

/// Reaches the `ElementwiseOp` around an `OrtCustomOp` pointer that ONNX Runtime hands back.
unsafe fn op_of<'a>(op: *const OrtCustomOp) -> &'a ElementwiseOp {
    unsafe { &*op.cast::<ElementwiseOp>() }
}

unsafe extern "system" fn get_name(op: *const OrtCustomOp) -> *const c_char {
    unsafe { op_of(op) }.name.as_ptr()
}

/// Null means the CPU execution provider.
unsafe extern "system" fn get_execution_provider_type(_: *const OrtCustomOp) -> *const c_char {
    ptr::null()
}

unsafe extern "system" fn get_float_type(
    _: *const OrtCustomOp,
    _: usize,
) -> ONNXTensorElementDataType {
    ONNXTensorElementDataType::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT
}

unsafe extern "system" fn get_two(_: *const OrtCustomOp) -> usize {
    2
}

unsafe extern "system" fn get_one(_: *const OrtCustomOp) -> usize {
    1
}

unsafe extern "system" fn get_required(
    _: *const OrtCustomOp,
    _: usize,
) -> OrtCustomOpInputOutputCharacteristic {
    OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED
}

unsafe extern "system" fn get_default_memory(_: *const OrtCustomOp, _: usize) -> OrtMemType {
    OrtMemType::OrtMemTypeDefault
}

unsafe extern "system" fn get_one_int(_: *const OrtCustomOp) -> c_int {
    1
}

unsafe extern "system" fn get_zero_int(_: *const OrtCustomOp) -> c_int {
    0
}

/// The op exists from version 1 of its domain on, with no end.
unsafe extern "system" fn get_start_version(_: *const OrtCustomOp) -> c_int {
    1
}

unsafe extern "system" fn get_end_version(_: *const OrtCustomOp) -> c_int {
    c_int::MAX
}

unsafe extern "system" fn create_kernel(
    op: *const OrtCustomOp,
    api: *const OrtApi,
    _: *const OrtKernelInfo,
    kernel: *mut *mut c_void,
) -> OrtStatusPtr {
    // SAFETY: ONNX Runtime's API table is static for the life of the process.
    let api: &'static OrtApi = unsafe { &*api };
    let formula = unsafe { op_of(op) }.formula;
    let boxed = Box::new(Kernel { api, formula });
    unsafe { *kernel = Box::into_raw(boxed).cast() };
    OrtStatusPtr::default()
}

unsafe extern "system" fn destroy_kernel(kernel: *mut c_void) {
    drop(unsafe { Box::from_raw(kernel.cast::<Kernel>()) });
}

unsafe extern "system" fn compute_kernel(
    kernel: *mut c_void,
    context: *mut OrtKernelContext,
) -> OrtStatusPtr {
    let kernel = unsafe { &*kernel.cast::<Kernel>() };
    match unsafe { compute(kernel, context) } {
        Ok(()) => OrtStatusPtr::default(),
        Err(Failure::Runtime(status)) => status,
        Err(Failure::Message(msg)) => {
            let msg = std::ffi::CString::new(msg).unwrap_or_default();
            unsafe { (kernel.api.CreateStatus)(OrtErrorCode::ORT_INVALID_ARGUMENT, msg.as_ptr()) }
        }
    }
}

/// Why a compute failed: a status ONNX Runtime returned, or our own complaint.
enum Failure {
    Runtime(OrtStatusPtr),
    Message(String),
}

fn check(status: OrtStatusPtr) -> Result<(), Failure> {
    if status.0.is_null() {
        Ok(())
    } else {
        Err(Failure::Runtime(status))
    }
}

/// The shape and element count of a tensor value.
unsafe fn shape_of(api: &OrtApi, value: *const OrtValue) -> Result<(Vec<i64>, usize), Failure> {
    let mut info = ptr::null_mut();
    check(unsafe { (api.GetTensorTypeAndShape)(value, &mut info) })?;
    let mut rank = 0usize;
    let mut count = 0usize;
    let mut dims = Vec::new();
    let result = (|| {
        check(unsafe { (api.GetDimensionsCount)(info, &mut rank) })?;
        dims.resize(rank, 0i64);
        check(unsafe { (api.GetDimensions)(info, dims.as_mut_ptr(), rank) })?;
        check(unsafe { (api.GetTensorShapeElementCount)(info, &mut count) })
    })();
    unsafe { (api.ReleaseTensorTypeAndShapeInfo)(info) };
    result.map(|()| (dims, count))
}

unsafe fn compute(kernel: &Kernel, context: *mut OrtKernelContext) -> Result<(), Failure> {
    let api = kernel.api;
    let mut a = ptr::null();
    let mut b = ptr::null();
    check(unsafe { (api.KernelContext_GetInput)(context, 0, &mut a) })?;
    check(unsafe { (api.KernelContext_GetInput)(context, 1, &mut b) })?;
    let (a_dims, n) = unsafe { shape_of(api, a) }?;
    let (b_dims, _) = unsafe { shape_of(api, b) }?;
    if a_dims != b_dims {
        // Broadcasting is not part of this op's contract (nor of the TorchScript twin's).
        return Err(Failure::Message(format!(
            "my_add: inputs must have the same shape, got {a_dims:?} and {b_dims:?}"
        )));
    }
    let mut out = ptr::null_mut();
    check(unsafe {
        (api.KernelContext_GetOutput)(context, 0, a_dims.as_ptr(), a_dims.len(), &mut out)
    })?;
    let (mut a_data, mut b_data, mut out_data) =
        (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    // GetTensorMutableData is the API-17 way to read an input too (GetTensorData came later);
    // the inputs are only read.
    check(unsafe { (api.GetTensorMutableData)(a.cast_mut(), &mut a_data) })?;
    check(unsafe { (api.GetTensorMutableData)(b.cast_mut(), &mut b_data) })?;
    check(unsafe { (api.GetTensorMutableData)(out, &mut out_data) })?;
    if n == 0 {
        return Ok(());
    }
    let a = unsafe { std::slice::from_raw_parts(a_data.cast::<f32>(), n) };
    let b = unsafe { std::slice::from_raw_parts(b_data.cast::<f32>(), n) };
    let out = unsafe { std::slice::from_raw_parts_mut(out_data.cast::<f32>(), n) };
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = (kernel.formula)(x, y);
    }
    Ok(())
}

/// Defines the `RegisterCustomOps` entry point ONNX Runtime looks up in a custom-op library,
/// registering `$ops` in `$domain`. A macro because each library must export the symbol
/// itself.
macro_rules! export_register_custom_ops {
    ($domain:expr, $ops:expr) => {
        /// The entry point ONNX Runtime looks up in a custom-op library.
        ///
        /// # Safety
        /// Called by ONNX Runtime with valid session options and API base.
        #[no_mangle]
        pub unsafe extern "C" fn RegisterCustomOps(
            options: *mut ort_sys::OrtSessionOptions,
            api_base: *const ort_sys::OrtApiBase,
        ) -> *mut ort_sys::OrtStatus {
            unsafe { ort_kernel::register(options, api_base, $domain, $ops) }
        }
    };
}

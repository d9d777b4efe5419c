//! ONNX Runtime custom-op library with a *wrong* `my_ops::my_add` kernel, for the tests: it
//! computes `2*a + b` but rounds the result through float16, as a kernel written for half
//! precision would. The error is small (up to about 5e-4 relative per element) and present on
//! most elements: the kind of custom-op drift align-check must pin to the my_add layer.

#[path = "ort_kernel.rs"]
#[macro_use]
mod ort_kernel;

use ort_kernel::ElementwiseOp;

fn my_add_in_half_precision(a: f32, b: f32) -> f32 {
    half::f16::from_f32(2.0 * a + b).to_f32()
}

static OPS: [ElementwiseOp; 1] = [ElementwiseOp::new(c"my_add", my_add_in_half_precision)];

export_register_custom_ops!(c"my_ops", &OPS);

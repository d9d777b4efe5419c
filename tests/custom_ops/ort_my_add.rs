//! ONNX Runtime custom-op library with the correct `my_ops::my_add` kernel: `2*a + b`, the
//! same formula as the TorchScript operator in torch_my_add.cpp. Built as a cdylib example
//! (`cargo build --example ort_my_add`, or scripts/build_custom_ops.sh) and passed to
//! align-check with `--ort-custom-ops`.

#[path = "ort_kernel.rs"]
#[macro_use]
mod ort_kernel;

use ort_kernel::ElementwiseOp;

fn my_add(a: f32, b: f32) -> f32 {
    2.0 * a + b
}

static OPS: [ElementwiseOp; 1] = [ElementwiseOp::new(c"my_add", my_add)];

export_register_custom_ops!(c"my_ops", &OPS);

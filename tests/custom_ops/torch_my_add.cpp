// The `my_add` custom operator (2*a + b) as a real TorchScript operator library.
//
// This is how a C++ extension op reaches TorchScript: TORCH_LIBRARY declares the schema
// `my_ops::my_add` and TORCH_LIBRARY_IMPL gives its CPU kernel. Both run as static
// initialisers when the shared library is loaded (`torch.ops.load_library` in Python,
// `--torch-ops LIB` in align-check), which is the only registration there is: a model.pt that
// calls the op cannot be loaded without the library. The same formula is implemented for ONNX
// Runtime by tests/custom_ops/ort_my_add.rs; scripts/build_custom_ops.sh builds both.

#include <torch/library.h>
#include <ATen/ATen.h>

namespace {

at::Tensor my_add_cpu(const at::Tensor& a, const at::Tensor& b) {
    TORCH_CHECK(a.sizes() == b.sizes(), "my_ops::my_add: a and b must have the same shape, got ",
                a.sizes(), " and ", b.sizes());
    return 2 * a + b;
}

}  // namespace

TORCH_LIBRARY(my_ops, m) {
    m.def("my_add(Tensor a, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(my_ops, CPU, m) {
    m.impl("my_add", &my_add_cpu);
}

// The one declaration of `AcArgs`, forward's arguments as the Rust side encodes them
// (`AcArgs` in ffi.rs, `#[repr(C)]`, the same layout), shared by the TorchScript shim
// (shim.cpp) and the exported-program interpreter (program.cpp): two copies could drift apart
// and each would still compile.
//
// Values come in prefix order: each value is a code from `codes` (0 tensor, 1 int, 2 float,
// 3 bool, 4 str, 5 None, 6 the schema's default, 7 tuple, 8 list, 9 dict), followed by its
// payload (an int or bool in `codes`, a float in `floats`, a string or dict key in `strings`, a
// tensor in `tensors`, an element count in `codes` for the containers, then the elements).
// An exported program takes tensors only (code 0 each).
#pragma once

#include <cstddef>
#include <cstdint>

struct AcArgs {
  const int64_t* codes;
  size_t n_codes;
  const double* floats;
  size_t n_floats;
  const char* const* strings;
  size_t n_strings;
  void* const* tensors;
  size_t n_tensors;
};

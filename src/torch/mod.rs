//! The TorchScript side: load a module through the C++ shim and capture every intermediate.

mod archive;
mod capture;
pub mod convert;
mod ffi;
pub mod meta;

pub use capture::{InputInfo, StaticValue, TorchModel};

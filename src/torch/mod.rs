//! The TorchScript side: load a module through the C++ shim and capture every intermediate.

mod archive;
mod args;
mod capture;
pub mod convert;
pub mod errors;
mod ffi;
mod hazards;
pub mod meta;

pub use archive::format_version;
pub use args::EncodedArgs;
pub use capture::{InputInfo, StaticValue, TorchModel};

//! The PyTorch side: load a TorchScript module through the C++ shim, or a torch.export
//! program through its interpreter, and capture every intermediate.

mod archive;
mod args;
mod capture;
pub mod convert;
pub mod errors;
mod exported;
mod ffi;
mod hazards;
pub mod meta;
mod shared_attributes;

pub use archive::format_version;
pub use args::EncodedArgs;
pub use capture::{InputInfo, StaticValue, TorchModel};
pub use exported::format_line as exported_format;
pub use exported::is_archive as is_exported_archive;

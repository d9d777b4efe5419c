//! Build script: compiles the TorchScript shim and the exported-program interpreter against
//! libtorch, generates the ONNX protobuf types, and records where the bootstrapped ONNX
//! Runtime library lives.
//!
//! libtorch is located by torch-sys (LIBTORCH, or LIBTORCH_USE_PYTORCH=1); it hands us the
//! library folder through `DEP_TCH_LIBTORCH_LIB`, from which the headers and the rpath
//! follow, so the shim is always compiled against exactly the libtorch tch links.

use std::path::{Path, PathBuf};

fn main() {
    build_shim();
    generate_onnx_types();
    record_default_ort_library();
}

fn build_shim() {
    let lib_dir = PathBuf::from(
        std::env::var("DEP_TCH_LIBTORCH_LIB")
            .expect("torch-sys did not report libtorch's library folder"),
    );
    let root = lib_dir.parent().expect("libtorch lib folder has a parent");
    let include = root.join("include");
    println!("cargo:rerun-if-changed=src/torch/shim.cpp");
    println!("cargo:rerun-if-changed=src/torch/shadow.cpp");
    println!("cargo:rerun-if-changed=src/torch/program.cpp");
    println!("cargo:rerun-if-changed=src/torch/ac_args.h");
    cc::Build::new()
        .cpp(true)
        .file("src/torch/shim.cpp")
        .file("src/torch/shadow.cpp")
        .file("src/torch/program.cpp")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        // The PyPI wheel is built with the new C++11 ABI.
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .define("GLOG_USE_GLOG_EXPORT", None)
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations")
        .warnings(false)
        .compile("align_check_shim");
    // The binary and the tests find libtorch without LD_LIBRARY_PATH (every target: the
    // library's unit tests have no link-arg key of their own).
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    // align-check-summary needs no libtorch (the wheel runs it where torch is not installed):
    // libtch's inline C++ functions are kept out of its dynamic symbols, where they would stay
    // live (libtorch defines them too) and, through them, libtorch needed. With the rest left
    // out by --gc-sections, rust-lld's --as-needed then records no libtorch, and the rpath
    // above goes unused (scripts/test_wheel.sh checks).
    println!("cargo:rustc-link-arg-bin=align-check-summary=-Wl,--exclude-libs,ALL");
    println!(
        "cargo:rustc-env=ALIGN_CHECK_LIBTORCH_VERSION={}",
        libtorch_version(root)
    );
}

/// The version of the libtorch we compile against, as reports name it: the PyPI wheel
/// records it in `version.py`, a standalone libtorch in `build-version`.
fn libtorch_version(root: &Path) -> String {
    if let Ok(text) = std::fs::read_to_string(root.join("build-version")) {
        return text.trim().to_string();
    }
    std::fs::read_to_string(root.join("version.py"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("__version__ = "))
                .map(|v| v.trim().trim_matches('\'').to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

fn generate_onnx_types() {
    let proto = "src/onnx/proto/onnx.proto";
    println!("cargo:rerun-if-changed={proto}");
    let files = protox::compile([proto], ["src/onnx/proto"]).expect("onnx.proto parses");
    prost_build::Config::new()
        // Weights decode as slices of the file's bytes instead of copies of them.
        .bytes([".onnx.TensorProto.raw_data"])
        .compile_fds(files)
        .expect("prost generates the ONNX types");
}

/// The ONNX Runtime shared library of the bootstrapped Python environment, if there is one,
/// becomes the run-time default so users of that environment set nothing.
fn record_default_ort_library() {
    println!("cargo:rerun-if-changed=.venv");
    let candidate = Path::new(".venv/libonnxruntime.so");
    if let Ok(real) = std::fs::canonicalize(candidate) {
        println!(
            "cargo:rustc-env=ALIGN_CHECK_DEFAULT_ORT_LIB={}",
            real.display()
        );
    } else {
        println!("cargo:rustc-env=ALIGN_CHECK_DEFAULT_ORT_LIB=");
    }
}

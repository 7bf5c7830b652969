//! Compiles the C++ shim over libtorch's boxed dispatcher against torch-sys's libtorch.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=cpp/shim.cpp");
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    // torch-sys (links = "tch") publishes its libtorch lib directory to direct dependents.
    let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") else {
        println!(
            "cargo:warning=DEP_TCH_LIBTORCH_LIB is not set: torch-sys did not report libtorch; run `cargo xtask setup`"
        );
        std::process::exit(1);
    };
    let lib = PathBuf::from(lib);
    let root = lib
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| lib.clone());
    cc::Build::new()
        .cpp(true)
        .pic(true)
        .warnings(false)
        .file("cpp/shim.cpp")
        .include(root.join("include"))
        .include(root.join("include/torch/csrc/api/include"))
        .flag("-std=c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .define("GLOG_USE_GLOG_EXPORT", None)
        .compile("graphbug_shim");
}

//! Build script: gives the shared library a SONAME that tracks the C ABI version
//! (`DASHRANK_ABI_VERSION` in `capi/src/lib.rs`; `scripts/ffi.sh` checks that they agree).
//! No network, no generated code.

/// Keep equal to `DASHRANK_ABI_VERSION`.
const ABI_VERSION: u32 = 1;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" || os.ends_with("bsd") {
        // Applies to the cdylib only (not to the CLI, tests or the staticlib).
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdashrank.so.{ABI_VERSION}");
    }
}

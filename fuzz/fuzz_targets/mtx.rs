//! cargo-fuzz target `mtx`: see `dashrank_fuzz::mtx` (fuzz/src/) for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dashrank_fuzz::mtx(data));

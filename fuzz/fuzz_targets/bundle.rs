//! cargo-fuzz target `bundle`: see `dashrank_fuzz::bundle` (fuzz/src/) for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dashrank_fuzz::bundle(data));

//! cargo-fuzz target `capi_sequence`: see `dashrank_fuzz::capi_sequence` (fuzz/src/) for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dashrank_fuzz::capi_sequence(data));

//! cargo-fuzz target `sparsetir_json`: see `dashrank_fuzz::sparsetir_json` (fuzz/src/) for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dashrank_fuzz::sparsetir_json(data));

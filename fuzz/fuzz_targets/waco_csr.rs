//! cargo-fuzz target `waco_csr`: see `dashrank_fuzz::waco_csr` (fuzz/src/) for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dashrank_fuzz::waco_csr(data));

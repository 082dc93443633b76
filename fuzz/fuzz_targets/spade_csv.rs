//! cargo-fuzz target `spade_csv`: see `dashrank_fuzz::spade_csv` (fuzz/src/) for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dashrank_fuzz::spade_csv(data));

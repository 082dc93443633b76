//! cargo-fuzz target `taco_commands`: see `dashrank_fuzz::taco_commands` (fuzz/src/) for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dashrank_fuzz::taco_commands(data));

//! cargo-fuzz target `schedule_lines`: see `dashrank_fuzz::schedule_lines` (fuzz/src/) for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dashrank_fuzz::schedule_lines(data));

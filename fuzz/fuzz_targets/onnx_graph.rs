//! cargo-fuzz target `onnx_graph`: see `dashrank_fuzz::onnx_graph` (fuzz/src/) for what it
//! generates and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dashrank_fuzz::onnx_graph(data));

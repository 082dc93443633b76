//! Every kind of bad input gets a clear error that names the problem (never a panic).
//! Broken files: tests/data/bad/, made by `python -m dashrank_onnx.fixtures` (see its README).

mod common;

use common::*;
use dashrank::{CandidateStatus, CostModel, CsrPattern, ErrorKind, Model};

fn bad(name: &str) -> std::path::PathBuf {
    repo().join("tests/data/bad").join(name)
}

fn load_err(name: &str) -> dashrank::Error {
    match Model::load(bad(name), &options()) {
        Ok(_) => panic!("{name}: loading should fail"),
        Err(e) => e,
    }
}

#[test]
fn wrong_format_version_names_version_and_window() {
    let e = load_err("wrong-format-version");
    assert!(
        matches!(
            e.kind(),
            ErrorKind::UnsupportedVersion {
                found: 99,
                min: 1,
                max: 1
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("99"), "{e}");
}

#[test]
fn missing_role_names_the_key() {
    let e = load_err("missing-role");
    assert!(matches!(e.kind(), ErrorKind::Bundle { .. }), "{e:?}");
    assert!(e.to_string().contains("dashrank.role"), "{e}");
}

#[test]
fn missing_weight_names_the_tensor() {
    let e = load_err("missing-weight-initializer");
    assert!(matches!(e.kind(), ErrorKind::Featurize { .. }), "{e:?}");
    assert!(e.to_string().contains("layer2.weight"), "{e}");
}

#[test]
fn conv_weight_shape_mismatch_is_reported() {
    let e = load_err("conv-weight-shape-mismatch");
    assert!(matches!(e.kind(), ErrorKind::Featurize { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains('3') && text.contains('4'),
        "should give both channel counts: {text}"
    );
}

#[test]
fn nan_weight_names_the_tensor() {
    let e = load_err("nan-weight");
    let text = e.to_string();
    assert!(
        text.contains("layer1.weight") && text.contains("non-finite"),
        "{text}"
    );
}

#[test]
fn unknown_featurizer_op_names_the_op() {
    let e = load_err("unknown-featurizer-op");
    assert!(matches!(e.kind(), ErrorKind::Featurize { .. }), "{e:?}");
    assert!(e.to_string().contains("SparseGELU"), "{e}");
}

#[test]
fn truncated_onnx_file_is_rejected() {
    let e = load_err("truncated-onnx");
    assert!(matches!(e.kind(), ErrorKind::Bundle { .. }), "{e:?}");
    assert!(
        e.to_string().contains("featurizer.onnx"),
        "should name the file: {e}"
    );
}

#[test]
fn malformed_schema_json_names_the_key() {
    let e = load_err("malformed-schema-json");
    assert!(e.to_string().contains("dashrank.schedule_schema"), "{e}");
}

#[test]
fn not_a_bundle_directory() {
    let e = Model::load(repo().join("src"), &options()).unwrap_err();
    assert!(e.to_string().contains("no .onnx files"), "{e}");
    let e = Model::load(repo().join("does-not-exist"), &options()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Io { .. }), "{e:?}");
}

#[test]
fn random_bytes_as_onnx_are_rejected() {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(fixture("tiny-waco-spmm")).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "onnx") {
            let mut bytes = std::fs::read(&p).unwrap();
            if p.file_name().unwrap() == "matrix_embedder.onnx" {
                // Flip the first bytes: the protobuf framing itself is broken.
                for b in &mut bytes[..48] {
                    *b = !*b;
                }
            }
            files.push((p.file_name().unwrap().to_string_lossy().into_owned(), bytes));
        }
    }
    // Either the protobuf decoder or a later check must refuse it; it must not panic.
    if let Ok(model) = Model::from_files(files, &options()) {
        panic!("corrupted matrix embedder loaded: {:?}", model.info());
    }
}

#[test]
fn corrupt_matrix_files_name_the_problem() {
    let good = CsrPattern::read_waco_csr(bad("good-small.csr")).unwrap();
    assert_eq!((good.nrows(), good.ncols()), (4, 5));
    for (file, needle) in [
        ("truncated.csr", "truncated"),
        ("column-out-of-range.csr", "column"),
        ("row-ptr-not-monotone.csr", "row"),
    ] {
        let e = CsrPattern::read_waco_csr(bad(file)).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Pattern { .. }),
            "{file}: {e:?}"
        );
        assert!(
            e.to_string().to_lowercase().contains(needle),
            "{file}: '{e}' should mention {needle}"
        );
    }
    let e = CsrPattern::read_matrix_market(bad("malformed.mtx")).unwrap_err();
    match e.kind() {
        ErrorKind::Pattern { line: Some(_), .. } => {}
        other => panic!("malformed.mtx should report a line number: {other:?}"),
    }
}

#[test]
fn out_of_vocabulary_schedules_fail_alone() {
    let model = load(&fixture("tiny-waco-spmm"));
    let head = model.info().heads[0].name.clone();
    let lines = [
        "1 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1",
        "1 1 256 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1", // jsplit 256 not in [1..128]
        "1 1 1 i1 i1 k1 k0 j1 j0 1 0 0 0 i1 48 1",   // repeated loop
        "1 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48",     // too few tokens
        "1 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1 = fast",
    ];
    let set = model.prepare_candidates(&head, &lines).unwrap();
    assert!(set.status(0).unwrap().is_valid());
    for (i, needle) in [(1, "256"), (2, "i1"), (3, "16"), (4, "fast")] {
        match set.status(i).unwrap() {
            CandidateStatus::InvalidSchedule(e) => {
                assert!(
                    matches!(e.kind(), ErrorKind::Schedule { .. }),
                    "#{i}: {e:?}"
                );
                assert!(
                    e.to_string().contains(needle),
                    "#{i}: '{e}' should mention {needle}"
                );
            }
            other => panic!("line #{i} should be invalid, is {other:?}"),
        }
    }
    let pattern = CsrPattern::new(2, 2, vec![0, 1, 2], vec![0, 1]).unwrap();
    let m = model.embed_matrix(&pattern).unwrap();
    let top = model.top_k(&m, &set, 5).unwrap();
    assert_eq!(top.iter().map(|r| r.index).collect::<Vec<_>>(), vec![0]);
    let mut short = vec![0.0; 2];
    let e = model.score_into(&m, &set, &mut short).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::InvalidArgument { .. }),
        "{e:?}"
    );
    let e = model.prepare_candidates("gpu/nothing", &lines).unwrap_err();
    assert!(
        e.to_string().contains("cpu-taco/spmm"),
        "should list the heads: {e}"
    );
}

#[test]
fn an_unavailable_ort_backend_is_an_error() {
    // The model under test loads; asking for an ort backend this build lacks, or for a
    // second ort backend in the same process, fails with BackendUnavailable.
    let _model = load(&fixture("tiny-waco-spmm"));
    let missing_ort = dashrank::Backend::OnnxRuntime {
        library: "/nonexistent/libonnxruntime.so".into(),
    };
    let other = match backend() {
        dashrank::Backend::Tract => missing_ort,
        dashrank::Backend::OnnxRuntime { .. } => dashrank::Backend::Tract,
        dashrank::Backend::Native if cfg!(feature = "tract") => missing_ort,
        dashrank::Backend::Native => dashrank::Backend::Tract,
    };
    let options = dashrank::LoadOptions {
        backend: other,
        ..dashrank::LoadOptions::default()
    };
    let e = Model::load(fixture("tiny-waco-spmm"), &options).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::BackendUnavailable { .. }),
        "{e:?}"
    );
}

#[test]
fn schema_width_disagreeing_with_the_graph_is_rejected() {
    let e = load_err("schedule-width-mismatch");
    let text = e.to_string();
    assert!(
        text.contains("46") && text.contains("45"),
        "should give both widths: {text}"
    );
}

#[test]
fn unknown_kernel_lists_the_known_ones() {
    let e = load_err("unknown-kernel");
    let text = e.to_string();
    assert!(text.contains("spgemm") && text.contains("sddmm"), "{text}");
}

#[test]
fn head_without_predictor_is_rejected() {
    let e = load_err("missing-predictor");
    assert!(e.to_string().contains("no predictor"), "{e}");
}

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

// === integrity and provenance (docs/bundle-format.md §7) ===

/// The `.onnx` files and the manifest of a bundle directory, as `Model::from_files` takes them.
fn bundle_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".onnx") || name == "manifest.json" {
            files.push((name, std::fs::read(&p).unwrap()));
        }
    }
    files.sort();
    files
}

/// `files` with `manifest.json` rewritten for the `.onnx` files as they are now (what
/// `python -m dashrank_onnx.manifest DIR --write` does after a deliberate edit).
fn with_fresh_manifest(mut files: Vec<(String, Vec<u8>)>) -> Vec<(String, Vec<u8>)> {
    files.retain(|(n, _)| n != "manifest.json");
    let manifest = manifest_for(&files);
    files.push(("manifest.json".into(), manifest));
    files
}

/// tiny-cognate with `spade__spmm.*` replaced by the files of another COGNATE model, as a user
/// copying them into the directory would do (the manifest stays tiny-cognate's).
fn tiny_cognate_with_foreign_head() -> Vec<(String, Vec<u8>)> {
    let mut files = bundle_files(&fixture("tiny-cognate"));
    for (name, bytes) in bundle_files(&bad("foreign-head")) {
        let slot = files.iter_mut().find(|(n, _)| *n == name).unwrap();
        slot.1 = bytes;
    }
    files
}

fn hashes_in(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_ascii_hexdigit())
        .filter(|w| w.len() == 64)
        .collect()
}

#[test]
fn foreign_head_is_refused_naming_the_head_and_both_hashes() {
    let own = load(&fixture("tiny-cognate"));
    let own_featurizer = own.info().integrity.featurizer_sha256.clone();
    let e = Model::from_files(tiny_cognate_with_foreign_head(), &options()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Bundle { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("head 'spade/spmm'"), "{text}");
    assert!(text.contains("spade__spmm."), "names the file: {text}");
    let hashes = hashes_in(&text);
    assert_eq!(hashes.len(), 2, "both hashes: {text}");
    assert!(
        hashes.contains(&own_featurizer.as_str()) && hashes[0] != hashes[1],
        "{text}"
    );
    assert!(
        text.contains("allow_provenance_mismatch"),
        "says how to override: {text}"
    );
    // Also refused once the manifest is rewritten: provenance is not the manifest's job.
    let e = Model::from_files(
        with_fresh_manifest(tiny_cognate_with_foreign_head()),
        &options(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("head 'spade/spmm'"), "{e}");
}

#[test]
fn provenance_override_is_explicit_and_leaves_other_heads_alone() {
    let expert = dashrank::LoadOptions {
        allow_provenance_mismatch: true,
        ..options()
    };
    // A plain copy still fails the manifest, naming a copied file.
    let e = Model::from_files(tiny_cognate_with_foreign_head(), &expert).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("spade__spmm.") && text.contains("does not match manifest.json"),
        "{text}"
    );
    // After a deliberate manifest rewrite, the override loads it and reports every mismatch.
    let mixed = Model::from_files(
        with_fresh_manifest(tiny_cognate_with_foreign_head()),
        &expert,
    )
    .unwrap();
    let overrides = &mixed.info().integrity.provenance_overrides;
    assert_eq!(
        overrides.len(),
        4,
        "2 files x (featurizer, mapper): {overrides:?}"
    );
    assert!(
        overrides.iter().all(|o| o.contains("spade/spmm")),
        "{overrides:?}"
    );
    let own = load(&fixture("tiny-cognate"));
    let pattern = CsrPattern::read_waco_csr(bad("good-small.csr")).unwrap();
    let line = ["4 1024 32 6 7 2 4 1 3 5 0 0 0"];
    let score = |m: &Model, head: &str| {
        let set = m.prepare_candidates(head, &line).unwrap();
        let emb = m.embed_matrix(&pattern).unwrap();
        let mut s = [0.0f32];
        m.score_into(&emb, &set, &mut s).unwrap();
        s[0]
    };
    assert_ne!(score(&own, "spade/spmm"), score(&mixed, "spade/spmm"));
    assert_eq!(score(&own, "spade/sddmm"), score(&mixed, "spade/sddmm"));
}

#[test]
fn flipped_weight_byte_is_reported_naming_the_file() {
    let e = load_err("corrupted-weight");
    assert!(matches!(e.kind(), ErrorKind::Bundle { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("cpu-taco__spmm.predictor.onnx")
            && text.contains("does not match manifest.json"),
        "{text}"
    );
    // A flipped featurizer byte: named by the manifest; and with the manifest rewritten to
    // hide it, by the featurizer hash the files record.
    let mut files = bundle_files(&fixture("tiny-waco-spmm"));
    let feat = &mut files
        .iter_mut()
        .find(|(n, _)| n == "featurizer.onnx")
        .unwrap()
        .1;
    let at = feat.len() / 2;
    feat[at] ^= 0x01;
    let e = Model::from_files(files.clone(), &options()).unwrap_err();
    assert!(
        e.to_string().contains("featurizer.onnx") && e.to_string().contains("manifest.json"),
        "{e}"
    );
    let e = Model::from_files(with_fresh_manifest(files), &options()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("featurizer.onnx") && text.contains("weights hash to"),
        "{text}"
    );
}

#[test]
fn bundle_without_manifest_is_refused_with_the_way_out() {
    let e = load_err("no-manifest");
    let text = e.to_string();
    assert!(
        text.contains("manifest") && text.contains("--stamp"),
        "{text}"
    );
}

#[test]
fn manifest_listing_must_match_the_files() {
    let files = bundle_files(&fixture("tiny-waco-spmm"));
    // a listed file that is missing
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&files.iter().find(|(n, _)| n == "manifest.json").unwrap().1)
            .unwrap();
    manifest["files"]["old-head.predictor.onnx"] = serde_json::json!({"bytes": 1, "sha256": "00"});
    let replaced = |text: &[u8]| {
        let mut edited = files.clone();
        edited
            .iter_mut()
            .find(|(n, _)| n == "manifest.json")
            .unwrap()
            .1 = text.to_vec();
        edited
    };
    let e = Model::from_files(replaced(manifest.to_string().as_bytes()), &options()).unwrap_err();
    assert!(
        e.to_string().contains("old-head.predictor.onnx") && e.to_string().contains("missing"),
        "{e}"
    );
    // an unlisted file
    manifest["files"]
        .as_object_mut()
        .unwrap()
        .remove("old-head.predictor.onnx");
    manifest["files"]
        .as_object_mut()
        .unwrap()
        .remove("matrix_embedder.onnx");
    let e = Model::from_files(replaced(manifest.to_string().as_bytes()), &options()).unwrap_err();
    assert!(
        e.to_string().contains("matrix_embedder.onnx") && e.to_string().contains("not listed"),
        "{e}"
    );
    // not a manifest at all
    let e = Model::from_files(replaced(b"{\"format\": \"zip\"}"), &options()).unwrap_err();
    assert!(e.to_string().contains("manifest.json"), "{e}");
}

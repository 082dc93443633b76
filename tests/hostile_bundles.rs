//! Model bundles as untrusted input: the symlink rule, non-regular entries, size limits and
//! protobuf limits. Every rejection must name the file and the reason.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use dashrank::model::BundleLimits;
use dashrank::{ErrorKind, LoadOptions, Model};

const PREDICTOR: &str = "cpu-taco__spmm.predictor.onnx";

/// A fresh copy of the tiny WACO fixture bundle.
fn copy_fixture(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "dashrank-hostile-bundle-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(fixture("tiny-waco-spmm")).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    dir
}

fn load_with(dir: &Path, limits: BundleLimits) -> dashrank::Result<Model> {
    Model::load(
        dir,
        &LoadOptions {
            limits,
            ..options()
        },
    )
}

/// Loading fails with a bundle error whose text contains every one of `needles`.
fn assert_rejected(dir: &Path, limits: BundleLimits, needles: &[&str]) {
    let e = match load_with(dir, limits) {
        Ok(_) => panic!("{}: loading should fail", dir.display()),
        Err(e) => e,
    };
    assert!(matches!(e.kind(), ErrorKind::Bundle { .. }), "{e:?}");
    let text = e.to_string();
    for n in needles {
        assert!(text.contains(n), "'{n}' missing from: {text}");
    }
}

#[test]
fn symlinks_inside_the_bundle_are_followed() {
    let dir = copy_fixture("link-inside");
    std::fs::rename(dir.join(PREDICTOR), dir.join("predictor.bin")).unwrap();
    std::os::unix::fs::symlink("predictor.bin", dir.join(PREDICTOR)).unwrap();
    load_with(&dir, BundleLimits::default()).expect("an alias inside the bundle loads");
    // The bundle directory itself may be reached through a link.
    let link = dir.with_extension("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    load_with(&link, BundleLimits::default()).expect("a linked bundle directory loads");
    std::fs::remove_file(link).ok();
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn symlinks_leaving_the_bundle_are_refused() {
    let dir = copy_fixture("link-outside");
    std::fs::remove_file(dir.join(PREDICTOR)).unwrap();
    // Straight out, to a valid bundle file elsewhere.
    let outside = fixture("tiny-waco-spmm").join(PREDICTOR);
    std::os::unix::fs::symlink(&outside, dir.join(PREDICTOR)).unwrap();
    let limits = BundleLimits::default();
    assert_rejected(&dir, limits, &[PREDICTOR, "outside the bundle directory"]);
    // Through an inner link that itself leaves.
    std::fs::remove_file(dir.join(PREDICTOR)).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("hop")).unwrap();
    std::os::unix::fs::symlink("hop", dir.join(PREDICTOR)).unwrap();
    assert_rejected(&dir, limits, &[PREDICTOR, "outside the bundle directory"]);
    // Into a subdirectory of the bundle: still not a file of the bundle itself.
    std::fs::remove_file(dir.join(PREDICTOR)).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::copy(&outside, dir.join("sub/p.onnx")).unwrap();
    std::os::unix::fs::symlink("sub/p.onnx", dir.join(PREDICTOR)).unwrap();
    assert_rejected(
        &dir,
        limits,
        &[PREDICTOR, "in a subdirectory of the bundle directory"],
    );
    // Dangling.
    std::fs::remove_file(dir.join(PREDICTOR)).unwrap();
    std::os::unix::fs::symlink("missing.bin", dir.join(PREDICTOR)).unwrap();
    assert_rejected(&dir, limits, &[PREDICTOR, "target does not exist"]);
    // To a device.
    std::fs::remove_file(dir.join(PREDICTOR)).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join(PREDICTOR)).unwrap();
    assert_rejected(&dir, limits, &[PREDICTOR, "outside the bundle directory"]);
    // The manifest follows the same rule.
    std::fs::remove_file(dir.join(PREDICTOR)).unwrap();
    std::fs::copy(&outside, dir.join(PREDICTOR)).unwrap();
    let manifest = fixture("tiny-waco-spmm").join("manifest.json");
    std::fs::remove_file(dir.join("manifest.json")).unwrap();
    std::os::unix::fs::symlink(&manifest, dir.join("manifest.json")).unwrap();
    assert_rejected(
        &dir,
        limits,
        &["manifest.json", "outside the bundle directory"],
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn non_regular_entries_are_named() {
    let dir = copy_fixture("special");
    std::fs::create_dir(dir.join("extra.onnx")).unwrap();
    assert_rejected(
        &dir,
        BundleLimits::default(),
        &["extra.onnx", "a directory"],
    );
    std::fs::remove_dir(dir.join("extra.onnx")).unwrap();
    let fifo = dir.join("pipe.onnx");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        // Must be refused without being opened (opening a FIFO would block).
        assert_rejected(&dir, BundleLimits::default(), &["pipe.onnx", "a FIFO"]);
    } else {
        eprintln!("SKIPPED: mkfifo unavailable");
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn size_limits_name_the_file_and_the_limit() {
    let dir = copy_fixture("sizes");
    let d = BundleLimits::default();
    // The largest file is the only one over the limit.
    let (largest, len) = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().extension().is_some_and(|x| x == "onnx"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .max_by_key(|(_, len)| *len)
        .unwrap();
    assert_rejected(
        &dir,
        BundleLimits {
            max_file_bytes: len - 1,
            ..d
        },
        &[&largest, "BundleLimits::max_file_bytes"],
    );
    assert_rejected(
        &dir,
        BundleLimits {
            max_bundle_bytes: len + 10,
            ..d
        },
        &["BundleLimits::max_bundle_bytes"],
    );
    assert_rejected(
        &dir,
        BundleLimits { max_files: 3, ..d },
        &["BundleLimits::max_files = 3"],
    );
    // The same limits hold for in-memory bundles.
    let files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "onnx")
                || p.file_name().is_some_and(|n| n == "manifest.json")
        })
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    let opts = |limits| LoadOptions {
        limits,
        ..options()
    };
    let e = Model::from_files(
        files.clone(),
        &opts(BundleLimits {
            max_file_bytes: 100,
            ..d
        }),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("BundleLimits::max_file_bytes = 100"),
        "{e}"
    );
    Model::from_files(files, &opts(d)).expect("defaults accept the fixture");
    std::fs::remove_dir_all(dir).ok();
}

/// Appends a second `graph` field (protobuf merges it into the first) holding `body`.
fn append_graph(path: &Path, body: &[u8]) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes.push(7 << 3 | 2);
    let mut n = body.len();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            bytes.push(b);
            break;
        }
        bytes.push(b | 0x80);
    }
    bytes.extend_from_slice(body);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn protobuf_element_limits() {
    // One empty node more than allowed: 2 bytes of file each, ~150 bytes each once decoded.
    let dir = copy_fixture("elements");
    let n = dashrank::model::DEFAULT_MAX_PROTO_ELEMENTS + 1;
    let nodes: Vec<u8> = std::iter::repeat_n([1 << 3 | 2, 0], n).flatten().collect();
    append_graph(&dir.join("matrix_embedder.onnx"), &nodes);
    assert_rejected(
        &dir,
        BundleLimits::default(),
        &["matrix_embedder.onnx", "BundleLimits::max_proto_elements"],
    );
    std::fs::remove_dir_all(&dir).ok();
    // A packed dims list of 2^26 + 1 one-byte varints inside one initializer.
    let dir = copy_fixture("numbers");
    let dims = vec![1u8; (1 << 26) + 1];
    let mut tensor = vec![1 << 3 | 2];
    push_varint(&mut tensor, dims.len());
    tensor.extend(dims);
    let mut graph = vec![5 << 3 | 2];
    push_varint(&mut graph, tensor.len());
    graph.extend(tensor);
    append_graph(&dir.join("featurizer.onnx"), &graph);
    assert_rejected(
        &dir,
        BundleLimits::default(),
        &["featurizer.onnx", "BundleLimits::max_tensor_elements"],
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn external_tensor_data_is_refused_everywhere() {
    // initializer { name: "w" data_location: EXTERNAL } in a dense graph: never followed.
    let dir = copy_fixture("external");
    let tensor = [8 << 3 | 2, 1, b'w', 14 << 3, 1];
    let mut graph = vec![5 << 3 | 2, tensor.len() as u8];
    graph.extend_from_slice(&tensor);
    append_graph(&dir.join(PREDICTOR), &graph);
    assert_rejected(&dir, BundleLimits::default(), &[PREDICTOR, "external data"]);
    std::fs::remove_dir_all(dir).ok();
    // external_data entries on an attribute tensor of a node.
    let dir = copy_fixture("external-attr");
    let entry = [1 << 3 | 2, 1, b'k'];
    let tensor = [&[13 << 3 | 2, entry.len() as u8][..], &entry].concat();
    let attr = [&[5 << 3 | 2, tensor.len() as u8][..], &tensor].concat();
    let node = [&[5 << 3 | 2, attr.len() as u8][..], &attr].concat();
    let graph = [&[1 << 3 | 2, node.len() as u8][..], &node].concat();
    append_graph(&dir.join("matrix_embedder.onnx"), &graph);
    assert_rejected(
        &dir,
        BundleLimits::default(),
        &["matrix_embedder.onnx", "external data"],
    );
    std::fs::remove_dir_all(dir).ok();
}

fn push_varint(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

//! Bundle integrity and head provenance (`docs/bundle-format.md` §7), checked at load.
//!
//! - **Manifest** (`manifest.json`): the size and SHA-256 of every `.onnx` file. A file that
//!   differs (a flipped weight byte), an unlisted file and a listed file that is missing are
//!   load errors naming the file. A bundle without a manifest is refused (it was written before
//!   manifests existed; `python -m dashrank_onnx.manifest DIR --stamp` vouches for it).
//! - **Provenance**: every file records `dashrank.featurizer_sha256` and
//!   `dashrank.mapper_sha256`, the weight hashes of the featurizer (with the matrix embedder)
//!   and of the shared configuration mapper of the model it was exported with. A head whose
//!   files record other hashes than the bundle's belongs to another model and is refused,
//!   naming the head and both hashes, unless [`LoadOptions::allow_provenance_mismatch`]
//!   (logged as a warning). The recorded hashes are also recomputed from the weights, so a
//!   file edited after export is refused even with a re-written manifest.
//!
//! The hashes are SHA-256 over a canonical byte string of the weights as stored (converted to
//! f32), never over file bytes: `"dashrank-weights-v1\0"`, then per section
//! `u32 len(tag) · tag · u32 count`, then per tensor (float initializers of the section, in
//! byte order of their names) `u32 len(name) · name · u32 ndim · u64 dim… · f32 value…`, all
//! little-endian. The featurizer hash has the sections `featurizer` and `matrix_embedder` (all
//! their float initializers); the mapper hash has the section `mapper` (the schedule
//! embedder's initializers named `mapper.*`; none for a WACO head).
//!
//! [`LoadOptions::allow_provenance_mismatch`]: crate::LoadOptions::allow_provenance_mismatch

use sha2::{Digest, Sha256};

use super::decode::{Bundle, BundleFile};
use super::manifest::{hex, BundleIntegrity, Manifest, ManifestEntry};
use super::names::{FEATURIZER_KEY, MANIFEST_FILE, MAPPER_KEY, MAPPER_PREFIX};
use crate::error::{Error, Result};
use crate::featurize::spec::TensorSpec;

const STAMP_HINT: &str = "written before manifests and provenance hashes existed? re-export it, \
     or vouch for the files as they are with `python -m dashrank_onnx.manifest DIR --stamp`";

/// Canonical weight hasher (module docs).
struct WeightsHash(Sha256);

impl WeightsHash {
    fn new() -> Self {
        let mut h = Sha256::new();
        h.update(b"dashrank-weights-v1\0");
        Self(h)
    }

    fn u32(&mut self, n: usize) -> Result<()> {
        let n = u32::try_from(n)
            .map_err(|_| Error::bundle("weights hash", format!("length {n} exceeds u32")))?;
        self.0.update(n.to_le_bytes());
        Ok(())
    }

    /// Adds a section: the float initializers of `file` whose names start with `prefix`.
    fn section(&mut self, tag: &str, file: &BundleFile, prefix: &str) -> Result<()> {
        let mut tensors: Vec<&TensorSpec> = file
            .float_initializers()
            .filter(|t| t.name.starts_with(prefix))
            .collect();
        tensors.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        self.tensors(tag, &tensors)
    }

    /// Adds a section of tensors, in the order given.
    fn tensors<T: std::borrow::Borrow<TensorSpec>>(
        &mut self,
        tag: &str,
        tensors: &[T],
    ) -> Result<()> {
        self.u32(tag.len())?;
        self.0.update(tag.as_bytes());
        self.u32(tensors.len())?;
        // The values' little-endian bytes, fed to the hasher a block at a time.
        let mut buf = Vec::with_capacity(4096);
        for spec in tensors {
            let spec = spec.borrow();
            self.u32(spec.name.len())?;
            self.0.update(spec.name.as_bytes());
            self.u32(spec.dims.len())?;
            for &d in &spec.dims {
                self.0.update((d as u64).to_le_bytes());
            }
            for block in spec.data.chunks(1024) {
                buf.clear();
                for v in block {
                    buf.extend_from_slice(&v.to_le_bytes());
                }
                self.0.update(&buf);
            }
        }
        Ok(())
    }

    fn finish(self) -> String {
        hex(self.0.finalize().as_slice())
    }
}

/// The featurizer hash computed from the bundle's featurizer and matrix embedder weights.
pub(crate) fn featurizer_sha256(featurizer: &BundleFile, matrix: &BundleFile) -> Result<String> {
    let mut h = WeightsHash::new();
    h.section("featurizer", featurizer, "")?;
    h.section("matrix_embedder", matrix, "")?;
    Ok(h.finish())
}

/// The mapper hash computed from a schedule embedder's `mapper.*` weights.
pub(crate) fn mapper_sha256(schedule_embedder: &BundleFile) -> Result<String> {
    let mut h = WeightsHash::new();
    h.section("mapper", schedule_embedder, MAPPER_PREFIX)?;
    Ok(h.finish())
}

fn recorded<'a>(file: &'a BundleFile, key: &str) -> Result<&'a str> {
    file.get(key).ok_or_else(|| {
        Error::bundle(
            format!("{}: {key}", file.origin),
            format!("missing metadata key ({STAMP_HINT})"),
        )
    })
}

/// Checks the manifest and the provenance of a decoded bundle (module docs, in this order:
/// manifest present, head provenance, manifest contents, recorded hashes vs weights).
pub(crate) fn verify(bundle: &Bundle, allow_mismatch: bool) -> Result<BundleIntegrity> {
    let manifest = bundle.manifest.as_ref().ok_or_else(|| {
        Error::bundle(
            MANIFEST_FILE,
            format!("the bundle has no manifest, so its files cannot be checked for corruption ({STAMP_HINT})"),
        )
    })?;
    let recorded = recorded_hashes(bundle)?;
    let overrides = check_head_provenance(bundle, manifest, &recorded, allow_mismatch)?;
    let files = check_manifest(bundle, manifest)?;
    check_weights(bundle, &recorded)?;
    Ok(BundleIntegrity {
        featurizer_sha256: recorded.featurizer.to_string(),
        mapper_sha256: recorded.mapper.to_string(),
        files,
        provenance_overrides: overrides,
    })
}

/// The featurizer and mapper hashes a bundle records (in its featurizer file).
struct Recorded<'a> {
    featurizer: &'a str,
    mapper: &'a str,
}

/// The hashes the featurizer records, which the matrix embedder must record as well.
fn recorded_hashes(bundle: &Bundle) -> Result<Recorded<'_>> {
    let (feat, matrix) = (&bundle.featurizer, &bundle.matrix_embedder);
    let hashes = Recorded {
        featurizer: recorded(feat, FEATURIZER_KEY)?,
        mapper: recorded(feat, MAPPER_KEY)?,
    };
    for (key, want) in [
        (FEATURIZER_KEY, hashes.featurizer),
        (MAPPER_KEY, hashes.mapper),
    ] {
        let got = recorded(matrix, key)?;
        if got != want {
            return Err(Error::bundle(
                format!("{}: {key}", matrix.origin),
                format!(
                    "records {got}, the featurizer ('{}') records {want}: the two files come from different exports",
                    feat.origin
                ),
            ));
        }
    }
    Ok(hashes)
}

/// Every head's files record the bundle's hashes; a mismatch is an error, or with
/// `allow_mismatch` a warning returned as one override message per file and key.
fn check_head_provenance(
    bundle: &Bundle,
    manifest: &Manifest,
    bundle_hashes: &Recorded<'_>,
    allow_mismatch: bool,
) -> Result<Vec<String>> {
    let mut overrides = Vec::new();
    for (head, se, pr) in &bundle.heads {
        for file in [se, pr] {
            for (key, what, want) in [
                (FEATURIZER_KEY, "featurizer", bundle_hashes.featurizer),
                (MAPPER_KEY, "configuration mapper", bundle_hashes.mapper),
            ] {
                let got = recorded(file, key)?;
                if got == want {
                    continue;
                }
                let mut reason = format!(
                    "head '{head}' was trained with {what} {got}, but this bundle's {what} is {want}: \
                     the head belongs to another model"
                );
                if !manifest.matches(&file.origin, file.bytes.len(), &file.sha256) {
                    reason.push_str(&format!(
                        " (the file also differs from {MANIFEST_FILE}: copied in or modified after export)"
                    ));
                }
                if !allow_mismatch {
                    reason.push_str(
                        "; load it anyway only with LoadOptions::allow_provenance_mismatch \
                         (CLI: --allow-provenance-mismatch)",
                    );
                    return Err(Error::bundle(format!("{}: {key}", file.origin), reason));
                }
                log::warn!(
                    "{}: {reason} (accepted: allow_provenance_mismatch)",
                    file.origin
                );
                overrides.push(format!("{}: {reason}", file.origin));
            }
        }
    }
    Ok(overrides)
}

/// The recorded hashes match the weights as stored: the featurizer's, and each head's mapper.
fn check_weights(bundle: &Bundle, recorded_hashes: &Recorded<'_>) -> Result<()> {
    let (feat, matrix) = (&bundle.featurizer, &bundle.matrix_embedder);
    let f_bundle = recorded_hashes.featurizer;
    let f_weights = featurizer_sha256(feat, matrix)?;
    if f_weights != f_bundle {
        return Err(Error::bundle(
            format!("{} + {}: {FEATURIZER_KEY}", feat.origin, matrix.origin),
            format!(
                "the files record featurizer {f_bundle}, but their weights hash to {f_weights}: \
                 a file was modified after export or is corrupted"
            ),
        ));
    }
    for (head, se, _) in &bundle.heads {
        let want = recorded(se, MAPPER_KEY)?;
        let got = mapper_sha256(se)?;
        if got != want {
            return Err(Error::bundle(
                format!("{}: {MAPPER_KEY}", se.origin),
                format!(
                    "head '{head}' records configuration mapper {want}, but its mapper weights hash to \
                     {got}: the file was modified after export or is corrupted"
                ),
            ));
        }
    }
    Ok(())
}

/// Every file matches the manifest and every listed file is present; returns the entries.
fn check_manifest(bundle: &Bundle, manifest: &Manifest) -> Result<Vec<ManifestEntry>> {
    let mut files: Vec<(&BundleFile, Option<&str>)> =
        vec![(&bundle.featurizer, None), (&bundle.matrix_embedder, None)];
    for (head, se, pr) in &bundle.heads {
        files.push((se, Some(head)));
        files.push((pr, Some(head)));
    }
    files.sort_by(|a, b| a.0.origin.cmp(&b.0.origin));
    let mut entries = Vec::with_capacity(files.len());
    for (file, head) in files {
        let Some((bytes, sha)) = manifest.files.get(&file.origin) else {
            return Err(Error::bundle(
                file.origin.clone(),
                format!(
                    "not listed in {MANIFEST_FILE} (copied in after export? if deliberate, rewrite the \
                     manifest with `python -m dashrank_onnx.manifest DIR --write`)"
                ),
            ));
        };
        let got = file.sha256.clone();
        if got != *sha || file.bytes.len() as u64 != *bytes {
            return Err(Error::bundle(
                file.origin.clone(),
                format!(
                    "content does not match {MANIFEST_FILE} (sha256 {got}, {} bytes; manifest: {sha}, \
                     {bytes} bytes): the file is corrupted or was modified after export (if the edit \
                     is deliberate: `python -m dashrank_onnx.manifest DIR --write`)",
                    file.bytes.len()
                ),
            ));
        }
        entries.push(ManifestEntry {
            name: file.origin.clone(),
            bytes: *bytes,
            sha256: got,
            role: file.role.as_str().to_string(),
            head: head.map(str::to_string),
        });
    }
    if let Some(missing) = manifest
        .files
        .keys()
        .find(|name| !entries.iter().any(|e| &e.name == *name))
    {
        return Err(Error::bundle(
            missing.clone(),
            format!("listed in {MANIFEST_FILE} but missing from the bundle"),
        ));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, dims: &[usize], data: &[f32]) -> TensorSpec {
        TensorSpec {
            name: name.into(),
            dims: dims.to_vec(),
            data: data.to_vec(),
        }
    }

    fn hash(sections: &[(&str, Vec<TensorSpec>)]) -> String {
        let mut h = WeightsHash::new();
        for (tag, t) in sections {
            h.tensors(tag, t).unwrap();
        }
        h.finish()
    }

    /// The same vectors are pinned in onnx/tests/test_convert_cognate.py
    /// (`test_weight_hash_vectors`): the Rust and Python definitions agree byte for byte.
    #[test]
    fn canonical_weight_hash_vectors() {
        assert_eq!(
            hash(&[("mapper", vec![])]),
            "d2929111e0e3b708344f21e78a5f0f0a1909c9b07a8da96c6adc5d65356f4026"
        );
        let mapper = vec![
            spec("mapper.0.bias", &[2], &[1.0, -0.5]),
            spec("mapper.0.weight", &[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
        ];
        assert_eq!(
            hash(&[("mapper", mapper)]),
            "ba81f87351df9ee880acc36220e79dab2b1fd44308b571ced4dc11eb2ecf5469"
        );
        let scalar = vec![spec("s", &[], &[2.0])];
        assert_eq!(
            hash(&[("featurizer", vec![]), ("matrix_embedder", scalar)]),
            "1892af85beb161e7e73d2ce148b90804dcf1fc64c1d9d0fbd173dc957ddfa8cd"
        );
    }

    #[test]
    fn manifest_parse_rejects_other_formats() {
        let ok = br#"{"format":"dashrank-manifest","version":1,"algorithm":"sha256",
                      "files":{"a.onnx":{"bytes":3,"sha256":"ab"}}}"#;
        let m = Manifest::parse(ok).unwrap();
        assert!(m.matches("a.onnx", 3, "ab") && !m.matches("a.onnx", 4, "ab"));
        for bad in [
            &br#"{"format":"dashrank-manifest","version":2,"algorithm":"sha256","files":{}}"#[..],
            br#"{"format":"dashrank-manifest","version":1,"algorithm":"md5","files":{}}"#,
            br#"{"format":"dashrank-manifest","version":1,"algorithm":"sha256","files":{"a":{"bytes":1}}}"#,
            b"not json",
        ] {
            let e = Manifest::parse(bad).unwrap_err();
            assert!(e.to_string().contains(MANIFEST_FILE), "{e}");
        }
    }
}

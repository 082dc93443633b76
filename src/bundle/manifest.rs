//! The manifest (`manifest.json`: size and SHA-256 of every `.onnx` file) and what loading
//! reports about a bundle's integrity. Parsing only; [`super::integrity`] checks a bundle
//! against it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::names::MANIFEST_FILE;
use crate::error::{Error, Result};

/// One bundle file as listed in its manifest and verified at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    /// File name inside the bundle.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the file's bytes, lowercase hex.
    pub sha256: String,
    /// The file's `dashrank.role`.
    pub role: String,
    /// The head the file belongs to (schedule embedders and predictors).
    pub head: Option<String>,
}

/// What loading verified about a bundle's integrity and provenance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BundleIntegrity {
    /// Weight hash of the featurizer and matrix embedder (lowercase hex SHA-256).
    pub featurizer_sha256: String,
    /// Weight hash of the shared configuration mapper (of the empty set for WACO bundles).
    pub mapper_sha256: String,
    /// The manifest: every `.onnx` file, in name order.
    pub files: Vec<ManifestEntry>,
    /// Provenance mismatches accepted because of
    /// [`LoadOptions::allow_provenance_mismatch`](crate::LoadOptions::allow_provenance_mismatch),
    /// one message per file (empty otherwise).
    pub provenance_overrides: Vec<String>,
}

#[derive(Deserialize)]
struct ManifestJson {
    format: String,
    version: u32,
    algorithm: String,
    files: BTreeMap<String, EntryJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryJson {
    bytes: u64,
    sha256: String,
}

/// A parsed `manifest.json`: file name → (size, SHA-256 hex).
#[derive(Debug, Clone)]
pub(crate) struct Manifest {
    pub(super) files: BTreeMap<String, (u64, String)>,
}

impl Manifest {
    /// Parses `manifest.json` (`dashrank-manifest` version 1, algorithm `sha256`).
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self> {
        let m: ManifestJson = serde_json::from_slice(bytes)
            .map_err(|e| Error::bundle(MANIFEST_FILE, format!("not a valid manifest: {e}")))?;
        if m.format != "dashrank-manifest" || m.version != 1 || m.algorithm != "sha256" {
            return Err(Error::bundle(
                MANIFEST_FILE,
                format!(
                    "format '{}' version {} algorithm '{}': this library reads dashrank-manifest version 1 (sha256)",
                    m.format, m.version, m.algorithm
                ),
            ));
        }
        Ok(Self {
            files: m
                .files
                .into_iter()
                .map(|(k, e)| (k, (e.bytes, e.sha256)))
                .collect(),
        })
    }

    /// Whether `name` is listed with exactly this size and digest.
    pub(crate) fn matches(&self, name: &str, len: usize, sha256: &str) -> bool {
        self.files
            .get(name)
            .is_some_and(|(n, h)| *n == len as u64 && h == sha256)
    }
}

/// Lowercase hex SHA-256 of some bytes.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(Sha256::digest(bytes).as_slice())
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

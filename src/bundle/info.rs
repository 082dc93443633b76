//! Typed model facts, parsed once from bundle metadata (bundle-format §2–§5).
//!
//! After loading, no code looks metadata up by string: everything a caller or the runtime
//! needs is a typed field here.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

use crate::error::{Error, Result};

pub use super::names::{MAX_FORMAT_VERSION, MIN_FORMAT_VERSION};
pub use crate::vocab::{Kernel, Target};

/// Which direction of the score means "faster".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScorePolarity {
    /// Lower scores are predicted to run faster (WACO, COGNATE ranking scores).
    LowerIsBetter,
    /// Higher scores are predicted to run faster (TVM-style normalized throughput).
    HigherIsBetter,
}

impl ScorePolarity {
    /// Orders two scores so that the better one comes first; NaN sorts last.
    pub fn compare(self, a: f32, b: f32) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        match (a.is_nan(), b.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => match self {
                ScorePolarity::LowerIsBetter => a.total_cmp(&b),
                ScorePolarity::HigherIsBetter => b.total_cmp(&a),
            },
        }
    }
}

impl ScorePolarity {
    /// The canonical text form used in bundle metadata (`lower_is_better`,
    /// `higher_is_better`).
    pub fn as_str(self) -> &'static str {
        match self {
            ScorePolarity::LowerIsBetter => "lower_is_better",
            ScorePolarity::HigherIsBetter => "higher_is_better",
        }
    }
}

impl FromStr for ScorePolarity {
    type Err = Error;

    /// Parses the canonical text form.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) listing the names.
    fn from_str(s: &str) -> Result<Self> {
        [ScorePolarity::LowerIsBetter, ScorePolarity::HigherIsBetter]
            .into_iter()
            .find(|p| p.as_str() == s.trim())
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "unknown score polarity '{}' (expected one of: lower_is_better, higher_is_better)",
                    s.trim()
                ))
            })
    }
}

impl fmt::Display for ScorePolarity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A matrix shape statistic fed to the matrix embedder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapeFeature {
    /// Number of rows.
    Rows,
    /// Number of columns.
    Cols,
    /// Number of stored entries.
    Nnz,
}

/// Standardization of the shape side-input: `(x − mean) / std` per feature.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeNormalization {
    /// Features in input order.
    pub features: Vec<ShapeFeature>,
    /// Per-feature mean.
    pub mean: Vec<f64>,
    /// Per-feature standard deviation (> 0).
    pub std: Vec<f64>,
    /// Where the constants come from (free text from the bundle).
    pub source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShapeNormalizationJson {
    features: Vec<String>,
    mean: Vec<f64>,
    std: Vec<f64>,
    #[serde(default)]
    source: String,
}

impl ShapeNormalization {
    const KEY: &'static str = "dashrank.shape_normalization";

    /// Parses and validates the `dashrank.shape_normalization` JSON value.
    pub fn from_json(text: &str) -> Result<Self> {
        let raw: ShapeNormalizationJson = serde_json::from_str(text)
            .map_err(|e| Error::bundle(Self::KEY, format!("malformed JSON: {e}")))?;
        let n = raw.features.len();
        if n == 0 || raw.mean.len() != n || raw.std.len() != n {
            return Err(Error::bundle(
                Self::KEY,
                format!(
                    "features, mean and std must have the same non-zero length (got {}, {}, {})",
                    n,
                    raw.mean.len(),
                    raw.std.len()
                ),
            ));
        }
        let features = raw
            .features
            .iter()
            .map(|f| match f.as_str() {
                "rows" => Ok(ShapeFeature::Rows),
                "cols" => Ok(ShapeFeature::Cols),
                "nnz" => Ok(ShapeFeature::Nnz),
                other => Err(Error::bundle(
                    Self::KEY,
                    format!("unknown shape feature '{other}' (expected rows, cols or nnz)"),
                )),
            })
            .collect::<Result<Vec<_>>>()?;
        for (j, (&m, &s)) in raw.mean.iter().zip(&raw.std).enumerate() {
            if !m.is_finite() || !s.is_finite() || s <= 0.0 {
                return Err(Error::bundle(
                    Self::KEY,
                    format!(
                        "feature '{}' needs a finite mean and a finite std > 0 (got mean {m}, std {s})",
                        raw.features[j]
                    ),
                ));
            }
        }
        Ok(Self {
            features,
            mean: raw.mean,
            std: raw.std,
            source: raw.source,
        })
    }

    /// Standardized features for a matrix with the given shape.
    pub fn apply(&self, rows: usize, cols: usize, nnz: usize) -> Vec<f32> {
        self.features
            .iter()
            .zip(self.mean.iter().zip(&self.std))
            .map(|(f, (m, s))| {
                let x = match f {
                    ShapeFeature::Rows => rows,
                    ShapeFeature::Cols => cols,
                    ShapeFeature::Nnz => nnz,
                } as f64;
                ((x - m) / s) as f32
            })
            .collect()
    }
}

/// The arithmetic of a head on the native engine, counted from its compiled program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeadCost {
    /// Multiply-adds per candidate at preparation (`CostModel::prepare_candidates`), table
    /// rows counted as one add per value.
    pub prepare_macs: usize,
    /// Multiply-adds per matrix (the matrix half of the folded predictor).
    pub matrix_macs: usize,
    /// Multiply-adds per (matrix, candidate) pair when scoring.
    pub score_macs: usize,
    /// Floats stored per prepared candidate.
    pub stored_floats: usize,
}

/// Facts about one head (a schedule embedder + predictor pair).
#[derive(Debug, Clone, PartialEq)]
pub struct HeadInfo {
    /// Head name, e.g. `cpu-taco/spmm`.
    pub name: String,
    /// Kernel.
    pub kernel: Kernel,
    /// Target.
    pub target: Target,
    /// Score polarity.
    pub polarity: ScorePolarity,
    /// What the score means (free text from the bundle).
    pub score_meaning: String,
    /// Name of the schedule schema.
    pub schema_name: String,
    /// Width of one encoded schedule row.
    pub schedule_width: usize,
    /// Width of the schedule embedding.
    pub schedule_embedding_dim: usize,
    /// The head's arithmetic when it runs on the native engine (`None` on `ort`).
    pub cost: Option<HeadCost>,
}

/// Which engine runs one dense graph of a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphEngine {
    /// The bundle file of the graph.
    pub file: String,
    /// `native`, `tract` or `onnxruntime`.
    pub engine: String,
    /// Why the native engine does not run it, when it runs on a fallback.
    pub note: Option<String>,
}

/// Facts about a loaded model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// Bundle format version.
    pub format_version: u32,
    /// Model family, e.g. `waco`.
    pub family: String,
    /// Model name.
    pub model_name: String,
    /// Width of the featurizer output.
    pub featurizer_dim: usize,
    /// Width of the matrix embedding.
    pub matrix_embedding_dim: usize,
    /// Shape normalization constants.
    pub shape_normalization: ShapeNormalization,
    /// Heads, sorted by name.
    pub heads: Vec<HeadInfo>,
    /// The backend asked for ([`Backend::name`](crate::Backend::name)).
    pub backend: String,
    /// The engine of every dense graph, in load order (matrix embedder, then per head its
    /// schedule embedder and predictor).
    pub engines: Vec<GraphEngine>,
    /// Instruction-set level of the native kernels.
    pub simd: crate::simd::SimdLevel,
    /// Stable hash of the bundle's files: their names and SHA-256 digests (used to key
    /// caches).
    pub content_hash: u64,
    /// The manifest and provenance hashes verified at load (bundle-format §7).
    pub integrity: super::manifest::BundleIntegrity,
}

impl ModelInfo {
    /// The head with this name: the one head lookup of the library (the C ABI, the TVM
    /// module and the CLI all go through it).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::UnknownHead`](crate::ErrorKind::UnknownHead) listing the model's heads.
    ///
    /// # Example
    /// ```
    /// use dashrank::{ErrorKind, LoadOptions, Model};
    /// let model = Model::load("tests/data/fixtures/tiny-waco-spmm", &LoadOptions::default())?;
    /// assert_eq!(model.info().head("cpu-taco/spmm")?.kernel, dashrank::Kernel::SpMM);
    /// let err = model.info().head("spade/spmm").unwrap_err();
    /// assert!(matches!(err.kind(), ErrorKind::UnknownHead { .. }));
    /// # Ok::<(), dashrank::Error>(())
    /// ```
    pub fn head(&self, name: &str) -> Result<&HeadInfo> {
        self.heads
            .get(self.head_index(name)?)
            .ok_or_else(|| self.unknown_head(name))
    }

    /// The position of head `name` in [`ModelInfo::heads`].
    ///
    /// # Errors
    ///
    /// [`ErrorKind::UnknownHead`](crate::ErrorKind::UnknownHead) listing the model's heads.
    pub fn head_index(&self, name: &str) -> Result<usize> {
        self.heads
            .iter()
            .position(|h| h.name == name)
            .ok_or_else(|| self.unknown_head(name))
    }

    /// The one head of `info` that matches every given criterion: its name, its target, its
    /// kernel. With no criterion, the model's only head.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::UnknownHead`](crate::ErrorKind::UnknownHead) for a name the model lacks;
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when no head or several
    /// heads match (the message lists the heads with their targets and kernels).
    ///
    /// # Example
    /// ```
    /// use dashrank::{LoadOptions, Model, Target};
    /// let model = Model::load("tests/data/fixtures/tiny-cognate", &LoadOptions::default())?;
    /// let h = model.info().select_head(None, Some(Target::GpuSparseTir), None)?;
    /// assert_eq!(h.name, "gpu-sparsetir/spmm");
    /// // Two SPADE heads (SpMM, SDDMM): the kernel must be named.
    /// assert!(model.info().select_head(None, Some(Target::Spade), None).is_err());
    /// # Ok::<(), dashrank::Error>(())
    /// ```
    pub fn select_head(
        &self,
        head: Option<&str>,
        target: Option<Target>,
        kernel: Option<Kernel>,
    ) -> Result<&HeadInfo> {
        if let Some(name) = head {
            let h = self.head(name)?;
            let wrong =
                target.is_some_and(|t| t != h.target) || kernel.is_some_and(|k| k != h.kernel);
            if wrong {
                return Err(Error::invalid_argument(format!(
                    "head {name} ranks {} {} schedules, not {}",
                    h.target,
                    h.kernel,
                    wanted(target, kernel)
                )));
            }
            return Ok(h);
        }
        let matching: Vec<&HeadInfo> = self
            .heads
            .iter()
            .filter(|h| {
                target.is_none_or(|t| t == h.target) && kernel.is_none_or(|k| k == h.kernel)
            })
            .collect();
        match matching.as_slice() {
            [one] => Ok(one),
            [] => Err(Error::invalid_argument(format!(
                "the model has no head for {} (heads: {})",
                wanted(target, kernel),
                describe_heads(&self.heads)
            ))),
            several => Err(Error::invalid_argument(format!(
                "the model has {} heads for {}; choose one ({})",
                several.len(),
                wanted(target, kernel),
                describe_heads(several.iter().copied())
            ))),
        }
    }

    /// The head names, in [`ModelInfo::heads`] order.
    pub fn head_names(&self) -> impl Iterator<Item = &str> {
        self.heads.iter().map(|h| h.name.as_str())
    }

    fn unknown_head(&self, name: &str) -> Error {
        Error::unknown_head(name, self.head_names())
    }
}

/// Parses a vocabulary value read from bundle metadata `key`; a bad value is a
/// [`ErrorKind::Bundle`](crate::ErrorKind::Bundle) error at that key.
pub(crate) fn parse_metadata<T: std::str::FromStr<Err = Error>>(
    key: &str,
    text: &str,
) -> Result<T> {
    text.parse::<T>().map_err(|e| {
        let reason = match e.kind() {
            crate::ErrorKind::InvalidArgument { reason } => reason.clone(),
            other => other.to_string(),
        };
        Error::bundle(key, reason)
    })
}

fn wanted(target: Option<Target>, kernel: Option<Kernel>) -> String {
    match (target, kernel) {
        (Some(t), Some(k)) => format!("{t} {k}"),
        (Some(t), None) => format!("target {t}"),
        (None, Some(k)) => format!("kernel {k}"),
        (None, None) => "any target".to_owned(),
    }
}

fn describe_heads<'a>(heads: impl IntoIterator<Item = &'a HeadInfo>) -> String {
    let all: Vec<String> = heads
        .into_iter()
        .map(|h| {
            if h.name == format!("{}/{}", h.target, h.kernel) {
                h.name.clone()
            } else {
                format!("{} ({} {})", h.name, h.target, h.kernel)
            }
        })
        .collect();
    all.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polarity_orders_and_sorts_nan_last() {
        use std::cmp::Ordering::*;
        let lo = ScorePolarity::LowerIsBetter;
        assert_eq!(lo.compare(1.0, 2.0), Less);
        assert_eq!(ScorePolarity::HigherIsBetter.compare(1.0, 2.0), Greater);
        assert_eq!(lo.compare(f32::NAN, -1e30), Greater);
    }

    #[test]
    fn shape_normalization_validates() {
        let ok = ShapeNormalization::from_json(
            r#"{"features":["rows","cols","nnz"],"mean":[1,2,3],"std":[1,1,2],"source":"t"}"#,
        )
        .unwrap();
        assert_eq!(ok.apply(2, 2, 7), vec![1.0, 0.0, 2.0]);
        let bad = ShapeNormalization::from_json(r#"{"features":["rows"],"mean":[1],"std":[0]}"#)
            .unwrap_err();
        assert!(bad.to_string().contains("std"), "{bad}");
        assert!(
            ShapeNormalization::from_json(r#"{"features":["area"],"mean":[1],"std":[1]}"#).is_err()
        );
    }

    #[test]
    fn metadata_values_are_bundle_errors_at_their_key() {
        assert_eq!(
            parse_metadata::<Kernel>("dashrank.kernel", "sddmm").unwrap(),
            Kernel::SDDMM
        );
        let e = parse_metadata::<Target>("dashrank.target", "gpu").unwrap_err();
        match e.kind() {
            crate::ErrorKind::Bundle { key, reason } => {
                assert_eq!(key, "dashrank.target");
                assert!(reason.contains("gpu-sparsetir"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let e = parse_metadata::<ScorePolarity>("dashrank.score_polarity", "up").unwrap_err();
        assert!(matches!(e.kind(), crate::ErrorKind::Bundle { .. }), "{e:?}");
    }
}

//! Model bundles and their execution: load a bundle directory, featurize a matrix, embed
//! schedules, predict scores.
//!
//! [`Model`] is immutable after loading and `Send + Sync`; every method takes `&self`. The
//! ranking API ([`crate::rank::CostModel`]) is implemented on it.

use std::path::Path;
use std::sync::Arc;

use ndarray::{Array2, ArrayView2};

use crate::error::{Error, Result};
use crate::featurize::{FeaturizeOptions, FeaturizerGraph};
use crate::pattern::CsrPattern;
use crate::schedule::Schema;
use crate::simd::SimdLevel;

mod bundle;
mod bundle_dir;
mod cache;
pub mod executor;
pub mod info;
mod limits;
mod onnx_proto;

use bundle::Bundle;
use cache::MatrixCache;
pub use cache::MatrixEmbedding;
pub use executor::Backend;
use executor::DenseGraph;
pub use info::{
    HeadInfo, Kernel, ModelInfo, ScorePolarity, ShapeFeature, ShapeNormalization, Target,
    MAX_FORMAT_VERSION, MIN_FORMAT_VERSION,
};
pub use limits::{
    BundleLimits, DEFAULT_MAX_BUNDLE_BYTES, DEFAULT_MAX_FILES, DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_PROTO_ELEMENTS, DEFAULT_MAX_TENSOR_ELEMENTS, MAX_PROTO_DEPTH,
};

/// Options for [`Model::load`].
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Engine for the dense ONNX graphs.
    pub backend: Backend,
    /// Threads for the featurizer and the dense graphs; `None` uses all cores.
    pub threads: Option<usize>,
    /// How many matrix embeddings to keep (keyed by pattern hash); 0 disables the cache.
    pub matrix_cache_capacity: usize,
    /// Run the dense graphs with one intra-op thread, so that scores are bit-identical on any
    /// machine load and thread count. The featurizer and top-k are deterministic either way
    /// (fixed accumulation order, ties broken by index); this pins the ONNX backend, whose
    /// multi-threaded kernels may split reductions differently. Default `false`.
    pub deterministic: bool,
    /// Instruction-set level of the native kernels (featurizer, dense heads); `None` uses
    /// [`SimdLevel::best`]. Every level gives bit-identical results (see [`crate::simd`]);
    /// forcing one is for tests and for comparing speed. A level the CPU lacks is an error.
    pub simd: Option<SimdLevel>,
    /// Limits on the bundle's files (sizes, protobuf contents); see [`BundleLimits`].
    pub limits: BundleLimits,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            backend: Backend::default(),
            threads: None,
            matrix_cache_capacity: 64,
            deterministic: false,
            simd: None,
            limits: BundleLimits::default(),
        }
    }
}

/// Rows per predictor call: bounds the memory of one call on huge candidate sets.
const PREDICT_CHUNK: usize = 8192;

/// One head: the schema, schedule embedder and predictor for a (target, kernel).
#[derive(Debug)]
pub(crate) struct Head {
    pub info: HeadInfo,
    pub schema: Schema,
    schedule_embedder: Box<dyn DenseGraph>,
    predictor: Box<dyn DenseGraph>,
}

/// A loaded cost model.
///
/// # Threads
/// A `Model` is immutable after loading, `Send + Sync`, and used through `&self`: share one
/// `Arc<Model>` between threads. Internal scratch (ort sessions, the embedding cache) is
/// pooled or locked internally.
///
/// # Example
/// ```
/// use dashrank::{CostModel, CsrPattern, LoadOptions, Model};
/// let model = Model::load("tests/data/fixtures/tiny-waco-spmm", &LoadOptions::default())?;
/// let pattern = CsrPattern::new(4, 4, vec![0, 1, 2, 3, 4], vec![0, 1, 2, 3])?;
/// let head = model.info().heads[0].name.clone();
/// let lines = ["1 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1"];
/// let candidates = model.prepare_candidates(&head, &lines)?;
/// let matrix = model.embed_matrix(&pattern)?;
/// let best = model.top_k(&matrix, &candidates, 1)?;
/// assert_eq!(best.len(), 1);
/// # Ok::<(), dashrank::Error>(())
/// ```
#[derive(Debug)]
pub struct Model {
    info: ModelInfo,
    featurizer: FeaturizerGraph,
    featurize_options: FeaturizeOptions,
    matrix_embedder: Box<dyn DenseGraph>,
    heads: Vec<Head>,
    cache: MatrixCache,
}

impl Model {
    /// Loads a bundle directory (see `docs/bundle-format.md`).
    pub fn load(dir: impl AsRef<Path>, options: &LoadOptions) -> Result<Self> {
        let bundle = Bundle::read_dir(dir.as_ref(), &options.limits)?;
        Self::from_bundle(bundle, options)
    }

    /// Loads a bundle from in-memory files `(file name, bytes)`.
    pub fn from_files(files: Vec<(String, Vec<u8>)>, options: &LoadOptions) -> Result<Self> {
        Self::from_bundle(Bundle::from_files(files, &options.limits)?, options)
    }

    fn from_bundle(bundle: Bundle, options: &LoadOptions) -> Result<Self> {
        let f = &bundle.featurizer;
        let featurizer = FeaturizerGraph::from_spec(&f.featurizer_spec()?)?;
        let featurizer_dim = featurizer.output_dim();

        let me = &bundle.matrix_embedder;
        me.expect_io(&["conv_features", "shape_features"], &["matrix_embedding"])?;
        let shape_normalization =
            ShapeNormalization::from_json(me.require("dashrank.shape_normalization")?)?;
        if let Some(d) = me.last_dim("conv_features") {
            if d != featurizer_dim {
                return Err(Error::bundle(
                    format!("{}: conv_features", me.origin),
                    format!("declares width {d} but the featurizer produces {featurizer_dim}"),
                ));
            }
        }
        if let Some(d) = me.last_dim("shape_features") {
            if d != shape_normalization.features.len() {
                return Err(Error::bundle(
                    format!("{}: shape_features", me.origin),
                    format!(
                        "declares width {d} but dashrank.shape_normalization lists {} features",
                        shape_normalization.features.len()
                    ),
                ));
            }
        }
        let simd = match options.simd {
            Some(level) => level.require()?,
            None => SimdLevel::best(),
        };
        let featurize_options = FeaturizeOptions {
            threads: options.threads,
            simd,
        };
        // Intra-op threads of the dense graphs.
        let threads = if options.deterministic {
            Some(1)
        } else {
            options.threads
        };
        let backend = &options.backend;
        let matrix_embedder =
            executor::build_graph(backend, &me.origin, &me.bytes, "matrix_embedding", threads)?;

        // Probe the matrix embedder once to learn its width.
        let probe_conv = Array2::<f32>::zeros((1, featurizer_dim));
        let probe_shape = Array2::<f32>::zeros((1, shape_normalization.features.len()));
        let probe = matrix_embedder.run(&[
            ("conv_features", probe_conv.view()),
            ("shape_features", probe_shape.view()),
        ])?;
        let matrix_embedding_dim = probe.ncols();

        let mut heads = Vec::with_capacity(bundle.heads.len());
        for (name, se, pr) in &bundle.heads {
            se.expect_io(&["schedule"], &["schedule_embedding"])?;
            pr.expect_io(&["matrix_embedding", "schedule_embedding"], &["score"])?;
            let kernel = se.require("dashrank.kernel")?.parse::<Kernel>()?;
            let target = se.require("dashrank.target")?.parse::<Target>()?;
            for (key, value) in [
                ("dashrank.kernel", kernel.as_str()),
                ("dashrank.target", target.as_str()),
            ] {
                let theirs = pr.require(key)?;
                if theirs != value {
                    return Err(Error::bundle(
                        format!("{}: {key}", pr.origin),
                        format!("'{theirs}' disagrees with the schedule embedder's '{value}'"),
                    ));
                }
            }
            let polarity = pr
                .require("dashrank.score_polarity")?
                .parse::<ScorePolarity>()?;
            let schema = Schema::from_json(se.require("dashrank.schedule_schema")?)?;
            let width = schema.encoded_width();
            if let Some(d) = se.last_dim("schedule") {
                if d != width {
                    return Err(Error::bundle(
                        format!("{}: schedule", se.origin),
                        format!("graph input has width {d} but the schema encodes {width} columns"),
                    ));
                }
            }
            let schedule_embedder = executor::build_graph(
                backend,
                &se.origin,
                &se.bytes,
                "schedule_embedding",
                threads,
            )?;
            let predictor =
                executor::build_graph(backend, &pr.origin, &pr.bytes, "score", threads)?;
            let probe_rows = Array2::<f32>::zeros((1, width));
            let sched_dim = schedule_embedder
                .run(&[("schedule", probe_rows.view())])?
                .ncols();
            let probe_s = Array2::<f32>::zeros((1, sched_dim));
            let probe_score = predictor.run(&[
                ("matrix_embedding", probe.view()),
                ("schedule_embedding", probe_s.view()),
            ])?;
            if probe_score.dim() != (1, 1) {
                return Err(Error::bundle(
                    format!("{}: score", pr.origin),
                    format!("predictor must output [N, 1], got {:?}", probe_score.dim()),
                ));
            }
            heads.push(Head {
                info: HeadInfo {
                    name: name.clone(),
                    kernel,
                    target,
                    polarity,
                    score_meaning: pr.get("dashrank.score_meaning").unwrap_or("").to_string(),
                    schema_name: schema.name().to_string(),
                    schedule_width: width,
                    schedule_embedding_dim: sched_dim,
                },
                schema,
                schedule_embedder,
                predictor,
            });
        }

        let info = ModelInfo {
            format_version: f.format_version,
            family: f.require("dashrank.family")?.to_string(),
            model_name: f.get("dashrank.model_name").unwrap_or("").to_string(),
            featurizer_dim,
            matrix_embedding_dim,
            shape_normalization,
            heads: heads.iter().map(|h| h.info.clone()).collect(),
            backend: backend.name().to_string(),
            simd,
            content_hash: bundle.content_hash,
        };
        log::info!(
            "loaded {} model '{}' ({} heads, backend {})",
            info.family,
            info.model_name,
            info.heads.len(),
            info.backend
        );
        Ok(Self {
            info,
            featurizer,
            featurize_options,
            matrix_embedder,
            heads,
            cache: MatrixCache::new(options.matrix_cache_capacity),
        })
    }

    /// Facts about this model.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The schedule schema of a head.
    pub fn schema(&self, head: &str) -> Result<&Schema> {
        Ok(&self.head(head)?.schema)
    }

    pub(crate) fn head(&self, name: &str) -> Result<&Head> {
        self.heads
            .iter()
            .find(|h| h.info.name == name)
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "model has no head '{name}' (heads: {})",
                    self.heads
                        .iter()
                        .map(|h| h.info.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }

    pub(crate) fn head_index(&self, name: &str) -> Result<usize> {
        let head = self.head(name)?;
        Ok(self
            .heads
            .iter()
            .position(|h| std::ptr::eq(h, head))
            .unwrap_or_default())
    }

    pub(crate) fn head_at(&self, index: usize) -> &Head {
        &self.heads[index]
    }

    /// Runs the featurizer alone: the pooled conv features of a pattern.
    pub fn conv_features(&self, pattern: &CsrPattern) -> Result<Vec<f32>> {
        self.featurizer.run(pattern, &self.featurize_options)
    }

    /// Computes a matrix embedding, using the cache when enabled.
    pub(crate) fn embed_matrix_cached(&self, pattern: &CsrPattern) -> Result<MatrixEmbedding> {
        let key = pattern.content_hash();
        if let Some(hit) = self.cache.get(key) {
            return Ok(hit);
        }
        let conv = self.conv_features(pattern)?;
        let shape =
            self.info
                .shape_normalization
                .apply(pattern.nrows(), pattern.ncols(), pattern.nnz());
        let conv_view = ArrayView2::from_shape((1, conv.len()), &conv)
            .map_err(|e| Error::executor("matrix_embedder", e.to_string()))?;
        let shape_view = ArrayView2::from_shape((1, shape.len()), &shape)
            .map_err(|e| Error::executor("matrix_embedder", e.to_string()))?;
        let out = self
            .matrix_embedder
            .run(&[("conv_features", conv_view), ("shape_features", shape_view)])?;
        let values: Vec<f32> = out.iter().copied().collect();
        if let Some(bad) = values.iter().position(|v| !v.is_finite()) {
            return Err(Error::executor(
                "matrix_embedder",
                format!("non-finite matrix embedding at index {bad}"),
            ));
        }
        let embedding = MatrixEmbedding::new(values, conv, key, self.info.content_hash);
        self.cache.insert(key, embedding.clone());
        Ok(embedding)
    }

    /// Embeds encoded schedule rows `[n, width]` with a head's schedule embedder.
    pub(crate) fn embed_schedule_rows(
        &self,
        head: &Head,
        rows: ArrayView2<'_, f32>,
    ) -> Result<Array2<f32>> {
        if rows.nrows() == 0 {
            return Ok(Array2::zeros((0, head.info.schedule_embedding_dim)));
        }
        let mut out = Array2::<f32>::zeros((rows.nrows(), head.info.schedule_embedding_dim));
        for (start, chunk) in (0..rows.nrows())
            .step_by(PREDICT_CHUNK)
            .zip(rows.axis_chunks_iter(ndarray::Axis(0), PREDICT_CHUNK))
        {
            let emb = head.schedule_embedder.run(&[("schedule", chunk)])?;
            out.slice_mut(ndarray::s![start..start + chunk.nrows(), ..])
                .assign(&emb);
        }
        Ok(out)
    }

    /// Scores schedule embeddings against one matrix embedding into `out`.
    pub(crate) fn predict_into(
        &self,
        head: &Head,
        matrix: &MatrixEmbedding,
        schedule_embeddings: ArrayView2<'_, f32>,
        out: &mut [f32],
    ) -> Result<()> {
        let n = schedule_embeddings.nrows();
        debug_assert_eq!(out.len(), n);
        let m = matrix.values();
        for (start, chunk) in (0..n)
            .step_by(PREDICT_CHUNK)
            .zip(schedule_embeddings.axis_chunks_iter(ndarray::Axis(0), PREDICT_CHUNK))
        {
            let rows = chunk.nrows();
            let tiled = ArrayView2::from_shape((1, m.len()), m)
                .map_err(|e| Error::executor("predictor", e.to_string()))?
                .broadcast((rows, m.len()))
                .ok_or_else(|| Error::executor("predictor", "cannot tile the matrix embedding"))?
                .to_owned();
            let scores = head.predictor.run(&[
                ("matrix_embedding", tiled.view()),
                ("schedule_embedding", chunk),
            ])?;
            if scores.dim() != (rows, 1) {
                return Err(Error::executor(
                    head.info.name.clone(),
                    format!(
                        "predictor returned shape {:?}, expected ({rows}, 1)",
                        scores.dim()
                    ),
                ));
            }
            out[start..start + rows].copy_from_slice(scores.as_slice().unwrap_or(&[]));
        }
        Ok(())
    }
}

// A compile-time check that the model can be shared between threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Model>();
    assert_send_sync::<Arc<Model>>();
};

//! Model bundles and their execution: load a bundle directory, featurize a matrix, embed
//! schedules, predict scores.
//!
//! [`Model`] is immutable after loading and `Send + Sync`; every method takes `&self`. The
//! ranking API ([`crate::rank::CostModel`]) is implemented on it.
//!
//! The dense graphs run on the native engine (`native`, the default: folded layers compiled
//! at load, see its module docs) or on an `ort` backend ([`Backend`]); [`ModelInfo::engines`]
//! says which engine runs each graph.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ndarray::Array2;

use crate::error::{Error, Result};
use crate::featurize::{FeaturizeOptions, FeaturizerGraph};
use crate::schedule::Schema;
use crate::simd::SimdLevel;

mod cache;
pub mod executor;
mod native;
mod run;
pub(crate) mod tasks;

pub use crate::bundle::info;
use crate::bundle::{Bundle, BundleFile};
pub use crate::bundle::{BundleIntegrity, ManifestEntry};
pub use crate::bundle::{
    BundleLimits, DEFAULT_MAX_BUNDLE_BYTES, DEFAULT_MAX_FILES, DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_PROTO_ELEMENTS, DEFAULT_MAX_TENSOR_ELEMENTS, DEFAULT_NATIVE_BUDGET_BASE,
    DEFAULT_NATIVE_BUDGET_PER_BYTE, MAX_PROTO_DEPTH,
};
use cache::MatrixCache;
pub use cache::MatrixEmbedding;
pub use executor::Backend;
use executor::DenseGraph;
pub use info::{
    GraphEngine, HeadCost, HeadInfo, Kernel, ModelInfo, ScorePolarity, ShapeFeature,
    ShapeNormalization, Target, MAX_FORMAT_VERSION, MIN_FORMAT_VERSION,
};
use native::{Exec, NativeHead, NativeMatrixEmbedder};
pub(crate) use run::Prepared;

/// Options for [`Model::load`].
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Engine for the dense graphs; [`Backend::Native`] by default.
    pub backend: Backend,
    /// With [`Backend::Native`]: the `ort` backend for graphs the native engine does not
    /// recognise (foreign exporters). `None` makes such a graph a load error.
    /// [`Backend::default_fallback`] by default (tract when compiled in).
    pub fallback: Option<Backend>,
    /// Threads for the featurizer and the dense graphs; `None` uses all cores: rayon's global
    /// pool, and for the native heads' small calls (a few 128-candidate tasks) a process-wide
    /// helper team of `cores - 1` threads that spin briefly after a call and then park (see
    /// `src/model/tasks.rs`). `Some(n)` runs in a rayon pool of `n` threads per calling
    /// thread, shared by every model that thread calls with the same `n` (started with the
    /// first, ended with the last or with the thread); with `Some(1)` only the featurizer
    /// uses its one-thread pool, the rest runs on the calling thread. Threads calling at once
    /// therefore never wait for each other's pool, and the thread budget is the sum of the
    /// distinct `n` in use per calling thread, plus the global pool and the helper team when
    /// some model uses `None` (see `docs/reliability.md`), however many models are alive.
    pub threads: Option<usize>,
    /// How many matrix embeddings to keep (keyed by the pattern's SHA-256 digest,
    /// [`CsrPattern::content_digest`](crate::CsrPattern::content_digest)); 0 disables the
    /// cache.
    pub matrix_cache_capacity: usize,
    /// Run `ort` graphs with one intra-op thread, so that their scores are bit-identical on
    /// any machine load and thread count. The native engine and the featurizer are
    /// deterministic either way (fixed accumulation orders, ties broken by index). Default
    /// `false`.
    pub deterministic: bool,
    /// Instruction-set level of the native kernels (featurizer, dense heads); `None` uses
    /// [`SimdLevel::best`]. Every level gives bit-identical results (see [`crate::simd`]);
    /// forcing one is for tests and for comparing speed. A level the CPU lacks is an error.
    pub simd: Option<SimdLevel>,
    /// Most bytes the featurizer may hold at once for one matrix; a matrix that would need
    /// more fails with [`ErrorKind::Featurize`](crate::ErrorKind::Featurize) (see
    /// [`FeaturizeOptions::memory_budget`]). Default 4 GiB; `usize::MAX` disables it.
    pub featurize_memory_budget: usize,
    /// Limits on the bundle's files (sizes, protobuf contents); see [`BundleLimits`].
    pub limits: BundleLimits,
    /// Load heads whose recorded provenance (the featurizer and mapper hashes they were
    /// trained with) differs from the bundle's: for experts who know the mix is intended. Each
    /// mismatch is logged as a warning and listed in [`BundleIntegrity::provenance_overrides`].
    /// Corrupted or edited files are refused either way. Default `false`.
    pub allow_provenance_mismatch: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            backend: Backend::default(),
            fallback: Backend::default_fallback(),
            threads: None,
            matrix_cache_capacity: 64,
            deterministic: false,
            simd: None,
            featurize_memory_budget: FeaturizeOptions::DEFAULT_MEMORY_BUDGET,
            limits: BundleLimits::default(),
            allow_provenance_mismatch: false,
        }
    }
}

/// How a head's dense graphs run.
#[derive(Debug)]
pub(crate) enum HeadExec {
    /// Folded native program.
    Native(NativeHead),
    /// The two graphs on `ort`.
    Ort {
        schedule_embedder: Box<dyn DenseGraph>,
        predictor: Box<dyn DenseGraph>,
    },
}

/// One head: the schema and the executor of a (target, kernel).
#[derive(Debug)]
pub(crate) struct Head {
    pub info: HeadInfo,
    pub schema: Schema,
    pub exec: HeadExec,
}

impl Head {
    /// True when the head runs on the native engine.
    pub(crate) fn is_native(&self) -> bool {
        matches!(self.exec, HeadExec::Native(_))
    }
}

/// How the matrix embedder runs.
#[derive(Debug)]
enum MatrixEmbedderExec {
    Native(NativeMatrixEmbedder),
    Ort(Box<dyn DenseGraph>),
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
    matrix_embedder: MatrixEmbedderExec,
    heads: Vec<Head>,
    cache: MatrixCache,
    /// Unique per loaded model in this process: embeddings and candidate sets are only
    /// accepted by the model instance that made them.
    instance: u64,
    exec: Exec,
    /// `n` when `threads` is `Some(n ≥ 2)`: the dense layers run in the calling thread's
    /// shared pool of `n` threads (the featurizer uses the same pool).
    dense_threads: Option<usize>,
    /// The pools the dense layers have used, one per calling thread.
    pools: crate::pools::CallerPools,
}

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// The engine report of one graph.
fn engine(file: &BundleFile, name: &str, note: Option<String>) -> GraphEngine {
    GraphEngine {
        file: file.origin.clone(),
        engine: name.to_string(),
        note,
    }
}

/// Options resolved for building `ort` graphs.
struct OrtSetup<'a> {
    backend: Option<&'a Backend>,
    threads: Option<usize>,
}

impl OrtSetup<'_> {
    /// Builds `file` on `ort`, or explains why the native engine could not run it and no
    /// fallback is available.
    fn build(
        &self,
        file: &BundleFile,
        output: &str,
        why: Option<&(String, String)>,
    ) -> Result<(Box<dyn DenseGraph>, GraphEngine)> {
        let Some(backend) = self.backend else {
            let (location, reason) = why
                .cloned()
                .unwrap_or_else(|| (file.origin.clone(), "unknown".into()));
            return Err(Error::bundle(
                location,
                format!(
                    "the native engine does not run this graph ({reason}) and no ort fallback is \
                     configured (build with feature `tract`, or set LoadOptions::fallback)"
                ),
            ));
        };
        let graph =
            executor::build_graph(backend, &file.origin, &file.bytes, output, self.threads)?;
        let note = why.map(|(location, reason)| format!("not native: {location}: {reason}"));
        Ok((graph, engine(file, backend.name(), note)))
    }
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
        let integrity = crate::bundle::verify(&bundle, options.allow_provenance_mismatch)?;
        let f = &bundle.featurizer;
        let featurizer = FeaturizerGraph::from_spec(&f.featurizer_spec()?)?;
        let featurizer_dim = featurizer.output_dim();
        let featurize_options = featurize_options(options)?;
        let simd = featurize_options.simd;
        let mut loader = Loader::new(options)?;
        let (matrix_embedder, shape_normalization) =
            loader.matrix_embedder(&bundle.matrix_embedder, featurizer_dim)?;
        let matrix_embedding_dim =
            matrix_embedder_width(&matrix_embedder, featurizer_dim, &shape_normalization)?;
        let heads = bundle
            .heads
            .iter()
            .map(|(name, se, pr)| loader.head(name, se, pr, matrix_embedding_dim))
            .collect::<Result<Vec<_>>>()?;
        let info = ModelInfo {
            format_version: f.format_version,
            family: f.require("dashrank.family")?.to_string(),
            model_name: f.get("dashrank.model_name").unwrap_or("").to_string(),
            featurizer_dim,
            matrix_embedding_dim,
            shape_normalization,
            heads: heads.iter().map(|h| h.info.clone()).collect(),
            backend: options.backend.name().to_string(),
            engines: loader.engines,
            simd,
            content_hash: bundle.content_hash,
            integrity,
        };
        log::info!(
            "loaded {} model '{}' ({} heads, backend {}, SIMD {})",
            info.family,
            info.model_name,
            info.heads.len(),
            info.backend,
            simd
        );
        let dense_threads = options.threads.filter(|&n| n >= 2);
        let pools = crate::pools::CallerPools::default();
        if let Some(n) = dense_threads {
            // Started now, so that a host that cannot start them learns it at load.
            pools
                .for_caller(n)
                .map_err(|e| Error::invalid_argument(format!("cannot start {n} threads: {e}")))?;
        }
        Ok(Self {
            info,
            featurizer,
            featurize_options,
            matrix_embedder,
            heads,
            cache: MatrixCache::new(options.matrix_cache_capacity),
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            exec: Exec {
                level: simd,
                parallel: options.threads != Some(1),
            },
            dense_threads,
            pools,
        })
    }

    /// Facts about this model.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The bundle's featurizer graph, the one [`Model::conv_features`] runs (with the load
    /// options' threads and memory budget): for callers that want a run's statistics or
    /// options of their own.
    ///
    /// ```no_run
    /// use dashrank::featurize::FeaturizeOptions;
    /// use dashrank::{CsrPattern, LoadOptions, Model};
    ///
    /// let model = Model::load("models/waco-spmm", &LoadOptions::default())?;
    /// let pattern = CsrPattern::read_waco_csr("matrix.csr")?;
    /// let options = FeaturizeOptions { threads: Some(1), ..Default::default() };
    /// let (features, stats) = model.featurizer().run_with_stats(&pattern, &options)?;
    /// println!("{} features, {} multiply-adds", features.len(), stats.computed_macs);
    /// # Ok::<(), dashrank::Error>(())
    /// ```
    pub fn featurizer(&self) -> &FeaturizerGraph {
        &self.featurizer
    }

    /// The schedule schema of a head.
    pub fn schema(&self, head: &str) -> Result<&Schema> {
        Ok(&self.head(head)?.schema)
    }

    /// The head `name` ([`ModelInfo::head_index`]: `info.heads` and `heads` share one order).
    pub(crate) fn head(&self, name: &str) -> Result<&Head> {
        Ok(self.head_at(self.head_index(name)?))
    }

    pub(crate) fn head_index(&self, name: &str) -> Result<usize> {
        self.info.head_index(name)
    }

    pub(crate) fn head_at(&self, index: usize) -> &Head {
        &self.heads[index]
    }

    /// This model instance's identity (see [`MatrixEmbedding`]).
    pub(crate) fn instance(&self) -> u64 {
        self.instance
    }
}

/// The featurizer's options of a model loaded with `options` (SIMD level checked).
fn featurize_options(options: &LoadOptions) -> Result<FeaturizeOptions> {
    let simd = match options.simd {
        Some(level) => level.require()?,
        None => SimdLevel::best(),
    };
    if options.threads == Some(0) {
        return Err(Error::invalid_argument("threads must be at least 1"));
    }
    Ok(FeaturizeOptions {
        threads: options.threads,
        simd,
        memory_budget: options.featurize_memory_budget,
        ..FeaturizeOptions::default()
    })
}

/// The width of the matrix embedding: the native layers say it, an ort graph is probed.
fn matrix_embedder_width(
    exec: &MatrixEmbedderExec,
    featurizer_dim: usize,
    shape: &ShapeNormalization,
) -> Result<usize> {
    Ok(match exec {
        MatrixEmbedderExec::Native(n) => n.width(),
        MatrixEmbedderExec::Ort(g) => {
            let probe_conv = Array2::<f32>::zeros((1, featurizer_dim));
            let probe_shape = Array2::<f32>::zeros((1, shape.features.len()));
            g.run(&[
                ("conv_features", probe_conv.view()),
                ("shape_features", probe_shape.view()),
            ])?
            .ncols()
        }
    })
}

/// Compiles a bundle's dense graphs, each on the native engine or (when it cannot run one,
/// or is not chosen) on the ort backend, recording which engine runs which file.
struct Loader<'a> {
    options: &'a LoadOptions,
    native: bool,
    ort: OrtSetup<'a>,
    engines: Vec<GraphEngine>,
}

impl<'a> Loader<'a> {
    fn new(options: &'a LoadOptions) -> Result<Self> {
        let native = options.backend == Backend::Native;
        if matches!(options.fallback, Some(Backend::Native)) {
            return Err(Error::invalid_argument(
                "LoadOptions::fallback must be an ort backend (tract or onnxruntime), not native",
            ));
        }
        let ort = OrtSetup {
            backend: if native {
                options.fallback.as_ref()
            } else {
                Some(&options.backend)
            },
            // Intra-op threads of the ort graphs.
            threads: if options.deterministic {
                Some(1)
            } else {
                options.threads
            },
        };
        Ok(Self {
            options,
            native,
            ort,
            engines: Vec::new(),
        })
    }

    /// The matrix embedder, checked against the featurizer's width and the shape features
    /// its metadata lists.
    fn matrix_embedder(
        &mut self,
        me: &BundleFile,
        featurizer_dim: usize,
    ) -> Result<(MatrixEmbedderExec, ShapeNormalization)> {
        me.expect_io(&["conv_features", "shape_features"], &["matrix_embedding"])?;
        let shape = ShapeNormalization::from_json(me.require("dashrank.shape_normalization")?)?;
        let n_shape = shape.features.len();
        for (input, width, what) in [
            ("conv_features", featurizer_dim, "the featurizer produces"),
            (
                "shape_features",
                n_shape,
                "dashrank.shape_normalization lists",
            ),
        ] {
            if let Some(d) = me.last_dim(input) {
                if d != width {
                    return Err(Error::bundle(
                        format!("{}: {input}", me.origin),
                        format!("declares width {d} but {what} {width}"),
                    ));
                }
            }
        }
        let mut why = None;
        if self.native {
            let limits = &self.options.limits;
            match NativeMatrixEmbedder::compile(me, featurizer_dim, n_shape, limits)? {
                Ok(n) => {
                    self.engines.push(engine(me, "native", None));
                    return Ok((MatrixEmbedderExec::Native(n), shape));
                }
                Err(u) => why = Some(u),
            }
        }
        let (g, e) = self.ort.build(me, "matrix_embedding", why.as_ref())?;
        self.engines.push(e);
        Ok((MatrixEmbedderExec::Ort(g), shape))
    }

    /// One head: its schedule embedder and predictor, compiled together.
    fn head(
        &mut self,
        name: &str,
        se: &BundleFile,
        pr: &BundleFile,
        matrix_embedding_dim: usize,
    ) -> Result<Head> {
        let (info, schema) = head_info(name, se, pr)?;
        let mut why = None;
        let mut exec = None;
        if self.native {
            let limits = &self.options.limits;
            match NativeHead::compile(se, pr, &schema, matrix_embedding_dim, limits)? {
                Ok(h) => {
                    self.engines.push(engine(se, "native", None));
                    self.engines.push(engine(pr, "native", None));
                    exec = Some(HeadExec::Native(h));
                }
                Err(u) => why = Some(u),
            }
        }
        let exec = match exec {
            Some(e) => e,
            None => ort_head(
                &self.ort,
                se,
                pr,
                &schema,
                matrix_embedding_dim,
                why,
                &mut self.engines,
            )?,
        };
        let (schedule_embedding_dim, cost) = match &exec {
            HeadExec::Native(h) => (h.embedding_width(), Some(h.cost())),
            HeadExec::Ort {
                schedule_embedder, ..
            } => (
                probe_width(schedule_embedder.as_ref(), schema.encoded_width())?,
                None,
            ),
        };
        Ok(Head {
            info: HeadInfo {
                schedule_embedding_dim,
                cost,
                ..info
            },
            schema,
            exec,
        })
    }
}

/// Kernel, target, polarity and schema of a head, checked against both files.
fn head_info(name: &str, se: &BundleFile, pr: &BundleFile) -> Result<(HeadInfo, Schema)> {
    se.expect_io(&["schedule"], &["schedule_embedding"])?;
    pr.expect_io(&["matrix_embedding", "schedule_embedding"], &["score"])?;
    let meta = |g: &BundleFile, key: &str| format!("{}: {key}", g.origin);
    let kernel: Kernel =
        info::parse_metadata(&meta(se, "dashrank.kernel"), se.require("dashrank.kernel")?)?;
    let target: Target =
        info::parse_metadata(&meta(se, "dashrank.target"), se.require("dashrank.target")?)?;
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
    let polarity: ScorePolarity = info::parse_metadata(
        &meta(pr, "dashrank.score_polarity"),
        pr.require("dashrank.score_polarity")?,
    )?;
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
    let info = HeadInfo {
        name: name.to_string(),
        kernel,
        target,
        polarity,
        score_meaning: pr.get("dashrank.score_meaning").unwrap_or("").to_string(),
        schema_name: schema.name().to_string(),
        schedule_width: width,
        schedule_embedding_dim: 0,
        cost: None,
    };
    Ok((info, schema))
}

/// A head on `ort`, probed once so that a graph the backend cannot run fails at load.
fn ort_head(
    ort: &OrtSetup<'_>,
    se: &BundleFile,
    pr: &BundleFile,
    schema: &Schema,
    matrix_width: usize,
    why: Option<(String, String)>,
    engines: &mut Vec<GraphEngine>,
) -> Result<HeadExec> {
    let (schedule_embedder, e1) = ort.build(se, "schedule_embedding", why.as_ref())?;
    let (predictor, e2) = ort.build(pr, "score", why.as_ref())?;
    engines.push(e1);
    engines.push(e2);
    let sched_dim = probe_width(schedule_embedder.as_ref(), schema.encoded_width())?;
    let probe_m = Array2::<f32>::zeros((1, matrix_width));
    let probe_s = Array2::<f32>::zeros((1, sched_dim));
    let probe_score = predictor.run(&[
        ("matrix_embedding", probe_m.view()),
        ("schedule_embedding", probe_s.view()),
    ])?;
    if probe_score.dim() != (1, 1) {
        return Err(Error::bundle(
            format!("{}: score", pr.origin),
            format!("predictor must output [N, 1], got {:?}", probe_score.dim()),
        ));
    }
    Ok(HeadExec::Ort {
        schedule_embedder,
        predictor,
    })
}

fn probe_width(schedule_embedder: &dyn DenseGraph, width: usize) -> Result<usize> {
    let probe_rows = Array2::<f32>::zeros((1, width));
    Ok(schedule_embedder
        .run(&[("schedule", probe_rows.view())])?
        .ncols())
}

// A compile-time check that the model can be shared between threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Model>();
    assert_send_sync::<Arc<Model>>();
};

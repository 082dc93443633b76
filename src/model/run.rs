//! Running a loaded model: matrix embeddings, prepared candidates, scores.

use ndarray::{Array2, ArrayView2};

use super::native::{CandidateRows, Exec};
use super::{Head, HeadExec, MatrixEmbedderExec, MatrixEmbedding, Model};
use crate::error::{Error, Result};
use crate::pattern::CsrPattern;

/// Rows per `ort` call: bounds the memory of one call on huge candidate sets.
const ORT_CHUNK: usize = 2048;

/// The schedule side of prepared candidates, as the head's engine needs it.
#[derive(Debug)]
pub(crate) enum Prepared {
    /// Per candidate, the native program's stored values (`v` of the folded predictor).
    Native(CandidateRows),
    /// Per candidate, the schedule embedding (scored by the `ort` predictor).
    Ort(Array2<f32>),
}

impl Prepared {
    /// Appends the rows of `other` (the same engine).
    pub(crate) fn append(&mut self, other: Prepared) {
        match (self, other) {
            (Prepared::Native(a), Prepared::Native(b)) => {
                // Moved when nothing is held or reserved; else copied into the reservation.
                if a.n == 0 && a.data.capacity() < b.data.len() {
                    *a = b;
                } else {
                    debug_assert_eq!(a.stride, b.stride);
                    a.data.extend_from_slice(&b.data);
                    a.n += b.n;
                }
            }
            (Prepared::Ort(a), Prepared::Ort(b)) => {
                if a.nrows() == 0 {
                    *a = b;
                } else if let Ok(joined) =
                    ndarray::concatenate(ndarray::Axis(0), &[a.view(), b.view()])
                {
                    *a = joined;
                }
            }
            _ => debug_assert!(false, "appending rows of another engine"),
        }
    }

    /// Rows held.
    pub(crate) fn len(&self) -> usize {
        match self {
            Prepared::Native(r) => r.n,
            Prepared::Ort(a) => a.nrows(),
        }
    }

    /// Reserves room for `more` rows (native rows; `ort` rows are joined on append).
    pub(crate) fn reserve(&mut self, more: usize) {
        if let Prepared::Native(r) = self {
            r.data.reserve(more * r.stride);
        }
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        match self {
            Prepared::Native(r) => r.data.len() * 4,
            Prepared::Ort(a) => a.len() * 4,
        }
    }
}

impl Model {
    /// Runs `f` in the calling thread's dense thread pool (if the model has one).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when the pool's
    /// threads cannot be started.
    pub(crate) fn in_pool<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Result<R> {
        let Some(n) = self.dense_threads else {
            return Ok(f());
        };
        self.pools
            .install(n, f)
            .map_err(|e| Error::invalid_argument(format!("cannot start {n} threads: {e}")))
    }

    fn exec(&self) -> Exec {
        self.exec
    }

    /// Whether calls may use more than one thread (`LoadOptions::threads` is not 1).
    pub(crate) fn parallel(&self) -> bool {
        self.exec.parallel
    }

    /// Runs the featurizer alone: the pooled conv features of a pattern.
    pub fn conv_features(&self, pattern: &CsrPattern) -> Result<Vec<f32>> {
        self.featurizer.run(pattern, &self.featurize_options)
    }

    /// Computes a matrix embedding, using the cache when enabled.
    pub(crate) fn embed_matrix_cached(&self, pattern: &CsrPattern) -> Result<MatrixEmbedding> {
        let key = pattern.content_digest();
        if let Some(hit) = self.cache.get(key) {
            return Ok(hit);
        }
        let conv = self.conv_features(pattern)?;
        let shape =
            self.info
                .shape_normalization
                .apply(pattern.nrows(), pattern.ncols(), pattern.nnz());
        let values = match &self.matrix_embedder {
            MatrixEmbedderExec::Native(n) => n.embed(self.exec.level, &conv, &shape),
            MatrixEmbedderExec::Ort(g) => {
                let conv_view = ArrayView2::from_shape((1, conv.len()), &conv)
                    .map_err(|e| Error::executor("matrix_embedder", e.to_string()))?;
                let shape_view = ArrayView2::from_shape((1, shape.len()), &shape)
                    .map_err(|e| Error::executor("matrix_embedder", e.to_string()))?;
                let out = g.run(&[("conv_features", conv_view), ("shape_features", shape_view)])?;
                out.iter().copied().collect()
            }
        };
        if let Some(bad) = values.iter().position(|v| !v.is_finite()) {
            return Err(Error::executor(
                "matrix_embedder",
                format!("non-finite matrix embedding at index {bad}"),
            ));
        }
        let embedding = MatrixEmbedding::new(
            values,
            conv,
            pattern.content_hash(),
            self.info.content_hash,
            self.instance(),
        );
        self.cache.insert(key, embedding.clone());
        Ok(embedding)
    }

    /// Prepares encoded schedule rows (`n × width`, row-major) for a head.
    pub(crate) fn prepare_rows(&self, head: &Head, rows: &[f32], n: usize) -> Result<Prepared> {
        match &head.exec {
            HeadExec::Native(h) => {
                let exec = self.exec();
                Ok(Prepared::Native(self.in_pool(|| h.prepare(exec, rows, n))?))
            }
            HeadExec::Ort {
                schedule_embedder, ..
            } => {
                let width = head.info.schedule_width;
                let rows = ArrayView2::from_shape((n, width), rows)
                    .map_err(|e| Error::invalid_argument(format!("encoded rows: {e}")))?;
                Ok(Prepared::Ort(ort_embed(
                    schedule_embedder.as_ref(),
                    rows,
                    head.info.schedule_embedding_dim,
                )?))
            }
        }
    }

    /// Scores prepared candidates of `head` against one matrix embedding into `out`.
    pub(crate) fn score_prepared(
        &self,
        head: &Head,
        matrix: &MatrixEmbedding,
        prepared: &Prepared,
        out: &mut [f32],
    ) -> Result<()> {
        match (&head.exec, prepared) {
            (HeadExec::Native(h), Prepared::Native(rows)) => {
                let exec = self.exec();
                self.in_pool(|| h.score(exec, matrix.values(), rows, out))
            }
            (HeadExec::Ort { predictor, .. }, Prepared::Ort(emb)) => {
                ort_predict(predictor.as_ref(), &head.info.name, matrix, emb.view(), out)
            }
            _ => Err(Error::invalid_argument(format!(
                "candidates of head '{}' were prepared by a different engine",
                head.info.name
            ))),
        }
    }

    /// The schedule embedding of each line under `head`'s schedule embedder (`None` for a
    /// line the schema rejects). A diagnostic: ranking never needs the embeddings themselves,
    /// because the native engine folds the embedder's last layer into the predictor (see
    /// `model::native`); this runs the embedder graph alone.
    ///
    /// # Errors
    ///
    /// Unknown head or an executor failure.
    pub fn embed_schedules<S: AsRef<str>>(
        &self,
        head: &str,
        lines: &[S],
    ) -> Result<Vec<Option<Vec<f32>>>> {
        let h = self.head(head)?;
        let batch = h.schema.encode_batch(lines);
        let emb = self.embed_rows(h, &batch.rows, batch.index.len())?;
        let mut out = vec![None; lines.len()];
        for (row, &i) in batch.index.iter().enumerate() {
            out[i] = Some(emb.row(row).to_vec());
        }
        Ok(out)
    }

    /// Schedule embeddings of encoded rows (`n × width`) by the head's embedder alone.
    pub(crate) fn embed_rows(&self, head: &Head, rows: &[f32], n: usize) -> Result<Array2<f32>> {
        let dim = head.info.schedule_embedding_dim;
        match &head.exec {
            HeadExec::Native(h) => {
                let out = h.embed_schedules(self.exec.level, rows, n);
                Array2::from_shape_vec((n, dim), out)
                    .map_err(|e| Error::executor(head.info.name.clone(), e.to_string()))
            }
            HeadExec::Ort {
                schedule_embedder, ..
            } => {
                let view = ArrayView2::from_shape((n, head.info.schedule_width), rows)
                    .map_err(|e| Error::invalid_argument(format!("encoded rows: {e}")))?;
                ort_embed(schedule_embedder.as_ref(), view, dim)
            }
        }
    }
}

fn ort_embed(
    graph: &dyn super::DenseGraph,
    rows: ArrayView2<'_, f32>,
    dim: usize,
) -> Result<Array2<f32>> {
    let mut out = Array2::<f32>::zeros((rows.nrows(), dim));
    for (start, chunk) in (0..rows.nrows())
        .step_by(ORT_CHUNK)
        .zip(rows.axis_chunks_iter(ndarray::Axis(0), ORT_CHUNK))
    {
        let emb = graph.run(&[("schedule", chunk)])?;
        out.slice_mut(ndarray::s![start..start + chunk.nrows(), ..])
            .assign(&emb);
    }
    Ok(out)
}

fn ort_predict(
    predictor: &dyn super::DenseGraph,
    head: &str,
    matrix: &MatrixEmbedding,
    embeddings: ArrayView2<'_, f32>,
    out: &mut [f32],
) -> Result<()> {
    let m = matrix.values();
    for (start, chunk) in (0..embeddings.nrows())
        .step_by(ORT_CHUNK)
        .zip(embeddings.axis_chunks_iter(ndarray::Axis(0), ORT_CHUNK))
    {
        let rows = chunk.nrows();
        let tiled = ArrayView2::from_shape((1, m.len()), m)
            .map_err(|e| Error::executor("predictor", e.to_string()))?
            .broadcast((rows, m.len()))
            .ok_or_else(|| Error::executor("predictor", "cannot tile the matrix embedding"))?
            .to_owned();
        let scores = predictor.run(&[
            ("matrix_embedding", tiled.view()),
            ("schedule_embedding", chunk),
        ])?;
        if scores.dim() != (rows, 1) {
            return Err(Error::executor(
                head.to_string(),
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

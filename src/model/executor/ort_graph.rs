//! Dense graphs on `ort` (tract or ONNX Runtime underneath).
//!
//! `ort::session::Session::run` takes `&mut self`, so each graph keeps a pool of sessions:
//! a call takes one (or creates one when all are busy) and returns it afterwards. The
//! `&mut` never reaches dashrank's API.

use std::borrow::Cow;
use std::sync::Mutex;

use ndarray::{Array2, ArrayView2, Ix2};
use ort::session::{Session, SessionInputValue};
use ort::value::TensorRef;

use super::DenseGraph;
use crate::error::{Error, Result};

pub(crate) struct OrtGraph {
    env: ort::environment::Environment,
    name: String,
    bytes: Vec<u8>,
    output: String,
    intra_threads: Option<usize>,
    pool: Mutex<Vec<Session>>,
}

impl std::fmt::Debug for OrtGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtGraph")
            .field("name", &self.name)
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

impl OrtGraph {
    pub(crate) fn new(
        env: &ort::environment::Environment,
        name: &str,
        bytes: &[u8],
        output: &str,
        intra_threads: Option<usize>,
    ) -> Result<Self> {
        let graph = Self {
            env: env.clone(),
            name: name.to_string(),
            bytes: bytes.to_vec(),
            output: output.to_string(),
            intra_threads,
            pool: Mutex::new(Vec::new()),
        };
        // Build one session now so that a graph the backend cannot load fails at load time.
        let session = graph.new_session()?;
        graph.give_back(session);
        Ok(graph)
    }

    fn err(&self, e: impl std::fmt::Display) -> Error {
        Error::executor(self.name.clone(), e.to_string())
    }

    fn new_session(&self) -> Result<Session> {
        let mut builder = Session::builder(&self.env).map_err(|e| self.err(e))?;
        if let Some(n) = self.intra_threads {
            builder = builder.with_intra_threads(n).map_err(|e| self.err(e))?;
        }
        builder
            .commit_from_memory(&self.bytes)
            .map_err(|e| self.err(e))
    }

    fn take(&self) -> Result<Session> {
        let pooled = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match pooled {
            Some(s) => Ok(s),
            None => self.new_session(),
        }
    }

    fn give_back(&self, session: Session) {
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(session);
    }
}

impl DenseGraph for OrtGraph {
    fn run(&self, inputs: &[(&str, ArrayView2<'_, f32>)]) -> Result<Array2<f32>> {
        let mut session = self.take()?;
        let arrays: Vec<_> = inputs.iter().map(|(_, v)| v.as_standard_layout()).collect();
        let result = (|| {
            let mut values: Vec<(Cow<'_, str>, SessionInputValue<'_>)> =
                Vec::with_capacity(inputs.len());
            for ((name, _), array) in inputs.iter().zip(&arrays) {
                let tensor = TensorRef::from_array_view(array.view())
                    .map_err(|e| self.err(format!("input '{name}': {e}")))?;
                values.push((Cow::Borrowed(*name), SessionInputValue::from(tensor)));
            }
            let outputs = session.run(values).map_err(|e| self.err(e))?;
            let value = outputs
                .get(self.output.as_str())
                .ok_or_else(|| self.err(format!("graph produced no output '{}'", self.output)))?;
            let array = value
                .try_extract_array::<f32>()
                .map_err(|e| self.err(format!("output '{}': {e}", self.output)))?;
            let array = array
                .into_dimensionality::<Ix2>()
                .map_err(|e| self.err(format!("output '{}' is not 2-D: {e}", self.output)))?;
            Ok(array.to_owned())
        })();
        self.give_back(session);
        result
    }
}

//! A model's facts ([`ModelInfo`]) as a dict, which `dashrank.ModelInfo` reads.

use dashrank::ModelInfo;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

fn heads<'py>(py: Python<'py>, info: &ModelInfo) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for h in &info.heads {
        let d = PyDict::new(py);
        d.set_item("name", &h.name)?;
        d.set_item("kernel", h.kernel.as_str())?;
        d.set_item("target", h.target.as_str())?;
        d.set_item("polarity", h.polarity.as_str())?;
        d.set_item("score_meaning", &h.score_meaning)?;
        d.set_item("schema", &h.schema_name)?;
        d.set_item("schedule_width", h.schedule_width)?;
        d.set_item("schedule_embedding_dim", h.schedule_embedding_dim)?;
        list.append(d)?;
    }
    Ok(list)
}

fn provenance<'py>(py: Python<'py>, info: &ModelInfo) -> PyResult<Bound<'py, PyDict>> {
    let i = &info.integrity;
    let d = PyDict::new(py);
    d.set_item("featurizer_sha256", &i.featurizer_sha256)?;
    d.set_item("mapper_sha256", &i.mapper_sha256)?;
    let files = PyList::empty(py);
    for f in &i.files {
        let e = PyDict::new(py);
        e.set_item("name", &f.name)?;
        e.set_item("bytes", f.bytes)?;
        e.set_item("sha256", &f.sha256)?;
        e.set_item("role", &f.role)?;
        e.set_item("head", &f.head)?;
        files.append(e)?;
    }
    d.set_item("files", files)?;
    d.set_item("overrides", &i.provenance_overrides)?;
    Ok(d)
}

/// Every fact of `info` as plain Python values.
pub(crate) fn info_dict<'py>(py: Python<'py>, info: &ModelInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("family", &info.family)?;
    d.set_item("name", &info.model_name)?;
    d.set_item("format_version", info.format_version)?;
    d.set_item("featurizer_dim", info.featurizer_dim)?;
    d.set_item("matrix_embedding_dim", info.matrix_embedding_dim)?;
    d.set_item("backend", &info.backend)?;
    d.set_item("simd", info.simd.to_string())?;
    d.set_item("content_hash", format!("{:016x}", info.content_hash))?;
    d.set_item("heads", heads(py, info)?)?;
    let engines = PyList::empty(py);
    for g in &info.engines {
        engines.append((&g.file, &g.engine, &g.note))?;
    }
    d.set_item("engines", engines)?;
    d.set_item("provenance", provenance(py, info)?)?;
    Ok(d)
}

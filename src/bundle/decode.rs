//! Bundle decoding: ONNX files → metadata, featurizer [`GraphSpec`], dense-graph bytes.
//!
//! Implements `docs/bundle-format.md`: every file is decoded, its `metadata_props` read and
//! checked (format version window, role, family), weights converted to f32 (FLOAT16 through
//! `half`) and checked finite. The manifest and the provenance hashes are checked by
//! [`super::integrity`]. Nothing here executes anything.

use std::collections::BTreeMap;
use std::path::Path;

use prost::Message;

use super::dir::{check_in_memory_sizes, list_bundle_files, read_bundle_file};
use super::limits::{scan_model_proto, BundleLimits};
use super::manifest::{sha256_hex, Manifest};
use super::names::{check_format_version, Role, MANIFEST_FILE};
use super::onnx_proto::{attribute_type, data_type, ModelProto, TensorProto, ValueInfoProto};
use crate::error::{Error, ErrorKind, Result};
use crate::featurize::spec::{AttrValue, GraphSpec, NodeSpec, TensorSpec};

/// One decoded bundle file.
#[derive(Debug, Clone)]
pub(crate) struct BundleFile {
    /// File name (or caller-given name) for error messages.
    pub origin: String,
    pub role: Role,
    pub format_version: u32,
    pub metadata: BTreeMap<String, String>,
    pub proto: ModelProto,
    /// The original bytes, handed to the executor for dense graphs.
    pub bytes: Vec<u8>,
    /// SHA-256 of `bytes`, lowercase hex (checked against the manifest).
    pub sha256: String,
    /// The float initializers (FLOAT, FLOAT16, DOUBLE) converted to f32 once, at decode, by
    /// their index in the graph's initializer list (`None` for other data types). The
    /// finiteness check, the weights hashes, the featurizer spec and the native importer all
    /// read these instead of converting the same tensors again.
    floats: Vec<Option<TensorSpec>>,
}

impl BundleFile {
    /// Decodes one file (whose SHA-256 is `sha256`) and reads its common metadata; the
    /// protobuf is pre-scanned against `limits` before anything is decoded.
    pub(crate) fn decode(
        origin: &str,
        bytes: Vec<u8>,
        sha256: String,
        limits: &BundleLimits,
    ) -> Result<Self> {
        scan_model_proto(&bytes, limits)
            .map_err(|reason| Error::bundle(origin.to_string(), reason))?;
        let proto = ModelProto::decode(bytes.as_slice()).map_err(|e| {
            Error::bundle(
                origin.to_string(),
                format!("not a valid ONNX protobuf (truncated or corrupt?): {e}"),
            )
        })?;
        if proto.graph.is_none() {
            return Err(Error::bundle(origin.to_string(), "ONNX model has no graph"));
        }
        let metadata: BTreeMap<String, String> = proto
            .metadata_props
            .iter()
            .map(|p| (p.key.clone(), p.value.clone()))
            .collect();
        let version_text = metadata.get("dashrank.format_version").ok_or_else(|| {
            Error::bundle(
                format!("{origin}: dashrank.format_version"),
                "missing metadata key (is this a dashrank bundle file?)",
            )
        })?;
        let format_version = check_format_version(version_text)?;
        let role_text = metadata.get("dashrank.role").ok_or_else(|| {
            Error::bundle(format!("{origin}: dashrank.role"), "missing metadata key")
        })?;
        let role = Role::parse(role_text, origin)?;
        let file = Self {
            origin: origin.to_string(),
            role,
            format_version,
            metadata,
            proto,
            bytes,
            sha256,
            floats: Vec::new(),
        };
        file.require("dashrank.family")?;
        let mut file = file;
        file.floats = file.convert_float_initializers()?;
        Ok(file)
    }

    /// A required metadata value.
    pub(crate) fn require(&self, key: &str) -> Result<&str> {
        self.metadata
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| Error::bundle(format!("{}: {key}", self.origin), "missing metadata key"))
    }

    /// An optional metadata value.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).map(String::as_str)
    }

    pub(crate) fn graph(&self) -> &super::onnx_proto::GraphProto {
        // `decode` rejected files without a graph.
        self.proto.graph.as_ref().unwrap_or_else(|| unreachable!())
    }

    /// Converts every float initializer to f32 and checks that its values are finite.
    fn convert_float_initializers(&self) -> Result<Vec<Option<TensorSpec>>> {
        self.graph()
            .initializer
            .iter()
            .map(|t| {
                if !matches!(
                    t.data_type,
                    data_type::FLOAT | data_type::FLOAT16 | data_type::DOUBLE
                ) {
                    return Ok(None);
                }
                let spec = tensor_to_f32(t, &self.origin)?;
                if let Some(pos) = spec.data.iter().position(|v| !v.is_finite()) {
                    return Err(Error::bundle(
                        format!("{}: tensor '{}'", self.origin, t.name),
                        format!("non-finite weight {} at flat index {pos}", spec.data[pos]),
                    ));
                }
                Ok(Some(spec))
            })
            .collect()
    }

    /// The float initializer at `index` of the graph's initializer list, converted to f32
    /// (`None` for other data types).
    pub(crate) fn float_initializer(&self, index: usize) -> Option<&TensorSpec> {
        self.floats.get(index).and_then(Option::as_ref)
    }

    /// Every float initializer, converted to f32, in the graph's order.
    pub(crate) fn float_initializers(&self) -> impl Iterator<Item = &TensorSpec> {
        self.floats.iter().flatten()
    }

    /// Checks that the graph's inputs and outputs are exactly the given names (in any order).
    pub(crate) fn expect_io(&self, inputs: &[&str], outputs: &[&str]) -> Result<()> {
        let g = self.graph();
        let initializer_names: Vec<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
        let real_inputs: Vec<&str> = g
            .input
            .iter()
            .map(|v| v.name.as_str())
            .filter(|n| !initializer_names.contains(n))
            .collect();
        let check = |what: &str, found: Vec<&str>, expected: &[&str]| -> Result<()> {
            let mut f = found.clone();
            let mut e = expected.to_vec();
            f.sort_unstable();
            e.sort_unstable();
            if f != e {
                return Err(Error::bundle(
                    format!("{}: graph {what}", self.origin),
                    format!(
                        "a {} graph must have {what} {:?}, found {:?}",
                        self.role.as_str(),
                        expected,
                        found
                    ),
                ));
            }
            Ok(())
        };
        check("inputs", real_inputs, inputs)?;
        check(
            "outputs",
            g.output.iter().map(|v| v.name.as_str()).collect(),
            outputs,
        )
    }

    /// The static size of the last dimension of a graph input or output, if declared.
    pub(crate) fn last_dim(&self, name: &str) -> Option<usize> {
        let g = self.graph();
        let v: &ValueInfoProto = g.input.iter().chain(&g.output).find(|v| v.name == name)?;
        let shape = v.r#type.as_ref()?.tensor_type.as_ref()?.shape.as_ref()?;
        let d = shape.dim.last()?.dim_value?;
        usize::try_from(d).ok().filter(|&d| d > 0)
    }

    /// Converts the featurizer file's graph into the plain-data spec the featurizer builds from.
    pub(crate) fn featurizer_spec(&self) -> Result<GraphSpec> {
        let g = self.graph();
        let mut initializers = BTreeMap::new();
        for (i, t) in g.initializer.iter().enumerate() {
            let spec = match self.float_initializer(i) {
                Some(spec) => spec.clone(),
                // Not a float tensor: the conversion reports why.
                None => tensor_to_f32(t, &self.origin)?,
            };
            initializers.insert(spec.name.clone(), spec);
        }
        let init_names: Vec<&String> = initializers.keys().collect();
        let inputs = g
            .input
            .iter()
            .map(|v| v.name.clone())
            .filter(|n| !init_names.contains(&n))
            .collect();
        let nodes = g
            .node
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let name = if n.name.is_empty() {
                    format!("#{i} ({})", n.op_type)
                } else {
                    n.name.clone()
                };
                let mut attributes = BTreeMap::new();
                for a in &n.attribute {
                    let value = match a.r#type {
                        attribute_type::INT => AttrValue::Int(a.i),
                        attribute_type::INTS => AttrValue::Ints(a.ints.clone()),
                        attribute_type::FLOAT => AttrValue::Float(a.f),
                        attribute_type::STRING => {
                            AttrValue::String(String::from_utf8_lossy(&a.s).into_owned())
                        }
                        other => {
                            return Err(Error::featurize(
                                name.clone(),
                                format!("attribute '{}' has unsupported type {other}", a.name),
                            ))
                        }
                    };
                    attributes.insert(a.name.clone(), value);
                }
                Ok(NodeSpec {
                    name,
                    op_type: n.op_type.clone(),
                    domain: n.domain.clone(),
                    inputs: n.input.clone(),
                    outputs: n.output.clone(),
                    attributes,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(GraphSpec {
            inputs,
            outputs: g.output.iter().map(|v| v.name.clone()).collect(),
            nodes,
            initializers,
        })
    }
}

/// IEEE half-precision values (their bits) as `f32`, exactly: `half`'s slice conversion,
/// which uses the CPU's conversion instructions where it has them (F16C) and is
/// bit-identical to converting one value at a time.
fn f16_bits_to_f32(bits: &[u16]) -> Vec<f32> {
    use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
    let halves: &[half::f16] = bits.reinterpret_cast();
    halves.to_f32_vec()
}

/// Converts an initializer to f32, checking its declared size.
pub(crate) fn tensor_to_f32(t: &TensorProto, origin: &str) -> Result<TensorSpec> {
    let key = || format!("{origin}: tensor '{}'", t.name);
    if t.data_location == 1 || !t.external_data.is_empty() {
        return Err(Error::bundle(
            key(),
            "external tensor data is not supported in format v1",
        ));
    }
    let dims = t
        .dims
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| Error::bundle(key(), format!("negative dimension {d}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let expected = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| Error::bundle(key(), format!("dims {dims:?} overflow the address space")))?;
    let data = float_values(t, expected, &key)?;
    if data.len() != expected {
        return Err(Error::bundle(
            key(),
            format!("dims {dims:?} need {expected} values, found {}", data.len()),
        ));
    }
    Ok(TensorSpec {
        name: t.name.clone(),
        dims,
        data,
    })
}

/// The values of a FLOAT, FLOAT16 or DOUBLE tensor as `f32` (doubles rounded), from its raw
/// bytes (whose length must be `expected` values) or its typed field.
fn float_values(t: &TensorProto, expected: usize, key: &impl Fn() -> String) -> Result<Vec<f32>> {
    Ok(match t.data_type {
        data_type::FLOAT if !t.raw_data.is_empty() => {
            check_raw_len(t, expected, 4, key)?;
            t.raw_data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        }
        data_type::FLOAT => t.float_data.clone(),
        data_type::FLOAT16 if !t.raw_data.is_empty() => {
            check_raw_len(t, expected, 2, key)?;
            f16_bits_to_f32(
                &t.raw_data
                    .chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect::<Vec<_>>(),
            )
        }
        data_type::FLOAT16 => f16_bits_to_f32(
            &t.int32_data
                .iter()
                .map(|&bits| bits as u16)
                .collect::<Vec<_>>(),
        ),
        data_type::DOUBLE if !t.raw_data.is_empty() => {
            check_raw_len(t, expected, 8, key)?;
            t.raw_data
                .chunks_exact(8)
                .map(|c| {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(c);
                    f64::from_le_bytes(b) as f32
                })
                .collect()
        }
        data_type::DOUBLE => t.double_data.iter().map(|&v| v as f32).collect(),
        other => {
            return Err(Error::bundle(
                key(),
                format!(
                "weights must be FLOAT (1), FLOAT16 (10) or DOUBLE (11), found data type {other}"
            ),
            ))
        }
    })
}

fn check_raw_len(
    t: &TensorProto,
    expected: usize,
    width: usize,
    key: &dyn Fn() -> String,
) -> Result<()> {
    if Some(t.raw_data.len()) != expected.checked_mul(width) {
        return Err(Error::bundle(
            key(),
            format!(
                "raw_data holds {} bytes, dims {:?} need {}",
                t.raw_data.len(),
                t.dims,
                expected.saturating_mul(width)
            ),
        ));
    }
    Ok(())
}

/// All files of a bundle, grouped by role.
#[derive(Debug)]
pub(crate) struct Bundle {
    pub featurizer: BundleFile,
    pub matrix_embedder: BundleFile,
    /// (head name, schedule embedder, predictor), sorted by head name.
    pub heads: Vec<(String, BundleFile, BundleFile)>,
    /// FNV-1a over every `.onnx` file's name and SHA-256 (hex), in name order: as stable
    /// and as specific as a hash of the bytes, without a second pass over them.
    pub content_hash: u64,
    /// The parsed `manifest.json`, if the bundle has one (checked by `integrity::verify`).
    pub manifest: Option<Manifest>,
}

impl Bundle {
    /// Reads every `*.onnx` file of a bundle directory (see `dir::list_bundle_files`
    /// for which entries count and the symlink rule), within `limits`.
    pub(crate) fn read_dir(dir: &Path, limits: &BundleLimits) -> Result<Self> {
        let entries = list_bundle_files(dir, limits)?;
        let mut files = Vec::with_capacity(entries.len());
        let mut total = 0u64;
        for entry in &entries {
            let bytes = read_bundle_file(entry, limits)?;
            total = total.saturating_add(bytes.len() as u64);
            if total > limits.max_bundle_bytes {
                return Err(Error::bundle(
                    entry.name.clone(),
                    format!(
                        "the bundle's files exceed BundleLimits::max_bundle_bytes = {} bytes",
                        limits.max_bundle_bytes
                    ),
                ));
            }
            files.push((entry.name.clone(), bytes));
        }
        Self::from_files(files, limits)
    }

    /// Groups in-memory files `(name, bytes)` by role and checks the bundle is complete. A
    /// file named `manifest.json` is the manifest; every other file is an ONNX bundle file.
    pub(crate) fn from_files(
        mut files: Vec<(String, Vec<u8>)>,
        limits: &BundleLimits,
    ) -> Result<Self> {
        check_in_memory_sizes(&files, limits)?;
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let manifest = match files.iter().position(|(name, _)| name == MANIFEST_FILE) {
            Some(i) => Some(Manifest::parse(&files.remove(i).1)?),
            None => None,
        };
        let mut hash = Fnv64::new();
        let mut slots = Slots::default();
        for (name, bytes) in files {
            let sha256 = sha256_hex(&bytes);
            hash.write(name.as_bytes());
            hash.write(&[0]);
            hash.write(sha256.as_bytes());
            slots.place(decode_file(
                &name,
                bytes,
                sha256,
                manifest.as_ref(),
                limits,
            )?)?;
        }
        let (featurizer, matrix_embedder, heads) = slots.complete()?;
        check_agreement(&featurizer, &matrix_embedder, &heads)?;
        Ok(Self {
            featurizer,
            matrix_embedder,
            heads,
            content_hash: hash.finish(),
            manifest,
        })
    }
}

/// Decodes one bundle file; a file the manifest does not match says so in its error.
fn decode_file(
    name: &str,
    bytes: Vec<u8>,
    sha256: String,
    manifest: Option<&Manifest>,
    limits: &BundleLimits,
) -> Result<BundleFile> {
    let corrupt = manifest.is_some_and(|m| !m.matches(name, bytes.len(), &sha256));
    BundleFile::decode(name, bytes, sha256, limits).map_err(|e| match e.kind() {
        ErrorKind::Bundle { key, reason } if corrupt => Error::bundle(
            key.clone(),
            format!(
                "{reason} (the file differs from {MANIFEST_FILE}: corrupted or modified after export)"
            ),
        ),
        _ => e,
    })
}

/// The bundle's files by role, one per slot.
#[derive(Default)]
struct Slots {
    featurizer: Option<BundleFile>,
    matrix_embedder: Option<BundleFile>,
    schedule_embedders: BTreeMap<String, BundleFile>,
    predictors: BTreeMap<String, BundleFile>,
}

impl Slots {
    /// Puts `file` in its role's slot; a second file for a slot is an error.
    fn place(&mut self, file: BundleFile) -> Result<()> {
        let slot_taken = |what: &str, other: &BundleFile| {
            Error::bundle(
                file.origin.clone(),
                format!("second {what} file (already have '{}')", other.origin),
            )
        };
        match file.role {
            Role::Featurizer => match &self.featurizer {
                Some(other) => return Err(slot_taken("featurizer", other)),
                None => self.featurizer = Some(file),
            },
            Role::MatrixEmbedder => match &self.matrix_embedder {
                Some(other) => return Err(slot_taken("matrix_embedder", other)),
                None => self.matrix_embedder = Some(file),
            },
            Role::ScheduleEmbedder | Role::Predictor => {
                let head = file.require("dashrank.head")?.to_string();
                let map = if file.role == Role::ScheduleEmbedder {
                    &mut self.schedule_embedders
                } else {
                    &mut self.predictors
                };
                if let Some(other) = map.get(&head) {
                    return Err(slot_taken(
                        &format!("{} for head '{head}'", file.role.as_str()),
                        other,
                    ));
                }
                map.insert(head, file);
            }
        }
        Ok(())
    }

    /// The featurizer, the matrix embedder and the heads (schedule embedder and predictor
    /// paired by head name); a missing or unpaired file is an error.
    #[allow(clippy::type_complexity)]
    fn complete(
        mut self,
    ) -> Result<(
        BundleFile,
        BundleFile,
        Vec<(String, BundleFile, BundleFile)>,
    )> {
        let featurizer = self
            .featurizer
            .ok_or_else(|| Error::bundle("bundle", "no file with dashrank.role = featurizer"))?;
        let matrix_embedder = self.matrix_embedder.ok_or_else(|| {
            Error::bundle("bundle", "no file with dashrank.role = matrix_embedder")
        })?;
        let mut heads = Vec::new();
        for (name, se) in self.schedule_embedders {
            let pr = self.predictors.remove(&name).ok_or_else(|| {
                Error::bundle(
                    format!("head '{name}'"),
                    format!("has a schedule_embedder ('{}') but no predictor", se.origin),
                )
            })?;
            heads.push((name, se, pr));
        }
        if let Some((name, pr)) = self.predictors.into_iter().next() {
            return Err(Error::bundle(
                format!("head '{name}'"),
                format!("has a predictor ('{}') but no schedule_embedder", pr.origin),
            ));
        }
        if heads.is_empty() {
            return Err(Error::bundle(
                "bundle",
                "no heads (schedule_embedder + predictor files)",
            ));
        }
        Ok((featurizer, matrix_embedder, heads))
    }
}

/// All files agree with the featurizer on format version and family.
fn check_agreement(
    featurizer: &BundleFile,
    matrix_embedder: &BundleFile,
    heads: &[(String, BundleFile, BundleFile)],
) -> Result<()> {
    let family = featurizer.require("dashrank.family")?;
    let version = featurizer.format_version;
    let all = std::iter::once(matrix_embedder).chain(heads.iter().flat_map(|(_, a, b)| [a, b]));
    for f in all {
        if f.format_version != version {
            return Err(Error::bundle(
                format!("{}: dashrank.format_version", f.origin),
                format!(
                    "{} disagrees with the featurizer's {version}",
                    f.format_version
                ),
            ));
        }
        let fam = f.require("dashrank.family")?;
        if fam != family {
            return Err(Error::bundle(
                format!("{}: dashrank.family", f.origin),
                format!("'{fam}' disagrees with the featurizer's '{family}'"),
            ));
        }
    }
    Ok(())
}

/// 64-bit FNV-1a, stable across platforms and Rust versions.
pub(crate) struct Fnv64(u64);

impl Fnv64 {
    pub(crate) fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IEEE binary16 decoded by hand: every step is exact in `f32` (a mantissa below 2^11
    /// times a power of two).
    fn decode_f16(b: u16) -> f32 {
        let sign = if b & 0x8000 != 0 { -1.0f32 } else { 1.0 };
        let exp = i32::from((b >> 10) & 0x1f);
        let man = f32::from(b & 0x3ff);
        match exp {
            0 => sign * man * 2f32.powi(-24),
            31 if man == 0.0 => sign * f32::INFINITY,
            31 => f32::NAN,
            e => sign * (1024.0 + man) * 2f32.powi(e - 25),
        }
    }

    /// The slice conversion of FLOAT16 initializers decodes every half-precision value
    /// exactly (bit for bit, signed zeros, subnormals and infinities included); NaNs stay
    /// NaN (weights must be finite: they are refused after conversion either way).
    #[test]
    fn f16_slices_convert_exactly() {
        let bits: Vec<u16> = (0..=u16::MAX).collect();
        let got = f16_bits_to_f32(&bits);
        for (&b, v) in bits.iter().zip(&got) {
            let want = decode_f16(b);
            if want.is_nan() {
                assert!(v.is_nan(), "{b:#06x}");
            } else {
                assert_eq!(v.to_bits(), want.to_bits(), "{b:#06x}: {v} vs {want}");
            }
        }
        assert_eq!(
            f16_bits_to_f32(&[0x3c00, 0xc000, 0x0001]),
            [1.0, -2.0, 2f32.powi(-24)]
        );
    }

    /// A `[2]` tensor named `w` of `data_type`.
    fn tensor(data_type: i32) -> TensorProto {
        TensorProto {
            name: "w".into(),
            dims: vec![2],
            data_type,
            ..Default::default()
        }
    }

    /// Every accepted encoding of `[1.5, -0.25]` (FLOAT, FLOAT16 and DOUBLE, raw bytes or
    /// typed fields) decodes to the same values; doubles are rounded to `f32`.
    #[test]
    fn initializers_decode_from_every_accepted_encoding() {
        let want = [1.5f32, -0.25];
        let raw = |bytes: Vec<u8>, ty| TensorProto {
            raw_data: bytes,
            ..tensor(ty)
        };
        let encodings = [
            raw(
                want.iter().flat_map(|v| v.to_le_bytes()).collect(),
                data_type::FLOAT,
            ),
            TensorProto {
                float_data: want.to_vec(),
                ..tensor(data_type::FLOAT)
            },
            raw(
                [0x3e00u16, 0xb400]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                data_type::FLOAT16,
            ),
            TensorProto {
                int32_data: vec![0x3e00, 0xb400],
                ..tensor(data_type::FLOAT16)
            },
            raw(
                want.iter()
                    .flat_map(|&v| f64::from(v).to_le_bytes())
                    .collect(),
                data_type::DOUBLE,
            ),
            TensorProto {
                double_data: want.iter().map(|&v| f64::from(v)).collect(),
                ..tensor(data_type::DOUBLE)
            },
        ];
        for t in &encodings {
            let spec = tensor_to_f32(t, "bundle").expect("decodes");
            assert_eq!(
                (spec.dims, spec.data),
                (vec![2], want.to_vec()),
                "type {}",
                t.data_type
            );
        }
        let rounded = TensorProto {
            double_data: vec![0.1, 1e300],
            ..tensor(data_type::DOUBLE)
        };
        let spec = tensor_to_f32(&rounded, "bundle").expect("decodes");
        assert_eq!(spec.data, [0.1f32, f32::INFINITY]);
    }

    /// An integer tensor, raw bytes of the wrong length and too few values are refused,
    /// naming the tensor and what is wrong.
    #[test]
    fn initializers_of_the_wrong_type_or_size_are_refused() {
        let cases = [
            (
                TensorProto {
                    int64_data: vec![1, 2],
                    ..tensor(data_type::INT64)
                },
                "FLOAT (1), FLOAT16 (10) or DOUBLE (11), found data type 7",
            ),
            (
                TensorProto {
                    raw_data: vec![0; 6],
                    ..tensor(data_type::FLOAT)
                },
                "raw_data holds 6 bytes",
            ),
            (
                TensorProto {
                    float_data: vec![1.0],
                    ..tensor(data_type::FLOAT)
                },
                "need 2 values, found 1",
            ),
        ];
        for (t, want) in cases {
            let err = tensor_to_f32(&t, "bundle")
                .expect_err("refused")
                .to_string();
            assert!(err.contains("tensor 'w'") && err.contains(want), "{err}");
        }
    }
}

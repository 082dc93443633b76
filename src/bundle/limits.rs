//! Limits on what a bundle may make the library read and allocate, and the protobuf pre-scan
//! that enforces them before anything is decoded.
//!
//! Model files are untrusted input. Before a file is read its size is checked; before it is
//! decoded its protobuf wire format is walked once, without allocating, to count what the
//! decoder would build: nested messages, strings and list entries
//! ([`BundleLimits::max_proto_elements`]), packed numbers
//! ([`BundleLimits::max_tensor_elements`]) and nesting depth. The same walk rejects tensors
//! that point at external data anywhere in the file (initializers, attribute tensors,
//! subgraphs, functions): a bundle is self-contained, and no file outside its directory is
//! ever read.

/// Default [`BundleLimits::max_file_bytes`]: 256 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 256 << 20;
/// Default [`BundleLimits::max_bundle_bytes`]: 1 GiB.
pub const DEFAULT_MAX_BUNDLE_BYTES: u64 = 1 << 30;
/// Default [`BundleLimits::max_files`]: 1024.
pub const DEFAULT_MAX_FILES: usize = 1024;
/// Default [`BundleLimits::max_proto_elements`]: 2^18 (the real WACO bundle files hold fewer
/// than 1,000 each).
pub const DEFAULT_MAX_PROTO_ELEMENTS: usize = 1 << 18;
/// Default [`BundleLimits::max_tensor_elements`]: 2^26 (256 MiB of `f32`).
pub const DEFAULT_MAX_TENSOR_ELEMENTS: usize = 1 << 26;
/// Deepest protobuf message nesting accepted.
pub const MAX_PROTO_DEPTH: u32 = 32;
/// Default [`BundleLimits::native_budget_base`]: 2^24 operations.
pub const DEFAULT_NATIVE_BUDGET_BASE: u64 = 1 << 24;
/// Default [`BundleLimits::native_budget_per_byte`]: 64 operations per byte of graph file.
pub const DEFAULT_NATIVE_BUDGET_PER_BYTE: u64 = 64;

/// Limits applied while a bundle is read, decoded and compiled (see `docs/reliability.md`).
///
/// Exceeding a size or protobuf limit is an [`ErrorKind::Bundle`](crate::ErrorKind::Bundle)
/// error naming the file, the limit (`BundleLimits::…`) and the value found, raised before the
/// data is read (sizes) or decoded (protobuf contents). Exceeding the native engine's load
/// budget is an [`ErrorKind::LoadBudget`](crate::ErrorKind::LoadBudget) error, raised before
/// the work that would pass it. Raise a limit to load a larger model.
///
/// # Example
///
/// ```
/// use dashrank::{LoadOptions, Model};
/// use dashrank::model::BundleLimits;
/// let mut options = LoadOptions::default();
/// options.limits = BundleLimits { max_file_bytes: 1024, ..BundleLimits::default() };
/// let e = Model::load("tests/data/fixtures/tiny-waco-spmm", &options).unwrap_err();
/// assert!(e.to_string().contains("BundleLimits::max_file_bytes"), "{e}");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundleLimits {
    /// Largest `.onnx` file, in bytes. Default [`DEFAULT_MAX_FILE_BYTES`].
    pub max_file_bytes: u64,
    /// Largest total of all `.onnx` files of a bundle, in bytes. Default
    /// [`DEFAULT_MAX_BUNDLE_BYTES`].
    pub max_bundle_bytes: u64,
    /// Most `.onnx` files in a bundle directory. Default [`DEFAULT_MAX_FILES`].
    pub max_files: usize,
    /// Most protobuf entries in one file: every field occurrence of every message (nodes,
    /// tensors, names, attributes, shape dimensions, …). Each can cost a few hundred bytes once
    /// decoded, so this bounds the decoded size of files made of tiny messages. Default
    /// [`DEFAULT_MAX_PROTO_ELEMENTS`].
    pub max_proto_elements: usize,
    /// Most numbers in one file's packed numeric lists (`float_data`, `int64_data`, `dims`,
    /// …), and most elements of one weight tensor (the product of its dimensions). Default
    /// [`DEFAULT_MAX_TENSOR_ELEMENTS`].
    pub max_tensor_elements: usize,
    /// The native engine's load budget of a graph (the matrix embedder; a head's schedule
    /// embedder and predictor together) is `native_budget_base + native_budget_per_byte ×`
    /// the size of its files, in operations: one per number its import and compilation
    /// allocate, one per multiply-add they perform, and 128 per column of each row buffer of
    /// the compiled program. Loading never uses more than 8 bytes of memory per operation of
    /// the budget. Default [`DEFAULT_NATIVE_BUDGET_BASE`].
    pub native_budget_base: u64,
    /// See [`native_budget_base`](Self::native_budget_base). Default
    /// [`DEFAULT_NATIVE_BUDGET_PER_BYTE`].
    pub native_budget_per_byte: u64,
}

impl Default for BundleLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_bundle_bytes: DEFAULT_MAX_BUNDLE_BYTES,
            max_files: DEFAULT_MAX_FILES,
            max_proto_elements: DEFAULT_MAX_PROTO_ELEMENTS,
            max_tensor_elements: DEFAULT_MAX_TENSOR_ELEMENTS,
            native_budget_base: DEFAULT_NATIVE_BUDGET_BASE,
            native_budget_per_byte: DEFAULT_NATIVE_BUDGET_PER_BYTE,
        }
    }
}

/// ONNX message types the scan descends into (field numbers from `onnx/onnx.proto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Msg {
    Model,
    TrainingInfo,
    Function,
    Graph,
    Node,
    Attribute,
    Tensor,
    SparseTensor,
    ValueInfo,
    Type,
    TypeTensor,
    Shape,
}

/// Encoding of a packed numeric list's elements.
#[derive(Debug, Clone, Copy)]
enum Packed {
    Varint,
    Fixed32,
    Fixed64,
}

/// What a length-delimited field of a message holds.
enum Child {
    Msg(Msg),
    Packed(Packed),
    Other,
}

fn child(msg: Msg, tag: u64) -> Child {
    use Child::{Msg as M, Packed as P};
    use Packed::{Fixed32, Fixed64, Varint};
    match (msg, tag) {
        (Msg::Model, 7) => M(Msg::Graph),
        (Msg::Model, 20) => M(Msg::TrainingInfo),
        (Msg::Model, 25) => M(Msg::Function),
        (Msg::TrainingInfo, 1 | 2) => M(Msg::Graph),
        (Msg::Function, 7) => M(Msg::Node),
        (Msg::Function, 11) => M(Msg::Attribute),
        (Msg::Graph, 1) => M(Msg::Node),
        (Msg::Graph, 5) => M(Msg::Tensor),
        (Msg::Graph, 15) => M(Msg::SparseTensor),
        (Msg::Graph, 11..=13) => M(Msg::ValueInfo),
        (Msg::Node, 5) => M(Msg::Attribute),
        (Msg::Attribute, 5 | 10) => M(Msg::Tensor),
        (Msg::Attribute, 6 | 11) => M(Msg::Graph),
        (Msg::Attribute, 22 | 23) => M(Msg::SparseTensor),
        (Msg::Attribute, 14 | 15) => M(Msg::Type),
        (Msg::Attribute, 7) => P(Fixed32),
        (Msg::Attribute, 8) => P(Varint),
        (Msg::Tensor, 1 | 5 | 7 | 11) => P(Varint),
        (Msg::Tensor, 4) => P(Fixed32),
        (Msg::Tensor, 10) => P(Fixed64),
        (Msg::SparseTensor, 1 | 2) => M(Msg::Tensor),
        (Msg::SparseTensor, 3) => P(Varint),
        (Msg::ValueInfo, 2) => M(Msg::Type),
        (Msg::Type, 1) => M(Msg::TypeTensor),
        (Msg::TypeTensor, 2) => M(Msg::Shape),
        _ => Child::Other,
    }
}

/// Running totals of one file's scan.
struct Scan<'l> {
    limits: &'l BundleLimits,
    elements: usize,
    numbers: usize,
}

impl Scan<'_> {
    fn add_elements(&mut self, n: usize) -> Result<(), String> {
        self.elements = self.elements.saturating_add(n);
        if self.elements > self.limits.max_proto_elements {
            return Err(format!(
                "more than BundleLimits::max_proto_elements = {} protobuf entries",
                self.limits.max_proto_elements
            ));
        }
        Ok(())
    }

    fn add_numbers(&mut self, n: usize) -> Result<(), String> {
        self.numbers = self.numbers.saturating_add(n);
        if self.numbers > self.limits.max_tensor_elements {
            return Err(format!(
                "more than BundleLimits::max_tensor_elements = {} numbers in packed lists",
                self.limits.max_tensor_elements
            ));
        }
        Ok(())
    }

    fn walk(&mut self, buf: &[u8], msg: Msg, depth: u32) -> Result<(), String> {
        if depth > MAX_PROTO_DEPTH {
            return Err(format!(
                "protobuf messages nested deeper than {MAX_PROTO_DEPTH} levels"
            ));
        }
        let mut pos = 0;
        while pos < buf.len() {
            let key = varint(buf, &mut pos)?;
            let (tag, wire) = (key >> 3, key & 7);
            if tag == 0 {
                return Err(format!("invalid protobuf field number 0 at byte {pos}"));
            }
            self.add_elements(1)?;
            let packed = matches!(child(msg, tag), Child::Packed(_));
            match wire {
                0 => {
                    let v = varint(buf, &mut pos)?;
                    if msg == Msg::Tensor && tag == 14 && v == 1 {
                        return Err(external());
                    }
                }
                1 => pos = skip(buf, pos, 8)?,
                5 => pos = skip(buf, pos, 4)?,
                2 => {
                    let len = varint(buf, &mut pos)?;
                    let len = usize::try_from(len).unwrap_or(usize::MAX);
                    let end = skip(buf, pos, len)?;
                    let body = &buf[pos..end];
                    pos = end;
                    if msg == Msg::Tensor && tag == 13 {
                        return Err(external());
                    }
                    match child(msg, tag) {
                        Child::Msg(m) => self.walk(body, m, depth + 1)?,
                        Child::Packed(p) => self.add_numbers(count_packed(body, p))?,
                        Child::Other => {}
                    }
                    continue;
                }
                other => {
                    return Err(format!(
                        "unsupported protobuf wire type {other} (field {tag}) before byte {pos}"
                    ))
                }
            }
            if packed {
                self.add_numbers(1)?;
            }
        }
        Ok(())
    }
}

fn external() -> String {
    "a tensor refers to external data; bundle files must be self-contained (format v1)".into()
}

fn count_packed(body: &[u8], p: Packed) -> usize {
    match p {
        Packed::Varint => body.iter().filter(|&&b| b < 0x80).count(),
        Packed::Fixed32 => body.len() / 4,
        Packed::Fixed64 => body.len() / 8,
    }
}

fn skip(buf: &[u8], pos: usize, len: usize) -> Result<usize, String> {
    match pos.checked_add(len) {
        Some(end) if end <= buf.len() => Ok(end),
        _ => Err(format!(
            "truncated protobuf: a field of {len} bytes at byte {pos} runs past the end ({} bytes)",
            buf.len()
        )),
    }
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    let start = *pos;
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let Some(&b) = buf.get(*pos) else {
            return Err(format!("truncated protobuf varint at byte {start}"));
        };
        *pos += 1;
        if shift == 63 && b > 1 {
            return Err(format!("protobuf varint at byte {start} overflows 64 bits"));
        }
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(format!(
        "protobuf varint at byte {start} is longer than 10 bytes"
    ))
}

/// Walks one ONNX `ModelProto` without decoding it, checking `limits` and rejecting external
/// tensor data. Returns the reason for a rejection (the caller names the file).
pub(crate) fn scan_model_proto(bytes: &[u8], limits: &BundleLimits) -> Result<(), String> {
    Scan {
        limits,
        elements: 0,
        numbers: 0,
    }
    .walk(bytes, Msg::Model, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(tag: u64, wire: u64, body: &[u8]) -> Vec<u8> {
        let mut out = vec![(tag << 3 | wire) as u8];
        if wire == 2 {
            out.push(body.len() as u8);
        }
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn counts_messages_and_numbers() {
        // graph { node {} node {} initializer { dims: [3, 4] packed } }
        let mut graph = field(1, 2, &[]);
        graph.extend(field(1, 2, &[]));
        graph.extend(field(5, 2, &field(1, 2, &[3, 4])));
        let model = field(7, 2, &graph);
        let l = BundleLimits::default();
        assert_eq!(scan_model_proto(&model, &l), Ok(()));
        let tight = BundleLimits {
            max_proto_elements: 4,
            ..l
        };
        assert_eq!(
            scan_model_proto(&model, &tight),
            Err("more than BundleLimits::max_proto_elements = 4 protobuf entries".into())
        );
        let tight = BundleLimits {
            max_tensor_elements: 1,
            ..l
        };
        assert!(scan_model_proto(&model, &tight)
            .unwrap_err()
            .contains("max_tensor_elements"));
    }

    #[test]
    fn rejects_external_data_and_bad_framing() {
        // graph { node { attribute { t { external_data {} } } } }
        let t = field(13, 2, &[]);
        let model = field(7, 2, &field(1, 2, &field(5, 2, &field(5, 2, &t))));
        assert!(scan_model_proto(&model, &BundleLimits::default())
            .unwrap_err()
            .contains("external data"));
        // initializer { data_location: EXTERNAL }
        let model = field(7, 2, &field(5, 2, &[14 << 3, 1]));
        assert!(scan_model_proto(&model, &BundleLimits::default())
            .unwrap_err()
            .contains("external data"));
        let l = BundleLimits::default();
        assert!(scan_model_proto(&[7 << 3 | 2, 50], &l)
            .unwrap_err()
            .starts_with("truncated protobuf"));
        assert!(scan_model_proto(&[0x80], &l)
            .unwrap_err()
            .starts_with("truncated protobuf varint"));
        assert!(scan_model_proto(&[3 << 3 | 3], &l)
            .unwrap_err()
            .contains("wire type 3"));
        assert!(scan_model_proto(&[0], &l)
            .unwrap_err()
            .contains("field number 0"));
    }

    #[test]
    fn nesting_is_bounded() {
        // graph { node { attribute { g { node { … } } } } } nested past the limit.
        let mut deep: Vec<u8> = Vec::new();
        for _ in 0..40 {
            let mut attr = vec![6 << 3 | 2];
            push_len(&mut attr, deep.len());
            attr.extend_from_slice(&deep);
            let mut node = vec![5 << 3 | 2];
            push_len(&mut node, attr.len());
            node.extend(attr);
            let mut graph = vec![1 << 3 | 2];
            push_len(&mut graph, node.len());
            graph.extend(node);
            deep = graph;
        }
        let mut model = vec![7 << 3 | 2];
        push_len(&mut model, deep.len());
        model.extend(deep);
        assert!(scan_model_proto(&model, &BundleLimits::default())
            .unwrap_err()
            .contains("nested deeper"));
    }

    fn push_len(out: &mut Vec<u8>, mut n: usize) {
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
}

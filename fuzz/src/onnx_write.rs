//! A minimal ONNX writer for dense graphs: enough protobuf to build the graphs the native
//! importer reads (nodes with int and float attributes, float and int64 initializers), and
//! to put such a graph into an existing bundle file in place of its own. Used by the
//! `onnx_graph` fuzz target and by `tests/hostile_graphs.rs` (through `#[path]`).

/// An attribute value.
#[derive(Debug, Clone)]
pub enum Attr {
    Int(&'static str, i64),
    Float(&'static str, f32),
    Tensor(&'static str, Tensor),
}

/// One node: `op(inputs) -> output` (unnamed: errors call it `#index (op)`).
#[derive(Debug, Clone)]
pub struct Node {
    pub op: &'static str,
    pub inputs: Vec<String>,
    pub output: String,
    pub attrs: Vec<Attr>,
}

impl Node {
    pub fn new(op: &'static str, inputs: &[&str], output: &str) -> Self {
        Self {
            op,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            output: output.to_string(),
            attrs: Vec::new(),
        }
    }

    pub fn attr(mut self, a: Attr) -> Self {
        self.attrs.push(a);
        self
    }
}

/// Initializer data.
#[derive(Debug, Clone)]
pub enum Data {
    /// FLOAT, stored as `raw_data`.
    Float(Vec<f32>),
    /// INT64, stored as `int64_data`.
    Int(Vec<i64>),
}

/// An initializer.
#[derive(Debug, Clone)]
pub struct Tensor {
    pub name: String,
    pub dims: Vec<i64>,
    pub data: Data,
}

/// A graph: nodes in order, initializers, input names and the output name.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub initializers: Vec<Tensor>,
    pub inputs: Vec<String>,
    pub output: String,
    /// Keep the replaced graph's own initializers as well (so that weights hashes over them,
    /// the bundle's provenance, stay the same).
    pub keep_initializers: bool,
}

impl Graph {
    pub fn node(&mut self, node: Node) -> &mut Self {
        self.nodes.push(node);
        self
    }

    pub fn floats(&mut self, name: &str, dims: &[i64], data: Vec<f32>) -> &mut Self {
        self.initializers.push(Tensor {
            name: name.to_string(),
            dims: dims.to_vec(),
            data: Data::Float(data),
        });
        self
    }

    pub fn ints(&mut self, name: &str, dims: &[i64], data: Vec<i64>) -> &mut Self {
        self.initializers.push(Tensor {
            name: name.to_string(),
            dims: dims.to_vec(),
            data: Data::Int(data),
        });
        self
    }

    /// A float constant as a `Constant` node (outside any initializer hash).
    pub fn constant(&mut self, name: &str, dims: &[i64], data: Vec<f32>) -> &mut Self {
        let t = Tensor {
            name: name.to_string(),
            dims: dims.to_vec(),
            data: Data::Float(data),
        };
        self.node(Node::new("Constant", &[], name).attr(Attr::Tensor("value", t)))
    }

    /// The `GraphProto` bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut g = Vec::new();
        for n in &self.nodes {
            bytes(&mut g, 1, &encode_node(n));
        }
        bytes(&mut g, 2, b"dense");
        for t in &self.initializers {
            bytes(&mut g, 5, &encode_tensor(t));
        }
        for i in &self.inputs {
            bytes(&mut g, 11, &value_info(i));
        }
        bytes(&mut g, 12, &value_info(&self.output));
        g
    }
}

/// `model` (a bundle file's bytes) with its graph replaced by `graph`: every other top-level
/// field (metadata, opset, IR version) is kept as it was.
pub fn replace_graph(model: &[u8], graph: &Graph) -> Vec<u8> {
    let mut out = Vec::with_capacity(model.len());
    let mut body = graph.encode();
    for (tag, field) in fields(model) {
        if tag != 7 {
            out.extend_from_slice(field);
        } else if graph.keep_initializers {
            let payload = &field[field.len() - payload_len(field)..];
            body.extend(
                fields(payload)
                    .filter(|(t, _)| *t == 5)
                    .flat_map(|(_, f)| f.to_vec()),
            );
        }
    }
    bytes(&mut out, 7, &body);
    out
}

/// The top-level fields of a message: `(field number, the field's bytes, key included)`.
fn fields(buf: &[u8]) -> impl Iterator<Item = (u64, &[u8])> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        if pos >= buf.len() {
            return None;
        }
        let start = pos;
        let key = read_varint(buf, &mut pos);
        pos = match key & 7 {
            0 => {
                read_varint(buf, &mut pos);
                pos
            }
            1 => pos + 8,
            2 => {
                let len = read_varint(buf, &mut pos) as usize;
                pos + len
            }
            5 => pos + 4,
            w => panic!("wire type {w} in a bundle file"),
        };
        Some((key >> 3, &buf[start..pos]))
    })
}

/// The length of a length-delimited field's payload (`field` includes its key and length).
fn payload_len(field: &[u8]) -> usize {
    let mut pos = 0;
    read_varint(field, &mut pos);
    read_varint(field, &mut pos) as usize
}

fn encode_node(n: &Node) -> Vec<u8> {
    let mut b = Vec::new();
    for i in &n.inputs {
        bytes(&mut b, 1, i.as_bytes());
    }
    bytes(&mut b, 2, n.output.as_bytes());
    bytes(&mut b, 4, n.op.as_bytes());
    for a in &n.attrs {
        let mut m = Vec::new();
        match a {
            Attr::Int(name, v) => {
                bytes(&mut m, 1, name.as_bytes());
                varint_field(&mut m, 3, *v as u64);
                varint_field(&mut m, 20, 2);
            }
            Attr::Float(name, v) => {
                bytes(&mut m, 1, name.as_bytes());
                m.push(2 << 3 | 5);
                m.extend_from_slice(&v.to_le_bytes());
                varint_field(&mut m, 20, 1);
            }
            Attr::Tensor(name, t) => {
                bytes(&mut m, 1, name.as_bytes());
                bytes(&mut m, 5, &encode_tensor(t));
                varint_field(&mut m, 20, 4);
            }
        }
        bytes(&mut b, 5, &m);
    }
    b
}

fn encode_tensor(t: &Tensor) -> Vec<u8> {
    let mut b = Vec::new();
    if !t.dims.is_empty() {
        let mut dims = Vec::new();
        for &d in &t.dims {
            push_varint(&mut dims, d as u64);
        }
        bytes(&mut b, 1, &dims);
    }
    match &t.data {
        Data::Float(v) => {
            varint_field(&mut b, 2, 1);
            bytes(&mut b, 8, t.name.as_bytes());
            let raw: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            bytes(&mut b, 9, &raw);
        }
        Data::Int(v) => {
            varint_field(&mut b, 2, 7);
            let mut packed = Vec::new();
            for &x in v {
                push_varint(&mut packed, x as u64);
            }
            bytes(&mut b, 7, &packed);
            bytes(&mut b, 8, t.name.as_bytes());
        }
    }
    b
}

fn value_info(name: &str) -> Vec<u8> {
    let mut b = Vec::new();
    bytes(&mut b, 1, name.as_bytes());
    b
}

fn bytes(out: &mut Vec<u8>, tag: u64, body: &[u8]) {
    push_varint(out, tag << 3 | 2);
    push_varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

fn varint_field(out: &mut Vec<u8>, tag: u64, v: u64) {
    push_varint(out, tag << 3);
    push_varint(out, v);
}

fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn read_varint(buf: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[*pos];
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return v;
        }
        shift += 7;
    }
}

//! The engine's dense IR: a DAG of row-batch operations with constant weights.

/// Index of a value (= the node producing it) in a [`Graph`].
pub(crate) type ValueId = usize;

/// A dense row-major matrix.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mat {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Mat {
    pub(crate) fn new(rows: usize, cols: usize, data: Vec<f32>) -> Self {
        debug_assert_eq!(rows * cols, data.len());
        Self { rows, cols, data }
    }

    pub(crate) fn transposed(&self) -> Mat {
        let mut data = vec![0.0; self.data.len()];
        for r in 0..self.rows {
            for c in 0..self.cols {
                data[c * self.rows + r] = self.data[r * self.cols + c];
            }
        }
        Mat::new(self.cols, self.rows, data)
    }
}

/// One operation. Every value is a batch `[N, width]` of `f32` rows.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// A graph input.
    Input(String),
    /// `y = W·x + b` per row; `w` is `[out, in]`.
    Linear {
        x: ValueId,
        w: Mat,
        b: Option<Vec<f32>>,
    },
    /// `y = x + b` per row.
    Bias { x: ValueId, b: Vec<f32> },
    /// `y = a + b`.
    Add(ValueId, ValueId),
    /// `y = max(x, 0)`.
    Relu(ValueId),
    /// Columns of the inputs side by side.
    Concat(Vec<ValueId>),
    /// Columns `start..end` of `x`.
    Slice {
        x: ValueId,
        start: usize,
        end: usize,
    },
    /// `y = table[trunc(x[col])]`, `x` a graph input (an embedding lookup of a schedule
    /// field's value index).
    Lookup { x: ValueId, col: usize, table: Mat },
}

/// A graph: nodes in topological order with their widths and names (for errors and
/// `inspect`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Graph {
    nodes: Vec<(Node, usize, String)>,
    pub output: ValueId,
}

impl Graph {
    pub(crate) fn push(&mut self, node: Node, width: usize, name: &str) -> ValueId {
        self.nodes.push((node, width, name.to_string()));
        self.nodes.len() - 1
    }

    pub(crate) fn node(&self, id: ValueId) -> &Node {
        &self.nodes[id].0
    }

    pub(crate) fn width(&self, id: ValueId) -> usize {
        self.nodes[id].1
    }

    pub(crate) fn name(&self, id: ValueId) -> &str {
        &self.nodes[id].2
    }

    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The input node called `name`.
    pub(crate) fn input(&self, name: &str) -> Option<ValueId> {
        self.nodes
            .iter()
            .position(|(n, _, _)| matches!(n, Node::Input(i) if i == name))
    }

    /// Appends `other`, with its input `input` replaced by `value` of `self`; returns the id
    /// of `other`'s output in `self`. Other inputs of `other` are matched by name with
    /// inputs of `self` (added when missing).
    pub(crate) fn splice(&mut self, other: &Graph, input: &str, value: ValueId) -> ValueId {
        let mut map = Vec::with_capacity(other.len());
        for (node, width, name) in &other.nodes {
            let m = |v: &ValueId| map[*v];
            let id = match node {
                Node::Input(n) if n == input => value,
                Node::Input(n) => match self.input(n) {
                    Some(id) => id,
                    None => self.push(Node::Input(n.clone()), *width, name),
                },
                Node::Linear { x, w, b } => self.push(
                    Node::Linear {
                        x: m(x),
                        w: w.clone(),
                        b: b.clone(),
                    },
                    *width,
                    name,
                ),
                Node::Bias { x, b } => self.push(
                    Node::Bias {
                        x: m(x),
                        b: b.clone(),
                    },
                    *width,
                    name,
                ),
                Node::Add(a, b) => self.push(Node::Add(m(a), m(b)), *width, name),
                Node::Relu(x) => self.push(Node::Relu(m(x)), *width, name),
                Node::Concat(xs) => {
                    self.push(Node::Concat(xs.iter().map(m).collect()), *width, name)
                }
                Node::Slice { x, start, end } => self.push(
                    Node::Slice {
                        x: m(x),
                        start: *start,
                        end: *end,
                    },
                    *width,
                    name,
                ),
                Node::Lookup { x, col, table } => self.push(
                    Node::Lookup {
                        x: m(x),
                        col: *col,
                        table: table.clone(),
                    },
                    *width,
                    name,
                ),
            };
            map.push(id);
        }
        map[other.output]
    }
}

//! Second stage of building a graph: rewrite passes over the validated [`Ir`].
//!
//! - [`fuse_relu`]: a `SparseReLU` whose input is read by nothing else is folded into the
//!   stencil that produces it ([`Stencil::fuse_relu`]); the ReLU node disappears and its
//!   readers read the stencil's output. The fused stencil applies the same ReLU to each
//!   output row as the last step, so the result is the same bit for bit.
//!
//! Global average pooling needs no pass: the executor sums a value's rows right after
//! computing them, in the same task (see `exec`).
//!
//! [`Stencil::fuse_relu`]: super::ops::Stencil::fuse_relu

use super::ops::Op;
use super::validate::Ir;

/// Runs every pass, in order.
pub(crate) fn run_all(ir: &mut Ir) {
    fuse_relu(ir);
}

/// Folds `SparseReLU` nodes into their producer when that stencil's output has no other
/// reader and is not the graph output.
pub(crate) fn fuse_relu(ir: &mut Ir) {
    let mut j = 0;
    while j < ir.nodes.len() {
        let relu_input = match &ir.nodes[j].op {
            Op::Stencil(s) if s.is_relu() => Some(ir.nodes[j].inputs[0]),
            _ => None,
        };
        let Some(s) = relu_input else {
            j += 1;
            continue;
        };
        let readers = ir
            .nodes
            .iter()
            .flat_map(|n| n.inputs.iter())
            .filter(|&&x| x == s)
            .count();
        let producer = ir.nodes.iter().position(|n| n.output == s);
        let fused = match producer {
            Some(i) if readers == 1 && s != ir.output_slot => match &mut ir.nodes[i].op {
                Op::Stencil(st) => st.fuse_relu(),
                _ => false,
            },
            _ => false,
        };
        if !fused {
            j += 1;
            continue;
        }
        let gone = ir.nodes.remove(j);
        for n in &mut ir.nodes {
            for x in &mut n.inputs {
                if *x == gone.output {
                    *x = s;
                }
            }
        }
        if ir.output_slot == gone.output {
            ir.output_slot = s;
        }
    }
}

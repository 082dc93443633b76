//! Validation errors: one bad graph per failure, each naming the node and the problem.

use super::*;
use crate::ErrorKind;

fn load_err(spec: &GraphSpec) -> (String, String) {
    let e = FeaturizerGraph::from_spec(spec).expect_err("must fail");
    match e.kind() {
        ErrorKind::Featurize { node, reason } => (node.clone(), reason.clone()),
        other => panic!("unexpected {other:?}"),
    }
}

/// A valid one-conv graph to mutate.
fn base() -> GraphSpec {
    graph(
        vec![
            node(
                "c",
                "SparseConv",
                &["pattern", "W", "b"],
                &[("kernel_size", 3)],
            ),
            node("p", "SparseGlobalAvgPool", &["c"], &[]),
        ],
        "p",
        vec![
            tensor("W", &[9, 1, 4], vec![0.5; 36]),
            tensor("b", &[4], vec![0.0; 4]),
        ],
    )
}

#[test]
fn base_graph_is_valid() {
    assert_eq!(
        FeaturizerGraph::from_spec(&base())
            .expect("valid")
            .output_dim(),
        4
    );
}

#[test]
fn op_and_domain_errors() {
    let mut s = base();
    s.nodes[0].op_type = "SparseDeconv".into();
    assert_eq!(
        load_err(&s),
        (
            "c".into(),
            "unknown op type 'SparseDeconv' in domain 'ai.dashrank.sparse'".into()
        )
    );
    let mut s = base();
    s.nodes[0].domain = "com.example".into();
    assert_eq!(
        load_err(&s).1,
        "unknown domain 'com.example' (op type 'SparseConv')"
    );
    let mut s = base();
    s.nodes[1].domain = String::new();
    assert_eq!(
        load_err(&s),
        (
            "p".into(),
            "unknown op type 'SparseGlobalAvgPool' in domain ''".into()
        )
    );
    let mut s = base();
    s.nodes[0].name = String::new();
    s.nodes[0].op_type = "Nope".into();
    assert_eq!(load_err(&s).0, "#0 Nope");
}

#[test]
fn attribute_errors() {
    let mut s = base();
    s.nodes[0].attributes.clear();
    assert_eq!(load_err(&s).1, "missing attribute 'kernel_size'");
    let mut s = base();
    s.nodes[0]
        .attributes
        .insert("kernel_size".into(), AttrValue::Int(0));
    assert_eq!(
        load_err(&s).1,
        "attribute 'kernel_size' = 0 is outside 1..=31"
    );
    let mut s = base();
    s.nodes[0]
        .attributes
        .insert("stride".into(), AttrValue::Ints(vec![2, 1]));
    assert!(load_err(&s)
        .1
        .starts_with("attribute 'stride' must be an integer"));
    let mut s = base();
    s.nodes[0]
        .attributes
        .insert("padding".into(), AttrValue::Int(1));
    assert_eq!(load_err(&s).1, "unknown attribute 'padding'");
    let mut s = base();
    s.nodes[0]
        .attributes
        .insert("kernel_size".into(), AttrValue::Ints(vec![3, 3]));
    assert!(FeaturizerGraph::from_spec(&s).is_ok());
}

#[test]
fn weight_errors() {
    let mut s = base();
    s.initializers.remove("W");
    assert_eq!(
        load_err(&s),
        (
            "c".into(),
            "weight 'W' is not an initializer of the graph".into()
        )
    );
    let mut s = base();
    s.initializers
        .insert("W".into(), tensor("W", &[9, 2, 4], vec![0.0; 72]).1);
    assert_eq!(
        load_err(&s).1,
        "weight 'W' has shape [9, 2, 4], expected [kernel_size² = 9, Cin = 1, Cout > 0]"
    );
    let mut s = base();
    s.initializers
        .insert("W".into(), tensor("W", &[25, 1, 4], vec![0.0; 100]).1);
    assert!(load_err(&s)
        .1
        .starts_with("weight 'W' has shape [25, 1, 4]"));
    let mut s = base();
    s.initializers
        .insert("b".into(), tensor("b", &[3], vec![0.0; 3]).1);
    assert_eq!(
        load_err(&s).1,
        "bias 'b' has shape [3], expected [Cout = 4]"
    );
    let mut s = base();
    let mut w = vec![0.0; 36];
    w[7] = f32::NAN;
    s.initializers
        .insert("W".into(), tensor("W", &[9, 1, 4], w).1);
    assert_eq!(
        load_err(&s).1,
        "weight 'W' has a non-finite value NaN at flat index 7"
    );
    let mut s = base();
    s.initializers.insert(
        "b".into(),
        tensor("b", &[4], vec![0.0, f32::INFINITY, 0.0, 0.0]).1,
    );
    assert_eq!(
        load_err(&s).1,
        "bias 'b' has a non-finite value inf at flat index 1"
    );
    let mut s = base();
    s.initializers
        .insert("W".into(), tensor("W", &[9, 1, 4], vec![0.0; 35]).1);
    assert_eq!(
        load_err(&s).1,
        "weight 'W' has 35 values but dims [9, 1, 4] need 36"
    );
    // Weight that is a computed value.
    let mut s = base();
    s.nodes.insert(
        1,
        node("c2", "SparseConv", &["c", "c", "b"], &[("kernel_size", 3)]),
    );
    assert_eq!(
        load_err(&s),
        (
            "c2".into(),
            "weight 'c' is a computed value, expected an initializer".into()
        )
    );
}

#[test]
fn value_errors() {
    let mut s = base();
    s.nodes[1].inputs[0] = "nope".into();
    assert_eq!(
        load_err(&s).1,
        "input 0 'nope' is not defined by the graph input or an earlier node"
    );
    let mut s = base();
    s.nodes[1].inputs[0] = "W".into();
    assert_eq!(
        load_err(&s).1,
        "input 0 'W' is an initializer, expected a value computed by the graph"
    );
    // Unused node output.
    let mut s = base();
    s.nodes.insert(1, node("dead", "SparseReLU", &["c"], &[]));
    assert_eq!(
        load_err(&s),
        (
            "dead".into(),
            "output is not used by any node nor the graph output".into()
        )
    );
    // Unused initializer.
    let mut s = base();
    s.initializers
        .insert("extra".into(), tensor("extra", &[1], vec![0.0]).1);
    assert_eq!(
        load_err(&s),
        ("extra".into(), "initializer is not used by any node".into())
    );
    // Duplicate output name.
    let mut s = base();
    s.nodes[1].outputs[0] = "c".into();
    assert_eq!(
        load_err(&s),
        ("p".into(), "output 'c' is already defined".into())
    );
    // Wrong input count.
    let mut s = base();
    s.nodes[1].inputs.push("c".into());
    assert_eq!(load_err(&s).1, "expected 1 input(s), found 2");
    let mut s = base();
    s.nodes[0].inputs.truncate(1);
    assert_eq!(load_err(&s).1, "expected 2 to 3 input(s), found 1");
}

#[test]
fn dense_sparse_mismatch_errors() {
    // ReLU on a dense value.
    let mut s = base();
    s.nodes.push(node("r", "SparseReLU", &["p"], &[]));
    s.outputs[0] = "r".into();
    assert_eq!(
        load_err(&s),
        (
            "r".into(),
            "input 0 'p' is dense [1, C], expected a sparse value".into()
        )
    );
    // Concat of a sparse value.
    let mut s = base();
    s.nodes
        .push(node("cat", "Concat", &["p", "c"], &[("axis", 1)]));
    s.outputs[0] = "cat".into();
    assert_eq!(
        load_err(&s).1,
        "input 1 'c' is sparse, expected a dense [1, C] value (pool it first)"
    );
    // Sparse graph output.
    let mut s = base();
    s.nodes.pop();
    s.outputs[0] = "c".into();
    assert_eq!(
        load_err(&s),
        (
            "graph".into(),
            "graph output 'c' is sparse, expected a dense [1, F] value".into()
        )
    );
    // Concat axis.
    let mut s = base();
    s.nodes.push(node("cat", "Concat", &["p"], &[]));
    s.outputs[0] = "cat".into();
    assert_eq!(load_err(&s).1, "missing attribute 'axis'");
    s.nodes[2]
        .attributes
        .insert("axis".into(), AttrValue::Int(0));
    assert_eq!(
        load_err(&s).1,
        "attribute 'axis' must be 1 (features of dense [1, C] values), found Int(0)"
    );
}

#[test]
fn graph_level_errors() {
    let mut s = base();
    s.inputs.push("x".into());
    assert_eq!(
        load_err(&s),
        (
            "graph".into(),
            "expected exactly 1 graph input (the pattern), found 2".into()
        )
    );
    let mut s = base();
    s.outputs = vec![];
    assert_eq!(load_err(&s).1, "expected exactly 1 graph output, found 0");
    let mut s = base();
    s.outputs[0] = "missing".into();
    assert_eq!(
        load_err(&s).1,
        "graph output 'missing' is not produced by any node"
    );
    let mut s = base();
    s.nodes[0].outputs.push("extra".into());
    assert_eq!(
        load_err(&s).1,
        "expected exactly 1 named output, found [\"c\", \"extra\"]"
    );
}

#[test]
fn run_argument_errors() {
    let g = FeaturizerGraph::from_spec(&base()).expect("valid");
    let p = pattern(1, 1, &[(0, 0)]);
    let e = g
        .run(
            &p,
            &FeaturizeOptions {
                threads: Some(0),
                ..Default::default()
            },
        )
        .expect_err("zero threads");
    assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }));
    let e = g
        .run(
            &p,
            &FeaturizeOptions {
                band_entries: Some(0),
                ..Default::default()
            },
        )
        .expect_err("empty bands");
    assert!(e.to_string().contains("band_entries"), "{e}");
}

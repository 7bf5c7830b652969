//! Graph passes checked against PyTorch's own partitions of the reference joint graphs.

use std::path::PathBuf;

use graphbug_ir::passes::{
    default_side_effects, eliminate_common_subexpressions, eliminate_dead_code, extract_subgraph,
    without_dead_code,
};
use graphbug_ir::{parse_graph, print_graph, Graph, IrError, NodeId, NodeKind, OpName, Value};

fn fixture(model: &str, file: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../tests/fixtures")
        .join(model)
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn ids(g: &Graph, names: &[&str]) -> Vec<NodeId> {
    names
        .iter()
        .map(|n| g.find(n).unwrap_or_else(|| panic!("no node {n}")))
        .collect()
}

/// functorch's default partition is two extractions from the joint graph; ours must give
/// PyTorch's fw_default.py and bw_default.py exactly.
#[test]
fn extraction_reproduces_functorch_default_partition() {
    for model in ["mlp", "cnn", "gpt4"] {
        let joint = parse_graph(&fixture(model, "joint.py")).unwrap();
        let info: serde_json::Value =
            serde_json::from_str(&fixture(model, "partition.json")).unwrap();
        let saved: Vec<&str> = info["default"]["saved"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let num_fwd = info["num_fwd_outputs"].as_u64().unwrap() as usize;
        let primals: Vec<NodeId> = joint
            .placeholders()
            .into_iter()
            .filter(|&i| joint.node(i).name.starts_with("primals"))
            .collect();
        let tangents: Vec<NodeId> = joint
            .placeholders()
            .into_iter()
            .filter(|&i| joint.node(i).name.starts_with("tangents"))
            .collect();
        let saved_ids = ids(&joint, &saved);

        let mut fw_out: Vec<Value> = joint.outputs()[..num_fwd].to_vec();
        fw_out.extend(saved_ids.iter().map(|&i| Value::Node(i)));
        let fw = extract_subgraph(&joint, &primals, &fw_out, &default_side_effects).unwrap();
        let want = parse_graph(&fixture(model, "fw_default.py")).unwrap();
        assert_eq!(print_graph(&fw), print_graph(&want), "{model} forward");

        let mut bw_in = saved_ids.clone();
        bw_in.extend(tangents);
        let bw_out = joint.outputs()[num_fwd..].to_vec();
        let bw = extract_subgraph(&joint, &bw_in, &bw_out, &default_side_effects).unwrap();
        let want = parse_graph(&fixture(model, "bw_default.py")).unwrap();
        assert_eq!(print_graph(&bw), print_graph(&want), "{model} backward");
    }
}

#[test]
fn extraction_names_the_missing_input() {
    let joint = parse_graph(&fixture("mlp", "joint.py")).unwrap();
    let out = vec![Value::Node(joint.find("addmm_2").unwrap())];
    let only_some = ids(&joint, &["primals_1", "primals_2"]);
    let err = extract_subgraph(&joint, &only_some, &out, &default_side_effects).unwrap_err();
    assert_eq!(
        err,
        IrError::Extract(
            "output `addmm_2` needs `primals_8`, which is not among the inputs".into()
        )
    );
    let twice = ids(&joint, &["primals_1", "primals_1"]);
    assert!(
        extract_subgraph(&joint, &twice, &out, &default_side_effects)
            .unwrap_err()
            .to_string()
            .contains("given twice")
    );
    let multi = ids(&joint, &["native_layer_norm"]);
    assert!(
        extract_subgraph(&joint, &multi, &out, &default_side_effects)
            .unwrap_err()
            .to_string()
            .contains("multi-output")
    );
}

const DEAD: &str = r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4]", b: "i64[]"):
        relu: "f32[4]" = torch.ops.aten.relu.default(x)
        neg: "f32[4]" = torch.ops.aten.neg.default(relu)
        add_: "i64[]" = torch.ops.aten.add_.Tensor(b, 1)
        sin: "f32[4]" = torch.ops.aten.sin.default(x)
        split = torch.ops.aten.split.Tensor(x, 2)
        getitem: "f32[2]" = split[0]
        getitem_1: "f32[2]" = split[1]
        return (sin, getitem_1)
"#;

#[test]
fn dead_code_elimination_keeps_mutations_and_live_getitems() {
    let g = parse_graph(DEAD).unwrap();
    let d = eliminate_dead_code(&g, &default_side_effects);
    let names: Vec<&str> = d.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["x", "b", "add_", "sin", "split", "getitem_1"]);
    d.verify().unwrap();
    // A pass treating nothing as side-effecting drops the mutation too.
    let d = eliminate_dead_code(&g, &|_| false);
    assert!(d.find("add_").is_none());
    // The printed graph stays valid text.
    let text = print_graph(&d);
    assert_eq!(print_graph(&parse_graph(&text).unwrap()), text);
}

#[test]
fn without_dead_code_copies_only_when_something_is_dead() {
    let g = parse_graph(DEAD).unwrap();
    let d = without_dead_code(&g, &default_side_effects);
    assert!(matches!(d, std::borrow::Cow::Owned(_)));
    assert_eq!(
        print_graph(&d),
        print_graph(&eliminate_dead_code(&g, &default_side_effects))
    );
    // Nothing is dead in what it returned: the same graph, borrowed.
    let again = without_dead_code(&d, &default_side_effects);
    assert!(matches!(again, std::borrow::Cow::Borrowed(_)));
    assert_eq!(print_graph(&again), print_graph(&d));
}

#[test]
fn into_reordered_moves_nodes_and_names_a_lost_input() {
    let g = parse_graph(&fixture("mlp", "forward.py")).unwrap();
    // Placeholders, then every other node, in order: the same graph back.
    let mut order: Vec<NodeId> = g.placeholders();
    order.extend(g.ids().filter(|&i| !g.node(i).is_placeholder()));
    let same = g.clone().into_reordered(&order).unwrap();
    assert_eq!(print_graph(&same), print_graph(&g));
    // Leaving out a node that others read is an error naming both.
    let read = g.ids().find(|&i| !g.node(i).is_placeholder()).unwrap();
    let name = g.node(read).name.clone();
    let without: Vec<NodeId> = order.iter().copied().filter(|&i| i != read).collect();
    let err = g.clone().into_reordered(&without).unwrap_err().to_string();
    assert!(err.contains(&format!("`{name}`")), "{err}");
    // So is a node ordered twice.
    let mut twice = order.clone();
    twice.push(read);
    assert!(g.into_reordered(&twice).is_err());
}

#[test]
fn cse_merges_gpt4_masks_and_keeps_outputs() {
    let g = parse_graph(&fixture("gpt4", "forward.py")).unwrap();
    let c = eliminate_common_subexpressions(&g, &default_side_effects);
    c.verify().unwrap();
    let count = |g: &Graph, op: &str| {
        g.nodes
            .iter()
            .filter(|n| n.op().is_some_and(|o| o.name == op))
            .count()
    };
    // Each of the 4 layers builds the same causal mask: ones -> tril -> bitwise_not.
    assert_eq!(count(&g, "ones"), 4);
    assert_eq!(count(&c, "ones"), 1);
    assert_eq!(count(&c, "tril"), 1);
    assert_eq!(count(&c, "bitwise_not"), 1);
    assert_eq!(c.nodes.len(), g.nodes.len() - 9);
    assert_eq!(c.outputs().len(), g.outputs().len());
    // Idempotent.
    assert_eq!(
        eliminate_common_subexpressions(&c, &default_side_effects),
        c
    );
}

#[test]
fn cse_never_merges_side_effects() {
    let text = r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4]"):
        a: "f32[4]" = torch.ops.aten.relu.default(x)
        b: "f32[4]" = torch.ops.aten.relu.default(x)
        c = torch.ops.aten.native_dropout.default(x, 0.5, True)
        getitem: "f32[4]" = c[0]
        d = torch.ops.aten.native_dropout.default(x, 0.5, True)
        getitem_1: "f32[4]" = d[0]
        e: "f32[4]" = torch.ops.aten.relu_.default(x)
        f: "f32[4]" = torch.ops.aten.relu_.default(x)
        s: "f32[4]" = torch.ops.aten.add.Tensor(a, b)
        return (s, getitem, getitem_1, e, f)
"#;
    let g = parse_graph(text).unwrap();
    let c = eliminate_common_subexpressions(&g, &default_side_effects);
    assert_eq!(c.nodes.len(), g.nodes.len() - 1);
    assert!(c.find("b").is_none());
    let a = c.find("a").unwrap();
    assert_eq!(
        c.node(c.find("s").unwrap()).kind,
        NodeKind::Call {
            op: OpName::aten("add", "Tensor"),
            args: vec![Value::Node(a), Value::Node(a)],
            kwargs: Vec::new(),
        }
    );
}

/// Returned values are separate tensors in eager mode, so CSE neither merges them nor
/// merges into them (as functorch's `fx_graph_cse`): `div` stays a forward output and
/// `div_1` a value the backward may recompute.
#[test]
fn cse_keeps_returned_values_apart() {
    let text = r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4]", y: "f32[4]"):
        div: "f32[4]" = torch.ops.aten.div.Tensor(x, y)
        div_1: "f32[4]" = torch.ops.aten.div.Tensor(x, y)
        mul: "f32[4]" = torch.ops.aten.mul.Tensor(div_1, y)
        div_2: "f32[4]" = torch.ops.aten.div.Tensor(x, y)
        return (div, mul, div_2)
"#;
    let g = parse_graph(text).unwrap();
    let c = eliminate_common_subexpressions(&g, &default_side_effects);
    assert_eq!(c.nodes.len(), g.nodes.len());
}

#[test]
fn users_and_topological_order() {
    let g = parse_graph(DEAD).unwrap();
    let users = g.users();
    let x = g.find("x").unwrap();
    let names = |ids: &[NodeId]| {
        ids.iter()
            .map(|&i| g.node(i).name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&users.nodes[x.index()]), ["relu", "sin", "split"]);
    let sin = g.find("sin").unwrap();
    assert!(users.by_output[sin.index()]);
    assert!(users.is_unused(g.find("neg").unwrap()));
    assert_eq!(users.count(g.find("split").unwrap()), 2);

    // A reader that reads a node twice, apart, counts once; lists are in graph order.
    let twice = parse_graph(
        r#"
class G(torch.nn.Module):
    def forward(self, a: "f32[4]", b: "f32[4]"):
        cat: "f32[12]" = torch.ops.aten.cat.default([a, b, a])
        add: "f32[4]" = torch.ops.aten.add.Tensor(b, a)
        return (cat, add)
"#,
    )
    .unwrap();
    let readers = twice.users().nodes;
    assert_eq!(readers.len(), twice.nodes.len());
    let per_node: Vec<Vec<String>> = readers
        .iter()
        .map(|r| r.iter().map(|&i| twice.node(i).name.to_string()).collect())
        .collect();
    assert_eq!(
        per_node,
        [vec!["cat", "add"], vec!["cat", "add"], vec![], vec![]]
    );

    // A graph out of order (as JSON from elsewhere may be) sorts stably.
    let mut shuffled = g.clone();
    shuffled.nodes.swap(2, 4); // relu <-> add_: relu now comes after its reader neg.
    let fix = |v: &mut graphbug_ir::Value| {
        *v = v.map_nodes(&mut |n| {
            Value::Node(match n.0 {
                2 => NodeId(4),
                4 => NodeId(2),
                o => NodeId(o),
            })
        })
    };
    for node in &mut shuffled.nodes {
        if let graphbug_ir::NodeKind::Call { args, .. } = &mut node.kind {
            args.iter_mut().for_each(fix);
        }
    }
    assert!(matches!(
        shuffled.verify(),
        Err(IrError::UseBeforeDefinition { .. })
    ));
    shuffled.sort_topologically().unwrap();
    shuffled.verify().unwrap();
    let order: Vec<&str> = shuffled.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        order,
        [
            "x",
            "b",
            "add_",
            "relu",
            "neg",
            "sin",
            "split",
            "getitem",
            "getitem_1"
        ]
    );
}

#[test]
fn a_cycle_is_reported_by_name() {
    let mut g = parse_graph(DEAD).unwrap();
    // relu reads neg, which reads relu.
    if let graphbug_ir::NodeKind::Call { args, .. } = &mut g.nodes[2].kind {
        args[0] = Value::Node(NodeId(3));
    }
    assert_eq!(
        g.topological_order().unwrap_err(),
        IrError::Cycle {
            node: "relu".into()
        }
    );
}

#[test]
fn insert_after_shifts_ids_and_redirects_readers() {
    let g = parse_graph(DEAD).unwrap();
    let relu = g.find("relu").unwrap();
    let node = graphbug_ir::Node {
        name: "cos".into(),
        kind: graphbug_ir::NodeKind::Call {
            op: graphbug_ir::OpName::aten("cos", "default"),
            args: vec![Value::Node(relu)],
            kwargs: vec![],
        },
        meta: graphbug_ir::Meta::Unknown,
    };
    let (redirected, id) = g.insert_after(relu, node.clone(), true);
    redirected.verify().unwrap();
    assert_eq!(redirected.node(id).name, "cos");
    let text = print_graph(&redirected);
    assert!(
        text.contains("cos = torch.ops.aten.cos.default(relu);  relu = None\n"),
        "{text}"
    );
    assert!(
        text.contains("neg: \"f32[4]\" = torch.ops.aten.neg.default(cos)"),
        "{text}"
    );
    // Without redirect, readers keep reading the original; later ids still line up.
    let (plain, _) = g.insert_after(g.find("getitem_1").unwrap(), node, false);
    plain.verify().unwrap();
    assert_eq!(plain.outputs().len(), 2);
    assert!(print_graph(&plain).contains("neg: \"f32[4]\" = torch.ops.aten.neg.default(relu)"));
}

#[test]
fn verify_finds_a_duplicate_name_anywhere_in_a_big_graph() {
    let g = parse_graph(&fixture("gpt4", "joint.py")).unwrap();
    g.verify().unwrap();
    // The last node takes the first call's name: far apart, as in a big graph.
    let first_call = g.nodes.iter().position(|n| n.op().is_some()).unwrap();
    let mut dup = g.clone();
    let last = dup.nodes.len() - 1;
    dup.nodes[last].name = g.nodes[first_call].name.clone();
    match dup.verify() {
        Err(IrError::DuplicateName { name }) => assert_eq!(name, g.nodes[first_call].name),
        other => panic!("expected a duplicate name, got {other:?}"),
    }
}

#[test]
fn verify_reports_the_first_repeated_name_of_a_big_graph() {
    // 20k nodes, two repeats far apart.
    let mut g = Graph::new("G");
    g.nodes.push(graphbug_ir::Node {
        name: "x".into(),
        kind: NodeKind::Placeholder,
        meta: graphbug_ir::Meta::Unknown,
    });
    for k in 0..20_000u32 {
        g.nodes.push(graphbug_ir::Node {
            name: format!("relu_{k}").into(),
            kind: NodeKind::Call {
                op: OpName::aten("relu", "default"),
                args: vec![Value::Node(NodeId(k))],
                kwargs: vec![],
            },
            meta: graphbug_ir::Meta::Unknown,
        });
    }
    g.output = Some(vec![Value::Node(NodeId(20_000))]);
    g.verify().unwrap();
    // Two repeats: node 15000 takes node 3's name, node 12000 node 9000's (`relu_8999`).
    // Node 12000 comes first in the graph, so its repeat is the one reported.
    let mut dup = g.clone();
    dup.nodes[15_000].name = dup.nodes[3].name.clone();
    dup.nodes[12_000].name = dup.nodes[9_000].name.clone();
    match dup.verify() {
        Err(IrError::DuplicateName { name }) => assert_eq!(name, "relu_8999"),
        other => panic!("expected a duplicate name, got {other:?}"),
    }
    // Names that differ only past a shared prefix are not repeats.
    let mut near = g.clone();
    near.nodes[20_000].name = "relu_19999_".into();
    near.verify().unwrap();
}

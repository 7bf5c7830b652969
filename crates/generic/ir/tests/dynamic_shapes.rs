//! Dynamic-shape graphs as torch.compile(dynamic=True) hands them to AOTAutograd's
//! compilers (tests/fixtures/dynamic, from PyTorch 2.13): symbolic sizes, `Sym` inputs and
//! the size arithmetic between them.

mod common;

use graphbug_ir::{parse_graph, print_graph, Meta, NodeKind, OpName};

const MODELS: [&str; 5] = ["mlp", "reshape", "conv", "attention", "interpolate"];

fn node<'g>(graph: &'g graphbug_ir::Graph, name: &str) -> &'g graphbug_ir::Node {
    graph.node(graph.find(name).unwrap())
}

fn fixture(model: &str, file: &str) -> String {
    common::fixture_text(&format!("dynamic/{model}/{file}"))
}

#[test]
fn dynamic_graphs_print_back_byte_for_byte() {
    for model in MODELS {
        for file in ["fw.py", "bw.py"] {
            let text = fixture(model, file);
            let graph = parse_graph(&text).unwrap_or_else(|e| panic!("{model}/{file}: {e}"));
            assert!(
                graph.nodes.iter().any(|n| n.meta.is_symbolic()),
                "{model}/{file} has symbolic metas"
            );
            let printed = print_graph(&graph);
            common::assert_same_text(&format!("{model}/{file}"), &printed, &text);
        }
    }
}

#[test]
fn size_arithmetic_becomes_operator_calls() {
    let graph = parse_graph(&fixture("reshape", "fw.py")).unwrap();
    let op_of = |name: &str| match &graph.node(graph.find(name).unwrap()).kind {
        NodeKind::Call { op, .. } => op.clone(),
        other => panic!("{name} is {other:?}"),
    };
    assert_eq!(op_of("mul"), OpName::python("operator", "mul"));
    assert_eq!(op_of("floordiv"), OpName::python("operator", "floordiv"));
    assert_eq!(op_of("mod"), OpName::python("operator", "mod"));
    assert_eq!(op_of("add_15"), OpName::python("operator", "add"));
    assert_eq!(op_of("mul").to_string(), "operator.mul");
    let p1 = graph.node(graph.find("primals_1").unwrap());
    assert_eq!(p1.meta.annotation().as_deref(), Some("Sym(s97)"));
    match &graph.node(graph.find("view").unwrap()).meta {
        Meta::SymTensor(t) => assert_eq!(t.to_string(), "f32[2*s97, (s98//2)]"),
        other => panic!("view has {other:?}"),
    }
}

#[test]
fn infix_forms_parse_and_print() {
    let text = "class G(torch.nn.Module):
    def forward(self, a: \"Sym(s0)\", b: \"Sym(s1)\"):
        neg: \"Sym(-s0)\" = -a
        pow_1: \"Sym(s1**2)\" = b ** 2
        sub: \"Sym(-s0 - s1**2)\" = neg - pow_1;  neg = pow_1 = None
        mul: \"Sym(-s0*(-s0 - s1**2))\" = sub * -1;  sub = None
        sym_max: \"Sym(Max(s0, s1))\" = torch.sym_max(a, b);  a = b = None
        return (mul, sym_max)
";
    let graph = parse_graph(text).unwrap();
    assert_eq!(print_graph(&graph), text);
    let bad = text.replace("torch.sym_max(a, b)", "frobnicate.now(a, b)");
    let e = parse_graph(&bad).unwrap_err().to_string();
    assert!(
        e.contains("unsupported call target `frobnicate.now`"),
        "{e}"
    );
    let bad = text.replace("= b ** 2", "= torch.ops.aten.view.default(b, [a * 2])");
    let e = parse_graph(&bad).unwrap_err().to_string();
    assert!(
        e.contains("arithmetic is allowed only as a node's right-hand side"),
        "{e}"
    );
}

#[test]
fn specializing_binds_symbols_from_the_inputs_and_rewrites_sizes() {
    use graphbug_ir::specialize::{specialize, Binder};
    let graph = parse_graph(&fixture("reshape", "fw.py")).unwrap();
    let mut binder = Binder::new();
    binder
        .bind_tensor(node(&graph, "primals_3"), &[6, 4])
        .unwrap();
    binder.bind_tensor(node(&graph, "primals_5"), &[3]).unwrap();
    binder.bind_sym(node(&graph, "primals_1"), 6).unwrap();
    let bindings = binder.finish(&graph).unwrap();
    assert_eq!(
        bindings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>(),
        ["s52=3", "s97=6", "s98=4"]
    );
    let fixed = specialize(&graph, &bindings).unwrap();
    let text = print_graph(&fixed);
    assert!(!fixed.nodes.iter().any(|n| n.meta.is_symbolic()), "{text}");
    assert!(text.contains("primals_1: \"i64[]\""), "{text}");
    assert!(
        text.contains(
            "mul: \"i64[]\" = torch.ops.aten.scalar_tensor.default(12, dtype = torch.int64)"
        ),
        "{text}"
    );
    assert!(
        text.contains("view: \"f32[12, 2]\" = torch.ops.aten.view.default(primals_3, [12, -1])"),
        "{text}"
    );
    assert!(
        text.contains("mul_10: \"f32[3]\" = torch.ops.aten.mul.Tensor(sigmoid, 2)"),
        "{text}"
    );
    // The static graph is an ordinary graph: it prints and parses back unchanged.
    assert_eq!(print_graph(&parse_graph(&text).unwrap()), text);
}

#[test]
fn contradictions_and_missing_symbols_are_named() {
    use graphbug_ir::specialize::{specialize, Binder};
    let graph = parse_graph(&fixture("mlp", "fw.py")).unwrap();
    let mut binder = Binder::new();
    binder.bind("s33", 5, "--bind").unwrap();
    let e = binder
        .bind_tensor(node(&graph, "primals_4"), &[7, 8])
        .unwrap_err();
    assert_eq!(e, "s33 = 5 from --bind but 7 from primals_4 dim 0");
    let e = binder
        .bind_tensor(node(&graph, "primals_4"), &[5])
        .unwrap_err();
    assert!(
        e.contains(
            "input `primals_4` has 1 dimensions [5], but its annotation \"f32[s33, 8]\" has 2"
        ),
        "{e}"
    );
    let e = Binder::new().finish(&graph).unwrap_err();
    assert_eq!(
        e,
        "no value for size symbol s33: give the inputs, or --bind s33=N"
    );
    // A static size that disagrees with the tensor is caught too.
    let mut binder = Binder::new();
    let e = binder
        .bind_tensor(node(&graph, "primals_4"), &[5, 9])
        .unwrap_err();
    assert_eq!(e, "primals_4 dim 1 is 9, but its annotation says 8");
    // An expression size is checked against the bound symbols.
    let reshape = parse_graph(&fixture("reshape", "bw.py")).unwrap();
    let mut binder = Binder::new();
    for (name, v) in [("primals_1", 6), ("primals_2", 4), ("primals_4", 3)] {
        binder.bind_sym(node(&reshape, name), v).unwrap();
    }
    binder
        .bind_tensor(node(&reshape, "tangents_1"), &[11])
        .unwrap();
    let e = binder.finish(&reshape).unwrap_err();
    assert_eq!(
        e,
        "tangents_1 dim 0 is 11, but its annotation says 2*s97 = 12"
    );
    let bindings = [("s33".to_string(), 5)].into();
    let fixed = specialize(&graph, &bindings).unwrap();
    assert!(print_graph(&fixed).contains("addmm: \"f32[5, 16]\""));
}

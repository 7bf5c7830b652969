//! Dynamo-level graphs, as TorchDynamo hands them to a backend (tests/fixtures/dynamo, from
//! PyTorch 2.13): torch functions, Tensor methods, Python operators, tensor indexing and
//! the `l_x_ = L_x_` input aliases, with static and dynamic shapes.

mod common;

use graphbug_ir::{parse_graph, print_graph, NodeKind, OpName, Value};

const CASES: [&str; 7] = [
    "mlp",
    "conv",
    "attention",
    "tensor_code",
    "loss",
    "residual",
    "indexing",
];

fn fixture(file: &str) -> String {
    common::fixture_text(&format!("dynamo/{file}"))
}

/// The text without comment lines and the blank lines FX puts before them.
fn code_lines(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn dynamo_graphs_print_back_byte_for_byte() {
    for case in CASES {
        for file in [format!("{case}.py"), format!("{case}_dynamic.py")] {
            let text = fixture(&file);
            let graph = parse_graph(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
            let printed = print_graph(&graph);
            let expected = code_lines(&text);
            common::assert_same_text(&file, &printed, &expected);
            assert_eq!(
                print_graph(&parse_graph(&printed).unwrap()),
                printed,
                "{file}"
            );
        }
    }
}

#[test]
fn torch_calls_methods_operators_and_indexing_are_recorded_as_written() {
    let graph = parse_graph(&fixture("tensor_code.py")).unwrap();
    let call = |name: &str| match &graph.node(graph.find(name).unwrap()).kind {
        NodeKind::Call { op, args, .. } => (op.clone(), args.clone()),
        other => panic!("{name} is {other:?}"),
    };
    assert_eq!(call("view").0, OpName::python("Tensor", "view"));
    assert_eq!(call("c").0, OpName::python("operator", "add"));
    assert_eq!(call("matmul").0, OpName::python("operator", "matmul"));
    assert_eq!(call("gt").0, OpName::python("operator", "gt"));
    assert_eq!(call("neg").0, OpName::python("operator", "neg"));
    assert_eq!(call("cat").0, OpName::python("torch", "cat"));
    assert_eq!(
        call("softmax").0,
        OpName::python("torch.nn.functional", "softmax")
    );
    let (op, args) = call("getitem");
    assert_eq!(op, OpName::python("operator", "getitem"));
    assert_eq!(
        args[1],
        Value::Tuple(vec![
            Value::Slice(vec![Value::None, Value::None, Value::None]),
            Value::Slice(vec![Value::Int(1), Value::Int(3), Value::None]),
        ])
    );
    // The inputs keep the names dynamo gave them and print their parameters' names.
    let a = graph.node(graph.find("l_a_").unwrap());
    assert!(a.is_placeholder());
    assert_eq!(graph.param_names["l_a_"], "L_a_");
}

#[test]
fn augmented_assignment_is_an_in_place_operator_named_by_the_next_statement() {
    let graph = parse_graph(&fixture("residual.py")).unwrap();
    let node = graph.node(graph.find("y_1").unwrap());
    match &node.kind {
        NodeKind::Call { op, .. } => assert_eq!(*op, OpName::python("operator", "iadd")),
        other => panic!("{other:?}"),
    }
    let bad = "class G(torch.nn.Module):
    def forward(self, x: \"f32[2]\", y: \"f32[2]\"):
        x += y
        return (x,)
";
    let e = parse_graph(bad).unwrap_err().to_string();
    assert!(
        e.contains("`x ...=` must be followed by the statement naming its result"),
        "{e}"
    );
    // Every augmented assignment reads as its in-place operator and prints back.
    for (spelling, op) in [
        ("//=", "ifloordiv"),
        ("**=", "ipow"),
        (">>=", "irshift"),
        ("@=", "imatmul"),
    ] {
        let text = format!(
            "class G(torch.nn.Module):
    def forward(self, x: \"f32[2]\", y: \"f32[2]\"):
        x {spelling} y;  x_1: \"f32[2]\" = x;  x = y = None
        return (x_1,)
"
        );
        let graph = parse_graph(&text).unwrap();
        assert_eq!(print_graph(&graph), text);
        match &graph.node(graph.find("x_1").unwrap()).kind {
            NodeKind::Call { op: o, .. } => assert_eq!(*o, OpName::python("operator", op)),
            other => panic!("{other:?}"),
        }
    }
    // A comparison has no augmented form.
    let e = parse_graph(&bad.replace("x += y", "x == y"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected a value, found `=`"), "{e}");
}

#[test]
fn setitem_statements_are_one_node_printed_as_fx_writes_them() {
    let graph = parse_graph(&fixture("indexing.py")).unwrap();
    let node = graph.node(graph.find("setitem").unwrap());
    let NodeKind::Call { op, args, .. } = &node.kind else {
        panic!("setitem is a call")
    };
    assert_eq!(*op, OpName::python("operator", "setitem"));
    assert_eq!(args[0], Value::Node(graph.find("y").unwrap()));
    assert_eq!(args[2], Value::Float(0.0));
    let text = print_graph(&graph);
    assert!(
        text.contains("y[(Ellipsis, slice(0, 2, None))] = 0.0;  setitem = y;  setitem = None"),
        "{text}"
    );
    // The statement naming the node must follow.
    let broken = fixture("indexing.py").replace("  setitem = y;", "");
    let err = parse_graph(&broken).unwrap_err().to_string();
    assert!(
        err.contains("must be followed by the statement naming its result"),
        "{err}"
    );
}

#[test]
fn an_aliased_parameter_keeps_its_name_taken() {
    let head = "class G(torch.nn.Module):\n    def forward(self, L_x_: \"f32[2]\"):\n        l_x_ = L_x_\n";
    let ok = format!("{head}        y = torch.ops.aten.relu.default(l_x_)\n        return (y,)\n");
    let g = parse_graph(&ok).unwrap();
    assert_eq!(g.nodes[0].name, "l_x_");
    // The parameter's own name now reads nothing, and no node may take it.
    let reads_old =
        format!("{head}        y = torch.ops.aten.relu.default(L_x_)\n        return (y,)\n");
    let e = parse_graph(&reads_old).unwrap_err().to_string();
    assert!(e.contains("unknown name `L_x_`"), "{e}");
    let retakes =
        format!("{head}        L_x_ = torch.ops.aten.relu.default(l_x_)\n        return (L_x_,)\n");
    let e = parse_graph(&retakes).unwrap_err().to_string();
    assert!(e.contains("duplicate name `L_x_`"), "{e}");
}

//! Op lookup and schemas read from libtorch's dispatcher.

use graphbug_aten::schema::Elem;
use graphbug_aten::shim::Op;
use graphbug_aten::AtenError;
use graphbug_ir::OpName;

fn op(name: &str) -> std::sync::Arc<Op> {
    Op::find(&OpName::parse(name).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn both_spellings_find_the_same_op() {
    let a = op("aten::add_.Tensor");
    let b = op("torch.ops.aten.add_.Tensor");
    assert_eq!(a.schema, b.schema);
    assert_eq!(
        op("aten::relu").schema.text,
        "aten::relu(Tensor self) -> Tensor"
    );
    assert_eq!(op("torch.ops.aten.relu.default").schema.overload, "");
}

#[test]
fn schemas_carry_names_types_defaults_kwargs_and_aliasing() {
    let s = &op("aten::add_.Tensor").schema;
    assert_eq!(
        s.text,
        "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"
    );
    assert!(s.is_mutable);
    assert_eq!(s.mutated_arguments(), [0]);
    let names: Vec<&str> = s.arguments.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["self", "other", "alpha"]);
    assert!(s.arguments[2].kwarg_only && !s.arguments[1].kwarg_only);
    assert_eq!(s.arguments[2].default.as_deref(), Some("1"));
    assert_eq!(s.arguments[0].alias_set, ["a"]);
    assert!(s.returns[0].is_write);
    assert_eq!(s.num_positional(), 2);

    let e = &op("aten::empty.memory_format").schema;
    let types: Vec<String> = e.arguments.iter().map(|a| a.declared_type()).collect();
    assert_eq!(
        types,
        [
            "SymInt[]",
            "ScalarType?",
            "Layout?",
            "Device?",
            "bool?",
            "MemoryFormat?"
        ]
    );
    assert_eq!(e.arguments[1].arg_type().elem, Elem::ScalarType);

    let m = &op("aten::max_pool2d_with_indices").schema;
    assert_eq!(m.arguments[1].declared_type(), "int[2]");
    assert_eq!(m.arguments[2].default.as_deref(), Some("[]"));
    assert_eq!(m.returns.len(), 2);

    let sp = &op("aten::split.Tensor").schema;
    assert_eq!(sp.returns[0].ty, "Tensor[]");
    assert_eq!(sp.returns[0].contained_alias_set, ["a"]);
    assert_eq!(op("aten::index.Tensor").schema.arguments[1].ty, "Tensor?[]");
    assert!(!op("aten::mm").schema.is_mutable);
}

#[test]
fn unknown_ops_are_errors_not_crashes() {
    let err = Op::find(&OpName::aten("no_such_op", "default"))
        .err()
        .unwrap();
    assert!(matches!(err, AtenError::UnknownOp { .. }));
    assert!(
        err.to_string()
            .starts_with("unknown op `aten::no_such_op.default`: "),
        "{err}"
    );
    let err = Op::find(&OpName::aten("relu", "NoSuchOverload"))
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("aten::relu.NoSuchOverload"),
        "{err}"
    );
}

#[test]
fn schema_text_parses_to_what_the_dispatcher_reports() {
    // Pure-Rust tests build schemas from text; check that reading agrees with libtorch's.
    for model in ["mlp", "cnn", "gpt4"] {
        let path = format!(
            "{}/../../../tests/fixtures/{model}/joint.py",
            env!("CARGO_MANIFEST_DIR")
        );
        let g = graphbug_ir::parse_graph(&std::fs::read_to_string(path).unwrap()).unwrap();
        for node in &g.nodes {
            let Some(name) = node.op() else { continue };
            let from_libtorch = op(&name.to_string());
            let parsed = graphbug_ir::schema::Schema::parse(&from_libtorch.schema.text).unwrap();
            assert_eq!(
                &parsed,
                from_libtorch.schema.as_ref(),
                "{}",
                from_libtorch.schema.text
            );
        }
    }
}

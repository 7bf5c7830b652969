//! GraphBuilder: typed handles, FX naming, and printed output.

use graphbug_ir::{
    parse_graph, print_graph, Device, Dtype, Graph, GraphBuilder, IrError, OpName, TensorMeta,
    Value,
};

fn f32(shape: &[i64]) -> TensorMeta {
    TensorMeta::new(Dtype::Float32, shape)
}

/// The example graph of DESIGN.md, built from Rust.
fn design_example() -> Graph {
    let mut b = GraphBuilder::new("Repro");
    let x = b.input("primals_1", f32(&[2, 8]));
    let w = b.input("primals_2", f32(&[16, 8]));
    let t = b.call(OpName::aten("t", "default"), [w.into()]);
    b.set_meta(t, f32(&[8, 16]));
    let mm = b.call(OpName::aten("mm", "default"), [x.into(), t.into()]);
    b.set_meta(mm, f32(&[2, 16]));
    let ln = b.call_multi(
        OpName::aten("native_layer_norm", "default"),
        [
            mm.into(),
            [16].into(),
            Value::None,
            Value::None,
            1e-05.into(),
        ],
        [],
    );
    let out = b.getitem(ln, 0);
    b.set_meta(out, f32(&[2, 16]));
    let ones = b.call_kw(
        OpName::aten("ones", "default"),
        [[16, 16].into()],
        [
            ("dtype", Dtype::Bool.into()),
            ("device", Device::cpu().into()),
            ("pin_memory", false.into()),
        ],
    );
    b.set_meta(ones, TensorMeta::new(Dtype::Bool, vec![16, 16]));
    b.output([out.into(), x.into()]);
    b.finish().unwrap()
}

#[test]
fn builds_the_design_example() {
    let g = design_example();
    insta::assert_snapshot!(print_graph(&g));
    let back = parse_graph(&print_graph(&g)).unwrap();
    assert_eq!(print_graph(&back), print_graph(&g));
}

#[test]
fn names_follow_fx() {
    let mut b = GraphBuilder::new("G");
    let x = b.input("x", f32(&[4]));
    let x2 = b.input("x", f32(&[4]));
    let mut last = x;
    let mut names = Vec::new();
    for op in ["sum", "sum", "slice", "add", "add", "relu_", "relu_"] {
        last = b.call(OpName::aten(op, "default"), [last.into()]);
        names.push(b.name_of(last).to_string());
    }
    assert_eq!(b.name_of(x2), "x_1");
    assert_eq!(
        names,
        ["sum_1", "sum_2", "slice_1", "add", "add_1", "relu_", "relu__1"]
    );
    b.output([last.into()]);
    b.finish().unwrap();
}

#[test]
fn inputs_added_late_still_come_first() {
    let mut b = GraphBuilder::new("G");
    let x = b.input("x", f32(&[4]));
    let r = b.call(OpName::aten("relu", "default"), [x.into()]);
    let y = b.input("y", f32(&[4]));
    let s = b.call(OpName::aten("add", "Tensor"), [r.into(), y.into()]);
    b.output([s.into()]);
    let g = b.finish().unwrap();
    let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["x", "y", "relu", "add"]);
    assert_eq!(
        print_graph(&g).lines().nth(1).unwrap(),
        "    def forward(self, x: \"f32[4]\", y: \"f32[4]\"):"
    );
}

#[test]
fn finish_reports_missing_output() {
    let mut b = GraphBuilder::new("G");
    b.input("x", f32(&[4]));
    assert_eq!(
        b.finish().unwrap_err(),
        IrError::MissingOutput { graph: "G".into() }
    );
}

#[test]
fn constants_and_getitems() {
    let mut b = GraphBuilder::new("G");
    let x = b.input("x", f32(&[4, 6]));
    let c = b.constant("_tensor_constant0", f32(&[6]));
    let s = b.call_multi(
        OpName::aten("split", "Tensor"),
        [x.into(), 3.into(), 1.into()],
        [],
    );
    let a = b.getitem(s, 0);
    let d = b.getitem(s, 1);
    let cat = b.call(
        OpName::aten("cat", "default"),
        [vec![d, a].into(), 1.into()],
    );
    let add = b.call(OpName::aten("add", "Tensor"), [cat.into(), c.into()]);
    b.output([add.into()]);
    let g = b.finish().unwrap();
    let text = print_graph(&g);
    assert!(text.contains("_tensor_constant0: \"f32[6]\" = self._tensor_constant0\n"));
    assert!(text.contains(
        "cat = torch.ops.aten.cat.default([getitem_1, getitem], 1);  getitem_1 = getitem = None\n"
    ));
    assert_eq!(parse_graph(&text).unwrap().nodes.len(), g.nodes.len());
}

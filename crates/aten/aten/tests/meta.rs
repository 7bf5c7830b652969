//! Shape inference on the meta device against PyTorch's own annotations.

use std::collections::HashMap;

use graphbug_aten::meta::{check_meta, check_meta_with, infer_meta, GraphData};
use graphbug_ir::{parse_graph, Dtype, Meta, TensorMeta};

fn fixture(model: &str, file: &str) -> String {
    let path = format!(
        "{}/../../../tests/fixtures/{model}/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_reference_annotation_agrees_with_libtorch() {
    for model in ["mlp", "cnn", "gpt4"] {
        for file in [
            "forward.py",
            "joint.py",
            "fw_default.py",
            "bw_default.py",
            "fw_mincut.py",
            "bw_mincut.py",
        ] {
            let graph = parse_graph(&fixture(model, file)).unwrap();
            let check = check_meta(&graph).unwrap_or_else(|e| panic!("{model}/{file}: {e}"));
            assert!(
                check.mismatches.is_empty(),
                "{model}/{file}: {:?}",
                check.mismatches
            );
            assert!(
                check.unchecked.is_empty(),
                "{model}/{file}: {:?}",
                check.unchecked
            );
        }
    }
}

#[test]
fn inference_fills_unannotated_nodes_and_multi_outputs() {
    let text = concat!(
        "class G(torch.nn.Module):\n",
        "    def forward(self, x: \"f32[4, 6]\", w: \"f32[6]\"):\n",
        "        ln = torch.ops.aten.native_layer_norm.default(x, [6], w, None, 1e-05)\n",
        "        y = ln[0]\n",
        "        s = torch.ops.aten.split.Tensor(y, 4, 1)\n",
        "        s1 = s[1]\n",
        "        i = torch.ops.aten.argmax.default(s1)\n",
        "        return (s1, i)\n",
    );
    let g = infer_meta(&parse_graph(text).unwrap()).unwrap();
    let meta = |name: &str| g.node(g.find(name).unwrap()).meta.clone();
    let f32 = |s: &[i64]| Some(TensorMeta::new(Dtype::Float32, s));
    assert_eq!(
        meta("ln"),
        Meta::Multi(vec![f32(&[4, 6]), f32(&[4, 1]), f32(&[4, 1])])
    );
    assert_eq!(meta("s"), Meta::Multi(vec![f32(&[4, 4]), f32(&[4, 2])]));
    assert_eq!(
        meta("s1"),
        Meta::Tensor(TensorMeta::new(Dtype::Float32, vec![4, 2]))
    );
    assert_eq!(
        meta("i"),
        Meta::Tensor(TensorMeta::new(Dtype::Int64, vec![]))
    );
}

#[test]
fn wrong_annotations_are_reported() {
    let text = concat!(
        "class G(torch.nn.Module):\n",
        "    def forward(self, a: \"f32[2, 3]\", b: \"f32[3, 5]\"):\n",
        "        mm: \"f32[2, 4]\" = torch.ops.aten.mm.default(a, b)\n",
        "        t: \"f32[5, 2]\" = torch.ops.aten.t.default(mm)\n",
        "        c: \"i64[5, 2]\" = torch.ops.aten.relu.default(t)\n",
        "        return (c,)\n",
    );
    let m = check_meta(&parse_graph(text).unwrap()).unwrap().mismatches;
    let shown: Vec<String> = m.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "node `mm`: annotated f32[2, 4], libtorch infers f32[2, 5]",
            "node `c`: annotated i64[5, 2], libtorch infers f32[5, 2]",
        ]
    );
}

#[test]
fn inputs_need_annotations_and_shape_errors_name_the_node() {
    let text = "class G(torch.nn.Module):\n    def forward(self, a, b: \"f32[3]\"):\n        r = torch.ops.aten.add.Tensor(a, b)\n        return (r,)\n";
    let err = infer_meta(&parse_graph(text).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("`a` has no shape annotation"), "{err}");
    let text = "class G(torch.nn.Module):\n    def forward(self, a: \"f32[2, 3]\", b: \"f32[2, 3]\"):\n        mm = torch.ops.aten.mm.default(a, b)\n        return (mm,)\n";
    let err = infer_meta(&parse_graph(text).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("node `mm` (aten::mm.default) failed on inputs [f32[2, 3], f32[2, 3]]"),
        "{err}"
    );
}

/// A graph whose inputs cannot be allocated is still checked: an op without a meta kernel
/// is not run on a 4 TB zero-filled stand-in; its annotation is taken as given, and said.
#[test]
fn huge_inputs_are_not_allocated_for_ops_without_meta_kernels() {
    let text = concat!(
        "class G(torch.nn.Module):\n",
        "    def forward(self, x: \"f32[1000000000000]\"):\n",
        "        relu: \"f32[1000000000000]\" = torch.ops.aten.relu.default(x);  x = None\n",
        "        neg: \"f32[1000000000000]\" = torch.ops.aten.neg.default(relu);  relu = None\n",
        "        view: \"f32[1000000, 1000000]\" = torch.ops.aten.view.default(neg, [1000000, 1000000]);  neg = None\n",
        "        return (view,)\n",
    );
    let g = parse_graph(text).unwrap();
    let check = check_meta(&g).unwrap();
    assert!(check.mismatches.is_empty(), "{:?}", check.mismatches);
    assert_eq!(check.unchecked.len(), 1, "{:?}", check.unchecked);
    assert_eq!(check.unchecked[0].0, "relu");
    assert!(
        check.unchecked[0].1.contains("the op has no meta kernel, and running it on zero-filled CPU inputs instead would take 3.6 TiB"),
        "{}",
        check.unchecked[0].1
    );
    // Strict inference says why it stops.
    let e = infer_meta(&g).unwrap_err().to_string();
    assert!(e.contains("node `relu`") && e.contains("3.6 TiB"), "{e}");
    // A wrong annotation after the assumed node is still caught.
    let wrong = text.replace(
        "f32[1000000, 1000000]\" = torch",
        "f32[1000, 1000]\" = torch",
    );
    let check = check_meta(&parse_graph(&wrong).unwrap()).unwrap();
    assert_eq!(check.mismatches.len(), 1, "{:?}", check.mismatches);
}

/// Ops without a meta kernel run on CPU stand-ins: ops that reject zeros (cholesky,
/// multinomial) are still checked, and a data-dependent output shape (masked_select,
/// nonzero) or a kernel that rejects every stand-in (segment_reduce, whose lengths must sum
/// to the data's size) is reported as unchecked, never as a disagreement or a silent guess.
#[test]
fn stand_ins_check_what_they_can_and_say_what_they_cannot() {
    let text = |chol: &str| {
        format!(
            r#"
class D(torch.nn.Module):
    def forward(self, x: "f32[4, 4]", m: "b8[4, 4]", p: "f32[3, 5]", d: "f32[5]", l: "i64[4]"):
        masked_select: "f32[7]" = torch.ops.aten.masked_select.default(x, m)
        mm: "f32[4, 4]" = torch.ops.aten.mm.default(x, x)
        cholesky: "{chol}" = torch.ops.aten.cholesky.default(mm)
        multinomial: "i64[3, 2]" = torch.ops.aten.multinomial.default(p, 2)
        nonzero: "i64[5, 2]" = torch.ops.aten.nonzero.default(m)
        segment_reduce: "f32[4]" = torch.ops.aten.segment_reduce.default(d, 'max', lengths = l, initial = 1)
        return (masked_select, cholesky, multinomial, nonzero, segment_reduce)
"#
        )
    };
    let check = check_meta(&parse_graph(&text("f32[4, 4]")).unwrap()).unwrap();
    assert!(check.mismatches.is_empty(), "{:?}", check.mismatches);
    let unchecked: Vec<&str> = check.unchecked.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(unchecked, ["masked_select", "nonzero", "segment_reduce"]);
    assert!(check.unchecked[0].1.contains("depends on the input values"));
    assert!(
        check.unchecked[2]
            .1
            .contains("its kernel rejects zeros, ones and the identity"),
        "{}",
        check.unchecked[2].1
    );
    // A wrong annotation of an op without a meta kernel is still caught.
    let check = check_meta(&parse_graph(&text("f32[4, 2]")).unwrap()).unwrap();
    assert_eq!(check.mismatches.len(), 1, "{:?}", check.mismatches);
    assert_eq!(check.mismatches[0].node, "cholesky");
    // Without an annotation, a data-dependent shape is an error naming the node.
    let unannotated = text("f32[4, 4]").replace(r#"masked_select: "f32[7]""#, "masked_select");
    let err = infer_meta(&parse_graph(&unannotated).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("masked_select"), "{err}");
    assert!(err.contains("depends on the input values"), "{err}");
    // Inference (which takes no annotation on trust) names the op its stand-ins fail.
    let segments = parse_graph(
        r#"
class S(torch.nn.Module):
    def forward(self, d: "f32[5]", l: "i64[4]"):
        segment_reduce: "f32[4]" = torch.ops.aten.segment_reduce.default(d, 'max', lengths = l, initial = 1)
        return (segment_reduce,)
"#,
    )
    .unwrap();
    let err = infer_meta(&segments).unwrap_err().to_string();
    assert!(
        err.contains("segment_reduce") && err.contains("rejects zeros, ones and the identity"),
        "{err}"
    );
}

#[test]
fn a_view_the_meta_device_copies_is_a_warning() {
    // No view of a permuted [2, 2, 5, 8] tensor has shape [10, 16]: on CPU `view` fails,
    // while libtorch's meta kernel quietly copies. The check says so instead of "fine".
    let g = parse_graph(
        r#"class G(torch.nn.Module):
    def forward(self, x: "f32[2, 2, 5, 8]"):
        permute: "f32[5, 2, 2, 8]" = torch.ops.aten.permute.default(x, [2, 0, 1, 3])
        view: "f32[10, 16]" = torch.ops.aten.view.default(permute, [10, 16])
        reshape: "f32[10, 16]" = torch.ops.aten.reshape.default(permute, [10, 16])
        view_1: "f32[5, 4, 8]" = torch.ops.aten.view.default(permute, [5, 4, 8])
        return (view, reshape, view_1)
"#,
    )
    .unwrap();
    let check = check_meta(&g).unwrap();
    assert!(check.mismatches.is_empty(), "{:?}", check.mismatches);
    // `reshape` may copy (a composite), and `view_1` is a true view: only `view` is doubtful.
    let doubtful: Vec<&str> = check
        .doubtful_views
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(doubtful, ["view"], "{:?}", check.doubtful_views);
    assert!(
        check.doubtful_views[0].1.contains("is a view of `permute`")
            && check.doubtful_views[0].1.contains("made it a copy"),
        "{:?}",
        check.doubtful_views
    );
    // Every reference graph's views are views on meta too.
    for model in ["mlp", "cnn", "gpt4"] {
        let g = parse_graph(&fixture(model, "forward.py")).unwrap();
        assert!(check_meta(&g).unwrap().doubtful_views.is_empty(), "{model}");
    }
}

/// With the graph's inputs, what only data can tell is checked on them: an output shape
/// that depends on the values (masked_select, nonzero) agrees or is a mismatch like any
/// other node's, and what follows is inferred from it. A value drawn at random stays
/// unchecked: no run draws the numbers the annotation was traced with.
#[test]
fn data_dependent_shapes_are_checked_on_the_inputs() {
    let text = |n: usize| {
        format!(
            r#"
class D(torch.nn.Module):
    def forward(self, x: "f32[4, 4]", m: "b8[4, 4]"):
        masked_select: "f32[{n}]" = torch.ops.aten.masked_select.default(x, m)
        nonzero: "i64[5, 2]" = torch.ops.aten.nonzero.default(m)
        relu: "f32[{n}]" = torch.ops.aten.relu.default(masked_select)
        bernoulli: "f32[4, 4]" = torch.ops.aten.bernoulli.p(x, 0.5)
        gt: "b8[4, 4]" = torch.ops.aten.gt.Scalar(bernoulli, 0.5)
        nonzero_1: "i64[3, 2]" = torch.ops.aten.nonzero.default(gt)
        return (relu, nonzero, nonzero_1)
"#
        )
    };
    let x = tch::Tensor::rand([4, 4], (tch::Kind::Float, tch::Device::Cpu));
    // Five of sixteen set.
    let m = tch::Tensor::arange(16, (tch::Kind::Int64, tch::Device::Cpu))
        .lt(5)
        .view([4, 4]);
    let inputs = [x, m];
    let constants = HashMap::new();
    let data = GraphData {
        inputs: &inputs,
        constants: &constants,
    };
    let names = |v: &[(String, String)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    // Without the data: not checked, said so.
    let check = check_meta(&parse_graph(&text(5)).unwrap()).unwrap();
    assert_eq!(
        names(&check.unchecked),
        ["masked_select", "nonzero", "nonzero_1"]
    );
    // With it: checked, and they agree.
    let check = check_meta_with(&parse_graph(&text(5)).unwrap(), Some(data)).unwrap();
    assert!(check.mismatches.is_empty(), "{:?}", check.mismatches);
    assert_eq!(names(&check.checked_on_data), ["masked_select", "nonzero"]);
    assert_eq!(names(&check.unchecked), ["nonzero_1"]);
    assert!(
        check.unchecked[0]
            .1
            .contains("it reads numbers `bernoulli` drew at random"),
        "{}",
        check.unchecked[0].1
    );
    // A wrong one is a mismatch, told by the run; what follows is inferred from the
    // annotation, so it is the only one.
    let check = check_meta_with(&parse_graph(&text(6)).unwrap(), Some(data)).unwrap();
    assert_eq!(check.mismatches.len(), 1, "{:?}", check.mismatches);
    let m = &check.mismatches[0];
    assert_eq!(m.node, "masked_select");
    assert_eq!(
        m.to_string(),
        "node `masked_select`: annotated f32[6], libtorch gives on the inputs f32[5]"
    );
    // The caller's inputs are untouched and the run is seeded as before: the CPU
    // generator draws what it would have drawn.
    tch::manual_seed(7);
    let before = tch::Tensor::rand([3], (tch::Kind::Float, tch::Device::Cpu));
    tch::manual_seed(7);
    check_meta_with(&parse_graph(&text(5)).unwrap(), Some(data)).unwrap();
    let after = tch::Tensor::rand([3], (tch::Kind::Float, tch::Device::Cpu));
    assert!(before.equal(&after));
}

//! Functionalization checked by running graphs in libtorch: the functional graph computes
//! what the mutating original computes, and returns the new values of the inputs the
//! original mutated in place.

use std::collections::HashMap;

use graphbug_aten::io::{order_tensors, random_tensors, read_tensors};
use graphbug_aten::meta::infer_meta;
use graphbug_aten::schema::Schemas;
use graphbug_aten::{Interpreter, LibtorchSchemas};
use graphbug_autodiff::{functionalize, AutodiffError, Functionalized};
use graphbug_ir::{parse_graph, Device, Graph, Meta, OpName, TensorMeta};
use graphbug_tests::fixtures_dir;
use tch::Tensor;

fn graph(text: &str) -> Graph {
    parse_graph(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn run(g: &Graph, inputs: &[Tensor]) -> Vec<Tensor> {
    Interpreter::new(g, &Device::cpu(), &HashMap::new())
        .unwrap_or_else(|e| panic!("{e}\n{g}"))
        .run(inputs)
        .unwrap_or_else(|e| panic!("{e}\n{g}"))
        .into_iter()
        .map(|t| t.expect("tensor output"))
        .collect()
}

fn copies(ts: &[Tensor]) -> Vec<Tensor> {
    ts.iter().map(Tensor::copy).collect()
}

fn assert_same(what: &str, want: &Tensor, got: &Tensor) {
    assert_eq!(want.size(), got.size(), "{what}: shape");
    assert_eq!(want.kind(), got.kind(), "{what}: dtype");
    assert!(
        want.allclose(got, 1e-5, 1e-6, true),
        "{what}: values differ\nwant {want}\ngot {got}"
    );
}

fn random_inputs(g: &Graph, seed: u64) -> Vec<Tensor> {
    let metas: Vec<TensorMeta> = g
        .placeholders()
        .into_iter()
        .map(|p| g.node(p).meta.tensor().cloned().expect("annotated input"))
        .collect();
    random_tensors(&metas, seed, tch::Device::Cpu).unwrap()
}

/// Functionalizes `g` and checks it against the original on `inputs`: same outputs, the
/// leading outputs equal to the inputs the original changed (and only those), no mutable
/// op left, inputs untouched, and every meta as libtorch infers it.
fn check(g: &Graph, inputs: &[Tensor]) -> Functionalized {
    let f = functionalize(g, &LibtorchSchemas).unwrap_or_else(|e| panic!("{e}\n{g}"));
    let fg = &f.graph;
    fg.verify().unwrap();
    assert_eq!(
        functionalize(g, &LibtorchSchemas).unwrap(),
        f,
        "not deterministic"
    );
    for node in &fg.nodes {
        if let Some(op) = node.op() {
            let schema = LibtorchSchemas.schema(op).expect("known op");
            assert!(!schema.is_mutable, "`{}` ({op}) mutates\n{fg}", node.name);
        }
    }
    let inferred = infer_meta(fg).unwrap_or_else(|e| panic!("{e}\n{fg}"));
    for (given, got) in fg.nodes.iter().zip(&inferred.nodes) {
        let consistent = match (&given.meta, &got.meta) {
            (Meta::Unknown, _) => true,
            (Meta::Multi(items), Meta::Multi(want)) => {
                items.len() == want.len()
                    && items.iter().zip(want).all(|(a, b)| a.is_none() || a == b)
            }
            (a, b) => a == b,
        };
        assert!(
            consistent,
            "meta of `{}`: {:?}, libtorch infers {:?}\n{fg}",
            given.name, given.meta, got.meta
        );
    }

    let original_inputs = copies(inputs);
    let want = run(g, &original_inputs);
    let functional_inputs = copies(inputs);
    let got = run(fg, &functional_inputs);
    for (i, (before, after)) in inputs.iter().zip(&functional_inputs).enumerate() {
        assert!(
            before.equal(after),
            "the functional graph changed input {i}"
        );
    }
    for (i, (before, after)) in inputs.iter().zip(&original_inputs).enumerate() {
        let changed = !(before.equal(after));
        assert_eq!(
            changed,
            f.mutated_inputs.contains(&i),
            "input {i}: changed by the original run: {changed}; mutated_inputs {:?}",
            f.mutated_inputs
        );
    }
    let k = f.mutated_inputs.len();
    assert_eq!(got.len(), k + want.len());
    for (j, &pos) in f.mutated_inputs.iter().enumerate() {
        assert_same(
            &format!("new value of input {pos}"),
            &original_inputs[pos],
            &got[j],
        );
    }
    for (i, w) in want.iter().enumerate() {
        assert_same(&format!("output {i}"), w, &got[k + i]);
    }
    f
}

fn check_text(text: &str, seed: u64) -> Functionalized {
    let g = graph(text);
    let inputs = random_inputs(&g, seed);
    check(&g, &inputs)
}

#[test]
fn relu_on_an_intermediate() {
    let f = check_text(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]"):
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(x, 1)
        relu_: "f32[3, 4]" = torch.ops.aten.relu_.default(add)
        mul: "f32[3, 4]" = torch.ops.aten.mul.Tensor(add, 2)
        return (relu_, mul)
"#,
        1,
    );
    assert!(f.mutated_inputs.is_empty());
}

#[test]
fn relu_on_an_input() {
    let f = check_text(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", y: "f32[3, 4]"):
        relu_: "f32[3, 4]" = torch.ops.aten.relu_.default(y)
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(x, y)
        return (add,)
"#,
        2,
    );
    assert_eq!(f.mutated_inputs, [1]);
}

#[test]
fn add_chains() {
    let f = check_text(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", y: "f32[3, 4]", z: "f32[3, 4]"):
        add_: "f32[3, 4]" = torch.ops.aten.add_.Tensor(x, y)
        add__1: "f32[3, 4]" = torch.ops.aten.add_.Tensor(add_, y, alpha = 2)
        mul_: "f32[3, 4]" = torch.ops.aten.mul_.Tensor(y, 2)
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(x, z)
        return (add__1, add)
"#,
        3,
    );
    assert_eq!(f.mutated_inputs, [0, 1]);
}

/// `y = y + 3; y[:, 0] = x[:, 0]; return y`, as torchdynamo traced it.
#[test]
fn a_write_into_a_view_of_an_intermediate() {
    let f = check_text(
        r#"
class G(torch.nn.Module):
    def forward(self, x_1: "f32[3, 4]", y_1: "f32[3, 4]"):
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(y_1, 3)
        slice_1: "f32[3, 4]" = torch.ops.aten.slice.Tensor(x_1, 0, 0, 9223372036854775807)
        select: "f32[3]" = torch.ops.aten.select.int(slice_1, 1, 0)
        slice_2: "f32[3, 4]" = torch.ops.aten.slice.Tensor(add, 0, 0, 9223372036854775807)
        select_1: "f32[3]" = torch.ops.aten.select.int(slice_2, 1, 0)
        copy_: "f32[3]" = torch.ops.aten.copy_.default(select_1, select)
        return add
"#,
        4,
    );
    assert!(f.mutated_inputs.is_empty());
    let ops: Vec<&str> = f
        .graph
        .nodes
        .iter()
        .filter_map(|n| n.op().map(|o| o.name.as_str()))
        .collect();
    assert!(ops.contains(&"select_scatter") && ops.contains(&"slice_scatter"));
}

#[test]
fn later_reads_of_the_base_and_its_views() {
    check_text(
        r#"
class G(torch.nn.Module):
    def forward(self, x_1: "f32[3]", y_1: "f32[3, 4]"):
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(y_1, 3)
        t: "f32[4, 3]" = torch.ops.aten.t.default(add)
        slice_2: "f32[2, 4]" = torch.ops.aten.slice.Tensor(add, 0, 1, 9223372036854775807)
        select_1: "f32[2]" = torch.ops.aten.select.int(slice_2, 1, 0)
        select_2: "f32[3]" = torch.ops.aten.select.int(add, 1, 1)
        slice_3: "f32[2]" = torch.ops.aten.slice.Tensor(x_1, 0, 0, 2)
        copy_: "f32[2]" = torch.ops.aten.copy_.default(select_1, slice_3)
        mul: "f32[2, 4]" = torch.ops.aten.mul.Tensor(slice_2, 2)
        mul_1: "f32[4, 3]" = torch.ops.aten.mul.Tensor(select_2, t)
        return (copy_, select_1, mul, mul_1, add)
"#,
        5,
    );
}

#[test]
fn writes_through_views_of_inputs() {
    let f = check_text(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", y: "f32[2, 3, 4]"):
        t: "f32[4, 3]" = torch.ops.aten.t.default(x)
        relu_: "f32[4, 3]" = torch.ops.aten.relu_.default(t)
        permute: "f32[4, 2, 3]" = torch.ops.aten.permute.default(y, [2, 0, 1])
        unsqueeze: "f32[4, 1, 2, 3]" = torch.ops.aten.unsqueeze.default(permute, 1)
        sigmoid_: "f32[4, 1, 2, 3]" = torch.ops.aten.sigmoid_.default(unsqueeze)
        view: "f32[6, 4]" = torch.ops.aten.view.default(y, [6, 4])
        transpose: "f32[4, 6]" = torch.ops.aten.transpose.int(view, 0, 1)
        mul_: "f32[4, 6]" = torch.ops.aten.mul_.Tensor(transpose, 3)
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(x, 1)
        return (add, y, permute)
"#,
        6,
    );
    assert_eq!(f.mutated_inputs, [0, 1]);
}

/// `reshape` is a view of a contiguous tensor and a copy of a transposed one.
#[test]
fn reshape_aliases_only_what_it_can_view() {
    let f = check_text(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", y: "f32[3, 4]"):
        reshape: "f32[12]" = torch.ops.aten.reshape.default(x, [12])
        relu_: "f32[12]" = torch.ops.aten.relu_.default(reshape)
        t: "f32[4, 3]" = torch.ops.aten.t.default(y)
        reshape_1: "f32[12]" = torch.ops.aten.reshape.default(t, [12])
        relu__1: "f32[12]" = torch.ops.aten.relu_.default(reshape_1)
        _unsafe_view: "f32[2, 6]" = torch.ops.aten._unsafe_view.default(relu_, [2, 6])
        mul_: "f32[2, 6]" = torch.ops.aten.mul_.Tensor(_unsafe_view, 2)
        return (x, y, reshape_1, reshape)
"#,
        10,
    );
    assert_eq!(f.mutated_inputs, [0]);
}

#[test]
fn diagonal_squeeze_split_and_unbind() {
    let f = check_text(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4, 4]", y: "f32[4, 4]"):
        diagonal: "f32[4]" = torch.ops.aten.diagonal.default(x)
        unsqueeze: "f32[1, 4]" = torch.ops.aten.unsqueeze.default(diagonal, 0)
        squeeze: "f32[4]" = torch.ops.aten.squeeze.dim(unsqueeze, 0)
        fill_: "f32[4]" = torch.ops.aten.fill_.Scalar(squeeze, 0)
        split = torch.ops.aten.split.Tensor(x, 2)
        getitem: "f32[2, 4]" = split[0]
        getitem_1: "f32[2, 4]" = split[1]
        mul_: "f32[2, 4]" = torch.ops.aten.mul_.Tensor(getitem, 2)
        add: "f32[2, 4]" = torch.ops.aten.add.Tensor(getitem_1, getitem)
        unbind = torch.ops.aten.unbind.int(x, 1)
        getitem_2: "f32[4]" = unbind[3]
        fill__1: "f32[4]" = torch.ops.aten.fill_.Scalar(getitem_2, 5)
        add_1: "f32[4, 4]" = torch.ops.aten.add.Tensor(y, 1)
        view: "f32[16]" = torch.ops.aten.view.default(add_1, [16])
        slice_1: "f32[8]" = torch.ops.aten.slice.Tensor(view, 0, 2, 10)
        as_strided: "f32[2, 2]" = torch.ops.aten.as_strided.default(add_1, [2, 2], [4, 1], 5)
        zero_: "f32[2, 2]" = torch.ops.aten.zero_.default(as_strided)
        neg_: "f32[8]" = torch.ops.aten.neg_.default(slice_1)
        return (add, unsqueeze, add_1, view)
"#,
        7,
    );
    assert_eq!(f.mutated_inputs, [0]);
}

#[test]
fn copy_index_put_out_and_foreach() {
    let f = check_text(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", s: "f64[4]", i: "i64[2]", z: "f32[3, 4]", v: "f32[4]"):
        copy_: "f32[3, 4]" = torch.ops.aten.copy_.default(x, s)
        mul: "f32[3, 4]" = torch.ops.aten.mul.Tensor(x, 2)
        index_put_: "f32[3, 4]" = torch.ops.aten.index_put_.default(mul, [i], v)
        add: "f32[3, 4]" = torch.ops.aten.add.out(x, mul, alpha = 3, out = z)
        _foreach_add_ = torch.ops.aten._foreach_add_.Scalar([x, z], 1)
        floor_divide_: "f32[3, 4]" = torch.ops.aten.floor_divide_.Tensor(mul, add)
        return (mul,)
"#,
        8,
    );
    assert_eq!(f.mutated_inputs, [0, 3]);
}

const BATCH_NORM: &str = r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4, 3, 2, 2]", w: "f32[3]", b: "f32[3]", rm: "f32[3]", rv: "f32[3]"):
        native_batch_norm = torch.ops.aten.native_batch_norm.default(x, w, b, rm, rv, True, 0.1, 1e-05)
        getitem: "f32[4, 3, 2, 2]" = native_batch_norm[0]
        getitem_1: "f32[3]" = native_batch_norm[1]
        getitem_2: "f32[3]" = native_batch_norm[2]
        add: "f32[3]" = torch.ops.aten.add.Tensor(rm, 1)
        return (getitem, getitem_2, add)
"#;

fn batch_norm_inputs(g: &Graph) -> Vec<Tensor> {
    let mut inputs = random_inputs(g, 9);
    // A variance must be positive.
    inputs[4] = inputs[4].abs() + 0.5;
    inputs
}

#[test]
fn batch_norm_in_training() {
    let g = graph(BATCH_NORM);
    let f = check(&g, &batch_norm_inputs(&g));
    assert_eq!(f.mutated_inputs, [3, 4]);
    assert!(f.graph.nodes.iter().any(|n| n.op()
        == Some(&OpName::aten(
            "_native_batch_norm_legit_functional",
            "default"
        ))));
}

#[test]
fn batch_norm_in_eval_mode() {
    // In eval mode the saved statistics are empty.
    let text = BATCH_NORM
        .replace("True, 0.1", "False, 0.1")
        .replace(r#"getitem_1: "f32[3]""#, r#"getitem_1: "f32[0]""#)
        .replace(r#"getitem_2: "f32[3]""#, r#"getitem_2: "f32[0]""#);
    let g = graph(&text);
    let f = check(&g, &batch_norm_inputs(&g));
    assert!(f.mutated_inputs.is_empty());
    assert_eq!(f.graph, g);
}

#[test]
fn the_cnn_matches_pytorch() {
    let dir = fixtures_dir().join("cnn");
    let g = graph(&std::fs::read_to_string(dir.join("forward.py")).unwrap());
    let names: Vec<String> = g
        .placeholders()
        .into_iter()
        .map(|p| g.node(p).name.to_string())
        .collect();
    let inputs = order_tensors(
        read_tensors(&dir.join("inputs.npz")).unwrap(),
        &names,
        "inputs",
    )
    .unwrap();
    let f = check(&g, &inputs);
    // running_mean, running_var and the batch counter, in input order, as AOTAutograd.
    assert_eq!(f.mutated_inputs, [8, 9, 10]);

    // Its structure against AOTAutograd's is checked in graphbug-autodiff's own tests
    // (the_cnn_matches_aot_autograds_functional_forward); here, the numbers.
    // The model output is PyTorch's.
    let got = run(&f.graph, &copies(&inputs));
    let want = order_tensors(
        read_tensors(&dir.join("outputs.npz")).unwrap(),
        &["out0".to_string()],
        "outputs",
    )
    .unwrap();
    assert_same("cnn output vs PyTorch", &want[0], &got[3]);
    // The counter went up by one, the running stats moved.
    assert_eq!(got[2].int64_value(&[]), inputs[10].int64_value(&[]) + 1);
    assert!(!got[0].equal(&inputs[8]) && !got[1].equal(&inputs[9]));
}

#[test]
fn functional_reference_graphs_come_back_unchanged() {
    for model in ["mlp", "gpt4"] {
        let text = std::fs::read_to_string(fixtures_dir().join(model).join("forward.py")).unwrap();
        let g = graph(&text);
        let f = functionalize(&g, &LibtorchSchemas).unwrap();
        assert_eq!(f.graph, g, "{model}");
        assert!(f.mutated_inputs.is_empty(), "{model}");
    }
}

#[test]
fn unsupported_mutations_are_errors_naming_the_node() {
    let cases = [
        (
            r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 3]"):
        add: "f32[3, 3]" = torch.ops.aten.add.Tensor(x, 1)
        fill_diagonal_: "f32[3, 3]" = torch.ops.aten.fill_diagonal_.default(add, 0)
        return (add,)
"#,
            "fill_diagonal_",
            "no out-of-place form",
        ),
        (
            r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3]"):
        _tensor_constant0: "f32[3]" = self._tensor_constant0
        add_: "f32[3]" = torch.ops.aten.add_.Tensor(_tensor_constant0, x)
        return (add_,)
"#,
            "add_",
            "module constant",
        ),
        (
            r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3]"):
        expand: "f32[2, 3]" = torch.ops.aten.expand.default(x, [2, 3])
        relu_: "f32[2, 3]" = torch.ops.aten.relu_.default(expand)
        return (relu_,)
"#,
            "relu_",
            "expand",
        ),
        (
            r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]"):
        unsqueeze_: "f32[1, 3, 4]" = torch.ops.aten.unsqueeze_.default(x, 0)
        return (unsqueeze_,)
"#,
            "unsqueeze_",
            "metadata",
        ),
        (
            r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]"):
        resize_: "f32[12]" = torch.ops.aten.resize_.default(x, [12])
        return (resize_,)
"#,
            "resize_",
            "size or storage",
        ),
    ];
    for (text, want_node, want) in cases {
        match functionalize(&graph(text), &LibtorchSchemas) {
            Err(AutodiffError::Unsupported { node, op, message }) => {
                assert_eq!(node, want_node);
                assert!(op.contains(want_node), "{op}");
                assert!(message.contains(want), "{message}");
            }
            other => panic!("expected an error for `{want_node}`, got {other:?}"),
        }
    }
}

/// Asserts that `g` calls each of `ops` (`aten::name.overload`).
fn assert_calls(g: &Graph, ops: &[&str]) {
    let called: Vec<String> = g
        .nodes
        .iter()
        .filter_map(|n| n.op().map(|op| op.to_string()))
        .collect();
    for want in ops {
        assert!(called.iter().any(|o| o == want), "{want} in {called:?}");
    }
}

/// Random in-place ops become their functional overloads whatever those are named, and
/// draw the same numbers: seeded alike, the two graphs agree.
#[test]
fn random_in_place_ops_become_their_functional_overloads() {
    let g = graph(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[64, 8]"):
        empty_like: "f32[64, 8]" = torch.ops.aten.empty_like.default(x, memory_format = torch.contiguous_format)
        bernoulli_: "f32[64, 8]" = torch.ops.aten.bernoulli_.float(empty_like, 0.9)
        div_: "f32[64, 8]" = torch.ops.aten.div_.Scalar(bernoulli_, 0.9)
        mul: "f32[64, 8]" = torch.ops.aten.mul.Tensor(x, div_)
        empty: "f32[64, 8]" = torch.ops.aten.empty.memory_format([64, 8], dtype = torch.float32, device = device(type='cpu'), pin_memory = False)
        uniform_: "f32[64, 8]" = torch.ops.aten.uniform_.default(empty, -1.0, 1.0)
        add: "f32[64, 8]" = torch.ops.aten.add.Tensor(mul, uniform_)
        normal_: "f32[64, 8]" = torch.ops.aten.normal_.default(empty, 2.0)
        exponential_: "f32[64, 8]" = torch.ops.aten.exponential_.default(normal_)
        random_: "f32[64, 8]" = torch.ops.aten.random_.from(exponential_, 0, 10)
        add_1: "f32[64, 8]" = torch.ops.aten.add.Tensor(add, random_)
        return (add_1,)
"#,
    );
    let f = functionalize(&g, &LibtorchSchemas).unwrap_or_else(|e| panic!("{e}"));
    assert_calls(
        &f.graph,
        &[
            "aten::bernoulli.p",
            "aten::div.Scalar",
            "aten::uniform.default",
            "aten::normal_functional.default",
            "aten::exponential.default",
            "aten::random.from",
        ],
    );
    let inputs = random_inputs(&g, 3);
    tch::manual_seed(11);
    let want = run(&g, &copies(&inputs));
    tch::manual_seed(11);
    let got = run(&f.graph, &copies(&inputs));
    assert_same("seeded output", &want[0], &got[0]);
}

#[test]
fn resizing_a_tensor_the_graph_made() {
    check_text(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]"):
        empty: "f32[0]" = torch.ops.aten.empty.memory_format([0], dtype = torch.float32, device = device(type='cpu'), pin_memory = False)
        resize_: "f32[12]" = torch.ops.aten.resize_.default(empty, [12])
        view: "f32[12]" = torch.ops.aten.view.default(x, [12])
        copy_: "f32[12]" = torch.ops.aten.copy_.default(resize_, view)
        mul: "f32[12]" = torch.ops.aten.mul.Tensor(copy_, 2)
        return (mul,)
"#,
        5,
    );
}

/// `x.transpose_(0, 1)` is `x = x.transpose(0, 1)`: later readers of `x`, and writes into
/// it, see the view.
#[test]
fn metadata_mutations_rebind_the_tensor_to_a_view() {
    let f = check_text(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", y: "f32[4, 3]"):
        relu: "f32[3, 4]" = torch.ops.aten.relu.default(x)
        mul: "f32[3, 4]" = torch.ops.aten.mul.Tensor(relu, 3)
        transpose_: "f32[4, 3]" = torch.ops.aten.transpose_.default(relu, 0, 1)
        mul_1: "f32[4, 3]" = torch.ops.aten.mul.Tensor(relu, y)
        unsqueeze_: "f32[1, 4, 3]" = torch.ops.aten.unsqueeze_.default(relu, 0)
        add_: "f32[1, 4, 3]" = torch.ops.aten.add_.Tensor(relu, 1)
        squeeze_: "f32[4, 3]" = torch.ops.aten.squeeze_.dim(add_, 0)
        t_: "f32[3, 4]" = torch.ops.aten.t_.default(squeeze_)
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(relu, mul)
        return (mul_1, add, t_)
"#,
        9,
    );
    assert_calls(
        &f.graph,
        &[
            "aten::transpose.int",
            "aten::unsqueeze.default",
            "aten::squeeze.dim",
            "aten::t.default",
        ],
    );
}

/// Random in-place ops called with their defaults left out, as `make_fx` traces dropout
/// (`bernoulli_.float(empty_like)`, p = 0.5): the functional overloads get the values the
/// in-place ones defaulted to where they default otherwise (`bernoulli.p` requires `p`),
/// so the functional graph runs, and seeded alike it draws the same numbers.
#[test]
fn defaults_left_out_of_in_place_ops_are_written_out_where_the_functional_form_lacks_them() {
    let g = graph(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[64, 8]"):
        empty_like: "f32[64, 8]" = torch.ops.aten.empty_like.default(x)
        bernoulli_: "f32[64, 8]" = torch.ops.aten.bernoulli_.float(empty_like)
        div_: "f32[64, 8]" = torch.ops.aten.div_.Scalar(bernoulli_, 0.5)
        mul: "f32[64, 8]" = torch.ops.aten.mul.Tensor(x, div_)
        empty: "f32[64, 8]" = torch.ops.aten.empty.memory_format([64, 8], dtype = torch.float32, device = device(type='cpu'), pin_memory = False)
        uniform_: "f32[64, 8]" = torch.ops.aten.uniform_.default(empty)
        add: "f32[64, 8]" = torch.ops.aten.add.Tensor(mul, uniform_)
        normal_: "f32[64, 8]" = torch.ops.aten.normal_.default(empty)
        log_normal_: "f32[64, 8]" = torch.ops.aten.log_normal_.default(normal_)
        add_1: "f32[64, 8]" = torch.ops.aten.add.Tensor(add, log_normal_)
        return (add_1,)
"#,
    );
    let f = functionalize(&g, &LibtorchSchemas).unwrap_or_else(|e| panic!("{e}"));
    graphbug_ir::schema::verify_calls(&f.graph, &LibtorchSchemas)
        .unwrap_or_else(|e| panic!("{e}\n{}", f.graph));
    let printed = f.graph.to_string();
    assert!(
        printed.contains("torch.ops.aten.bernoulli.p(empty_like, 0.5)"),
        "{printed}"
    );
    let inputs = random_inputs(&g, 3);
    tch::manual_seed(11);
    let want = run(&g, &copies(&inputs));
    tch::manual_seed(11);
    let got = run(&f.graph, &copies(&inputs));
    assert_same("seeded output", &want[0], &got[0]);
}

/// A call of `op` with only the arguments its schema requires (each tensor its own
/// `f32[2, 2]` input), returning its tensor inputs; `None` for argument types no graph
/// value stands for here.
fn minimal_call(op: &OpName, schema: &graphbug_ir::schema::Schema) -> Option<Graph> {
    use graphbug_ir::schema::Elem;
    use graphbug_ir::{Dtype, Node, NodeId, NodeKind, Value};
    let mut nodes: Vec<Node> = Vec::new();
    let tensor = |nodes: &mut Vec<Node>| {
        let id = NodeId(nodes.len() as u32);
        nodes.push(Node {
            name: format!("x{}", nodes.len()).into(),
            kind: NodeKind::Placeholder,
            meta: Meta::Tensor(TensorMeta::new(Dtype::Float32, [2, 2])),
        });
        Value::Node(id)
    };
    let (mut args, mut kwargs) = (Vec::new(), Vec::new());
    for (i, a) in schema.arguments.iter().enumerate() {
        if a.may_be_left_out() {
            continue;
        }
        let ty = a.arg_type();
        let one = match ty.elem {
            Elem::Tensor => tensor(&mut nodes),
            Elem::Int => Value::Int(1),
            Elem::Float => Value::Float(0.5),
            Elem::Bool => Value::Bool(false),
            Elem::Scalar => Value::Int(1),
            Elem::ScalarType => Value::Dtype(Dtype::Float32),
            _ => return None,
        };
        let value = if ty.list {
            Value::List(vec![one; a.n.unwrap_or(1)])
        } else {
            one
        };
        if !a.kwarg_only && i == args.len() {
            args.push(value);
        } else {
            kwargs.push((a.name.clone(), value));
        }
    }
    let inputs: Vec<Value> = (0..nodes.len())
        .map(|k| Value::Node(NodeId(k as u32)))
        .collect();
    if inputs.is_empty() {
        return None;
    }
    nodes.push(Node {
        name: "call".into(),
        kind: NodeKind::Call {
            op: op.clone(),
            args,
            kwargs,
        },
        meta: Meta::Unknown,
    });
    Some(Graph {
        dialect: graphbug_ir::Dialect::Aten,
        param_names: Default::default(),
        name: "G".into(),
        nodes,
        output: Some(inputs),
    })
}

/// Every in-place and out= op libtorch has, called with only the arguments it requires,
/// functionalizes into calls that bind to their schemas, or is refused saying why: an
/// argument the call leaves out is written out where the out-of-place form does not
/// default it alike.
#[test]
fn every_mutating_op_functionalizes_into_calls_that_bind() {
    let (mut converted, mut refused, mut bad) = (0, 0, Vec::new());
    for op in graphbug_aten::shim::all_ops().unwrap() {
        if op.namespace != "aten" {
            continue;
        }
        let Some(schema) = LibtorchSchemas.schema(&op).filter(|s| s.is_mutable) else {
            continue;
        };
        let Some(g) = minimal_call(&op, &schema) else {
            continue;
        };
        match functionalize(&g, &LibtorchSchemas) {
            Ok(f) => match graphbug_ir::schema::verify_calls(&f.graph, &LibtorchSchemas) {
                Ok(()) => converted += 1,
                Err(e) => bad.push(format!("{op}: {e}")),
            },
            Err(AutodiffError::BadCall(e)) => bad.push(format!("{op}: {e}")),
            Err(_) => refused += 1,
        }
    }
    eprintln!("{converted} functionalized, {refused} refused");
    assert!(
        bad.is_empty(),
        "{} ill-bound:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(
        converted > 500,
        "only {converted} ops functionalized ({refused} refused)"
    );
}

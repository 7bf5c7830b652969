//! aot_eager end to end: outputs and gradients equal eager plus libtorch autograd on the
//! reference models, mutated inputs are written back, and faults reach either graph.

use std::collections::HashMap;

use graphbug_aten::dtype::meta_of;
use graphbug_aten::io::{order_tensors, random_tensors, read_tensors};
use graphbug_aten::reference::autograd_gradients;
use graphbug_aten::Interpreter;
use graphbug_backends::{lookup, CompileContext, CompiledFn, ExampleInput, Failure, Stage};
use graphbug_ir::{parse_graph, Device, Graph, Value};
use graphbug_tests::{fixtures_dir, reference_joint, relative_error};
use tch::Tensor;

struct Model {
    graph: Graph,
    inputs: Vec<Tensor>,
    requires_grad: Vec<bool>,
}

/// A reference model; the inputs that require grad are those PyTorch's joint graph
/// differentiates (the parameters).
fn model(name: &str) -> Model {
    let dir = fixtures_dir().join(name);
    let graph = parse_graph(&std::fs::read_to_string(dir.join("forward.py")).unwrap()).unwrap();
    let n = graph.placeholders().len();
    let names: Vec<String> = (0..n).map(|i| format!("arg{i}")).collect();
    let inputs = order_tensors(
        read_tensors(&dir.join("inputs.npz")).unwrap(),
        &names,
        "inputs",
    )
    .unwrap();
    let (joint, num_fwd) = reference_joint(name);
    let grads = &joint.outputs()[num_fwd..];
    let requires_grad = (0..n)
        .map(|i| !matches!(grads.get(i), Some(Value::None) | None))
        .collect();
    Model {
        graph,
        inputs,
        requires_grad,
    }
}

fn compile(backend: &str, m: &Model) -> Result<Box<dyn CompiledFn>, Failure> {
    let examples: Vec<ExampleInput> = m
        .inputs
        .iter()
        .zip(&m.requires_grad)
        .map(|(t, &rg)| ExampleInput {
            requires_grad: rg,
            ..ExampleInput::new(meta_of(t).unwrap())
        })
        .collect();
    lookup(backend)
        .unwrap()
        .compile(&m.graph, &examples, &CompileContext::default())
}

/// The same RNG state before each of the three runs, so random ops draw the same numbers.
const SEED: i64 = 1234;

/// Runs `m` through `backend` (forward then backward) and checks outputs, inputs written
/// back and gradients against eager plus libtorch autograd on the original graph.
fn check_against_autograd(name: &str, backend: &str, m: &Model) {
    check_within(name, backend, m, 1e-6, 1e-5)
}

/// [`check_against_autograd`] with tolerances for outputs and gradients.
fn check_within(name: &str, backend: &str, m: &Model, out_tol: f64, grad_tol: f64) {
    let name = &format!("{name} through {backend}");
    let copies = || m.inputs.iter().map(Tensor::copy).collect::<Vec<_>>();
    let eager_inputs = copies();
    tch::manual_seed(SEED);
    let eager = Interpreter::new(&m.graph, &Device::cpu(), &HashMap::new())
        .unwrap()
        .run(&eager_inputs)
        .unwrap();
    let mut f = compile(backend, m).unwrap_or_else(|e| panic!("{name}: {e}"));
    let aot_inputs = copies();
    tch::manual_seed(SEED);
    let out = f
        .forward(&aot_inputs)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(out.len(), eager.len(), "{name}");
    for (o, e) in out.iter().zip(&eager) {
        let (o, e) = (o.as_ref().unwrap(), e.as_ref().unwrap());
        assert!(
            relative_error(o, e) <= out_tol,
            "{name}: output differs by {}",
            relative_error(o, e)
        );
    }
    // Mutated inputs (batch-norm running stats, in-place writes) are written back.
    for (i, (a, e)) in aot_inputs.iter().zip(&eager_inputs).enumerate() {
        assert!(
            a.equal(e),
            "{name}: input {i} after the run differs from eager's"
        );
    }
    let grad_out: Vec<Option<Tensor>> = eager
        .iter()
        .map(|e| {
            let meta = meta_of(e.as_ref().unwrap()).unwrap();
            Some(
                random_tensors(&[meta], 7, tch::Device::Cpu)
                    .unwrap()
                    .remove(0),
            )
        })
        .collect();
    let grads = f
        .backward(&grad_out)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    tch::manual_seed(SEED);
    let (_, want) = autograd_gradients(
        &m.graph,
        &copies(),
        &m.requires_grad,
        &grad_out,
        &Device::cpu(),
    )
    .unwrap();
    assert_eq!(grads.len(), want.len(), "{name}");
    let mut worst: f64 = 0.0;
    for (i, (g, w)) in grads.iter().zip(&want).enumerate() {
        match (g, w) {
            (Some(g), Some(w)) => {
                let e = relative_error(g, w);
                worst = worst.max(e);
                assert!(e <= grad_tol, "{name}: gradient of input {i} off by {e}");
            }
            (None, None) => {}
            (g, w) => panic!(
                "{name}: input {i}: ours {:?}, autograd {:?}",
                g.is_some(),
                w.is_some()
            ),
        }
    }
    println!("{name}: worst gradient relative error {worst:e}");
    // One backward per forward.
    let again = f.backward(&grad_out).unwrap_err();
    assert!(
        again
            .message
            .contains("backward called before forward, or twice"),
        "{again}"
    );
}

#[test]
fn outputs_and_gradients_equal_eager_and_autograd() {
    for name in ["mlp", "cnn", "gpt4"] {
        let m = model(name);
        for backend in [
            "aot_eager",
            "aot_eager_default_partitioner",
            "aot_eager:budget=0",
            "aot_eager:budget=0.5",
        ] {
            check_against_autograd(name, backend, &m);
        }
        // Decompositions reassociate float arithmetic: equal within float32 rounding.
        check_within(name, "aot_eager_decomp_partition", &m, 1e-5, 1e-5);
    }
}

#[test]
fn dropout_gradients_stay_exact_whatever_the_budget() {
    // The mask must be saved (never recomputed with fresh random numbers), at any budget.
    let m = text_model(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[256, 32]", w: "f32[32, 32]", w2: "f32[32, 8]"):
        mm: "f32[256, 32]" = torch.ops.aten.mm.default(x, w)
        native_dropout = torch.ops.aten.native_dropout.default(mm, 0.5, True)
        getitem: "f32[256, 32]" = native_dropout[0]
        getitem_1: "b8[256, 32]" = native_dropout[1]
        relu: "f32[256, 32]" = torch.ops.aten.relu.default(getitem)
        mm_1: "f32[256, 8]" = torch.ops.aten.mm.default(relu, w2)
        return (mm_1,)
"#,
        &[false, true, true],
    );
    for backend in [
        "aot_eager",
        "aot_eager_default_partitioner",
        "aot_eager:budget=1",
        "aot_eager:recompute=relu",
    ] {
        check_against_autograd("dropout", backend, &m);
    }
    // Saving less would mean drawing a new mask in the backward (or recomputing from a
    // dropped value): refused, with the least budget that can be met.
    for budget in ["0", "0.2"] {
        let err = compile(&format!("aot_eager:budget={budget}"), &m)
            .err()
            .expect("the budget cannot be met");
        assert_eq!(err.stage, Stage::Compile);
        assert!(
            err.message.contains("unreachable") && err.message.contains("(budget 1.0000)"),
            "{err}"
        );
    }
}

/// A graph from text with seeded random inputs; `requires_grad` per input.
fn text_model(text: &str, requires_grad: &[bool]) -> Model {
    let graph = parse_graph(text).unwrap();
    let metas: Vec<_> = graph
        .placeholders()
        .into_iter()
        .map(|p| graph.node(p).meta.tensor().unwrap().clone())
        .collect();
    Model {
        inputs: random_tensors(&metas, 3, tch::Device::Cpu).unwrap(),
        graph,
        requires_grad: requires_grad.to_vec(),
    }
}

#[test]
fn in_place_ops_and_writes_into_views_differentiate_like_autograd() {
    // In-place ops on intermediates, and a mutated input that does not require grad (a
    // buffer updated in place, as a running statistic is).
    let in_place = text_model(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4, 5]", w: "f32[5, 3]", b: "f32[3]", buf: "f32[3]"):
        mm: "f32[4, 3]" = torch.ops.aten.mm.default(x, w)
        add_: "f32[4, 3]" = torch.ops.aten.add_.Tensor(mm, b)
        mul_: "f32[4, 3]" = torch.ops.aten.mul_.Tensor(mm, 2)
        relu_: "f32[4, 3]" = torch.ops.aten.relu_.default(mm)
        mean: "f32[3]" = torch.ops.aten.mean.dim(mm, [0])
        add__1: "f32[3]" = torch.ops.aten.add_.Tensor(buf, mean)
        sigmoid: "f32[4, 3]" = torch.ops.aten.sigmoid.default(mm)
        return (sigmoid,)
"#,
        &[true, true, true, false],
    );
    for backend in ["aot_eager", "aot_eager_default_partitioner"] {
        check_against_autograd("in-place", backend, &in_place);
    }
    // `y = y + 3; y[:, 0] = x[:, 0]`: the write reaches later reads of y, and x's gradient
    // comes through the scatter.
    let view_write = text_model(
        r#"
class G(torch.nn.Module):
    def forward(self, x_1: "f32[3, 4]", y_1: "f32[3, 4]"):
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(y_1, 3)
        slice_1: "f32[3, 4]" = torch.ops.aten.slice.Tensor(x_1, 0, 0, 9223372036854775807)
        select: "f32[3]" = torch.ops.aten.select.int(slice_1, 1, 0)
        slice_2: "f32[3, 4]" = torch.ops.aten.slice.Tensor(add, 0, 0, 9223372036854775807)
        select_1: "f32[3]" = torch.ops.aten.select.int(slice_2, 1, 0)
        copy_: "f32[3]" = torch.ops.aten.copy_.default(select_1, select)
        mul: "f32[3, 4]" = torch.ops.aten.mul.Tensor(add, add)
        return (mul,)
"#,
        &[true, true],
    );
    for backend in ["aot_eager", "aot_eager_default_partitioner"] {
        check_against_autograd("view-write", backend, &view_write);
    }
}

#[test]
fn backward_before_forward_is_an_error() {
    let m = model("mlp");
    let mut f = compile("aot_eager_default_partitioner", &m).unwrap();
    let err = f.backward(&[None]).unwrap_err();
    assert!(err.message.contains("before forward"), "{err}");
}

#[test]
fn faults_go_into_the_forward_or_the_backward_graph() {
    let m = model("mlp");
    let run = |backend: &str| -> Failure {
        let mut f = compile(backend, &m).unwrap();
        match f.forward(&m.inputs.iter().map(Tensor::copy).collect::<Vec<_>>()) {
            Err(e) => e,
            Ok(outs) => f
                .backward(&outs)
                .expect_err("the fault must fire in the backward"),
        }
    };
    let f = run("aot_eager:fw=relu_runtime_error_TESTING_ONLY");
    assert_eq!((f.stage, f.node.as_deref()), (Stage::Runtime, Some("relu")));
    assert!(
        f.message
            .starts_with("in the forward graph (compiled by `relu_runtime_error_TESTING_ONLY`)"),
        "{f}"
    );
    let f = run("aot_eager:bw=fault:runtime@threshold_backward");
    assert_eq!(
        (f.stage, f.op.as_deref()),
        (Stage::Runtime, Some("aten::threshold_backward.default"))
    );
    assert!(f.message.starts_with("in the backward graph"), "{f}");
    let f = run("aot_eager:bw=fault:compile@mm");
    assert_eq!(f.stage, Stage::Compile);
    assert!(f.message.starts_with("in the backward graph"), "{f}");
    // With relu recomputed in the backward, the relu testing backends fire there.
    let f = run("aot_eager:bw=relu_runtime_error_TESTING_ONLY,recompute=relu");
    assert!(
        f.message
            .starts_with("in the backward graph (compiled by `relu_runtime_error_TESTING_ONLY`)"),
        "{f}"
    );
    assert!(f.message.ends_with("ReluRuntimeError"), "{f}");
}

#[test]
fn example_inputs_must_match_the_graph_inputs() {
    let m = model("mlp");
    let examples = vec![ExampleInput::new(meta_of(&m.inputs[0]).unwrap())];
    let err = lookup("aot_eager")
        .unwrap()
        .compile(&m.graph, &examples, &CompileContext::default())
        .err()
        .expect("a count mismatch is a compile error");
    assert_eq!(err.stage, Stage::Compile);
    assert!(
        err.message
            .contains("the graph has 9 inputs but 1 example inputs were given"),
        "{err}"
    );
}

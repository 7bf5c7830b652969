//! Gradients from graphbug's joint graphs, run by graphbug's interpreter, against libtorch
//! autograd on the same forward graphs: the reference models and hand-written graphs that
//! exercise broadcasting, split/cat, reductions, masked_fill, where, pointwise math and views.

use std::collections::HashMap;

use graphbug_aten::io::{order_tensors, random_tensors, read_tensors};
use graphbug_aten::reference::{autograd_gradients, autograd_leaves};
use graphbug_aten::{Interpreter, LibtorchDerivatives};
use graphbug_autodiff::{joint_graph_with, Joint};
use graphbug_ir::passes::{default_side_effects, extract_subgraph};
use graphbug_ir::{parse_graph, Device, Graph, Meta, NodeId, TensorMeta, Value};
use graphbug_tests::{fixtures_dir, reference_joint, relative_error};
use tch::Tensor;

/// Float32 gradients must agree to this relative error.
const TOLERANCE: f64 = 1e-5;

/// Which outputs of `forward` require grad under libtorch autograd, for these inputs.
fn outputs_requiring_grad(forward: &Graph, inputs: &[Tensor], requires_grad: &[bool]) -> Vec<bool> {
    let leaves = autograd_leaves(inputs, requires_grad);
    let outputs = Interpreter::new(forward, &Device::cpu(), &HashMap::new())
        .expect("forward interpreter")
        .with_autograd(true)
        .run(&leaves)
        .expect("forward runs with autograd");
    outputs
        .iter()
        .map(|o| o.as_ref().is_some_and(Tensor::requires_grad))
        .collect()
}

/// Runs the joint graph of `forward` and libtorch autograd on the same inputs and random
/// tangents; returns the largest relative error over forward outputs and gradients.
fn compare(
    label: &str,
    forward: &Graph,
    inputs: &[Tensor],
    requires_grad: &[bool],
    seed: u64,
) -> f64 {
    compare_against(label, forward, forward, inputs, requires_grad, seed)
}

/// As `compare`, with libtorch autograd differentiating `reference`, a graph computing
/// the same function as `forward`.
fn compare_against(
    label: &str,
    forward: &Graph,
    reference: &Graph,
    inputs: &[Tensor],
    requires_grad: &[bool],
    seed: u64,
) -> f64 {
    let Joint {
        graph: joint,
        num_fwd_outputs,
        tangent_outputs,
    } = joint_graph_with(forward, requires_grad, &LibtorchDerivatives::new())
        .unwrap_or_else(|e| panic!("{label}: joint graph: {e}"));
    let tangent_metas: Vec<TensorMeta> = joint
        .placeholders()
        .into_iter()
        .map(|p| joint.node(p))
        .filter(|n| n.name.starts_with("tangents_"))
        .map(|n| n.meta.tensor().expect("tangents are annotated").clone())
        .collect();
    let tangents = random_tensors(&tangent_metas, seed, tch::Device::Cpu).expect("tangents");

    // One tangent for each output libtorch says requires grad, in output order.
    let wants = outputs_requiring_grad(forward, inputs, requires_grad);
    let expected: Vec<usize> = (0..wants.len()).filter(|&k| wants[k]).collect();
    assert_eq!(
        tangent_outputs, expected,
        "{label}: outputs that get tangents"
    );
    assert_eq!(tangents.len(), tangent_outputs.len(), "{label}: tangents");
    let mut grad_outputs: Vec<Option<Tensor>> = wants.iter().map(|_| None).collect();
    for (&k, t) in tangent_outputs.iter().zip(&tangents) {
        grad_outputs[k] = Some(t.shallow_clone());
    }

    let (ref_outputs, ref_grads) = autograd_gradients(
        reference,
        inputs,
        requires_grad,
        &grad_outputs,
        &Device::cpu(),
    )
    .unwrap_or_else(|e| panic!("{label}: libtorch autograd: {e}"));

    let joint_inputs: Vec<Tensor> = inputs
        .iter()
        .map(|t| t.detach().copy())
        .chain(tangents.iter().map(Tensor::shallow_clone))
        .collect();
    // Every meta the joint graph declares must be what libtorch produces.
    let mut wrong_metas = Vec::new();
    let results = Interpreter::new(&joint, &Device::cpu(), &HashMap::new())
        .unwrap_or_else(|e| panic!("{label}: joint interpreter: {e}"))
        .run_observed(&joint_inputs, &mut |i, value| {
            let node = &joint.nodes[i];
            let ok = match (&node.meta, value.meta()) {
                (Meta::Tensor(want), Meta::Tensor(got)) => *want == got,
                (Meta::Multi(want), Meta::Multi(got)) => want
                    .iter()
                    .enumerate()
                    .all(|(k, w)| w.is_none() || got.get(k) == Some(w)),
                (Meta::Unknown, _) => true,
                _ => false,
            };
            if !ok {
                wrong_metas.push(format!(
                    "{}: {:?} vs {:?}",
                    node.name,
                    node.meta,
                    value.meta()
                ));
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{label}: running the joint graph: {e}"));
    assert!(
        wrong_metas.is_empty(),
        "{label}: wrong metas: {wrong_metas:#?}"
    );
    assert!(
        joint.nodes.iter().all(|n| n.meta != Meta::Unknown),
        "{label}: every joint node is annotated"
    );
    assert_eq!(
        results.len(),
        num_fwd_outputs + inputs.len(),
        "{label}: joint outputs"
    );

    let mut worst: f64 = 0.0;
    for (k, (ours, theirs)) in results[..num_fwd_outputs]
        .iter()
        .zip(&ref_outputs)
        .enumerate()
    {
        let (ours, theirs) = (ours.as_ref().unwrap(), theirs.as_ref().unwrap());
        if ours.is_floating_point() {
            let e = relative_error(ours, theirs);
            assert!(
                e <= TOLERANCE,
                "{label}: forward output {k}: relative error {e:e}"
            );
            worst = worst.max(e);
        } else {
            assert!(ours.equal(theirs), "{label}: forward output {k} differs");
        }
    }
    for (i, (ours, theirs)) in results[num_fwd_outputs..]
        .iter()
        .zip(&ref_grads)
        .enumerate()
    {
        match (ours, theirs) {
            (Some(a), Some(b)) => {
                let e = relative_error(a, b);
                assert!(
                    e <= TOLERANCE,
                    "{label}: gradient of input {i}: relative error {e:e}"
                );
                worst = worst.max(e);
            }
            (None, None) => {}
            (a, b) => panic!(
                "{label}: gradient of input {i}: ours {}, libtorch {}",
                if a.is_some() { "present" } else { "None" },
                if b.is_some() { "present" } else { "None" }
            ),
        }
    }
    println!("{label}: max relative error {worst:e}");
    worst
}

/// A reference model: its functional forward graph, inputs, and which inputs PyTorch's
/// joint graph differentiates.
fn model(name: &str) -> (Graph, Vec<Tensor>, Vec<bool>) {
    let dir = fixtures_dir().join(name);
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect("fixture");
    let (joint, num_fwd) = reference_joint(name);
    let primals: Vec<NodeId> = joint
        .placeholders()
        .into_iter()
        .filter(|&p| joint.node(p).name.starts_with("primals_"))
        .collect();
    let forward = if name == "cnn" {
        // forward.py mutates the batch-norm buffers: take AOTAutograd's functional forward.
        let outputs = joint.outputs()[..num_fwd].to_vec();
        extract_subgraph(&joint, &primals, &outputs, &default_side_effects).expect("forward part")
    } else {
        parse_graph(&read("forward.py")).expect("forward.py parses")
    };
    let requires_grad: Vec<bool> = joint.outputs()[num_fwd..]
        .iter()
        .map(|g| *g != Value::None)
        .collect();
    let names: Vec<String> = (0..primals.len()).map(|i| format!("arg{i}")).collect();
    let inputs = order_tensors(
        read_tensors(&dir.join("inputs.npz")).expect("inputs.npz"),
        &names,
        "inputs",
    )
    .expect("inputs in order");
    (forward, inputs, requires_grad)
}

#[test]
fn mlp_gradients_match_libtorch_autograd() {
    let (g, inputs, rg) = model("mlp");
    compare("mlp", &g, &inputs, &rg, 1);
}

#[test]
fn cnn_gradients_match_libtorch_autograd() {
    let (g, inputs, rg) = model("cnn");
    compare("cnn", &g, &inputs, &rg, 2);
}

#[test]
fn gpt4_gradients_match_libtorch_autograd() {
    let (g, inputs, rg) = model("gpt4");
    compare("gpt4", &g, &inputs, &rg, 3);
}

/// Random inputs for a hand-written graph (every placeholder annotated).
fn random_inputs(g: &Graph, seed: u64) -> Vec<Tensor> {
    let metas: Vec<TensorMeta> = g
        .placeholders()
        .into_iter()
        .map(|p| match &g.node(p).meta {
            Meta::Tensor(t) => t.clone(),
            other => panic!("placeholder without a tensor meta: {other:?}"),
        })
        .collect();
    random_tensors(&metas, seed, tch::Device::Cpu).expect("random inputs")
}

const BROADCAST: &str = r#"
class Broadcast(torch.nn.Module):
    def forward(self, x: "f32[4, 8]", b: "f32[8]", c: "f32[1, 8]", w: "f32[4, 8]", m: "b8[4, 8]"):
        add: "f32[4, 8]" = torch.ops.aten.add.Tensor(x, b)
        mul: "f32[4, 8]" = torch.ops.aten.mul.Tensor(add, c)
        split = torch.ops.aten.split.Tensor(mul, 3, 1)
        getitem: "f32[4, 3]" = split[0]
        getitem_2: "f32[4, 2]" = split[2]
        cat: "f32[4, 8]" = torch.ops.aten.cat.default([getitem_2, getitem, getitem], 1)
        masked_fill: "f32[4, 8]" = torch.ops.aten.masked_fill.Scalar(cat, m, 0.0)
        where: "f32[4, 8]" = torch.ops.aten.where.self(m, w, masked_fill)
        sum_1: "f32[8]" = torch.ops.aten.sum.dim_IntList(where, [0])
        mean: "f32[4, 1]" = torch.ops.aten.mean.dim(where, [1], True)
        mean_1: "f32[]" = torch.ops.aten.mean.default(mul)
        sum_2: "f32[]" = torch.ops.aten.sum.default(add)
        return (sum_1, mean, mean_1, sum_2)
"#;

#[test]
fn broadcast_split_cat_reductions_masked_fill_and_where_match_libtorch() {
    let g = parse_graph(BROADCAST).expect("graph parses");
    let inputs = random_inputs(&g, 11);
    compare(
        "broadcast",
        &g,
        &inputs,
        &[true, true, true, true, false],
        12,
    );
}

const MATH: &str = r#"
class Math(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", y: "f32[3, 4]", a: "f32[2, 3, 4]", b: "f32[2, 4, 5]", w: "f32[5, 4]", bias: "f32[5]"):
        neg: "f32[3, 4]" = torch.ops.aten.neg.default(x)
        exp: "f32[3, 4]" = torch.ops.aten.exp.default(neg)
        log: "f32[3, 4]" = torch.ops.aten.log.default(exp)
        sqrt: "f32[3, 4]" = torch.ops.aten.sqrt.default(exp)
        rsqrt: "f32[3, 4]" = torch.ops.aten.rsqrt.default(exp)
        pow_1: "f32[3, 4]" = torch.ops.aten.pow.Tensor_Scalar(y, 3)
        tanh: "f32[3, 4]" = torch.ops.aten.tanh.default(x)
        sigmoid: "f32[3, 4]" = torch.ops.aten.sigmoid.default(y)
        silu: "f32[3, 4]" = torch.ops.aten.silu.default(x)
        gelu: "f32[3, 4]" = torch.ops.aten.gelu.default(y, approximate = 'tanh')
        sin: "f32[3, 4]" = torch.ops.aten.sin.default(x)
        cos: "f32[3, 4]" = torch.ops.aten.cos.default(y)
        abs_1: "f32[3, 4]" = torch.ops.aten.abs.default(x)
        relu: "f32[3, 4]" = torch.ops.aten.relu.default(y)
        div: "f32[3, 4]" = torch.ops.aten.div.Tensor(sin, exp)
        sub: "f32[3, 4]" = torch.ops.aten.sub.Tensor(tanh, sigmoid, alpha = 2)
        rsub: "f32[3, 4]" = torch.ops.aten.rsub.Scalar(cos, 1)
        mul: "f32[3, 4]" = torch.ops.aten.mul.Tensor(log, sqrt)
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(mul, rsqrt, alpha = 0.5)
        add_1: "f32[3, 4]" = torch.ops.aten.add.Tensor(add, pow_1)
        add_2: "f32[3, 4]" = torch.ops.aten.add.Tensor(add_1, silu)
        add_3: "f32[3, 4]" = torch.ops.aten.add.Tensor(add_2, gelu)
        add_4: "f32[3, 4]" = torch.ops.aten.add.Tensor(add_3, abs_1)
        add_5: "f32[3, 4]" = torch.ops.aten.add.Tensor(add_4, relu)
        add_6: "f32[3, 4]" = torch.ops.aten.add.Tensor(add_5, div)
        add_7: "f32[3, 4]" = torch.ops.aten.add.Tensor(add_6, sub)
        add_8: "f32[3, 4]" = torch.ops.aten.add.Tensor(add_7, rsub)
        div_1: "f32[3, 4]" = torch.ops.aten.div.Scalar(add_8, 3.0)
        mul_1: "f32[3, 4]" = torch.ops.aten.mul.Scalar(div_1, 2.0)
        _softmax: "f32[3, 4]" = torch.ops.aten._softmax.default(mul_1, 1, False)
        _log_softmax: "f32[3, 4]" = torch.ops.aten._log_softmax.default(mul_1, 0, False)
        t: "f32[4, 5]" = torch.ops.aten.t.default(w)
        addmm: "f32[3, 5]" = torch.ops.aten.addmm.default(bias, _softmax, t, beta = 0.5, alpha = 2)
        mm: "f32[3, 5]" = torch.ops.aten.mm.default(_log_softmax, t)
        transpose: "f32[2, 4, 3]" = torch.ops.aten.transpose.int(a, 1, 2)
        permute: "f32[4, 2, 3]" = torch.ops.aten.permute.default(a, [2, 0, 1])
        clone: "f32[4, 2, 3]" = torch.ops.aten.clone.default(permute, memory_format = torch.contiguous_format)
        view: "f32[8, 3]" = torch.ops.aten.view.default(clone, [8, 3])
        select: "f32[3, 4]" = torch.ops.aten.select.int(a, 0, 1)
        slice_1: "f32[2, 3, 2]" = torch.ops.aten.slice.Tensor(a, 2, 1, 3)
        unsqueeze: "f32[1, 3, 4]" = torch.ops.aten.unsqueeze.default(select, 0)
        expand: "f32[2, 3, 4]" = torch.ops.aten.expand.default(unsqueeze, [2, 3, 4])
        squeeze: "f32[3, 4]" = torch.ops.aten.squeeze.dim(unsqueeze, 0)
        bmm: "f32[2, 3, 5]" = torch.ops.aten.bmm.default(expand, b)
        bmm_1: "f32[2, 4, 5]" = torch.ops.aten.bmm.default(transpose, bmm)
        _to_copy: "f64[3, 4]" = torch.ops.aten._to_copy.default(squeeze, dtype = torch.float64)
        clone_1: "f32[3, 4]" = torch.ops.aten.clone.default(x)
        mul_2: "f32[3, 4]" = torch.ops.aten.mul.Tensor(clone_1, x)
        permute_1: "f32[3, 2, 4]" = torch.ops.aten.permute.default(a, [1, 0, 2])
        view_1: "f32[3, 8]" = torch.ops.aten.reshape.default(permute_1, [3, 8])
        return (addmm, mm, view, slice_1, bmm_1, _to_copy, mul_2, view_1)
"#;

#[test]
fn pointwise_math_matmuls_and_views_match_libtorch() {
    let g = parse_graph(MATH).expect("graph parses");
    let inputs = random_inputs(&g, 21);
    compare("math", &g, &inputs, &[true; 6], 22);
}

/// The scatters and copies functionalization writes for mutations (through views).
const SCATTERS: &str = r#"
class Scatters(torch.nn.Module):
    def forward(self, x: "f32[4, 6]", s: "f32[6]", t: "f32[2, 6]", d: "f32[4]", a: "f32[2, 3]"):
        select_scatter: "f32[4, 6]" = torch.ops.aten.select_scatter.default(x, s, 0, 1)
        slice_scatter: "f32[4, 6]" = torch.ops.aten.slice_scatter.default(select_scatter, t, 0, 2, 4)
        mul: "f32[4, 6]" = torch.ops.aten.mul.Tensor(slice_scatter, slice_scatter)
        diagonal_scatter: "f32[4, 6]" = torch.ops.aten.diagonal_scatter.default(mul, d, 1)
        as_strided_scatter: "f32[4, 6]" = torch.ops.aten.as_strided_scatter.default(diagonal_scatter, a, [2, 3], [6, 2], 1)
        slice_scatter_1: "f32[4, 6]" = torch.ops.aten.slice_scatter.default(as_strided_scatter, t, 0, 0, None, 2)
        copy: "f32[4, 6]" = torch.ops.aten.copy.default(x, s)
        add: "f32[4, 6]" = torch.ops.aten.add.Tensor(slice_scatter_1, copy)
        return (add,)
"#;

/// The same function in a form libtorch autograd differentiates correctly. The
/// as_strided_scatter becomes two slice_scatters (rows 0-1, every other column from 1):
/// libtorch's own as_strided_scatter backward fails gradcheck in 2.13 (it gives `self` the
/// gradient inside the window rather than outside it). The functional `copy` (no autograd
/// formula in libtorch) becomes `copy_` into a clone.
fn scatters_for_autograd() -> Graph {
    let text = SCATTERS
        .replace(
            r#"        copy: "f32[4, 6]" = torch.ops.aten.copy.default(x, s)"#,
            r#"        clone: "f32[4, 6]" = torch.ops.aten.clone.default(x)
        copy: "f32[4, 6]" = torch.ops.aten.copy_.default(clone, s)"#,
        )
        .replace(
        r#"        as_strided_scatter: "f32[4, 6]" = torch.ops.aten.as_strided_scatter.default(diagonal_scatter, a, [2, 3], [6, 2], 1)"#,
        r#"        slice_top: "f32[2, 6]" = torch.ops.aten.slice.Tensor(diagonal_scatter, 0, 0, 2)
        slice_scatter_top: "f32[2, 6]" = torch.ops.aten.slice_scatter.default(slice_top, a, 1, 1, None, 2)
        as_strided_scatter: "f32[4, 6]" = torch.ops.aten.slice_scatter.default(diagonal_scatter, slice_scatter_top, 0, 0, 2)"#,
    );
    assert!(
        text.contains("copy_") && text.contains("slice_top"),
        "both rewrites apply"
    );
    parse_graph(&text).expect("graph parses")
}

#[test]
fn view_scatters_and_copies_match_libtorch() {
    let g = parse_graph(SCATTERS).expect("graph parses");
    let reference = scatters_for_autograd();
    let inputs = random_inputs(&g, 41);
    // All, only the base, only the sources.
    for (rg, seed) in [
        ([true; 5], 42),
        ([true, false, false, false, false], 43),
        ([false, true, true, true, true], 44),
    ] {
        compare_against("scatters", &g, &reference, &inputs, &rg, seed);
    }
}

const NN: &str = r#"
class Nn(torch.nn.Module):
    def forward(self, x: "f32[2, 3, 8, 8]", w: "f32[4, 3, 3, 3]", g: "f32[4]", b: "f32[4]", rm: "f32[4]", rv: "f32[4]", table: "f32[10, 6]", idx: "i64[2, 5]", lw: "f32[6]"):
        convolution: "f32[2, 4, 8, 8]" = torch.ops.aten.convolution.default(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        native_batch_norm = torch.ops.aten.native_batch_norm.default(convolution, g, b, rm, rv, True, 0.1, 1e-05)
        getitem: "f32[2, 4, 8, 8]" = native_batch_norm[0]
        getitem_1: "f32[4]" = native_batch_norm[1]
        getitem_2: "f32[4]" = native_batch_norm[2]
        relu: "f32[2, 4, 8, 8]" = torch.ops.aten.relu.default(getitem)
        max_pool2d_with_indices = torch.ops.aten.max_pool2d_with_indices.default(relu, [3, 3], [2, 2], [1, 1])
        getitem_3: "f32[2, 4, 4, 4]" = max_pool2d_with_indices[0]
        getitem_4: "i64[2, 4, 4, 4]" = max_pool2d_with_indices[1]
        mean: "f32[2, 4]" = torch.ops.aten.mean.dim(getitem_3, [-1, -2])
        embedding: "f32[2, 5, 6]" = torch.ops.aten.embedding.default(table, idx, 0)
        native_layer_norm = torch.ops.aten.native_layer_norm.default(embedding, [6], lw, None, 1e-05)
        getitem_5: "f32[2, 5, 6]" = native_layer_norm[0]
        getitem_6: "f32[2, 5, 1]" = native_layer_norm[1]
        getitem_7: "f32[2, 5, 1]" = native_layer_norm[2]
        native_layer_norm_1 = torch.ops.aten.native_layer_norm.default(getitem_5, [6], None, None, 1e-05)
        getitem_8: "f32[2, 5, 6]" = native_layer_norm_1[0]
        getitem_9: "f32[2, 5, 1]" = native_layer_norm_1[1]
        getitem_10: "f32[2, 5, 1]" = native_layer_norm_1[2]
        return (mean, getitem_8)
"#;

#[test]
fn convolution_batch_norm_pooling_embedding_and_layer_norm_match_libtorch() {
    let g = parse_graph(NN).expect("graph parses");
    let mut inputs = random_inputs(&g, 31);
    // Token ids in range, some of them the padding index 0; a positive running variance.
    inputs[7] = Tensor::from_slice(&[0i64, 3, 9, 0, 1, 2, 5, 7, 0, 4]).view([2, 5]);
    inputs[5] = inputs[5].abs() + 0.5;
    let rg = [true, true, true, true, false, false, true, false, true];
    compare("nn", &g, &inputs, &rg, 32);
}

/// A pointwise op between a contiguous gradient and a transposed value: the output is
/// contiguous (the first input decides, as in TensorIterator), so the `view` backward must
/// reshape through a copy. (Found by the partitioner's property test.)
const TRANSPOSED_POINTWISE: &str = r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4, 6]"):
        view: "f32[6, 4]" = torch.ops.aten.view.default(x, [6, 4])
        t: "f32[4, 6]" = torch.ops.aten.t.default(view)
        gelu: "f32[4, 6]" = torch.ops.aten.gelu.default(t)
        mul: "f32[4, 6]" = torch.ops.aten.mul.Tensor(t, x)
        return (gelu, mul)
"#;

#[test]
fn pointwise_outputs_take_tensor_iterators_layout() {
    let g = parse_graph(TRANSPOSED_POINTWISE).expect("graph parses");
    let inputs = random_inputs(&g, 51);
    compare("transposed pointwise", &g, &inputs, &[true], 52);
}

/// Ops with no derivative rule in Rust: their backward is recorded from libtorch's autograd.
const RECORDED: &str = r#"
class Recorded(torch.nn.Module):
    def forward(self, x: "f32[4, 6]", y: "f32[4, 6]", w: "f32[6]", g: "f32[2, 6, 3]", v: "f32[6]"):
        acos: "f32[4, 6]" = torch.ops.aten.acos.default(x)
        cumsum: "f32[4, 6]" = torch.ops.aten.cumsum.default(acos, 1)
        flip: "f32[4, 6]" = torch.ops.aten.flip.default(cumsum, [0, 1])
        roll: "f32[4, 6]" = torch.ops.aten.roll.default(flip, [1], [0])
        repeat: "f32[8, 6]" = torch.ops.aten.repeat.default(roll, [2, 1])
        clamp_min: "f32[4, 6]" = torch.ops.aten.clamp_min.default(y, 0.1)
        pow_1: "f32[4, 6]" = torch.ops.aten.pow.Tensor_Tensor(clamp_min, x)
        dot: "f32[]" = torch.ops.aten.dot.default(w, v)
        native_group_norm = torch.ops.aten.native_group_norm.default(g, w, v, 2, 6, 3, 2, 1e-05)
        getitem: "f32[2, 6, 3]" = native_group_norm[0]
        linalg_vector_norm: "f32[4]" = torch.ops.aten.linalg_vector_norm.default(pow_1, 2, [1])
        return (repeat, pow_1, dot, getitem, linalg_vector_norm)
"#;

#[test]
fn ops_without_rust_rules_differentiate_with_libtorchs_formulas() {
    let g = parse_graph(RECORDED).expect("graph parses");
    // acos needs |x| < 1.
    let mut inputs = random_inputs(&g, 31);
    inputs[0] = inputs[0].tanh() * 0.9;
    compare("recorded", &g, &inputs, &[true; 5], 32);
}

/// Multi-output ops, writes through views inside PyTorch's formulas (`fill_` on a diagonal
/// in the SVD backward, `copy_` into a slice in the FFT one) and index inputs.
const RECORDED_MULTI: &str = r#"
class RecordedMulti(torch.nn.Module):
    def forward(self, q: "f32[1, 2, 4, 8]", k: "f32[1, 2, 4, 8]", v: "f32[1, 2, 4, 8]", a: "f32[3, 3]", x: "f32[4, 6]", idx: "i64[4, 6]"):
        sdpa = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v)
        getitem: "f32[1, 2, 4, 8]" = sdpa[0]
        svd = torch.ops.aten._linalg_svd.default(a)
        getitem_1: "f32[3, 3]" = svd[0]
        getitem_2: "f32[3]" = svd[1]
        polygamma: "f32[4, 6]" = torch.ops.aten.polygamma.default(1, x)
        scatter_reduce: "f32[4, 6]" = torch.ops.aten.scatter_reduce.two(x, 1, idx, polygamma, "sum")
        fft: "c64[4, 4]" = torch.ops.aten._fft_r2c.default(x, [1], 0, True)
        abs_1: "f32[4, 4]" = torch.ops.aten.abs.default(fft)
        return (getitem, getitem_1, getitem_2, scatter_reduce, abs_1)
"#;

#[test]
fn multi_output_ops_and_writes_through_views_in_formulas_match_libtorch() {
    let g = parse_graph(RECORDED_MULTI).expect("graph parses");
    let mut inputs = random_inputs(&g, 41);
    // Valid indices along dim 1; polygamma away from its poles.
    inputs[5] = Tensor::randint(6, [4, 6], (tch::Kind::Int64, tch::Device::Cpu));
    inputs[4] = inputs[4].abs() + 0.5;
    compare(
        "recorded multi",
        &g,
        &inputs,
        &[true, true, true, true, true, false],
        42,
    );
}

/// `polar`'s composite kernel calls `polar.out`, which has no meta kernel: recording on meta
/// tensors runs it on CPU stand-ins below autograd, as meta inference does, and its
/// formula multiplies by the complex scalar `1j`, which the joint graph carries.
#[test]
fn polar_records_through_an_op_without_a_meta_kernel_and_a_complex_scalar() {
    let g = parse_graph(
        r#"
class Polar(torch.nn.Module):
    def forward(self, r: "f32[3, 2]", theta: "f32[3, 2]"):
        polar: "c64[3, 2]" = torch.ops.aten.polar.default(r, theta)
        view_as_real: "f32[3, 2, 2]" = torch.ops.aten.view_as_real.default(polar)
        return (view_as_real,)
"#,
    )
    .expect("graph parses");
    let Joint { graph, .. } =
        joint_graph_with(&g, &[true, true], &LibtorchDerivatives::new()).unwrap();
    assert!(
        graph
            .to_string()
            .contains("torch.ops.aten.mul.Scalar(polar, 1j)"),
        "{graph}"
    );
    let inputs = random_inputs(&g, 71);
    compare("polar", &g, &inputs, &[true, true], 72);
}

#[test]
fn an_op_libtorch_cannot_differentiate_is_an_error_naming_it() {
    let g = parse_graph(
        r#"
class Igamma(torch.nn.Module):
    def forward(self, x: "f32[4]", y: "f32[4]"):
        igamma: "f32[4]" = torch.ops.aten.igamma.default(x, y)
        return (igamma,)
"#,
    )
    .expect("graph parses");
    let err = joint_graph_with(&g, &[true, true], &LibtorchDerivatives::new())
        .expect_err("igamma has no derivative for its first input")
        .to_string();
    assert!(err.contains("igamma"), "{err}");
    assert!(err.contains("not implemented"), "{err}");
    // Its second input differentiates, as in PyTorch.
    let mut inputs = random_inputs(&g, 51);
    inputs = inputs.iter().map(|t| t.abs() + 0.5).collect();
    compare("igamma", &g, &inputs, &[false, true], 52);
}

/// Ops without meta kernels whose kernels check values record on CPU stand-ins they
/// accept (an identity for cholesky), and outputs libtorch does not differentiate (LU's
/// permutation matrix) get no tangent, as in AOTAutograd.
#[test]
fn value_checking_ops_and_non_differentiable_float_outputs() {
    let g = parse_graph(
        r#"
class G(torch.nn.Module):
    def forward(self, a: "f32[4, 4]", b: "f32[3, 5]"):
        cholesky: "f32[4, 4]" = torch.ops.aten.cholesky.default(a)
        linalg_lu = torch.ops.aten.linalg_lu.default(b)
        getitem: "f32[3, 3]" = linalg_lu[0]
        getitem_1: "f32[3, 3]" = linalg_lu[1]
        getitem_2: "f32[3, 5]" = linalg_lu[2]
        return (cholesky, getitem, getitem_1, getitem_2)
"#,
    )
    .expect("graph parses");
    let mut inputs = random_inputs(&g, 61);
    let a = &inputs[0];
    inputs[0] = a.matmul(&a.tr()) + Tensor::eye(4, (tch::Kind::Float, tch::Device::Cpu)) * 4.0;
    let Joint {
        tangent_outputs, ..
    } = joint_graph_with(&g, &[true, true], &LibtorchDerivatives::new()).unwrap();
    assert_eq!(
        tangent_outputs,
        [0, 2, 3],
        "the permutation gets no tangent"
    );
    compare("cholesky and lu", &g, &inputs, &[true, true], 62);
}

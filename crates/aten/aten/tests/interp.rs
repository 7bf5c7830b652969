//! The interpreter on small graphs: values of every kind, in-place ops, and bad input.

use std::collections::HashMap;

use graphbug_aten::{AtenError, Interpreter};
use graphbug_ir::{parse_graph, Device};
use tch::{Kind, Tensor};

fn interp(text: &str) -> Result<Interpreter, AtenError> {
    Interpreter::new(&parse_graph(text).unwrap(), &Device::cpu(), &HashMap::new())
}

fn run(text: &str, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>, AtenError> {
    interp(text)?.run(inputs)
}

const G: &str = "class G(torch.nn.Module):\n    def forward(self, x: \"f32[2, 3]\"):\n";

#[test]
fn python_values_reach_ops_as_their_schema_types() {
    // Scalars for Tensor arguments, int lists, a single int for int[2], kwargs, dtype,
    // device, memory format, Tensor[] and Tensor?[] lists, strings, None and getitems.
    let text = format!(
        "{G}{}",
        concat!(
            "        a: \"f32[2, 3]\" = torch.ops.aten.add.Tensor(x, 1.5, alpha = 2)\n",
            "        b: \"f64[2, 3]\" = torch.ops.aten._to_copy.default(a, dtype = torch.float64, device = device(type='cpu'), memory_format = torch.contiguous_format)\n",
            "        c: \"f32[2, 3]\" = torch.ops.aten.gelu.default(x, approximate = 'tanh')\n",
            "        split = torch.ops.aten.split.Tensor(c, 1, 1)\n",
            "        s0: \"f32[2, 1]\" = split[0]\n",
            "        s2: \"f32[2, 1]\" = split[2]\n",
            "        cat: \"f32[2, 2]\" = torch.ops.aten.cat.default([s2, s0], 1)\n",
            "        idx: \"i64[1]\" = torch.ops.aten.ones.default([1], dtype = torch.int64)\n",
            "        ix: \"f32[1, 2]\" = torch.ops.aten.index.Tensor(cat, [idx, None])\n",
            "        sm = torch.ops.aten.max.dim(x, -1, True)\n",
            "        vals: \"f32[2, 1]\" = sm[0]\n",
            "        s: \"f32[1, 1]\" = torch.ops.aten.sum.dim_IntList(vals, [0], True)\n",
            "        return (b, ix, s, None)\n",
        )
    );
    let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0, 0.5, 0.0, -1.0]).reshape([2, 3]);
    let out = run(&text, &[x.shallow_clone()]).unwrap();
    let b = out[0].as_ref().unwrap();
    assert_eq!(b.kind(), Kind::Double);
    let want = (&x + 3.0).to_kind(Kind::Double);
    assert!(b.equal(&want));
    let c = x.gelu("tanh");
    let ix = out[1].as_ref().unwrap();
    assert_eq!(ix.size(), [1, 2]);
    assert!(ix.equal(&Tensor::cat(&[c.narrow(1, 2, 1), c.narrow(1, 0, 1)], 1).narrow(0, 1, 1)));
    let s = out[2].as_ref().unwrap();
    assert_eq!(s.double_value(&[0, 0]), 3.0 + 0.5);
    assert!(out[3].is_none());
}

#[test]
fn in_place_ops_change_the_callers_tensor() {
    let text = format!(
        "{G}        relu_: \"f32[2, 3]\" = torch.ops.aten.relu_.default(x)\n        mul: \"f32[2, 3]\" = torch.ops.aten.mul.Tensor(relu_, 2)\n        return (mul,)\n"
    );
    let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0, -0.5, 0.0, -1.0]).reshape([2, 3]);
    let out = run(&text, &[x.shallow_clone()]).unwrap();
    let relu = Tensor::from_slice(&[1.0f32, 0.0, 3.0, 0.0, 0.0, 0.0]).reshape([2, 3]);
    assert!(x.equal(&relu), "relu_ must update the input in place");
    assert!(out[0].as_ref().unwrap().equal(&(&relu * 2.0)));
}

#[test]
fn wrong_input_count_shape_dtype_and_device() {
    let text = format!(
        "{G}        r: \"f32[2, 3]\" = torch.ops.aten.relu.default(x)\n        return (r,)\n"
    );
    let err = run(&text, &[]).unwrap_err().to_string();
    assert_eq!(err, "bad graph inputs: graph `G` takes 1 inputs, got 0");
    let err = run(
        &text,
        &[Tensor::zeros([3, 2], (Kind::Float, tch::Device::Cpu))],
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "bad graph inputs: input 0 (`x`) should be f32[2, 3] but is f32[3, 2]"
    );
    let err = run(
        &text,
        &[Tensor::zeros([2, 3], (Kind::Int64, tch::Device::Cpu))],
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "bad graph inputs: input 0 (`x`) should be f32[2, 3] but is i64[2, 3]"
    );
}

#[test]
fn unknown_op_names_the_node() {
    let text = format!(
        "{G}        f: \"f32[2, 3]\" = torch.ops.aten.frobnicate.default(x)\n        return (f,)\n"
    );
    let err = interp(&text).unwrap_err();
    assert_eq!(err.node(), Some("f"));
    let msg = err.to_string();
    assert!(
        msg.starts_with("unknown op `aten::frobnicate.default` (node `f`): "),
        "{msg}"
    );
    assert!(msg.contains("frobnicate"), "{msg}");
    // A dynamo-level call reaching the interpreter unlowered is named, with the way out.
    let text = format!("{G}        f: \"f32[2, 3]\" = torch.relu(x)\n        return (f,)\n");
    let msg = interp(&text).unwrap_err().to_string();
    assert!(
        msg.starts_with("unknown op `torch.relu` (node `f`): "),
        "{msg}"
    );
    assert!(msg.contains("lower it first"), "{msg}");
}

#[test]
fn wrong_arity_and_argument_types_name_the_node() {
    let cases = [
        (
            "torch.ops.aten.relu.default(x, 1)",
            "node `r` (aten::relu.default): takes 1 positional argument but 2 were given; schema: aten::relu(Tensor self) -> Tensor",
        ),
        (
            "torch.ops.aten.add.Tensor(x)",
            "node `r` (aten::add.Tensor): missing required argument `other`",
        ),
        (
            "torch.ops.aten.add.Tensor(x, x, beta = 2)",
            "node `r` (aten::add.Tensor): unexpected keyword argument `beta`",
        ),
        (
            "torch.ops.aten.add.Tensor(x, x, other = x)",
            "node `r` (aten::add.Tensor): got multiple values for argument `other`",
        ),
        (
            "torch.ops.aten.sum.dim_IntList(x, 'a')",
            "node `r` (aten::sum.dim_IntList): argument `dim` (int[1]?) cannot take `'a'`: expected a list",
        ),
        (
            "torch.ops.aten.relu.default(None)",
            "node `r` (aten::relu.default): argument `self` (Tensor) cannot take `None`: None is not allowed here",
        ),
    ];
    for (call, want) in cases {
        let text = format!("{G}        r = {call}\n        return (r,)\n");
        let err = interp(&text).unwrap_err();
        assert!(matches!(err, AtenError::BadArguments { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(want),
            "{call}:\n  got  {msg}\n  want {want}"
        );
    }
}

#[test]
fn a_failing_op_reports_node_op_shapes_and_libtorch_message() {
    let text = concat!(
        "class G(torch.nn.Module):\n",
        "    def forward(self, a: \"f32[2, 3]\", b: \"f32[2, 3]\"):\n",
        "        mm = torch.ops.aten.mm.default(a, b)\n",
        "        return (mm,)\n"
    );
    let t = || Tensor::zeros([2, 3], (Kind::Float, tch::Device::Cpu));
    let err = run(text, &[t(), t()]).unwrap_err();
    let AtenError::OpFailed {
        node,
        op,
        inputs,
        message,
    } = &err
    else {
        panic!("expected OpFailed, got {err:?}")
    };
    assert_eq!(
        (node.as_str(), op.as_str(), inputs.as_str()),
        ("mm", "aten::mm.default", "[f32[2, 3], f32[2, 3]]")
    );
    assert!(message.contains("cannot be multiplied"), "{message}");
    // The process and the interpreter survive: a good graph still runs afterwards.
    let ok = format!(
        "{G}        r: \"f32[2, 3]\" = torch.ops.aten.relu.default(x)\n        return (r,)\n"
    );
    assert!(run(&ok, &[t()]).is_ok());
}

#[test]
fn constants_come_from_the_caller() {
    let text = format!(
        "{G}        c: \"f32[3]\" = self.weight\n        r: \"f32[2, 3]\" = torch.ops.aten.mul.Tensor(x, c)\n        return (r,)\n"
    );
    let graph = parse_graph(&text).unwrap();
    let err = Interpreter::new(&graph, &Device::cpu(), &HashMap::new()).unwrap_err();
    assert!(
        err.to_string()
            .contains("`self.weight`, which was not provided"),
        "{err}"
    );
    let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
    let consts = HashMap::from([("weight".to_string(), w)]);
    let i = Interpreter::new(&graph, &Device::cpu(), &consts).unwrap();
    let x = Tensor::ones([2, 3], (Kind::Float, tch::Device::Cpu));
    let out = i.run(&[x]).unwrap();
    assert_eq!(out[0].as_ref().unwrap().double_value(&[1, 2]), 3.0);
}

#[test]
fn values_are_freed_where_fx_frees_them() {
    // The interpreter frees each value right after its last use: exactly where FX's
    // generated code writes its `;  a = b = None` tails.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../tests/fixtures/gpt4/forward.py"
    );
    let graph = parse_graph(&std::fs::read_to_string(path).unwrap()).unwrap();
    let interp = Interpreter::new(&graph, &Device::cpu(), &HashMap::new()).unwrap();
    let printed = graphbug_ir::print_graph(&graph);
    let mut fx: Vec<(String, Vec<String>)> = Vec::new();
    for line in printed.lines().skip(2) {
        let Some((stmt, tail)) = line.split_once(";  ") else {
            continue;
        };
        let node = stmt.trim().split([':', ' ']).next().unwrap().to_string();
        let mut freed: Vec<String> = tail.split(" = ").map(str::to_string).collect();
        freed.pop(); // "None"
        freed.sort();
        fx.push((node, freed));
    }
    let mut ours = interp.free_schedule();
    ours.retain(|(_, freed)| !freed.is_empty());
    for (_, freed) in &mut ours {
        freed.sort();
    }
    assert_eq!(ours, fx);
    assert!(fx.len() > 200);
}

#[test]
fn cuda_device_arguments_replay_on_cpu() {
    let text = format!(
        "{G}        ones: \"f32[2, 3]\" = torch.ops.aten.ones.default([2, 3], dtype = torch.float32, device = device(type='cuda', index=0), pin_memory = False)\n        r: \"f32[2, 3]\" = torch.ops.aten.add.Tensor(x, ones)\n        return (r,)\n"
    );
    let x = Tensor::zeros([2, 3], (Kind::Float, tch::Device::Cpu));
    let out = run(&text, &[x]).unwrap();
    assert_eq!(
        out[0].as_ref().unwrap().sum(Kind::Double).double_value(&[]),
        6.0
    );
}

#[test]
fn gpt4_on_cuda_matches_cpu_where_a_gpu_is_present() {
    use graphbug_aten::device::cuda_device_count;
    if cuda_device_count() == 0 {
        graphbug_run::not_run_here(
            "gpt4_on_cuda_matches_cpu_where_a_gpu_is_present",
            "no CUDA device",
        );
        return;
    }
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../tests/fixtures/gpt4/forward.py"
    );
    let graph = parse_graph(&std::fs::read_to_string(path).unwrap()).unwrap();
    let names: Vec<String> = (0..graph.placeholders().len())
        .map(|i| format!("arg{i}"))
        .collect();
    let inputs = graphbug_aten::io::order_tensors(
        graphbug_aten::io::read_tensors(std::path::Path::new(
            &path.replace("forward.py", "inputs.npz"),
        ))
        .unwrap(),
        &names,
        "inputs",
    )
    .unwrap();
    let cpu = Interpreter::new(&graph, &Device::cpu(), &HashMap::new())
        .unwrap()
        .run(&inputs)
        .unwrap();
    let cuda_inputs: Vec<Tensor> = inputs
        .iter()
        .map(|t| t.to_device(tch::Device::Cuda(0)))
        .collect();
    let gpu = Interpreter::new(&graph, &Device::cuda(0), &HashMap::new())
        .unwrap()
        .run(&cuda_inputs)
        .unwrap();
    let diff = (gpu[0].as_ref().unwrap().to_device(tch::Device::Cpu) - cpu[0].as_ref().unwrap())
        .abs()
        .max()
        .double_value(&[]);
    assert!(diff < 1e-3, "CUDA and CPU differ by {diff}");
}

#[test]
fn the_fault_op_perturbs_raises_or_passes_shapes_through() {
    let fault = |kind: &str| {
        format!("{G}        f: \"f32[2, 3]\" = torch.ops.graphbug.fault.default(x, '{kind}', 0.5, 'injected {kind} fault')\n        return (f,)\n")
    };
    let x = || Tensor::zeros([2, 3], (Kind::Float, tch::Device::Cpu));
    let out = run(&fault("accuracy"), &[x()]).unwrap();
    assert_eq!(
        out[0].as_ref().unwrap().sum(Kind::Double).double_value(&[]),
        3.0
    );
    let out = run(&fault("nan"), &[x()]).unwrap();
    assert!(out[0].as_ref().unwrap().isnan().all().int64_value(&[]) == 1);
    let err = run(&fault("runtime"), &[x()]).unwrap_err().to_string();
    assert!(err.contains("injected runtime fault"), "{err}");
    let err = run(&fault("boom"), &[x()]).unwrap_err().to_string();
    assert!(err.contains("unknown fault kind `boom`"), "{err}");
    // Shape inference passes through even a crash fault.
    let g = graphbug_aten::meta::infer_meta(&parse_graph(&fault("crash")).unwrap()).unwrap();
    assert_eq!(g.nodes[1].meta.tensor().unwrap().shape.to_vec(), [2, 3]);
}

/// `with_effects(token, op, *args)` runs `op(*args)` and returns the token ahead of its
/// results; a failing check inside it fails the run, naming the node.
#[test]
fn with_effects_runs_its_op_and_passes_the_token_on() {
    let g = parse_graph(
        r#"
class G(torch.nn.Module):
    def forward(self, token: "f32[0]", a: "f32[3, 3]"):
        linalg_inv_ex = torch.ops.aten.linalg_inv_ex.default(a)
        getitem: "f32[3, 3]" = linalg_inv_ex[0]
        getitem_1: "i32[]" = linalg_inv_ex[1]
        with_effects = torch.ops.higher_order.with_effects(token, torch.ops.aten._linalg_check_errors.default, getitem_1, 'linalg.inv', is_matrix = True)
        getitem_2: "f32[0]" = with_effects[0]
        return (getitem_2, getitem)
"#,
    )
    .unwrap();
    let interp = Interpreter::new(&g, &Device::cpu(), &HashMap::new()).unwrap();
    let token = Tensor::zeros([0], (Kind::Float, tch::Device::Cpu));
    let a = Tensor::eye(3, (Kind::Float, tch::Device::Cpu)) * 2.0;
    let out = interp.run(&[token.shallow_clone(), a]).unwrap();
    assert_eq!(out[0].as_ref().unwrap().size(), [0]);
    let inv = out[1].as_ref().unwrap();
    assert!(inv.allclose(
        &(Tensor::eye(3, (Kind::Float, tch::Device::Cpu)) * 0.5),
        1e-6,
        1e-6,
        false
    ));
    // A singular matrix: the check inside with_effects raises.
    let singular = Tensor::zeros([3, 3], (Kind::Float, tch::Device::Cpu));
    let err = interp.run(&[token, singular]).unwrap_err().to_string();
    assert!(err.contains("with_effects"), "{err}");
}

/// A complex scalar reaches a `Scalar` argument as one (`mul.Scalar(x, 1j)`, as `polar`'s
/// backward formula calls it).
#[test]
fn complex_scalars_reach_scalar_arguments() {
    let text = concat!(
        "class G(torch.nn.Module):\n",
        "    def forward(self, x: \"f32[3]\"):\n",
        "        c: \"c64[3]\" = torch.ops.aten.polar.default(x, x)\n",
        "        m: \"c64[3]\" = torch.ops.aten.mul.Scalar(c, (0.5-2j))\n",
        "        r: \"f32[3, 2]\" = torch.ops.aten.view_as_real.default(m)\n",
        "        return (r,)\n",
    );
    let x = Tensor::from_slice(&[0.5f32, 1.0, 2.0]);
    let out = run(text, &[x.shallow_clone()]).unwrap()[0].take().unwrap();
    // (a + bi)(0.5 - 2i) = (0.5a + 2b) + (0.5b - 2a)i, with a = x cos x, b = x sin x.
    let (a, b) = (&x * x.cos(), &x * x.sin());
    let want = Tensor::stack(&[&a * 0.5 + &b * 2.0, &b * 0.5 - &a * 2.0], 1);
    assert!(out.allclose(&want, 1e-5, 1e-6, false), "{out} vs {want}");
}

//! Cross-checks against PyTorch itself (the set-up virtualenv's torch 2.13): the same graph
//! run by PyTorch as a GraphModule and by our interpreter gives the same outputs and the
//! same in-place updates of its inputs (batch-norm running statistics, `relu_`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use graphbug_aten::io::{order_tensors, read_tensors, write_tensors};
use graphbug_aten::Interpreter;
use graphbug_ir::{parse_graph, Device};
use tch::Tensor;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn python() -> PathBuf {
    let p = workspace().join(".venv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run `cargo xtask setup`",
        p.display()
    );
    p
}

fn arg_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("arg{i}")).collect()
}

/// Runs `graph_file` in PyTorch on `inputs`; returns (outputs, inputs after the run).
fn run_in_pytorch(graph_file: &Path, inputs: &[Tensor], dir: &Path) -> (Vec<Tensor>, Vec<Tensor>) {
    let named: Vec<(String, Tensor)> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("arg{i}"), t.shallow_clone()))
        .collect();
    let (inp, out, mutated) = (
        dir.join("in.safetensors"),
        dir.join("out.safetensors"),
        dir.join("mut.safetensors"),
    );
    write_tensors(&inp, &named).unwrap();
    let status = Command::new(python())
        .arg(workspace().join("crates/aten/aten/python/torch_graph.py"))
        .arg(graph_file)
        .args([
            "--inputs",
            inp.to_str().unwrap(),
            "--outputs",
            out.to_str().unwrap(),
        ])
        .args(["--mutated-inputs", mutated.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(
        status.success(),
        "PyTorch run of {} failed",
        graph_file.display()
    );
    let outs = read_tensors(&out).unwrap();
    let n_out = outs.len();
    let outs = order_tensors(
        outs,
        &(0..n_out).map(|i| format!("out{i}")).collect::<Vec<_>>(),
        "outputs",
    )
    .unwrap();
    let muts = order_tensors(
        read_tensors(&mutated).unwrap(),
        &arg_names(inputs.len()),
        "inputs",
    )
    .unwrap();
    (outs, muts)
}

fn check_against_pytorch(graph_file: &Path, inputs: Vec<Tensor>) {
    let dir = tempfile::tempdir().unwrap();
    let (want_out, want_inputs) = run_in_pytorch(graph_file, &inputs, dir.path());
    let graph = parse_graph(&std::fs::read_to_string(graph_file).unwrap()).unwrap();
    let ours: Vec<Tensor> = inputs.iter().map(Tensor::copy).collect();
    let out = Interpreter::new(&graph, &Device::cpu(), &HashMap::new())
        .unwrap()
        .run(&ours)
        .unwrap();
    assert_eq!(out.len(), want_out.len());
    for (i, (o, w)) in out.iter().zip(&want_out).enumerate() {
        assert!(
            o.as_ref().unwrap().equal(w),
            "{}: output {i} differs",
            graph_file.display()
        );
    }
    let mut changed = 0;
    for (i, ((after, want), before)) in ours.iter().zip(&want_inputs).zip(&inputs).enumerate() {
        assert!(
            after.equal(want),
            "{}: input {i} after the run differs from PyTorch's",
            graph_file.display()
        );
        changed += usize::from(!after.equal(before));
    }
    println!(
        "{}: {changed} inputs updated in place, as in PyTorch",
        graph_file.display()
    );
}

/// The inputs of a reference model (`tests/fixtures/<model>/inputs.npz`), in order.
fn fixture_inputs(model: &str) -> Vec<Tensor> {
    let named =
        read_tensors(&workspace().join(format!("tests/fixtures/{model}/inputs.npz"))).unwrap();
    let n = named.len();
    order_tensors(named, &arg_names(n), "inputs").unwrap()
}

#[test]
fn cnn_batch_norm_buffers_update_as_in_pytorch() {
    let file = workspace().join("tests/fixtures/cnn/forward.py");
    check_against_pytorch(&file, fixture_inputs("cnn"));
}

/// Bit for bit against PyTorch on this machine (kernels differ between CPUs in the last
/// bit, so the outputs stored with the fixtures are matched by the accuracy rules instead,
/// in reference_eager.rs).
#[test]
fn reference_forward_graphs_match_pytorch_bit_for_bit() {
    for model in ["mlp", "gpt4"] {
        let file = workspace().join(format!("tests/fixtures/{model}/forward.py"));
        check_against_pytorch(&file, fixture_inputs(model));
    }
}

#[test]
fn relu_in_place_on_an_input_as_in_pytorch() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("g.py");
    std::fs::write(
        &file,
        concat!(
            "class G(torch.nn.Module):\n",
            "    def forward(self, x: \"f32[3, 4]\", y: \"f32[3, 4]\"):\n",
            "        relu_: \"f32[3, 4]\" = torch.ops.aten.relu_.default(x)\n",
            "        add_: \"f32[3, 4]\" = torch.ops.aten.add_.Tensor(y, relu_, alpha = 0.5)\n",
            "        mul: \"f32[3, 4]\" = torch.ops.aten.mul.Tensor(add_, relu_)\n",
            "        return (mul,)\n",
        ),
    )
    .unwrap();
    let x = Tensor::linspace(-3.0, 3.0, 12, (tch::Kind::Float, tch::Device::Cpu)).reshape([3, 4]);
    let y = Tensor::linspace(1.0, 2.0, 12, (tch::Kind::Float, tch::Device::Cpu)).reshape([3, 4]);
    check_against_pytorch(&file, vec![x, y]);
}

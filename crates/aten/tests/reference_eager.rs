//! Running PyTorch's reference forward graphs on their inputs reproduces PyTorch's outputs.

use std::collections::HashMap;
use std::path::PathBuf;

use graphbug_aten::accuracy::{same, SameOptions};
use graphbug_aten::reference::fp64_reference;
use graphbug_aten::Interpreter;
use graphbug_ir::{parse_graph, Device};
use tch::Tensor;

fn fixture(model: &str, file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(model)
        .join(file)
}

fn npz(path: PathBuf, prefix: &str) -> Vec<Tensor> {
    let mut named = Tensor::read_npz(&path).unwrap();
    named.sort_by_key(|(n, _)| n.trim_start_matches(prefix).parse::<usize>().unwrap());
    named.into_iter().map(|(_, t)| t).collect()
}

/// Within TorchDynamo's repro tolerance of the outputs PyTorch stored with the fixtures
/// (bit for bit on the machine that exported them; other CPUs' kernels differ in the last
/// bit, so pytorch.rs checks bit-exactness against PyTorch run on this machine).
#[test]
fn forward_graphs_match_pytorch_reference_outputs() {
    for model in ["mlp", "cnn", "gpt4"] {
        let graph =
            parse_graph(&std::fs::read_to_string(fixture(model, "forward.py")).unwrap()).unwrap();
        let inputs = npz(fixture(model, "inputs.npz"), "arg");
        let expected = npz(fixture(model, "outputs.npz"), "out");
        let fp64 = fp64_reference(&graph, &inputs, &Device::cpu(), &HashMap::new()).unwrap();
        let interp = Interpreter::new(&graph, &Device::cpu(), &HashMap::new()).unwrap();
        let out = interp
            .run(&inputs)
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        let out: Vec<Tensor> = out.into_iter().flatten().collect();
        let fp64: Vec<Tensor> = fp64.into_iter().flatten().collect();
        let report = same(&expected, &out, Some(&fp64), &SameOptions::repro());
        println!("{model}: {report}");
        assert!(report.passed(), "{model}: {report}");
        for o in &report.outputs {
            let d = o.max_abs_diff.unwrap();
            assert!(d < 1e-5, "{model}: output {} is {d:e} off", o.index);
        }
    }
}

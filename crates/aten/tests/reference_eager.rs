//! Running PyTorch's reference forward graphs on their inputs reproduces PyTorch's outputs.

use std::collections::HashMap;
use std::path::PathBuf;

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

#[test]
fn forward_graphs_match_pytorch_bit_for_bit() {
    for model in ["mlp", "cnn", "gpt4"] {
        let graph =
            parse_graph(&std::fs::read_to_string(fixture(model, "forward.py")).unwrap()).unwrap();
        let inputs = npz(fixture(model, "inputs.npz"), "arg");
        let expected = npz(fixture(model, "outputs.npz"), "out");
        let interp = Interpreter::new(&graph, &Device::cpu(), &HashMap::new()).unwrap();
        let out = interp
            .run(&inputs)
            .unwrap_or_else(|e| panic!("{model}: {e}"));
        assert_eq!(out.len(), expected.len());
        for (o, e) in out.iter().zip(&expected) {
            let o = o.as_ref().unwrap();
            assert_eq!(o.size(), e.size(), "{model}");
            let diff = (o - e).abs().max().double_value(&[]);
            println!("{model}: max abs diff {diff:e}");
            assert!(
                o.equal(e),
                "{model}: not bit-identical, max abs diff {diff:e}"
            );
        }
    }
}

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
        .join("../../../tests/fixtures")
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

/// The float64 reference widens floating dtype arguments, as TorchDynamo's
/// `cast_dtype_args_to_fp64` does, so `linalg_vector_norm(dtype=float32)` runs in float64
/// (libtorch refuses to narrow a float64 input to it); integer dtypes stay.
#[test]
fn the_float64_reference_widens_dtype_arguments() {
    use graphbug_aten::reference::fp64_graph;
    let g = parse_graph(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4, 6]"):
        linalg_vector_norm: "f32[4]" = torch.ops.aten.linalg_vector_norm.default(x, 2, [1], dtype = torch.float32)
        _to_copy: "i64[4]" = torch.ops.aten._to_copy.default(linalg_vector_norm, dtype = torch.int64)
        return (linalg_vector_norm, _to_copy)
"#,
    )
    .unwrap();
    let text = graphbug_ir::print_graph(&fp64_graph(&g));
    assert!(text.contains("dtype = torch.float64)"), "{text}");
    assert!(text.contains("dtype = torch.int64)"), "{text}");
    let x = tch::Tensor::randn([4, 6], (tch::Kind::Float, tch::Device::Cpu));
    let out = fp64_reference(&g, &[x], &Device::cpu(), &HashMap::new())
        .expect("the float64 reference runs");
    assert_eq!(out[0].as_ref().unwrap().kind(), tch::Kind::Double);
    assert_eq!(out[1].as_ref().unwrap().kind(), tch::Kind::Int64);
}

//! The registry and the `eager` backend.

use std::sync::Arc;

use graphbug_aten::io::{order_tensors, read_tensors};
use graphbug_backends::{
    list, lookup, register, Backend, CompileContext, CompiledFn, ExampleInput, Failure,
    RegistryError, Stage, Symptom,
};
use graphbug_ir::{parse_graph, Graph};
use tch::Tensor;

fn fixture(model: &str, file: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(model)
        .join(file)
}

fn indexed(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

#[test]
fn eager_reproduces_pytorch_outputs_on_reference_graphs() {
    let eager = lookup("eager").unwrap();
    for model in ["mlp", "cnn", "gpt4"] {
        let graph =
            parse_graph(&std::fs::read_to_string(fixture(model, "forward.py")).unwrap()).unwrap();
        let n_in = graph.placeholders().len();
        let inputs = order_tensors(
            read_tensors(&fixture(model, "inputs.npz")).unwrap(),
            &indexed("arg", n_in),
            "inputs",
        )
        .unwrap();
        let expected = order_tensors(
            read_tensors(&fixture(model, "outputs.npz")).unwrap(),
            &indexed("out", 1),
            "outputs",
        )
        .unwrap();
        let examples: Vec<ExampleInput> = inputs
            .iter()
            .map(|t| ExampleInput::new(graphbug_aten::dtype::meta_of(t).unwrap()))
            .collect();
        let mut f = eager
            .compile(&graph, &examples, &CompileContext::default())
            .unwrap();
        let out = f.run(&inputs).unwrap();
        assert!(out[0].as_ref().unwrap().equal(&expected[0]), "{model}");
    }
}

#[test]
fn eager_failures_are_classified_with_node_and_op() {
    let eager = lookup("eager").unwrap();
    let bad_op = parse_graph(
        "class G(torch.nn.Module):\n    def forward(self, x: \"f32[2]\"):\n        y = torch.ops.aten.nope.default(x)\n        return (y,)\n",
    )
    .unwrap();
    let Err(f) = eager.compile(&bad_op, &[], &CompileContext::default()) else {
        panic!("compiling an unknown op must fail")
    };
    assert_eq!((f.stage, f.symptom), (Stage::Compile, Symptom::Error));
    assert_eq!(
        (f.node.as_deref(), f.op.as_deref()),
        (Some("y"), Some("aten::nope.default"))
    );
    assert_eq!(f.backend, "eager");

    let mm = parse_graph(
        "class G(torch.nn.Module):\n    def forward(self, a: \"f32[2, 3]\"):\n        y = torch.ops.aten.mm.default(a, a)\n        return (y,)\n",
    )
    .unwrap();
    let mut run = eager.compile(&mm, &[], &CompileContext::default()).unwrap();
    let f = run
        .run(&[Tensor::zeros([2, 3], (tch::Kind::Float, tch::Device::Cpu))])
        .unwrap_err();
    assert_eq!((f.stage, f.symptom), (Stage::Runtime, Symptom::Error));
    assert_eq!(f.node.as_deref(), Some("y"));
    let shown = f.to_string();
    assert!(
        shown.starts_with("runtime error in backend `eager` at node `y` (aten::mm.default): "),
        "{shown}"
    );
}

struct Custom;

impl Backend for Custom {
    fn name(&self) -> &str {
        "test_custom_registry_backend"
    }
    fn description(&self) -> &str {
        "a test backend that refuses everything"
    }
    fn compile(
        &self,
        _: &Graph,
        _: &[ExampleInput],
        _: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        Err(Failure::new(
            self.name(),
            Stage::Compile,
            Symptom::Error,
            "refused",
        ))
    }
}

#[test]
fn register_lookup_list_duplicates_and_unknown_names() {
    register(Arc::new(Custom)).unwrap();
    assert_eq!(
        register(Arc::new(Custom)).unwrap_err(),
        RegistryError::Duplicate("test_custom_registry_backend".into())
    );
    assert_eq!(
        lookup("test_custom_registry_backend")
            .unwrap()
            .description(),
        "a test backend that refuses everything"
    );
    let names: Vec<String> = list().iter().map(|b| b.name().to_string()).collect();
    assert!(names.contains(&"eager".to_string()));
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "listing is sorted");
    let Err(err) = lookup("eagre") else {
        panic!("`eagre` must be unknown")
    };
    let RegistryError::Unknown { known, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(known, &names);
    assert!(err
        .to_string()
        .starts_with("unknown backend `eagre`; known backends: "));
}

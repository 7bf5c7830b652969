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
        .join("../../../tests/fixtures")
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
        // Bit for bit on the exporting machine; kernels of other CPUs differ in the last
        // bit (graphbug-aten's pytorch.rs checks bit-exactness against PyTorch run here).
        let diff = (out[0].as_ref().unwrap() - &expected[0])
            .abs()
            .max()
            .double_value(&[]);
        assert!(diff < 1e-5, "{model}: {diff:e} from PyTorch's outputs");
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
    let names: Vec<String> = list(true).into_iter().map(|b| b.name).collect();
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
    for n in &names {
        assert!(known.contains(n), "{n} missing from {known:?}");
    }
    assert!(
        known.iter().any(|k| k.starts_with("fault:<kind>")),
        "{known:?}"
    );
    assert!(err
        .to_string()
        .starts_with("unknown backend `eagre`; known backends: "));
}

#[test]
fn aliases_resolve_and_list_with_their_target() {
    use graphbug_backends::register_alias;
    register_alias("test_alias_of_eager", "eager").unwrap();
    assert_eq!(lookup("test_alias_of_eager").unwrap().name(), "eager");
    assert_eq!(
        register_alias("test_alias_of_eager", "eager").unwrap_err(),
        RegistryError::Duplicate("test_alias_of_eager".into())
    );
    assert!(matches!(
        register_alias("test_alias_2", "no_such"),
        Err(RegistryError::Unknown { .. })
    ));
    let info = list(false)
        .into_iter()
        .find(|i| i.name == "test_alias_of_eager")
        .unwrap();
    assert_eq!(info.alias_of.as_deref(), Some("eager"));
}

#[test]
fn listing_hides_debug_and_testing_backends_unless_asked() {
    let shown: Vec<String> = list(false).into_iter().map(|i| i.name).collect();
    let all: Vec<String> = list(true).into_iter().map(|i| i.name).collect();
    assert!(shown.contains(&"eager".into()));
    for hidden in [
        "eager_debug",
        "eager_noexcept",
        "relu_compile_error_TESTING_ONLY",
        "non_leaf_compile_error_TESTING_ONLY",
    ] {
        assert!(!shown.contains(&hidden.to_string()), "{hidden}");
        assert!(all.contains(&hidden.to_string()), "{hidden}");
    }
}

struct Named(String);

impl Backend for Named {
    fn name(&self) -> &str {
        &self.0
    }
    fn description(&self) -> &str {
        "a backend registered by the concurrency test"
    }
    fn compile(
        &self,
        _: &Graph,
        _: &[ExampleInput],
        _: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        Err(Failure::new(
            &self.0,
            Stage::Compile,
            Symptom::Error,
            "unused",
        ))
    }
}

#[test]
fn registration_and_lookup_are_thread_safe() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 200;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                for i in 0..PER_THREAD {
                    let name = format!("concurrent_{t}_{i}");
                    register(Arc::new(Named(name.clone()))).unwrap();
                    // Everyone races for one shared name: exactly one wins.
                    let _ = register(Arc::new(Named(format!("contested_{i}"))));
                    assert_eq!(lookup(&name).unwrap().name(), name);
                    assert!(lookup("eager").is_ok());
                    if i % 50 == 0 {
                        assert!(list(true).len() >= 7);
                    }
                }
            });
        }
    });
    let all = list(true);
    for t in 0..THREADS {
        for i in 0..PER_THREAD {
            let name = format!("concurrent_{t}_{i}");
            assert!(all.iter().any(|b| b.name == name), "{name} lost");
        }
    }
    for i in 0..PER_THREAD {
        assert_eq!(
            all.iter()
                .filter(|b| b.name == format!("contested_{i}"))
                .count(),
            1
        );
    }
}

//! The debugging and testing backends, and fault injection, on the reference graphs.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use graphbug_aten::dtype::meta_of;
use graphbug_aten::io::{order_tensors, read_tensors, write_tensors};
use graphbug_aten::Interpreter;
use graphbug_backends::explain::Explain;
use graphbug_backends::{lookup, Backend, CompileContext, ExampleInput, Failure, Stage, Symptom};
use graphbug_ir::{parse_graph, Device, Graph};
use tch::Tensor;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// A reference model: its forward graph, inputs and PyTorch's outputs on this machine.
struct Model {
    file: PathBuf,
    graph: Graph,
    inputs: Vec<Tensor>,
    outputs: Vec<Tensor>,
}

fn model(name: &str) -> Model {
    let dir = root().join("tests/fixtures").join(name);
    let file = dir.join("forward.py");
    let graph = parse_graph(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let args: Vec<String> = (0..graph.placeholders().len())
        .map(|i| format!("arg{i}"))
        .collect();
    let inputs = order_tensors(
        read_tensors(&dir.join("inputs.npz")).unwrap(),
        &args,
        "inputs",
    )
    .unwrap();
    let stored = order_tensors(
        read_tensors(&dir.join("outputs.npz")).unwrap(),
        &["out0".to_string()],
        "outputs",
    )
    .unwrap();
    // PyTorch's outputs on this machine: graphbug's eager interpreter matches PyTorch run
    // here bit for bit (graphbug-aten's pytorch.rs); the stored outputs come from the
    // exporting machine, whose kernels may differ in the last bit.
    let outputs: Vec<Tensor> = Interpreter::new(&graph, &Device::cpu(), &HashMap::new())
        .unwrap()
        .run(&inputs.iter().map(Tensor::copy).collect::<Vec<_>>())
        .unwrap()
        .into_iter()
        .flatten()
        .collect();
    let diff = (&outputs[0] - &stored[0]).abs().max().double_value(&[]);
    assert!(
        diff < 1e-5,
        "{name}: eager is {diff:e} from PyTorch's stored outputs"
    );
    Model {
        file,
        graph,
        inputs,
        outputs,
    }
}

fn examples(inputs: &[Tensor]) -> Vec<ExampleInput> {
    inputs
        .iter()
        .map(|t| ExampleInput::new(meta_of(t).unwrap()))
        .collect()
}

/// Compiles and runs `m` (on copies of its inputs) with the named backend.
fn run(backend: &str, m: &Model) -> Result<Vec<Option<Tensor>>, Failure> {
    let b = lookup(backend).unwrap();
    let inputs: Vec<Tensor> = m.inputs.iter().map(Tensor::copy).collect();
    b.compile(&m.graph, &examples(&inputs), &CompileContext::default())?
        .run(&inputs)
}

fn assert_pytorch_outputs(backend: &str, m: &Model) {
    let out = run(backend, m).unwrap_or_else(|f| panic!("{backend}: {f}"));
    assert!(
        out[0].as_ref().unwrap().equal(&m.outputs[0]),
        "{backend} on {}",
        m.file.display()
    );
}

#[test]
fn relu_compile_error_on_relu_graphs_only() {
    for name in ["mlp", "cnn"] {
        let f = run("relu_compile_error_TESTING_ONLY", &model(name)).unwrap_err();
        assert_eq!((f.stage, f.symptom), (Stage::Compile, Symptom::Error));
        assert_eq!(
            (f.node.as_deref(), f.message.as_str()),
            (Some("relu"), "ReluCompileError")
        );
    }
    assert_pytorch_outputs("relu_compile_error_TESTING_ONLY", &model("gpt4"));
}

#[test]
fn relu_runtime_error_on_relu_graphs_only() {
    for name in ["mlp", "cnn"] {
        let m = model(name);
        let b = lookup("relu_runtime_error_TESTING_ONLY").unwrap();
        let mut f = b
            .compile(&m.graph, &examples(&m.inputs), &CompileContext::default())
            .unwrap();
        let failure = f
            .run(&m.inputs.iter().map(Tensor::copy).collect::<Vec<_>>())
            .unwrap_err();
        assert_eq!(
            (failure.stage, failure.symptom),
            (Stage::Runtime, Symptom::Error)
        );
        assert_eq!(failure.node.as_deref(), Some("relu"));
        assert!(failure.message.ends_with("ReluRuntimeError"), "{failure}");
    }
    assert_pytorch_outputs("relu_runtime_error_TESTING_ONLY", &model("gpt4"));
}

/// PyTorch's relu_accuracy_error_TESTING_ONLY turns relu(x) into torch.add(x, 1): run that
/// rewritten graph in PyTorch itself and compare bit for bit.
#[test]
fn relu_accuracy_error_matches_pytorch_running_x_plus_1() {
    let python = root().join(".venv/bin/python");
    assert!(python.exists(), "run `cargo xtask setup`");
    for name in ["mlp", "cnn"] {
        let m = model(name);
        let dir = tempfile::tempdir().unwrap();
        let text = std::fs::read_to_string(&m.file).unwrap();
        let rewritten = relu_to_add_one(&text);
        let g = dir.path().join("g.py");
        std::fs::write(&g, rewritten).unwrap();
        let named: Vec<(String, Tensor)> = m
            .inputs
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("arg{i}"), t.copy()))
            .collect();
        let (inp, out) = (
            dir.path().join("in.safetensors"),
            dir.path().join("out.safetensors"),
        );
        write_tensors(&inp, &named).unwrap();
        let status = Command::new(&python)
            .arg(root().join("crates/aten/aten/python/torch_graph.py"))
            .arg(&g)
            .args([
                "--inputs",
                inp.to_str().unwrap(),
                "--outputs",
                out.to_str().unwrap(),
            ])
            .status()
            .unwrap();
        assert!(status.success());
        let want = order_tensors(
            read_tensors(&out).unwrap(),
            &["out0".to_string()],
            "outputs",
        )
        .unwrap();
        let got = run("relu_accuracy_error_TESTING_ONLY", &m).unwrap();
        assert!(got[0].as_ref().unwrap().equal(&want[0]), "{name}");
        assert!(
            !want[0].equal(&m.outputs[0]),
            "{name}: the fault must change the result"
        );
    }
    assert_pytorch_outputs("relu_accuracy_error_TESTING_ONLY", &model("gpt4"));
}

/// The graph text with each `torch.ops.aten.relu.default(x)` written as
/// `torch.ops.aten.add.Tensor(x, 1)`.
fn relu_to_add_one(text: &str) -> String {
    text.lines()
        .map(|l| match l.split_once("torch.ops.aten.relu.default(") {
            Some((head, rest)) => {
                let (arg, tail) = rest.split_once(')').unwrap();
                format!("{head}torch.ops.aten.add.Tensor({arg}, 1){tail}\n")
            }
            None => format!("{l}\n"),
        })
        .collect()
}

#[test]
fn non_leaf_compile_error_needs_a_non_leaf_input_and_a_call() {
    let m = model("mlp");
    let b = lookup("non_leaf_compile_error_TESTING_ONLY").unwrap();
    let mut ex = examples(&m.inputs);
    assert!(b.compile(&m.graph, &ex, &CompileContext::default()).is_ok());
    ex[8].is_leaf = false;
    let Err(f) = b.compile(&m.graph, &ex, &CompileContext::default()) else {
        panic!("a non-leaf input must fail")
    };
    assert_eq!(f.stage, Stage::Compile);
    assert!(f.message.starts_with("TestingOnlyCompileError"));
    let trivial = parse_graph(
        "class G(torch.nn.Module):\n    def forward(self, x: \"f32[2]\"):\n        return (x,)\n",
    )
    .unwrap();
    let one = vec![ExampleInput {
        is_leaf: false,
        ..ex[0].clone()
    }];
    assert!(b
        .compile(&trivial, &one, &CompileContext::default())
        .is_ok());
}

#[test]
fn eager_noexcept_wraps_runtime_errors_and_keeps_the_cause() {
    for name in ["mlp", "cnn", "gpt4"] {
        assert_pytorch_outputs("eager_noexcept", &model(name));
    }
    let f = run("fault:runtime@gelu+eager_noexcept", &model("mlp")).unwrap_err();
    assert!(
        f.message
            .starts_with("unexpected exception when running the compiled graph: "),
        "{f}"
    );
    assert!(
        f.message
            .ends_with("injected runtime fault at node `gelu` (aten::gelu.default)"),
        "{f}"
    );
    assert_eq!((f.stage, f.node.as_deref()), (Stage::Runtime, Some("gelu")));
}

#[test]
fn eager_debug_checks_shapes_mutation_and_aliasing() {
    // native_batch_norm updates its running statistics in training without declaring them
    // mutable, and _unsafe_view aliases undeclared: both are allowed, as in PyTorch's
    // SchemaCheckMode.
    for name in ["mlp", "cnn", "gpt4"] {
        assert_pytorch_outputs("eager_debug", &model(name));
    }
    let cases = [
        (
            "fault:alias@gelu+eager_debug",
            "gelu",
            "output 0 aliases argument `self`, but the schema does not declare it",
        ),
        (
            "fault:mutate@aten.t.default#2+eager_debug",
            "t_1",
            "argument `self` was mutated, but the schema does not declare it mutable",
        ),
        (
            "fault:shape@addmm#2+eager_debug",
            "addmm_1",
            "produced f32[512], but meta inference gives f32[8, 64]",
        ),
    ];
    for (backend, node, msg) in cases {
        let f = run(backend, &model("mlp")).unwrap_err();
        assert_eq!(f.node.as_deref(), Some(node), "{backend}");
        assert!(f.message.starts_with(msg), "{backend}: {f}");
    }
    // Declared in-place ops pass.
    let g = parse_graph("class G(torch.nn.Module):\n    def forward(self, x: \"f32[4]\"):\n        r: \"f32[4]\" = torch.ops.aten.relu_.default(x)\n        v: \"f32[2, 2]\" = torch.ops.aten.view.default(r, [2, 2])\n        return (v,)\n").unwrap();
    let x = Tensor::from_slice(&[-1.0f32, 2.0, -3.0, 4.0]);
    let b = lookup("eager_debug").unwrap();
    b.compile(
        &g,
        &examples(&[x.shallow_clone()]),
        &CompileContext::default(),
    )
    .unwrap()
    .run(&[x.copy()])
    .unwrap();
    // A placeholder whose annotation contradicts the tensor it receives is flagged, by
    // dtype and by shape, at compile time; and at run time too.
    for (given, what) in [
        (x.to_kind(tch::Kind::Double), "f64[4] (the dtype differs)"),
        (
            Tensor::zeros([2, 2], (tch::Kind::Float, tch::Device::Cpu)),
            "f32[2, 2] (the shape differs)",
        ),
    ] {
        let f = b
            .compile(
                &g,
                &examples(&[given.shallow_clone()]),
                &CompileContext::default(),
            )
            .err()
            .expect("a contradicting example input is refused");
        assert_eq!((f.stage, f.node.as_deref()), (Stage::Compile, Some("x")));
        assert!(
            f.message.ends_with(&format!(
                "placeholder 0 `x` is annotated f32[4] but its example input is {what}"
            )),
            "{f}"
        );
        let f = b
            .compile(&g, &[], &CompileContext::default())
            .unwrap()
            .run(&[given])
            .unwrap_err();
        assert_eq!(f.stage, Stage::Runtime);
        assert!(f.message.contains("input 0 (`x`) should be f32[4]"), "{f}");
    }
}

#[test]
fn every_fault_kind_at_a_chosen_op_and_occurrence_in_gpt4() {
    let m = model("gpt4");
    let f = run("fault:compile@gelu#2", &m).unwrap_err();
    assert_eq!(
        (f.stage, f.node.as_deref()),
        (Stage::Compile, Some("gelu_1"))
    );
    assert_eq!(f.backend, "fault:compile@gelu#2+eager");

    let f = run("fault:runtime@aten.native_layer_norm.default#3", &m).unwrap_err();
    assert_eq!(
        (f.stage, f.node.as_deref()),
        (Stage::Runtime, Some("native_layer_norm_2"))
    );
    assert_eq!(f.op.as_deref(), Some("aten::native_layer_norm.default"));
    assert!(f.message.ends_with(
        "injected runtime fault at node `native_layer_norm_2` (aten::native_layer_norm.default)"
    ));

    // The last view produces the output: an accuracy fault there shifts it exactly.
    let views = m
        .graph
        .nodes
        .iter()
        .filter(|n| n.op().is_some_and(|o| o.name == "view"))
        .count();
    let out = run(
        &format!("fault:accuracy=0.25@aten.view.default#{views}"),
        &m,
    )
    .unwrap();
    assert!(out[0].as_ref().unwrap().equal(&(&m.outputs[0] + 0.25)));
    // An earlier occurrence perturbs the result through the rest of the network.
    let out = run("fault:accuracy@gelu#1", &m).unwrap();
    let diff = (out[0].as_ref().unwrap() - &m.outputs[0])
        .abs()
        .max()
        .double_value(&[]);
    assert!(diff > 1e-2, "{diff}");

    let out = run("fault:nan@_softmax#4", &m).unwrap();
    assert!(out[0].as_ref().unwrap().isnan().any().int64_value(&[]) == 1);
    // Occurrences beyond the graph's leave it untouched.
    assert_pytorch_outputs("fault:runtime@gelu#99", &m);
}

/// Crash and hang faults run in a child process: this test binary, re-run on one test.
/// This test binary again, running only the ignored entry `test` with fault `spec`.
fn child(test: &str, spec: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("GRAPHBUG_TEST_CHILD_SPEC", spec)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Not a test: the child process of the crash and hang tests below, which judge how it
/// ends.
#[test]
#[ignore = "the child of crash_fault_aborts_the_process and hang_fault_never_returns"]
fn child_runs_gpt4_with_a_fault() {
    let spec = std::env::var("GRAPHBUG_TEST_CHILD_SPEC")
        .expect("started by the crash and hang tests, with GRAPHBUG_TEST_CHILD_SPEC");
    let _ = run(&spec, &model("gpt4"));
    panic!("`{spec}` returned: the run should have aborted or hung");
}

#[test]
fn crash_fault_aborts_the_process() {
    use std::os::unix::process::ExitStatusExt;
    let out = child(
        "child_runs_gpt4_with_a_fault",
        "fault:crash@aten.bmm.default#5",
    )
    .wait_with_output()
    .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(6),
        "SIGABRT expected, got {:?}",
        out.status
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "injected crash fault at node `bmm_4` (aten::bmm.default): aborting the process"
        ),
        "{stderr}"
    );
}

#[test]
fn hang_fault_never_returns() {
    use std::io::BufRead;
    let mut c = child("child_runs_gpt4_with_a_fault", "fault:hang@gelu#1");
    // The fault says when it starts to hang (a generous bound for a loaded machine).
    let stderr = c.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut said = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(600)) {
        let hanging = line.contains("hanging forever");
        said.push(line);
        if hanging {
            break;
        }
    }
    assert!(
        said.last().is_some_and(|l| l
            .contains("injected hang fault at node `gelu` (aten::gelu.default): hanging forever")),
        "{said:?}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        c.try_wait().unwrap().is_none(),
        "the hung run must still be running"
    );
    c.kill().unwrap();
    c.wait().unwrap();
}

#[test]
fn explain_counts_graphs_ops_and_histogram() {
    let m = model("gpt4");
    let e = Explain::new(lookup("eager").unwrap());
    for _ in 0..2 {
        e.compile(&m.graph, &examples(&m.inputs), &CompileContext::default())
            .unwrap();
    }
    let out = e.output();
    assert_eq!((out.graph_count(), out.op_count()), (2, 2 * 259));
    let h = out.histogram();
    assert_eq!(
        h["aten.view.default"],
        2 * m
            .graph
            .nodes
            .iter()
            .filter(|n| n.op().is_some_and(|o| o.name == "view"))
            .count()
    );
    let getitems = m
        .graph
        .nodes
        .iter()
        .filter(|n| matches!(n.kind, graphbug_ir::NodeKind::GetItem { .. }))
        .count();
    assert_eq!(h["operator.getitem"], 2 * getitems);
    let text = out.to_string();
    assert!(text.starts_with("Graph Count: 2\nGraph Break Count: 1\nOp Count: 518\nOps per Graph:\n  Ops 1:\n    aten.embedding.default\n"), "{text}");
    // Through the registry, by name.
    assert_pytorch_outputs("explain:eager", &m);
    let _: Arc<dyn Backend> = lookup("explain:relu_compile_error_TESTING_ONLY").unwrap();
}

#[test]
fn fault_and_explain_names_report_bad_specs() {
    let err = lookup("fault:runtime@relu+no_such_backend")
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("inner backend: unknown backend `no_such_backend`"),
        "{err}"
    );
    let err = lookup("fault:explode@relu").err().unwrap().to_string();
    assert!(
        err.contains("unknown fault kind `explode`") && err.contains("<kind>"),
        "{err}"
    );
    let err = lookup("explain:nope").err().unwrap().to_string();
    assert!(err.contains("unknown backend `nope`"), "{err}");
}

#[test]
fn a_slow_backend_compiles_with_its_inner_one() {
    let m = model("mlp");
    assert_pytorch_outputs("slow:1", &m);
    // The inner backend's failures are its own.
    let err = run("slow:1+relu_compile_error_TESTING_ONLY", &m).unwrap_err();
    assert_eq!(err.stage, Stage::Compile, "{err}");
    let err = lookup("slow:soon").err().unwrap().to_string();
    assert!(
        err.contains("`soon` is not a number of milliseconds: slow:<ms>[+<inner>]"),
        "{err}"
    );
    let err = lookup("slow:5+nope").err().unwrap().to_string();
    assert!(
        err.contains("inner backend: unknown backend `nope`"),
        "{err}"
    );
}

/// A fault spec that names no node of the graph is an error saying what the graph has,
/// whether it comes from a backend name, the environment or an AOT inner compiler.
#[test]
fn fault_specs_naming_no_node_are_refused_with_the_closest_ops() {
    let m = model("mlp");
    let ex = examples(&m.inputs);
    let check = |name: &str| lookup(name).unwrap().validate(&m.graph, &ex);
    assert!(check("fault:runtime@relu").is_ok());
    assert!(check("fault:runtime@aten.t.default#3").is_ok());
    let e = check("fault:runtime@aten.relu.default#999").unwrap_err();
    assert_eq!(
        e,
        "`fault:runtime@aten.relu.default#999` names no node: the graph has 1 node calling `aten.relu.default` (`relu`), so #999 is out of range (#1 to #1)"
    );
    let e = check("fault:runtime@layer_norm").unwrap_err();
    assert!(
        e.contains("no node of the graph calls `layer_norm`, and none is named so; the closest ops in the graph: aten.native_layer_norm.default (`native_layer_norm`);")
            && e.contains("the closest node names: `native_layer_norm`"),
        "{e}"
    );
    // Inner backends are checked too.
    let e = check("fault:runtime@relu+fault:nan@softmax").unwrap_err();
    assert!(e.starts_with("`fault:nan@softmax` names no node"), "{e}");
    let e = check("explain:fault:crash@hardtanh").unwrap_err();
    assert!(e.contains("`fault:crash@hardtanh` names no node"), "{e}");
    // After AOT, each inner compiler is checked against the graph it gets.
    let mut grads = ex.clone();
    for g in &mut grads {
        g.requires_grad = true;
    }
    let aot = |name: &str| lookup(name).unwrap().validate(&m.graph, &grads);
    assert!(aot("aot_eager:fw=fault:runtime@relu").is_ok());
    assert!(aot("aot_eager:bw=fault:runtime@threshold_backward").is_ok());
    let e = aot("aot_eager:bw=fault:runtime@relu").unwrap_err();
    assert!(
        e.starts_with("in the backward graph of `aot_eager:bw=fault:runtime@relu`: `fault:runtime@relu` names no node"),
        "{e}"
    );
}

/// Every wrapper around an AOT pipeline forwards what it does not change: the pipeline
/// still trains (a repro of its graph is a training step, and `GRAPHBUG_INJECT_FAULT` goes
/// to its inner compilers), its passes stay bisectable, and its inner compilers are still
/// checked against the graphs they get.
#[test]
fn every_wrapper_around_aot_eager_forwards_what_it_does_not_change() {
    let m = model("mlp");
    let mut grads = examples(&m.inputs);
    for g in &mut grads {
        g.requires_grad = true;
    }
    for pipeline in [
        "aot_eager",
        "aot_eager:partitioner=min-cut,decompose=inductor",
    ] {
        let own = lookup(pipeline).unwrap();
        assert!(own.delegates_faults(), "{pipeline}");
        assert!(!own.passes().is_empty(), "{pipeline} has no passes");
        for wrapper in [
            format!("explain:{pipeline}"),
            format!("slow:1+{pipeline}"),
            format!("limit:{}=1+{pipeline}", own.passes()[0]),
            format!("fault:runtime@relu+{pipeline}"),
            format!("explain:slow:1+fault:nan@relu+{pipeline}"),
        ] {
            let b = lookup(&wrapper).unwrap();
            assert!(b.delegates_faults(), "{wrapper} lost the training step");
            let passes = b.passes();
            assert!(
                own.passes().iter().all(|p| passes.contains(p)),
                "{wrapper} lost passes: {passes:?} against {:?}",
                own.passes()
            );
            assert!(b.validate(&m.graph, &grads).is_ok(), "{wrapper}");
        }
    }
    // Without a pipeline inside, a wrapper does not train.
    for plain in [
        "explain:eager",
        "slow:1",
        "fault:runtime@relu",
        "limit:fault=1+fault:runtime@relu",
    ] {
        assert!(!lookup(plain).unwrap().delegates_faults(), "{plain}");
    }
    // The inner compilers' checks run through every wrapper.
    for wrapper in ["explain:", "slow:1+", "fault:runtime@relu+"] {
        let name = format!("{wrapper}aot_eager:bw=fault:runtime@relu");
        let e = lookup(&name)
            .unwrap()
            .validate(&m.graph, &grads)
            .unwrap_err();
        assert!(
            e.contains("in the backward graph of `aot_eager:bw=fault:runtime@relu`"),
            "{name}: {e}"
        );
    }
}

#[test]
fn deeply_nested_backend_names_are_refused_quickly() {
    let name = format!("{}eager", "fault:runtime@relu+".repeat(3000));
    let start = std::time::Instant::now();
    let e = match lookup(&name) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("3000 nested backends were accepted"),
    };
    assert!(
        e.contains("it nests 3000 parameterised backends; at most 16 may nest"),
        "{e}"
    );
    assert!(
        e.len() < 400,
        "the error repeats the whole name: {} bytes",
        e.len()
    );
    // Refused at once, not after building 3000 backends (a bound any machine meets).
    assert!(start.elapsed() < Duration::from_secs(60));
    let ok = format!("{}eager", "fault:runtime@relu+".repeat(16));
    assert!(lookup(&ok).is_ok());
}

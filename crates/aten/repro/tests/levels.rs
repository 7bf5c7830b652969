//! Repro levels, repro directories and the actions on them, through the library API.

use std::collections::HashMap;
use std::path::Path;

use graphbug_aten::io::{order_tensors, read_tensors};
use graphbug_backends::{Stage, Symptom};
use graphbug_ir::{parse_graph, Graph};
use graphbug_repro::actions::{analyze, reproduce, ActionOptions, Outcome};
use graphbug_repro::case::read_repro_dir;
use graphbug_repro::compile::{compile, ReproOptions};
use graphbug_repro::manifest::ReproAfter;
use tch::Tensor;

fn mlp() -> (Graph, Vec<Tensor>) {
    let dir = format!("{}/../../../tests/fixtures/mlp", env!("CARGO_MANIFEST_DIR"));
    let graph =
        parse_graph(&std::fs::read_to_string(format!("{dir}/forward.py")).unwrap()).unwrap();
    let names: Vec<String> = (0..9).map(|i| format!("arg{i}")).collect();
    let inputs = order_tensors(
        read_tensors(Path::new(&format!("{dir}/inputs.npz"))).unwrap(),
        &names,
        "inputs",
    )
    .unwrap();
    (graph, inputs)
}

fn options(dir: &Path, level: u8) -> ReproOptions {
    ReproOptions {
        after: ReproAfter::Dynamo,
        level,
        dir: dir.join("repro"),
        random_inputs: None,
        device: graphbug_ir::Device::cpu(),
        plugins: Vec::new(),
        requires_grad: Vec::new(),
        accuracy: Default::default(),
        written: None,
    }
}

fn run(backend: &str, level: u8, dir: &Path) -> Result<(), graphbug_repro::compile::ReproFailure> {
    let (graph, inputs) = mlp();
    let mut c = compile(
        &graph,
        backend,
        &inputs,
        &HashMap::new(),
        options(dir, level),
    )?;
    c.run(&inputs).map(|_| ())
}

#[test]
fn levels_decide_what_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    // Level 0: the failure, nothing on disk.
    let f = run("relu_runtime_error_TESTING_ONLY", 0, tmp.path()).unwrap_err();
    assert!(f.repro.is_none() && !tmp.path().join("repro").exists());
    // Level 1: a repro, no launcher.
    let f = run("relu_runtime_error_TESTING_ONLY", 1, tmp.path()).unwrap_err();
    let dir = f.repro.unwrap();
    for file in [
        "graph.py",
        "inputs.safetensors",
        "manifest.json",
        "repro.rs",
        "Cargo.toml",
        "repro.py",
        "README.md",
    ] {
        assert!(dir.join(file).exists(), "{file}");
    }
    assert!(!dir.join("minifier_launcher.sh").exists());
    // Level 2: the launcher too; compile errors are caught at compile time.
    let f = run("relu_compile_error_TESTING_ONLY", 2, tmp.path()).unwrap_err();
    assert_eq!(f.failure.stage, Stage::Compile);
    let case = read_repro_dir(&f.repro.unwrap()).unwrap();
    assert_eq!(case.manifest.level, 2);
    assert_eq!(
        case.manifest.failure.as_ref().unwrap().message,
        "ReluCompileError"
    );
    assert!(tmp.path().join("repro/minifier_launcher.sh").exists());
    // Level 3 writes before compiling: a passing backend still leaves a launcher.
    let tmp3 = tempfile::tempdir().unwrap();
    run("eager", 3, tmp3.path()).unwrap();
    let case = read_repro_dir(&tmp3.path().join("repro")).unwrap();
    assert!(case.manifest.failure.is_none());
    // Level 4: wrong results are failures; below it they pass unnoticed.
    run(
        "relu_accuracy_error_TESTING_ONLY",
        2,
        tempfile::tempdir().unwrap().path(),
    )
    .unwrap();
    let f = run("relu_accuracy_error_TESTING_ONLY", 4, tmp.path()).unwrap_err();
    assert_eq!(
        (f.failure.stage, f.failure.symptom),
        (Stage::Accuracy, Symptom::WrongResult)
    );
    // Level 4 on a correct backend passes.
    run("eager", 4, tempfile::tempdir().unwrap().path()).unwrap();
}

#[test]
fn environment_sets_level_and_after_aot_needs_an_aot_pipeline() {
    // Only this test touches these variables.
    std::env::set_var("GRAPHBUG_REPRO_LEVEL", "3");
    let o = ReproOptions::from_env("x".into()).unwrap();
    assert_eq!(o.level, 3);
    std::env::set_var("GRAPHBUG_REPRO_LEVEL", "7");
    assert!(ReproOptions::from_env("x".into())
        .unwrap_err()
        .to_string()
        .contains("GRAPHBUG_REPRO_LEVEL=7"));
    std::env::remove_var("GRAPHBUG_REPRO_LEVEL");
    std::env::set_var("GRAPHBUG_REPRO_AFTER", "aot");
    let o = ReproOptions::from_env("x".into()).unwrap();
    std::env::remove_var("GRAPHBUG_REPRO_AFTER");
    assert_eq!(o.after, ReproAfter::Aot);
    let (graph, inputs) = mlp();
    let Err(f) = compile(&graph, "eager", &inputs, &HashMap::new(), o) else {
        panic!("after=aot must be refused for a backend without inner compilers")
    };
    assert!(
        f.failure.message.contains("GRAPHBUG_REPRO_AFTER=aot"),
        "{f}"
    );
}

#[test]
fn run_reproduces_and_says_what_differs_otherwise() {
    let tmp = tempfile::tempdir().unwrap();
    let f = run("relu_runtime_error_TESTING_ONLY", 2, tmp.path()).unwrap_err();
    let dir = f.repro.unwrap();
    let mut case = read_repro_dir(&dir).unwrap();
    let out = reproduce(&mut case, &ActionOptions::default()).unwrap();
    assert!(
        matches!(out, Outcome::Reproduced(ref f) if f.message.ends_with("ReluRuntimeError")),
        "{out}"
    );
    // With a working backend the failure is gone, and the report says so.
    let mut case = read_repro_dir(&dir).unwrap();
    let opts = ActionOptions {
        backend: Some("eager".into()),
        ..ActionOptions::default()
    };
    let out = reproduce(&mut case, &opts).unwrap();
    assert_eq!(
        out.to_string(),
        "does not reproduce: recorded runtime error: failed on inputs []: ReluRuntimeError; this run: the backend compiled and ran, and its outputs match eager"
    );
}

#[test]
fn analyze_names_the_first_diverging_node() {
    let tmp = tempfile::tempdir().unwrap();
    let f = run("relu_accuracy_error_TESTING_ONLY", 4, tmp.path()).unwrap_err();
    let mut case = read_repro_dir(&f.repro.unwrap()).unwrap();
    let a = analyze(&mut case, &ActionOptions::default()).unwrap();
    let (node, op, _) = a.first_divergence.clone().unwrap();
    assert_eq!((node.as_str(), op.as_str()), ("relu", "aten::relu.default"));
    assert!(a.nondeterminism.is_none());
    assert!(a.compared >= 8, "{}", a.compared);
    assert!(a.to_string().contains("the backend is deterministic"));
}

#[test]
fn broken_repro_directories_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let f = run("relu_runtime_error_TESTING_ONLY", 1, tmp.path()).unwrap_err();
    let dir = std::fs::canonicalize(f.repro.unwrap()).unwrap();
    let err = |d: &Path| {
        read_repro_dir(d)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(err(&tmp.path().join("nope")).contains("not a directory"));
    let copy = |name: &str| {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
            }
        }
        d
    };
    let d = copy("no_manifest");
    std::fs::remove_file(d.join("manifest.json")).unwrap();
    assert!(
        err(&d).contains("manifest.json") && err(&d).contains("graphbug repro directory"),
        "{}",
        err(&d)
    );
    let d = copy("bad_manifest");
    std::fs::write(d.join("manifest.json"), "{").unwrap();
    assert!(err(&d).contains("corrupt manifest"), "{}", err(&d));
    let d = copy("bad_graph");
    let g = std::fs::read_to_string(d.join("graph.py"))
        .unwrap()
        .replace(
            "torch.ops.aten.gelu.default(",
            "torch.ops.aten.gelu.default((",
        );
    std::fs::write(d.join("graph.py"), g).unwrap();
    assert!(
        err(&d).contains("graph.py: ") && err(&d).contains("expected"),
        "{}",
        err(&d)
    );
    let d = copy("no_inputs");
    std::fs::remove_file(d.join("inputs.safetensors")).unwrap();
    assert!(err(&d).contains("inputs.safetensors"), "{}", err(&d));
    let d = copy("gone_backend");
    let m = std::fs::read_to_string(d.join("manifest.json"))
        .unwrap()
        .replace("relu_runtime_error_TESTING_ONLY", "retired_backend");
    std::fs::write(d.join("manifest.json"), m).unwrap();
    let mut case = read_repro_dir(&d).unwrap();
    let e = reproduce(&mut case, &ActionOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown backend `retired_backend`"), "{e}");
}

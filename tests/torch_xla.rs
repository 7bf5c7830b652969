//! PyTorch/XLA from the trainer script (`graphbug_capture.torch_xla.run_hlo_minifier`, the
//! RFC's entry): `tests/fixtures/torch_xla/train_step.py` trains a small transformer with
//! Adam on PyTorch/XLA's CPU device (`PJRT_DEVICE=CPU`), in the environment set-up makes for
//! it (`.venv-torch-xla`: PyTorch/XLA pins a torch other than libtorch's). A testing fault
//! pinned to one instruction of one module of the step is found, that module alone is
//! minified to the instruction, and its `repro.py` fails the same way with PyTorch/XLA alone
//! and with JAX alone (and passes on the clean program with both).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{fixture, graphbug, output_within, said, text, Run, LIMIT};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// PyTorch/XLA's environment (set-up makes it for the tests).
fn torch_xla_python() -> PathBuf {
    let python = root().join(".venv-torch-xla/bin/python");
    assert!(
        python.exists(),
        "{} is missing: `cargo xtask setup --for test` makes PyTorch/XLA's environment",
        python.display()
    );
    python
}

/// The trainer script with `args`, on PyTorch/XLA's CPU, with this graphbug.
fn trainer(args: &[&str], tmp: &Path) -> Output {
    let mut cmd = Command::new(torch_xla_python());
    cmd.arg(fixture("torch_xla/train_step.py"))
        .args(args)
        .env("PJRT_DEVICE", "CPU")
        .env("GRAPHBUG", env!("CARGO_BIN_EXE_graphbug"))
        .env("TMPDIR", tmp)
        .env("PYTHONPATH", root().join("python"))
        .current_dir(tmp);
    output_within(cmd, LIMIT)
}

/// The JSON result the trainer script prints last.
fn result(o: &Output) -> serde_json::Value {
    let out = text(&o.stdout);
    let last = out.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {}", said(o)))
}

/// The `dot` instructions of each captured module, by module.
fn dots(capture: &Path) -> Vec<(String, Vec<String>)> {
    let mut modules: Vec<PathBuf> = std::fs::read_dir(capture)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| s(p).ends_with(".before_optimizations.hlo.pb"))
        .collect();
    modules.sort();
    modules
        .iter()
        .map(|p| {
            let o = graphbug().args(["fmt", &s(p)]).run();
            assert!(o.status.success(), "{}", said(&o));
            let names = text(&o.stdout)
                .lines()
                .filter_map(|l| {
                    let name = l.trim().trim_start_matches("ROOT ").split(' ').next()?;
                    name.starts_with("dot.").then(|| name.to_string())
                })
                .collect();
            let file = p.file_name().unwrap().to_string_lossy();
            (file.split(".before").next().unwrap().to_string(), names)
        })
        .collect()
}

/// The first `dot` of `module` that no other module has an instruction of that name of.
fn own_dot(modules: &[(String, Vec<String>)], module: &str) -> String {
    let (_, mine) = modules.iter().find(|(m, _)| m.ends_with(module)).unwrap();
    mine.iter()
        .find(|d| {
            modules
                .iter()
                .all(|(m, names)| m.ends_with(module) || !names.contains(d))
        })
        .unwrap_or_else(|| panic!("no dot of {module} alone: {modules:?}"))
        .clone()
}

/// `repro.py` of `dir` with `python` (and `args`): (exit status, what it said).
fn repro_py(python: &Path, dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = Command::new(python);
    cmd.arg(dir.join("repro.py")).args(args);
    let o = output_within(cmd, LIMIT);
    (o.status.code(), said(&o))
}

#[test]
fn a_training_step_s_failing_module_is_found_minified_and_reproduced_by_pytorch_xla_and_jax() {
    let tmp = tempfile::tempdir().unwrap();
    // The step's modules as run_hlo_minifier captures them: forward, backward, Adam's update.
    let o = trainer(&["first", "--capture-only"], tmp.path());
    assert!(o.status.success(), "{}", said(&o));
    let modules = dots(&tmp.path().join("first/capture"));
    assert_eq!(
        modules.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(),
        [
            "module_0000.forward1",
            "module_0001.backward1",
            "module_0002.optimizer1"
        ],
        "{modules:?}"
    );
    // A fault pinned to a matmul only the backward module has.
    let dot = own_dot(&modules, "backward1");
    let backend = format!("fault:accuracy@node:{dot}+pjrt:cpu");
    let o = trainer(&["out", "--backend", &backend], tmp.path());
    assert!(o.status.success(), "{}", said(&o));
    let r = result(&o);
    assert_eq!(r["status"], 0, "{r}");
    let rows = r["modules"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{r}");
    for row in rows {
        // Each module ran with the arguments it ran with in the step.
        assert!(
            row["inputs"].as_str().unwrap().starts_with("recorded: "),
            "{row}"
        );
        if row["module"] == "module_0001.backward1" {
            assert_eq!(row["result"], "fails", "{row}");
            assert!(
                row["failure"].as_str().unwrap().starts_with("accuracy"),
                "{row}"
            );
            assert_eq!(row["minified"]["end"], 1, "{row}");
        } else {
            assert_eq!(row["result"], "passes", "{row}");
            assert!(
                row["unfaulted"].as_str().unwrap().contains("names no node"),
                "{row}"
            );
        }
    }
    let failing = r["failing"].as_array().unwrap();
    assert_eq!(failing.len(), 1, "{r}");
    let dir = PathBuf::from(failing[0].as_str().unwrap());
    // The split of the time: the step, then graphbug's checks and the minifier's queries.
    let times = &r["times"];
    for key in ["step", "write", "graphbug", "check", "minify"] {
        assert!(times[key].as_f64().unwrap() >= 0.0, "{r}");
    }
    assert!(times["minify"].as_f64().unwrap() > 0.0, "{r}");
    assert!(
        r["queries"]["module_0001.backward1"].as_u64().unwrap() > 0,
        "{r}"
    );
    assert!(
        said(&o).contains("minifying") && said(&o).contains("queries"),
        "{}",
        said(&o)
    );

    // The minified program is the faulted matmul alone, an HLO proto as captured.
    let minified = dir.join("minified");
    let o = graphbug()
        .args(["fmt", &s(&minified.join("program.hlo.pb"))])
        .run();
    assert!(text(&o.stdout).contains(&dot), "{}", said(&o));
    // Its repro.py fails the same way with PyTorch/XLA alone and with JAX alone, and
    // passes on the clean program with both; so does the module's whole directory.
    let jax = root().join(".venv/bin/python");
    for python in [torch_xla_python(), jax] {
        for at in [&minified, &dir] {
            let (code, out) = repro_py(&python, at, &[]);
            assert_eq!(code, Some(1), "{}: {out}", python.display());
            assert!(out.contains("DIFFERS: out0"), "{out}");
            let (code, out) = repro_py(&python, at, &["--clean"]);
            assert_eq!(code, Some(0), "{}: {out}", python.display());
            assert!(out.contains("ok: every output matches"), "{out}");
        }
    }
    let (_, out) = repro_py(&torch_xla_python(), &minified, &[]);
    assert!(out.contains("running on PyTorch/XLA"), "{out}");
}

#[test]
fn a_torch_compiled_model_s_graphs_are_modules_and_a_compile_failure_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    // Evaluation through torch.compile(backend="graphbug_openxla") (register_backend): the
    // TorchDynamo graph is a module of its own.
    let o = trainer(
        &["first", "--eval", "--compile", "--capture-only"],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", said(&o));
    let modules = dots(&tmp.path().join("first/capture"));
    assert_eq!(modules.len(), 1, "{modules:?}");
    let (module, names) = &modules[0];
    assert_eq!(module, "module_0000.dynamo_forward1", "{modules:?}");
    let backend = format!("fault:compile@node:{}+pjrt:cpu", names[0]);
    let o = trainer(
        &[
            "out",
            "--eval",
            "--compile",
            "--error-type",
            "compilation",
            "--backend",
            &backend,
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", said(&o));
    let r = result(&o);
    let row = &r["modules"][0];
    assert_eq!(row["result"], "fails", "{r}");
    assert!(
        row["failure"].as_str().unwrap().starts_with("compile"),
        "{r}"
    );
    let minified = PathBuf::from(r["failing"][0].as_str().unwrap()).join("minified");
    let (code, out) = repro_py(&torch_xla_python(), &minified, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("fails to compile"), "{out}");
    let (code, out) = repro_py(&root().join(".venv/bin/python"), &minified, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("fails to compile"), "{out}");
}

#[test]
fn bad_requests_name_the_culprit() {
    let tmp = tempfile::tempdir().unwrap();
    let o = trainer(&["out", "--error-type", "speed"], tmp.path());
    assert!(!o.status.success());
    assert!(
        said(&o).contains("error_type='speed'; expected 'precision' or 'compilation'"),
        "{}",
        said(&o)
    );
}

/// The conformance suite's PyTorch/XLA sources, CI subset (`cargo xtask conformance --subset
/// ci --sources torch_xla,xla-dump`, PyTorch/XLA's part): an MLP's evaluation and training
/// step as PyTorch/XLA compiles them pass every XLA stage (its HLO text and StableHLO
/// printed as written, its proto as XLA prints it, its counts, runs against PyTorch/XLA's
/// outputs, a fault minified to its instruction), and the step's dumps (as
/// `graphbug_capture` writes it, and as XLA dumps it) pass `graphbug repro DUMP` and its
/// fault. The stages' wrong answers are `tests/conformance.rs`'s.
#[test]
fn the_conformance_ci_subset_of_pytorch_xla_passes_every_stage() {
    use xtask::conformance::{self, Outcome};
    let tmp = tempfile::tempdir().unwrap();
    let cases = tmp.path().join("cases");
    let script = root().join("xtask/conformance/gen_torch_xla_cases.py");
    let mut gen = Command::new(torch_xla_python());
    gen.arg(&script)
        .args(["--subset", "ci", "-j", "1", "--out"])
        .arg(&cases)
        .env("PJRT_DEVICE", "CPU")
        .env("PYTHONPATH", root().join("python"));
    let o = output_within(gen, LIMIT);
    assert!(o.status.success(), "{}", said(&o));
    let mut print = Command::new(root().join(".venv/bin/python"));
    print.arg(&script).arg("--print-protos").arg(&cases);
    let o = output_within(print, LIMIT);
    assert!(o.status.success(), "{}", said(&o));
    let opts = conformance::Options {
        graphbug: PathBuf::from(env!("CARGO_BIN_EXE_graphbug")),
        cases: cases.clone(),
        work: tmp.path().join("work"),
        jobs: 1,
        filter: None,
        timeout: std::time::Duration::from_secs(300),
        progress: false,
        env: Vec::new(),
        stage_cases: Vec::new(),
    };
    let report = conformance::run(&opts).expect("the runner runs");
    println!("{}", report.table());
    let ids: Vec<&str> = report.results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "torch_xla/mlp/eval/eval1",
            "torch_xla/mlp/train/backward1",
            "torch_xla/mlp/train/forward1",
            "torch_xla/mlp/train/optimizer1",
            "xla-dump/torch_xla/mlp/capture",
            "xla-dump/torch_xla/mlp/xla_flags",
        ]
    );
    for r in &report.results {
        assert!(
            r.stages.iter().all(|(_, o)| o == &Outcome::Passed),
            "{}: {:?}",
            r.id,
            r.stages
        );
    }
}

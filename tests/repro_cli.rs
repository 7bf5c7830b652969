//! The main job end to end, as PyTorch's test_minifier_common.py does it: a backend fails
//! on a graph with a relu, the launcher is dumped at the right level, minifying gives the
//! single relu, and the minified repro reproduces with `repro DIR run` and its own
//! `cargo run`; repro.py agrees with graphbug's eager outputs in PyTorch.

mod common;

use common::Run;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs of the graphbug binary share it; a minifier launcher (`cargo xtask repro`, which
/// may rebuild the binary with the graphbug package's own features) has it alone.
static BINARY: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn graphbug_in(cwd: &Path, args: &[&str]) -> Output {
    let _shared = BINARY.read().unwrap_or_else(|e| e.into_inner());
    common::graphbug().args(args).current_dir(cwd).run()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn call_nodes(graph_file: &Path) -> Vec<String> {
    let g = graphbug::ir::parse_graph(&std::fs::read_to_string(graph_file).unwrap()).unwrap();
    g.nodes
        .iter()
        .filter(|n| n.is_call_function())
        .map(|n| n.name.to_string())
        .collect()
}

/// `repro DIR run` reproduces the failure: exit 1, `reproduced: ...`.
fn assert_reproduces(cwd: &Path, dir: &Path, label: &str) {
    let run = graphbug_in(cwd, &["repro", dir.to_str().unwrap(), "run"]);
    assert_eq!(
        run.status.code(),
        Some(1),
        "{label}: {:?}: {}{}",
        run.status,
        text(&run.stdout),
        text(&run.stderr)
    );
    assert!(
        text(&run.stdout).starts_with("reproduced: "),
        "{label}: {}{}",
        text(&run.stdout),
        text(&run.stderr)
    );
}

#[test]
fn relu_failures_dump_minify_and_reproduce() {
    let tmp = tempfile::tempdir().unwrap();
    let mlp = root().join("tests/fixtures/mlp/forward.py");
    let inputs = root().join("tests/fixtures/mlp/inputs.npz");
    let cases = [
        ("relu_compile_error_TESTING_ONLY", "2", "ReluCompileError"),
        ("relu_runtime_error_TESTING_ONLY", "2", "ReluRuntimeError"),
        ("relu_accuracy_error_TESTING_ONLY", "4", "accuracy"),
    ];
    for (i, (backend, level, what)) in cases.iter().enumerate() {
        let out_dir = tmp.path().join(format!("case{i}"));
        let out = graphbug_in(
            tmp.path(),
            &[
                "repro",
                mlp.to_str().unwrap(),
                "--backend",
                backend,
                "--level",
                level,
                "--inputs",
                inputs.to_str().unwrap(),
                "--out",
                out_dir.to_str().unwrap(),
            ],
        );
        assert!(
            out.status.success(),
            "{backend}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        assert!(
            text(&out.stdout).contains("detected: ") && text(&out.stdout).contains(what),
            "{}",
            text(&out.stdout)
        );
        // The launcher was dumped; running it minifies again, into out_dir/minified.
        let launcher = out_dir.join("minifier_launcher.sh");
        assert!(launcher.exists(), "{backend}: no launcher");
        let _ = std::fs::remove_dir_all(out_dir.join("minified"));
        let _ = std::fs::remove_file(out_dir.join("minified"));
        let ran = {
            let _alone = BINARY.write().unwrap_or_else(|e| e.into_inner());
            Command::new("sh").arg(&launcher).output().unwrap()
        };
        assert!(
            ran.status.success(),
            "{backend} launcher: {}{}",
            text(&ran.stdout),
            text(&ran.stderr)
        );
        let minified = out_dir.join("minified");
        assert_eq!(
            call_nodes(&minified.join("graph.py")),
            ["relu"],
            "{backend}"
        );
        assert_reproduces(tmp.path(), &minified, backend);
        // So does its own cargo run.
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let own = Command::new(&cargo)
            .args(["run", "-q"])
            .current_dir(&minified)
            .output()
            .unwrap();
        assert_eq!(
            own.status.code(),
            Some(1),
            "{backend} cargo run: {}{}",
            text(&own.stdout),
            text(&own.stderr)
        );
        assert!(
            text(&own.stdout).starts_with("reproduced: "),
            "{}",
            text(&own.stdout)
        );
    }
}

#[test]
fn backward_graph_failures_are_dumped_after_aot_and_minify_to_the_relu() {
    // As test_minifier_common's `_test_after_aot` for the backward: aot_eager hands the
    // backward graph (relu recomputed into it) to a relu testing backend.
    let tmp = tempfile::tempdir().unwrap();
    let mlp = root().join("tests/fixtures/mlp/forward.py");
    let inputs = root().join("tests/fixtures/mlp/inputs.npz");
    let cases = [
        ("relu_compile_error_TESTING_ONLY", "2", "ReluCompileError"),
        ("relu_runtime_error_TESTING_ONLY", "2", "ReluRuntimeError"),
        ("relu_accuracy_error_TESTING_ONLY", "4", "accuracy"),
    ];
    for (i, (inner, level, what)) in cases.iter().enumerate() {
        let out_dir = tmp.path().join(format!("aot{i}"));
        let backend = format!("aot_eager:bw={inner},recompute=relu");
        let out = graphbug_in(
            tmp.path(),
            &[
                "repro",
                mlp.to_str().unwrap(),
                "--backend",
                &backend,
                "--after",
                "aot",
                "--level",
                level,
                "--inputs",
                inputs.to_str().unwrap(),
                "--out",
                out_dir.to_str().unwrap(),
            ],
        );
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "{backend}: {stdout}{}",
            text(&out.stderr)
        );
        assert!(
            stdout.contains("in the backward graph") && stdout.contains(what),
            "{stdout}"
        );
        // The repro is the backward graph with the inner compiler as its backend.
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out_dir.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(manifest["after"], "aot");
        assert_eq!(manifest["backend"], *inner);
        let dumped = std::fs::read_to_string(out_dir.join("graph.py")).unwrap();
        assert!(dumped.contains("tangents_1"), "{dumped}");
        let minified = out_dir.join("minified");
        assert_eq!(
            call_nodes(&minified.join("graph.py")),
            ["relu"],
            "{backend}"
        );
        assert_reproduces(tmp.path(), &minified, &backend);
    }
    // Taken after dynamo, the failure in the backward is a repro of the graph given that
    // runs the training step; it minifies to the relu recomputed into the backward, and its
    // Python repro runs the backward too.
    let out_dir = tmp.path().join("dynamo");
    let backend = "aot_eager:bw=relu_runtime_error_TESTING_ONLY,recompute=relu";
    let out = graphbug_in(
        tmp.path(),
        &[
            "repro",
            mlp.to_str().unwrap(),
            "--backend",
            backend,
            "--inputs",
            inputs.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    for dir in [out_dir.clone(), out_dir.join("minified")] {
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(
            (&manifest["after"], &manifest["training"]),
            (&"dynamo".into(), &true.into())
        );
    }
    // A wrapper around the pipeline changes none of that: the repro is still a training step.
    for wrapped in [format!("explain:{backend}"), format!("slow:1+{backend}")] {
        let dir = tmp.path().join(format!("wrapped-{}", wrapped.len()));
        let out = graphbug_in(
            tmp.path(),
            &[
                "repro",
                mlp.to_str().unwrap(),
                "--backend",
                &wrapped,
                "--inputs",
                inputs.to_str().unwrap(),
                "--no-minify",
                "--out",
                dir.to_str().unwrap(),
            ],
        );
        assert!(
            out.status.success(),
            "{wrapped}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(manifest["training"], true, "{wrapped}");
    }
    let minified = out_dir.join("minified");
    assert_eq!(call_nodes(&minified.join("graph.py")), ["relu"]);
    assert_reproduces(tmp.path(), &minified, backend);
    let py = std::fs::read_to_string(minified.join("repro.py")).unwrap();
    assert!(py.contains("TRAINING = True"), "{py}");
    // Without the training step (the manifest's flag off) the forward alone passes.
    let manifest = minified.join("manifest.json");
    let text_of = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text_of.replace("\"training\": true", "\"training\": false"),
    )
    .unwrap();
    let again = graphbug_in(tmp.path(), &["repro", minified.to_str().unwrap(), "run"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stdout));
    // A whole-graph backend has no forward and backward graphs to take repros of.
    let out = graphbug_in(
        tmp.path(),
        &[
            "repro",
            mlp.to_str().unwrap(),
            "--backend",
            "relu_compile_error_TESTING_ONLY",
            "--after",
            "aot",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("use --after dynamo"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn repro_py_runs_in_pytorch_and_matches_graphbug_eager() {
    let python = root().join(".venv/bin/python");
    assert!(python.exists(), "run `cargo xtask setup`");
    let tmp = tempfile::tempdir().unwrap();
    for model in ["mlp", "cnn", "gpt4"] {
        let out_dir = tmp.path().join(model);
        let g = root().join(format!("tests/fixtures/{model}/forward.py"));
        let inputs = root().join(format!("tests/fixtures/{model}/inputs.npz"));
        // A fault on the last op makes every model fail, so a repro is written.
        let out = graphbug_in(
            tmp.path(),
            &[
                "repro",
                g.to_str().unwrap(),
                "--backend",
                "fault:runtime@addmm",
                "--level",
                "1",
                "--inputs",
                inputs.to_str().unwrap(),
                "--out",
                out_dir.to_str().unwrap(),
            ],
        );
        assert!(out.status.success(), "{model}: {}", text(&out.stderr));
        let py = Command::new(&python)
            .arg(out_dir.join("repro.py"))
            .output()
            .unwrap();
        assert!(
            py.status.success(),
            "{model}: {}{}",
            text(&py.stdout),
            text(&py.stderr)
        );
        assert!(
            text(&py.stdout).contains("out0 matches graphbug's eager output: True"),
            "{model}: {}",
            text(&py.stdout)
        );
    }
}

#[test]
fn the_demo_runs_the_whole_flow() {
    let tmp = tempfile::tempdir().unwrap();
    let out = graphbug_in(tmp.path(), &["repro"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "detected: accuracy wrong result in backend `relu_accuracy_error_TESTING_ONLY`"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("minified 19 nodes to 1"), "{stdout}");
    // The "Next:" commands work from where the user stands (outside the repository):
    // graphbug by a name or path that runs it, the venv's Python by its full path.
    let next: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.contains(". Next:"))
        .skip(1)
        .map(|l| l.split('#').next().unwrap().trim())
        .collect();
    let run = next
        .iter()
        .find(|l| l.ends_with("/minified run"))
        .unwrap_or_else(|| panic!("no run command in Next:\n{stdout}"));
    let (exe, rest) = run.split_once(' ').unwrap();
    let exe = if exe == "graphbug" {
        env!("CARGO_BIN_EXE_graphbug")
    } else {
        exe
    };
    let again = Command::new(exe)
        .args(rest.split_whitespace())
        .current_dir(tmp.path())
        .output()
        .unwrap_or_else(|e| panic!("`{run}` does not run from {}: {e}", tmp.path().display()));
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
    let python = next
        .iter()
        .find(|l| l.ends_with("/repro.py"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no repro.py command in Next:\n{stdout}"));
    assert!(
        Path::new(python).is_absolute() && Path::new(python).exists(),
        "{python}"
    );
    assert_eq!(stdout.matches("graphbug demo:").count(), 1, "{stdout}");
    assert_eq!(
        call_nodes(&tmp.path().join("repro_out/minified/graph.py")),
        ["relu"]
    );
    // Repros name the module as PyTorch's do, whatever the source (make_fx's `<lambda>`).
    for graph in ["repro_out/graph.py", "repro_out/minified/graph.py"] {
        let text = std::fs::read_to_string(tmp.path().join(graph)).unwrap();
        assert!(
            text.starts_with("class Repro(torch.nn.Module):"),
            "{graph}: {text}"
        );
    }
    assert!(
        stdout.contains("class Repro(torch.nn.Module):") && !stdout.contains("<lambda>"),
        "{stdout}"
    );
    let manifest = std::fs::read_to_string(tmp.path().join("repro_out/manifest.json")).unwrap();
    assert!(
        manifest.contains("\"level\": 4") && manifest.contains("\"stage\": \"accuracy\""),
        "{manifest}"
    );
    // report.html: the original with the minified relu as the culprit, the minified
    // graph, the progress from 19 nodes to 1, the accuracy divergence.
    assert!(stdout.contains("report: "), "{stdout}");
    let report = std::fs::read_to_string(tmp.path().join("repro_out/report.html")).unwrap();
    assert!(report.contains("culprit: relu"), "{report:.3000}");
    assert!(
        report.contains("id=\"graph.py:relu\""),
        "the original is drawn"
    );
    assert!(
        report.contains("id=\"minified/graph.py:relu\""),
        "the minified is drawn"
    );
    assert!(report.contains("<td>0</td><td>19</td>"), "{report:.3000}");
    assert!(report.contains("<section id=\"divergence\">"));
    assert!(tmp.path().join("repro_out/minified/report.html").is_file());
}

#[test]
fn a_crash_is_survived_recorded_and_minified() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("crash");
    let g = root().join("tests/fixtures/mlp/forward.py");
    // The first run happens in a child process: the crash is a detected failure, written as
    // a repro (completing the level-3 launcher written before compiling) and minified.
    let out = graphbug_in(
        tmp.path(),
        &[
            "repro",
            g.to_str().unwrap(),
            "--backend",
            "fault:crash@gelu",
            "--level",
            "3",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("detected: compile crash in backend `fault:crash@gelu`")
            || stdout.contains("detected: runtime crash in backend `fault:crash@gelu`"),
        "{stdout}"
    );
    assert!(out_dir.join("minifier_launcher.sh").exists());
    let manifest = std::fs::read_to_string(out_dir.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"symptom\": \"crash\""), "{manifest}");
    assert_eq!(call_nodes(&out_dir.join("minified/graph.py")), ["gelu"]);
    // Running the repro reproduces the crash (exit 1) without dying of it.
    let run = graphbug_in(tmp.path(), &["repro", out_dir.to_str().unwrap(), "run"]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    assert!(
        text(&run.stdout).starts_with("reproduced: "),
        "{}",
        text(&run.stdout)
    );
}

#[test]
fn a_crash_in_process_at_level_3_leaves_a_launcher_that_minifies_under_isolation() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("crash");
    let g = root().join("tests/fixtures/mlp/forward.py");
    // In-process, the crash kills the process during the run; the launcher was written
    // before compiling, as at PyTorch's level 3.
    let out = graphbug_in(
        tmp.path(),
        &[
            "repro",
            g.to_str().unwrap(),
            "--backend",
            "fault:crash@gelu",
            "--level",
            "3",
            "--no-isolate",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(6), "{}", text(&out.stderr));
    assert!(out_dir.join("minifier_launcher.sh").exists());
    // What the launcher runs minifies with isolation by default; with three workers, to
    // the same files (the crashing worker is replaced, the others go on).
    let min = graphbug_in(tmp.path(), &["repro", out_dir.to_str().unwrap(), "minify"]);
    assert!(
        min.status.success(),
        "{}{}",
        text(&min.stdout),
        text(&min.stderr)
    );
    assert_eq!(call_nodes(&out_dir.join("minified/graph.py")), ["gelu"]);
    let serial: Vec<Vec<u8>> = ["graph.py", "inputs.safetensors", "manifest.json"]
        .iter()
        .map(|f| std::fs::read(out_dir.join("minified").join(f)).unwrap())
        .collect();
    let min = graphbug_in(
        tmp.path(),
        &["repro", out_dir.to_str().unwrap(), "minify", "-j", "3"],
    );
    assert!(min.status.success(), "{}", text(&min.stderr));
    assert!(
        text(&min.stderr).contains("3 workers ran "),
        "{}",
        text(&min.stderr)
    );
    for (k, f) in ["graph.py", "inputs.safetensors", "manifest.json"]
        .iter()
        .enumerate()
    {
        assert!(
            std::fs::read(out_dir.join("minified").join(f)).unwrap() == serial[k],
            "{f} differs with -j 3"
        );
    }
}

#[test]
fn bad_repro_arguments_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let g = root().join("tests/fixtures/mlp/forward.py");
    let out = graphbug_in(tmp.path(), &["repro", g.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--backend NAME is needed"),
        "{}",
        text(&out.stderr)
    );
    let out = graphbug_in(tmp.path(), &["repro", tmp.path().to_str().unwrap(), "run"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("graphbug repro directory"),
        "{}",
        text(&out.stderr)
    );
    let out = graphbug_in(
        tmp.path(),
        &[
            "repro",
            g.to_str().unwrap(),
            "--backend",
            "no_such",
            "--out",
            "x",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("unknown backend `no_such`"),
        "{}",
        text(&out.stderr)
    );
    // Several workers run the backend in worker processes, which --no-isolate forbids.
    let out = graphbug_in(
        tmp.path(),
        &[
            "repro",
            g.to_str().unwrap(),
            "--backend",
            "relu_runtime_error_TESTING_ONLY",
            "--no-isolate",
            "-j",
            "2",
            "--out",
            "y",
        ],
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("--no-isolate runs them in this process: drop one"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_dynamo_level_dynamic_graph_keeps_its_text_and_symbols_through_repro_and_minify() {
    let python = root().join(".venv/bin/python");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repro");
    let graph = root().join("tests/fixtures/dynamo/tensor_code_dynamic.py");
    let inputs = root().join("tests/fixtures/dynamo/tensor_code_dynamic_inputs.safetensors");
    let out = graphbug_in(
        tmp.path(),
        &[
            "repro",
            graph.to_str().unwrap(),
            "--inputs",
            inputs.to_str().unwrap(),
            "--backend",
            "fault:runtime@aten.view.default",
            "--out",
            dir.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    // The repro holds the graph as dynamo wrote it (canonical text: its comments go; the
    // module is `class Repro`, as in PyTorch's repros), and the symbols' values.
    let canonical = graphbug::repro::save::repro_text(
        &graphbug::ir::parse_graph(&std::fs::read_to_string(&graph).unwrap()).unwrap(),
    );
    assert!(canonical.contains("l_a_.view(mul, -1)"), "{canonical}");
    assert_eq!(
        std::fs::read_to_string(dir.join("graph.py")).unwrap(),
        canonical
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["bindings"],
        serde_json::json!({"s52": 3, "s97": 6, "s98": 4})
    );
    // Minified to the one view, still dynamo-level and symbolic: its size argument is a
    // `Sym` input, and the tensor input binds s97 and s98.
    let minified = dir.join("minified");
    let text_min = std::fs::read_to_string(minified.join("graph.py")).unwrap();
    assert_eq!(
        call_nodes(&minified.join("graph.py")),
        ["view"],
        "{text_min}"
    );
    assert!(
        text_min.contains(r#"forward(self, L_a_: "f32[s97, s98]", mul: "Sym(2*s97)")"#)
            && text_min.contains("l_a_.view(mul, -1)"),
        "{text_min}"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(minified.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(
        manifest["bindings"],
        serde_json::json!({"s97": 6, "s98": 4})
    );
    assert_reproduces(tmp.path(), &minified, "minified");
    // repro.py runs both in PyTorch (sizes passed as ints) and agrees with graphbug.
    for d in [&dir, &minified] {
        let py = Command::new(&python)
            .arg(d.join("repro.py"))
            .output()
            .unwrap();
        assert!(
            py.status.success() && !text(&py.stdout).contains("False"),
            "{}: {}{}",
            d.display(),
            text(&py.stdout),
            text(&py.stderr)
        );
    }
    // A size that contradicts its annotation is named, not run.
    let g = minified.join("graph.py");
    std::fs::write(&g, text_min.replace("Sym(2*s97)", "Sym(3*s97)")).unwrap();
    let run = graphbug_in(tmp.path(), &["repro", minified.to_str().unwrap(), "run"]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    assert!(
        text(&run.stderr).contains("input `mul` is 12, but its annotation says 3*s97 = 18"),
        "{}",
        text(&run.stderr)
    );
}

#[test]
fn a_flaky_failure_is_minified_to_its_rate_and_run_checks_the_rate() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repro");
    let gpt4 = root().join("tests/fixtures/gpt4/forward.py");
    // A runtime fault at gelu_2 in 60% of compiles (a fixed sequence per process).
    let backend = "fault:runtime@node:gelu_2%60";
    let out = graphbug_in(
        tmp.path(),
        &[
            "repro",
            gpt4.to_str().unwrap(),
            "--backend",
            backend,
            "--out",
            dir.to_str().unwrap(),
            "--repeat",
            "10",
        ],
    );
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let minified = dir.join("minified");
    assert_eq!(call_nodes(&minified.join("graph.py")), ["gelu_2"]);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(minified.join("manifest.json")).unwrap())
            .unwrap();
    let recorded = &manifest["reliability"];
    let (runs, failures) = (
        recorded["runs"].as_u64().unwrap(),
        recorded["failures"].as_u64().unwrap(),
    );
    assert_eq!(runs, 10);
    assert!((2..10).contains(&failures), "{recorded}");
    // `run` re-checks the rate over as many runs.
    let out = graphbug_in(tmp.path(), &["repro", minified.to_str().unwrap(), "run"]);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}{}", text(&out.stderr));
    assert!(
        said.starts_with("reproduced in ")
            && said.contains(&format!(
                "at least as often as recorded ({failures} of 10 runs"
            ))
            && said.contains("last failure: runtime error"),
        "{said}"
    );
    // A backend that does not fail does not reproduce it, and says against what.
    let out = graphbug_in(
        tmp.path(),
        &[
            "repro",
            minified.to_str().unwrap(),
            "run",
            "--backend",
            "eager",
            "--repeat",
            "4",
        ],
    );
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}{}", text(&out.stderr));
    assert!(
        said.starts_with("does not reproduce as often as recorded: 0 of 4 runs (0%)"),
        "{said}"
    );
    // A bad percentage is an error naming it.
    let out = graphbug_in(
        tmp.path(),
        &[
            "run",
            gpt4.to_str().unwrap(),
            "--backend",
            "fault:runtime@gelu%100",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("bad percentage `%100` (1 to 99)"),
        "{}",
        text(&out.stderr)
    );
}

/// Directories an earlier graphbug wrote (`tests/fixtures/repro-dirs`, made by its
/// `make.sh`, copied there with their links followed) still load: each repro directory
/// and its minified one reproduce their failure, a copied one minifies again in place and
/// is analyzed, and a minification's `--out` resumes to the same result.
#[test]
fn directories_written_by_an_earlier_graphbug_still_load() {
    let tmp = tempfile::tempdir().unwrap();
    let fixtures = root().join("tests/fixtures");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(fixtures.join("repro-dirs"))
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(copied.success());
    let dirs = tmp.path().join("repro-dirs");
    let reproduces = |dir: &str, what: &str| {
        let o = graphbug_in(&dirs, &["repro", dir, "run"]);
        let said = text(&o.stdout) + &text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{dir}: {said}");
        assert!(
            said.starts_with(&format!("reproduced: {what}")),
            "{dir}: {said}"
        );
    };
    for (dir, what) in [
        ("aten", "runtime error"),
        ("aten-random", "accuracy wrong result"),
        ("aten-aot", "runtime error"),
        ("aten-training", "runtime error"),
        ("hlo", "accuracy wrong result"),
        ("stablehlo", "accuracy wrong result"),
    ] {
        reproduces(dir, what);
        reproduces(&format!("{dir}/minified"), what);
    }
    reproduces("aten-bisect/case", "accuracy wrong result");
    // Their standalone build named the repro crate where it was then (crates/repro); run
    // again, it names this checkout's.
    let toml = std::fs::read_to_string(dirs.join("aten/Cargo.toml")).unwrap();
    let here = root().join("crates/aten/repro");
    assert!(
        toml.contains(&format!("path = \"{}\"", here.display())),
        "{toml}"
    );
    reproduces("aten-bisect/guilty", "accuracy wrong result");
    // Minified again where it was copied: the copy's `minified` gives way to a link and
    // stays as `minified.earlier`.
    for dir in ["aten-training", "hlo"] {
        let o = graphbug_in(&dirs, &["repro", dir, "minify"]);
        let said = text(&o.stdout) + &text(&o.stderr);
        assert!(o.status.success(), "{dir}: {said}");
        let minified = dirs.join(dir).join("minified");
        assert!(
            std::fs::symlink_metadata(&minified)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{dir}"
        );
        assert!(dirs.join(dir).join("minified.earlier").is_dir(), "{dir}");
    }
    reproduces("aten-training/minified", "runtime error");
    reproduces("hlo/minified", "accuracy wrong result");
    for (dir, first) in [
        ("aten-random", "first divergence: node `relu`"),
        (
            "hlo",
            "the divergence that reaches the outputs starts at: `reduce_max.7`",
        ),
    ] {
        let o = graphbug_in(&dirs, &["repro", dir, "analyze"]);
        let said = text(&o.stdout) + &text(&o.stderr);
        assert!(said.contains(first), "{dir}: {said}");
    }
    // `--resume` from the state an earlier graphbug saved ends where it ended.
    let files_of = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), std::fs::read(e.path()).unwrap())
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let mlp = fixtures.join("mlp");
    let argmax = fixtures.join("xla/hlo/argmax.hlo");
    for (out, file, mut args) in [
        (
            "aten-minify",
            mlp.join("forward.py"),
            vec!["--backend", "relu_runtime_error_TESTING_ONLY"],
        ),
        (
            "hlo-minify",
            argmax,
            vec!["--backend", "fault:runtime@node:reduce_max.7+pjrt:cpu"],
        ),
    ] {
        let inputs = mlp.join("inputs.npz");
        if out == "aten-minify" {
            args.extend(["--inputs", inputs.to_str().unwrap()]);
        }
        let before = files_of(&dirs.join(out).join("minified"));
        let o = graphbug_in(
            &dirs,
            &[
                &["minify", file.to_str().unwrap(), "--check", "runtime"],
                &args[..],
                &["--out", out, "--resume"],
            ]
            .concat(),
        );
        let said = text(&o.stdout) + &text(&o.stderr);
        assert!(o.status.success(), "{out}: {said}");
        assert!(said.contains("resuming from 1 "), "{out}: {said}");
        let after = files_of(&dirs.join(out).join("minified"));
        assert_eq!(
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>(),
            "{out}"
        );
        for (name, was) in &before {
            let now = &after[name];
            assert!(
                was == now || same_tensors(tmp.path(), (was, now)),
                "{out}: {name:?} differs"
            );
        }
    }
}

/// Whether two `.safetensors` files' bytes hold the same tensors, float32 values within
/// their last bits: values libtorch computed (the inputs of a minified aten graph, its
/// prefix run) differ there from one CPU to another, so a directory made on one machine
/// is resumed on another to values equal within float32's rounding, not to its bytes.
fn same_tensors(scratch: &Path, (a, b): (&[u8], &[u8])) -> bool {
    let read = |bytes: &[u8], name: &str| {
        let path = scratch.join(name);
        std::fs::write(&path, bytes).unwrap();
        graphbug::files::read(&path).ok()
    };
    let (Some(x), Some(y)) = (read(a, "was.safetensors"), read(b, "now.safetensors")) else {
        return false;
    };
    let f32s = |d: &[u8]| -> Vec<f32> {
        d.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    x.len() == y.len()
        && x.iter().zip(&y).all(|((n, s), (m, t))| {
            n == m
                && s.dtype == t.dtype
                && s.shape == t.shape
                && if s.dtype == graphbug::ir::Dtype::Float32 {
                    f32s(&s.data)
                        .iter()
                        .zip(f32s(&t.data))
                        .all(|(p, q)| (p - q).abs() <= 1e-5 * p.abs().max(q.abs()) + 1e-6)
                } else {
                    s.data == t.data
                }
        })
}

/// `share` scrubs XLA repro directories; an aten graph's says it cannot yet, and writes
/// nothing.
#[test]
fn sharing_an_aten_directory_says_it_is_not_built() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = root().join("tests/fixtures/repro-dirs/aten");
    let o = graphbug_in(tmp.path(), &["repro", dir.to_str().unwrap(), "share"]);
    let said = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{said}");
    assert!(
        said.contains("`share` is built for XLA repro directories only"),
        "{said}"
    );
    assert!(!dir.join("shared").exists());
}

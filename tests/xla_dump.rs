//! `graphbug repro DIR` on XLA dump directories (`XLA_FLAGS=--xla_dump_to=DIR`) through the
//! binary, on XLA's CPU plugin: a JAX training loop's dump (`tests/fixtures/xla/dumps`,
//! `make_dumps.py`) is checked module by module with the arguments its HloSnapshots
//! recorded, the one module a fault pinned to one of its instructions breaks is minified to
//! that instruction, the others are reported as passing; a dump of JAX's StableHLO alone
//! runs its `module.mlir`; bad dumps and bad requests name the culprit. These tests build
//! and pass without libtorch (`cargo test -p graphbug --no-default-features --test
//! xla_dump`).

mod common;

use common::{run_in_tmp as graphbug, said as text};
use std::path::{Path, PathBuf};

fn dumps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/xla/dumps")
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// The training step's instruction the fault is pinned to: the feed-forward block's second
/// matmul, in no other module of the dump.
const FAULTED: &str = "dot_general.20";

/// The training step's module.
const STEP: &str = "module_0020.jit_step";

fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn a_jax_training_dump_is_checked_module_by_module_and_the_failing_one_minified() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let backend = format!("fault:accuracy@node:{FAULTED}+pjrt:cpu");
    let o = graphbug(
        &[
            "repro",
            &s(&dumps().join("jax_train")),
            "--backend",
            &backend,
            "--out",
            &s(&out),
            "-j",
            "2",
        ],
        tmp.path(),
    );
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    assert!(
        said.contains("an XLA dump (--xla_dump_to) (12 modules)"),
        "{said}"
    );
    assert!(
        said.contains("summary: 12 modules on `fault:accuracy@node:dot_general.20+pjrt:cpu` at level 4: 11 pass, 1 fail, 0 not checked, 0 could not be judged"),
        "{said}"
    );
    let sum = summary(&out);
    let modules = sum["modules"].as_array().unwrap();
    assert_eq!(modules.len(), 12, "{sum}");
    for m in modules {
        let name = m["module"].as_str().unwrap();
        // Every module ran on the arguments one of its executions recorded.
        assert!(
            m["inputs"].as_str().unwrap().starts_with("recorded: "),
            "{m}"
        );
        if name == STEP {
            assert_eq!(m["result"], "fails", "{m}");
            assert!(
                m["failure"].as_str().unwrap().starts_with("accuracy"),
                "{m}"
            );
            assert_eq!(m["repro"], STEP, "{m}");
            assert_eq!(m["minified"]["result"], "done", "{m}");
            assert_eq!(m["minified"]["end"], 1, "{m}");
            assert!(m["unfaulted"].is_null(), "{m}");
            assert!(
                m["inputs"]
                    .as_str()
                    .unwrap()
                    .ends_with("(1 of 2 executions)"),
                "{m}"
            );
        } else {
            assert_eq!(m["result"], "passes", "{m}");
            // The fault names no node of it: it ran without it, and says so.
            assert!(
                m["unfaulted"].as_str().unwrap().contains("names no node"),
                "{m}"
            );
            assert!(!out.join(name).exists(), "{name}");
        }
    }
    // The failing module's directory holds the step as JAX built it and the arguments the
    // snapshot recorded; its minified program is the faulted instruction alone.
    let dir = out.join(STEP);
    let program = std::fs::read_to_string(dir.join("program.hlo")).unwrap();
    let dumped = std::fs::read_to_string(
        dumps()
            .join("jax_train")
            .join(format!("{STEP}.before_optimizations.txt")),
    )
    .unwrap();
    assert_eq!(program, dumped);
    let minified = std::fs::read_to_string(dir.join("minified/program.hlo")).unwrap();
    assert!(minified.contains(FAULTED), "{minified}");
    // One page over all modules links the failing one's reports.
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    for m in modules {
        assert!(page.contains(m["module"].as_str().unwrap()), "{page}");
    }
    assert!(
        page.contains(&format!("href=\"{STEP}/report.html\"")),
        "{page}"
    );
    assert!(
        page.contains(&format!("href=\"{STEP}/minified/report.html\"")),
        "{page}"
    );
    // The module's directory reproduces on its own.
    let o = graphbug(&["repro", &s(&dir), "run"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("reproduced: accuracy"), "{}", text(&o));
}

#[test]
fn a_dump_of_jax_stablehlo_alone_runs_its_mlir_with_the_recorded_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = graphbug(
        &[
            "repro",
            &s(&dumps().join("jax_mlir")),
            "--backend",
            "pjrt:cpu",
            "--out",
            &s(&out),
        ],
        tmp.path(),
    );
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    assert!(
        said.contains("5 modules on `pjrt:cpu` at level 4: 5 pass, 0 fail"),
        "{said}"
    );
    for m in summary(&out)["modules"].as_array().unwrap() {
        assert!(
            m["program"].as_str().unwrap().ends_with("/module.mlir"),
            "{m}"
        );
        assert!(
            m["inputs"].as_str().unwrap().starts_with("recorded: "),
            "{m}"
        );
        assert_eq!(m["result"], "passes", "{m}");
    }
}

/// A copy of the training dump's modules `keep` (their files) in `tmp/name`.
fn partial_dump(tmp: &Path, name: &str, keep: &[&str]) -> PathBuf {
    let dir = tmp.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(dumps().join("jax_train")).unwrap() {
        let e = e.unwrap();
        let file = e.file_name().to_string_lossy().into_owned();
        if keep.iter().any(|k| file.starts_with(k)) {
            std::fs::copy(e.path(), dir.join(&file)).unwrap();
        }
    }
    dir
}

#[test]
fn bad_dumps_and_requests_name_the_culprit() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let train = s(&dumps().join("jax_train"));
    let run = |args: &[&str]| {
        let mut all = vec!["repro"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--out", out.to_str().unwrap()]);
        graphbug(&all, tmp.path())
    };
    // Requests that mean nothing for a dump.
    for (args, expected) in [
        (
            vec![train.as_str(), "minify", "--backend", "pjrt:cpu"],
            "is an XLA dump (--xla_dump_to), not a repro directory, so `minify` does not apply",
        ),
        (
            vec![train.as_str()],
            "--backend pjrt:<plugin> or iree:<target> is needed to compile the modules of",
        ),
        (
            vec![train.as_str(), "--backend", "pjrt:cpu", "--inputs", "x.npz"],
            "--inputs gives one program's inputs",
        ),
        (
            vec![
                train.as_str(),
                "--backend",
                "fault:accuracy@node:nowhere.1+pjrt:cpu",
            ],
            "the backend's fault names no node in any module of",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(expected), "{args:?}: {}", text(&o));
    }
    // A module with only its program after XLA's passes is not checked, and says why; a
    // snapshot that does not read is named; the module beside them is still checked.
    let dir = partial_dump(
        tmp.path(),
        "partial",
        &["module_0000.jit_stage.cpu_after", "module_0006."],
    );
    let snapshots: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".snapshot."))
        .collect();
    assert_eq!(snapshots.len(), 2, "{snapshots:?}");
    for p in &snapshots {
        std::fs::write(p, b"\xff\xff not a proto").unwrap();
    }
    std::fs::copy(
        dumps().join("jax_train/module_0018.jit__roll_static.before_optimizations.txt"),
        dir.join("module_0018.jit__roll_static.before_optimizations.txt"),
    )
    .unwrap();
    let o = run(&[dir.to_str().unwrap(), "--backend", "pjrt:cpu"]);
    let said = text(&o);
    assert_eq!(o.status.code(), Some(1), "{said}");
    assert!(said.contains("3 modules on `pjrt:cpu` at level 4: 1 pass, 0 fail, 1 not checked, 1 could not be judged"), "{said}");
    assert!(said.contains("not checked: the dump holds only its program after XLA's passes (module_0000.jit_stage.cpu_after_optimizations.txt); dump the program as built with XLA_FLAGS=--xla_dump_hlo_as_text"), "{said}");
    // The first execution's snapshot (in the dump's order) is the one read, and named.
    let mut snapshots = snapshots;
    snapshots.sort();
    assert!(
        said.contains(&format!("{}: not an xla.HloSnapshot", s(&snapshots[0]))),
        "{said}"
    );
    // Without a snapshot, the module runs on seeded random arguments, and says so.
    let m = summary(&out)["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["module"] == "module_0018.jit__roll_static")
        .cloned()
        .unwrap();
    assert_eq!(m["inputs"], "seeded random (seed 0)", "{m}");
    assert_eq!(m["result"], "passes", "{m}");
}

/// TensorFlow's dump (`make_dumps.py --tensorflow`): one `jit_compile=True` training step,
/// no HloSnapshot; a fault on its `tanh` is found on seeded random arguments and minified.
#[test]
fn a_tensorflow_dump_is_checked_on_seeded_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = graphbug(
        &[
            "repro",
            &s(&dumps().join("tf_train")),
            "--backend",
            "fault:accuracy@tanh+pjrt:cpu",
            "--out",
            &s(&out),
            "--seed",
            "3",
        ],
        tmp.path(),
    );
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    assert!(said.contains("arguments: seeded random (seed 3)"), "{said}");
    assert!(
        said.contains("1 module on `fault:accuracy@tanh+pjrt:cpu` at level 4: 0 pass, 1 fail"),
        "{said}"
    );
    let m = &summary(&out)["modules"][0];
    assert!(
        m["module"]
            .as_str()
            .unwrap()
            .starts_with("module_0000.a_inference_train_step_"),
        "{m}"
    );
    assert_eq!(m["minified"]["end"], 1, "{m}");
    let minified = std::fs::read_to_string(
        out.join(m["repro"].as_str().unwrap())
            .join("minified/program.hlo"),
    )
    .unwrap();
    assert!(minified.contains("tanh("), "{minified}");
}

/// PyTorch/XLA's dump (`make_dumps.py --torch-xla`): a transformer layer's two Adam steps
/// (Adam's first and later steps are two graphs) and its evaluation, three modules of one
/// `SyncTensorsGraph` each; a fault on a matmul of the first step is found there alone.
#[test]
fn a_pytorch_xla_training_dump_finds_the_failing_step() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = graphbug(
        &[
            "repro",
            &s(&dumps().join("torch_xla_train")),
            "--backend",
            "fault:accuracy@node:dot.323+pjrt:cpu",
            "--out",
            &s(&out),
            "--no-minify",
        ],
        tmp.path(),
    );
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    assert!(
        said.contains(
            "3 modules on `fault:accuracy@node:dot.323+pjrt:cpu` at level 4: 2 pass, 1 fail"
        ),
        "{said}"
    );
    let sum = summary(&out);
    let failing: Vec<&str> = sum["modules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["result"] == "fails")
        .map(|m| m["module"].as_str().unwrap())
        .collect();
    assert_eq!(failing, ["module_0000.SyncTensorsGraph.913"]);
    assert!(out
        .join("module_0000.SyncTensorsGraph.913/program.hlo")
        .is_file());
}

//! The capture package (`python/`, installed by `cargo xtask setup`) against the project's
//! PyTorch: graphs torch.compile hands a backend become graphbug repro directories, which
//! graphbug runs and minifies.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{fixture, output_within, text, Run};

fn python() -> PathBuf {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run `cargo xtask setup`",
        python.display()
    );
    python
}

fn graphbug(args: &[&str]) -> std::process::Output {
    common::graphbug().args(args).run()
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("graphbug-capture-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn capture_script(out: &Path, extra: &[&str]) {
    let mut cmd = Command::new(python());
    cmd.args(["-m", "graphbug_capture", "--aot", "--out"])
        .arg(out)
        .arg(fixture("capture/train_step.py"))
        .args(extra)
        .env("OMP_NUM_THREADS", "1");
    let run = output_within(cmd, Duration::from_secs(300));
    assert!(
        run.status.success(),
        "{}{}",
        text(&run.stdout),
        text(&run.stderr)
    );
    assert!(
        text(&run.stdout).contains("loss "),
        "the script ran: {}",
        text(&run.stdout)
    );
}

#[test]
fn an_unmodified_script_is_captured_and_its_aot_graphs_minify() {
    for (tag, extra) in [("static", &[][..]), ("dynamic", &["--dynamic"][..])] {
        let out = scratch(tag);
        capture_script(&out, extra);
        for dir in ["dynamo_000", "aot_fw_000", "aot_bw_000"] {
            for file in ["graph.py", "inputs.safetensors", "manifest.json"] {
                assert!(out.join(dir).join(file).is_file(), "{tag}: {dir}/{file}");
            }
        }
        let graph = std::fs::read_to_string(out.join("aot_fw_000/graph.py")).unwrap();
        assert_eq!(graph.contains("Sym("), tag == "dynamic", "{graph}");
        // The AOT graphs run equal to eager, and a fault minifies to its node.
        for dir in ["aot_fw_000", "aot_bw_000"] {
            let d = out.join(dir);
            let run = graphbug(&["repro", d.to_str().unwrap(), "run"]);
            assert!(
                run.status.success(),
                "{tag} {dir}: {}{}",
                text(&run.stdout),
                text(&run.stderr)
            );
            assert!(
                text(&run.stdout).contains("does not reproduce"),
                "{}",
                text(&run.stdout)
            );
        }
        let fw = out.join("aot_fw_000");
        let min = graphbug(&[
            "repro",
            fw.to_str().unwrap(),
            "minify",
            "--backend",
            "fault:runtime@aten.relu.default",
        ]);
        assert!(
            min.status.success(),
            "{tag}: {}{}",
            text(&min.stdout),
            text(&min.stderr)
        );
        let minified = std::fs::read_to_string(fw.join("minified/graph.py")).unwrap();
        assert!(
            minified.contains("torch.ops.aten.relu.default"),
            "{minified}"
        );
        assert_eq!(
            minified.matches("torch.ops.").count(),
            1,
            "{tag}: not minimal:\n{minified}"
        );
        // A backend that computes wrong numbers: `run` shows it, and `minify` finds it
        // without being told (the directory records no failure), or with --check.
        let wrong = "relu_accuracy_error_TESTING_ONLY";
        let run = graphbug(&["repro", fw.to_str().unwrap(), "run", "--backend", wrong]);
        assert!(
            text(&run.stdout).starts_with("reproduced: accuracy"),
            "{tag}: {}{}",
            text(&run.stdout),
            text(&run.stderr)
        );
        for check in [&[][..], &["--check", "accuracy"][..]] {
            let mut args = vec!["repro", fw.to_str().unwrap(), "minify", "--backend", wrong];
            args.extend_from_slice(check);
            let min = graphbug(&args);
            assert!(
                min.status.success(),
                "{tag} {check:?}: {}{}",
                text(&min.stdout),
                text(&min.stderr)
            );
            let minified = std::fs::read_to_string(fw.join("minified/graph.py")).unwrap();
            assert_eq!(
                minified.matches("torch.ops.").count(),
                1,
                "{tag} {check:?}: not minimal:\n{minified}"
            );
            assert!(
                minified.contains("torch.ops.aten.relu.default"),
                "{minified}"
            );
            let manifest = std::fs::read_to_string(fw.join("minified/manifest.json")).unwrap();
            assert!(manifest.contains("\"stage\": \"accuracy\""), "{manifest}");
        }
        // The dynamo-level graph minifies to its relu and stays dynamo-level (and
        // symbolic, with the symbol's value in the manifest).
        let dynamo = out.join("dynamo_000");
        let manifest = std::fs::read_to_string(dynamo.join("manifest.json")).unwrap();
        assert_eq!(
            manifest.contains(r#""s33": 5"#),
            tag == "dynamic",
            "{manifest}"
        );
        let min = graphbug(&[
            "repro",
            dynamo.to_str().unwrap(),
            "minify",
            "--backend",
            "fault:runtime@aten.relu.default",
        ]);
        assert!(min.status.success(), "{tag}: {}", text(&min.stderr));
        let minified = std::fs::read_to_string(dynamo.join("minified/graph.py")).unwrap();
        let want = if tag == "dynamic" {
            r#"input_2: "f32[s33, 16]" = torch.nn.functional.relu(input_1, inplace = False)"#
        } else {
            r#"input_2: "f32[5, 16]" = torch.nn.functional.relu(input_1, inplace = False)"#
        };
        assert!(minified.contains(want), "{tag}:\n{minified}");
        let run = graphbug(&["repro", dynamo.join("minified").to_str().unwrap(), "run"]);
        assert!(
            text(&run.stdout).starts_with("reproduced: "),
            "{tag}: {}{}",
            text(&run.stdout),
            text(&run.stderr)
        );
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn the_backend_is_found_by_name_through_its_entry_point() {
    let out = scratch("entry-point");
    let script = format!(
        "import torch\n\
         f = torch.compile(lambda x: torch.relu(x) * 2, backend='graphbug_capture',\n\
                           options={{'out': {out:?}, 'inner': 'eager'}})\n\
         print(f(torch.tensor([-1.0, 3.0])).tolist())\n"
    );
    let mut cmd = Command::new(python());
    cmd.args(["-c", &script]);
    let run = output_within(cmd, Duration::from_secs(300));
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_eq!(text(&run.stdout).trim(), "[0.0, 6.0]");
    let graph = std::fs::read_to_string(out.join("dynamo_000/graph.py")).unwrap();
    assert!(graph.contains("torch.relu"), "{graph}");
    // An unknown option is the user's mistake, named.
    let bad = script.replace("'inner': 'eager'", "'innr': 'eager'");
    let mut cmd = Command::new(python());
    cmd.args(["-c", &bad]);
    let run = output_within(cmd, Duration::from_secs(300));
    assert!(!run.status.success());
    assert!(
        text(&run.stderr).contains("unknown option(s) ['innr']"),
        "{}",
        text(&run.stderr)
    );
    let _ = std::fs::remove_dir_all(&out);
}

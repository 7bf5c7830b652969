//! `graphbug minify` end to end: backends, isolation, resuming a killed run, offloading.

mod common;

use common::Run;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

fn fixture(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
        .display()
        .to_string()
}

fn graphbug(args: &[&str]) -> Output {
    common::graphbug().args(args).run()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The JSON summary line `--json` ends with.
fn summary(out: &Output) -> serde_json::Value {
    let stdout = text(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("last line `{last}`: {e}\n{}", text(&out.stderr)))
}

fn call_nodes(graph_file: &Path) -> Vec<String> {
    let g = graphbug::ir::parse_graph(&std::fs::read_to_string(graph_file).unwrap()).unwrap();
    g.nodes
        .iter()
        .filter(|n| n.is_call_function())
        .map(|n| n.name.to_string())
        .collect()
}

#[test]
fn relu_accuracy_error_minifies_to_the_single_relu() {
    for model in ["mlp", "cnn"] {
        let dir = tempfile::tempdir().unwrap();
        let out = graphbug(&[
            "minify",
            &fixture(&format!("{model}/forward.py")),
            "--inputs",
            &fixture(&format!("{model}/inputs.npz")),
            "--backend",
            "relu_accuracy_error_TESTING_ONLY",
            "--check",
            "accuracy",
            "--out",
            dir.path().to_str().unwrap(),
            "--json",
        ]);
        assert!(out.status.success(), "{model}: {}", text(&out.stderr));
        let s = summary(&out);
        assert_eq!(s["end_nodes"], 1, "{model}");
        assert_eq!(
            call_nodes(&dir.path().join("minified/graph.py")),
            ["relu"],
            "{model}"
        );
        for key in ["start_nodes", "queries", "cache_hits", "seconds"] {
            assert!(s.get(key).is_some(), "{key}");
        }
        // The saved repro reproduces: the backend is off, eager is not.
        let g = dir.path().join("minified/graph.py");
        let inp = dir.path().join("minified/inputs.safetensors");
        let eager = dir.path().join("eager.safetensors");
        let ok = graphbug(&[
            "run",
            g.to_str().unwrap(),
            "--inputs",
            inp.to_str().unwrap(),
            "--save-outputs",
            eager.to_str().unwrap(),
        ]);
        assert!(ok.status.success());
        let bad = graphbug(&[
            "run",
            g.to_str().unwrap(),
            "--inputs",
            inp.to_str().unwrap(),
            "--backend",
            "relu_accuracy_error_TESTING_ONLY",
            "--compare",
            eager.to_str().unwrap(),
        ]);
        assert_eq!(bad.status.code(), Some(1), "{model}: {}", text(&bad.stdout));
    }
}

#[test]
fn offloading_to_disk_gives_the_same_result() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "minify",
            "--backend",
            "relu_runtime_error_TESTING_ONLY",
            "--check",
            "runtime",
            "--check-str",
            "ReluRuntimeError",
            "--json",
        ];
        let file = fixture("cnn/forward.py");
        args.insert(1, &file);
        args.extend_from_slice(extra);
        let out = graphbug(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        let graph: String = stdout
            .lines()
            .take_while(|l| !l.starts_with("minified "))
            .collect();
        let s = summary(&out);
        (graph, s["end_nodes"].clone(), s["queries"].clone())
    };
    let memory = run(&[]);
    assert_eq!(memory.1, 1);
    assert_eq!(run(&["--offload-to-disk"]), memory);
}

#[test]
fn a_crashing_backend_minifies_under_isolation() {
    let out = graphbug(&[
        "minify",
        &fixture("gpt4/forward.py"),
        "--backend",
        "fault:crash@aten.bmm.default",
        "--check",
        "runtime",
        "--isolate",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(summary(&out)["end_nodes"], 1);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("failure: runtime crash: injected crash fault at node `bmm`"),
        "{stdout}"
    );
    assert!(
        stdout.contains("bmm: \"f32[8, 16, 16]\" = torch.ops.aten.bmm.default("),
        "{stdout}"
    );
}

#[test]
fn a_hanging_backend_is_a_timeout_verdict() {
    let out = graphbug(&[
        "minify",
        &fixture("mlp/forward.py"),
        "--backend",
        "fault:hang@aten.gelu.default",
        "--check",
        "runtime",
        "--isolate",
        "--timeout",
        "1",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(summary(&out)["end_nodes"], 1);
    assert!(
        text(&out.stdout).contains("failure: runtime timeout: no answer within 1.000 s"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_killed_run_leaves_a_valid_repro_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let state = out_dir.join("state.json");
    // An external interestingness test that holds the first query asked after progress
    // was saved (until `release` appears, bounded), so the run is killed midway on a
    // machine of any speed: the kill follows an event, not a time.
    let (blocked, release) = (dir.path().join("blocked"), dir.path().join("release"));
    let script = dir.path().join("check.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ -f '{state}' ] && [ ! -f '{blocked}' ]; then\n  touch '{blocked}'\n  i=0\n  while [ ! -f '{release}' ] && [ $i -lt 6000 ]; do sleep 0.05; i=$((i+1)); done\nfi\ngrep -q 'torch.ops.aten.gelu.default' \"$1/graph.py\" && exit 1\nexit 0\n",
            state = state.display(),
            blocked = blocked.display(),
            release = release.display()
        ),
    )
    .unwrap();
    let args = |resume: bool| {
        let mut a = vec![
            "minify".to_string(),
            fixture("gpt4/forward.py"),
            "--check-command".into(),
            format!("sh {}", script.display()),
            "--out".into(),
            out_dir.display().to_string(),
            "--json".into(),
        ];
        if resume {
            a.push("--resume".into());
        }
        a
    };
    let mut child = common::graphbug()
        .args(args(false))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it while it waits for the query it asked after saving progress.
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    while !blocked.exists() && child.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "no query was asked after progress was saved within 600 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        blocked.exists(),
        "the run ended before it asked a query after saving progress"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::write(&release, "").unwrap();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let nodes_at_kill = saved["stats"]["end_nodes"].as_u64().unwrap();
    assert!(nodes_at_kill > 1, "the run finished before it was killed");
    // What was left is a valid repro: it parses and runs, and still calls gelu.
    let g = out_dir.join("minified/graph.py");
    let inp = out_dir.join("minified/inputs.safetensors");
    let ran = graphbug(&[
        "run",
        g.to_str().unwrap(),
        "--inputs",
        inp.to_str().unwrap(),
    ]);
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    assert!(std::fs::read_to_string(&g)
        .unwrap()
        .contains("aten.gelu.default"));

    let resumed = common::graphbug().args(args(true)).run();
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    assert!(text(&resumed.stderr).contains(&format!("resuming from {nodes_at_kill} nodes")));
    assert_eq!(summary(&resumed)["end_nodes"], 1);
    assert_eq!(call_nodes(&g).len(), 1);
}

#[test]
fn a_graph_that_does_not_fail_is_a_clear_error() {
    let out = graphbug(&[
        "minify",
        &fixture("mlp/forward.py"),
        "--backend",
        "eager",
        "--check",
        "runtime",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(
            "input graph does not fail (compile or runtime errors of backend eager (isolated)): passes"
        ),
        "{}",
        text(&out.stderr)
    );
    let out = graphbug(&["minify", &fixture("mlp/forward.py"), "--check", "runtime"]);
    assert!(text(&out.stderr).contains("--check runtime needs --backend NAME"));
}

/// A fault named by position (`#3`: the third gelu) is pinned to that node before the
/// minifier starts, so removing earlier gelus does not move it: the result is that one
/// gelu, from the backend name and from GRAPHBUG_INJECT_FAULT alike.
#[test]
fn a_fault_named_by_position_stays_on_its_node() {
    let graph = fixture("gpt4/forward.py");
    let inputs = fixture("gpt4/inputs.npz");
    let run = |backend: &str, env: Option<&str>| {
        let mut cmd = common::graphbug();
        cmd.args([
            "minify",
            &graph,
            "--inputs",
            &inputs,
            "--backend",
            backend,
            "--check",
            "accuracy",
            "--json",
        ]);
        match env {
            Some(spec) => cmd.env("GRAPHBUG_INJECT_FAULT", spec),
            None => cmd.env_remove("GRAPHBUG_INJECT_FAULT"),
        };
        cmd.run()
    };
    for (backend, env) in [
        ("fault:accuracy=0.5@aten.gelu.default#3", None),
        ("eager", Some("accuracy=0.5@aten.gelu.default#3")),
    ] {
        let out = run(backend, env);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("the fault is pinned to node `gelu_2`"),
            "{}",
            text(&out.stderr)
        );
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains("gelu_2: \"f32[2, 16, 256]\" = torch.ops.aten.gelu.default("),
            "{stdout}"
        );
        assert_eq!(summary(&out)["end_nodes"], 1, "{stdout}");
    }
}

/// Every file under `dir`, by path relative to it, with its bytes (through the links
/// `minified/` and `original/` are; not the hidden versions they point to).
fn files(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().unwrap().to_string_lossy().starts_with('.') {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.insert(path.strip_prefix(dir).unwrap().to_path_buf(), bytes);
            }
        }
    }
    out
}

/// `graphbug minify` of gpt4's forward graph for `backend`, writing into `out`, with
/// extra arguments; returns the process's output.
fn minify_gpt4(backend: &str, out: &Path, extra: &[&str]) -> Output {
    let graph = fixture("gpt4/forward.py");
    let inputs = fixture("gpt4/inputs.npz");
    let mut args = vec![
        "minify",
        &graph,
        "--inputs",
        &inputs,
        "--backend",
        backend,
        "--check",
        "runtime",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    graphbug(&args)
}

#[test]
fn any_number_of_workers_writes_the_same_files() {
    let dir = tempfile::tempdir().unwrap();
    // A runtime fault, and a crash (which kills the worker that meets it), at one gelu.
    for (k, backend) in [
        "fault:runtime@aten.gelu.default#3+slow:20",
        "fault:crash@aten.gelu.default#3",
    ]
    .into_iter()
    .enumerate()
    {
        let serial_dir = dir.path().join(format!("serial-{k}"));
        let serial = minify_gpt4(backend, &serial_dir, &["-j", "1"]);
        assert!(serial.status.success(), "{}", text(&serial.stderr));
        let parallel_dir = dir.path().join(format!("parallel-{k}"));
        let parallel = minify_gpt4(backend, &parallel_dir, &["-j", "3"]);
        assert!(parallel.status.success(), "{}", text(&parallel.stderr));
        let (s, p) = (summary(&serial), summary(&parallel));
        assert_eq!(s["end_nodes"], 1, "{backend}");
        assert_eq!(s["queries"], p["queries"], "{backend}");
        assert_eq!((s["jobs"].as_u64(), p["jobs"].as_u64()), (Some(1), Some(3)));
        assert_eq!(s["speculative"], 0);
        assert!(text(&parallel.stdout).contains("3 workers; speculation: "));
        // The minified graph, its inputs, the manifest, the state: byte for byte.
        let (fs, fp) = (files(&serial_dir), files(&parallel_dir));
        assert!(fs.len() > 3, "{:?}", fs.keys());
        assert_eq!(
            fs.keys().collect::<Vec<_>>(),
            fp.keys().collect::<Vec<_>>(),
            "{backend}"
        );
        for (path, bytes) in &fs {
            assert!(fp[path] == *bytes, "{backend}: {} differs", path.display());
        }
    }
}

#[test]
fn workers_started_by_a_launcher_survive_one_being_killed() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("launches");
    // Starts each worker as a local process, as `srun {cmd}` would on a node. One worker
    // (the one whose `mkdir` wins; they start side by side) is lost mid-query, as on a node
    // that fails: after its first two lines of output (`@hello`, `@ready`) its pipe
    // closes, and it dies as it answers its first query. Every worker has one: with two workers, both check the
    // original (how many queries each answers after that depends on the timing).
    let wrapper = dir.path().join("launch.sh");
    let lost = dir.path().join("lost");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{log}'\n\
             if mkdir '{lost}' 2>/dev/null; then\n  \"$@\" | {{ i=0; while IFS= read -r l; do printf '%s\\n' \"$l\"; i=$((i+1)); [ $i -ge 2 ] && exit 0; done; }}\n  exit 137\nfi\nexec \"$@\"\n",
            log = log.display(),
            lost = lost.display()
        ),
    )
    .unwrap();
    let backend = "fault:runtime@aten.gelu.default#3+slow:300";
    let local = minify_gpt4(backend, &dir.path().join("local"), &["-j", "2"]);
    assert!(local.status.success(), "{}", text(&local.stderr));
    let template = format!("sh {} {{cmd}}", wrapper.display());
    let launched = minify_gpt4(
        backend,
        &dir.path().join("launched"),
        &["-j", "2", "--worker-launcher", &template],
    );
    let stderr = text(&launched.stderr);
    assert!(launched.status.success(), "{stderr}");
    assert!(
        stderr.contains("relaunching it and asking again"),
        "{stderr}"
    );
    // The same search, to the same graph, despite the lost worker.
    assert_eq!(summary(&local)["queries"], summary(&launched)["queries"]);
    assert_eq!(
        std::fs::read(dir.path().join("local/minified/graph.py")).unwrap(),
        std::fs::read(dir.path().join("launched/minified/graph.py")).unwrap()
    );
    let launches = std::fs::read_to_string(&log).unwrap();
    // Two workers, and one more for the one that was lost; each took its spec on
    // standard input (`-`), as a worker on another machine must.
    assert!(launches.lines().count() >= 3, "{launches}");
    assert!(
        launches.lines().all(|l| l.ends_with("__minify-worker -")),
        "{launches}"
    );
}

#[test]
fn bad_worker_arguments_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let backend = "fault:runtime@aten.gelu.default#3";
    let cases: [(&[&str], &str); 4] = [
        (
            &["--worker-launcher", "srun -N1"],
            "has no {cmd} (or {args}) where the worker command goes",
        ),
        (
            &["--worker-launcher", "no-such-launcher {cmd}"],
            "no-such-launcher: not found",
        ),
        (
            &["-j", "2", "--no-isolate"],
            "--no-isolate runs them in this process",
        ),
        (&["-j", "0"], "0 is not in 1..=256"),
    ];
    for (k, (extra, expected)) in cases.into_iter().enumerate() {
        let out = minify_gpt4(backend, &dir.path().join(k.to_string()), extra);
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains(expected),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_flaky_check_is_measured_and_held_to_its_rate() {
    let dir = tempfile::tempdir().unwrap();
    // Interesting in every other run while the candidate calls gelu (the even ones): a
    // 50% flaky bug whose first run passes.
    let script = dir.path().join("flaky.sh");
    let counter = dir.path().join("runs");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nn=$(cat {c} 2>/dev/null || echo 0)\nn=$((n + 1))\necho $n > {c}\n\
             grep -q 'torch.ops.aten.gelu.default' \"$1/graph.py\" && [ $((n % 2)) -eq 0 ] && exit 1\nexit 0\n",
            c = counter.display()
        ),
    )
    .unwrap();
    let command = format!("sh {}", script.display());
    let gpt4 = fixture("gpt4/forward.py");
    // Its first two runs disagree (a failing first run would be run again at the search's
    // first candidate that does not fail), so the original is measured without being
    // asked.
    let out = graphbug(&["minify", &gpt4, "--check-command", &command, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains(
            "the original fails in 5 of 10 runs (50%); the result failed at least as often"
        ),
        "{said}"
    );
    let s = summary(&out);
    assert_eq!(
        (s["original_failures"].as_u64(), s["original_runs"].as_u64()),
        (Some(5), Some(10))
    );
    assert_eq!(s["end_nodes"], 1);
    // Asked for: `--repeat 4` measures 2 of 4; a repeat below 2 is refused.
    std::fs::remove_file(&counter).unwrap();
    let out = graphbug(&[
        "minify",
        &gpt4,
        "--check-command",
        &command,
        "--repeat",
        "4",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("fails in 2 of 4 runs (50%)"));
    let out = graphbug(&[
        "minify",
        &gpt4,
        "--check-command",
        &command,
        "--repeat",
        "1",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--repeat"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_structural_check_runs_nothing() {
    // Inputs no machine holds, and an op whose eager run fails: a contains: check reads
    // only the graph, so neither matters (no inputs made, no worker, no eager run).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("huge.py");
    std::fs::write(
        &file,
        r#"class Repro(torch.nn.Module):
    def forward(self, x: "f32[1000000000000]", y: "f32[3]"):
        relu: "f32[1000000000000]" = torch.ops.aten.relu.default(x);  x = None
        sin: "f32[1000000000000]" = torch.ops.aten.sin.default(relu);  relu = None
        mm: "f32[3]" = torch.ops.aten.mm.default(y, y);  y = None
        return (sin, mm)
"#,
    )
    .unwrap();
    let out = graphbug(&[
        "minify",
        file.to_str().unwrap(),
        "--check",
        "contains:aten.sin.default",
        "--json",
    ]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(summary(&out)["end_nodes"], 1, "{stderr}");
    assert!(!stderr.contains("eager run"), "{stderr}");
}

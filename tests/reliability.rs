//! Reliability: bad input of every kind to every command ends in a clear error naming the
//! culprit (no panic, no abort, no hang); crashes and hangs of a backend are survived;
//! `kill -9` at random points leaves no process, scratch directory or stale version
//! behind, and a resumed run ends byte for byte where an uninterrupted one does.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{command, entries, fixture, output_within, survivors, text, wait_within, Rng};

/// Every bad-input case must end within this.
const LIMIT: Duration = Duration::from_secs(60);

struct Case {
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// 1 for graphbug's errors, 2 for clap's usage errors.
    code: i32,
    /// What the error must say (the culprit).
    says: String,
}

fn case(args: &[&str], code: i32, says: &str) -> Case {
    Case {
        args: args.iter().map(|s| s.to_string()).collect(),
        env: Vec::new(),
        code,
        says: says.to_string(),
    }
}

fn with_env(mut c: Case, k: &str, v: &str) -> Case {
    c.env.push((k.to_string(), v.to_string()));
    c
}

/// Writes the bad files the matrix uses into `dir`.
fn bad_files(dir: &Path) -> PathBuf {
    let w = |name: &str, bytes: &[u8]| std::fs::write(dir.join(name), bytes).unwrap();
    let header = "class G(torch.nn.Module):\n    def forward(self, x: \"f32[4]\"):\n";
    w(
        "trunc.py",
        format!("{header}        relu = torch.ops.aten.relu.default(x").as_bytes(),
    );
    w("binary.py", b"\xff\xfe\x00garbage");
    w("empty.py", b"");
    w(
        "negative.py",
        b"class G(torch.nn.Module):\n    def forward(self, x: \"f32[-8, 32]\"):\n        return (x,)\n",
    );
    w(
        "freed.py",
        format!("{header}        relu = torch.ops.aten.relu.default(x);  x = None\n        neg = torch.ops.aten.neg.default(x)\n        return (neg,)\n").as_bytes(),
    );
    w(
        "huge.py",
        b"class G(torch.nn.Module):\n    def forward(self, x: \"f32[1000000000000]\"):\n        relu: \"f32[1000000000000]\" = torch.ops.aten.relu.default(x);  x = None\n        return (relu,)\n",
    );
    w(
        "overflow.py",
        b"class G(torch.nn.Module):\n    def forward(self, x: \"f32[4294967296, 4294967296]\"):\n        return (x,)\n",
    );
    w(
        "deep.py",
        format!(
            "{header}        y = torch.ops.aten.foo.default({}x{})\n        return (y,)\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        )
        .as_bytes(),
    );
    w(
        "corrupt.npz",
        &std::fs::read(fixture("mlp/inputs.npz")).unwrap()[..300],
    );
    w(
        "corrupt.safetensors",
        b"\x10\x00\x00\x00\x00\x00\x00\x00{\"x\": broken}",
    );
    // Inputs keyed neither by placeholder nor arg0..argN.
    let inputs = graphbug::aten::io::read_tensors(&fixture("mlp/inputs.npz")).unwrap();
    let renamed: Vec<(String, tch::Tensor)> = inputs
        .into_iter()
        .map(|(k, t)| (k.replace("arg", "foo"), t))
        .collect();
    graphbug::aten::io::write_tensors(&dir.join("foo.safetensors"), &renamed).unwrap();
    // A repro directory with a corrupt manifest.
    std::fs::create_dir_all(dir.join("badrepro")).unwrap();
    w("badrepro/manifest.json", b"{ not json");
    dir.to_path_buf()
}

#[test]
fn bad_input_to_every_command_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let d = bad_files(tmp.path());
    let p = |name: &str| d.join(name).display().to_string();
    let mlp = fixture("mlp/forward.py").display().to_string();
    let mlp_in = fixture("mlp/inputs.npz").display().to_string();
    let gpt4_in = fixture("gpt4/inputs.npz").display().to_string();
    let (trunc, binary, empty, negative, freed, huge, overflow, deep) = (
        p("trunc.py"),
        p("binary.py"),
        p("empty.py"),
        p("negative.py"),
        p("freed.py"),
        p("huge.py"),
        p("overflow.py"),
        p("deep.py"),
    );
    let nested = format!("{}eager", "fault:runtime@relu+".repeat(3000));
    let mut cases = Vec::new();
    // Every command that reads a graph, on every kind of bad graph file.
    let readers: [&[&str]; 9] = [
        &["fmt"],
        &["check"],
        &["check", "--meta"],
        &["run"],
        &["explain"],
        &["joint"],
        &["partition"],
        &["minify", "--check", "contains:aten.relu.default"],
        &["repro", "--backend", "eager"],
    ];
    for cmd in readers {
        let with = |file: &str, says: &str| {
            let mut args: Vec<&str> = cmd.to_vec();
            args.insert(1, file);
            case(&args, 1, says)
        };
        cases.push(with("/no/such/graph.py", "/no/such/graph.py"));
        cases.push(with(
            &trunc,
            "trunc.py: 3:45: expected `,` or `)`, found end of line",
        ));
        cases.push(with(
            &binary,
            "binary.py: not UTF-8 text: invalid utf-8 sequence of 1 bytes from index 0",
        ));
        cases.push(with(&empty, "empty.py: 1:1: expected `def`"));
        cases.push(with(&negative, "negative.py: 2:26: negative size `-8`"));
        cases.push(with(
            &freed,
            "freed.py: 4:42: `x` is used after `x = None` on line 3",
        ));
        cases.push(with(&overflow, "more bytes than a 64-bit size can count"));
        cases.push(with(&deep, "deep.py: 3:"));
    }
    // Graphs that cannot be given memory: named with their size, before any allocation.
    // (A contains: check makes no inputs: `a_structural_check_runs_nothing`.)
    for cmd in [
        vec!["run", huge.as_str()],
        vec!["explain", huge.as_str()],
        vec![
            "minify",
            huge.as_str(),
            "--backend",
            "eager",
            "--check",
            "runtime",
        ],
        vec!["repro", huge.as_str(), "--backend", "eager"],
    ] {
        cases.push(case(
            &cmd,
            1,
            "input `x` (f32[1000000000000]) needs 3.6 TiB of memory",
        ));
    }
    // Inputs and outputs files.
    let run = |extra: &[&str], code: i32, says: &str| {
        let mut args = vec!["run", mlp.as_str()];
        args.extend_from_slice(extra);
        case(&args, code, says)
    };
    cases.extend([
        run(&["--inputs", "/no/such/in.npz"], 1, "/no/such/in.npz"),
        run(&["--inputs", &p("corrupt.npz")], 1, "corrupt.npz"),
        run(
            &["--inputs", &p("corrupt.safetensors")],
            1,
            "corrupt.safetensors",
        ),
        run(
            &["--inputs", &p("foo.safetensors")],
            1,
            "or positional keys arg0..arg8",
        ),
        run(&["--inputs", &gpt4_in], 1, "graph has 9 inputs"),
        run(
            &["--inputs", &mlp_in, "--compare", "/no/such/out.npz"],
            1,
            "/no/such/out.npz",
        ),
        run(
            &["--inputs", &mlp_in, "--compare", &gpt4_in],
            1,
            "graph has 1 outputs",
        ),
        run(&["--device", "tpu"], 1, "unknown device type `tpu`"),
        run(&["--backend", "nope"], 1, "unknown backend `nope`"),
        run(
            &["--backend", "fault:explode@relu"],
            1,
            "unknown fault kind `explode`",
        ),
        run(
            &["--backend", "fault:runtime@aten.relu.default#999"],
            1,
            "#999 is out of range (#1 to #1)",
        ),
        run(
            &["--backend", "fault:runtime@hardtanh"],
            1,
            "no node of the graph calls `hardtanh`, and none is named so; the closest ops in the graph:",
        ),
        run(
            &["--backend", "aot_eager:bw=fault:runtime@softmax"],
            1,
            "in the backward graph of",
        ),
        run(
            &["--backend", &nested],
            1,
            "it nests 3000 parameterised backends; at most 16 may nest",
        ),
        run(&["--plugin", "/no/such/plugin.so"], 1, "/no/such/plugin.so"),
        with_env(
            run(
                &[],
                1,
                "`GRAPHBUG_INJECT_FAULT=runtime@softmax` names no node",
            ),
            "GRAPHBUG_INJECT_FAULT",
            "runtime@softmax",
        ),
        with_env(
            run(&[], 1, "GRAPHBUG_INJECT_FAULT=runtime-gelu"),
            "GRAPHBUG_INJECT_FAULT",
            "runtime-gelu",
        ),
    ]);
    for t in ["0", "-1", "nan", "inf", "1e300", "soon"] {
        cases.push(run(&[&format!("--timeout={t}")], 2, &format!("`{t}`")));
    }
    cases.push(run(
        &["--timeout", "2", "--no-isolate"],
        2,
        "cannot be used with",
    ));
    // Minify's options.
    let minify = |extra: &[&str], code: i32, says: &str| {
        let mut args = vec!["minify", mlp.as_str()];
        args.extend_from_slice(extra);
        case(&args, code, says)
    };
    cases.extend([
        minify(&[], 1, "say what fails"),
        minify(
            &["--check", "bogus", "--backend", "eager"],
            2,
            "unknown check `bogus`",
        ),
        minify(
            &["--check", "runtime"],
            1,
            "--check runtime needs --backend NAME",
        ),
        minify(&["--check", "contains:"], 2, "needs at least one op"),
        minify(
            &["--check", "contains:aten.relu.default", "--check-str", "("],
            1,
            "bad --check-str",
        ),
        minify(
            &["--check-command", "/no/such/command"],
            1,
            "the check command `/no/such/command` cannot be run (exit 127",
        ),
        minify(
            &["--check", "runtime", "--backend", "eager"],
            1,
            "input graph does not fail",
        ),
        minify(
            &["--check", "runtime", "--backend", "fault:runtime@softmax"],
            1,
            "names no node",
        ),
        minify(
            &[
                "--check",
                "runtime",
                "--backend",
                "eager",
                "--timeout",
                "nan",
            ],
            2,
            "`nan`",
        ),
        minify(
            &["--check", "runtime", "--backend", "eager", "--timeout", "0"],
            2,
            "`0`",
        ),
        minify(
            &["--check", "contains:aten.relu.default", "--resume"],
            2,
            "--out",
        ),
    ]);
    // Repro's options and directories.
    cases.extend([
        case(
            &["repro", &mlp, "--backend", "eager", "--level", "9"],
            2,
            "9 is not in 0..=4",
        ),
        with_env(
            case(
                &["repro", &mlp, "--backend", "eager"],
                1,
                "GRAPHBUG_REPRO_LEVEL=9: expected 0 to 4",
            ),
            "GRAPHBUG_REPRO_LEVEL",
            "9",
        ),
        case(&["repro", &mlp], 1, "--backend NAME is needed"),
        case(&["repro", &mlp, "run"], 1, "is not a repro directory"),
        case(
            &["repro", &d.display().to_string(), "run"],
            1,
            "a graphbug repro directory?",
        ),
        case(&["repro", &p("badrepro"), "run"], 1, "corrupt manifest"),
        case(&["repro", &p("badrepro")], 1, "say what to do with"),
        case(
            &["repro", &mlp, "--backend", "eager", "--timeout", "1e300"],
            2,
            "more than a week",
        ),
    ]);
    // The autodiff commands.
    cases.extend([
        case(&["joint", &mlp, "--requires-grad", "99"], 1, "99"),
        case(
            &[
                "partition",
                fixture("mlp/joint.py").to_str().unwrap(),
                "--partitioner",
                "min-cut",
                "--saved-budget",
                "2",
            ],
            1,
            "2",
        ),
        case(
            &[
                "partition",
                fixture("mlp/joint.py").to_str().unwrap(),
                "--partitioner",
                "fancy",
            ],
            1,
            "fancy",
        ),
    ]);

    let mut failures = Vec::new();
    for c in &cases {
        let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = c
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut cmd = command(&args, &env, tmp.path());
        cmd.current_dir(tmp.path());
        let out = output_within(cmd, LIMIT);
        let err = text(&out.stderr);
        let shown = |a: &[String]| {
            a.iter()
                .map(|s| {
                    if s.len() > 80 {
                        format!("{}...", &s[..80])
                    } else {
                        s.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        let problem = if out.status.code() != Some(c.code) {
            Some(format!("exit {:?}, expected {}", out.status, c.code))
        } else if !err.contains(&c.says) {
            Some(format!("stderr lacks {:?}", c.says))
        } else if err.contains("panicked") || err.contains("RUST_BACKTRACE") {
            Some("panicked".to_string())
        } else {
            None
        };
        if let Some(problem) = problem {
            failures.push(format!(
                "graphbug {} {:?}: {problem}\n{}",
                shown(&c.args),
                c.env,
                err.chars().take(600).collect::<String>()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
    // Nothing was left behind in the scratch root.
    assert_eq!(
        entries(&tmp.path().join("graphbug-scratch")),
        Vec::<String>::new()
    );
}

/// Whether `name` is a hidden version, link or temporary file graphbug writes next to an
/// output (`.<name>.<v|link|tmp>.<pid>.<n>`).
fn is_sibling_version(name: &str) -> bool {
    let parts: Vec<&str> = name.rsplitn(4, '.').collect();
    name.starts_with('.')
        && parts.len() == 4
        && parts[0].parse::<u64>().is_ok()
        && parts[1].parse::<u32>().is_ok()
        && ["v", "link", "tmp"].contains(&parts[2])
}

/// What `minify --out` and `repro --out` leave next to and inside their output: the links
/// and the versions they point at, no other version, link or temporary file.
fn assert_only_live_versions(dir: &Path) {
    for name in entries(dir) {
        if !is_sibling_version(&name) {
            continue;
        }
        let linked = entries(dir)
            .iter()
            .any(|other| std::fs::read_link(dir.join(other)).is_ok_and(|t| t == Path::new(&name)));
        assert!(linked, "{}: stale hidden entry `{name}`", dir.display());
    }
}

fn file_bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn minify_killed_at_random_points_leaves_nothing_and_resumes_to_the_same_result() {
    let gpt4 = fixture("gpt4/forward.py").display().to_string();
    let inputs = fixture("gpt4/inputs.npz").display().to_string();
    killed_minify_resumes(
        &[
            &gpt4,
            "--inputs",
            &inputs,
            "--backend",
            "fault:runtime@gelu#3",
        ],
        &[
            "minified/graph.py",
            "minified/inputs.safetensors",
            "original/graph.py",
        ],
    );
}

#[test]
fn xla_minify_killed_at_random_points_leaves_nothing_and_resumes_to_the_same_result() {
    // The workers run XLA's CPU plugin; a kill -9 of graphbug ends them too.
    let transformer = fixture("xla/hlo/transformer.hlo").display().to_string();
    killed_minify_resumes(
        &[
            &transformer,
            "--backend",
            "fault:runtime@node:dot_general.12+pjrt:cpu",
        ],
        &[
            "minified/program.hlo",
            "minified/inputs.safetensors",
            "original/program.hlo",
        ],
    );
}

/// Minifies `program` (its file and options) for a runtime failure under kill -9 at random
/// points, with one worker and with three: no process or scratch survives a kill, and the
/// resumed run ends with `files` byte for byte as an uninterrupted run's.
fn killed_minify_resumes(program: &[&str], files: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().display().to_string();
    // Runs with one worker and with three: the same search, the same files.
    let args = |out: &Path, resume: bool, jobs: usize| {
        let mut a = vec!["minify".to_string(), format!("-j{jobs}")];
        a.extend(program.iter().map(|s| s.to_string()));
        a.extend(
            [
                "--check",
                "runtime",
                "--out",
                &out.display().to_string(),
                "--json",
            ]
            .map(String::from),
        );
        if resume {
            a.push("--resume".into());
        }
        a
    };
    let run_to_end = |out: &Path, resume: bool, jobs: usize| {
        let a = args(out, resume, jobs);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let done = output_within(command(&a, &[], tmp.path()), LIMIT);
        assert!(done.status.success(), "{}", text(&done.stderr));
        done
    };
    let reference = tmp.path().join("reference");
    let started = std::time::Instant::now();
    run_to_end(&reference, false, 1);
    let whole = started.elapsed().as_millis() as u64;

    let out = tmp.path().join("out");
    let state = out.join("state.json");
    let saved_at = || std::fs::metadata(&state).and_then(|m| m.modified()).ok();
    let mut rng = Rng::new(12);
    let mut resumed_from_state = 0;
    for round in 0..10 {
        let a = args(&out, round > 0, 1 + 2 * (round % 2));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let before = saved_at();
        let mut child = command(&a, &[], tmp.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        if round % 3 == 1 {
            // Just after this run saved progress of its own (or ended): a kill that
            // lands between saves, whatever the machine's speed.
            let deadline = std::time::Instant::now() + LIMIT;
            while saved_at() == before
                && child.try_wait().unwrap().is_none()
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            std::thread::sleep(Duration::from_millis(rng.below(whole / 5 + 1)));
        } else {
            // Anywhere from start-up to the end of an uninterrupted run.
            std::thread::sleep(Duration::from_millis(whole / 10 + rng.below(whole)));
        }
        child.kill().unwrap(); // SIGKILL
        wait_within(&mut child, LIMIT).unwrap();
        let left = survivors(&marker);
        assert!(
            left.is_empty(),
            "round {round}: processes outlived the kill: {left:?}"
        );
        resumed_from_state += usize::from(out.join("state.json").exists());
    }
    assert!(
        resumed_from_state > 0,
        "no kill landed after progress was saved"
    );
    let done = run_to_end(&out, true, 3);
    // Byte for byte where the uninterrupted run ended.
    for file in files {
        assert!(
            file_bytes(&out.join(file)) == file_bytes(&reference.join(file)),
            "{file} differs after resuming:\n{}",
            text(&done.stderr)
        );
    }
    assert_only_live_versions(&out);
    // Every scratch directory of the killed runs is gone after the next start.
    assert_eq!(
        entries(&tmp.path().join("graphbug-scratch")),
        Vec::<String>::new()
    );
}

#[test]
fn repro_killed_at_random_points_leaves_no_stale_versions_or_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().display().to_string();
    let gpt4 = fixture("gpt4/forward.py").display().to_string();
    let inputs = fixture("gpt4/inputs.npz").display().to_string();
    let outs = tmp.path().join("outs");
    std::fs::create_dir_all(&outs).unwrap();
    let out = outs.join("repro_out");
    let args: Vec<String> = [
        "repro",
        &gpt4,
        "--inputs",
        &inputs,
        "--backend",
        "fault:runtime@gelu#3",
        "--out",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut rng = Rng::new(7);
    for round in 0..8 {
        let mut child = command(&a, &[], tmp.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100 + rng.below(1500)));
        child.kill().unwrap();
        wait_within(&mut child, LIMIT).unwrap();
        let left = survivors(&marker);
        assert!(
            left.is_empty(),
            "round {round}: processes outlived the kill: {left:?}"
        );
    }
    let done = output_within(command(&a, &[], tmp.path()), LIMIT);
    assert!(done.status.success(), "{}", text(&done.stderr));
    assert_only_live_versions(&outs);
    assert_only_live_versions(&out);
    let minified = std::fs::read_to_string(out.join("minified/graph.py")).unwrap();
    assert!(
        minified.contains("torch.ops.aten.gelu.default"),
        "{minified}"
    );
    assert_eq!(
        entries(&tmp.path().join("graphbug-scratch")),
        Vec::<String>::new()
    );
}

/// A one-relu graph, for hangs whose every query costs a full time limit.
fn relu_graph(dir: &Path) -> String {
    let g = dir.join("relu.py");
    std::fs::write(
        &g,
        "class G(torch.nn.Module):\n    def forward(self, x: \"f32[4, 8]\"):\n        relu: \"f32[4, 8]\" = torch.ops.aten.relu.default(x);  x = None\n        return (relu,)\n",
    )
    .unwrap();
    g.display().to_string()
}

#[test]
fn a_hanging_backend_is_bounded_by_the_default_time_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let g = relu_graph(tmp.path());
    // No --timeout: the original's run is bounded by max(30 s, 50x its eager run), the
    // re-check by 10 s.
    let start = std::time::Instant::now();
    let out = output_within(
        command(
            &[
                "minify",
                &g,
                "--backend",
                "fault:hang@relu",
                "--check",
                "runtime",
                "--json",
            ],
            &[],
            tmp.path(),
        ),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("failure: runtime timeout: no answer within 30.000 s"),
        "{stdout}"
    );
    assert!(
        text(&out.stderr).contains("at least 30 s"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        start.elapsed() < Duration::from_secs(90),
        "{:?}",
        start.elapsed()
    );
    assert!(survivors(&tmp.path().display().to_string()).is_empty());
}

#[test]
fn crashes_and_hangs_are_survived_by_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let mlp = fixture("mlp/forward.py").display().to_string();
    let mlp_in = fixture("mlp/inputs.npz").display().to_string();
    let quick = Duration::from_secs(60);
    let run = |args: &[&str]| output_within(command(args, &[], tmp.path()), quick);
    // run and explain: a classified failure, exit 1.
    for (args, says) in [
        (
            vec!["run", &mlp, "--backend", "fault:hang@relu", "--timeout", "1"],
            "runtime timeout in backend `fault:hang@relu+eager`: no answer within 1.000 s",
        ),
        (
            vec!["run", &mlp, "--backend", "fault:crash@relu"],
            "runtime crash in backend `fault:crash@relu+eager`: injected crash fault at node `relu`",
        ),
        (
            vec!["explain", &mlp, "--backend", "fault:hang@gelu", "--timeout", "1"],
            "runtime timeout in backend `explain:fault:hang@gelu+eager`",
        ),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(says), "{args:?}: {}", text(&out.stderr));
    }
    // repro: the hang is detected, recorded, minified to the relu, and its directory
    // reproduces and analyzes it without hanging.
    let repro_flow = |backend: &str, out_dir: &Path, extra: &[&str]| {
        let mut args = vec![
            "repro",
            &mlp,
            "--inputs",
            &mlp_in,
            "--backend",
            backend,
            "--out",
            out_dir.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    let out_dir = tmp.path().join("hang");
    let out = repro_flow("fault:hang@relu", &out_dir, &["--timeout", "1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("detected: runtime timeout in backend `fault:hang@relu`"),
        "{}",
        text(&out.stdout)
    );
    let minified = std::fs::read_to_string(out_dir.join("minified/graph.py")).unwrap();
    assert!(
        minified.contains("aten.relu.default") && !minified.contains("gelu"),
        "{minified}"
    );
    let again = run(&["repro", out_dir.to_str().unwrap(), "run", "--timeout", "1"]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).starts_with("reproduced: runtime timeout"),
        "{}",
        text(&again.stdout)
    );
    let analyzed = run(&[
        "repro",
        out_dir.to_str().unwrap(),
        "analyze",
        "--timeout",
        "1",
    ]);
    assert!(analyzed.status.success(), "{}", text(&analyzed.stderr));
    assert!(
        text(&analyzed.stdout).contains("the backend does not run: runtime timeout"),
        "{}",
        text(&analyzed.stdout)
    );
    // A crash directory minifies (isolated by default) and analyzes.
    let crash_dir = tmp.path().join("crash");
    let out = repro_flow("fault:crash@gelu", &crash_dir, &["--level", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let min = run(&["repro", crash_dir.to_str().unwrap(), "minify"]);
    assert!(min.status.success(), "{}", text(&min.stderr));
    let analyzed = run(&["repro", crash_dir.to_str().unwrap(), "analyze"]);
    assert!(
        text(&analyzed.stdout).contains("the backend does not run: runtime crash"),
        "{}",
        text(&analyzed.stdout)
    );
    assert!(survivors(&tmp.path().display().to_string()).is_empty());
    assert_eq!(
        entries(&tmp.path().join("graphbug-scratch")),
        Vec::<String>::new()
    );
}

/// Accuracy checks fail on wrong results of every kind: level 4 and `--check accuracy`
/// catch NaNs, infinities and small offsets that the float64 rule must not excuse.
#[test]
fn accuracy_checks_catch_wrong_results() {
    let tmp = tempfile::tempdir().unwrap();
    let mlp = fixture("mlp/forward.py").display().to_string();
    let mlp_in = fixture("mlp/inputs.npz").display().to_string();
    // (An offset before the layer norm would be normalized away: no wrong result.)
    for backend in [
        "fault:nan@relu",
        "fault:accuracy=0.01@addmm#3",
        "fault:accuracy=1e30@t#2",
    ] {
        let out_dir = tmp
            .path()
            .join(backend.replace([':', '@', '=', '#', '.'], "_"));
        let out = output_within(
            command(
                &[
                    "repro",
                    &mlp,
                    "--inputs",
                    &mlp_in,
                    "--backend",
                    backend,
                    "--level",
                    "4",
                    "--out",
                    out_dir.to_str().unwrap(),
                ],
                &[],
                tmp.path(),
            ),
            LIMIT,
        );
        assert!(out.status.success(), "{backend}: {}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("detected: accuracy wrong result"),
            "{backend}: {}",
            text(&out.stdout)
        );
        let minified = std::fs::read_to_string(out_dir.join("minified/graph.py")).unwrap();
        let op = backend
            .split('@')
            .nth(1)
            .unwrap()
            .split('#')
            .next()
            .unwrap();
        assert!(
            minified.contains(&format!("aten.{op}.default")),
            "{backend}: {minified}"
        );
    }
    // And the right answer is not flagged.
    let out = output_within(
        command(
            &[
                "repro",
                &mlp,
                "--inputs",
                &mlp_in,
                "--backend",
                "eager",
                "--level",
                "4",
                "--out",
                tmp.path().join("ok").to_str().unwrap(),
            ],
            &[],
            tmp.path(),
        ),
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("no failure"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn resume_and_reused_out_directories_are_safe() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = out.to_str().unwrap();
    let mlp = fixture("mlp/forward.py").display().to_string();
    let cnn = fixture("cnn/forward.py").display().to_string();
    let minify = |graph: &str, check: &str, extra: &[&str]| {
        let mut args = vec!["minify", graph, "--check", check, "--out", o];
        args.extend_from_slice(extra);
        output_within(command(&args, &[], tmp.path()), LIMIT)
    };
    // --resume with nothing saved starts over.
    let first = minify(&mlp, "contains:aten.relu.default", &["--resume"]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(
        text(&first.stderr).contains("nothing to resume")
            && text(&first.stderr).contains("starting over"),
        "{}",
        text(&first.stderr)
    );
    // --resume of another search is refused before any query, naming the difference.
    let other = minify(&mlp, "contains:aten.gelu.default", &["--resume"]);
    assert_eq!(other.status.code(), Some(1));
    assert!(
        text(&other.stderr).contains(
            "this state was saved by another search: the check: `contains:aten.relu.default` then, `contains:aten.gelu.default` now"
        ),
        "{}",
        text(&other.stderr)
    );
    let state = std::fs::read_to_string(out.join("state.json")).unwrap();
    assert!(
        state.contains("contains:aten.relu.default"),
        "the refused run changed the state"
    );
    // Another graph into the same directory is refused, and nothing is lost.
    let before = file_bytes(&out.join("minified/graph.py"));
    let elsewhere = minify(&cnn, "contains:aten.relu.default", &[]);
    assert_eq!(elsewhere.status.code(), Some(1));
    assert!(
        text(&elsewhere.stderr).contains("holds the minification of another graph"),
        "{}",
        text(&elsewhere.stderr)
    );
    assert_eq!(file_bytes(&out.join("minified/graph.py")), before);
    let original = std::fs::read_to_string(out.join("original/graph.py")).unwrap();
    assert!(
        original.contains("aten.addmm.default") && !original.contains("convolution"),
        "{original}"
    );
    // The same graph without --resume starts over: a new search replaces the old one.
    let again = minify(&mlp, "contains:aten.gelu.default", &[]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    let minified = std::fs::read_to_string(out.join("minified/graph.py")).unwrap();
    assert!(
        minified.contains("aten.gelu.default") && !minified.contains("relu"),
        "{minified}"
    );
    assert!(std::fs::read_to_string(out.join("state.json"))
        .unwrap()
        .contains("contains:aten.gelu.default"));
    assert_only_live_versions(&out);
}

//! `cargo xtask test`: set-up, then its stages (the workspace's tests, the examples, the
//! tests without libtorch, the docs check), each run whatever failed before it, their
//! output passed through as it comes; then a summary of every stage and every failing test.

use std::fs;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, Result};
use xtask::cargo_test::{self, Log, Stage};

use crate::setup::{self, Job};

/// `cargo`, as cargo named itself to xtask.
fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// The test binaries of the graphbug package that [`without_libtorch`] runs: the XLA side
/// and the pictures, which need no libtorch. The default build's stage leaves them out
/// rather than running them twice.
const WITHOUT_LIBTORCH_TESTS: [&str; 8] = [
    "xla",
    "xla_bisect",
    "xla_minify",
    "xla_repro",
    "xla_dump",
    "xla_share",
    "xla_iree",
    "draw",
];

/// Runs `cargo xtask test [ARGS]`: without ARGS, the workspace's tests (but those of
/// [`WITHOUT_LIBTORCH_TESTS`], run by [`without_libtorch`] instead) with `--no-fail-fast`,
/// the examples, the tests without libtorch and the docs check; with ARGS, `cargo test
/// --workspace ARGS` and the examples. Each stage is timed. Exit 1 if any stage failed.
pub fn test(root: &Path, args: &[String]) -> Result<ExitCode> {
    setup::ensure(root, Job::Test)?;
    // What tests could not run here (a missing plugin, engine or device), for the summary.
    let not_run_file = root.join("target/xtask-test-not-run.txt");
    let _ = fs::remove_file(&not_run_file);
    std::env::set_var(graphbug_run::not_run::NOT_RUN_ENV, &not_run_file);
    let mut stages = Vec::new();
    if args.is_empty() {
        let targets = default_build_targets(root)?;
        stages.push(timed(|| {
            let mut tests = cargo();
            tests.args(["test", "--workspace", "--no-fail-fast"]);
            tests.args(&targets).current_dir(root);
            let mut doc = cargo();
            doc.args(["test", "--workspace", "--no-fail-fast", "--doc"]);
            doc.current_dir(root);
            cargo_test_stage(
                format!(
                    "cargo test --workspace --no-fail-fast (--doc, and every target but tests/{{{}}}.rs)",
                    WITHOUT_LIBTORCH_TESTS.join(",")
                ),
                &mut [tests, doc],
            )
        }));
    } else {
        let mut cmd = cargo();
        cmd.args(["test", "--workspace"])
            .args(args)
            .current_dir(root);
        let name = format!("cargo test --workspace {}", args.join(" "));
        stages.push(timed(|| cargo_test_stage(name, &mut [cmd])));
    }
    stages.push(timed(|| examples(root)));
    if args.is_empty() {
        stages.push(timed(|| without_libtorch(root)));
        stages.push(timed(|| docs(root)));
    }
    let mut not_run: Vec<String> = fs::read_to_string(&not_run_file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    not_run.sort();
    not_run.dedup();
    let _ = std::io::stderr().flush();
    print!("{}", cargo_test::summary(&stages, &not_run));
    let _ = std::io::stdout().flush();
    Ok(if stages.iter().all(|s| s.ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `stage()`, with the time it took.
fn timed(stage: impl FnOnce() -> Stage) -> Stage {
    let start = Instant::now();
    let mut stage = stage();
    stage.time = start.elapsed();
    stage
}

/// The `cargo test` arguments that select every target `cargo test --workspace` runs but
/// the graphbug package's [`WITHOUT_LIBTORCH_TESTS`]: the libraries and binaries, and every
/// other test target by name (from `cargo metadata`). Doc tests are a second command
/// (cargo takes `--doc` alone); the examples are built and run by [`examples`].
fn default_build_targets(root: &Path) -> Result<Vec<String>> {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .output()
        .context("cannot run cargo metadata")?;
    anyhow::ensure!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut tests = Vec::new();
    let mut left_out = Vec::new();
    for package in json["packages"].as_array().into_iter().flatten() {
        for target in package["targets"].as_array().into_iter().flatten() {
            let Some(name) = target["name"].as_str() else {
                continue;
            };
            let is_test = target["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k == "test"));
            if !is_test {
                continue;
            }
            if WITHOUT_LIBTORCH_TESTS.contains(&name) {
                left_out.push(format!(
                    "{}/{name}",
                    package["name"].as_str().unwrap_or("?")
                ));
            } else {
                tests.push(name.to_string());
            }
        }
    }
    // A name cargo cannot tell apart by package: another package's test of that name
    // would be left out with graphbug's.
    left_out.sort();
    let expected: Vec<String> = {
        let mut v: Vec<String> = WITHOUT_LIBTORCH_TESTS
            .iter()
            .map(|t| format!("graphbug/{t}"))
            .collect();
        v.sort();
        v
    };
    anyhow::ensure!(
        left_out == expected,
        "the tests run without libtorch are {expected:?}, but cargo metadata has {left_out:?}: \
         rename a test that shares a name with them, or update WITHOUT_LIBTORCH_TESTS"
    );
    tests.sort();
    tests.dedup();
    let mut args: Vec<String> = ["--lib", "--bins"].map(String::from).to_vec();
    for t in tests {
        args.push("--test".to_string());
        args.push(t);
    }
    Ok(args)
}

/// Runs the `cargo test`s of `cmds` one after another, their output passed through, and
/// says how they ended, with each failing test and target and each binary's time.
fn cargo_test_stage(name: String, cmds: &mut [Command]) -> Stage {
    let mut log = Log::new();
    let mut statuses = Vec::new();
    for cmd in cmds.iter_mut() {
        // Cargo's standard error is read here: it keeps the colours it has on a terminal.
        if std::io::stderr().is_terminal() && std::env::var_os("CARGO_TERM_COLOR").is_none() {
            cmd.env("CARGO_TERM_COLOR", "always");
        }
        match cargo_test::tee(cmd, &mut log) {
            Ok(status) => statuses.push(status),
            Err(e) => {
                return Stage {
                    name,
                    ok: false,
                    note: format!("cannot run cargo: {e}"),
                    ..Stage::default()
                }
            }
        }
    }
    let failures = log.failures();
    let (passed, failed) = log.counts();
    let mut note = format!("{passed} passed, {failed} failed");
    let mut lines = failures.lines();
    let ok = statuses.iter().all(|s| s.success());
    if let Some(status) = statuses.iter().find(|s| !s.success()) {
        note.push_str(&format!("; {status}"));
        if lines.is_empty() {
            lines.push("no failing test named: a build error? (see above)".to_string());
        }
    }
    Stage {
        name,
        ok,
        note,
        failures: lines,
        time: Default::default(),
        binaries: log.times().to_vec(),
    }
}

/// Runs every `examples/*.rs` with `cargo run --example`, so examples stay working; one
/// failing does not stop the others.
fn examples(root: &Path) -> Stage {
    let name = "examples (cargo run --example, each of examples/*.rs)".to_string();
    let names = match example_names(root) {
        Ok(names) => names,
        Err(e) => {
            return Stage {
                name,
                ok: false,
                note: format!("{e:#}"),
                ..Stage::default()
            }
        }
    };
    let mut failures = Vec::new();
    for example in &names {
        eprintln!("xtask: running example {example}");
        let status = xtask::process::die_with_parent(&mut cargo())
            .args(["run", "--quiet", "--example", example])
            .current_dir(root)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => {
                eprintln!("xtask: example {example} failed ({s})");
                failures.push(format!("example {example}: {s}"));
            }
            Err(e) => failures.push(format!("example {example}: cannot run cargo: {e}")),
        }
    }
    Stage {
        name,
        ok: failures.is_empty(),
        note: format!("{} of {} failed", failures.len(), names.len()),
        failures,
        ..Stage::default()
    }
}

/// The examples' names: `examples/NAME.rs`, sorted.
fn example_names(root: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> = fs::read_dir(root.join("examples"))
        .context("cannot list examples/")?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".rs").map(str::to_string)
        })
        .collect();
    names.sort();
    Ok(names)
}

/// The XLA side as JAX and TensorFlow users build it: [`WITHOUT_LIBTORCH_TESTS`]
/// (`tests/xla.rs`, `tests/xla_minify.rs`, ..., `tests/draw.rs`) on a graphbug built
/// without libtorch (`--no-default-features`; a test checks that nothing links it). The
/// dependencies' artifacts are shared with the default build; the default binary is put
/// back afterwards.
fn without_libtorch(root: &Path) -> Stage {
    let mut args: Vec<&str> = vec![
        "test",
        "-p",
        "graphbug",
        "--no-default-features",
        "--no-fail-fast",
    ];
    for t in WITHOUT_LIBTORCH_TESTS {
        args.extend(["--test", t]);
    }
    let mut cmd = cargo();
    cmd.args(&args).current_dir(root);
    let mut stage = cargo_test_stage(format!("cargo {}", args.join(" ")), &mut [cmd]);
    let restored = xtask::process::die_with_parent(&mut cargo())
        .args(["build", "-p", "graphbug", "--bin", "graphbug"])
        .current_dir(root)
        .status();
    let broken = match restored {
        Ok(s) if s.success() => None,
        Ok(s) => Some(s.to_string()),
        Err(e) => Some(format!("cannot run cargo: {e}")),
    };
    if let Some(why) = broken {
        stage.ok = false;
        stage.failures.push(format!(
            "the default graphbug build after it (cargo build -p graphbug --bin graphbug): {why}"
        ));
    }
    stage
}

/// The docs check (`cargo xtask docs`).
fn docs(root: &Path) -> Stage {
    let name = "docs check (cargo xtask docs)".to_string();
    match crate::check_docs(root, Vec::new(), 300) {
        Ok(code) if code == ExitCode::SUCCESS => Stage {
            name,
            ok: true,
            ..Stage::default()
        },
        Ok(_) => Stage {
            name,
            ok: false,
            note: "the book, a link or a block failed (see above)".to_string(),
            ..Stage::default()
        },
        Err(e) => Stage {
            name,
            ok: false,
            note: format!("{e:#}"),
            ..Stage::default()
        },
    }
}

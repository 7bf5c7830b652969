//! `cargo xtask test`: set-up, then its stages (the workspace's tests, the examples, the
//! tests without libtorch, the docs check), each run whatever failed before it, their
//! output passed through as it comes; then a summary of every stage and every failing test.

use std::fs;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::{Context, Result};
use xtask::cargo_test::{self, Log, Stage};

use crate::setup::{self, Job};

/// `cargo`, as cargo named itself to xtask.
fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Runs `cargo xtask test [ARGS]`: without ARGS, `cargo test --workspace --no-fail-fast`,
/// the examples, the tests without libtorch and the docs check; with ARGS, `cargo test
/// --workspace ARGS` and the examples. Exit 1 if any stage failed.
pub fn test(root: &Path, args: &[String]) -> Result<ExitCode> {
    setup::ensure(root, Job::Test)?;
    // What tests could not run here (a missing plugin, engine or device), for the summary.
    let not_run_file = root.join("target/xtask-test-not-run.txt");
    let _ = fs::remove_file(&not_run_file);
    std::env::set_var(graphbug_run::not_run::NOT_RUN_ENV, &not_run_file);
    let mut stages = Vec::new();
    let mut cmd = cargo();
    cmd.args(["test", "--workspace"]);
    if args.is_empty() {
        cmd.arg("--no-fail-fast");
    }
    cmd.args(args).current_dir(root);
    let name = std::iter::once("cargo test --workspace".to_string())
        .chain(args.is_empty().then(|| "--no-fail-fast".to_string()))
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    stages.push(cargo_test_stage(name, &mut cmd));
    stages.push(examples(root));
    if args.is_empty() {
        stages.push(without_libtorch(root));
        stages.push(docs(root));
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

/// Runs the `cargo test` of `cmd`, its output passed through, and says how it ended, with
/// each failing test and target.
fn cargo_test_stage(name: String, cmd: &mut Command) -> Stage {
    // Cargo's standard error is read here: it keeps the colours it has on a terminal.
    if std::io::stderr().is_terminal() && std::env::var_os("CARGO_TERM_COLOR").is_none() {
        cmd.env("CARGO_TERM_COLOR", "always");
    }
    let mut log = Log::new();
    let status = match cargo_test::tee(cmd, &mut log) {
        Ok(status) => status,
        Err(e) => {
            return Stage {
                name,
                ok: false,
                note: format!("cannot run cargo: {e}"),
                failures: Vec::new(),
            }
        }
    };
    let failures = log.failures();
    let (passed, failed) = log.counts();
    let mut note = format!("{passed} passed, {failed} failed");
    let mut lines = failures.lines();
    if !status.success() {
        note.push_str(&format!("; {status}"));
        if lines.is_empty() {
            lines.push("no failing test named: a build error? (see above)".to_string());
        }
    }
    Stage {
        name,
        ok: status.success(),
        note,
        failures: lines,
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
                failures: Vec::new(),
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

/// The XLA side as JAX and TensorFlow users build it: `tests/xla.rs`,
/// `tests/xla_minify.rs`, `tests/xla_repro.rs`, `tests/xla_dump.rs`, `tests/xla_share.rs`
/// and `tests/draw.rs` on a graphbug built without libtorch (`--no-default-features`; the
/// test checks that nothing links it). The dependencies' artifacts are shared with the
/// default build; the default binary is put back afterwards.
fn without_libtorch(root: &Path) -> Stage {
    let args = [
        "test",
        "-p",
        "graphbug",
        "--no-default-features",
        "--no-fail-fast",
        "--test",
        "xla",
        "--test",
        "xla_minify",
        "--test",
        "xla_repro",
        "--test",
        "xla_dump",
        "--test",
        "xla_share",
        "--test",
        "draw",
    ];
    let mut cmd = cargo();
    cmd.args(args).current_dir(root);
    let mut stage = cargo_test_stage(format!("cargo {}", args.join(" ")), &mut cmd);
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
            note: String::new(),
            failures: Vec::new(),
        },
        Ok(_) => Stage {
            name,
            ok: false,
            note: "the book, a link or a block failed (see above)".to_string(),
            failures: Vec::new(),
        },
        Err(e) => Stage {
            name,
            ok: false,
            note: format!("{e:#}"),
            failures: Vec::new(),
        },
    }
}

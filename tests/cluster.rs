//! Workers started through real engines: a single-node Slurm cluster (`srun`) and an sshd
//! on localhost (`ssh`), from Debian's packages (`cargo xtask setup` installs them; where
//! they are not installed, the tests say so and skip). Each run must give the local `-j 1`
//! result, and every exit (success, failure, a query timeout, `kill -9`, Ctrl-C) must leave
//! no job, step, launcher or worker behind: Slurm's queue is empty within 5 s.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::engines::{missing_programs, Slurm, Sshd};
use common::{fixture, output_within, survivors, text, wait_within};

/// The tests run one at a time: each checks that no worker process is left.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How long after graphbug's exit the queue may still hold its jobs.
const EMPTY_WITHIN: Duration = Duration::from_secs(5);

/// What a minification ended with: the minified graph's text and the queries it counted.
#[derive(Debug, PartialEq)]
struct Result {
    graph: String,
    queries: serde_json::Value,
}

/// `graphbug minify` of `graph` (a fixture directory holding `forward.py` and
/// `inputs.npz`) for `backend`'s runtime failures, writing to `out`, with `extra` arguments
/// and `env`.
fn minify_command(
    graph: &str,
    backend: &str,
    out: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Command {
    let mut cmd = common::graphbug();
    cmd.arg("minify")
        .arg(fixture(&format!("{graph}/forward.py")))
        .arg("--inputs")
        .arg(fixture(&format!("{graph}/inputs.npz")))
        .args([
            "--backend",
            backend,
            "--check",
            "runtime",
            "--json",
            "--out",
        ])
        .arg(out)
        .args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs a minification to its end (at most 5 minutes).
fn minify(graph: &str, backend: &str, out: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    output_within(
        minify_command(graph, backend, out, extra, env),
        Duration::from_secs(300),
    )
}

/// The result of a minification that succeeded.
fn result_of(out: &Output, dir: &Path, what: &str) -> Result {
    assert!(out.status.success(), "{what} failed: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let summary: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("a JSON summary");
    Result {
        graph: std::fs::read_to_string(dir.join("minified/graph.py")).expect("a minified graph"),
        queries: summary["queries"].clone(),
    }
}

/// Checks that nothing of a run is left: the queue empties within [`EMPTY_WITHIN`] and
/// no worker process survives. Returns how long the queue took to empty.
fn nothing_left(slurm: &Slurm, what: &str) -> Duration {
    let took = slurm.wait_empty(EMPTY_WITHIN).unwrap_or_else(|jobs| {
        slurm.cancel_all();
        panic!("{what}: jobs left {EMPTY_WITHIN:?} after graphbug's exit: {jobs:?}")
    });
    let left = survivors("__minify-worker");
    assert!(left.is_empty(), "{what}: workers left: {left:?}");
    took
}

/// The state a run's jobs are in when [`interrupted`] ends it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Jobs {
    /// Both workers' jobs running, a query hung in one of them.
    Running,
    /// Its jobs waiting in the queue (a launcher with `--begin=now+600`).
    Pending,
}

/// Starts a run in the background and ends it with `signal` once its jobs are in the
/// state `ready` names, then checks that nothing is left.
fn interrupted(slurm: &Slurm, signal: i32, ready: Jobs, launcher: &str, dir: &Path, what: &str) {
    let (k, v) = slurm.env();
    let mut cmd = minify_command(
        "gpt4",
        "fault:hang@node:gelu_2",
        &dir.join(what),
        &["-j", "2", "--timeout", "30", "--worker-launcher", launcher],
        &[(k, &v)],
    );
    // A run started in the background (`nohup`, `&` in a script) inherits SIGINT and
    // SIGHUP ignored, as POSIX has background jobs ignore them: graphbug gets the
    // dispositions of a run in a terminal, whatever ran this test.
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (signal).
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            for signal in [libc::SIGINT, libc::SIGHUP, libc::SIGTERM] {
                libc::signal(signal, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("graphbug starts");
    let (state, count) = match ready {
        Jobs::Running => ("RUNNING", 2),
        Jobs::Pending => ("PENDING", 1),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let jobs = slurm
            .queue()
            .unwrap_or_default()
            .iter()
            .filter(|j| j.contains(state))
            .count();
        if jobs >= count {
            break;
        }
        assert!(Instant::now() < deadline, "{what}: no job was {state}");
        std::thread::sleep(Duration::from_millis(100));
    }
    if ready == Jobs::Running {
        std::thread::sleep(Duration::from_secs(2));
    }
    // SAFETY: the child is unreaped, so its pid is still its own.
    unsafe {
        libc::kill(child.id() as libc::pid_t, signal);
    }
    assert!(
        wait_within(&mut child, Duration::from_secs(10)).is_some(),
        "{what}: graphbug did not end"
    );
    let took = nothing_left(slurm, what);
    eprintln!(
        "{what}: queue empty {:.2} s after graphbug ended",
        took.as_secs_f64()
    );
}

#[test]
fn workers_through_srun_give_the_local_result_and_leave_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = missing_programs(&Slurm::PROGRAMS) {
        graphbug::run::not_run_here("the Slurm tests (tests/cluster.rs)", &why);
        return;
    }
    let slurm = Slurm::start(2).unwrap_or_else(|e| panic!("the Slurm cluster: {e}"));
    let (k, v) = slurm.env();
    let env = [(k, v.as_str())];
    let dir = tempfile::tempdir().unwrap();
    let srun = "srun -N1 -n1 --quiet {cmd}";
    let fault = "fault:runtime@node:gelu_2";

    // The same result through srun as locally with one worker, with two workers and with
    // more workers than the cluster has CPUs (the third waits in the queue, then joins or
    // is ended with the run).
    let local = minify("gpt4", fault, &dir.path().join("local"), &[], &[]);
    let local = result_of(&local, &dir.path().join("local"), "local -j 1");
    for jobs in ["2", "3"] {
        let out_dir = dir.path().join(format!("srun-{jobs}"));
        let started = Instant::now();
        let out = minify(
            "gpt4",
            fault,
            &out_dir,
            &["-j", jobs, "--worker-launcher", srun],
            &env,
        );
        let what = format!("srun -j {jobs}");
        assert_eq!(result_of(&out, &out_dir, &what), local, "{what}");
        let took = nothing_left(&slurm, &what);
        eprintln!(
            "{what}: {:.2} s; queue empty {:.2} s after the exit",
            started.elapsed().as_secs_f64(),
            took.as_secs_f64()
        );
    }

    // Hung queries time out and their jobs end (a hung worker held a CPU until the queue
    // deadlocked); the result is the local one.
    let hang = "fault:hang@node:relu";
    let timeout = ["--timeout", "2"];
    let local = minify("mlp", hang, &dir.path().join("hang-local"), &timeout, &[]);
    let local = result_of(&local, &dir.path().join("hang-local"), "local hang");
    let out = minify(
        "mlp",
        hang,
        &dir.path().join("hang-srun"),
        &["--timeout", "2", "-j", "2", "--worker-launcher", srun],
        &env,
    );
    assert_eq!(
        result_of(&out, &dir.path().join("hang-srun"), "srun hang"),
        local
    );
    nothing_left(&slurm, "hang through srun");

    // A launcher whose job never starts: a clear error with Slurm's reason, and no job.
    let started = Instant::now();
    let out = minify(
        "gpt4",
        fault,
        &dir.path().join("pending"),
        &[
            "-j",
            "2",
            "--worker-startup",
            "3",
            "--worker-launcher",
            "srun -N1 -n1 --quiet --begin=now+600 {cmd}",
        ],
        &env,
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr
            .contains("was not started within 3 s (the start-up limit: --worker-startup sets it)")
            && stderr.contains("PENDING (reason: BeginTime)"),
        "{stderr}"
    );
    assert!(!stderr.contains("eager run"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(30), "{stderr}");
    nothing_left(&slurm, "a pending launcher");

    // A launcher that fails is named, with its own message.
    let out = minify(
        "gpt4",
        fault,
        &dir.path().join("partition"),
        &["--worker-launcher", "srun -p nosuch {cmd}"],
        &env,
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "the worker launcher `srun -p nosuch {cmd}` ended (exit code 1) before the worker ran"
        ) && stderr.contains("Invalid partition"),
        "{stderr}"
    );
    assert!(!stderr.contains("eager run"), "{stderr}");
    nothing_left(&slurm, "a bad partition");

    // kill -9, Ctrl-C (SIGINT), SIGTERM (a CI runner's or an outer job's end) and SIGHUP
    // (a closed terminal) mid-run, with a query hung in a worker, and while the jobs wait
    // in the queue: every job graphbug asked for is cancelled.
    let queued = "srun -N1 -n1 --quiet --begin=now+600 {cmd}";
    for (signal, name) in [
        (libc::SIGKILL, "kill -9"),
        (libc::SIGINT, "ctrl-c"),
        (libc::SIGTERM, "sigterm"),
        (libc::SIGHUP, "sighup"),
    ] {
        interrupted(&slurm, signal, Jobs::Running, srun, dir.path(), name);
        let queued_name = format!("{name} queued");
        interrupted(
            &slurm,
            signal,
            Jobs::Pending,
            queued,
            dir.path(),
            &queued_name,
        );
    }
}

#[test]
fn workers_through_ssh_give_the_local_result_and_leave_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = missing_programs(&Sshd::PROGRAMS) {
        graphbug::run::not_run_here("the ssh tests (tests/cluster.rs)", &why);
        return;
    }
    let sshd = Sshd::start().unwrap_or_else(|e| panic!("sshd: {e}"));
    let launcher = format!("{} {{cmd}}", sshd.ssh());
    let dir = tempfile::tempdir().unwrap();
    let hang = "fault:hang@node:relu";
    let timeout = ["--timeout", "2"];
    let local = minify("mlp", hang, &dir.path().join("local"), &timeout, &[]);
    let local = result_of(&local, &dir.path().join("local"), "local");
    let out = minify(
        "mlp",
        hang,
        &dir.path().join("ssh"),
        &["--timeout", "2", "-j", "2", "--worker-launcher", &launcher],
        &[],
    );
    assert_eq!(result_of(&out, &dir.path().join("ssh"), "ssh -j 2"), local);
    let left = survivors("__minify-worker");
    assert!(left.is_empty(), "workers left: {left:?}");

    // kill -9 with a hung query: the remote worker ends with its input.
    let mut child = minify_command(
        "gpt4",
        "fault:hang@node:gelu_2",
        &dir.path().join("killed"),
        &["-j", "2", "--timeout", "30", "--worker-launcher", &launcher],
        &[],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("graphbug starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while common::processes_mentioning("__minify-worker -").len() < 2 {
        assert!(Instant::now() < deadline, "the ssh workers never ran");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    child.kill().unwrap();
    child.wait().unwrap();
    let left = survivors("__minify-worker");
    assert!(left.is_empty(), "workers left after kill -9: {left:?}");
}

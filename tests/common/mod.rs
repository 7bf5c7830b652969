//! Helpers shared by the reliability tests of the `graphbug` binary.

#![allow(dead_code)]

pub mod engines;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A file under `tests/fixtures`.
pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// Lossy UTF-8.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// How long a test lets one graphbug command run before it kills it and fails: generous,
/// so that a loaded machine passes, and still an end to a hang.
pub const LIMIT: Duration = Duration::from_secs(900);

/// graphbug's own settings a developer's shell may hold, which would change what a test
/// sees (a fault injected into every backend, another repro level): every test's graphbug
/// starts without them, unless the test sets one itself.
const SHELL_SETTINGS: [&str; 10] = [
    "GRAPHBUG_INJECT_FAULT",
    "GRAPHBUG_PLUGINS",
    "GRAPHBUG_REPRO_LEVEL",
    "GRAPHBUG_REPRO_AFTER",
    "GRAPHBUG_REPRO_FIRST_RUN",
    "GRAPHBUG_PASS_GRAPHS",
    "GRAPHBUG_PASS_LOG",
    "GRAPHBUG_PROGRESS_DELAY",
    "GRAPHBUG_SUPERVISED",
    "GRAPHBUG_STAGE_FILE",
];

/// The graphbug binary in the tests' one environment: how every test file starts it
/// (then [`Run::run`] it, or spawn it to watch or kill it).
pub fn graphbug() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_graphbug"));
    for setting in SHELL_SETTINGS {
        cmd.env_remove(setting);
    }
    cmd
}

/// Running a command the way tests do.
pub trait Run {
    /// Runs it to its end within [`LIMIT`], its output collected: a command that hangs
    /// fails the test.
    fn run(&mut self) -> Output;
}

impl Run for Command {
    fn run(&mut self) -> Output {
        bounded_output(self, LIMIT)
    }
}

/// A `graphbug` command with `TMPDIR` set to `tmp` (so its scratch directories can be
/// watched) and `env` added.
pub fn command(args: &[&str], env: &[(&str, &str)], tmp: &Path) -> Command {
    let mut cmd = graphbug();
    cmd.args(args).env("TMPDIR", tmp);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs `graphbug args` to its end with `TMPDIR` set to `tmp` (see [`command`]).
pub fn run_in_tmp(args: &[&str], tmp: &Path) -> Output {
    command(args, &[], tmp).run()
}

/// What a run said: its standard output, then its standard error.
pub fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `cmd` to its end, killing it after `limit`: a command that hangs fails the test.
pub fn output_within(mut cmd: Command, limit: Duration) -> Output {
    bounded_output(&mut cmd, limit)
}

/// [`output_within`] of a command the caller keeps.
fn bounded_output(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the graphbug binary runs");
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let status = wait_within(&mut child, limit).unwrap_or_else(|| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{cmd:?} did not finish within {limit:?}")
    });
    Output {
        status,
        stdout: reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

/// Waits at most `limit` for `child`.
pub fn wait_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().expect("waiting works") {
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Processes whose command line mentions `marker` (other than this test process).
pub fn processes_mentioning(marker: &str) -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = text(&raw).replace('\0', " ");
        // Zombies (already dead, not yet reaped) have an empty command line.
        if cmdline.contains(marker) {
            found.push((pid, cmdline));
        }
    }
    found
}

/// Waits up to two seconds for every process mentioning `marker` to be gone; returns
/// those still alive.
pub fn survivors(marker: &str) -> Vec<(u32, String)> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let left = processes_mentioning(marker);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` has ended (gone, or a zombie not yet reaped).
pub fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// The children of process `pid` (started by any of its threads).
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut children: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|task| {
            std::fs::read_to_string(task.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect();
    children.sort();
    children
}

/// Entries of `dir`, sorted (empty when it does not exist).
pub fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A small deterministic generator (xorshift64*) for kill times and mutations.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

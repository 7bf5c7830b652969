//! Child processes that cannot outlive graphbug, and waits that cannot outlast a limit.
//!
//! Every process graphbug starts (isolation workers, supervised runs, check commands) is
//! started through [`spawn`]: on Linux it gets `PR_SET_PDEATHSIG = SIGKILL`, so it dies
//! with the graphbug process even after `kill -9`, and optionally a process group of its
//! own, so that a timeout kills everything it started. Waits go through [`wait_bounded`].
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that started the child exits, so children
//! are started by one thread that lives as long as the process: a worker started from a
//! short-lived thread (parallel minification starts its workers side by side) would
//! otherwise be killed when that thread ends.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::failure::{Failure, Stage, Symptom};

pub use crate::stage::{last_stage, report_stage, STAGE_FILE_ENV};

/// A request to the spawning thread, and where its answer goes.
type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Starts `cmd` as a child that is killed when this process dies (even by `kill -9`);
/// with `own_group`, the child also leads a new process group (see [`kill`]). Children are
/// started by one thread that lives as long as the process (see the module's notes).
pub fn spawn(cmd: Command, own_group: bool) -> io::Result<Child> {
    spawn_guarded(cmd, own_group, libc::SIGKILL)
}

/// Starts an engine's launcher (`srun`, `ssh`, `kubectl exec`) leading a process group of
/// its own, told to terminate (SIGTERM) when this process dies, even by `kill -9`: a
/// launcher ends its remote work when it is terminated or its input ends, whereas SIGKILL
/// would leave it running (srun killed with its helper leaves its job step for good).
pub fn spawn_launcher(cmd: Command) -> io::Result<Child> {
    spawn_guarded(cmd, true, libc::SIGTERM)
}

/// Starts `cmd` through the spawning thread; the child gets `death_signal` when this
/// process dies.
fn spawn_guarded(
    mut cmd: Command,
    own_group: bool,
    death_signal: libc::c_int,
) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("graphbug-spawner".into())
            .spawn(move || {
                for (mut cmd, answer) in rx {
                    let _ = answer.send(cmd.spawn());
                }
            })
            .expect("the spawning thread starts");
        Mutex::new(tx)
    });
    guard(&mut cmd, own_group, death_signal);
    let (tx, rx) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, tx))
        .map_err(|_| io::Error::other("the spawning thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("the spawning thread is gone"))?
}

/// Makes `cmd` start a child that gets `death_signal` when the thread that starts it ends;
/// with `own_group`, the child also leads a new process group.
fn guard(cmd: &mut Command, own_group: bool, death_signal: libc::c_int) -> &mut Command {
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (prctl, getppid, setpgid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, death_signal) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died before prctl took effect.
                if libc::getppid() as u32 != parent {
                    libc::_exit(1);
                }
            }
            #[cfg(not(target_os = "linux"))]
            let _ = (parent, death_signal);
            if own_group && libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// Names the process that started graphbug when that process could not make graphbug die
/// with it (Python's `subprocess` with threads running cannot set `PR_SET_PDEATHSIG` in the
/// child): its pid. See [`die_with_starter`].
pub const DIE_WITH_ENV: &str = "GRAPHBUG_DIE_WITH";

/// Where [`DIE_WITH_ENV`] names this process's parent, asks to be killed (SIGKILL) when
/// the thread that started it ends, even by `kill -9` (graphbug's own children die with
/// it in turn), and is an error if that process is gone already. The variable is then
/// removed, so that the commands graphbug starts (check commands, scripts) do not read
/// it. Call it first in `main`, before any thread starts.
pub fn die_with_starter() -> Result<(), String> {
    let Some(value) = std::env::var_os(DIE_WITH_ENV) else {
        return Ok(());
    };
    std::env::remove_var(DIE_WITH_ENV);
    let pid: u32 = value
        .to_str()
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("{DIE_WITH_ENV}={value:?} is not a process id"))?;
    #[cfg(target_os = "linux")]
    // SAFETY: prctl and getppid with plain integer arguments.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return Err(format!(
                "{DIE_WITH_ENV}: cannot ask to die with the starter: {}",
                io::Error::last_os_error()
            ));
        }
        // The starter may have died before prctl took effect.
        let parent = libc::getppid() as u32;
        if parent != pid {
            return Err(format!(
                "{DIE_WITH_ENV}={pid} names the process that started graphbug, but its parent is {parent}: the starter is gone, or the variable was passed on"
            ));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = pid;
    Ok(())
}

/// Kills `child` and, when it leads its own process group, everything in that group;
/// then reaps it.
pub fn kill(child: &mut Child, own_group: bool) {
    if own_group {
        // SAFETY: killpg with the child's pid as group id; the group exists while the
        // child is unreaped.
        unsafe {
            libc::killpg(child.id() as libc::pid_t, libc::SIGKILL);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// How long each step of [`end_gracefully`] waits for the child before the next.
pub const GRACE: Duration = Duration::from_secs(1);

/// Ends `child` the way engines expect a worker to end: its input must already be closed
/// (the caller dropped every handle on it), which ends a worker and, through the engine,
/// its job; after `grace`, SIGTERM (to its group with `own_group`), which `srun`, `ssh` and
/// `kubectl` pass on as the end of their remote work; after another `grace`, SIGKILL to the
/// child and its group. Then reaps it. Returns how it ended.
pub fn end_gracefully(child: &mut Child, own_group: bool, grace: Duration) -> Option<ExitStatus> {
    let pid = child.id() as libc::pid_t;
    let signal = |sig: libc::c_int| {
        // SAFETY: kill/killpg with the unreaped child's pid (it leads its group with
        // `own_group`), which cannot have been reused yet.
        unsafe {
            if own_group {
                libc::killpg(pid, sig);
            } else {
                libc::kill(pid, sig);
            }
        }
    };
    for sig in [libc::SIGTERM, libc::SIGKILL] {
        if let Ok(Ended::Exited(status)) = wait_until(child, Instant::now() + grace) {
            return Some(status);
        }
        signal(sig);
    }
    child.wait().ok()
}

/// Children being ended on threads of their own (see [`end_in_background`]).
static ENDING: (Mutex<usize>, std::sync::Condvar) = (Mutex::new(0), std::sync::Condvar::new());

/// [`end_gracefully`] on a thread of its own, so that the caller goes on at once (a
/// timed-out worker's end takes up to two grace periods); [`wait_for_endings`] waits for
/// the ends still under way.
pub fn end_in_background(mut child: Child, own_group: bool) {
    *ENDING.0.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    let ended = std::thread::Builder::new()
        .name("graphbug-end-child".into())
        .spawn(move || {
            end_gracefully(&mut child, own_group, GRACE);
            let mut left = ENDING.0.lock().unwrap_or_else(|e| e.into_inner());
            *left -= 1;
            ENDING.1.notify_all();
        });
    if ended.is_err() {
        // No thread to spare (the child went with the closure, and its input with it):
        // it gets its death signal when this process exits.
        *ENDING.0.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
    }
}

/// Waits at most `limit` for the children [`end_in_background`] is ending; returns how
/// many are still under way (they get their death signal when this process exits).
pub fn wait_for_endings(limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    let mut left = ENDING.0.lock().unwrap_or_else(|e| e.into_inner());
    while *left > 0 {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        left = ENDING
            .1
            .wait_timeout(left, deadline - now)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    *left
}

/// Waits for `child` until `deadline`; `TimedOut` when it is still running then (it is
/// not killed). The end is seen the moment it happens: a thread blocks in `waitid` with
/// `WNOWAIT` (the child stays to be reaped here), and this thread waits for its word up to
/// the deadline. Polling woke up to 50 ms late, a tenth of a short XLA run.
fn wait_until(child: &mut Child, deadline: Instant) -> io::Result<Ended> {
    if let Some(status) = child.try_wait()? {
        return Ok(Ended::Exited(status));
    }
    let pid = child.id() as libc::id_t;
    let (ended, seen) = std::sync::mpsc::channel();
    let watcher = std::thread::Builder::new()
        .name("graphbug-wait".into())
        .spawn(move || loop {
            // SAFETY: waitid writes only into `info`, which lives on this stack.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let r =
                unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
            if r == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                let _ = ended.send(());
                return;
            }
        });
    if watcher.is_ok() {
        let left = deadline.saturating_duration_since(Instant::now());
        // Word or not (a watcher that could not wait says so at once), try_wait decides.
        let _ = seen.recv_timeout(left);
        if let Some(status) = child.try_wait()? {
            return Ok(Ended::Exited(status));
        }
        if Instant::now() >= deadline {
            return Ok(Ended::TimedOut);
        }
    }
    poll_until(child, deadline)
}

/// [`wait_until`] by polling, for when no watcher thread can be had.
fn poll_until(child: &mut Child, deadline: Instant) -> io::Result<Ended> {
    let mut nap = Duration::from_millis(1);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Ended::Exited(status));
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(Ended::TimedOut);
        }
        std::thread::sleep(nap.min(deadline - now));
        nap = (nap * 2).min(Duration::from_millis(50));
    }
}

/// How a bounded wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The child exited or was killed by a signal.
    Exited(ExitStatus),
    /// The limit passed; the child (and its group) was killed.
    TimedOut,
}

/// Waits for `child` at most `limit`, killing it (and its group with `own_group`) when the
/// limit passes.
pub fn wait_bounded(child: &mut Child, limit: Duration, own_group: bool) -> io::Result<Ended> {
    let ended = wait_until(child, Instant::now() + limit)?;
    if ended == Ended::TimedOut {
        kill(child, own_group);
    }
    Ok(ended)
}

/// `child`'s output (its stdout and stderr piped), the pipes drained while
/// [`wait_bounded`] waits for it; `None` when `limit` passed and the child (and its group
/// with `own_group`) was killed.
pub fn output_bounded(
    mut child: Child,
    limit: Duration,
    own_group: bool,
) -> io::Result<Option<std::process::Output>> {
    use std::io::Read;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut b);
            }
            b
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    Ok(match wait_bounded(&mut child, limit, own_group)? {
        Ended::Exited(status) => Some(std::process::Output {
            status,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        }),
        Ended::TimedOut => None,
    })
}

/// The executable `name` as `PATH` finds it.
pub fn find_in_path(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// `signal 6 (SIGABRT)` for a status ended by a signal, `exit code 3` otherwise.
pub fn describe_status(status: &ExitStatus) -> String {
    if let Some(sig) = status.signal() {
        let name = match sig {
            libc::SIGABRT => " (SIGABRT)",
            libc::SIGSEGV => " (SIGSEGV)",
            libc::SIGBUS => " (SIGBUS)",
            libc::SIGFPE => " (SIGFPE)",
            libc::SIGILL => " (SIGILL)",
            libc::SIGKILL => " (SIGKILL)",
            libc::SIGTERM => " (SIGTERM)",
            _ => "",
        };
        return format!("killed by signal {sig}{name}");
    }
    match status.code() {
        Some(c) => format!("exit code {c}"),
        None => status.to_string(),
    }
}

/// This program's file, to start workers and supervised re-runs with. When the file was
/// replaced while graphbug runs (a rebuild), Linux reports the old one as `PATH
/// (deleted)`; the new file at `PATH` is the same program and is used.
pub fn own_exe() -> io::Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    let text = exe.to_string_lossy();
    if let Some(original) = text.strip_suffix(" (deleted)") {
        let path = std::path::PathBuf::from(original);
        // The new file may be a moment away (a link being replaced).
        for _ in 0..100 {
            if path.exists() {
                return Ok(path);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    Ok(exe)
}

/// Environment variable marking a supervised re-run of graphbug's own command line.
pub const SUPERVISED_ENV: &str = "GRAPHBUG_SUPERVISED";

/// Whether this process is a supervised re-run (see [`rerun_self`]).
pub fn is_supervised() -> bool {
    std::env::var_os(SUPERVISED_ENV).is_some()
}

/// How a supervised re-run ended.
#[derive(Debug)]
pub struct Supervised {
    /// Exit status, or the timeout.
    pub ended: Ended,
    /// The stage it last reported (see [`report_stage`]).
    pub stage: Option<String>,
    /// How long it ran.
    pub elapsed: Duration,
    /// The last non-empty line it wrote to standard error (which is passed through).
    pub last_words: String,
}

/// Runs this program again with the same arguments (and `env` added) as a child that
/// dies with this process, inheriting standard input and output, for at most `limit`.
/// The child sees [`SUPERVISED_ENV`]; its stage file lives in `scratch`.
pub fn rerun_self(
    env: &[(&str, &Path)],
    limit: Duration,
    scratch: &Path,
) -> io::Result<Supervised> {
    let exe = own_exe()?;
    let stage_file = scratch.join("stage");
    let mut cmd = Command::new(exe);
    cmd.args(std::env::args_os().skip(1))
        .env(SUPERVISED_ENV, "1")
        .env(STAGE_FILE_ENV, &stage_file);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = spawn(cmd, false)?;
    // Pass standard error through, remembering its last line for the failure message.
    let stderr = child.stderr.take().expect("stderr is piped");
    let relay = std::thread::spawn(move || {
        let mut last = String::new();
        let mut out = io::stderr();
        for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
            let _ = writeln!(out, "{line}");
            if !line.trim().is_empty() {
                last = line;
            }
        }
        last
    });
    let ended = wait_bounded(&mut child, limit, false)?;
    // The pipe closes when the child is gone (its own children die with it).
    let last_words = relay.join().unwrap_or_default();
    Ok(Supervised {
        ended,
        stage: last_stage(&stage_file),
        elapsed: started.elapsed(),
        last_words,
    })
}

impl Supervised {
    /// Why the run did not end by itself, when it did not: `killed by signal 6 (SIGABRT)
    /// during <stage>: <last words>` or `no answer within 2.000 s during <stage>`. `None`
    /// when it exited with a code (its own output tells what happened).
    pub fn lost(&self, limit: Duration) -> Option<String> {
        let during = self
            .stage
            .as_deref()
            .map(|s| format!(" during {s}"))
            .unwrap_or_default();
        match self.ended {
            Ended::TimedOut => Some(no_answer(limit, &during)),
            Ended::Exited(status) if status.code().is_none() => {
                let words = if self.last_words.is_empty() {
                    String::new()
                } else {
                    format!(": {}", self.last_words)
                };
                Some(format!("{}{during}{words}", describe_status(&status)))
            }
            Ended::Exited(_) => None,
        }
    }

    /// Whether the run was in a training step's backward when it last reported.
    pub fn in_backward(&self) -> bool {
        self.stage.as_deref() == Some("backward")
    }

    /// The failure of `backend` this run shows when it did not end by itself: killed by a
    /// signal (a crash) or stopped at `limit` (a timeout), at the stage it last reported.
    /// `None` when it exited with a code (its own output tells what happened).
    /// A run lost in a training step's backward says so ([`Self::in_backward`]).
    pub fn failure(&self, backend: &str, limit: Duration) -> Option<Failure> {
        let stage = match self.stage.as_deref() {
            Some("runtime" | "backward") => Stage::Runtime,
            _ => Stage::Compile,
        };
        match self.ended {
            Ended::TimedOut => Some(Failure::new(
                backend,
                stage,
                Symptom::Timeout,
                no_answer(limit, ""),
            )),
            Ended::Exited(status) if status.code().is_none() => Some(Failure::new(
                backend,
                stage,
                Symptom::Crash,
                if self.last_words.is_empty() {
                    format!(
                        "the process running the backend was {}",
                        describe_status(&status)
                    )
                } else {
                    format!("{} ({})", self.last_words, describe_status(&status))
                },
            )),
            Ended::Exited(_) => None,
        }
    }
}

/// `no answer within 2.000 s<during> (the time limit; --timeout sets it)`.
fn no_answer(limit: Duration, during: &str) -> String {
    format!(
        "no answer within {:.3} s{during} (the time limit; --timeout sets it)",
        limit.as_secs_f64()
    )
}

pub use graphbug_files::alive_since;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executables_are_found_in_path() {
        assert!(find_in_path("sh").is_some());
        assert!(find_in_path("surely-not-an-executable-xyz").is_none());
    }

    #[test]
    fn waits_are_bounded_and_kill_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("grandchild-ran");
        // A shell that starts a grandchild, then hangs.
        let script = format!("(sleep 1; touch {}) & sleep 100", marker.display());
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script]);
        let mut child = spawn(cmd, true).unwrap();
        let start = Instant::now();
        let ended = wait_bounded(&mut child, Duration::from_millis(200), true).unwrap();
        assert_eq!(ended, Ended::TimedOut);
        assert!(start.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!marker.exists(), "the grandchild survived the timeout");

        let mut cmd = Command::new("sh");
        cmd.args(["-c", "exit 3"]);
        let mut child = spawn(cmd, false).unwrap();
        match wait_bounded(&mut child, Duration::from_secs(10), false).unwrap() {
            Ended::Exited(s) => assert_eq!(describe_status(&s), "exit code 3"),
            other => panic!("{other:?}"),
        }
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "kill -ABRT $$"]);
        let mut child = spawn(cmd, false).unwrap();
        match wait_bounded(&mut child, Duration::from_secs(10), false).unwrap() {
            Ended::Exited(s) => assert_eq!(describe_status(&s), "killed by signal 6 (SIGABRT)"),
            other => panic!("{other:?}"),
        }
        assert!(alive_since(
            std::process::id(),
            std::time::SystemTime::now()
        ));
    }

    #[test]
    fn children_end_as_engines_expect_input_then_sigterm_then_sigkill() {
        let start = |script: &str| {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", script]).stdin(Stdio::piped());
            let mut child = spawn(cmd, true).unwrap();
            // Its input closes, as a caller ending a worker closes it first.
            drop(child.stdin.take());
            child
        };
        // Bounds that hold on a loaded machine: how a child ended says which step ended it
        // (its own exit, SIGTERM, SIGKILL); the lower bounds say the grace was given.
        let grace = Duration::from_millis(300);
        // A child that ends with its input goes by itself, before any signal.
        let mut child = start("cat > /dev/null");
        let status = end_gracefully(&mut child, true, grace).unwrap();
        assert!(status.success(), "{status:?}");
        // One that ignores its input gets SIGTERM after one grace period.
        let mut child = start("sleep 100");
        let started = Instant::now();
        let status = end_gracefully(&mut child, true, grace).unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert!(started.elapsed() >= grace, "{:?}", started.elapsed());
        // One that ignores SIGTERM too gets SIGKILL after another, once it says its trap
        // is set (an event, not a time).
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "trap '' TERM; echo trapped; while :; do sleep 0.05; done",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
        let mut child = spawn(cmd, true).unwrap();
        drop(child.stdin.take());
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "trapped");
        let started = Instant::now();
        let status = end_gracefully(&mut child, true, grace).unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(started.elapsed() >= 2 * grace, "{:?}", started.elapsed());
        // Ended in the background, waited for before exit.
        for _ in 0..3 {
            end_in_background(start("sleep 100"), true);
        }
        assert!(wait_for_endings(Duration::ZERO) > 0);
        assert_eq!(wait_for_endings(Duration::from_secs(10)), 0);
    }
}

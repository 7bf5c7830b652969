//! Isolation: candidates run in a worker process, so a crash (abort, segfault) or a hang in
//! the backend is a verdict, not the end of the run. This is the part every family of
//! programs shares (aten graphs, XLA programs): the client ([`IsolatedChecker`]), the
//! query protocol, launchers, and the worker's side of the protocol ([`serve`]); what a
//! worker loads and checks is the family's (graphbug-repro's `WorkerSpec` for aten graphs,
//! graphbug-xla's for XLA programs).
//!
//! A worker (`graphbug __minify-worker SPEC`) loads the original and its inputs once,
//! records the reference values, and then answers one query per line: the kept node set
//! comes in on stdin, the verdict goes out on stdout as JSON. It is reused between
//! queries and restarted after it dies, so start-up is paid once per crash, not once per
//! query.
//!
//! Workers can run anywhere a launcher command can start a process ([`Launcher`]: Slurm's
//! `srun`, `kubectl exec -i`, `ssh`): such a worker (`graphbug __minify-worker -`) reads
//! its spec and the files it names from the first line of its standard input (a bundle
//! its family packs), so it needs no shared file system, and one that disappears
//! mid-query is relaunched and asked again once before its death counts as the
//! candidate's crash.

use std::collections::VecDeque;
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use graphbug_ir::Graph;
use graphbug_run::limits::{FirstTook, TimeLimit};
use graphbug_run::process;
use graphbug_run::progress::eprint_line;
use serde::{Deserialize, Serialize};

use crate::candidate::{Candidate, Cut, Origin, Original};
use crate::checker::{Checker, Signature, Startup, Verdict};

/// How workers are started on other machines: a command template in which `{cmd}` stands
/// for the worker command (this binary's path, shell-quoted, and its arguments) and
/// `{args}` for the arguments alone (for a remote binary at another path), run by `sh -c`.
/// Examples: `srun -N1 --gres=gpu:1 {cmd}`, `kubectl exec -i POD -- graphbug {args}`,
/// `ssh HOST {cmd}`.
#[derive(Clone, Debug)]
pub struct Launcher {
    template: String,
}

/// The worker's arguments when its spec comes on standard input.
const STDIN_WORKER_ARGS: &str = "__minify-worker -";

impl Launcher {
    /// A launcher from its template, which must contain `{cmd}` or `{args}`.
    pub fn new(template: &str) -> Result<Launcher, String> {
        if !template.contains("{cmd}") && !template.contains("{args}") {
            return Err(format!(
                "the worker launcher `{template}` has no {{cmd}} (or {{args}}) where the worker command goes, e.g. `srun -N1 {{cmd}}`"
            ));
        }
        Ok(Launcher {
            template: template.to_string(),
        })
    }

    /// Whether the template starts workers through Slurm's `srun`.
    fn runs_srun(&self) -> bool {
        self.template
            .split_whitespace()
            .any(|w| w.ends_with("srun"))
    }

    /// The shell command that starts a worker of `exe`.
    fn command(&self, exe: &Path) -> String {
        let quoted = format!("'{}'", exe.display().to_string().replace('\'', "'\\''"));
        self.template
            .replace("{cmd}", &format!("{quoted} {STDIN_WORKER_ARGS}"))
            .replace("{args}", STDIN_WORKER_ARGS)
    }
}

/// The shell that runs a launcher's command (`$1`): it leads the launcher's process group,
/// and when it is told to terminate (SIGTERM: graphbug ending a worker, or graphbug's death
/// by any means, `kill -9` included, through the death signal it gets) it passes SIGTERM on
/// to the whole group, the engine's client among it, waits for it to end and, for a Slurm
/// job (its name in `$2`), cancels the job by name: `srun` waiting in the queue cancels its
/// job on SIGTERM, but one told to terminate while it submits the job ends and leaves it
/// queued. Without this shell, graphbug's death reached the shell alone and a queued job
/// stayed in the queue. The command keeps the shell's standard input (an asynchronous
/// command would get `/dev/null`), and the shell ends with its status.
const LAUNCHER_SHELL: &str = "exec 3<&0; trap 'trap \"\" TERM; kill -TERM 0; wait; \
     if [ -n \"$2\" ]; then scancel --quiet --name=\"$2\" 2>/dev/null; fi; exit 143' TERM; \
     sh -c \"$1\" <&3 3<&- & wait $!";

/// How long a worker may wait to be started (by an engine's queue, or by this machine)
/// unless `--worker-startup` says otherwise.
pub const DEFAULT_WORKER_STARTUP: Duration = Duration::from_secs(600);

/// What a worker prints first, before it reads anything: its process runs (for a launched
/// worker, the engine has started its job).
const HELLO: &str = "@hello";

/// One query to a worker: how to cut the candidate from the original the worker holds
/// (not the candidate's text: a message through an engine's launcher costs by its size,
/// and `srun` holds one of over 1 KB for 40 ms).
#[derive(Serialize, Deserialize)]
struct Request {
    /// The kept node ids, as ranges (`0-1400,1402`).
    kept: String,
    retained: Vec<usize>,
    cut: Cut,
    /// A hash of the candidate's inputs, which the worker's cut must match.
    inputs: u64,
}

impl Request {
    /// The request for `candidate`.
    fn of(candidate: &Candidate) -> Request {
        Request {
            kept: ranges(&candidate.kept),
            retained: candidate.retained.clone(),
            cut: candidate.cut.clone(),
            inputs: inputs_hash(&candidate.inputs),
        }
    }

    /// The candidate it asks for, cut from `original` (the graph as written; `runnable`
    /// makes the form that runs).
    fn candidate(
        &self,
        original: &Original<'_>,
        runnable: &dyn Fn(Graph) -> std::result::Result<Graph, String>,
    ) -> std::result::Result<Candidate, String> {
        let kept = parse_ranges(&self.kept)?;
        let candidate = original.recut(&kept, &self.retained, &self.cut);
        if inputs_hash(&candidate.inputs) != self.inputs {
            return Err(format!(
                "the worker cut the candidate with other inputs than the search ({:?}): the original it holds differs",
                candidate.inputs
            ));
        }
        Ok(Candidate {
            graph: runnable(candidate.graph)?,
            ..candidate
        })
    }
}

/// Ascending ids as ranges: `0-3,5,7-9`.
fn ranges(ids: &[u32]) -> String {
    let mut out = String::new();
    let mut k = 0;
    while k < ids.len() {
        let start = ids[k];
        let mut end = start;
        while k + 1 < ids.len() && ids[k + 1] == end + 1 {
            k += 1;
            end += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        k += 1;
    }
    out
}

/// The ids [`ranges`] wrote.
fn parse_ranges(text: &str) -> std::result::Result<Vec<u32>, String> {
    let mut ids = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("bad node ranges `{text}`");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                ids.extend(a..=b);
            }
            None => ids.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(ids)
}

/// A hash of a candidate's inputs, the same in every process of this build.
fn inputs_hash(inputs: &[Origin]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    inputs.hash(&mut h);
    h.finish()
}

/// The stage a worker's query is in (`compile`, `runtime`), reported on its output only
/// once the stage has lasted [`STAGE_QUIET`] (what a timeout needs to say where it hung)
/// or when the worker crashes (a fatal signal's handler writes it before the worker dies).
/// A query quicker than that writes one line, its verdict: through an engine's launcher,
/// a small write that follows another unacknowledged one waits for the delayed
/// acknowledgement (40 ms a query through `srun`).
#[derive(Clone)]
pub struct Stages(Arc<Mutex<Option<(String, Instant, bool)>>>);

/// The `@stage` line of the current stage, for the fatal-signal handler: its bytes and
/// length (0: no query running).
static CRASH_LINE: [std::sync::atomic::AtomicU8; 64] =
    [const { std::sync::atomic::AtomicU8::new(0) }; 64];
static CRASH_LINE_LEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Publishes the `@stage` line a crash now reports (`None`: nothing).
fn set_crash_line(stage: Option<&str>) {
    use std::sync::atomic::Ordering;
    CRASH_LINE_LEN.store(0, Ordering::SeqCst);
    let Some(stage) = stage else { return };
    let line = format!("@stage {stage}\n");
    if line.len() > CRASH_LINE.len() {
        return;
    }
    for (slot, b) in CRASH_LINE.iter().zip(line.bytes()) {
        slot.store(b, Ordering::SeqCst);
    }
    CRASH_LINE_LEN.store(line.len(), Ordering::SeqCst);
}

/// On a fatal signal: writes the current `@stage` line to standard output, then dies of
/// the signal (the handler is reset to the default before it runs).
extern "C" fn report_stage_and_die(sig: libc::c_int) {
    use std::sync::atomic::Ordering;
    let len = CRASH_LINE_LEN.load(Ordering::SeqCst);
    let mut buf = [0u8; 64];
    for (b, slot) in buf.iter_mut().zip(CRASH_LINE.iter()).take(len) {
        *b = slot.load(Ordering::SeqCst);
    }
    // SAFETY: write(2) and raise(3) are async-signal-safe; `buf` outlives the call.
    unsafe {
        libc::write(1, buf.as_ptr().cast(), len);
        libc::raise(sig);
    }
}

/// Installs [`report_stage_and_die`] for the signals a crashing backend dies of.
fn report_stage_on_crash() {
    for sig in [
        libc::SIGABRT,
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGILL,
    ] {
        // SAFETY: a plain sigaction with a handler that only calls async-signal-safe
        // functions; SA_RESETHAND restores the default action before it runs, so raising
        // the signal again ends the process as the crash would have.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = report_stage_and_die as *const () as usize;
            action.sa_flags = libc::SA_RESETHAND | libc::SA_NODEFER;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// How long a stage lasts before it is reported.
const STAGE_QUIET: Duration = Duration::from_millis(50);

impl Stages {
    /// Reports with a thread of their own (and a crash's fatal-signal handler).
    pub fn start() -> Stages {
        report_stage_on_crash();
        let reports = Stages(Arc::new(Mutex::new(None)));
        let watched = reports.clone();
        std::thread::spawn(move || loop {
            std::thread::sleep(STAGE_QUIET / 4);
            let mut current = watched.0.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((stage, since, reported)) = current.as_mut() {
                if !*reported && since.elapsed() >= STAGE_QUIET {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "@stage {stage}").and_then(|()| out.flush());
                    *reported = true;
                }
            }
        });
        reports
    }

    /// The hook a checker calls when a query enters a stage (`compile`, `runtime`).
    pub fn hook(&self) -> Box<dyn FnMut(&str) + Send> {
        let reports = self.clone();
        Box::new(move |stage| reports.entered(stage))
    }

    /// The query entered `stage`.
    fn entered(&self, stage: &str) {
        let mut current = self.0.lock().unwrap_or_else(|e| e.into_inner());
        set_crash_line(Some(stage));
        *current = Some((stage.to_string(), Instant::now(), false));
    }

    /// The query is answered: no stage of it is reported from now on (while the guard
    /// lives, the verdict is written).
    fn answered(&self) -> std::sync::MutexGuard<'_, Option<(String, Instant, bool)>> {
        let mut current = self.0.lock().unwrap_or_else(|e| e.into_inner());
        set_crash_line(None);
        *current = None;
        current
    }
}

/// The threads a worker's backend should use, when something says: the CPUs Slurm gave
/// the job this process runs in, on this node (`SLURM_CPUS_ON_NODE`).
pub fn worker_cpus() -> Option<usize> {
    std::env::var("SLURM_CPUS_ON_NODE")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The queries on standard input, read by a thread of its own that ends the worker when
/// its input ends or it is told to terminate (SIGTERM), even mid-query: a worker is over
/// when whoever started it is (graphbug done, or killed, or an engine ending the job), and
/// a query that hangs must not keep it, nor its job, alive. `scratch` (the files a bundle
/// brought) is removed first.
pub fn end_with_input(scratch: Option<PathBuf>) -> Result<Receiver<String>, String> {
    let end = move |code: i32| {
        if let Some(dir) = &scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
        // SAFETY: _exit ends the process at once; nothing of it is used afterwards.
        unsafe { libc::_exit(code) }
    };
    let on_term = end.clone();
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGTERM])
        .map_err(|e| format!("watching for SIGTERM: {e}"))?;
    std::thread::Builder::new()
        .name("graphbug-worker-signals".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                on_term(128 + libc::SIGTERM);
            }
        })
        .map_err(|e| format!("starting the signal thread: {e}"))?;
    let (tx, queries) = mpsc::channel();
    std::thread::Builder::new()
        .name("graphbug-worker-input".into())
        .spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
            end(0);
        })
        .map_err(|e| format!("starting the input thread: {e}"))?;
    Ok(queries)
}

/// How many workers answer minifier queries, and how they start.
#[derive(Clone, Debug, Default)]
pub struct Workers {
    /// Workers querying side by side (`-j`; 0 and 1 both mean one).
    pub jobs: usize,
    /// Starts them through a launcher (Slurm, Kubernetes, ssh) instead of as children.
    pub launcher: Option<Launcher>,
    /// How long a worker may take to be started (an engine's queue may hold its job)
    /// before it is given up (default [`DEFAULT_WORKER_STARTUP`]).
    pub startup: Option<Duration>,
}

impl Workers {
    /// How many workers there are.
    pub fn count(&self) -> usize {
        self.jobs.max(1)
    }

    /// Refuses to run the backend in this process (`--no-isolate`) with several workers or
    /// a launcher, which run it in worker processes.
    pub fn allow_in_process(&self) -> Result<(), String> {
        if self.count() > 1 || self.launcher.is_some() {
            return Err(
                "-j and --worker-launcher run candidates in worker processes; --no-isolate runs them in this process: drop one".into(),
            );
        }
        Ok(())
    }

    /// Threads libtorch may use in each worker: several workers on this machine share its
    /// cores (libtorch's threads, one per core in each, would otherwise contend and spin);
    /// one worker, or workers a launcher starts elsewhere, keep libtorch's default.
    pub fn threads_each(&self) -> Option<usize> {
        if self.count() == 1 || self.launcher.is_some() {
            return None;
        }
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Some((cores / self.count()).max(1))
    }

    /// The `k`th checker of the run (from 0), a copy of `proto` (see
    /// [`IsolatedChecker::copy`]) named and given its start-up limit, launched through
    /// `bundle` when the workers have a launcher.
    fn make(
        &self,
        proto: &IsolatedChecker,
        bundle: Option<&Arc<String>>,
        k: usize,
    ) -> IsolatedChecker {
        let checker = proto.copy().with_startup(
            self.startup.unwrap_or(DEFAULT_WORKER_STARTUP),
            if self.count() > 1 { k + 1 } else { 0 },
        );
        match (&self.launcher, bundle) {
            (Some(l), Some(b)) => checker.with_launcher(l.clone(), b.clone()),
            _ => checker,
        }
    }

    /// Prints the limits queries get, from the started first worker's start-up run.
    fn describe_limit(first: &IsolatedChecker) {
        let run = match first.startup_run.as_str() {
            EAGER_STARTUP => "the eager run",
            other => other,
        };
        eprint_line(first.limit().describe_from(run));
    }

    /// The checkers of a run, one per worker: `first` (a checker not yet started, holding
    /// the worker's command and spec) and copies of it, with `bundle` (the spec's
    /// [`Launcher`] line) when the workers are launched. All are launched side by side,
    /// and only the first to be ready is waited for here, put first: the others go on
    /// starting meanwhile (an engine may queue their jobs), and each joins the search
    /// when it is ready.
    pub fn start(
        &self,
        first: IsolatedChecker,
        bundle: Option<Arc<String>>,
    ) -> Result<Vec<IsolatedChecker>, String> {
        let mut started: Vec<IsolatedChecker> = (0..self.count())
            .map(|k| self.make(&first, bundle.as_ref(), k))
            .collect();
        for checker in &mut started {
            // One that cannot be launched is left out by start_first, which reports it.
            let _ = checker.launch_now();
        }
        IsolatedChecker::start_first(&mut started)?;
        Self::describe_limit(&started[0]);
        Ok(started)
    }

    /// The checkers of a run of workers on this machine, the first started alone and
    /// waited for; the others are then launched from the checker `then` makes (what the
    /// first worker's start-up left, such as values it recorded, can serve them), each
    /// joining the search when it is ready.
    pub fn start_then(
        &self,
        first: IsolatedChecker,
        then: impl FnOnce() -> Result<IsolatedChecker, String>,
    ) -> Result<Vec<IsolatedChecker>, String> {
        let mut started = vec![self.make(&first, None, 0)];
        IsolatedChecker::start_first(&mut started)?;
        Self::describe_limit(&started[0]);
        if self.count() > 1 {
            let rest = then()?;
            for k in 1..self.count() {
                let mut checker = self.make(&rest, None, k);
                // One that cannot be launched is reported when the search asks it.
                let _ = checker.launch_now();
                started.push(checker);
            }
        }
        Ok(started)
    }
}

/// The first steps of every worker: says it runs (`@hello`, which ends the launcher's part
/// of its start-up) and reads its spec: the file `spec_path`, or with `-` the first line of
/// standard input (a bundle, which the caller unpacks). Returns the text and whether it
/// came from standard input.
pub fn worker_spec_text(spec_path: &Path) -> Result<(String, bool), String> {
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{HELLO}").and_then(|()| out.flush());
    }
    if spec_path == Path::new("-") {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| format!("reading the worker bundle: {e}"))?;
        return Ok((line, true));
    }
    std::fs::read_to_string(spec_path)
        .map(|text| (text, false))
        .map_err(|e| format!("{}: {e}", spec_path.display()))
}

/// The worker's side of the protocol, once it is ready: says `@ready` with the seconds its
/// start-up run took, then answers every query on `queries` (see [`end_with_input`]) by
/// cutting the requested candidate from `original`, making it runnable with `runnable`,
/// and asking `checker`, one JSON verdict per line.
pub fn serve(
    queries: Receiver<String>,
    original: &Original<'_>,
    runnable: &dyn Fn(Graph) -> Result<Graph, String>,
    checker: &mut dyn Checker,
    stages: &Stages,
    started_in: Duration,
) -> Result<(), String> {
    let stdout = std::io::stdout();
    writeln!(stdout.lock(), "@ready {}", started_in.as_secs_f64()).map_err(|e| e.to_string())?;
    for line in queries {
        let req: Request =
            serde_json::from_str(&line).map_err(|e| format!("bad query `{line}`: {e}"))?;
        let verdict = match req.candidate(original, runnable) {
            Ok(candidate) => checker.check(&candidate),
            Err(e) => Verdict::Unresolved(e),
        };
        let _quiet = stages.answered();
        let mut out = stdout.lock();
        writeln!(
            out,
            "{}",
            serde_json::to_string(&verdict).expect("verdicts serialize")
        )
        .and_then(|()| out.flush())
        .map_err(|e| format!("answering: {e}"))?;
    }
    Ok(())
}

/// A worker process and the threads that talk to it.
struct Worker {
    child: Child,
    /// Lines for its input, written by a thread of its own: a worker whose job waits in a
    /// queue reads nothing, and a blocking write would stall the caller. Dropping it closes
    /// the worker's input.
    input: mpsc::Sender<Arc<String>>,
    lines: Receiver<String>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// When it was launched.
    launched: Instant,
    /// When it said it runs ([`HELLO`]).
    hello: Option<Instant>,
    /// Whether it was said to be waiting for its start.
    told_waiting: bool,
}

impl Worker {
    /// Sends `line` to the worker's input; false when its input is gone.
    fn send(&self, line: Arc<String>) -> bool {
        self.input.send(line).is_ok()
    }
}

/// A checker that asks a worker process, classifying its death as a crash and its silence
/// as a timeout. Every wait is bounded: the worker's start (by `--worker-startup` until its
/// process runs, which an engine's queue can delay, then by a start-up limit while it loads
/// and runs the original), and each query by a [`TimeLimit`] (`--timeout`, or derived from
/// the worker's own eager run of the original).
pub struct IsolatedChecker {
    exe: PathBuf,
    spec: PathBuf,
    name: String,
    timeout: Option<Duration>,
    /// How long the first worker's eager run of the original took.
    eager: Option<Duration>,
    /// What the first query took.
    first_took: FirstTook,
    /// The worker answering queries.
    worker: Option<Worker>,
    /// A worker launched but not yet seen ready.
    starting: Option<Worker>,
    /// How many workers were started (1 plus one per crash or timeout).
    pub starts: usize,
    /// Starts workers elsewhere, with their spec as the first line of input.
    launch: Option<(Launcher, Arc<String>)>,
    /// How long a worker may take to be started (see [`DEFAULT_WORKER_STARTUP`]).
    startup: Duration,
    /// Which worker of the run this is (from 1), for messages; 0 when it is the only one.
    index: usize,
    /// What a worker runs when it starts (see [`IsolatedChecker::with_startup_run`]).
    startup_run: String,
    /// Set when the query in progress is no longer wanted (see [`Checker::abandon_when`]).
    abandon: Option<Arc<AtomicBool>>,
}

/// How often a worker's answer is waited for between looks at the abandon flag.
const ABANDON_POLL: Duration = Duration::from_millis(20);

/// Why a worker did not start.
#[derive(Debug)]
enum StartError {
    /// The launcher (or, without one, the worker's own process) ended before the worker
    /// ran: its words.
    Launcher(String),
    /// The worker was not started within the start-up limit (its job still queued).
    Queued(String),
    /// The worker ran, then died or hung while starting (loading a plugin, running the
    /// original eagerly).
    Worker(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Launcher(m) | StartError::Queued(m) | StartError::Worker(m) => {
                f.write_str(m)
            }
        }
    }
}

/// What a worker runs when it starts, for the error of a worker that died doing it.
pub const EAGER_STARTUP: &str = "graphbug's eager run of the graph";

impl IsolatedChecker {
    /// The error of a run whose worker did not start: the worker's own start is its
    /// reference run of the original (`self.startup_run`); anything before is the
    /// launcher's.
    fn start_error(startup_run: &str, e: StartError) -> String {
        match e {
            StartError::Worker(m) => format!("{startup_run} failed in a worker process: {m}"),
            other => other.to_string(),
        }
    }
}

impl IsolatedChecker {
    /// A checker running `exe __minify-worker spec` (started on first use); each query
    /// takes at most `timeout`, or by default a limit derived from the eager run.
    pub fn new(exe: PathBuf, spec: PathBuf, describe: String, timeout: Option<Duration>) -> Self {
        IsolatedChecker {
            exe,
            spec,
            name: describe,
            timeout,
            eager: None,
            first_took: FirstTook::default(),
            worker: None,
            starting: None,
            starts: 0,
            launch: None,
            startup: DEFAULT_WORKER_STARTUP,
            index: 0,
            startup_run: EAGER_STARTUP.into(),
            abandon: None,
        }
    }

    /// A checker like this one, not started: same command, spec, limits and launcher.
    pub fn copy(&self) -> IsolatedChecker {
        let mut c = IsolatedChecker::new(
            self.exe.clone(),
            self.spec.clone(),
            self.name.clone(),
            self.timeout,
        )
        .with_startup(self.startup, self.index)
        .with_startup_run(&self.startup_run);
        c.launch = self.launch.clone();
        c
    }

    /// Names what a worker runs when it starts (default [`EAGER_STARTUP`]), for the error
    /// of one that dies doing it: e.g. the reference run of an XLA program.
    pub fn with_startup_run(mut self, what: &str) -> Self {
        self.startup_run = what.to_string();
        self
    }

    /// Starts workers through `launcher`, handing each its spec and files on standard input
    /// (`bundle`, from [`IsolatedChecker::bundle`], shared by the checkers of one run). A
    /// worker that disappears mid-query is relaunched and asked once more before its death
    /// counts as a crash.
    pub fn with_launcher(mut self, launcher: Launcher, bundle: Arc<String>) -> Self {
        self.launch = Some((launcher, bundle));
        self
    }

    /// Gives a worker at most `limit` to be started (an engine's queue may hold its job)
    /// before it is given up; `index` (from 1) names it in messages.
    pub fn with_startup(mut self, limit: Duration, index: usize) -> Self {
        self.startup = limit;
        self.index = index;
        self
    }

    /// Starts the worker now and returns how long its eager run of the original took.
    /// That run happens in the worker, so a graph that crashes libtorch even in eager
    /// mode is an error here, not the end of the calling process.
    pub fn start_now(&mut self) -> Result<Duration, String> {
        let startup_run = self.startup_run.clone();
        self.start()
            .map_err(|e| Self::start_error(&startup_run, e))?;
        Ok(self.eager.unwrap_or_default())
    }

    /// Waits for the first of `checkers`' workers (launched side by side) to be ready and
    /// moves it to the front: the others go on starting (an engine may queue some of them
    /// for a while). One that cannot start is left out, with a message (a node may fail);
    /// when none starts, the error is the first one's.
    pub fn start_first(checkers: &mut Vec<IsolatedChecker>) -> Result<Duration, String> {
        let startup_run = checkers
            .first()
            .map(|c| c.startup_run.clone())
            .unwrap_or_default();
        let mut first_error = None;
        loop {
            let mut k = 0;
            while k < checkers.len() {
                match checkers[k].poll_start(Some(Instant::now() + START_SLICE)) {
                    Ok(true) => {
                        checkers.swap(0, k);
                        return Ok(checkers[0].eager.unwrap_or_default());
                    }
                    Ok(false) => k += 1,
                    Err(e) => {
                        let c = checkers.remove(k);
                        if !checkers.is_empty() {
                            eprint_line(format!(
                                "{}: {e}; the search goes on without it",
                                c.worker_label()
                            ));
                        }
                        first_error.get_or_insert(e);
                    }
                }
            }
            if checkers.is_empty() {
                return Err(Self::start_error(
                    &startup_run,
                    first_error.expect("a checker was left out"),
                ));
            }
        }
    }

    /// The limits queries get (known once a worker has started).
    pub fn limit(&self) -> TimeLimit {
        TimeLimit::new(self.timeout, self.eager.unwrap_or_default())
    }

    /// Launches the worker without waiting for it to be ready: its first query (or
    /// [`IsolatedChecker::start_now`]) waits, within the start-up limits counted from now.
    /// Workers launched side by side start up while this process goes on.
    pub fn launch_now(&mut self) -> Result<(), String> {
        self.launch().map_err(|e| e.to_string())
    }

    /// Launches a worker unless one runs or is starting.
    fn launch(&mut self) -> std::result::Result<(), StartError> {
        if self.worker.is_none() && self.starting.is_none() {
            self.starting = Some(self.spawn()?);
        }
        Ok(())
    }

    /// Starts a worker (or finishes starting the one launched) and waits until it is ready.
    fn start(&mut self) -> std::result::Result<(), StartError> {
        self.poll_start(None).map(|_| ())
    }

    /// A new worker process, its input written and its output read by threads of its own.
    fn spawn(&mut self) -> std::result::Result<Worker, StartError> {
        let mut cmd = match &self.launch {
            Some((launcher, _)) => {
                let mut cmd = Command::new("sh");
                // Slurm names the job after the worker, so a queued one can be found (and
                // cancelled by the shell, for a launcher that runs srun).
                let slurm_job = if launcher.runs_srun() {
                    self.job_name()
                } else {
                    String::new()
                };
                cmd.args(["-c", LAUNCHER_SHELL, "sh"])
                    .arg(launcher.command(&self.exe))
                    .arg(slurm_job);
                cmd.env("SLURM_JOB_NAME", self.job_name());
                cmd
            }
            None => {
                let mut cmd = Command::new(&self.exe);
                cmd.arg("__minify-worker").arg(&self.spec);
                cmd
            }
        };
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A launcher and what it starts form one process group, ended as one.
        let started = if self.launched() {
            process::spawn_launcher(cmd)
        } else {
            process::spawn(cmd, false)
        };
        let mut child = started.map_err(|e| {
            StartError::Launcher(format!("cannot start worker {}: {e}", self.worker_name()))
        })?;
        self.starts += 1;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let (input, to_write) = mpsc::channel::<Arc<String>>();
        std::thread::spawn(move || {
            for line in to_write {
                let written = stdin
                    .write_all(line.as_bytes())
                    .and_then(|()| stdin.write_all(b"\n"))
                    .and_then(|()| stdin.flush());
                if written.is_err() {
                    // A worker that cannot take its input shows it as its death.
                    break;
                }
            }
        });
        if let Some((_, bundle)) = &self.launch {
            let _ = input.send(bundle.clone());
        }
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr_tail.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                let mut t = tail.lock().expect("the tail lock is never poisoned");
                t.push_back(line);
                if t.len() > 20 {
                    t.pop_front();
                }
            }
        });
        Ok(Worker {
            child,
            input,
            lines,
            stderr_tail,
            launched: Instant::now(),
            hello: None,
            told_waiting: false,
        })
    }

    /// Waits until `until` (`None`: as long as the start-up limits allow) for a worker to
    /// be ready, launching one if none is starting: `Ok(true)` when it is (it is then the
    /// worker queries go to), `Ok(false)` when `until` passed first. A worker past its
    /// limits is ended.
    fn poll_start(&mut self, until: Option<Instant>) -> std::result::Result<bool, StartError> {
        if self.worker.is_some() {
            return Ok(true);
        }
        self.launch()?;
        // Loading (libtorch, plugins, the reference run) is bounded too.
        let loading = STARTUP_FLOOR.max(self.timeout.unwrap_or_default().saturating_mul(2));
        let label = self.worker_label();
        loop {
            let w = self.starting.as_mut().expect("launched above");
            let limit_at = match w.hello {
                None => w.launched + self.startup,
                Some(hello) => hello + loading,
            };
            let notice_at =
                (w.hello.is_none() && !w.told_waiting).then_some(w.launched + WAITING_NOTICE);
            let wake = [Some(limit_at), until, notice_at]
                .into_iter()
                .flatten()
                .min()
                .expect("the limit is always there");
            match w
                .lines
                .recv_timeout(wake.saturating_duration_since(Instant::now()))
            {
                Ok(l) if l == HELLO => {
                    w.hello = Some(Instant::now());
                    if w.told_waiting {
                        eprint_line(format!(
                            "{label} started after {:.1} s",
                            w.launched.elapsed().as_secs_f64()
                        ));
                    }
                }
                Ok(l) if l.starts_with("@ready") => {
                    let secs = l["@ready".len()..].trim().parse::<f64>().unwrap_or(0.0);
                    self.eager
                        .get_or_insert(Duration::from_secs_f64(secs.clamp(0.0, 1e6)));
                    self.worker = self.starting.take();
                    return Ok(true);
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    let now = Instant::now();
                    if now >= limit_at {
                        return Err(self.give_up_starting(loading));
                    }
                    if notice_at.is_some_and(|at| now >= at) {
                        w.told_waiting = true;
                        eprint_line(format!(
                            "{label} has not started after {:.0} s: waiting for {} (at most {:.0} s: --worker-startup sets it){}",
                            WAITING_NOTICE.as_secs_f64(),
                            self.worker_name(),
                            self.startup.as_secs_f64(),
                            if self.index > 0 { "; the other workers go on" } else { "" }
                        ));
                    }
                    if until.is_some_and(|u| now >= u) {
                        return Ok(false);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let w = self.starting.take().expect("it was starting");
                    let ran = w.hello.is_some();
                    let (status, last) = end_lost(w, self.launched());
                    return Err(if ran {
                        StartError::Worker(format!(
                            "the worker died while starting ({status}): {last}"
                        ))
                    } else {
                        StartError::Launcher(format!(
                            "{} ended ({status}) before the worker ran{}",
                            self.worker_name(),
                            said(&last)
                        ))
                    });
                }
            }
        }
    }

    /// Ends the worker being started, past its limit, and says why it was given up (with
    /// the engine's reason for a job that did not start, where it can be had).
    fn give_up_starting(&mut self, loading: Duration) -> StartError {
        let w = self.starting.take().expect("it was starting");
        if w.hello.is_some() {
            let last = last_lines(&w.stderr_tail);
            end_worker(w, self.launched());
            return StartError::Worker(format!(
                "the worker did not start within {:.0} s{}",
                loading.as_secs_f64(),
                said(&last)
            ));
        }
        let reason = self.engine_reason();
        let last = last_lines(&w.stderr_tail);
        end_worker(w, self.launched());
        let why = match (reason, last.is_empty()) {
            (Some(r), _) => format!(": {r}"),
            (None, false) => format!(": the launcher said `{last}`"),
            (None, true) => String::new(),
        };
        StartError::Queued(format!(
            "{} was not started within {:.0} s (the start-up limit: --worker-startup sets it) by {}{why}",
            self.worker_label(),
            self.startup.as_secs_f64(),
            self.worker_name()
        ))
    }

    /// Why an engine has not started the worker's job, where the engine can say: Slurm's
    /// `squeue` on the job named after the worker (`JOBID STATE (REASON)`).
    fn engine_reason(&self) -> Option<String> {
        let (launcher, _) = self.launch.as_ref()?;
        if !launcher.runs_srun() {
            return None;
        }
        let mut cmd = Command::new("squeue");
        cmd.args(["-h", "-n", &self.job_name(), "-o", "%i %T %r"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = process::spawn(cmd, true).ok()?;
        let mut out = child.stdout.take()?;
        let ended = process::wait_bounded(&mut child, ENGINE_QUERY_LIMIT, true).ok()?;
        if !matches!(ended, process::Ended::Exited(s) if s.success()) {
            return None;
        }
        let mut text = String::new();
        std::io::Read::read_to_string(&mut out, &mut text).ok()?;
        let line = text.lines().next()?;
        let mut fields = line.split_whitespace();
        let (id, state) = (fields.next()?, fields.next()?);
        let reason = fields.collect::<Vec<_>>().join(" ");
        Some(format!("Slurm job {id} is {state} (reason: {reason})"))
    }

    /// The Slurm job name of this checker's workers.
    fn job_name(&self) -> String {
        format!("graphbug-{}-w{}", std::process::id(), self.index)
    }

    /// Whether workers start through a launcher.
    fn launched(&self) -> bool {
        self.launch.is_some()
    }

    /// The worker command, for messages.
    fn worker_name(&self) -> String {
        match &self.launch {
            Some((l, _)) => format!("the worker launcher `{}`", l.template),
            None => format!("the worker process `{}`", self.exe.display()),
        }
    }

    /// `worker 2`, or `the worker` when it is the only one.
    fn worker_label(&self) -> String {
        if self.index == 0 {
            "the worker".into()
        } else {
            format!("worker {}", self.index)
        }
    }

    /// Ends the workers running or starting (in the background: see [`end_worker`]).
    fn end_workers(&mut self) {
        let launched = self.launched();
        for w in [self.starting.take(), self.worker.take()]
            .into_iter()
            .flatten()
        {
            end_worker(w, launched);
        }
    }
}

/// How long [`IsolatedChecker::start_first`] waits for one worker before it looks at the
/// next.
const START_SLICE: Duration = Duration::from_millis(20);

/// A worker gets at least this long to load and run the original once it runs.
const STARTUP_FLOOR: Duration = Duration::from_secs(120);

/// A worker not started after this long is said to be waiting.
const WAITING_NOTICE: Duration = Duration::from_secs(3);

/// How long an engine may take to say why a job waits.
const ENGINE_QUERY_LIMIT: Duration = Duration::from_secs(5);

/// Ends `w` as its engine expects (see [`process::end_gracefully`]), in the background:
/// its input closes now, which ends the worker even mid-query, and its job with it.
fn end_worker(w: Worker, launched: bool) {
    drop(w.input);
    process::end_in_background(w.child, launched);
}

/// Ends a worker whose output ended (it died, or its launcher did), within the grace
/// periods; returns how it ended and its last words.
fn end_lost(mut w: Worker, launched: bool) -> (String, String) {
    drop(w.input);
    let status = process::end_gracefully(&mut w.child, launched, process::GRACE);
    let last = last_lines(&w.stderr_tail);
    let how = status.map_or_else(
        || "the worker vanished".to_string(),
        |s| process::describe_status(&s),
    );
    (how, last)
}

/// `: <words>` where someone said something.
fn said(words: &str) -> String {
    if words.is_empty() {
        String::new()
    } else {
        format!(": {words}")
    }
}

fn last_lines(tail: &Arc<Mutex<VecDeque<String>>>) -> String {
    // Give the stderr reader a moment to drain what a dying worker printed.
    std::thread::sleep(Duration::from_millis(50));
    let t = tail.lock().expect("the tail lock is never poisoned");
    t.iter()
        .rev()
        .find(|l| !l.trim().is_empty())
        .cloned()
        .unwrap_or_default()
}

impl Checker for IsolatedChecker {
    fn describe(&self) -> String {
        format!("{} (isolated)", self.name)
    }

    fn abandon_when(&mut self, flag: Arc<AtomicBool>) {
        self.abandon = Some(flag);
    }

    fn await_start(&mut self, limit: Duration) -> Startup {
        match self.poll_start(Some(Instant::now() + limit)) {
            Ok(true) => Startup::Started,
            Ok(false) => Startup::Waiting,
            Err(e) => {
                eprint_line(format!(
                    "{}: {e}; the search goes on without it",
                    self.worker_label()
                ));
                Startup::Failed(e.to_string())
            }
        }
    }

    fn check(&mut self, candidate: &Candidate) -> Verdict {
        let request =
            Arc::new(serde_json::to_string(&Request::of(candidate)).expect("requests serialize"));
        // A launched worker may vanish for reasons of its own (a node lost, a pod
        // evicted): it is relaunched and asked once more before its death is a verdict.
        let tries = if self.launched() { 2 } else { 1 };
        for attempt in 1..=tries {
            let last = attempt == tries;
            if self.worker.is_none() {
                if let Err(e) = self.start() {
                    if last {
                        return Verdict::Unresolved(e.to_string());
                    }
                    eprint_line(format!("{}: {e}; starting another", self.worker_label()));
                    continue;
                }
            }
            // The limit is known once a worker has run the original.
            let limit = self.first_took.next_limit(&self.limit());
            match self.ask(request.clone(), limit) {
                Asked::Lost(crash) if !last => eprint_line(format!(
                    "{} was lost mid-query ({}); relaunching it and asking again",
                    self.worker_label(),
                    crash.message
                )),
                Asked::Lost(crash) => return Verdict::Fails(crash),
                Asked::Answered(verdict) => return verdict,
            }
        }
        unreachable!("the last try returns")
    }
}

/// What asking a worker gave.
enum Asked {
    /// Its verdict (or a timeout, which ends it).
    Answered(Verdict),
    /// It died: the candidate's crash, unless it was lost for reasons of its own.
    Lost(Signature),
}

impl IsolatedChecker {
    /// Sends `request` to the running worker and waits at most `limit` for its verdict.
    fn ask(&mut self, request: Arc<String>, limit: Duration) -> Asked {
        let worker = self.worker.as_mut().expect("started by the caller");
        let sent = worker.send(request);
        let mut stage = "compile".to_string();
        let started = Instant::now();
        let deadline = started + limit;
        let abandoned = || {
            self.abandon
                .as_ref()
                .is_some_and(|f| f.load(Ordering::SeqCst))
        };
        loop {
            let answer = if sent {
                let left = deadline.saturating_duration_since(Instant::now());
                match worker.lines.recv_timeout(left.min(ABANDON_POLL)) {
                    Err(RecvTimeoutError::Timeout) if !left.is_zero() => {
                        if abandoned() {
                            // Nobody waits for this answer: the worker ends rather than
                            // finish it (the next query starts another).
                            self.end_workers();
                            return Asked::Answered(Verdict::Unresolved(
                                "abandoned: the search no longer needs this answer".into(),
                            ));
                        }
                        continue;
                    }
                    other => other,
                }
            } else {
                Err(RecvTimeoutError::Disconnected)
            };
            match answer {
                Ok(line) => {
                    if let Some(s) = line.strip_prefix("@stage ") {
                        stage = s.to_string();
                        continue;
                    }
                    self.first_took.record(Some(started.elapsed()));
                    return Asked::Answered(serde_json::from_str(&line).unwrap_or_else(|e| {
                        Verdict::Unresolved(format!("bad worker answer `{line}`: {e}"))
                    }));
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.end_workers();
                    self.first_took.record(None);
                    return Asked::Answered(Verdict::Fails(Signature {
                        kind: format!("{stage} {}", graphbug_run::Symptom::Timeout),
                        op: None,
                        message: format!("no answer within {:.3} s", limit.as_secs_f64()),
                        ..Signature::default()
                    }));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let w = self.worker.take().expect("a worker was running");
                    let (how, last) = end_lost(w, self.launched());
                    self.first_took.record(Some(started.elapsed()));
                    return Asked::Lost(Signature {
                        kind: format!("{stage} {}", graphbug_run::Symptom::Crash),
                        op: None,
                        message: if last.is_empty() {
                            how
                        } else {
                            format!("{last} ({how})")
                        },
                        ..Signature::default()
                    });
                }
            }
        }
    }
}

impl Drop for IsolatedChecker {
    fn drop(&mut self) {
        self.end_workers();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ranges_round_trip() {
        for ids in [
            vec![],
            vec![3],
            vec![0, 1, 2, 5, 7, 8, 9, 12],
            (0..3000).collect(),
        ] {
            let text = ranges(&ids);
            assert_eq!(parse_ranges(&text).unwrap(), ids, "{text}");
        }
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8, 9, 12]), "0-2,5,7-9,12");
        for bad in ["1-", "x", "5-3", "1,,2-a"] {
            assert!(parse_ranges(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_worker_cuts_the_requested_candidate_or_refuses() {
        let graph = graphbug_ir::parse_graph(
            r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4]"):
        relu: "f32[4]" = torch.ops.aten.relu.default(x)
        sin: "f32[4]" = torch.ops.aten.sin.default(relu)
        cos: "f32[4]" = torch.ops.aten.cos.default(sin)
        return (cos,)
"#,
        )
        .unwrap();
        let original = Original::borrowing(&graph);
        let same = |g: Graph| Ok(g);
        let wanted = original.candidate(&[2, 3]);
        let request = Request::of(&wanted);
        let line = serde_json::to_string(&request).unwrap();
        assert!(line.len() < 100, "{line}");
        let request: Request = serde_json::from_str(&line).unwrap();
        assert_eq!(request.candidate(&original, &same).unwrap(), wanted);
        // A worker holding another original refuses rather than check another candidate.
        let other = graphbug_ir::parse_graph(
            r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4]"):
        relu: "f32[4]" = torch.ops.aten.relu.default(x)
        sin: "f32[4]" = torch.ops.aten.sin.default(x)
        cos: "f32[4]" = torch.ops.aten.cos.default(sin)
        return (cos, relu)
"#,
        )
        .unwrap();
        let err = request
            .candidate(&Original::borrowing(&other), &same)
            .unwrap_err();
        assert!(err.contains("the original it holds differs"), "{err}");
    }
}

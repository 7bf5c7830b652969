//! Isolation: candidates run in a worker process, so a crash (abort, segfault) or a hang in
//! the backend is a verdict, not the end of the run.
//!
//! The worker (`graphbug __minify-worker SPEC`) loads the original graph and its inputs
//! once, records the reference values, and then answers one query per line: the kept node
//! set comes in on stdin, the verdict goes out on stdout as JSON. It is reused between
//! queries and restarted after it dies, so libtorch start-up is paid once per crash, not
//! once per query.
//!
//! Workers can run anywhere a launcher command can start a process ([`Launcher`]: Slurm's
//! `srun`, `kubectl exec -i`, `ssh`): such a worker (`graphbug __minify-worker -`) reads
//! its spec and the files it names from the first line of its standard input, so it needs
//! no shared file system, and one that disappears mid-query is relaunched and asked again
//! once before its death counts as the candidate's crash.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use graphbug_aten::accuracy::AccuracyMode;
use graphbug_aten::io::{order_tensors, read_tensors, write_tensors};
use graphbug_backends::lookup;
use graphbug_backends::plugin::load_plugin;
use graphbug_ir::{parse_graph, Device, Graph};
use graphbug_minifier::{Candidate, Checker, Cut, Origin, Original, Signature, Startup, Verdict};
use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::case::{named, write_constants};
use crate::checkers::{BackendChecker, CheckKind};
use crate::error::{ReproError, Result};
use crate::limits::{FirstTook, TimeLimit};
use crate::process;
use crate::values::ReferenceValues;

/// What a worker needs to answer queries, written as JSON for it to read.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// The original graph's text.
    pub graph: String,
    /// Its inputs, keyed by placeholder name.
    pub inputs: PathBuf,
    /// Its constants (`self.<attr>` tensors), if any.
    pub constants: Option<PathBuf>,
    /// The device to run on.
    pub device: String,
    /// The backend to check.
    pub backend: String,
    /// Which failure to look for.
    pub check: CheckKind,
    /// How accuracy is compared.
    #[serde(default)]
    pub accuracy: AccuracyMode,
    /// Plugin libraries to load first.
    pub plugins: Vec<PathBuf>,
    /// Where to spill reference values, if anywhere.
    pub offload: Option<PathBuf>,
    /// Threads libtorch may use in the worker (default: its own choice, one per core).
    #[serde(default)]
    pub threads: Option<usize>,
    /// Candidates run as training steps (see [`crate::manifest::Manifest::training`]).
    #[serde(default)]
    pub training: bool,
    /// The size symbols' values, for a graph whose candidates run in a runnable form
    /// (symbolic sizes, dynamo-level calls: see [`AsRunnable`]).
    #[serde(default)]
    pub bindings: graphbug_ir::Bindings,
}

/// What a worker checks, besides the graph and its values.
#[derive(Clone, Debug)]
pub struct WorkerCheck {
    /// The backend to check.
    pub backend: String,
    /// Which failure to look for.
    pub check: CheckKind,
    /// How accuracy is compared.
    pub accuracy: AccuracyMode,
    /// Plugin libraries to load first.
    pub plugins: Vec<PathBuf>,
    /// Where to spill reference values, if anywhere.
    pub offload: Option<PathBuf>,
    /// Threads libtorch may use in each worker (see [`crate::actions::Workers::threads_each`]).
    pub threads: Option<usize>,
    /// Candidates run as training steps (see [`crate::manifest::Manifest::training`]).
    pub training: bool,
    /// The size symbols' values (see [`WorkerSpec::bindings`]).
    pub bindings: graphbug_ir::Bindings,
}

impl WorkerCheck {
    /// A check of `check` failures of `backend`, non-strict, with no plugins.
    pub fn new(backend: &str, check: CheckKind) -> Self {
        WorkerCheck {
            backend: backend.to_string(),
            check,
            accuracy: AccuracyMode::default(),
            plugins: Vec::new(),
            offload: None,
            threads: None,
            training: false,
            bindings: Default::default(),
        }
    }
}

impl WorkerSpec {
    /// Writes the spec of a worker making `check` on `graph`, with its inputs and
    /// constants, into `dir`; returns the spec file to start workers with.
    pub fn write(
        dir: &Path,
        graph: &Graph,
        inputs: &[Tensor],
        constants: &HashMap<String, Tensor>,
        device: &Device,
        check: WorkerCheck,
    ) -> Result<PathBuf> {
        let inputs_file = dir.join("inputs.safetensors");
        write_tensors(&inputs_file, &named(graph, inputs))?;
        let constants_file = if constants.is_empty() {
            None
        } else {
            let file = dir.join("constants.safetensors");
            write_constants(&file, constants)?;
            Some(file)
        };
        let spec = WorkerSpec {
            graph: graphbug_ir::print_graph(graph),
            inputs: inputs_file,
            constants: constants_file,
            device: device.to_string(),
            backend: check.backend,
            check: check.check,
            accuracy: check.accuracy,
            plugins: check.plugins,
            offload: check.offload,
            threads: check.threads,
            training: check.training,
            bindings: check.bindings,
        };
        let spec_file = dir.join("worker.json");
        std::fs::write(
            &spec_file,
            serde_json::to_string(&spec).expect("specs serialize"),
        )
        .map_err(|e| ReproError::io(&spec_file, e))?;
        Ok(spec_file)
    }
}

/// Runs the original graph eagerly once in a worker process and returns how long it
/// took: graphbug runs a graph in its own process only after a worker survived it (a
/// graph whose shapes contradict its ops can crash libtorch itself). Files go to `dir`,
/// which is created.
pub fn preflight_eager(
    exe: PathBuf,
    dir: &Path,
    graph: &Graph,
    inputs: &[Tensor],
    constants: &HashMap<String, Tensor>,
    device: &Device,
) -> Result<Duration> {
    std::fs::create_dir_all(dir).map_err(|e| ReproError::io(dir, e))?;
    let spec = WorkerSpec::write(
        dir,
        graph,
        inputs,
        constants,
        device,
        WorkerCheck::new("eager", CheckKind::Runtime),
    )?;
    IsolatedChecker::new(exe, spec, "the eager run".into(), None).start_now()
}

/// A worker spec with the contents of the files it names, sent as the first line to a
/// worker started by a launcher (which may not see this machine's files).
#[derive(Serialize, Deserialize)]
struct Bundle {
    spec: WorkerSpec,
    /// The inputs file's bytes, base64.
    inputs: String,
    /// The constants file's bytes, base64.
    constants: Option<String>,
}

impl Bundle {
    /// The bundle of the spec in `spec_file`, as one line of JSON.
    fn line(spec_file: &Path) -> Result<String> {
        use base64::Engine;
        let text = std::fs::read_to_string(spec_file).map_err(|e| ReproError::io(spec_file, e))?;
        let spec: WorkerSpec =
            serde_json::from_str(&text).map_err(|e| ReproError::io(spec_file, e))?;
        let read = |p: &Path| -> Result<String> {
            let bytes = std::fs::read(p).map_err(|e| ReproError::io(p, e))?;
            Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
        };
        let bundle = Bundle {
            inputs: read(&spec.inputs)?,
            constants: spec.constants.as_deref().map(read).transpose()?,
            spec,
        };
        Ok(serde_json::to_string(&bundle).expect("bundles serialize"))
    }

    /// The spec, its files written into `dir` and its paths pointing there.
    fn unpack(self, dir: &Path) -> Result<WorkerSpec> {
        use base64::Engine;
        let write = |name: &str, data: &str| -> Result<PathBuf> {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|e| ReproError::Other(format!("bad {name} in the worker bundle: {e}")))?;
            let path = dir.join(name);
            std::fs::write(&path, bytes).map_err(|e| ReproError::io(&path, e))?;
            Ok(path)
        };
        let mut spec = self.spec;
        spec.inputs = write("inputs.safetensors", &self.inputs)?;
        spec.constants = self
            .constants
            .map(|c| write("constants.safetensors", &c))
            .transpose()?;
        spec.offload = spec.offload.map(|_| dir.join("values"));
        Ok(spec)
    }
}

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
    pub fn new(template: &str) -> Result<Launcher> {
        if !template.contains("{cmd}") && !template.contains("{args}") {
            return Err(ReproError::Other(format!(
                "the worker launcher `{template}` has no {{cmd}} (or {{args}}) where the worker command goes, e.g. `srun -N1 {{cmd}}`"
            )));
        }
        Ok(Launcher {
            template: template.to_string(),
        })
    }

    /// The shell command that starts a worker of `exe`.
    fn command(&self, exe: &Path) -> String {
        let quoted = format!("'{}'", exe.display().to_string().replace('\'', "'\\''"));
        self.template
            .replace("{cmd}", &format!("{quoted} {STDIN_WORKER_ARGS}"))
            .replace("{args}", STDIN_WORKER_ARGS)
    }
}

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

/// Runs the worker loop on standard input and output until input ends. With the spec path
/// `-`, the spec and its files come first on standard input (see [`Launcher`]).
pub fn worker_main(spec_path: &Path) -> Result<()> {
    {
        // The parent (or the engine's launcher) learns that the worker runs.
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{HELLO}").and_then(|()| out.flush());
    }
    let mut stdin = std::io::stdin().lock();
    // Files a bundle brought live as long as the worker.
    let mut _unpacked = None;
    let spec: WorkerSpec = if spec_path == Path::new("-") {
        let mut line = String::new();
        stdin
            .read_line(&mut line)
            .map_err(|e| ReproError::Other(format!("reading the worker bundle: {e}")))?;
        let bundle: Bundle = serde_json::from_str(&line)
            .map_err(|e| ReproError::Other(format!("bad worker bundle on standard input: {e}")))?;
        let scratch = crate::scratch::Scratch::new("worker")?;
        let spec = bundle.unpack(scratch.path())?;
        _unpacked = Some(scratch);
        spec
    } else {
        let text = std::fs::read_to_string(spec_path).map_err(|e| ReproError::io(spec_path, e))?;
        serde_json::from_str(&text).map_err(|e| ReproError::io(spec_path, e))?
    };
    drop(stdin);
    let queries = end_with_input(_unpacked.as_ref().map(|s| s.path().to_path_buf()))?;
    // Workers side by side on one machine share its cores; a worker in a Slurm job uses
    // the CPUs its job was given (libtorch would otherwise take every core of the node).
    if let Some(n) = spec.threads.or_else(slurm_cpus) {
        tch::set_num_threads(i32::try_from(n.max(1)).unwrap_or(1));
    }
    for p in &spec.plugins {
        load_plugin(p).map_err(|e| ReproError::Other(e.to_string()))?;
    }
    let graph = parse_graph(&spec.graph)?;
    let names: Vec<String> = graph.placeholder_names();
    let device: Device = spec.device.parse().map_err(ReproError::Other)?;
    let tdev = graphbug_aten::dtype::tch_device(&device)?;
    let inputs: Vec<tch::Tensor> = order_tensors(read_tensors(&spec.inputs)?, &names, "inputs")?
        .into_iter()
        .map(|t| t.to_device(tdev))
        .collect();
    let constants = match &spec.constants {
        Some(p) => read_tensors(p)?
            .into_iter()
            .map(|(k, t)| (k, t.to_device(tdev)))
            .collect(),
        None => Default::default(),
    };
    let eager_started = Instant::now();
    let values = ReferenceValues::record(
        &graph,
        &inputs,
        &constants,
        &device,
        spec.offload.as_deref(),
    )?;
    let original = Original::borrowing(&graph);
    let runnable_form = graphbug_aten::dynamic::needs_runnable_form(&graph);
    let runnable = |g: Graph| -> std::result::Result<Graph, String> {
        if runnable_form {
            graphbug_aten::dynamic::runnable(&g, &spec.bindings)
                .map_err(|e| format!("making the candidate runnable: {e}"))
        } else {
            Ok(g)
        }
    };
    let mut checker = BackendChecker::new(lookup(&spec.backend)?, spec.check, values)
        .with_accuracy(spec.accuracy)
        .with_training(spec.training);
    let stages = StageReports::start();
    let reporting = stages.clone();
    checker.on_stage(Box::new(move |stage| reporting.entered(stage)));
    let stdout = std::io::stdout();
    // The eager run's time tells the parent how long the graph takes.
    writeln!(
        stdout.lock(),
        "@ready {}",
        eager_started.elapsed().as_secs_f64()
    )
    .map_err(|e| ReproError::Other(e.to_string()))?;
    for line in queries {
        let req: Request = serde_json::from_str(&line)
            .map_err(|e| ReproError::Other(format!("bad query `{line}`: {e}")))?;
        let verdict = match req.candidate(&original, &runnable) {
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
        .map_err(|e| ReproError::Other(format!("answering: {e}")))?;
    }
    Ok(())
}

/// The stage a worker's query is in (`compile`, `runtime`), reported on its output only
/// once the stage has lasted [`STAGE_QUIET`]: what a timeout needs to say where it hung.
/// A query quicker than that writes one line, its verdict: through an engine's launcher,
/// a small write that follows another unacknowledged one waits for the delayed
/// acknowledgement (40 ms a query through `srun`).
#[derive(Clone)]
struct StageReports(Arc<Mutex<Option<(String, Instant, bool)>>>);

/// How long a stage lasts before it is reported.
const STAGE_QUIET: Duration = Duration::from_millis(50);

impl StageReports {
    /// Reports with a thread of their own.
    fn start() -> StageReports {
        let reports = StageReports(Arc::new(Mutex::new(None)));
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

    /// The query entered `stage`.
    fn entered(&self, stage: &str) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((stage.to_string(), Instant::now(), false));
    }

    /// The query is answered: no stage of it is reported from now on (while the guard
    /// lives, the verdict is written).
    fn answered(&self) -> std::sync::MutexGuard<'_, Option<(String, Instant, bool)>> {
        let mut current = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *current = None;
        current
    }
}

/// The CPUs Slurm gave the job this process runs in, on this node (`SLURM_CPUS_ON_NODE`).
fn slurm_cpus() -> Option<usize> {
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
fn end_with_input(scratch: Option<PathBuf>) -> Result<Receiver<String>> {
    let end = move |code: i32| {
        if let Some(dir) = &scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
        // SAFETY: _exit ends the process at once; nothing of it is used afterwards.
        unsafe { libc::_exit(code) }
    };
    let on_term = end.clone();
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGTERM])
        .map_err(|e| ReproError::Other(format!("watching for SIGTERM: {e}")))?;
    std::thread::Builder::new()
        .name("graphbug-worker-signals".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                on_term(128 + libc::SIGTERM);
            }
        })
        .map_err(|e| ReproError::Other(format!("starting the signal thread: {e}")))?;
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
        .map_err(|e| ReproError::Other(format!("starting the input thread: {e}")))?;
    Ok(queries)
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
}

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

/// The error of a run whose worker did not start: the worker's own start is its eager
/// run of the graph; anything before is the launcher's.
fn start_error(e: StartError) -> ReproError {
    match e {
        StartError::Worker(m) => ReproError::Other(format!(
            "graphbug's eager run of the graph failed in a worker process: {m}"
        )),
        other => ReproError::Other(other.to_string()),
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
        }
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

    /// The first input line of a launched worker of `spec`: the spec and its files.
    pub fn bundle(spec: &Path) -> Result<Arc<String>> {
        Bundle::line(spec).map(Arc::new)
    }

    /// Starts the worker now and returns how long its eager run of the original took.
    /// That run happens in the worker, so a graph that crashes libtorch even in eager
    /// mode is an error here, not the end of the calling process.
    pub fn start_now(&mut self) -> Result<Duration> {
        self.start().map_err(start_error)?;
        Ok(self.eager.unwrap_or_default())
    }

    /// Waits for the first of `checkers`' workers (launched side by side) to be ready and
    /// moves it to the front: the others go on starting (an engine may queue some of them
    /// for a while). One that cannot start is left out, with a message (a node may fail);
    /// when none starts, the error is the first one's.
    pub fn start_first(checkers: &mut Vec<IsolatedChecker>) -> Result<Duration> {
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
                            eprintln!("{}: {e}; the search goes on without it", c.worker_label());
                        }
                        first_error.get_or_insert(e);
                    }
                }
            }
            if checkers.is_empty() {
                return Err(start_error(first_error.expect("a checker was left out")));
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
    pub fn launch_now(&mut self) -> Result<()> {
        self.launch().map_err(|e| ReproError::Other(e.to_string()))
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
                cmd.arg("-c").arg(launcher.command(&self.exe));
                // Slurm names the job after the worker, so a queued one can be found.
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
                        eprintln!(
                            "{label} started after {:.1} s",
                            w.launched.elapsed().as_secs_f64()
                        );
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
                        eprintln!(
                            "{label} has not started after {:.0} s: waiting for {} (at most {:.0} s: --worker-startup sets it){}",
                            WAITING_NOTICE.as_secs_f64(),
                            self.worker_name(),
                            self.startup.as_secs_f64(),
                            if self.index > 0 { "; the other workers go on" } else { "" }
                        );
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
        if !launcher
            .template
            .split_whitespace()
            .any(|w| w.ends_with("srun"))
        {
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

    fn await_start(&mut self, limit: Duration) -> Startup {
        match self.poll_start(Some(Instant::now() + limit)) {
            Ok(true) => Startup::Started,
            Ok(false) => Startup::Waiting,
            Err(e) => {
                eprintln!(
                    "{}: {e}; the search goes on without it",
                    self.worker_label()
                );
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
                    eprintln!("{}: {e}; starting another", self.worker_label());
                    continue;
                }
            }
            // The limit is known once a worker has run the original.
            let limit = self.first_took.next_limit(&self.limit());
            match self.ask(request.clone(), limit) {
                Asked::Lost(crash) if !last => eprintln!(
                    "{} was lost mid-query ({}); relaunching it and asking again",
                    self.worker_label(),
                    crash.message
                ),
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
        loop {
            let answer = if sent {
                worker
                    .lines
                    .recv_timeout(deadline.saturating_duration_since(Instant::now()))
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
                        kind: format!("{stage} timeout"),
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
                        kind: format!("{stage} crash"),
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

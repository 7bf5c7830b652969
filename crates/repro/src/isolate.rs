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
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use graphbug_aten::accuracy::AccuracyMode;
use graphbug_aten::io::{order_tensors, read_tensors, write_tensors};
use graphbug_backends::lookup;
use graphbug_backends::plugin::load_plugin;
use graphbug_ir::{parse_graph, Device, Graph};
use graphbug_minifier::{Candidate, Checker, Signature, Verdict};
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

/// One query to a worker: the candidate itself.
#[derive(Serialize, Deserialize)]
struct Request {
    graph: String,
    inputs: Vec<graphbug_minifier::Origin>,
    kept: Vec<u32>,
}

/// Runs the worker loop on standard input and output until input ends. With the spec path
/// `-`, the spec and its files come first on standard input (see [`Launcher`]).
pub fn worker_main(spec_path: &Path) -> Result<()> {
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
    if let Some(n) = spec.threads {
        // Workers side by side on one machine share its cores.
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
    let mut checker = BackendChecker::new(lookup(&spec.backend)?, spec.check, values)
        .with_accuracy(spec.accuracy)
        .with_training(spec.training);
    checker.on_stage(Box::new(|stage| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "@stage {stage}");
        let _ = out.flush();
    }));
    let stdout = std::io::stdout();
    // The eager run's time tells the parent how long the graph takes.
    writeln!(
        stdout.lock(),
        "@ready {}",
        eager_started.elapsed().as_secs_f64()
    )
    .map_err(|e| ReproError::Other(e.to_string()))?;
    for line in stdin.lines() {
        let line = line.map_err(|e| ReproError::Other(format!("reading a query: {e}")))?;
        let req: Request = serde_json::from_str(&line)
            .map_err(|e| ReproError::Other(format!("bad query `{line}`: {e}")))?;
        let verdict = match parse_graph(&req.graph) {
            Ok(graph) => checker.check(&Candidate {
                graph,
                inputs: req.inputs,
                kept: req.kept,
                retained: Vec::new(),
            }),
            Err(e) => Verdict::Unresolved(format!("bad candidate graph: {e}")),
        };
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

struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

/// A checker that asks a worker process, classifying its death as a crash and its silence
/// as a timeout. Every wait is bounded: start-up, and each query by a [`TimeLimit`]
/// (`--timeout`, or derived from the worker's own eager run of the original).
pub struct IsolatedChecker {
    exe: PathBuf,
    spec: PathBuf,
    name: String,
    timeout: Option<Duration>,
    /// How long the first worker's eager run of the original took.
    eager: Option<Duration>,
    /// What the first query took.
    first_took: FirstTook,
    worker: Option<Worker>,
    /// A worker launched but not yet seen ready, and when it was launched.
    starting: Option<(Worker, Instant)>,
    /// How many workers were started (1 plus one per crash or timeout).
    pub starts: usize,
    /// Starts workers elsewhere, with their spec as the first line of input.
    launch: Option<(Launcher, Arc<String>)>,
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

    /// The first input line of a launched worker of `spec`: the spec and its files.
    pub fn bundle(spec: &Path) -> Result<Arc<String>> {
        Bundle::line(spec).map(Arc::new)
    }

    /// Starts the worker now and returns how long its eager run of the original took.
    /// That run happens in the worker, so a graph that crashes libtorch even in eager
    /// mode is an error here, not the end of the calling process.
    pub fn start_now(&mut self) -> Result<Duration> {
        if self.worker.is_none() {
            self.start().map_err(|e| {
                ReproError::Other(format!(
                    "graphbug's eager run of the graph failed in a worker process: {e}"
                ))
            })?;
        }
        Ok(self.eager.unwrap_or_default())
    }

    /// The limits queries get (known once a worker has started).
    pub fn limit(&self) -> TimeLimit {
        TimeLimit::new(self.timeout, self.eager.unwrap_or_default())
    }

    /// Launches the worker without waiting for it to be ready: its first query (or
    /// [`IsolatedChecker::start_now`]) waits, within the start-up limit counted from now.
    /// Workers launched side by side start up while this process goes on.
    pub fn launch_now(&mut self) -> Result<()> {
        if self.worker.is_none() && self.starting.is_none() {
            let worker = self.spawn().map_err(ReproError::Other)?;
            self.starting = Some((worker, Instant::now()));
        }
        Ok(())
    }

    /// Starts a worker (or finishes starting the one launched) and waits until it is ready.
    fn start(&mut self) -> std::result::Result<(), String> {
        let (worker, launched) = match self.starting.take() {
            Some(started) => started,
            None => (self.spawn()?, Instant::now()),
        };
        self.ready(worker, launched)
    }

    /// A new worker process, its output read by threads of its own.
    fn spawn(&mut self) -> std::result::Result<Worker, String> {
        let mut cmd = match &self.launch {
            Some((launcher, _)) => {
                let mut cmd = Command::new("sh");
                cmd.arg("-c").arg(launcher.command(&self.exe));
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
        // A launcher and what it starts form one process group, killed as one.
        let mut child = process::spawn(cmd, self.launched())
            .map_err(|e| format!("cannot start worker {}: {e}", self.worker_name()))?;
        self.starts += 1;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        if let Some((_, bundle)) = &self.launch {
            // A worker that cannot take its spec shows it as its death, below.
            let _ = writeln!(stdin, "{bundle}").and_then(|()| stdin.flush());
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
            stdin,
            lines,
            stderr_tail,
        })
    }

    /// Waits for `worker`, launched at `launched`, to say it is ready; it is then the
    /// worker queries go to.
    fn ready(&mut self, mut worker: Worker, launched: Instant) -> std::result::Result<(), String> {
        // Start-up (libtorch, plugins, the reference run) is bounded too.
        let startup = STARTUP_FLOOR.max(self.timeout.unwrap_or_default().saturating_mul(2));
        let deadline = launched + startup;
        loop {
            match worker
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(l) if l.starts_with("@ready") => {
                    let secs = l["@ready".len()..].trim().parse::<f64>().unwrap_or(0.0);
                    self.eager
                        .get_or_insert(Duration::from_secs_f64(secs.clamp(0.0, 1e6)));
                    break;
                }
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) => {
                    process::kill(&mut worker.child, self.launched());
                    return Err(format!(
                        "the worker did not start within {:.0} s: {}",
                        startup.as_secs_f64(),
                        last_lines(&worker.stderr_tail)
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = worker
                        .child
                        .wait()
                        .map(|s| process::describe_status(&s))
                        .unwrap_or_default();
                    return Err(format!(
                        "the worker died while starting ({status}): {}",
                        last_lines(&worker.stderr_tail)
                    ));
                }
            }
        }
        self.worker = Some(worker);
        Ok(())
    }

    /// Whether workers start through a launcher.
    fn launched(&self) -> bool {
        self.launch.is_some()
    }

    /// The worker command, for messages.
    fn worker_name(&self) -> String {
        match &self.launch {
            Some((l, _)) => format!("with launcher `{}`", l.template),
            None => self.exe.display().to_string(),
        }
    }

    fn kill(&mut self) -> Option<Worker> {
        if let Some((mut w, _)) = self.starting.take() {
            process::kill(&mut w.child, self.launched());
        }
        let mut w = self.worker.take()?;
        process::kill(&mut w.child, self.launched());
        Some(w)
    }
}

/// A worker gets at least this long to start (libtorch, plugins, the eager run).
const STARTUP_FLOOR: Duration = Duration::from_secs(120);

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

    fn check(&mut self, candidate: &Candidate) -> Verdict {
        let request = serde_json::to_string(&Request {
            graph: graphbug_ir::print_graph(&candidate.graph),
            inputs: candidate.inputs.clone(),
            kept: candidate.kept.clone(),
        })
        .expect("requests serialize");
        // A launched worker may vanish for reasons of its own (a node lost, a pod
        // evicted): it is relaunched and asked once more before its death is a verdict.
        let tries = if self.launched() { 2 } else { 1 };
        for attempt in 1..=tries {
            let last = attempt == tries;
            if self.worker.is_none() {
                if let Err(e) = self.start() {
                    if last {
                        return Verdict::Unresolved(e);
                    }
                    eprintln!("worker {}: {e}; starting another", self.worker_name());
                    continue;
                }
            }
            // The limit is known once a worker has run the original.
            let limit = self.first_took.next_limit(&self.limit());
            match self.ask(&request, limit) {
                Asked::Lost(crash) if !last => eprintln!(
                    "a worker {} was lost mid-query ({}); relaunching it and asking again",
                    self.worker_name(),
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
    /// Its verdict (or a timeout, which kills it).
    Answered(Verdict),
    /// It died: the candidate's crash, unless it was lost for reasons of its own.
    Lost(Signature),
}

impl IsolatedChecker {
    /// Sends `request` to the running worker and waits at most `limit` for its verdict.
    fn ask(&mut self, request: &str, limit: Duration) -> Asked {
        let worker = self.worker.as_mut().expect("started by the caller");
        let sent = writeln!(worker.stdin, "{request}").and_then(|()| worker.stdin.flush());
        let mut stage = "compile".to_string();
        let started = Instant::now();
        let deadline = started + limit;
        loop {
            let answer = if sent.is_err() {
                Err(RecvTimeoutError::Disconnected)
            } else {
                worker
                    .lines
                    .recv_timeout(deadline.saturating_duration_since(Instant::now()))
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
                    self.kill();
                    self.first_took.record(None);
                    return Asked::Answered(Verdict::Fails(Signature {
                        kind: format!("{stage} timeout"),
                        op: None,
                        message: format!("no answer within {:.3} s", limit.as_secs_f64()),
                        ..Signature::default()
                    }));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let mut w = self.worker.take().expect("a worker was running");
                    let status = w.child.wait().ok();
                    let last = last_lines(&w.stderr_tail);
                    let how = status.map_or_else(
                        || "the worker vanished".to_string(),
                        |s| process::describe_status(&s),
                    );
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
        self.kill();
    }
}

//! Isolation: candidates run in a worker process, so a crash (abort, segfault) or a hang in
//! the backend is a verdict, not the end of the run.
//!
//! The worker (`graphbug __minify-worker SPEC`) loads the original graph and its inputs
//! once, records the reference values, and then answers one query per line: the kept node
//! set comes in on stdin, the verdict goes out on stdout as JSON. It is reused between
//! queries and restarted after it dies, so libtorch start-up is paid once per crash, not
//! once per query.

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

/// One query to a worker: the candidate itself.
#[derive(Serialize, Deserialize)]
struct Request {
    graph: String,
    inputs: Vec<graphbug_minifier::Origin>,
    kept: Vec<u32>,
}

/// Runs the worker loop on standard input and output until input ends.
pub fn worker_main(spec_path: &Path) -> Result<()> {
    let text = std::fs::read_to_string(spec_path).map_err(|e| ReproError::io(spec_path, e))?;
    let spec: WorkerSpec = serde_json::from_str(&text).map_err(|e| ReproError::io(spec_path, e))?;
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
        .with_accuracy(spec.accuracy);
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
    for line in std::io::stdin().lock().lines() {
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
    /// How many workers were started (1 plus one per crash or timeout).
    pub starts: usize,
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
            starts: 0,
        }
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

    fn start(&mut self) -> std::result::Result<(), String> {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("__minify-worker")
            .arg(&self.spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = process::guard(&mut cmd, false)
            .spawn()
            .map_err(|e| format!("cannot start worker {}: {e}", self.exe.display()))?;
        self.starts += 1;
        let stdin = child.stdin.take().expect("stdin is piped");
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
        let mut worker = Worker {
            child,
            stdin,
            lines,
            stderr_tail,
        };
        // Start-up (libtorch, plugins, the reference run) is bounded too.
        let startup = STARTUP_FLOOR.max(self.timeout.unwrap_or_default().saturating_mul(2));
        let deadline = Instant::now() + startup;
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
                    process::kill(&mut worker.child, false);
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

    fn kill(&mut self) -> Option<Worker> {
        let mut w = self.worker.take()?;
        process::kill(&mut w.child, false);
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
        if self.worker.is_none() {
            if let Err(e) = self.start() {
                return Verdict::Unresolved(e);
            }
        }
        let request = serde_json::to_string(&Request {
            graph: graphbug_ir::print_graph(&candidate.graph),
            inputs: candidate.inputs.clone(),
            kept: candidate.kept.clone(),
        })
        .expect("requests serialize");
        let limit = self.first_took.next_limit(&self.limit());
        let worker = self.worker.as_mut().expect("started above");
        let sent = writeln!(worker.stdin, "{request}").and_then(|()| worker.stdin.flush());
        let mut stage = "compile".to_string();
        let started = Instant::now();
        let deadline = started + limit;
        let verdict = loop {
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
                    break serde_json::from_str(&line).unwrap_or_else(|e| {
                        Verdict::Unresolved(format!("bad worker answer `{line}`: {e}"))
                    });
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.kill();
                    self.first_took.record(None);
                    return Verdict::Fails(Signature {
                        kind: format!("{stage} timeout"),
                        op: None,
                        message: format!("no answer within {:.3} s", limit.as_secs_f64()),
                        ..Signature::default()
                    });
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let mut w = self.worker.take().expect("a worker was running");
                    let status = w.child.wait().ok();
                    let last = last_lines(&w.stderr_tail);
                    let how = status.map_or_else(
                        || "the worker vanished".to_string(),
                        |s| process::describe_status(&s),
                    );
                    break Verdict::Fails(Signature {
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
        };
        self.first_took.record(Some(started.elapsed()));
        verdict
    }
}

impl Drop for IsolatedChecker {
    fn drop(&mut self) {
        self.kill();
    }
}

//! What can be done with a repro directory: run it, minify it, analyze it.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use graphbug_aten::accuracy::{detect, same, AccuracyMode};
use graphbug_aten::reference::{fp64_copy, fp64_graph};
use graphbug_aten::{Interpreter, RtValue};
use graphbug_backends::fault::{pin_backend_name, pin_env_spec};
use graphbug_backends::plugin::load_plugin;
use graphbug_backends::registry::INJECT_FAULT_ENV;
use graphbug_backends::{lookup, Backend, CompileContext, Failure, Stage, Symptom};
use graphbug_ir::{Graph, Meta, NodeKind, Value};
use graphbug_minifier::{
    minify_parallel, BugIdentity, Check, Checker, Minified, MinifyOptions, Reliability,
};
use tch::Tensor;

use crate::case::{read_repro_dir_with_graph, ReproCase};
use crate::checkers::{describe_check, signature_of, AsRunnable, BackendChecker, CheckKind};
use crate::error::{ReproError, Result};
use crate::isolate::{IsolatedChecker, WorkerCheck, WorkerSpec};
use crate::manifest::{FailureRecord, Manifest};
use crate::scratch::Scratch;
use crate::values::ReferenceValues;
pub use graphbug_minifier::isolate::Workers;

/// Overrides for acting on a repro directory.
#[derive(Clone, Debug, Default)]
pub struct ActionOptions {
    /// Use this backend instead of the manifest's.
    pub backend: Option<String>,
    /// Run on this device instead of the manifest's.
    pub device: Option<String>,
    /// Regex the failure message must match.
    pub check_str: Option<String>,
    /// Minify with the backend in this process: no crash or hang isolation and no time
    /// limit. By default candidates run in a worker process (`worker_exe`).
    pub in_process: bool,
    /// Time limit of each backend run; `None`: derived from the eager run (see
    /// [`crate::limits::TimeLimit`]).
    pub timeout: Option<Duration>,
    /// The graphbug binary, to start isolation workers.
    pub worker_exe: Option<PathBuf>,
    /// How accuracy is compared instead of the manifest's mode.
    pub accuracy: Option<AccuracyMode>,
    /// The workers that minify (with isolation).
    pub workers: Workers,
    /// Runs per check for a flaky failure (`--repeat`): `minify` measures the original
    /// over this many runs; `run` checks a recorded rate over this many.
    pub repeat: Option<usize>,
    /// What `minify` looks for (`--check`) instead of the recorded failure; for a directory
    /// that records none (a captured graph), by default any failure of the backend, wrong
    /// results included.
    pub check: Option<Check>,
}

/// Checks before any work that `backend`'s parameters make sense for `graph` and its
/// `inputs` (a fault spec naming no node is an error saying what the graph has).
pub fn validate_backend(
    backend: &dyn Backend,
    graph: &Graph,
    inputs: &[Tensor],
    requires_grad: &[bool],
) -> Result<()> {
    backend
        .validate(graph, &crate::case::examples_for(inputs, requires_grad))
        .map_err(|e| ReproError::Other(format!("backend `{}`: {e}", backend.name())))
}

/// [`validate_backend`] for a repro case, as it runs (a training step's inputs require
/// grad).
fn validate_case(backend: &dyn Backend, case: &ReproCase) -> Result<()> {
    validate_backend(backend, &case.graph, &case.inputs, &case.requires_grad())
}

/// Checkers of `kind` failures of `backend`, one per worker process (started from `spec`,
/// see [`WorkerSpec::write`], by `workers`' launcher if any). The first is started now:
/// its start-up is the graph's eager run, and only after a worker survived it does this
/// process validate the backend against the graph (meta inference for AOT pipelines).
/// The others start at the same time. Prints the time limits queries get.
#[allow(clippy::too_many_arguments)]
pub fn start_isolated_checkers(
    exe: PathBuf,
    spec: PathBuf,
    backend: &dyn Backend,
    kind: CheckKind,
    timeout: Option<Duration>,
    (graph, inputs, requires_grad): (&Graph, &[Tensor], &[bool]),
    workers: &Workers,
) -> Result<Vec<Box<dyn Checker + Send>>> {
    let bundle = match &workers.launcher {
        Some(_) => Some(crate::isolate::bundle_line(&spec)?),
        None => None,
    };
    let started = workers
        .start(
            IsolatedChecker::new(exe, spec, describe_check(kind, backend.name()), timeout),
            bundle,
        )
        .map_err(ReproError::Other)?;
    validate_backend(backend, graph, inputs, requires_grad)?;
    Ok(started
        .into_iter()
        .map(|c| Box::new(c) as Box<dyn Checker + Send>)
        .collect())
}

/// Makes the environment what the manifest recorded: its fault spec and plugins.
fn prepare(case: &mut ReproCase, opts: &ActionOptions) -> Result<Arc<dyn Backend>> {
    if let Some(d) = &opts.device {
        let device: graphbug_ir::Device = d.parse().map_err(ReproError::Other)?;
        let tdev = graphbug_aten::dtype::tch_device(&device)?;
        case.inputs = case.inputs.iter().map(|t| t.to_device(tdev)).collect();
        case.constants = case
            .constants
            .iter()
            .map(|(k, t)| (k.clone(), t.to_device(tdev)))
            .collect();
        case.manifest.device = device.to_string();
    }
    // The whole process reproduces under the recorded fault, as the original run did; a
    // fault naming a node by position is pinned to that node first, so it stays on it
    // while the minifier removes others.
    if let Some((pinned, node)) = case
        .manifest
        .fault_spec
        .as_deref()
        .and_then(|spec| pin_env_spec(spec, &case.graph))
    {
        eprintln!("{INJECT_FAULT_ENV}: the fault is pinned to node `{node}`: {pinned}");
        case.manifest.fault_spec = Some(pinned);
    }
    let current = std::env::var(INJECT_FAULT_ENV).ok();
    if current != case.manifest.fault_spec {
        match &case.manifest.fault_spec {
            Some(spec) => std::env::set_var(INJECT_FAULT_ENV, spec),
            None => std::env::remove_var(INJECT_FAULT_ENV),
        }
    }
    for p in &case.manifest.plugins {
        match load_plugin(p) {
            Ok(_) | Err(graphbug_backends::plugin::PluginError::Register { .. }) => {}
            Err(e) => return Err(ReproError::Other(e.to_string())),
        }
    }
    let name = opts.backend.as_deref().unwrap_or(&case.manifest.backend);
    if let Some((pinned, node)) = pin_backend_name(name, &case.graph) {
        eprintln!("the fault is pinned to node `{node}`: {pinned}");
        return Ok(lookup(&pinned)?);
    }
    Ok(lookup(name)?)
}

/// Compiles and runs the case with `backend` on fresh copies of its inputs.
fn run_backend(
    backend: &dyn Backend,
    case: &ReproCase,
    graph: &Graph,
) -> std::result::Result<Vec<Option<Tensor>>, Failure> {
    let inputs = case.input_copies();
    let training = case.manifest.training;
    let examples = crate::case::examples_for(&inputs, &case.requires_grad());
    let ctx = CompileContext {
        device: case.device().map_err(|e| {
            Failure::new(
                backend.name(),
                Stage::Compile,
                Symptom::Error,
                e.to_string(),
            )
        })?,
        constants: case
            .constants
            .iter()
            .map(|(k, t)| (k.clone(), t.shallow_clone()))
            .collect(),
        ..CompileContext::default()
    };
    crate::process::report_stage("compile");
    let mut compiled = backend.compile(graph, &examples, &ctx)?;
    crate::process::report_stage("runtime");
    crate::case::seed_random_ops();
    crate::case::run_step(compiled.as_mut(), &inputs, training)
}

/// The accuracy failure of `outputs` against eager, if any: TorchDynamo's detection
/// (every output counts; see [`graphbug_aten::accuracy::detect`]).
pub fn accuracy_check(
    backend: &str,
    case: &ReproCase,
    outputs: Vec<Option<Tensor>>,
) -> Result<Option<Failure>> {
    let device = case.device()?;
    crate::case::seed_random_ops();
    let eager =
        Interpreter::new(&case.graph, &device, &case.constants)?.run(&case.input_copies())?;
    let fp64 = graphbug_aten::reference::fp64_reference(
        &case.graph,
        &case.input_copies(),
        &device,
        &case.constants,
    )?;
    Ok(detect(
        &eager.into_iter().flatten().collect::<Vec<_>>(),
        &outputs.into_iter().flatten().collect::<Vec<_>>(),
        Some(&fp64.into_iter().flatten().collect::<Vec<_>>()),
    )
    .map(|report| Failure::new(backend, Stage::Accuracy, Symptom::WrongResult, report)))
}

/// What running a repro gave.
#[derive(Debug)]
pub enum Outcome {
    /// The recorded failure happened again.
    Reproduced(Failure),
    /// It did not: what was expected, and what happened instead.
    DoesNotReproduce {
        /// The recorded failure (None for a launcher dumped before compiling).
        expected: Option<FailureRecord>,
        /// What happened.
        got: String,
    },
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Reproduced(failure) => write!(f, "reproduced: {failure}"),
            Outcome::DoesNotReproduce { expected, got } => {
                write!(f, "does not reproduce: ")?;
                match expected {
                    Some(e) => write!(f, "recorded {} {}: {}", e.stage, e.symptom, e.message)?,
                    None => write!(f, "no failure was recorded")?,
                }
                write!(f, "; this run: {got}")
            }
        }
    }
}

/// Runs the case's backend and checks for the recorded failure.
pub fn reproduce(case: &mut ReproCase, opts: &ActionOptions) -> Result<Outcome> {
    let backend = prepare(case, opts)?;
    validate_case(backend.as_ref(), case)?;
    let result = run_backend(backend.as_ref(), case, &case.graph);
    let failure = match result {
        Err(f) => Some(f),
        Ok(outputs) => accuracy_check(backend.name(), case, outputs)?,
    };
    let Some(failure) = failure else {
        return Ok(Outcome::DoesNotReproduce {
            expected: case.manifest.failure.clone(),
            got: "the backend compiled and ran, and its outputs match eager".into(),
        });
    };
    classify(case, failure, opts.check_str.as_deref())
}

/// How often a flaky repro showed its failure over repeated runs.
#[derive(Debug)]
pub struct Rate {
    /// Runs made.
    pub runs: usize,
    /// Of those, runs that reproduced the recorded failure.
    pub reproduced: usize,
    /// What the repro directory records.
    pub recorded: Reliability,
    /// How many of these runs must reproduce to match the recorded rate.
    pub need: usize,
    /// The last run's outcome that reproduced, else the last outcome.
    pub last: Outcome,
}

impl Rate {
    /// True when the failure showed at least as often as recorded.
    pub fn holds(&self) -> bool {
        self.reproduced >= self.need
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seen = Reliability {
            runs: self.runs,
            failures: self.reproduced,
        };
        if self.holds() {
            write!(
                f,
                "reproduced in {seen}, at least as often as recorded ({}); ",
                self.recorded
            )?;
        } else {
            write!(
                f,
                "does not reproduce as often as recorded: {seen}, {} needed (recorded: {}); ",
                self.need, self.recorded
            )?;
        }
        match &self.last {
            Outcome::Reproduced(failure) => write!(f, "last failure: {failure}"),
            other => write!(f, "last run: {other}"),
        }
    }
}

/// Runs a repro recorded as flaky as many times as its rate was measured over (or
/// `opts.repeat` times, the recorded count scaled to it), counting the runs that
/// reproduce its failure. `None` for a repro without a recorded rate.
pub fn reproduce_rate(case: &mut ReproCase, opts: &ActionOptions) -> Result<Option<Rate>> {
    let Some(recorded) = case.manifest.reliability else {
        return Ok(None);
    };
    let runs = opts.repeat.unwrap_or(recorded.runs).max(1);
    // Held to the recorded rate, over however many runs are made (rounded up).
    let need = (recorded.failures * runs).div_ceil(recorded.runs.max(1));
    let (mut reproduced, mut last) = (0, None);
    for _ in 0..runs {
        let outcome = reproduce(case, opts)?;
        if let Outcome::Reproduced(_) = outcome {
            reproduced += 1;
            last = Some(outcome);
        } else if reproduced == 0 {
            last = Some(outcome);
        }
    }
    Ok(Some(Rate {
        runs,
        reproduced,
        recorded,
        need,
        last: last.expect("ran at least once"),
    }))
}

/// Whether `failure` (of a run of the case) is the failure its manifest records: the same
/// kind, op and a similar message (or one matching `check_str`).
pub fn classify(case: &ReproCase, failure: Failure, check_str: Option<&str>) -> Result<Outcome> {
    let expected = case.manifest.failure.clone();
    let Some(rec) = &expected else {
        return Ok(Outcome::Reproduced(failure));
    };
    let identity = BugIdentity::new(signature_of(&rec.to_failure(&failure.backend)), check_str)
        .map_err(|e| ReproError::Other(format!("bad --check-str: {e}")))?;
    if identity.matches(&signature_of(&failure)) {
        Ok(Outcome::Reproduced(failure))
    } else {
        Ok(Outcome::DoesNotReproduce {
            expected,
            got: failure.to_string(),
        })
    }
}

/// The `main` of a generated repro.rs: reproduce the directory's failure with the embedded
/// graph; exit 1 when it reproduces, 0 when it does not, 2 when the repro is broken.
pub fn reproduce_main(graph_text: &str, dir: &Path) -> ExitCode {
    let outcome = read_repro_dir_with_graph(dir, Some(graph_text))
        .and_then(|mut case| reproduce(&mut case, &ActionOptions::default()));
    match outcome {
        Ok(o @ Outcome::Reproduced(_)) => {
            println!("{o}");
            ExitCode::from(1)
        }
        Ok(o) => {
            println!("{o}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// The checker kind that finds the recorded failure; for a directory that records none (a
/// captured graph), the accuracy check, which also finds compile and runtime failures (the
/// first the backend shows is the bug minified), as repro level 4 does.
fn check_kind(case: &ReproCase) -> CheckKind {
    case.manifest
        .failure
        .as_ref()
        .map_or(CheckKind::Accuracy, |f| CheckKind::finding(f.stage))
}

/// Minifies the case; every improvement is written to `dir/minified/` as a complete repro
/// directory. Candidates run in a worker process (a crash or a hang is a verdict, every
/// query is bounded by a [`crate::limits::TimeLimit`]) unless `opts.in_process`.
pub fn minify_repro(dir: &Path, case: &mut ReproCase, opts: &ActionOptions) -> Result<Minified> {
    let backend = prepare(case, opts)?;
    let device = case.device()?;
    let kind = match &opts.check {
        Some(Check::Backend(kind)) => *kind,
        Some(Check::Contains(_)) | None => check_kind(case),
    };
    let accuracy = opts.accuracy.unwrap_or(case.manifest.accuracy);
    let scratch = Scratch::new("minify")?;
    // Candidates are cut from the graph as written (symbolic sizes and dynamo-level calls
    // kept) and checked in their runnable form.
    let written = case.written();
    // The reference values of one eager run in this process: the in-process checker's,
    // and what saved repros are made of (isolated, only after a worker survived the run).
    let mut values = None;
    let checkers: Vec<Box<dyn Checker + Send>> = if let Some(Check::Contains(contains)) =
        &opts.check
    {
        if opts.workers.launcher.is_some() {
            return Err(ReproError::Other(
                "--worker-launcher starts workers that run a backend; a contains: check runs no backend".into(),
            ));
        }
        (0..opts.workers.count())
            .map(|_| {
                AsRunnable::wrap_for(written, Box::new(contains.clone()), &case.manifest.bindings)
            })
            .collect()
    } else if opts.in_process {
        opts.workers.allow_in_process().map_err(ReproError::Other)?;
        validate_case(backend.as_ref(), case)?;
        let recorded =
            ReferenceValues::record(written, &case.inputs, &case.constants, &device, None)?;
        let checker = BackendChecker::new(backend.clone(), kind, recorded.shallow_clone())
            .with_accuracy(accuracy)
            .with_training(case.manifest.training);
        values = Some(recorded);
        vec![AsRunnable::wrap_for(
            written,
            Box::new(checker),
            &case.manifest.bindings,
        )]
    } else {
        let exe = opts.worker_exe.clone().ok_or_else(|| {
            ReproError::Other(
                "minifying in isolation needs the graphbug binary (worker_exe); set in_process to run the backend in this process".into(),
            )
        })?;
        let spec = WorkerSpec::write(
            scratch.path(),
            written,
            &case.inputs,
            &case.constants,
            &device,
            WorkerCheck {
                accuracy,
                plugins: case.manifest.plugins.clone(),
                threads: opts.workers.threads_each(),
                training: case.manifest.training,
                // Workers cut candidates themselves and make their runnable form.
                bindings: case.manifest.bindings.clone(),
                ..WorkerCheck::new(backend.name(), kind)
            },
        )?;
        start_isolated_checkers(
            exe,
            spec,
            backend.as_ref(),
            kind,
            opts.timeout,
            (&case.graph, &case.inputs, &case.requires_grad()),
            &opts.workers,
        )?
    };
    let mut checkers = checkers;
    let values = match values {
        Some(v) => v,
        None => ReferenceValues::record(written, &case.inputs, &case.constants, &device, None)?,
    };
    // Minified repros record the backend they fail with (`--backend` may override).
    let manifest = Manifest {
        backend: backend.name().to_string(),
        ..case.manifest.clone()
    };
    let mut sink = crate::progress::in_repro_dir(dir, written, &values, manifest);
    let options = MinifyOptions {
        check_str: opts.check_str.clone(),
        value_keys: Some(values.value_keys().clone()),
        verbose: true,
        progress: true,
        // A repro recorded as flaky is held to its rate again.
        repeat: opts.repeat.or(case.manifest.reliability.map(|r| r.runs)),
        ..MinifyOptions::default()
    };
    let result = minify_parallel(written, &mut checkers, &options, &mut sink)
        .map_err(|e| ReproError::Other(e.to_string()))?;
    if result.speculative > 0 {
        eprintln!(
            "{} workers ran {} queries the search did not need (speculation)",
            checkers.len(),
            result.speculative
        );
    }
    sink.finish(&result).map_err(ReproError::Other)?;
    Ok(result)
}

/// What `analyze` found.
#[derive(Debug)]
pub struct Analysis {
    /// Intermediates compared (nodes with a single tensor value).
    pub compared: usize,
    /// The first node whose backend value fails the accuracy rules against eager, with why.
    pub first_divergence: Option<(String, String, String)>,
    /// Whether two backend runs on the same inputs differ, and where.
    pub nondeterminism: Option<String>,
    /// A failure of the backend itself, if it did not run.
    pub backend_failure: Option<Failure>,
}

impl fmt::Display for Analysis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(fail) = &self.backend_failure {
            return write!(f, "the backend does not run: {fail}");
        }
        writeln!(
            f,
            "compared {} intermediates against the float64 eager reference",
            self.compared
        )?;
        match &self.first_divergence {
            Some((node, op, why)) => writeln!(f, "first divergence: node `{node}` ({op}): {why}")?,
            None => writeln!(f, "no intermediate diverges")?,
        }
        match &self.nondeterminism {
            Some(what) => writeln!(f, "the backend is nondeterministic: {what}"),
            None => writeln!(
                f,
                "the backend is deterministic: two runs gave identical outputs"
            ),
        }
    }
}

/// Every node's value in one eager run, by node index (single tensors only).
fn intermediates(
    graph: &Graph,
    inputs: &[Tensor],
    case: &ReproCase,
    constants: &HashMap<String, Tensor>,
) -> Result<HashMap<usize, Tensor>> {
    let mut out = HashMap::new();
    Interpreter::new(graph, &case.device()?, constants)?.run_observed(inputs, &mut |i, v| {
        if let RtValue::Tensor(t) = v {
            if !graph.nodes[i].is_placeholder() {
                out.insert(i, t.copy());
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// Runs the backend and the float64 eager reference intermediate by intermediate (the
/// backend compiles the graph with every intermediate as an extra output), names the
/// first node that diverges, and runs the backend twice to tell whether it is
/// deterministic.
pub fn analyze(case: &mut ReproCase, opts: &ActionOptions) -> Result<Analysis> {
    let backend = prepare(case, opts)?;
    validate_case(backend.as_ref(), case)?;
    // Every single-tensor node becomes an output.
    let graph = &case.graph;
    let tensor_nodes: Vec<usize> = (0..graph.nodes.len())
        .filter(|&i| {
            let n = &graph.nodes[i];
            n.is_call_function() && matches!(n.meta, Meta::Tensor(_) | Meta::Unknown) && !matches!(n.kind, NodeKind::Call { .. } if graph.users().nodes[i].iter().any(|u| matches!(graph.nodes[u.index()].kind, NodeKind::GetItem { .. })))
        })
        .collect();
    let mut wide = graph.clone();
    wide.output = Some(
        tensor_nodes
            .iter()
            .map(|&i| Value::Node(graphbug_ir::NodeId(i as u32)))
            .collect(),
    );
    let first = match run_backend(backend.as_ref(), case, &wide) {
        Ok(o) => o,
        Err(f) => {
            return Ok(Analysis {
                compared: 0,
                first_divergence: None,
                nondeterminism: None,
                backend_failure: Some(f),
            })
        }
    };
    let second = run_backend(backend.as_ref(), case, &wide).map_err(ReproError::Failure)?;
    let nondeterminism = first
        .iter()
        .zip(&second)
        .enumerate()
        .find_map(|(k, (a, b))| match (a, b) {
            (Some(a), Some(b)) if !(a.size() == b.size() && a.equal(b)) => Some(format!(
                "`{}` differs between two runs",
                graph.nodes[tensor_nodes[k]].name
            )),
            _ => None,
        });
    let eager = intermediates(graph, &case.input_copies(), case, &case.constants)?;
    let g64 = fp64_graph(graph);
    let consts64: HashMap<String, Tensor> = case
        .constants
        .iter()
        .map(|(k, t)| (k.clone(), fp64_copy(t)))
        .collect();
    let inputs64: Vec<Tensor> = case.inputs.iter().map(fp64_copy).collect();
    let fp64 = intermediates(&g64, &inputs64, case, &consts64)?;
    let mut compared = 0;
    let mut first_divergence = None;
    for (k, &i) in tensor_nodes.iter().enumerate() {
        let (Some(res), Some(e), Some(r64)) = (first[k].as_ref(), eager.get(&i), fp64.get(&i))
        else {
            continue;
        };
        compared += 1;
        let report = same(
            &[e.shallow_clone()],
            &[res.shallow_clone()],
            Some(&[r64.shallow_clone()]),
            &opts.accuracy.unwrap_or(case.manifest.accuracy).options(),
        );
        if !report.passed() {
            let node = &graph.nodes[i];
            let why = report
                .first_failure()
                .map(|v| v.reason.clone())
                .unwrap_or_default();
            first_divergence = Some((
                node.name.to_string(),
                node.op()
                    .map(ToString::to_string)
                    .unwrap_or_else(|| "getitem".into()),
                why,
            ));
            break;
        }
    }
    Ok(Analysis {
        compared,
        first_divergence,
        nondeterminism,
        backend_failure: None,
    })
}

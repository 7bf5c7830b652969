//! Aten graphs in `graphbug repro` (see [`graphbug_flow::repro`]): the first run under
//! the repro machinery ([`crate::compile`]) in a supervised child, so that a crash or a
//! hang of the backend is recorded like any other failure; and `run`, `minify` and
//! `analyze` of an aten repro directory ([`crate::actions`]), `run` and `analyze` bounded
//! in a child too.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use graphbug_accuracy::AccuracyMode;
use graphbug_aten::dtype::tch_device;
use graphbug_backends::Failure;
use graphbug_flow::repro::{DirMinified, FirstRun, ReproRequest, Reproducible};
use graphbug_flow::DirAction;
use graphbug_ir::Graph;
use graphbug_run::limits::TimeLimit;
use graphbug_run::process::{is_supervised, rerun_self};
use graphbug_run::scratch::Scratch;
use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::actions::{
    analyze, classify, minify_repro, reproduce, reproduce_rate, validate_backend, ActionOptions,
    Outcome,
};
use crate::case::{read_repro_dir, refresh_standalone_build, ReproCase};
use crate::compile::{compile, record_lost_run, ReproFailure, ReproOptions};
use crate::inputs::{device, eager_in_worker, graph_inputs, worker_exe};
use crate::manifest::ReproAfter;

/// Aten graphs in `graphbug repro`, with their own options.
#[derive(Clone, Debug, Default)]
pub struct AtenRepro {
    /// The device to run on (default cpu; a directory's manifest names its own).
    pub device: Option<String>,
    /// Where to take the repro: `dynamo` or `aot` (default: `GRAPHBUG_REPRO_AFTER`, else
    /// dynamo).
    pub after: Option<String>,
    /// Record only shapes and the seed in the repro, not the real inputs.
    pub random_inputs: bool,
    /// Plugin libraries whose backends the workers load.
    pub plugins: Vec<PathBuf>,
}

impl AtenRepro {
    /// How a directory's actions run, from the request.
    fn action_options(&self, req: &ReproRequest) -> Result<ActionOptions> {
        Ok(ActionOptions {
            backend: req.backend.clone(),
            device: self.device.clone(),
            check_str: req.check_str.clone(),
            in_process: req.in_process,
            timeout: req.timeout,
            worker_exe: Some(worker_exe()?),
            accuracy: req.strict_accuracy.then_some(AccuracyMode::StrictAccuracy),
            workers: req.workers.clone(),
            repeat: req.repeat.map(|k| k as usize),
            check: req.check.clone(),
        })
    }
}

/// The repro directory `dir` for an action on it, its standalone build files made to name
/// this graphbug where they name a repro crate that is gone.
fn read_case(dir: &Path) -> Result<ReproCase> {
    refresh_standalone_build(dir)?;
    Ok(read_repro_dir(dir)?)
}

/// Exit 1 where the failure reproduces, 0 where it does not.
fn exit_code(outcome: &Outcome) -> ExitCode {
    match outcome {
        Outcome::Reproduced(_) => ExitCode::FAILURE,
        Outcome::DoesNotReproduce { .. } => ExitCode::SUCCESS,
    }
}

impl Reproducible for AtenRepro {
    fn backend_hint(&self) -> &'static str {
        "NAME"
    }

    /// The project venv's Python by its full path (it has torch), `python` without one.
    fn python(&self) -> String {
        let python = graphbug_run::workspace_root().join(".venv/bin/python");
        if python.exists() {
            python.display().to_string()
        } else {
            "python".into()
        }
    }

    /// Compiles and runs the graph under the repro machinery (and its backward for
    /// training pipelines), in a supervised child unless in process.
    fn first_run(
        &mut self,
        (file, bytes): (&Path, Vec<u8>),
        backend: &str,
        level: u8,
        req: &ReproRequest,
    ) -> Result<FirstRun> {
        let mut graph = graphbug_ir::read_graph_file(file, bytes)?;
        let source = graph.clone();
        let training = graphbug_backends::lookup(backend)?.delegates_faults();
        let device = device(self.device.as_deref())?;
        let (inputs, constants) = graph_inputs(
            &mut graph,
            req.inputs.as_ref(),
            &[],
            req.seed,
            tch_device(&device)?,
        )?;
        let mut options = ReproOptions::from_env(req.out.clone())?;
        options.level = level;
        if let Some(after) = &self.after {
            options.after = after.parse().map_err(|e: String| anyhow!(e))?;
        }
        if options.after == ReproAfter::Aot && !training {
            bail!("repros after aot are taken of the forward and backward graphs an AOT pipeline (such as aot_eager) hands to its inner compilers; `{backend}` compiles the graph whole: use --after dynamo");
        }
        options.device = device;
        options.plugins = self.plugins.clone();
        options.accuracy = AccuracyMode::strict_if(req.strict_accuracy);
        options.random_inputs = self.random_inputs.then_some(req.seed);
        // Repros after dynamo keep the graph as written (symbolic sizes, dynamo-level calls).
        if graphbug_aten::dynamic::needs_runnable_form(&source) {
            let bindings = graphbug_aten::dynamic::bind_positional(&source, &inputs)
                .map_err(|e| anyhow!(e))?;
            options.written = Some((source, bindings));
        }
        // Training pipelines differentiate every floating input and run the backward too.
        if training {
            options.requires_grad = inputs.iter().map(|t| t.is_floating_point()).collect();
        }
        if let Some(result_file) = std::env::var_os(FIRST_RUN_ENV) {
            // The supervised child: the first run only, its result for the parent.
            let result = first_run(&graph, backend, &inputs, &constants, options, training);
            let record = FirstRunRecord {
                failure: result.as_ref().err().map(|f| (*f.failure).clone()),
                repro: result.err().and_then(|f| f.repro),
            };
            std::fs::write(&result_file, serde_json::to_string(&record)?)
                .with_context(|| format!("writing {}", Path::new(&result_file).display()))?;
            return Ok(FirstRun::Handed);
        }
        println!(
            "compiling {} ({} nodes) with `{backend}` at repro level {level}",
            file.display(),
            graph.num_call_function_nodes(),
        );
        let result = if req.in_process {
            validate(backend, &graph, &inputs, &options)?;
            first_run(&graph, backend, &inputs, &constants, options, training)
        } else {
            bounded_first_run(&graph, backend, &inputs, &constants, options, req)?
        };
        let failure = match result {
            Ok(()) => return Ok(FirstRun::Passes(format!("no failure: `{backend}` compiled and ran the graph without error; at level 4 its outputs match eager"))),
            Err(f) => f,
        };
        Ok(FirstRun::Fails {
            detected: failure.failure.to_string(),
            dir: failure.repro.ok_or_else(|| match level {
                0 => " (level 0)".to_string(),
                l => format!(": the failure could not be recorded at level {l}"),
            }),
        })
    }

    fn run_dir(&self, dir: &Path, req: &ReproRequest) -> Result<ExitCode> {
        let mut case = read_case(dir)?;
        if let Some(code) = supervise_action(&case, DirAction::Run, req)? {
            return Ok(code);
        }
        let opts = self.action_options(req)?;
        if let Some(rate) = reproduce_rate(&mut case, &opts)? {
            println!("{rate}");
            return Ok(if rate.holds() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            });
        }
        let outcome = reproduce(&mut case, &opts)?;
        println!("{outcome}");
        Ok(exit_code(&outcome))
    }

    fn minify_dir(&mut self, dir: &Path, req: &ReproRequest) -> Result<DirMinified> {
        let mut case = read_case(dir)?;
        let note = (case.manifest.accuracy == AccuracyMode::StrictAccuracy
            && !req.strict_accuracy)
            .then(|| "only non-floating outputs differ: the repro records strict_accuracy, so its minifier counts them".to_string());
        let opts = self.action_options(req)?;
        let m = minify_repro(dir, &mut case, &opts)?;
        Ok(DirMinified {
            text: crate::save::repro_text(m.graph()),
            minified: m,
            jobs: opts.workers.count(),
            note,
        })
    }

    fn analyze_dir(&self, dir: &Path, req: &ReproRequest) -> Result<ExitCode> {
        let mut case = read_case(dir)?;
        if let Some(code) = supervise_action(&case, DirAction::Analyze, req)? {
            return Ok(code);
        }
        print!("{}", analyze(&mut case, &self.action_options(req)?)?);
        Ok(ExitCode::SUCCESS)
    }

    /// Not built for aten graphs yet: said, naming what to do meanwhile.
    fn bisect(&mut self, req: &graphbug_flow::bisect::BisectRequest) -> Result<ExitCode> {
        // Every probe loads the plugins this run loaded.
        let mut req = req.clone();
        for p in &self.plugins {
            req.child_args.push("--plugin".into());
            req.child_args.push(p.into());
        }
        crate::bisect::bisect(&req)
    }

    fn share_dir(&mut self, dir: &Path, _req: &ReproRequest) -> Result<PathBuf> {
        bail!(
            "{}: `share` is built for XLA repro directories only; an aten graph's (graph.py's stack-trace comments, node names, parameters and inputs) cannot be scrubbed by graphbug yet",
            dir.display()
        )
    }
}

/// Environment variable telling a supervised child of `repro GRAPH` to make the first run
/// only and write its [`FirstRunRecord`] to the file named.
const FIRST_RUN_ENV: &str = "GRAPHBUG_REPRO_FIRST_RUN";

/// What the first run of `repro GRAPH` found, passed from the supervised child.
#[derive(Serialize, Deserialize)]
struct FirstRunRecord {
    failure: Option<Failure>,
    repro: Option<PathBuf>,
}

/// Compiles and runs the graph under the repro machinery (and its backward for training
/// pipelines).
fn first_run(
    graph: &Graph,
    backend: &str,
    inputs: &[Tensor],
    constants: &HashMap<String, Tensor>,
    options: ReproOptions,
    training: bool,
) -> std::result::Result<(), ReproFailure> {
    let mut c = compile(graph, backend, inputs, constants, options)?;
    let outputs = c.run(inputs)?;
    if training {
        c.backward(&crate::case::ones_like_outputs(&outputs))?;
    }
    Ok(())
}

/// [`first_run`] in a child process bounded in time: a crash or a hang of the backend is
/// a failure like any other, recorded in a repro directory at levels 1 and up.
fn bounded_first_run(
    graph: &Graph,
    backend: &str,
    inputs: &[Tensor],
    constants: &HashMap<String, Tensor>,
    options: ReproOptions,
    req: &ReproRequest,
) -> Result<std::result::Result<(), ReproFailure>> {
    let scratch = Scratch::new("repro")?;
    let eager = eager_in_worker(graph, inputs, constants, &options.device, &scratch)?;
    validate(backend, graph, inputs, &options)?;
    let limit = TimeLimit::new(req.timeout, eager).first();
    let result_file = scratch.path().join("first-run.json");
    let before = std::fs::read_link(&options.dir).ok();
    let run = rerun_self(&[(FIRST_RUN_ENV, &result_file)], limit, scratch.path())?;
    if let Some(failure) = run.failure(backend, limit) {
        // The child could not report: write the repro here (or complete the launcher the
        // child wrote before compiling).
        let left = std::fs::read_link(&options.dir).ok() != before;
        let training = run.in_backward();
        return Ok(Err(record_lost_run(
            graph,
            backend,
            inputs,
            constants,
            &options,
            (failure, training),
            left,
        )));
    }
    let text = std::fs::read_to_string(&result_file).map_err(|_| {
        anyhow!(
            "the first run ended without a result ({:?}); its errors are above",
            run.ended
        )
    })?;
    let record: FirstRunRecord = serde_json::from_str(&text)?;
    Ok(match record.failure {
        None => Ok(()),
        Some(f) => Err(ReproFailure {
            failure: Box::new(f),
            repro: record.repro,
        }),
    })
}

/// Checks the backend's parameters against the graph (see `Backend::validate`).
fn validate(backend: &str, graph: &Graph, inputs: &[Tensor], options: &ReproOptions) -> Result<()> {
    let b = graphbug_backends::lookup(backend)?;
    Ok(validate_backend(
        b.as_ref(),
        graph,
        inputs,
        &options.requires_grad,
    )?)
}

/// Runs `run` and `analyze` on a repro directory in a supervised child bounded in time
/// (a crash or a hang of the backend is then an outcome, not the end of graphbug); `None`
/// in that child, or without isolation, where the action runs here.
fn supervise_action(
    case: &ReproCase,
    action: DirAction,
    req: &ReproRequest,
) -> Result<Option<ExitCode>> {
    if is_supervised() || req.in_process {
        return Ok(None);
    }
    let scratch = Scratch::new("repro-action")?;
    let eager = eager_in_worker(
        &case.graph,
        &case.inputs,
        &case.constants,
        &case.device()?,
        &scratch,
    )?;
    let limit = TimeLimit::new(req.timeout, eager);
    // analyze runs the backend twice and eager three times.
    let limit = match action {
        DirAction::Analyze => limit.first().saturating_mul(3),
        _ => limit.first(),
    };
    let backend = req.backend.as_deref().unwrap_or(&case.manifest.backend);
    graphbug_flow::rerun_bounded(&scratch, limit, |run| {
        let failure = run
            .failure(backend, limit)
            .expect("invariant: a run without an exit code is a failure");
        match action {
            DirAction::Run => {
                let outcome = classify(case, failure, req.check_str.as_deref())?;
                println!("{outcome}");
                Ok(exit_code(&outcome))
            }
            _ => {
                println!("the backend does not run: {failure}");
                Ok(ExitCode::SUCCESS)
            }
        }
    })
    .map(Some)
}

//! `graphbug repro`: the main job. Compile a graph under the repro machinery, write a repro
//! when the backend fails, minify it; or run, minify and analyze an existing repro.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use graphbug::aten::accuracy::AccuracyMode;
use graphbug::aten::device::ensure_device;
use graphbug::aten::dtype::tch_device;
use graphbug::backends::Failure;
use graphbug::ir::Device;
use graphbug::ir::Graph;
use graphbug::minifier::Minified;
use graphbug::repro::actions::{
    analyze, classify, minify_repro, reproduce, reproduce_rate, validate_backend, ActionOptions,
    Outcome,
};
use graphbug::repro::case::{absolute, read_repro_dir, ReproCase};
use graphbug::repro::compile::{compile, record_lost_run, ReproFailure, ReproOptions};
use graphbug::repro::limits::TimeLimit;
use graphbug::repro::manifest::ReproAfter;
use graphbug::repro::process::{is_supervised, rerun_self};
use graphbug::repro::scratch::Scratch;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

use super::args::ReproArgs;
use super::{eager_in_worker, graph_inputs, load_graph, rerun_bounded, worker_exe};
use graphbug::flow::{Dialect, DirAction};
use tch::Tensor;

fn action_options(args: &ReproArgs) -> Result<ActionOptions> {
    Ok(ActionOptions {
        backend: args.backend.clone(),
        device: args.device.clone(),
        check_str: args.check_str.clone(),
        in_process: args.no_isolate,
        timeout: args.timeout,
        worker_exe: Some(worker_exe()?),
        accuracy: args.strict_accuracy.then_some(AccuracyMode::StrictAccuracy),
        workers: args.workers.workers()?,
        repeat: args.repeat.map(|k| k as usize),
        check: args.check.clone(),
    })
}

/// `graphbug repro`.
pub fn repro(args: &ReproArgs, plugins: &[PathBuf]) -> Result<ExitCode> {
    match &args.target {
        None => {
            let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cnn");
            // (Once: the supervised re-run of this command line says nothing of it.)
            if !graphbug::repro::process::is_supervised() {
                println!("graphbug demo: the CNN reference graph (examples/cnn) through relu_accuracy_error_TESTING_ONLY at level 4");
            }
            flow(
                &demo.join("forward.py"),
                Some(&demo.join("inputs.npz")),
                "relu_accuracy_error_TESTING_ONLY",
                Some(4),
                args,
                plugins,
            )
        }
        Some(t) if t.is_dir() => on_dir(
            t,
            DirAction::asked(t, args.action.as_deref(), args.check.is_some())?,
            args,
        ),
        Some(t) => {
            if let Some(a) = &args.action {
                bail!("{} is not a repro directory, so `{a}` does not apply; give a graph file alone to run the whole flow", t.display());
            }
            if args.check.is_some() {
                bail!("--check says what `repro DIR minify` looks for; the whole flow on a graph file detects the failure by --level (or use `graphbug minify {} --check ...`)", t.display());
            }
            let backend = args
                .backend
                .as_deref()
                .ok_or_else(|| anyhow!("--backend NAME is needed to compile {}", t.display()))?;
            flow(t, args.inputs.as_ref(), backend, args.level, args, plugins)
        }
    }
}

/// Compile, run, and on failure write the repro and minify it.
fn flow(
    file: &Path,
    inputs_file: Option<&PathBuf>,
    backend: &str,
    level: Option<u8>,
    args: &ReproArgs,
    plugins: &[PathBuf],
) -> Result<ExitCode> {
    let started = Instant::now();
    let mut graph = load_graph(file)?;
    let source = graph.clone();
    let training = graphbug::backends::lookup(backend)?.delegates_faults();
    let device: Device = args
        .device
        .as_deref()
        .unwrap_or("cpu")
        .parse()
        .map_err(|e: String| anyhow!(e))?;
    ensure_device(&device)?;
    let (inputs, constants) = graph_inputs(
        &mut graph,
        inputs_file,
        &[],
        args.seed,
        tch_device(&device)?,
    )?;
    let mut options = ReproOptions::from_env(args.out.clone())?;
    if let Some(l) = level {
        options.level = l;
    } else if std::env::var(graphbug::repro::compile::REPRO_LEVEL_ENV).is_err() {
        options.level = 4;
    }
    if let Some(after) = &args.after {
        options.after = after.parse().map_err(|e: String| anyhow!(e))?;
    }
    if options.after == ReproAfter::Aot && !training {
        bail!("repros after aot are taken of the forward and backward graphs an AOT pipeline (such as aot_eager) hands to its inner compilers; `{backend}` compiles the graph whole: use --after dynamo");
    }
    options.device = device;
    options.plugins = plugins.to_vec();
    options.accuracy = graphbug::accuracy::AccuracyMode::strict_if(args.strict_accuracy);
    options.random_inputs = args.random_inputs.then_some(args.seed);
    // Repros after dynamo keep the graph as written (symbolic sizes, dynamo-level calls).
    if graphbug::aten::dynamic::needs_runnable_form(&source) {
        let bindings =
            graphbug::aten::dynamic::bind_positional(&source, &inputs).map_err(|e| anyhow!(e))?;
        options.written = Some((source, bindings));
    }
    // Training pipelines differentiate every floating input and run the backward too.
    if training {
        options.requires_grad = inputs.iter().map(|t| t.is_floating_point()).collect();
    }

    if let Some(result_file) = std::env::var_os(FIRST_RUN_ENV) {
        // The supervised child: the first run only, its result for the parent.
        let result = first_run(&graph, backend, &inputs, &constants, options, training);
        let record = FirstRun {
            failure: result.as_ref().err().map(|f| (*f.failure).clone()),
            repro: result.err().and_then(|f| f.repro),
        };
        std::fs::write(&result_file, serde_json::to_string(&record)?)
            .with_context(|| format!("writing {}", Path::new(&result_file).display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "compiling {} ({} nodes) with `{backend}` at repro level {}",
        file.display(),
        graph.num_call_function_nodes(),
        options.level
    );
    let options_level = options.level;
    let result = if args.no_isolate {
        validate(backend, &graph, &inputs, &options)?;
        first_run(&graph, backend, &inputs, &constants, options, training)
    } else {
        bounded_first_run(&graph, backend, &inputs, &constants, options, args)?
    };
    let failure = match result {
        Ok(()) => {
            println!("no failure: `{backend}` compiled and ran the graph without error; at level 4 its outputs match eager");
            return Ok(ExitCode::SUCCESS);
        }
        Err(f) => f,
    };
    println!("detected: {}", failure.failure);
    let Some(dir) = &failure.repro else {
        if options_level == 0 {
            println!("no repro written (level 0)");
        } else {
            println!(
                "no repro written: the failure could not be recorded at level {options_level}"
            );
        }
        return Ok(ExitCode::FAILURE);
    };
    let shown = absolute(dir);
    println!("repro written to {}", shown.display());
    if args.no_minify {
        super::report_to(dir);
        return Ok(ExitCode::SUCCESS);
    }
    let mut case = read_repro_dir(dir)?;
    if case.manifest.accuracy == AccuracyMode::StrictAccuracy && !args.strict_accuracy {
        println!("only non-floating outputs differ: the repro records strict_accuracy, so its minifier counts them");
    }
    // The manifest names the backend that failed: after AOT that is the inner compiler,
    // not the `--backend` pipeline that was compiled.
    let opts = ActionOptions {
        backend: None,
        ..action_options(args)?
    };
    let m = minify_repro(dir, &mut case, &opts)?;
    println!("{}", minified_summary(&m, dir));
    print!("{}", graphbug::repro::save::repro_text(m.graph()));
    super::report_to(dir);
    println!("done in {:.1} s. Next:", started.elapsed().as_secs_f64());
    for line in graphbug::flow::next_commands(
        Dialect::Aten,
        &shown.join("minified").display().to_string(),
        &super::graphbug_command(),
        &super::venv_python(),
    ) {
        println!("  {line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Environment variable telling a supervised child of `repro GRAPH` to make the first run
/// only and write its [`FirstRun`] to the file named.
const FIRST_RUN_ENV: &str = "GRAPHBUG_REPRO_FIRST_RUN";

/// What the first run of `repro GRAPH` found, passed from the supervised child.
#[derive(Serialize, Deserialize)]
struct FirstRun {
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
        c.backward(&graphbug::repro::case::ones_like_outputs(&outputs))?;
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
    args: &ReproArgs,
) -> Result<std::result::Result<(), ReproFailure>> {
    let scratch = Scratch::new("repro")?;
    let eager = eager_in_worker(graph, inputs, constants, &options.device, &scratch)?;
    validate(backend, graph, inputs, &options)?;
    let limit = TimeLimit::new(args.timeout, eager).first();
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
    let record: FirstRun = serde_json::from_str(&text)?;
    Ok(match record.failure {
        None => Ok(()),
        Some(f) => Err(ReproFailure {
            failure: Box::new(f),
            repro: record.repro,
        }),
    })
}

/// `minified N nodes to M in Q queries (C cache hits): DIR/minified`.
fn minified_summary(m: &Minified, dir: &Path) -> String {
    format!(
        "minified {} nodes to {} in {} queries ({} cache hits): {}",
        m.stats.start_nodes,
        m.stats.end_nodes,
        m.stats.queries,
        m.stats.cache_hits,
        absolute(dir).join("minified").display()
    )
}

/// Checks the backend's parameters against the graph (see `Backend::validate`).
fn validate(backend: &str, graph: &Graph, inputs: &[Tensor], options: &ReproOptions) -> Result<()> {
    let b = graphbug::backends::lookup(backend)?;
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
    args: &ReproArgs,
) -> Result<Option<ExitCode>> {
    if is_supervised() || args.no_isolate {
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
    let limit = TimeLimit::new(args.timeout, eager);
    // analyze runs the backend twice and eager three times.
    let limit = match action {
        DirAction::Analyze => limit.first().saturating_mul(3),
        _ => limit.first(),
    };
    let backend = args.backend.as_deref().unwrap_or(&case.manifest.backend);
    rerun_bounded(&scratch, limit, |run| {
        let failure = run
            .failure(backend, limit)
            .expect("invariant: a run without an exit code is a failure");
        match action {
            DirAction::Run => {
                let outcome = classify(case, failure, args.check_str.as_deref())?;
                println!("{outcome}");
                Ok(match outcome {
                    Outcome::Reproduced(_) => ExitCode::FAILURE,
                    Outcome::DoesNotReproduce { .. } => ExitCode::SUCCESS,
                })
            }
            _ => {
                println!("the backend does not run: {failure}");
                Ok(ExitCode::SUCCESS)
            }
        }
    })
    .map(Some)
}

/// run / minify / analyze on a repro directory.
fn on_dir(dir: &Path, action: DirAction, args: &ReproArgs) -> Result<ExitCode> {
    let mut case = read_repro_dir(dir)?;
    if matches!(action, DirAction::Run | DirAction::Analyze) {
        if let Some(code) = supervise_action(&case, action, args)? {
            return Ok(code);
        }
    }
    let opts = action_options(args)?;
    match action {
        DirAction::Run => {
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
            Ok(match outcome {
                Outcome::Reproduced(_) => ExitCode::FAILURE,
                Outcome::DoesNotReproduce { .. } => ExitCode::SUCCESS,
            })
        }
        DirAction::Minify => {
            let m = minify_repro(dir, &mut case, &opts)?;
            print!("{}", graphbug::repro::save::repro_text(m.graph()));
            println!("{}", minified_summary(&m, dir));
            super::report_to(dir);
            Ok(ExitCode::SUCCESS)
        }
        DirAction::Analyze => {
            print!("{}", analyze(&mut case, &opts)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

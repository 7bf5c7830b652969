//! `graphbug minify`: shrink a failing graph to a 1-minimal one that fails the same way.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use graphbug::aten::device::ensure_device;
use graphbug::aten::dtype::tch_device;
use graphbug::backends::lookup;
use graphbug::ir::{Device, Graph};
use graphbug::minifier::{minify_parallel, Checker, Contains, MinifyOptions, NoSink};
use graphbug::repro::actions::{start_isolated_checkers, validate_backend};
use graphbug::repro::checkers::AsRunnable;
use graphbug::repro::command::CommandChecker;
use graphbug::repro::isolate::{WorkerCheck, WorkerSpec};
use graphbug::repro::limits::{parse_timeout, TimeLimit};
use graphbug::repro::progress::{inputs_fingerprint, MinifyDir, RunKey};
use graphbug::repro::scratch::Scratch;
use graphbug::repro::{BackendChecker, CheckKind, ReferenceValues};
use tch::Tensor;

use super::{accuracy_mode, eager_in_worker, graph_inputs, load_graph, worker_exe};

/// Arguments of `graphbug minify`.
#[derive(Args)]
pub struct MinifyArgs {
    /// Graph text file.
    file: PathBuf,
    /// Inputs (.safetensors or .npz); without it, seeded random inputs.
    #[arg(long)]
    inputs: Option<PathBuf>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Device to run on.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Backend whose failure to reproduce (with --check compile|runtime|accuracy).
    #[arg(long)]
    backend: Option<String>,
    /// What counts as failing: compile, runtime, accuracy (with --backend), or
    /// contains:OP[,OP...] (the candidate calls every op listed).
    #[arg(long)]
    check: Option<String>,
    /// A shell command run as `CMD DIR` on each candidate's repro directory; it exits
    /// non-zero when the candidate is interesting.
    #[arg(long, conflicts_with = "check")]
    check_command: Option<String>,
    /// Regex the failure message must match (default: similar to the original's).
    #[arg(long)]
    check_str: Option<String>,
    /// With --check accuracy: count every output (TorchDynamo's strict_accuracy). By
    /// default non-floating outputs are ignored, as TorchDynamo's accuracy mode does.
    #[arg(long)]
    strict_accuracy: bool,
    /// Run the backend in a worker process, so crashes and hangs become verdicts (the
    /// default; kept for compatibility).
    #[arg(long, conflicts_with = "no_isolate")]
    isolate: bool,
    /// Run the backend in this process: faster queries, but a crash ends the run and
    /// nothing bounds a hang.
    #[arg(long, conflicts_with = "timeout")]
    no_isolate: bool,
    /// Seconds a backend run (or check command) may take before it counts as a hang.
    /// Default: derived from the original graph's eager run (printed at the start).
    #[arg(long, value_parser = parse_timeout)]
    timeout: Option<Duration>,
    /// Directory for the original, the smallest failing graph so far, and the state.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue from the state a previous run left in --out.
    #[arg(long, requires = "out")]
    resume: bool,
    /// Keep the reference values on disk and load them on demand.
    #[arg(long)]
    offload_to_disk: bool,
    /// Stop after this many queries.
    #[arg(long)]
    max_queries: Option<usize>,
    /// For a flaky bug: run the original K times, report how often it fails, and count a
    /// candidate as failing only when it fails at least as often in K runs. Without it, an
    /// original whose first two runs disagree is run 10 times and handled the same way.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(2..=1000))]
    repeat: Option<u32>,
    /// End with a JSON line of counts.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    workers: super::WorkerArgs,
}

/// One checker per worker.
type Checkers = Vec<Box<dyn Checker + Send>>;

/// Where `--offload-to-disk` keeps the reference values of this process.
fn offload_path(args: &MinifyArgs, scratch: &Scratch) -> Option<PathBuf> {
    args.offload_to_disk.then(|| scratch.path().join("values"))
}

/// The checkers the arguments ask for (one per worker), on candidates of `graph` (as
/// written; `run_graph` is its runnable form), and the reference values of the eager run
/// in this process they hold, if they needed one. Checkers that run the backend in a
/// worker start the first here: its start-up is the eager run that makes a preflight
/// unnecessary.
#[allow(clippy::too_many_arguments)]
fn build_checkers(
    args: &MinifyArgs,
    backend: Option<&str>,
    (graph, run_graph, bindings): (&Graph, &Graph, &graphbug::ir::Bindings),
    inputs: &[Tensor],
    constants: &std::collections::HashMap<String, Tensor>,
    device: &Device,
    plugins: &[PathBuf],
    scratch: &Scratch,
) -> Result<(Checkers, Option<ReferenceValues>)> {
    let offload = offload_path(args, scratch);
    let workers = args.workers.workers()?;
    if args.no_isolate {
        workers.allow_in_process()?;
    }
    if workers.launcher.is_some()
        && (args.check_command.is_some()
            || args
                .check
                .as_deref()
                .is_some_and(|c| c.starts_with("contains:")))
    {
        bail!("--worker-launcher starts workers that run a backend; with --check-command the command itself can start its work elsewhere (e.g. `srun ... my-check`), and a contains: check runs no backend");
    }
    if let Some(cmd) = &args.check_command {
        let started = Instant::now();
        // Only a graph that did not crash libtorch in a worker runs in this process.
        let eager = if args.no_isolate {
            None
        } else {
            Some(eager_in_worker(
                run_graph, inputs, constants, device, scratch,
            )?)
        };
        let values = ReferenceValues::record(graph, inputs, constants, device, offload.as_deref())?;
        let limit = TimeLimit::new(args.timeout, eager.unwrap_or_else(|| started.elapsed()));
        eprintln!("{}", limit.describe());
        // Each worker writes its candidates into a directory of its own.
        let checkers = (0..workers.count())
            .map(|k| {
                let dir = match k {
                    0 => scratch.path().join("command"),
                    k => scratch.path().join(format!("command-{k}")),
                };
                Box::new(CommandChecker::new(cmd, values.shallow_clone(), dir, limit))
                    as Box<dyn Checker + Send>
            })
            .collect();
        return Ok((checkers, Some(values)));
    }
    let check = args.check.as_deref().ok_or_else(|| {
        anyhow!(
            "say what fails: --check compile|runtime|accuracy|contains:OPS or --check-command CMD"
        )
    })?;
    if let Some(ops) = check.strip_prefix("contains:") {
        let contains = Contains::parse(ops).map_err(|e| anyhow!(e))?;
        if !args.no_isolate {
            eager_in_worker(run_graph, inputs, constants, device, scratch)?;
        }
        let checkers = (0..workers.count())
            .map(|_| Box::new(contains.clone()) as Box<dyn Checker + Send>)
            .collect();
        return Ok((checkers, None));
    }
    let kind: CheckKind = check.parse().map_err(|e: String| anyhow!(e))?;
    let backend = backend.ok_or_else(|| anyhow!("--check {check} needs --backend NAME"))?;
    let resolved = lookup(backend)?;
    if args.no_isolate {
        validate_backend(resolved.as_ref(), run_graph, inputs, &[])?;
        let values = ReferenceValues::record(graph, inputs, constants, device, offload.as_deref())?;
        let checker = BackendChecker::new(resolved, kind, values.shallow_clone())
            .with_accuracy(accuracy_mode(args.strict_accuracy));
        return Ok((vec![Box::new(checker)], Some(values)));
    }
    let spec = WorkerSpec::write(
        scratch.path(),
        graph,
        inputs,
        constants,
        device,
        WorkerCheck {
            accuracy: accuracy_mode(args.strict_accuracy),
            plugins: plugins.to_vec(),
            threads: workers.threads_each(),
            offload: args
                .offload_to_disk
                .then(|| scratch.path().join("values-worker")),
            bindings: bindings.clone(),
            ..WorkerCheck::new(backend, kind)
        },
    )?;
    let checkers = start_isolated_checkers(
        worker_exe()?,
        spec,
        resolved.as_ref(),
        kind,
        args.timeout,
        (run_graph, inputs, &[]),
        &workers,
    )?;
    Ok((checkers, None))
}

/// The ops a `contains:` check looks for, when the check reads only the graph as written
/// and nothing needs the graph's values: no `--out` (a repro directory holds inputs) and a
/// graph that runs as written (a dynamo-level or symbolic graph is checked in its aten,
/// runnable form).
fn structural_check(args: &MinifyArgs, graph: &Graph) -> Result<Option<Contains>> {
    let Some(ops) = args
        .check
        .as_deref()
        .and_then(|c| c.strip_prefix("contains:"))
    else {
        return Ok(None);
    };
    if args.out.is_some() || graphbug::aten::dynamic::needs_runnable_form(graph) {
        return Ok(None);
    }
    Contains::parse(ops).map(Some).map_err(|e| anyhow!(e))
}

/// `graphbug minify` with a check that reads only the graph: nothing runs (no worker, no
/// inputs, no eager run), only the search.
fn minify_structurally(
    args: &MinifyArgs,
    graph: &Graph,
    contains: Contains,
    started: Instant,
) -> Result<ExitCode> {
    if args.workers.worker_launcher.is_some() {
        bail!("--worker-launcher starts workers that run a backend; a contains: check runs no backend");
    }
    let mut checkers: Checkers = (0..args.workers.workers()?.count())
        .map(|_| Box::new(contains.clone()) as Box<dyn Checker + Send>)
        .collect();
    let options = MinifyOptions {
        check_str: args.check_str.clone(),
        verbose: true,
        progress: true,
        max_queries: args.max_queries,
        ..MinifyOptions::default()
    };
    let m = minify_parallel(graph, &mut checkers, &options, &mut NoSink).map_err(|e| anyhow!(e))?;
    report(args, &m, started, None, checkers.len());
    Ok(ExitCode::SUCCESS)
}

/// Prints the result of a minification: the graph, the counts, and with `--json` a line
/// of them.
fn report(
    args: &MinifyArgs,
    m: &graphbug::minifier::Minified,
    started: Instant,
    saved: Option<&std::path::Path>,
    jobs: usize,
) {
    let seconds = started.elapsed().as_secs_f64();
    print!("{}", graphbug::repro::save::repro_text(m.graph()));
    println!(
        "minified {} nodes to {} in {} queries ({} cache hits), {seconds:.2} s; failure: {}: {}",
        m.stats.start_nodes,
        m.stats.end_nodes,
        m.stats.queries,
        m.stats.cache_hits,
        m.signature.kind,
        m.signature.message
    );
    if let Some(r) = m.stats.reliability {
        println!("the original fails in {r}; the result failed at least as often in as many runs");
    }
    if let Some(d) = saved {
        println!("smallest failing graph: {}", d.display());
    }
    if jobs > 1 {
        println!(
            "{jobs} workers; speculation: {} queries run that the search did not need",
            m.speculative
        );
    }
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "start_nodes": m.stats.start_nodes,
                "end_nodes": m.stats.end_nodes,
                "queries": m.stats.queries,
                "cache_hits": m.stats.cache_hits,
                "jobs": jobs,
                "speculative": m.speculative,
                "original_failures": m.stats.reliability.map(|r| r.failures),
                "original_runs": m.stats.reliability.map(|r| r.runs),
                "seconds": (seconds * 1000.0).round() / 1000.0,
            })
        );
    }
}

/// `graphbug minify`.
pub fn minify_command(args: &MinifyArgs, plugins: &[PathBuf]) -> Result<ExitCode> {
    let started = Instant::now();
    // Candidates are cut from the graph as written (symbolic sizes and dynamo-level calls
    // kept) and run in its runnable form, `run_graph`.
    let graph = load_graph(&args.file)?;
    if let Some(contains) = structural_check(args, &graph)? {
        return minify_structurally(args, &graph, contains, started);
    }
    let mut run_graph = graph.clone();
    let device: Device = args.device.parse().map_err(|e: String| anyhow!(e))?;
    ensure_device(&device)?;
    let (inputs, constants) = graph_inputs(
        &mut run_graph,
        args.inputs.as_ref(),
        &[],
        args.seed,
        tch_device(&device)?,
    )?;
    let bindings =
        graphbug::aten::dynamic::bind_positional(&graph, &inputs).map_err(|e| anyhow!(e))?;
    // A fault naming a node by position (`@gelu#17`) is pinned to that node, so it stays
    // on it while the minifier removes others.
    let backend = args.backend.as_deref().map(|name| {
        match graphbug::backends::fault::pin_backend_name(name, &run_graph) {
            Some((pinned, node)) => {
                eprintln!("the fault is pinned to node `{node}`: {pinned}");
                pinned
            }
            None => name.to_string(),
        }
    });
    if let Ok(spec) = std::env::var(graphbug::backends::registry::INJECT_FAULT_ENV) {
        if let Some((pinned, node)) = graphbug::backends::fault::pin_env_spec(&spec, &run_graph) {
            eprintln!("GRAPHBUG_INJECT_FAULT: the fault is pinned to node `{node}`: {pinned}");
            std::env::set_var(graphbug::backends::registry::INJECT_FAULT_ENV, pinned);
        }
    }
    let scratch = Scratch::new("minify")?;
    let (checkers, recorded) = build_checkers(
        args,
        backend.as_deref(),
        (&graph, &run_graph, &bindings),
        &inputs,
        &constants,
        &device,
        plugins,
        &scratch,
    )?;
    // The command is given repro directories, which hold the graph as written; workers
    // make the runnable form of their candidates themselves.
    let isolated_backend = !args.no_isolate
        && args.check_command.is_none()
        && !args
            .check
            .as_deref()
            .is_some_and(|c| c.starts_with("contains:"));
    let mut checkers: Vec<Box<dyn Checker + Send>> =
        if args.check_command.is_some() || isolated_backend {
            checkers
        } else {
            checkers
                .into_iter()
                .map(|c| AsRunnable::wrap_for(&graph, c, &bindings))
                .collect()
        };
    // The values saved repros are made of: from one eager run in this process (after a
    // worker survived the same run), the one the checkers hold if they needed it.
    let values = match recorded {
        Some(values) => values,
        None => {
            let offload = offload_path(args, &scratch);
            ReferenceValues::record(&graph, &inputs, &constants, &device, offload.as_deref())
                .context("eager reference run of the original graph")?
        }
    };
    let mut options = MinifyOptions {
        value_keys: Some(values.value_keys().clone()),
        check_str: args.check_str.clone(),
        verbose: true,
        progress: true,
        max_queries: args.max_queries,
        repeat: args.repeat.map(|k| k as usize),
        ..MinifyOptions::default()
    };
    let run = RunKey {
        check: match (&args.check, &args.check_command) {
            (_, Some(cmd)) => format!("command:{cmd}"),
            (Some(check), None) => check.clone(),
            (None, None) => String::new(),
        },
        backend: args.backend.clone(),
        check_str: args.check_str.clone(),
        inputs: inputs_fingerprint(&graph, &values),
    };
    let mut dir = match &args.out {
        Some(out) => Some(MinifyDir::create(
            out,
            &graph,
            &inputs,
            &values,
            run,
            args.resume,
        )?),
        None => None,
    };
    if args.resume {
        let out = args.out.as_ref().expect("--resume requires --out");
        let saved = dir.as_ref().expect("created above").saved_state()?;
        match saved {
            Some(state) => {
                eprintln!(
                    "resuming from {} nodes after {} queries",
                    state.stats.end_nodes, state.stats.queries
                );
                options.resume = Some(state.resume_point());
            }
            None => eprintln!(
                "nothing to resume in {} (no smaller failing graph was saved yet): starting over",
                out.display()
            ),
        }
    }
    let result = match dir.as_mut() {
        Some(d) => minify_parallel(&graph, &mut checkers, &options, d),
        None => minify_parallel(&graph, &mut checkers, &options, &mut NoSink),
    };
    let m = match result {
        Ok(m) => m,
        Err(e) => bail!(e),
    };
    if let Some(d) = dir.as_mut() {
        d.finish(&m)?;
    }
    report(
        args,
        &m,
        started,
        dir.as_ref().map(|d| d.minified()).as_deref(),
        checkers.len(),
    );
    Ok(ExitCode::SUCCESS)
}

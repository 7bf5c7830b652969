//! `graphbug minify`: shrink a failing graph to a 1-minimal one that fails the same way.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use graphbug::aten::device::ensure_device;
use graphbug::aten::dtype::tch_device;
use graphbug::backends::lookup;
use graphbug::ir::{Device, Graph};
use graphbug::minifier::{Check, Checker, Contains};
use graphbug::repro::actions::{start_isolated_checkers, validate_backend};
use graphbug::repro::checkers::AsRunnable;
use graphbug::repro::command::{write_graphs, CommandChecker};
use graphbug::repro::isolate::{WorkerCheck, WorkerSpec};
use graphbug::repro::limits::TimeLimit;
use graphbug::repro::progress::{inputs_fingerprint, out_dir};
use graphbug::repro::scratch::Scratch;
use graphbug::repro::{BackendChecker, ReferenceValues};
use tch::Tensor;

use super::search::{minify_structurally, run_key, search_options, search_run, MinifyArgs};
use super::{accuracy_mode, eager_in_worker, graph_inputs, parse_graph_bytes, worker_exe};
use graphbug::flow::search::search;

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
        workers.allow_in_process().map_err(|e| anyhow!(e))?;
    }
    if workers.launcher.is_some()
        && (args.check_command.is_some() || matches!(args.check, Some(Check::Contains(_))))
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
                Box::new(CommandChecker::new(
                    cmd,
                    write_graphs(values.shallow_clone()),
                    dir,
                    limit,
                )) as Box<dyn Checker + Send>
            })
            .collect();
        return Ok((checkers, Some(values)));
    }
    let check = args.check.as_ref().ok_or_else(|| {
        anyhow!(
            "say what fails: --check compile|runtime|accuracy|contains:OPS or --check-command CMD"
        )
    })?;
    let kind = match check {
        Check::Backend(kind) => *kind,
        Check::Contains(contains) => {
            if !args.no_isolate {
                eager_in_worker(run_graph, inputs, constants, device, scratch)?;
            }
            return Ok((contains.checkers(workers.count()), None));
        }
    };
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
    let Some(contains) = args.check.as_ref().and_then(Check::contains) else {
        return Ok(None);
    };
    if args.out.is_some() || graphbug::aten::dynamic::needs_runnable_form(graph) {
        return Ok(None);
    }
    Ok(Some(contains.clone()))
}

/// `graphbug minify`.
pub fn minify_command(args: &MinifyArgs, bytes: Vec<u8>, plugins: &[PathBuf]) -> Result<ExitCode> {
    let started = Instant::now();
    // Candidates are cut from the graph as written (symbolic sizes and dynamo-level calls
    // kept) and run in its runnable form, `run_graph`.
    let graph = parse_graph_bytes(&args.file, bytes)?;
    if let Some(contains) = structural_check(args, &graph)? {
        let text = |m: &graphbug::minifier::Minified| graphbug::repro::save::repro_text(m.graph());
        return minify_structurally(args, &graph, contains, started, &text)
            .map(|_| ExitCode::SUCCESS);
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
        && !matches!(args.check, Some(Check::Contains(_)));
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
    let options = search_options(args, Some(values.value_keys().clone()));
    let run = run_key(args, inputs_fingerprint(&graph, &values));
    let dir = match &args.out {
        Some(out) => Some(out_dir(out, &graph, &inputs, &values, run, args.resume)?),
        None => None,
    };
    let text = |m: &graphbug::minifier::Minified| graphbug::repro::save::repro_text(m.graph());
    search(
        &search_run(args),
        &graph,
        &mut checkers,
        options,
        dir,
        started,
        &text,
    )?;
    Ok(ExitCode::SUCCESS)
}

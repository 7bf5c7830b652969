//! `graphbug minify`: shrink a failing graph to a 1-minimal one that fails the same way.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use graphbug::aten::device::ensure_device;
use graphbug::aten::dtype::tch_device;
use graphbug::aten::io::write_tensors;
use graphbug::backends::lookup;
use graphbug::ir::{print_graph, Device, Graph};
use graphbug::minifier::{minify, Checker, Contains, MinifyOptions, NoSink};
use graphbug::repro::checkers::describe_check;
use graphbug::repro::command::CommandChecker;
use graphbug::repro::isolate::{IsolatedChecker, WorkerSpec};
use graphbug::repro::progress::MinifyDir;
use graphbug::repro::{BackendChecker, CheckKind, ReferenceValues};
use tch::Tensor;

use super::{graph_inputs, load_graph};

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
    /// Run the backend in a worker process: crashes and hangs become verdicts.
    #[arg(long)]
    isolate: bool,
    /// Seconds a query may take before it counts as a hang (with --isolate or
    /// --check-command).
    #[arg(long)]
    timeout: Option<f64>,
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
    /// End with a JSON line of counts.
    #[arg(long)]
    json: bool,
}

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Result<Scratch> {
        let dir = std::env::temp_dir().join(format!(
            "graphbug-{tag}-{}-{}",
            std::process::id(),
            now_nanos()
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The checker the arguments ask for.
fn build_checker(
    args: &MinifyArgs,
    graph: &Graph,
    inputs: &[Tensor],
    constants: &std::collections::HashMap<String, Tensor>,
    device: &Device,
    plugins: &[PathBuf],
    scratch: &Scratch,
) -> Result<Box<dyn Checker>> {
    let timeout = args.timeout.map(Duration::from_secs_f64);
    let offload = args
        .offload_to_disk
        .then(|| scratch.0.join("values-checker"));
    if let Some(cmd) = &args.check_command {
        let values = ReferenceValues::record(graph, inputs, constants, device, offload.as_deref())?;
        return Ok(Box::new(CommandChecker::new(
            cmd,
            values,
            scratch.0.join("command"),
            timeout,
        )));
    }
    let check = args.check.as_deref().ok_or_else(|| {
        anyhow!(
            "say what fails: --check compile|runtime|accuracy|contains:OPS or --check-command CMD"
        )
    })?;
    if let Some(ops) = check.strip_prefix("contains:") {
        return Ok(Box::new(Contains::parse(ops).map_err(|e| anyhow!(e))?));
    }
    let kind: CheckKind = check.parse().map_err(|e: String| anyhow!(e))?;
    let backend = args
        .backend
        .as_deref()
        .ok_or_else(|| anyhow!("--check {check} needs --backend NAME"))?;
    let resolved = lookup(backend)?;
    if args.isolate {
        let inputs_file = scratch.0.join("inputs.safetensors");
        let names: Vec<String> = graph
            .placeholders()
            .iter()
            .map(|&i| graph.node(i).name.clone())
            .collect();
        let named: Vec<(String, Tensor)> = names
            .into_iter()
            .zip(inputs.iter().map(Tensor::shallow_clone))
            .collect();
        write_tensors(&inputs_file, &named)?;
        let constants_file = if constants.is_empty() {
            None
        } else {
            let file = scratch.0.join("constants.safetensors");
            let named: Vec<(String, Tensor)> = constants
                .iter()
                .map(|(k, t)| (k.clone(), t.shallow_clone()))
                .collect();
            write_tensors(&file, &named)?;
            Some(file)
        };
        let spec = WorkerSpec {
            graph: print_graph(graph),
            inputs: inputs_file,
            constants: constants_file,
            device: device.to_string(),
            backend: backend.to_string(),
            check: kind,
            plugins: plugins.to_vec(),
            offload: args
                .offload_to_disk
                .then(|| scratch.0.join("values-worker")),
        };
        let spec_file = scratch.0.join("worker.json");
        std::fs::write(&spec_file, serde_json::to_string(&spec)?)?;
        let exe = std::env::current_exe().context("locating the graphbug binary for the worker")?;
        let name = describe_check(kind, resolved.name());
        return Ok(Box::new(IsolatedChecker::new(
            exe, spec_file, name, timeout,
        )));
    }
    let values = ReferenceValues::record(graph, inputs, constants, device, offload.as_deref())?;
    Ok(Box::new(BackendChecker::new(resolved, kind, values)))
}

/// `graphbug minify`.
pub fn minify_command(args: &MinifyArgs, plugins: &[PathBuf]) -> Result<ExitCode> {
    let started = Instant::now();
    let graph = load_graph(&args.file)?;
    let device: Device = args.device.parse().map_err(|e: String| anyhow!(e))?;
    ensure_device(&device)?;
    let (inputs, constants) = graph_inputs(
        &graph,
        args.inputs.as_ref(),
        args.seed,
        tch_device(&device)?,
    )?;
    let scratch = Scratch::new("minify")?;
    let mut checker = build_checker(
        args, &graph, &inputs, &constants, &device, plugins, &scratch,
    )?;
    // The values saved repros are made of: from one eager run in this process.
    let offload = args.offload_to_disk.then(|| scratch.0.join("values"));
    let values = ReferenceValues::record(&graph, &inputs, &constants, &device, offload.as_deref())
        .context("eager reference run of the original graph")?;
    let mut options = MinifyOptions {
        value_keys: Some(values.value_keys().clone()),
        check_str: args.check_str.clone(),
        verbose: true,
        progress: true,
        max_queries: args.max_queries,
        ..MinifyOptions::default()
    };
    let mut dir = match &args.out {
        Some(out) => Some(MinifyDir::create(out, &graph, &inputs, &values)?),
        None => None,
    };
    if args.resume {
        let state = dir
            .as_ref()
            .expect("--resume requires --out")
            .saved_state()?
            .ok_or_else(|| {
                anyhow!(
                    "nothing to resume in {}",
                    args.out.as_ref().expect("checked").display()
                )
            })?;
        eprintln!(
            "resuming from {} nodes after {} queries",
            state.stats.end_nodes, state.stats.queries
        );
        options.resume = Some(state.kept);
    }
    let result = match dir.as_mut() {
        Some(d) => minify(&graph, checker.as_mut(), &options, d),
        None => minify(&graph, checker.as_mut(), &options, &mut NoSink),
    };
    let m = match result {
        Ok(m) => m,
        Err(e) => bail!(e),
    };
    let seconds = started.elapsed().as_secs_f64();
    print!("{}", print_graph(m.graph()));
    println!(
        "minified {} nodes to {} in {} queries ({} cache hits), {seconds:.2} s; failure: {}: {}",
        m.stats.start_nodes,
        m.stats.end_nodes,
        m.stats.queries,
        m.stats.cache_hits,
        m.signature.kind,
        m.signature.message
    );
    if let Some(d) = &dir {
        println!("smallest failing graph: {}", d.minified().display());
    }
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "start_nodes": m.stats.start_nodes,
                "end_nodes": m.stats.end_nodes,
                "queries": m.stats.queries,
                "cache_hits": m.stats.cache_hits,
                "seconds": (seconds * 1000.0).round() / 1000.0,
            })
        );
    }
    Ok(ExitCode::SUCCESS)
}

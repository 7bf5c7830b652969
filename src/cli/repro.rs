//! `graphbug repro`: the main job. Compile a graph under the repro machinery, write a repro
//! when the backend fails, minify it; or run, minify and analyze an existing repro.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use graphbug::aten::device::ensure_device;
use graphbug::aten::dtype::tch_device;
use graphbug::ir::Device;
use graphbug::minifier::Minified;
use graphbug::repro::actions::{analyze, minify_repro, reproduce, ActionOptions, Outcome};
use graphbug::repro::case::{absolute, read_repro_dir};
use graphbug::repro::compile::{compile, ReproOptions};
use graphbug::repro::manifest::ReproAfter;

use super::{graph_inputs, load_graph};
use tch::Tensor;

/// Arguments of `graphbug repro`.
#[derive(Args)]
pub struct ReproArgs {
    /// A graph file (run the whole flow on it) or a repro directory (with an action).
    /// Without it: the bundled demo.
    target: Option<PathBuf>,
    /// For a repro directory: run, minify or analyze.
    action: Option<String>,
    /// Backend (for a graph file: required; for a repro: overrides the manifest's).
    #[arg(long)]
    backend: Option<String>,
    /// Repro level 0-4 (default: GRAPHBUG_REPRO_LEVEL, else 4 for a graph file).
    #[arg(long)]
    level: Option<u8>,
    /// Where to take the repro: `dynamo` (the graph given to the backend) or `aot` (the
    /// forward or backward graph an AOT pipeline gives its inner compiler). Default:
    /// GRAPHBUG_REPRO_AFTER, else dynamo.
    #[arg(long)]
    after: Option<ReproAfter>,
    /// Inputs for a graph file (.safetensors/.npz); without it, seeded random inputs.
    #[arg(long)]
    inputs: Option<PathBuf>,
    /// Seed of random inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Record only shapes and the seed in the repro, not the real inputs.
    #[arg(long)]
    random_inputs: bool,
    /// Device to run on.
    #[arg(long)]
    device: Option<String>,
    /// Where a graph file's repro goes.
    #[arg(long, default_value = "repro_out")]
    out: PathBuf,
    /// Minify in a worker process (crashes and hangs become verdicts).
    #[arg(long)]
    isolate: bool,
    /// Seconds a query may take when isolating.
    #[arg(long)]
    timeout: Option<f64>,
    /// Regex the failure message must match.
    #[arg(long)]
    check_str: Option<String>,
}

fn action_options(args: &ReproArgs) -> Result<ActionOptions> {
    Ok(ActionOptions {
        backend: args.backend.clone(),
        device: args.device.clone(),
        check_str: args.check_str.clone(),
        isolate: args.isolate,
        timeout: args.timeout.map(Duration::from_secs_f64),
        worker_exe: Some(std::env::current_exe().context("locating the graphbug binary")?),
    })
}

/// `graphbug repro`.
pub fn repro(args: &ReproArgs, plugins: &[PathBuf]) -> Result<ExitCode> {
    match &args.target {
        None => {
            let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cnn");
            println!("graphbug demo: the CNN reference graph (examples/cnn) through relu_accuracy_error_TESTING_ONLY at level 4");
            flow(
                &demo.join("forward.py"),
                Some(&demo.join("inputs.npz")),
                "relu_accuracy_error_TESTING_ONLY",
                Some(4),
                args,
                plugins,
            )
        }
        Some(t) if t.is_dir() => {
            let action = args.action.as_deref().ok_or_else(|| {
                anyhow!(
                    "say what to do with {}: run, minify or analyze",
                    t.display()
                )
            })?;
            on_dir(t, action, args)
        }
        Some(t) => {
            if let Some(a) = &args.action {
                bail!("{} is not a repro directory, so `{a}` does not apply; give a graph file alone to run the whole flow", t.display());
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
    let graph = load_graph(file)?;
    let training = graphbug::backends::lookup(backend)?.delegates_faults();
    let device: Device = args
        .device
        .as_deref()
        .unwrap_or("cpu")
        .parse()
        .map_err(|e: String| anyhow!(e))?;
    ensure_device(&device)?;
    let (inputs, constants) = graph_inputs(&graph, inputs_file, args.seed, tch_device(&device)?)?;
    let mut options = ReproOptions::from_env(args.out.clone())?;
    if let Some(l) = level {
        options.level = l;
    } else if std::env::var(graphbug::repro::compile::REPRO_LEVEL_ENV).is_err() {
        options.level = 4;
    }
    if let Some(after) = args.after {
        options.after = after;
    }
    if options.after == ReproAfter::Aot && !training {
        bail!("repros after aot are taken of the forward and backward graphs an AOT pipeline (such as aot_eager) hands to its inner compilers; `{backend}` compiles the graph whole: use --after dynamo");
    }
    options.device = device;
    options.plugins = plugins.to_vec();
    options.random_inputs = args.random_inputs.then_some(args.seed);
    // Training pipelines differentiate every floating input and run the backward too.
    if training {
        options.requires_grad = inputs.iter().map(|t| t.is_floating_point()).collect();
    }
    println!(
        "compiling {} ({} nodes) with `{backend}` at repro level {}",
        file.display(),
        graph.num_call_function_nodes(),
        options.level
    );
    let result = compile(&graph, backend, &inputs, &constants, options).and_then(|mut c| {
        let outputs = c.run(&inputs)?;
        if !training {
            return Ok(outputs);
        }
        // Ones as the gradient of every output, the way `out.sum().backward()` seeds it.
        let seeds: Vec<Option<Tensor>> = outputs
            .iter()
            .map(|o| o.as_ref().map(Tensor::ones_like))
            .collect();
        c.backward(&seeds)
    });
    let failure = match result {
        Ok(_) => {
            println!("no failure: `{backend}` compiled and ran the graph without error; at level 4 its outputs match eager");
            return Ok(ExitCode::SUCCESS);
        }
        Err(f) => f,
    };
    println!("detected: {}", failure.failure);
    let Some(dir) = &failure.repro else {
        println!("no repro written (level 0)");
        return Ok(ExitCode::FAILURE);
    };
    let shown = absolute(dir);
    println!("repro written to {}", shown.display());
    let mut case = read_repro_dir(dir)?;
    // The manifest names the backend that failed: after AOT that is the inner compiler,
    // not the `--backend` pipeline that was compiled.
    let opts = ActionOptions {
        backend: None,
        ..action_options(args)?
    };
    let m = minify_repro(dir, &mut case, &opts)?;
    println!("{}", minified_summary(&m, dir));
    print!("{}", graphbug::ir::print_graph(m.graph()));
    let minified = shown.join("minified");
    let minified = minified.display();
    println!("done in {:.1} s. Next:", started.elapsed().as_secs_f64());
    println!("  cargo xtask repro {minified} run        # reproduce the minified failure (exit 1)");
    println!("  cargo xtask repro {minified} analyze    # the first node that diverges");
    println!("  (cd {minified} && cargo run)            # the standalone Rust reproduction");
    println!("  .venv/bin/python {minified}/repro.py    # the graph in PyTorch");
    Ok(ExitCode::SUCCESS)
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

/// run / minify / analyze on a repro directory.
fn on_dir(dir: &Path, action: &str, args: &ReproArgs) -> Result<ExitCode> {
    let mut case = read_repro_dir(dir)?;
    let opts = action_options(args)?;
    match action {
        "run" => {
            let outcome = reproduce(&mut case, &opts)?;
            println!("{outcome}");
            Ok(match outcome {
                Outcome::Reproduced(_) => ExitCode::FAILURE,
                Outcome::DoesNotReproduce { .. } => ExitCode::SUCCESS,
            })
        }
        "minify" => {
            let m = minify_repro(dir, &mut case, &opts)?;
            print!("{}", graphbug::ir::print_graph(m.graph()));
            println!("{}", minified_summary(&m, dir));
            Ok(ExitCode::SUCCESS)
        }
        "analyze" => {
            print!("{}", analyze(&mut case, &opts)?);
            Ok(ExitCode::SUCCESS)
        }
        other => bail!("unknown action `{other}`: expected run, minify or analyze"),
    }
}

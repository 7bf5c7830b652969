//! Implementations of the `graphbug` subcommands. Every build reads, prints, checks and
//! runs XLA programs, and reads, prints and checks aten graphs; running aten graphs, and
//! the commands built on it, need libtorch (the `torch` feature, on by default).

pub mod args;
#[cfg(feature = "torch")]
pub mod autodiff;
#[cfg(feature = "torch")]
pub mod backends;
#[cfg(feature = "torch")]
pub mod bisect;
pub mod dialect_options;
pub mod draw;
pub mod examples;
pub mod help;
pub mod minify;
#[cfg(feature = "torch")]
pub mod run;
#[cfg(feature = "torch")]
pub mod shapes;

#[cfg(feature = "torch")]
pub use backends::{backends, load_plugins};
#[cfg(feature = "torch")]
pub use graphbug::repro::inputs::{
    graph_inputs, lower_graph, requires_grad, specialize_graph, static_only,
};
#[cfg(feature = "torch")]
pub use shapes::*;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use graphbug::flow::repro::{self, ReproRequest};
use graphbug::ir::print_graph;
use graphbug::run::process::is_supervised;

use args::Bound;
pub use args::WorkerArgs;
use dialect_options::refuse_for;
use graphbug::flow::{Dialect, DirManifest, FlowError};
use graphbug::ir::Graph;
use graphbug::xla::program::{sniff, Kind, Program};

#[cfg(feature = "torch")]
/// Re-runs this command in a child process bounded by `bound` (see
/// [`graphbug::flow::supervise`]): `Some(exit code)` in the parent.
pub fn supervise(
    bound: &Bound,
    lost: impl FnOnce(&graphbug::run::process::Supervised, std::time::Duration) -> String,
) -> Result<Option<ExitCode>> {
    graphbug::flow::supervise(bound.timeout, bound.no_isolate, lost)
}

#[cfg(feature = "torch")]
/// `error: <what> crashed inside libtorch: <why>`, for a supervised child that died.
pub fn lost_in_libtorch(
    what: &str,
    run: &graphbug::run::process::Supervised,
    limit: std::time::Duration,
) -> String {
    let why = run.lost(limit).unwrap_or_default();
    match run.ended {
        graphbug::run::process::Ended::TimedOut => format!("error: {what} did not finish: {why}"),
        _ => format!(
            "error: {what} crashed inside libtorch ({why}); a graph whose shapes contradict its ops can do this (libtorch does not check every kernel's arguments)"
        ),
    }
}

#[cfg(feature = "torch")]
/// Reads and parses a graph file (`-` reads standard input); errors name the file.
pub fn load_graph(file: &Path) -> Result<Graph> {
    Ok(graphbug::ir::read_graph_file(file, read_file(file)?)?)
}

/// A file's bytes (`-` reads standard input); errors name the file.
pub fn read_file(file: &Path) -> Result<Vec<u8>> {
    if file == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
            .context("reading standard input")?;
        Ok(bytes)
    } else {
        std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))
    }
}

/// `graphbug fmt`: prints the canonical text of an aten graph, or an XLA program as it
/// was written (told by content: see [`xla`]).
pub fn fmt(file: &Path) -> Result<ExitCode> {
    let bytes = read_file(file)?;
    if let Source::Xla(kind) = Source::of(file, &bytes) {
        return graphbug::xla::flow::run::fmt(file, &bytes, kind);
    }
    print!(
        "{}",
        print_graph(&graphbug::ir::read_graph_file(file, bytes)?)
    );
    Ok(ExitCode::SUCCESS)
}

/// `graphbug check`: verifies and counts an aten graph (`<N> nodes, <I> inputs, <O>
/// outputs`; with `meta`, its annotations against libtorch) or an XLA program (`<N>
/// instructions, <I> parameters, <O> outputs`).
pub fn check(
    file: &Path,
    meta: bool,
    inputs: Option<&Path>,
    binds: &[(String, i64)],
    bound: &Bound,
) -> Result<ExitCode> {
    let bytes = read_file(file)?;
    if let Source::Xla(kind) = Source::of(file, &bytes) {
        if meta {
            bail!("--meta infers aten graphs' shapes with libtorch; {} is {} (its shapes are checked without --meta)", file.display(), kind.name());
        }
        return graphbug::xla::flow::run::check(file, &bytes, kind);
    }
    let graph = graphbug::ir::read_graph_file(file, bytes)?;
    if meta {
        #[cfg(feature = "torch")]
        return check_aten(file, graph, meta, inputs, binds, bound);
        #[cfg(not(feature = "torch"))]
        {
            let _ = (inputs, binds, bound);
            bail!("--meta asks libtorch's meta kernels, and this graphbug was built without libtorch (the `torch` feature)");
        }
    }
    println!(
        "{} nodes, {} inputs, {} outputs",
        graph.num_call_function_nodes(),
        graph.placeholders().len(),
        graph.outputs().len()
    );
    Ok(ExitCode::SUCCESS)
}

/// What a file holds, told by its content once: an XLA program (its form) or an aten graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// An XLA program: HLO text or proto, StableHLO text or bytecode.
    Xla(Kind),
    /// An aten graph's text (anything that is not an XLA program).
    Aten,
}

impl Source {
    /// The source `bytes` (read from `path`) are.
    pub fn of(path: &Path, bytes: &[u8]) -> Source {
        sniff(bytes, path).map_or(Source::Aten, Source::Xla)
    }

    /// Its dialect.
    pub fn dialect(self) -> Dialect {
        match self {
            Source::Xla(_) => Dialect::Xla,
            Source::Aten => Dialect::Aten,
        }
    }
}

/// The graph a file's `bytes` hold: an XLA program's (HLO's entry computation, StableHLO's
/// main function), told by content, or an aten graph's; with the program's form. Errors
/// name the file, with the line and column of bad text.
pub fn read_any_graph(path: &Path, bytes: Vec<u8>) -> Result<(Graph, Option<Kind>), FlowError> {
    match Source::of(path, &bytes) {
        Source::Xla(kind) => {
            let graph = Program::read(&bytes, kind)
                .and_then(|p| p.graph())
                .map_err(|e| FlowError::bad(path, e))?;
            Ok((graph, Some(kind)))
        }
        Source::Aten => graphbug::ir::read_graph_file(path, bytes)
            .map(|graph| (graph, None))
            .map_err(|e| FlowError::Read(e.to_string())),
    }
}

/// What `file` holds, told once by its content, with the other dialect's options refused.
fn told(file: &Path, bytes: &[u8]) -> Result<Source> {
    let source = Source::of(file, bytes);
    let dialect = source.dialect();
    refuse_for(
        dialect,
        &format!("{} is {}", file.display(), dialect.noun()),
    )?;
    Ok(source)
}

/// Says that this build cannot do `what` for an aten graph: it was built without libtorch.
#[cfg(not(feature = "torch"))]
fn without_libtorch(what: &str) -> anyhow::Error {
    anyhow::anyhow!("{what} needs libtorch, and this graphbug was built without libtorch (the `torch` feature): it reads, prints and checks aten graphs, and runs, minifies and reproduces XLA programs")
}

/// `graphbug run`: an XLA program on a PJRT plugin, or an aten graph through a backend
/// (with libtorch).
pub fn run_command(args: &args::RunArgs) -> Result<ExitCode> {
    let bytes = read_file(&args.file)?;
    match told(&args.file, &bytes)? {
        Source::Xla(kind) => graphbug::xla::flow::run::run(
            &args.request(),
            args.reference_backend.as_deref(),
            &bytes,
            kind,
        ),
        #[cfg(feature = "torch")]
        Source::Aten => run::run(args, bytes),
        #[cfg(not(feature = "torch"))]
        Source::Aten => Err(without_libtorch(&format!(
            "running {}",
            args.file.display()
        ))),
    }
}

/// `graphbug minify`: an XLA program through a PJRT plugin, or an aten graph (with
/// libtorch).
pub fn minify_command(
    args: &minify::MinifyArgs,
    plugins: &[std::path::PathBuf],
) -> Result<ExitCode> {
    let bytes = read_file(&args.file)?;
    match told(&args.file, &bytes)? {
        Source::Xla(kind) => {
            let req = args.request()?;
            graphbug::xla::flow::minify(&req, bytes, kind, args.reference_backend.clone())
                .map(|_| ExitCode::SUCCESS)
        }
        #[cfg(feature = "torch")]
        Source::Aten => {
            let options = graphbug::repro::minify::AtenOptions {
                device: args.device.clone(),
                offload_to_disk: args.offload_to_disk,
                plugins: plugins.to_vec(),
            };
            graphbug::repro::minify::minify(&args.request()?, bytes, options)
                .map(|_| ExitCode::SUCCESS)
        }
        #[cfg(not(feature = "torch"))]
        Source::Aten => {
            let _ = plugins;
            Err(without_libtorch(&format!(
                "minifying {}",
                args.file.display()
            )))
        }
    }
}

/// `graphbug repro`: the flow on a program or a repro directory of either dialect, told
/// once (see [`graphbug::flow::repro`]); without a target, the bundled demo (an aten graph).
pub fn repro_command(args: &args::ReproArgs, plugins: &[PathBuf]) -> Result<ExitCode> {
    let action = args.action.as_deref();
    let req = args.request()?;
    let Some(target) = &args.target else {
        refuse_for(Dialect::Aten, "the demo is an aten graph")?;
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cnn");
        let mut dialect = reproducer(Dialect::Aten, args, plugins)?;
        // (Once: the supervised re-run of this command line says nothing of it.)
        if !is_supervised() {
            println!("graphbug demo: the CNN reference graph (examples/cnn) through relu_accuracy_error_TESTING_ONLY at level 4");
        }
        let req = ReproRequest {
            backend: Some("relu_accuracy_error_TESTING_ONLY".into()),
            level: Some(4),
            inputs: Some(demo.join("inputs.npz")),
            ..req
        };
        return repro::repro_file(&demo.join("forward.py"), None, &req, dialect.as_mut());
    };
    if target.is_dir() {
        let dialect = DirManifest::dialect_of(target).unwrap_or(Dialect::Aten);
        refuse_for(
            dialect,
            &format!("{} holds {}", target.display(), dialect.noun()),
        )?;
        return repro::on_dir(
            target,
            action,
            &req,
            reproducer(dialect, args, plugins)?.as_mut(),
        );
    }
    let dialect = told(target, &read_file(target)?)?.dialect();
    repro::repro_file(
        target,
        action,
        &req,
        reproducer(dialect, args, plugins)?.as_mut(),
    )
}

/// The dialect's part of `graphbug repro`, with its own options from `args`.
fn reproducer(
    dialect: Dialect,
    args: &args::ReproArgs,
    plugins: &[PathBuf],
) -> Result<Box<dyn repro::Reproducible>> {
    Ok(match dialect {
        Dialect::Xla => Box::new(graphbug::xla::flow::repro::XlaRepro::new(
            args.reference_backend.clone(),
        )),
        #[cfg(feature = "torch")]
        Dialect::Aten => Box::new(graphbug::repro::flow::AtenRepro {
            device: args.device.clone(),
            after: args.after.clone(),
            random_inputs: args.random_inputs,
            plugins: plugins.to_vec(),
        }),
        #[cfg(not(feature = "torch"))]
        Dialect::Aten => {
            let _ = plugins;
            return Err(without_libtorch(
                "graphbug repro of an aten graph (or its demo)",
            ));
        }
    })
}

/// `graphbug backends`: with libtorch the aten backends (`--all`: the debug and testing
/// ones too), then the PJRT plugins XLA programs run on.
pub fn backends_command(all: bool) -> Result<ExitCode> {
    #[cfg(feature = "torch")]
    backends(all)?;
    #[cfg(not(feature = "torch"))]
    let _ = all;
    graphbug::xla::flow::run::list_plugins();
    Ok(ExitCode::SUCCESS)
}

/// `graphbug __minify-worker SPEC`: answers minifier queries in an isolated process, for
/// an aten graph or an XLA program, as its spec says.
pub fn minify_worker(spec: &Path) -> Result<()> {
    let (text, bundled) =
        graphbug::minifier::isolate::worker_spec_text(spec).map_err(|e| anyhow::anyhow!(e))?;
    if graphbug::xla::minify::is_worker_spec(&text) {
        return graphbug::xla::minify::worker_main(&text, bundled).map_err(|e| anyhow::anyhow!(e));
    }
    #[cfg(feature = "torch")]
    return graphbug::repro::isolate::worker_main(&text, bundled).map_err(Into::into);
    #[cfg(not(feature = "torch"))]
    bail!("this worker spec is for an aten graph, and this graphbug was built without libtorch (the `torch` feature)")
}

//! The dialects this graphbug serves, and the one place the commands tell them apart: a
//! file or a directory is told once ([`Source`]), and each command's dialect-specific step
//! is taken here, by the dialect's own crate (XLA programs: `graphbug::xla::flow`; aten
//! graphs: `graphbug::repro`, with libtorch). A new dialect is a variant here and its
//! crate's implementations of the flow's traits.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Result};
use graphbug::flow::repro::Reproducible;
use graphbug::flow::{Dialect, FlowError};
use graphbug::ir::{print_graph, Graph};
use graphbug::xla::program::{sniff, Kind, Program};

use super::args::{Bound, ReproArgs, RunArgs};
use super::dialect_options::refuse_for;
use super::minify::MinifyArgs;

/// What a file holds, told by its content once: an XLA program (its form) or an aten graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// An XLA program: HLO text or proto, StableHLO text or bytecode.
    Xla(Kind),
    /// An aten graph's text (anything that is not an XLA program).
    Aten,
}

impl Source {
    /// What `file` holds, told once by its content, with the other dialect's options
    /// refused.
    pub fn told(file: &Path, bytes: &[u8]) -> Result<Source> {
        let source = Source::of(file, bytes);
        let dialect = source.dialect();
        refuse_for(
            dialect,
            &format!("{} is {}", file.display(), dialect.noun()),
        )?;
        Ok(source)
    }

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

impl Source {
    /// `graphbug fmt`: an aten graph's canonical text, or an XLA program as it was
    /// written.
    pub fn fmt(self, file: &Path, bytes: Vec<u8>) -> Result<ExitCode> {
        match self {
            Source::Xla(kind) => graphbug::xla::flow::run::fmt(file, &bytes, kind),
            Source::Aten => {
                print!(
                    "{}",
                    print_graph(&graphbug::ir::read_graph_file(file, bytes)?)
                );
                Ok(ExitCode::SUCCESS)
            }
        }
    }

    /// `graphbug check`: verifies and counts an aten graph (`<N> nodes, <I> inputs, <O>
    /// outputs`; with `meta`, its annotations against libtorch) or an XLA program (`<N>
    /// instructions, <I> parameters, <O> outputs`).
    pub fn check(
        self,
        file: &Path,
        bytes: Vec<u8>,
        meta: bool,
        (inputs, binds, bound): (Option<&Path>, &[(String, i64)], &Bound),
    ) -> Result<ExitCode> {
        match self {
            Source::Xla(kind) if meta => bail!("--meta infers aten graphs' shapes with libtorch; {} is {} (its shapes are checked without --meta)", file.display(), kind.name()),
            Source::Xla(kind) => return graphbug::xla::flow::run::check(file, &bytes, kind),
            Source::Aten => {}
        }
        let graph = graphbug::ir::read_graph_file(file, bytes)?;
        if meta {
            #[cfg(feature = "torch")]
            return super::check_aten(file, graph, meta, inputs, binds, bound);
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

    /// `graphbug run`: an XLA program on a PJRT plugin, or an aten graph through a
    /// backend (with libtorch).
    pub fn run(self, args: &RunArgs, bytes: Vec<u8>) -> Result<ExitCode> {
        match self {
            Source::Xla(kind) => graphbug::xla::flow::run::run(
                &args.request(),
                args.reference_backend.as_deref(),
                &bytes,
                kind,
            ),
            #[cfg(feature = "torch")]
            Source::Aten => super::run::run(args, bytes),
            #[cfg(not(feature = "torch"))]
            Source::Aten => Err(without_libtorch(&format!(
                "running {}",
                args.file.display()
            ))),
        }
    }

    /// `graphbug minify`: an XLA program through a PJRT plugin, or an aten graph (with
    /// libtorch).
    pub fn minify(self, args: &MinifyArgs, bytes: Vec<u8>, plugins: &[PathBuf]) -> Result<()> {
        let req = args.request()?;
        match self {
            Source::Xla(kind) => {
                graphbug::xla::flow::minify(&req, bytes, kind, args.reference_backend.clone())?;
            }
            #[cfg(feature = "torch")]
            Source::Aten => {
                let options = graphbug::repro::minify::AtenOptions {
                    device: args.device.clone(),
                    offload_to_disk: args.offload_to_disk,
                    plugins: plugins.to_vec(),
                };
                graphbug::repro::minify::minify(&req, bytes, options)?;
            }
            #[cfg(not(feature = "torch"))]
            Source::Aten => {
                let _ = plugins;
                return Err(without_libtorch(&format!(
                    "minifying {}",
                    args.file.display()
                )));
            }
        }
        Ok(())
    }
}

/// The dialect's part of `graphbug repro`, with its own options from `args`.
pub fn reproducer(
    dialect: Dialect,
    args: &ReproArgs,
    plugins: &[PathBuf],
) -> Result<Box<dyn Reproducible>> {
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

/// Says that this build cannot do `what` for an aten graph: it was built without libtorch.
#[cfg(not(feature = "torch"))]
fn without_libtorch(what: &str) -> anyhow::Error {
    anyhow::anyhow!("{what} needs libtorch, and this graphbug was built without libtorch (the `torch` feature): it reads, prints and checks aten graphs, and runs, minifies and reproduces XLA programs")
}

/// `graphbug backends`: with libtorch the aten backends (`--all`: the debug and testing
/// ones too), then the PJRT plugins XLA programs run on.
pub fn backends_command(all: bool) -> Result<ExitCode> {
    #[cfg(feature = "torch")]
    super::backends(all)?;
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

//! The dialects this graphbug serves: the CLI's only mention of any of them. A file or a
//! repro directory is told once, by asking them in order ([`told`], [`wrote`]), and each
//! command hands its request to the dialect told, with the options that dialect declared
//! (see [`graphbug::flow::dialect`]). A new dialect is a line in [`DIALECTS`].

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use graphbug::flow::{DialectCommands, FlowError};
use graphbug::ir::Graph;

use super::dialect_options::refuse_for;

/// The dialects, in the order a file or a directory is told by: the last (aten graphs,
/// PyTorch's text) takes what no other tells.
pub static DIALECTS: [&dyn DialectCommands; 2] =
    [&graphbug::xla::flow::XLA, &graphbug::aten_dialect::ATEN];

/// The commands whose options a dialect declares (see [`DialectCommands::options`]).
const COMMANDS_WITH_DIALECT_OPTIONS: [&str; 4] = ["check", "run", "minify", "repro"];

/// The command line with every dialect's own options added to the commands that take them.
pub fn with_dialect_options(mut cli: clap::Command) -> clap::Command {
    for dialect in DIALECTS {
        for name in COMMANDS_WITH_DIALECT_OPTIONS {
            cli = cli.mut_subcommand(name, |c| c.args(dialect.options(name)));
        }
    }
    cli
}

/// The dialect of `file`'s `bytes`, told by their content, with the other dialects'
/// options refused.
pub fn told(file: &Path, bytes: &[u8]) -> Result<&'static dyn DialectCommands> {
    let dialect = graphbug::flow::dialect::told(&DIALECTS, file, bytes);
    refuse_for(
        dialect,
        &format!("{} is {}", file.display(), dialect.noun()),
    )?;
    Ok(dialect)
}

/// The dialect that wrote the repro directory `dir`, with the other dialects' options
/// refused.
pub fn wrote(dir: &Path) -> Result<&'static dyn DialectCommands> {
    let dialect = graphbug::flow::dialect::wrote_dir(&DIALECTS, dir);
    refuse_for(
        dialect,
        &format!("{} holds {}", dir.display(), dialect.noun()),
    )?;
    Ok(dialect)
}

/// The graph a file's `bytes` hold, read by its dialect (told by content), with the
/// dialect. Errors name the file, with the line and column of bad text.
pub fn read_any_graph(
    path: &Path,
    bytes: Vec<u8>,
) -> Result<(Graph, &'static dyn DialectCommands), FlowError> {
    let dialect = graphbug::flow::dialect::told(&DIALECTS, path, &bytes);
    Ok((dialect.read_graph(path, bytes)?, dialect))
}

/// `graphbug backends`: every dialect's backends (`all`: the debug and testing ones too),
/// the last dialect's first.
pub fn backends_command(all: bool) -> Result<ExitCode> {
    for dialect in DIALECTS.iter().rev() {
        dialect.list_backends(all)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `graphbug __minify-worker SPEC`: answers minifier queries in an isolated process, for
/// the dialect whose spec it is.
pub fn minify_worker(spec: &Path) -> Result<()> {
    let (text, bundled) =
        graphbug::minifier::isolate::worker_spec_text(spec).map_err(|e| anyhow::anyhow!(e))?;
    DIALECTS
        .iter()
        .find_map(|d| d.worker(&text, bundled))
        .unwrap_or_else(|| {
            anyhow::bail!(
                "{}: no dialect of this graphbug takes this worker spec",
                spec.display()
            )
        })
}

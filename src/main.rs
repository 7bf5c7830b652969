//! The `graphbug` command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use graphbug::ir::{parse_graph, print_graph, Graph};

/// graphbug: debug backends for ML graph compilers.
#[derive(Parser)]
#[command(name = "graphbug", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
enum Command {
    /// Print a graph file in canonical text (PyTorch's print_readable() form).
    Fmt {
        /// Graph text file, or `-` for standard input.
        file: PathBuf,
    },
    /// Verify a graph file and print its node, input and output counts.
    Check {
        /// Graph text file, or `-` for standard input.
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Fmt { file } => {
            let graph = load_graph(&file)?;
            print!("{}", print_graph(&graph));
        }
        Command::Check { file } => {
            let graph = load_graph(&file)?;
            println!(
                "{} nodes, {} inputs, {} outputs",
                graph.num_call_function_nodes(),
                graph.placeholders().len(),
                graph.outputs().len()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads and parses a graph file (`-` reads standard input); errors name the file.
fn load_graph(file: &Path) -> Result<Graph> {
    let text = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin()).context("reading standard input")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?
    };
    parse_graph(&text).with_context(|| format!("{}", file.display()))
}

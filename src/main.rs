//! The `graphbug` command line.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
        /// Also infer every shape on the meta device and report annotations that disagree.
        #[arg(long)]
        meta: bool,
    },
    /// Run a graph through a backend.
    Run(cli::run::RunArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Fmt { file } => cli::fmt(&file),
        Command::Check { file, meta } => cli::check(&file, meta),
        Command::Run(args) => cli::run::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

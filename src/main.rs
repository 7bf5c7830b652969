//! The `graphbug` command line.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// graphbug: debug backends for ML graph compilers.
#[derive(Parser)]
#[command(name = "graphbug", version, about)]
struct Cli {
    /// Load backends from a plugin library (repeatable; GRAPHBUG_PLUGINS adds more,
    /// colon-separated).
    #[arg(long, global = true, value_name = "PATH", help_heading = graphbug::flow::dialect::options_heading(&graphbug::aten_dialect::ATEN))]
    plugin: Vec<PathBuf>,
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
        #[command(flatten)]
        bound: cli::args::Bound,
    },
    #[cfg(feature = "torch")]
    /// Print a dynamic-shape graph made static: its size symbols bound from the inputs'
    /// sizes and --bind, the sizes it computes made constants (with --aten, also lowered
    /// to aten).
    Specialize {
        /// Graph text file, or `-` for standard input.
        file: PathBuf,
        /// Inputs whose sizes (and `Sym` values) bind the symbols (.safetensors or .npz).
        #[arg(long)]
        inputs: Option<PathBuf>,
        /// Value of a size symbol (`--bind s0=8`, repeatable).
        #[arg(long = "bind", value_name = "SYMBOL=N", value_parser = graphbug::aten_dialect::parse_binding)]
        binds: Vec<(String, i64)>,
        /// Also lower dynamo-level calls to aten: the graph exactly as graphbug runs it.
        #[arg(long)]
        aten: bool,
    },
    /// Run a graph (or an XLA program) through a backend and print its outputs; compare
    /// them with a file, save them, trace every node, or run a training step.
    Run(Box<cli::args::RunArgs>),
    #[cfg(feature = "torch")]
    /// Compare two numeric traces (`run --trace`) and print the first node where the runs
    /// diverge beyond a tolerance; exit 0 if none does, 1 if one does, 2 on bad input.
    TraceDiff(cli::run::TraceDiffArgs),
    /// List backends: name, tags and what each does.
    Backends {
        /// Include the debug and testing backends.
        #[arg(long)]
        all: bool,
    },
    #[cfg(feature = "torch")]
    /// Compile and run a graph through `explain:<backend>` and print what it recorded.
    Explain(cli::run::ExplainArgs),
    /// Find the compiler pass that makes a failure: for aten graphs the backend's pass at
    /// which it first appears and the least number of its applications; for XLA programs
    /// the plugin's passes whose turning off makes it go away, with a workaround.
    Bisect(Box<cli::bisect::BisectArgs>),
    /// Shrink a failing graph to a 1-minimal one that fails the same way.
    Minify(Box<cli::minify::MinifyArgs>),
    /// Draw a graph or an XLA program (SVG, HTML, DOT or Model Explorer JSON): inputs and
    /// outputs, a partition's saved and recomputed values, the first divergence of two
    /// traces, culprits; repeated layers of large graphs folded.
    Draw(Box<cli::draw::DrawArgs>),
    /// The main job: compile a graph or an XLA program under repro levels, write and
    /// minify a repro; or run, minify and analyze a repro directory. Without arguments:
    /// the bundled demo.
    Repro(Box<cli::args::ReproArgs>),
    #[cfg(feature = "torch")]
    /// Print the functional form of a graph (no mutation; mutated inputs become outputs).
    Functionalize(cli::autodiff::FunctionalizeArgs),
    #[cfg(feature = "torch")]
    /// Print the joint forward/backward graph of a forward graph (AOTAutograd's shape).
    Joint(cli::autodiff::JointArgs),
    #[cfg(feature = "torch")]
    /// Split a joint graph into forward and backward graphs.
    Partition(cli::autodiff::PartitionArgs),
    /// Internal: answers minifier queries in an isolated process.
    #[command(name = "__minify-worker", hide = true)]
    MinifyWorker {
        /// The worker spec (JSON).
        spec: PathBuf,
    },
}

/// How long graphbug waits, before it exits, for the workers it is ending.
const ENDING_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The exit status of a process a closed pipe ended (128 + SIGPIPE), as the shell reports
/// `cat` ended by `| head`.
const CLOSED_PIPE_STATUS: i32 = 141;

/// A closed standard output (`graphbug draw G | head`) ends graphbug quietly, as it ends
/// `cat`. graphbug ignores SIGPIPE (a worker's closed pipe is an error it reports, not its
/// death), so Rust's `print!` panics on the closed pipe instead: that panic becomes this exit.
fn end_quietly_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(CLOSED_PIPE_STATUS);
        }
        default(info)
    }));
}

fn main() -> ExitCode {
    if let Err(e) = graphbug::run::process::die_with_starter() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    end_quietly_on_closed_stdout();
    let command = cli::command(Cli::command());
    let matches = command.clone().get_matches();
    cli::dialect_options::record(&command, &matches);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // The command's own matches: each dialect reads the options it declared from them.
    let given = matches
        .subcommand()
        .map(|(_, m)| m.clone())
        .unwrap_or_default();
    #[cfg(feature = "torch")]
    let loaded = cli::load_plugins(&cli.plugin);
    #[cfg(not(feature = "torch"))]
    let loaded = match cli.plugin.first() {
        Some(p) => Err(anyhow::anyhow!("--plugin {} loads backends of aten graphs, and this graphbug was built without libtorch (the `torch` feature)", p.display())),
        None => Ok(()),
    };
    let result = loaded.and_then(|()| match cli.command {
        Command::Fmt { file } => cli::fmt(&file),
        Command::Check { file, bound } => cli::check(&file, &bound, &given),
        #[cfg(feature = "torch")]
        Command::Specialize {
            file,
            inputs,
            binds,
            aten,
        } => cli::specialize(&file, inputs.as_deref(), &binds, aten),
        Command::Run(args) => cli::run_command(&args, &given),
        #[cfg(feature = "torch")]
        Command::TraceDiff(args) => Ok(cli::run::trace_diff(&args)),
        Command::Backends { all } => cli::backends_command(all),
        #[cfg(feature = "torch")]
        Command::Explain(args) => cli::run::explain(&args),
        Command::Minify(args) => cli::minify_command(&args, &given),
        Command::Draw(args) => cli::draw::draw(&args),
        Command::Bisect(args) => cli::bisect::bisect_command(&args, &given),
        Command::Repro(args) => cli::repro_command(&args, &given),
        #[cfg(feature = "torch")]
        Command::Functionalize(args) => cli::autodiff::functionalize_graph(&args),
        #[cfg(feature = "torch")]
        Command::Joint(args) => cli::autodiff::joint(&args),
        #[cfg(feature = "torch")]
        Command::Partition(args) => cli::autodiff::partition(&args),
        Command::MinifyWorker { spec } => cli::minify_worker(&spec).map(|()| ExitCode::SUCCESS),
    });
    // Workers being ended (input closed, then SIGTERM, then SIGKILL) get their grace
    // periods; any still under way get their death signal as this process exits.
    graphbug::run::process::wait_for_endings(ENDING_WAIT);
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The visible subcommands of `cmd`, and theirs, with their command lines.
    fn visible(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands() {
            if sub.is_hide_set() || sub.get_name() == "help" {
                continue;
            }
            let line = format!("{path} {}", sub.get_name());
            out.push((line.clone(), sub.clone()));
            visible(sub, &line, out);
        }
    }

    #[test]
    fn every_command_says_what_it_does_with_examples_that_parse() {
        let cli = cli::command(Cli::command());
        cli.clone().debug_assert();
        let mut commands = Vec::new();
        visible(&cli, "graphbug", &mut commands);
        assert!(commands.len() >= 6, "{}", commands.len());
        for (line, cmd) in &commands {
            let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(
                about.len() > 20,
                "`{line}` says too little of what it does: `{about}`"
            );
            let help = cmd
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            let examples = cli::help::examples(&help, "graphbug");
            assert!(
                examples
                    .iter()
                    .any(|e| format!("{} ", e.join(" ")).starts_with(&format!("{line} "))),
                "`{line} --help` has no example of it (add one to src/cli/help.rs):\n{help}"
            );
            for example in examples {
                if let Err(e) = cli.clone().try_get_matches_from(&example) {
                    panic!(
                        "`{line} --help`: the example `{}` does not parse: {e}",
                        example.join(" ")
                    );
                }
            }
        }
    }
}

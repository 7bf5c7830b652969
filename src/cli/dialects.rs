//! The dialects this graphbug serves: the CLI's only mention of any of them. A file or a
//! repro directory is told once, by asking them in order ([`told`], [`wrote`], a compiler's
//! dump directory [`dumped`]), and each
//! command hands its request to the dialect told, with the options that dialect declared
//! (see [`graphbug::flow::dialect`]). A new dialect is a line in [`DIALECTS`].

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use graphbug::flow::dump::Dump;
use graphbug::flow::{DialectCommands, FlowError, MANIFEST_FILE};
use graphbug::ir::Graph;

use super::dialect_options::refuse_for;

/// The dialects, in the order a file or a directory is told by: the last (aten graphs,
/// PyTorch's text) takes what no other tells.
pub static DIALECTS: [&dyn DialectCommands; 2] =
    [&graphbug::xla::flow::XLA, &graphbug::aten_dialect::ATEN];

/// The commands whose options a dialect declares (see [`DialectCommands::options`]).
const COMMANDS_WITH_DIALECT_OPTIONS: [&str; 5] = ["check", "run", "minify", "repro", "bisect"];

/// The command line with every dialect's own options added to the commands that take them.
pub fn with_dialect_options(cli: clap::Command) -> clap::Command {
    with_options_of(&DIALECTS, cli)
}

/// `cli` with the own options of `dialects` added to the commands that take them.
fn with_options_of(dialects: &[&dyn DialectCommands], mut cli: clap::Command) -> clap::Command {
    for dialect in dialects {
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

/// The dialect whose compiler dumped its programs into `dir`, a directory that is no repro
/// directory, with the dump as it reads it and the other dialects' options refused;
/// `None` when no dialect tells `dir` as a dump.
pub fn dumped(dir: &Path) -> Result<Option<(&'static dyn DialectCommands, Dump)>> {
    if dir.join(MANIFEST_FILE).exists() {
        return Ok(None);
    }
    let Some((dialect, dump)) = graphbug::flow::dialect::dumped(&DIALECTS, dir) else {
        return Ok(None);
    };
    let dump = dump?;
    refuse_for(dialect, &format!("{} is {}", dir.display(), dump.what))?;
    Ok(Some((dialect, dump)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::dialect_options::{given_of, refuse_in};
    use clap::{Arg, ArgMatches, CommandFactory};
    use graphbug::flow::dialect::{options_heading, told as told_in};
    use graphbug::flow::minify::MinifyRequest;
    use graphbug::flow::repro::Reproducible;
    use graphbug::flow::run::RunRequest;
    use graphbug::flow::Dialect;

    /// A third dialect: `.toy` files, with a `--toy-level` of its own for `run`.
    struct Toy;

    impl Dialect for Toy {
        fn plural(&self) -> &'static str {
            "toy programs"
        }
        fn noun(&self) -> &'static str {
            "a toy program"
        }
        fn node_word(&self) -> &'static str {
            "step"
        }
        fn file_noun(&self) -> &'static str {
            "toy file"
        }
        fn tells(&self, path: &Path, _bytes: &[u8]) -> bool {
            path.extension().is_some_and(|e| e == "toy")
        }
        fn wrote(&self, manifest: &serde_json::Value) -> bool {
            manifest.get("toy").is_some()
        }
        fn read_graph(&self, path: &Path, _bytes: Vec<u8>) -> Result<Graph, FlowError> {
            Err(FlowError::bad(path, "a toy"))
        }
        fn standalone_commands(&self, _dir: &str, _python: &str) -> Vec<String> {
            Vec::new()
        }
    }

    impl DialectCommands for Toy {
        fn options(&self, command: &str) -> Vec<Arg> {
            match command {
                "run" => vec![Arg::new("toy_level")
                    .long("toy-level")
                    .help("How hard the toy runs")
                    .help_heading(options_heading(self))],
                _ => Vec::new(),
            }
        }
        fn fmt(&self, _file: &Path, _bytes: Vec<u8>) -> Result<ExitCode> {
            Ok(ExitCode::SUCCESS)
        }
        fn check(
            &self,
            _file: &Path,
            _bytes: Vec<u8>,
            _bound: (Option<std::time::Duration>, bool),
            _given: &ArgMatches,
        ) -> Result<ExitCode> {
            Ok(ExitCode::SUCCESS)
        }
        fn run(&self, _req: &RunRequest, _bytes: Vec<u8>, _given: &ArgMatches) -> Result<ExitCode> {
            Ok(ExitCode::SUCCESS)
        }
        fn minify(&self, _req: &MinifyRequest, _bytes: Vec<u8>, _given: &ArgMatches) -> Result<()> {
            Ok(())
        }
        fn reproducer(&self, _given: &ArgMatches) -> Result<Box<dyn Reproducible>> {
            anyhow::bail!("no toy repro")
        }
        fn worker(&self, text: &str, _bundled: bool) -> Option<Result<()>> {
            text.starts_with("toy").then_some(Ok(()))
        }
        fn list_backends(&self, _all: bool) -> Result<()> {
            Ok(())
        }
    }

    /// A third dialect in the list: its option is on `run` under its heading, read back
    /// from the command's matches, and refused for another dialect's file (as the other
    /// dialects' options are for its); its files are told by it, the others' as before.
    #[test]
    fn a_third_dialect_is_a_name_in_the_list() {
        let list: [&dyn DialectCommands; 3] = [
            &Toy,
            &graphbug::xla::flow::XLA,
            &graphbug::aten_dialect::ATEN,
        ];
        let cli = with_options_of(&list, crate::Cli::command());
        let run = cli.find_subcommand("run").unwrap();
        let level = run
            .get_arguments()
            .find(|a| a.get_id() == "toy_level")
            .unwrap();
        assert_eq!(level.get_help_heading(), Some("Options for toy programs"));
        let plural = |file: &str, bytes: &[u8]| told_in(&list, Path::new(file), bytes).plural();
        assert_eq!(plural("p.toy", b""), "toy programs");
        assert_eq!(plural("m.hlo", b"HloModule m\n"), "XLA programs");
        assert_eq!(plural("g.py", b"class GraphModule"), "aten graphs");

        let on = |args: &[&str]| {
            let m = cli.clone().try_get_matches_from(args).unwrap();
            (given_of(&cli, &m).unwrap(), m)
        };
        let (given, m) = on(&["graphbug", "run", "m.hlo", "--toy-level", "3"]);
        let e = refuse_in(&given, &graphbug::xla::flow::XLA, "m.hlo is an XLA program")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("these options are for toy programs: --toy-level (`graphbug run --help` lists them under \"Options for toy programs\")"),
            "{e}"
        );
        assert!(refuse_in(&given, &Toy, "p.toy is a toy program").is_ok());
        let (_, run) = m.subcommand().unwrap();
        assert_eq!(
            run.get_one::<String>("toy_level").map(String::as_str),
            Some("3")
        );
        let (given, _) = on(&["graphbug", "run", "p.toy", "--device", "cpu"]);
        let e = refuse_in(&given, &Toy, "p.toy is a toy program")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("these options are for aten graphs: --device"),
            "{e}"
        );
    }

    /// The global `--plugin`, given before the command, is in the command's own matches,
    /// which the dialects are handed (aten's workers load the plugins named there).
    #[test]
    fn the_global_plugin_reaches_the_commands_matches() {
        let cli = with_dialect_options(crate::Cli::command());
        for command in ["minify", "repro"] {
            let m = cli
                .clone()
                .try_get_matches_from(["graphbug", "--plugin", "p.so", command, "g.py"])
                .unwrap();
            let (_, given) = m.subcommand().unwrap();
            let plugins: Vec<&std::path::PathBuf> = given.get_many("plugin").unwrap().collect();
            assert_eq!(plugins, [Path::new("p.so")], "{command}");
        }
    }
}

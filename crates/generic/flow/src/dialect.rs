//! A dialect as graphbug sees it: what its programs are called, how a file or a repro
//! directory of it is told, how it reads its programs as graphs ([`Dialect`]), and its
//! part of each command with the options it declares ([`DialectCommands`]). The CLI holds
//! a list of dialects and names none of them anywhere else: a new dialect implements these
//! traits (with [`crate::minify::Minifiable`] and [`crate::repro::Reproducible`]) in its
//! own crate, and the CLI adds it to the list.

use std::path::Path;
use std::process::ExitCode;

use graphbug_files::HostTensor;
use graphbug_ir::Graph;

use crate::bisect::BisectRequest;
use crate::dump::Dump;
use crate::minify::MinifyRequest;
use crate::repro::Reproducible;
use crate::run::RunRequest;
use crate::{FlowError, MANIFEST_FILE};

/// What the flow knows of a dialect: its words, how its files and directories are told,
/// and how its programs are read as graphs.
pub trait Dialect: Sync {
    /// Its programs, as headings and messages name them: `aten graphs`, `XLA programs`.
    /// Its options are listed under `Options for <this>` (see [`options_heading`]).
    fn plural(&self) -> &'static str;

    /// One program of it, with its article: `an aten graph`, `an XLA program`.
    fn noun(&self) -> &'static str;

    /// What a program's step is called: a graph's `node`, a program's `instruction`.
    fn node_word(&self) -> &'static str;

    /// What a file of it is called: `graph file`, `program`.
    fn file_noun(&self) -> &'static str;

    /// Whether `bytes` (read from `path`) are a program of this dialect. Dialects are asked
    /// in the CLI's order; the last one takes what no other tells.
    fn tells(&self, path: &Path, bytes: &[u8]) -> bool;

    /// Whether this dialect wrote the repro directory whose `manifest.json` holds
    /// `manifest` (`Null` where it cannot be read).
    fn wrote(&self, manifest: &serde_json::Value) -> bool;

    /// The graph a file of this dialect holds; errors name the file.
    fn read_graph(&self, path: &Path, bytes: Vec<u8>) -> Result<Graph, FlowError>;

    /// The commands that reproduce the failure of its repro directory `dir` without
    /// graphbug (`python`: how to name Python where the user stands), with what each does.
    fn standalone_commands(&self, dir: &str, python: &str) -> Vec<String>;

    /// The modules of `dir` when its compiler dumped its programs there (XLA's
    /// `--xla_dump_to`); `None` when `dir` is no dump of this dialect's.
    fn dump(&self, _dir: &Path) -> Option<Result<Dump, FlowError>> {
        None
    }

    /// The arguments one recorded execution of a dumped module holds (`file`: one of its
    /// [`crate::dump::DumpModule::recorded`]), in parameter order.
    fn recorded_inputs(&self, file: &Path) -> Result<Vec<HostTensor>, FlowError> {
        Err(FlowError::bad(
            file,
            format!("{} record no arguments", self.plural()),
        ))
    }
}

/// A dialect's part of each command, and the options it declares for them.
pub trait DialectCommands: Dialect {
    /// Its own options of `command` (`check`, `run`, `minify`, `repro`), declared once
    /// here: the CLI adds them under [`options_heading`], hands their values back in
    /// `given`, and refuses them for another dialect's files by that heading.
    fn options(&self, command: &str) -> Vec<clap::Arg>;

    /// `graphbug fmt`: the program's canonical text.
    fn fmt(&self, file: &Path, bytes: Vec<u8>) -> anyhow::Result<ExitCode>;

    /// `graphbug check`: verifies and counts the program (`given`: its `check` options);
    /// a check that runs code is bounded by `bound` (`--timeout`, `--no-isolate`).
    fn check(
        &self,
        file: &Path,
        bytes: Vec<u8>,
        bound: (Option<std::time::Duration>, bool),
        given: &clap::ArgMatches,
    ) -> anyhow::Result<ExitCode>;

    /// `graphbug run`: the program (`bytes`) through a backend, its outputs handed to
    /// [`crate::run::finish_run`].
    fn run(
        &self,
        req: &RunRequest,
        bytes: Vec<u8>,
        given: &clap::ArgMatches,
    ) -> anyhow::Result<ExitCode>;

    /// `graphbug minify`: the program through [`crate::minify::minify`].
    fn minify(
        &self,
        req: &MinifyRequest,
        bytes: Vec<u8>,
        given: &clap::ArgMatches,
    ) -> anyhow::Result<()>;

    /// `graphbug bisect`: which of the backend's passes makes the failure (see
    /// [`crate::bisect`]).
    fn bisect(&self, req: &BisectRequest, _given: &clap::ArgMatches) -> anyhow::Result<ExitCode> {
        Err(anyhow::anyhow!(
            "{}: graphbug bisect does not serve {}",
            req.file.display(),
            self.plural()
        ))
    }

    /// Its part of `graphbug repro`, with its own options.
    fn reproducer(&self, given: &clap::ArgMatches) -> anyhow::Result<Box<dyn Reproducible>>;

    /// `graphbug __minify-worker`: answers minifier queries for the worker spec `text`
    /// (`bundled`: the spec carries its inputs), or `None` when the spec is another
    /// dialect's.
    fn worker(&self, text: &str, bundled: bool) -> Option<anyhow::Result<()>>;

    /// `graphbug backends`: lists the backends its programs run on (`all`: the debug and
    /// testing ones too).
    fn list_backends(&self, all: bool) -> anyhow::Result<()>;
}

/// The help heading of `dialect`'s own options: `Options for aten graphs`.
pub fn options_heading(dialect: &dyn Dialect) -> String {
    format!("Options for {}", dialect.plural())
}

/// The dialect of `dialects` that `bytes` (read from `path`) belong to: the first that
/// tells them, else the last.
pub fn told<'d, D: Dialect + ?Sized>(dialects: &[&'d D], path: &Path, bytes: &[u8]) -> &'d D {
    dialects
        .iter()
        .find(|d| d.tells(path, bytes))
        .or(dialects.last())
        .copied()
        .expect("graphbug serves at least one dialect")
}

/// The dialect of `dialects` that wrote the repro directory `dir`: the first whose
/// manifest it is, else the last.
pub fn wrote_dir<'d, D: Dialect + ?Sized>(dialects: &[&'d D], dir: &Path) -> &'d D {
    let manifest = std::fs::read(dir.join(MANIFEST_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null);
    dialects
        .iter()
        .find(|d| d.wrote(&manifest))
        .or(dialects.last())
        .copied()
        .expect("graphbug serves at least one dialect")
}

/// The dialect of `dialects` whose compiler dumped its programs into `dir`, with the
/// dump as it reads it; `None` when no dialect tells `dir` as a dump.
pub fn dumped<'d, D: Dialect + ?Sized>(
    dialects: &[&'d D],
    dir: &Path,
) -> Option<(&'d D, Result<Dump, FlowError>)> {
    dialects
        .iter()
        .find_map(|d| d.dump(dir).map(|dump| (*d, dump)))
}

/// The commands that go on from the repro directory `dir` of `dialect`: reproduce its
/// failure, find where it diverges, and reproduce it without graphbug (`graphbug` and
/// `python`: how to name them where the user stands). The "Next:" lines after a repro
/// and the report's "Go on" section both list them.
pub fn next_commands(
    dialect: &dyn Dialect,
    dir: &str,
    graphbug: &str,
    python: &str,
) -> Vec<String> {
    let mut lines = vec![
        format!("{graphbug} repro {dir} run        # reproduce the failure (exit 1)"),
        format!(
            "{graphbug} repro {dir} analyze    # the first {} that diverges",
            dialect.node_word()
        ),
    ];
    lines.extend(dialect.standalone_commands(dir, python));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dialect of `.toy` files whose directories say `"toy": true`.
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
            Err(FlowError::bad(path, "not read here"))
        }
        fn standalone_commands(&self, dir: &str, python: &str) -> Vec<String> {
            vec![format!("{python} {dir}/toy.py")]
        }
    }

    /// The rest: any file, any directory.
    struct Rest;

    impl Dialect for Rest {
        fn plural(&self) -> &'static str {
            "other programs"
        }
        fn noun(&self) -> &'static str {
            "another program"
        }
        fn node_word(&self) -> &'static str {
            "node"
        }
        fn file_noun(&self) -> &'static str {
            "file"
        }
        fn tells(&self, _path: &Path, _bytes: &[u8]) -> bool {
            false
        }
        fn wrote(&self, _manifest: &serde_json::Value) -> bool {
            false
        }
        fn read_graph(&self, path: &Path, _bytes: Vec<u8>) -> Result<Graph, FlowError> {
            Err(FlowError::bad(path, "not read here"))
        }
        fn standalone_commands(&self, _dir: &str, _python: &str) -> Vec<String> {
            Vec::new()
        }
    }

    /// Files and directories are told by asking the dialects in order, the last taking
    /// what none tells; the commands that go on are graphbug's, then the dialect's own.
    #[test]
    fn dialects_are_told_in_order_and_go_on_with_their_own_commands() {
        let dialects: [&dyn Dialect; 2] = [&Toy, &Rest];
        assert_eq!(
            told(&dialects, Path::new("a.toy"), b"").plural(),
            "toy programs"
        );
        assert_eq!(
            told(&dialects, Path::new("a.py"), b"").plural(),
            "other programs"
        );
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(wrote_dir(&dialects, tmp.path()).plural(), "other programs");
        std::fs::write(tmp.path().join(MANIFEST_FILE), r#"{"toy": true}"#).unwrap();
        assert_eq!(wrote_dir(&dialects, tmp.path()).plural(), "toy programs");
        std::fs::write(tmp.path().join(MANIFEST_FILE), "not json").unwrap();
        assert_eq!(wrote_dir(&dialects, tmp.path()).plural(), "other programs");
        assert_eq!(options_heading(&Toy), "Options for toy programs");
        let strip = |v: Vec<String>| -> Vec<String> {
            v.iter()
                .map(|l| l.split('#').next().unwrap().trim().to_string())
                .collect()
        };
        assert_eq!(
            strip(next_commands(&Toy, "d", "/bin/g", "py")),
            [
                "/bin/g repro d run",
                "/bin/g repro d analyze",
                "py d/toy.py"
            ]
        );
        assert!(next_commands(&Rest, "d", "g", "py")[1].contains("the first node that"));
    }
}

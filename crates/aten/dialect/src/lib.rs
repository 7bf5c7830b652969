//! The aten dialect as graphbug's commands see it ([`ATEN`]): FX graphs of aten ops in
//! PyTorch's `print_readable()` text, and the options of its own. Reading, printing and
//! checking a graph need no libtorch; running, minifying and reproducing one go through
//! `graphbug-repro` with the `torch` feature, and say so without it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Arg, ArgAction, ArgMatches};
use graphbug_flow::bisect::BisectRequest;
use graphbug_flow::dialect::{options_heading, Dialect, DialectCommands};
use graphbug_flow::minify::MinifyRequest;
use graphbug_flow::repro::Reproducible;
use graphbug_flow::run::RunRequest;
use graphbug_flow::FlowError;
use graphbug_ir::{print_graph, read_graph_file, Graph};

/// Aten graphs: FX graphs of aten ops, run through libtorch.
pub struct Aten;

/// The aten dialect.
pub static ATEN: Aten = Aten;

/// Parses `s0=8` for `--bind`.
pub fn parse_binding(text: &str) -> Result<(String, i64), String> {
    let (symbol, value) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not SYMBOL=N (e.g. s0=8)"))?;
    let symbol = symbol.trim();
    if symbol.is_empty() || !symbol.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return Err(format!("`{symbol}` is not a size symbol such as s0"));
    }
    let value = value
        .trim()
        .parse::<i64>()
        .map_err(|_| format!("`{value}` is not an integer size"))?;
    Ok((symbol.to_string(), value))
}

/// The values of this dialect's options, as a command line gave them. (Without libtorch,
/// only `--meta` is read.)
struct Given<'a>(&'a ArgMatches);

#[cfg_attr(not(feature = "torch"), allow(dead_code))]
impl Given<'_> {
    fn string(&self, id: &str) -> Option<String> {
        self.0.try_get_one::<String>(id).ok().flatten().cloned()
    }

    fn path(&self, id: &str) -> Option<PathBuf> {
        self.0.try_get_one::<PathBuf>(id).ok().flatten().cloned()
    }

    fn flag(&self, id: &str) -> bool {
        self.0.try_get_one::<bool>(id).ok().flatten().copied() == Some(true)
    }

    fn binds(&self) -> Vec<(String, i64)> {
        self.0
            .try_get_many::<(String, i64)>("binds")
            .ok()
            .flatten()
            .map(|v| v.cloned().collect())
            .unwrap_or_default()
    }

    /// `--plugin` (graphbug's global option): libraries whose backends the workers load.
    fn plugins(&self) -> Vec<PathBuf> {
        self.0
            .try_get_many::<PathBuf>("plugin")
            .ok()
            .flatten()
            .map(|v| v.cloned().collect())
            .unwrap_or_default()
    }
}

/// An option of this dialect: `--long`, with `help` (one sentence: shown, as clap shows
/// its derived options, without the full stop), under its heading.
fn option(id: &'static str, long: &'static str, help: &'static str) -> Arg {
    Arg::new(id)
        .long(long)
        .value_name(id.to_uppercase())
        .help(help.strip_suffix('.').unwrap_or(help))
        .help_heading(options_heading(&ATEN))
}

/// `--device`, as `command` takes it.
fn device(help: &'static str) -> Arg {
    option("device", "device", help)
}

/// `--bind SYMBOL=N`, repeatable.
fn bind(help: &'static str) -> Arg {
    option("binds", "bind", help)
        .value_name("SYMBOL=N")
        .action(ArgAction::Append)
        .value_parser(parse_binding)
}

/// A file option.
fn file(id: &'static str, long: &'static str, help: &'static str) -> Arg {
    option(id, long, help).value_parser(clap::value_parser!(PathBuf))
}

/// A switch.
fn flag(id: &'static str, long: &'static str, help: &'static str) -> Arg {
    option(id, long, help).action(ArgAction::SetTrue)
}

/// Says that this build cannot do `what` for an aten graph: it was built without libtorch.
#[cfg(not(feature = "torch"))]
fn without_libtorch(what: &str) -> anyhow::Error {
    anyhow::anyhow!("{what} needs libtorch, and this graphbug was built without libtorch (the `torch` feature): it reads, prints and checks aten graphs, and runs, minifies and reproduces XLA programs")
}

impl Dialect for Aten {
    fn plural(&self) -> &'static str {
        "aten graphs"
    }

    fn noun(&self) -> &'static str {
        "an aten graph"
    }

    fn node_word(&self) -> &'static str {
        "node"
    }

    fn file_noun(&self) -> &'static str {
        "graph file"
    }

    /// Any file: graphbug asks this dialect last, for what no other dialect tells.
    fn tells(&self, _path: &Path, _bytes: &[u8]) -> bool {
        true
    }

    /// Any directory: its manifest says nothing of a dialect (graphbug asks it last).
    fn wrote(&self, _manifest: &serde_json::Value) -> bool {
        true
    }

    fn read_graph(&self, path: &Path, bytes: Vec<u8>) -> Result<Graph, FlowError> {
        read_graph_file(path, bytes).map_err(|e| FlowError::Read(e.to_string()))
    }

    fn standalone_commands(&self, dir: &str, python: &str) -> Vec<String> {
        vec![
            format!("(cd {dir} && cargo run)            # the standalone Rust reproduction"),
            format!("{python} {dir}/repro.py    # the graph in PyTorch"),
        ]
    }
}

impl DialectCommands for Aten {
    fn options(&self, command: &str) -> Vec<Arg> {
        match command {
            "check" => vec![
                flag("meta", "meta", "Also infer every shape on the meta device and report annotations that disagree."),
                file("inputs", "inputs", "With --meta, a dynamic-shape graph's symbols: bound from these inputs' sizes."),
                bind("With --meta, the value of a size symbol (`--bind s0=8`, repeatable)."),
            ],
            "run" => vec![
                file("constants", "constants", "The `self.<attr>` constants, by attribute name (.safetensors or .npz; a repro directory's constants.safetensors); they override those of --inputs."),
                device("Device to run an aten graph on: cpu (default), cuda, cuda:N. Device arguments in the graph are rewritten. (An XLA program runs on its plugin's device.)"),
                option("requires_grad", "requires-grad", "Inputs that require grad: a comma-separated list of input indices or names (default with --backward: every floating input)."),
                flag("backward", "backward", "Run a training step: the forward, then the backward of the outputs' gradients (--tangents, else ones); prints and saves one gradient per input that requires grad (`grad<i>`). A backend without a backward of its own runs as the forward and backward compiler of aot_eager. (An XLA program holds its training step itself, as JAX's value_and_grad lowers it.)"),
                file("tangents", "tangents", "Gradients of the outputs for --backward (.safetensors or .npz; `tangent<j>` for output j; an output without one gets zeros).").requires("backward"),
                bind("Value of a size symbol of a dynamic-shape graph (`--bind s0=8`, repeatable); the inputs' real sizes bind the others. A contradiction is an error naming both sources. (XLA programs have static shapes.)"),
                file("trace", "trace", "Record every node's value (a hash, min, max, mean, NaN and Inf counts, a few values) to this file as the run goes, for `graphbug trace-diff`. Backends that run graphs node by node (eager, aot_eager's halves, the debug and fault backends) record each node; any backend records its inputs and outputs.").value_name("FILE"),
            ],
            "minify" => vec![
                device("Device to run on.").default_value("cpu"),
                flag("offload_to_disk", "offload-to-disk", "Keep the reference values on disk and load them on demand."),
            ],
            "repro" => vec![
                option("after", "after", "Where to take the repro: `dynamo` (the graph given to the backend) or `aot` (the forward or backward graph an AOT pipeline gives its inner compiler). Default: GRAPHBUG_REPRO_AFTER, else dynamo.").value_parser(["dynamo", "aot"]),
                flag("random_inputs", "random-inputs", "Record only shapes and the seed in the repro, not the real inputs."),
                device("Device to run on."),
            ],
            _ => Vec::new(),
        }
    }

    fn fmt(&self, file: &Path, bytes: Vec<u8>) -> Result<ExitCode> {
        print!("{}", print_graph(&read_graph_file(file, bytes)?));
        Ok(ExitCode::SUCCESS)
    }

    fn check(
        &self,
        file: &Path,
        bytes: Vec<u8>,
        bound: (Option<std::time::Duration>, bool),
        given: &ArgMatches,
    ) -> Result<ExitCode> {
        let given = Given(given);
        let graph = read_graph_file(file, bytes)?;
        if given.flag("meta") {
            #[cfg(feature = "torch")]
            return graphbug_repro::meta::check_meta(
                file,
                graph,
                (given.path("inputs").as_deref(), &given.binds()),
                bound,
            );
            #[cfg(not(feature = "torch"))]
            {
                let _ = bound;
                anyhow::bail!("--meta asks libtorch's meta kernels, and this graphbug was built without libtorch (the `torch` feature)");
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

    fn run(&self, req: &RunRequest, bytes: Vec<u8>, given: &ArgMatches) -> Result<ExitCode> {
        let given = Given(given);
        #[cfg(feature = "torch")]
        return graphbug_repro::run::run(
            req,
            &graphbug_repro::run::AtenRunOptions {
                device: given.string("device"),
                constants: given.path("constants"),
                requires_grad: given.string("requires_grad"),
                backward: given.flag("backward"),
                tangents: given.path("tangents"),
                binds: given.binds(),
                trace: given.path("trace"),
            },
            bytes,
        );
        #[cfg(not(feature = "torch"))]
        {
            let _ = (bytes, given);
            Err(without_libtorch(&format!("running {}", req.file.display())))
        }
    }

    fn minify(&self, req: &MinifyRequest, bytes: Vec<u8>, given: &ArgMatches) -> Result<()> {
        let given = Given(given);
        #[cfg(feature = "torch")]
        {
            let options = graphbug_repro::minify::AtenOptions {
                device: given.string("device").unwrap_or_else(|| "cpu".into()),
                offload_to_disk: given.flag("offload_to_disk"),
                plugins: given.plugins(),
            };
            graphbug_repro::minify::minify(req, bytes, options)?;
            Ok(())
        }
        #[cfg(not(feature = "torch"))]
        {
            let _ = (bytes, given);
            Err(without_libtorch(&format!(
                "minifying {}",
                req.file.display()
            )))
        }
    }

    fn bisect(&self, req: &BisectRequest, given: &ArgMatches) -> Result<ExitCode> {
        let given = Given(given);
        #[cfg(feature = "torch")]
        {
            use graphbug_flow::repro::Reproducible;
            graphbug_repro::flow::AtenRepro {
                device: None,
                after: None,
                random_inputs: false,
                plugins: given.plugins(),
            }
            .bisect(req)
        }
        #[cfg(not(feature = "torch"))]
        {
            let _ = given;
            Err(without_libtorch(&format!(
                "bisecting {}",
                req.file.display()
            )))
        }
    }

    fn reproducer(&self, given: &ArgMatches) -> Result<Box<dyn Reproducible>> {
        let given = Given(given);
        #[cfg(feature = "torch")]
        return Ok(Box::new(graphbug_repro::flow::AtenRepro {
            device: given.string("device"),
            after: given.string("after"),
            random_inputs: given.flag("random_inputs"),
            plugins: given.plugins(),
        }));
        #[cfg(not(feature = "torch"))]
        {
            let _ = given;
            Err(without_libtorch(
                "graphbug repro of an aten graph (or its demo)",
            ))
        }
    }

    /// Any spec: graphbug asks this dialect last.
    fn worker(&self, text: &str, bundled: bool) -> Option<Result<()>> {
        #[cfg(feature = "torch")]
        return Some(graphbug_repro::isolate::worker_main(text, bundled).map_err(Into::into));
        #[cfg(not(feature = "torch"))]
        {
            let _ = (text, bundled);
            Some(Err(anyhow::anyhow!("this worker spec is for an aten graph, and this graphbug was built without libtorch (the `torch` feature)")))
        }
    }

    /// The aten backends: name, tags and what each does (`all`: the debug and testing ones
    /// and the parameterized ones too). Without libtorch, none.
    fn list_backends(&self, all: bool) -> Result<()> {
        #[cfg(feature = "torch")]
        {
            let mut infos = graphbug_backends::list(all);
            if all {
                infos.extend(graphbug_backends::registry::factories());
            }
            let width = infos.iter().map(|i| i.name.len()).max().unwrap_or(0);
            for i in &infos {
                let tags = if i.tags.is_empty() {
                    String::new()
                } else {
                    format!("[{}] ", i.tags.join(", "))
                };
                let alias = i
                    .alias_of
                    .as_ref()
                    .map(|t| format!(" (alias of {t})"))
                    .unwrap_or_default();
                println!("{:width$}  {tags}{}{alias}", i.name, i.description);
            }
        }
        #[cfg(not(feature = "torch"))]
        let _ = all;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphbug_flow::dialect::next_commands;

    /// An aten directory goes on with the standalone Rust program and PyTorch.
    #[test]
    fn aten_directories_go_on_with_rust_and_pytorch() {
        let strip = |v: Vec<String>| -> Vec<String> {
            v.iter()
                .map(|l| l.split('#').next().unwrap().trim().to_string())
                .collect()
        };
        assert_eq!(
            strip(next_commands(&ATEN, "d", "g", "/v/python")),
            [
                "g repro d run",
                "g repro d analyze",
                "(cd d && cargo run)",
                "/v/python d/repro.py"
            ]
        );
    }

    /// `--bind` takes `SYMBOL=N` and names what is wrong with anything else.
    #[test]
    fn bindings_parse_or_say_why_not() {
        assert_eq!(parse_binding("s0=8"), Ok(("s0".into(), 8)));
        assert!(parse_binding("s0").unwrap_err().contains("SYMBOL=N"));
        assert!(parse_binding("s-0=8").unwrap_err().contains("size symbol"));
        assert!(parse_binding("s0=x").unwrap_err().contains("integer"));
    }

    /// Each command's options are this dialect's, under its heading, and read back from a
    /// command line.
    #[test]
    fn options_are_declared_under_the_heading_and_read_back() {
        for command in ["check", "run", "minify", "repro"] {
            let options = ATEN.options(command);
            assert!(!options.is_empty(), "{command}");
            for o in &options {
                assert_eq!(
                    o.get_help_heading(),
                    Some("Options for aten graphs"),
                    "{command}"
                );
            }
        }
        let run = clap::Command::new("run").args(ATEN.options("run"));
        let m = run
            .try_get_matches_from(["run", "--device", "cuda:1", "--backward", "--bind", "s0=4"])
            .unwrap();
        let given = Given(&m);
        assert_eq!(given.string("device").as_deref(), Some("cuda:1"));
        assert!(given.flag("backward"));
        assert_eq!(given.binds(), [("s0".to_string(), 4)]);
        assert_eq!(given.path("trace"), None);
        let tangents_alone = clap::Command::new("run")
            .args(ATEN.options("run"))
            .try_get_matches_from(["run", "--tangents", "t.npz"]);
        assert!(tangents_alone.is_err());
    }
}

//! The commands' helpers that need libtorch (the `torch` feature): inputs as tensors,
//! meta inference, the aten backends and their workers.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use graphbug::aten::io::read_tensors;
use graphbug::aten::meta::{check_meta_with, GraphData};
use graphbug::backends::plugin::{load_env_plugins, load_plugin};
use graphbug::backends::registry::factories;
use graphbug::ir::{print_graph, Graph};
use graphbug::run::process::{Ended, Supervised};

pub use graphbug::repro::inputs::{
    constant_metas, graph_inputs, lower_graph, specialize_graph, worker_exe,
};

use super::args::Bound;
use super::read_file;

/// Re-runs this command in a child process bounded by `bound` (see
/// [`graphbug::flow::supervise`]): `Some(exit code)` in the parent.
pub fn supervise(
    bound: &Bound,
    lost: impl FnOnce(&Supervised, Duration) -> String,
) -> Result<Option<ExitCode>> {
    graphbug::flow::supervise(bound.timeout, bound.no_isolate, lost)
}

/// Refuses a dynamic-shape graph in a command that does not handle one yet, naming a
/// symbolic node and the way out.
pub fn static_only(graph: &Graph, command: &str) -> Result<()> {
    if let Some(node) = graph.nodes.iter().find(|n| n.meta.is_symbolic()) {
        bail!(
            "`graphbug {command}` does not handle dynamic-shape graphs yet (`{}` is \"{}\"); \
             make it static first: `graphbug specialize FILE --bind s0=N` or `--inputs FILE`",
            node.name,
            node.meta.annotation().unwrap_or_default()
        );
    }
    Ok(())
}

/// Loads the plugins named on the command line and in `GRAPHBUG_PLUGINS`.
pub fn load_plugins(paths: &[std::path::PathBuf]) -> Result<()> {
    for p in paths {
        load_plugin(p)?;
    }
    load_env_plugins()?;
    Ok(())
}

/// `graphbug backends`: name, tags and description of each backend.
pub fn backends(all: bool) -> Result<ExitCode> {
    let mut infos = graphbug::backends::list(all);
    if all {
        infos.extend(factories());
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
    Ok(ExitCode::SUCCESS)
}

/// Which inputs require grad, from a SPEC of indices or names (default: floating inputs).
pub fn requires_grad(graph: &Graph, spec: Option<&str>) -> Result<Vec<bool>> {
    let inputs: Vec<&graphbug::ir::Node> = graph
        .placeholders()
        .iter()
        .map(|&i| graph.node(i))
        .collect();
    let Some(spec) = spec else {
        return Ok(graphbug::autodiff::floating_inputs(graph));
    };
    let mut out = vec![false; inputs.len()];
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let k = match item.parse::<usize>() {
            Ok(k) if k < inputs.len() => k,
            Ok(k) => bail!(
                "--requires-grad: input {k} does not exist ({} inputs)",
                inputs.len()
            ),
            Err(_) => inputs
                .iter()
                .position(|n| n.name == item)
                .ok_or_else(|| anyhow!("--requires-grad: no input named `{item}`"))?,
        };
        out[k] = true;
    }
    Ok(out)
}

/// `error: <what> crashed inside libtorch: <why>`, for a supervised child that died.
pub fn lost_in_libtorch(what: &str, run: &Supervised, limit: Duration) -> String {
    let why = run.lost(limit).unwrap_or_default();
    match run.ended {
        Ended::TimedOut => format!("error: {what} did not finish: {why}"),
        _ => format!(
            "error: {what} crashed inside libtorch ({why}); a graph whose shapes contradict its ops can do this (libtorch does not check every kernel's arguments)"
        ),
    }
}

/// `graphbug specialize`: prints the graph made static (see [`specialize_graph`]); with
/// `aten`, lowered to aten too (see [`lower_graph`]).
pub fn specialize(
    file: &Path,
    inputs: Option<&Path>,
    binds: &[(String, i64)],
    aten: bool,
) -> Result<ExitCode> {
    let mut graph = load_graph(file)?;
    let mut named = inputs.map(read_tensors).transpose()?;
    specialize_graph(&mut graph, named.as_mut(), binds)?;
    if aten {
        lower_graph(&mut graph)?;
    }
    print!("{}", print_graph(&graph));
    Ok(ExitCode::SUCCESS)
}

/// `graphbug check --meta` of an aten graph: verifies, counts, and compares annotations
/// with libtorch (in a bounded child: kernels run on stand-ins of a graph whose shapes are
/// wrong can crash libtorch itself). A dynamic-shape graph is checked at the sizes its
/// symbols take from `inputs` and `binds`.
pub fn check_aten(
    file: &Path,
    mut graph: Graph,
    meta: bool,
    inputs: Option<&Path>,
    binds: &[(String, i64)],
    bound: &Bound,
) -> Result<ExitCode> {
    // With inputs, what only data can tell (a shape that depends on the values) is
    // checked on them.
    let mut data = None;
    if meta {
        if let Some(path) = inputs {
            let path = path.to_path_buf();
            data = Some(
                graph_inputs(&mut graph, Some(&path), binds, 0, tch::Device::Cpu).context(
                    "checking a dynamic-shape graph's annotations needs its symbols' values",
                )?,
            );
        } else {
            specialize_graph(&mut graph, None, binds).context(
                "checking a dynamic-shape graph's annotations needs its symbols' values",
            )?;
            lower_graph(&mut graph)?;
        }
        if let Some(code) = supervise(bound, |run, limit| {
            lost_in_libtorch("meta inference", run, limit)
        })? {
            return Ok(code);
        }
    }
    println!(
        "{} nodes, {} inputs, {} outputs",
        graph.num_call_function_nodes(),
        graph.placeholders().len(),
        graph.outputs().len()
    );
    if !meta {
        return Ok(ExitCode::SUCCESS);
    }
    let data = data
        .as_ref()
        .map(|(inputs, constants)| GraphData { inputs, constants });
    let check = check_meta_with(&graph, data)
        .with_context(|| format!("{}: meta inference", file.display()))?;
    for (node, why) in &check.unchecked {
        println!("meta: node `{node}` not checked, its annotation taken as given: {why}");
    }
    for (node, why) in &check.checked_on_data {
        println!("meta: node `{node}` checked on the given inputs: {why}");
    }
    for (node, why) in &check.doubtful_views {
        println!("meta: warning: node `{node}`: {why}");
    }
    let mismatches = check.mismatches;
    if mismatches.is_empty() {
        match check.unchecked.len() {
            0 => println!("meta: every annotation agrees with libtorch"),
            n => println!("meta: every other annotation agrees with libtorch ({n} not checked)"),
        }
        return Ok(ExitCode::SUCCESS);
    }
    for m in &mismatches {
        println!("meta mismatch: {m}");
    }
    println!(
        "meta: {} annotation(s) disagree with libtorch",
        mismatches.len()
    );
    Ok(ExitCode::FAILURE)
}

/// Reads and parses a graph file (`-` reads standard input); errors name the file.
pub fn load_graph(file: &Path) -> Result<Graph> {
    super::parse_graph_bytes(file, read_file(file)?)
}

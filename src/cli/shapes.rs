//! `graphbug specialize` and `graphbug check --meta`: an aten graph's shapes, made static
//! from its inputs or checked against libtorch's meta kernels (the `torch` feature).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use graphbug::aten::io::read_tensors;
use graphbug::aten::meta::{check_meta_with, GraphData};
use graphbug::ir::{print_graph, Graph};

use super::args::Bound;
use super::{graph_inputs, load_graph, lost_in_libtorch, lower_graph, specialize_graph, supervise};

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

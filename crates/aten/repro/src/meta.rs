//! `graphbug check --meta` of aten graphs: the annotations compared with libtorch's meta
//! kernels, in a bounded child; and how a supervised child lost inside libtorch is said.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use graphbug_aten::meta::{check_meta_with, GraphData};
use graphbug_ir::Graph;
use graphbug_run::process::{Ended, Supervised};

use crate::inputs::{graph_inputs, lower_graph, specialize_graph};

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

/// `graphbug check --meta` of the aten graph `graph` (read from `file`): verifies, counts,
/// and compares annotations with libtorch, in a child bounded by `bound` (`--timeout`,
/// `--no-isolate`): kernels run on stand-ins of a graph whose shapes are wrong can crash
/// libtorch itself. A dynamic-shape graph is checked at the sizes its symbols take from
/// `inputs` and `binds`.
pub fn check_meta(
    file: &Path,
    mut graph: Graph,
    (inputs, binds): (Option<&Path>, &[(String, i64)]),
    bound: (Option<Duration>, bool),
) -> Result<ExitCode> {
    // With inputs, what only data can tell (a shape that depends on the values) is
    // checked on them.
    let mut data = None;
    if let Some(path) = inputs {
        let path = path.to_path_buf();
        data = Some(
            graph_inputs(&mut graph, Some(&path), binds, 0, tch::Device::Cpu).context(
                "checking a dynamic-shape graph's annotations needs its symbols' values",
            )?,
        );
    } else {
        specialize_graph(&mut graph, None, binds)
            .context("checking a dynamic-shape graph's annotations needs its symbols' values")?;
        lower_graph(&mut graph)?;
    }
    if let Some(code) = graphbug_flow::supervise(bound.0, bound.1, |run, limit| {
        lost_in_libtorch("meta inference", run, limit)
    })? {
        return Ok(code);
    }
    println!(
        "{} nodes, {} inputs, {} outputs",
        graph.num_call_function_nodes(),
        graph.placeholders().len(),
        graph.outputs().len()
    );
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

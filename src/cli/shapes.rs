//! `graphbug specialize`: an aten graph's shapes made static from its inputs (the `torch`
//! feature).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use graphbug::aten::io::read_tensors;
use graphbug::ir::print_graph;

use super::{load_graph, lower_graph, specialize_graph};

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

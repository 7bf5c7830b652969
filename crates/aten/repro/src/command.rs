//! `--check-command CMD` on aten graphs: the candidate is given to the command as a graph
//! and its inputs (see [`graphbug_minifier::command`]).

pub use graphbug_minifier::command::CommandChecker;
use graphbug_minifier::command::WriteCandidate;

use crate::save::write_graph_and_inputs;
use crate::values::ReferenceValues;

/// Writes candidates of the graph `values` were recorded on as `graph.py` and
/// `inputs.safetensors`.
pub fn write_graphs(values: ReferenceValues) -> WriteCandidate {
    Box::new(move |candidate, dir| {
        values
            .candidate_inputs(candidate)
            .and_then(|(inputs, _)| write_graph_and_inputs(dir, &candidate.graph, &inputs))
            .map_err(|e| e.to_string())
    })
}

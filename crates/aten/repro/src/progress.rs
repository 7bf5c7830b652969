//! A minification's output directory: the original, the smallest failing graph so far
//! (replaced atomically after every success), and the state `--resume` continues from.
//!
//! ```text
//! DIR/original/   graph.py, inputs.safetensors   the graph minification started from
//! DIR/minified/   graph.py, inputs.safetensors   the smallest failing graph so far
//! DIR/state.json                                 kept nodes, counts, the failure
//! ```

use std::path::Path;

use graphbug_ir::Graph;
use graphbug_minifier::progress::{fnv, WriteBest};
pub use graphbug_minifier::progress::{MinifyDir, MinifyState, RunKey, STATE_FILE};
use tch::Tensor;

use crate::case::{fill_repro_dir, ReproCase};
use crate::error::{ReproError, Result};
use crate::manifest::{FailureRecord, Manifest};
use crate::save::{write_graph_and_inputs, GRAPH_FILE};
use crate::values::ReferenceValues;

/// FNV-1a fingerprint of a graph's text as repros hold it (its class name aside).
pub fn fingerprint(graph: &Graph) -> String {
    fnv(crate::save::repro_text(graph).bytes())
}

/// Fingerprint of the input values of a recording (in input order).
pub fn inputs_fingerprint(graph: &Graph, values: &ReferenceValues) -> String {
    let keys = values.value_keys();
    fnv((0..graph.placeholders().len()).flat_map(|k| {
        keys.get(&graphbug_minifier::Origin::Input(k))
            .copied()
            .unwrap_or(0)
            .to_le_bytes()
    }))
}

/// The output directory (`--out`) of the minification `run` of `graph`, whose inputs are
/// `inputs` (see [`MinifyDir::create`]): the original and the smallest failing graph are
/// written as a graph and its inputs.
pub fn out_dir<'v>(
    dir: &Path,
    graph: &Graph,
    inputs: &[Tensor],
    values: &'v ReferenceValues,
    run: RunKey,
    resume: bool,
) -> Result<MinifyDir<'v>> {
    // What a directory holds: a graph, or something else (refused).
    let held = |original: &Path| {
        if !original.exists() {
            return None;
        }
        let text = std::fs::read_to_string(original.join(GRAPH_FILE)).ok();
        Some(text.and_then(|t| graphbug_ir::parse_graph(&t).ok().map(|g| fingerprint(&g))))
    };
    let write: WriteBest<'v> = Box::new(move |best, _, _, d| {
        let (inputs, _) = values.candidate_inputs(best).map_err(|e| e.to_string())?;
        write_graph_and_inputs(d, &best.graph, &inputs).map_err(|e| e.to_string())
    });
    MinifyDir::create(
        dir,
        ("graph", fingerprint(graph)),
        held,
        |d| write_graph_and_inputs(d, graph, inputs).map_err(|e| e.to_string()),
        write,
        run,
        resume,
    )
    .map_err(ReproError::Other)
}

/// Minifies inside repro directory `dir` (which is the original): each improvement is
/// written to `dir/minified/` as a complete repro directory with `manifest`.
pub fn in_repro_dir<'v>(
    dir: &Path,
    graph: &Graph,
    values: &'v ReferenceValues,
    manifest: Manifest,
) -> MinifyDir<'v> {
    let link = dir.join("minified");
    let write: WriteBest<'v> = Box::new(move |best, signature, stats, d| {
        let (inputs, constants) = values.candidate_inputs(best).map_err(|e| e.to_string())?;
        let bindings = graphbug_aten::dynamic::bind_positional(&best.graph, &inputs)?;
        // The minified graph records the failure it was minified for: the original's, or
        // when none was recorded (a captured graph minified under `--backend`), the one
        // the checker saw.
        let manifest = Manifest {
            failure: manifest
                .failure
                .clone()
                .or_else(|| FailureRecord::from_signature(signature)),
            reliability: stats.reliability.or(manifest.reliability),
            ..manifest.clone()
        };
        let case = ReproCase::new(best.graph.clone(), &bindings, inputs, constants, manifest)
            .map_err(|e| e.to_string())?;
        fill_repro_dir(d, &case, &link).map_err(|e| e.to_string())
    });
    MinifyDir::in_place(dir, ("graph", fingerprint(graph)), write)
}

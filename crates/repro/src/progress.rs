//! A minification's output directory: the original, the smallest failing graph so far
//! (replaced atomically after every success), and the state `--resume` continues from.
//!
//! ```text
//! DIR/original/   graph.py, inputs.safetensors   the graph minification started from
//! DIR/minified/   graph.py, inputs.safetensors   the smallest failing graph so far
//! DIR/state.json                                 kept nodes, counts, the failure
//! ```

use std::path::{Path, PathBuf};

use graphbug_ir::{print_graph, Graph};
use graphbug_minifier::{Candidate, Sink, Stats};
use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::case::{write_repro_dir, ReproCase};
use crate::error::{ReproError, Result};
use crate::manifest::Manifest;
use crate::save::{replace_dir_atomically, write_file_atomically, write_graph_and_inputs};
use crate::values::ReferenceValues;

/// The state file's name.
pub const STATE_FILE: &str = "state.json";

/// What `--resume` needs: where the search stood.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MinifyState {
    /// Fingerprint of the original graph's canonical text.
    pub graph_fingerprint: String,
    /// The original node ids the smallest failing candidate keeps.
    pub kept: Vec<u32>,
    /// Counts at the time.
    pub stats: Stats,
}

/// FNV-1a fingerprint of a graph's canonical text.
pub fn fingerprint(graph: &Graph) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in print_graph(graph).bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The output directory of a minification, and the sink that keeps it current.
pub struct MinifyDir<'v> {
    dir: PathBuf,
    fingerprint: String,
    values: &'v ReferenceValues,
    /// When minifying a repro directory: the manifest each minified repro gets.
    manifest: Option<Manifest>,
}

impl<'v> MinifyDir<'v> {
    /// Prepares `dir` for minifying `graph` (whose inputs are `inputs`), writing the
    /// original unless it is already there.
    pub fn create(
        dir: &Path,
        graph: &Graph,
        inputs: &[Tensor],
        values: &'v ReferenceValues,
    ) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| ReproError::io(dir, e))?;
        let original = dir.join("original");
        if !original.exists() {
            replace_dir_atomically(&original, |d| write_graph_and_inputs(d, graph, inputs))?;
        }
        Ok(MinifyDir {
            dir: dir.to_path_buf(),
            fingerprint: fingerprint(graph),
            values,
            manifest: None,
        })
    }

    /// Minifies inside repro directory `dir` (which is the original): each improvement is
    /// written to `dir/minified/` as a complete repro directory with `manifest`.
    pub fn in_repro_dir(
        dir: &Path,
        graph: &Graph,
        values: &'v ReferenceValues,
        manifest: Manifest,
    ) -> Self {
        MinifyDir {
            dir: dir.to_path_buf(),
            fingerprint: fingerprint(graph),
            values,
            manifest: Some(manifest),
        }
    }

    /// The saved state, if a previous run left one for this graph; an error if it was left
    /// for another graph.
    pub fn saved_state(&self) -> Result<Option<MinifyState>> {
        let path = self.dir.join(STATE_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(_) => return Ok(None),
        };
        let state: MinifyState =
            serde_json::from_str(&text).map_err(|e| ReproError::io(&path, e))?;
        if state.graph_fingerprint != self.fingerprint {
            return Err(ReproError::io(
                &path,
                "this state was saved while minifying another graph",
            ));
        }
        Ok(Some(state))
    }

    /// The directory holding the smallest failing graph.
    pub fn minified(&self) -> PathBuf {
        self.dir.join("minified")
    }
}

impl Sink for MinifyDir<'_> {
    fn improved(&mut self, best: &Candidate, stats: &Stats) -> std::result::Result<(), String> {
        let (inputs, constants) = self
            .values
            .candidate_inputs(best)
            .map_err(|e| e.to_string())?;
        match &self.manifest {
            Some(manifest) => write_repro_dir(
                &self.minified(),
                &ReproCase {
                    graph: best.graph.clone(),
                    inputs,
                    constants,
                    manifest: manifest.clone(),
                },
            ),
            None => replace_dir_atomically(&self.minified(), |d| {
                write_graph_and_inputs(d, &best.graph, &inputs)
            }),
        }
        .map_err(|e| e.to_string())?;
        let state = MinifyState {
            graph_fingerprint: self.fingerprint.clone(),
            kept: best.kept.clone(),
            stats: stats.clone(),
        };
        let text = serde_json::to_string_pretty(&state).expect("the state serializes");
        write_file_atomically(&self.dir.join(STATE_FILE), text.as_bytes())
            .map_err(|e| e.to_string())
    }
}

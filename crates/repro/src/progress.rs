//! A minification's output directory: the original, the smallest failing graph so far
//! (replaced atomically after every success), and the state `--resume` continues from.
//!
//! ```text
//! DIR/original/   graph.py, inputs.safetensors   the graph minification started from
//! DIR/minified/   graph.py, inputs.safetensors   the smallest failing graph so far
//! DIR/state.json                                 kept nodes, counts, the failure
//! ```

use std::path::{Path, PathBuf};

use graphbug_ir::Graph;
use graphbug_minifier::{Candidate, ResumePoint, Signature, Sink, Stats};
use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::case::{write_repro_dir, ReproCase};
use crate::error::{ReproError, Result};
use crate::manifest::{FailureRecord, Manifest};
use crate::save::{replace_dir_atomically, write_file_atomically, write_graph_and_inputs};
use crate::values::ReferenceValues;

/// The state file's name.
pub const STATE_FILE: &str = "state.json";

/// What makes two minification runs the same search: a resumed run must match the
/// saved one in every field.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunKey {
    /// What counts as failing: `compile`, `runtime`, `accuracy`, `contains:...` or
    /// `command:...`.
    pub check: String,
    /// The backend checked, if any.
    pub backend: Option<String>,
    /// The `--check-str` regex, if any.
    pub check_str: Option<String>,
    /// Fingerprint of the inputs' values.
    pub inputs: String,
}

impl RunKey {
    /// The first field in which `self` (saved) and `now` differ, as `name: saved vs now`.
    fn difference(&self, now: &RunKey) -> Option<String> {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
        if self.check != now.check {
            return Some(format!(
                "the check: `{}` then, `{}` now",
                self.check, now.check
            ));
        }
        if self.backend != now.backend {
            return Some(format!(
                "the backend: `{}` then, `{}` now",
                show(&self.backend),
                show(&now.backend)
            ));
        }
        if self.check_str != now.check_str {
            return Some(format!(
                "--check-str: `{}` then, `{}` now",
                show(&self.check_str),
                show(&now.check_str)
            ));
        }
        if self.inputs != now.inputs {
            return Some("the inputs' values".into());
        }
        None
    }
}

/// What `--resume` needs: where the search stood.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MinifyState {
    /// Fingerprint of the original graph's canonical text.
    pub graph_fingerprint: String,
    /// The search (check, backend, inputs) the state belongs to; absent in states saved
    /// by older graphbug versions.
    #[serde(default)]
    pub run: Option<RunKey>,
    /// The original node ids the smallest failing candidate keeps.
    pub kept: Vec<u32>,
    /// The original output positions it returns as the original does.
    #[serde(default)]
    pub retained: Vec<usize>,
    /// The original's failure, which a resumed run keeps to.
    #[serde(default)]
    pub signature: Option<Signature>,
    /// Counts at the time.
    pub stats: Stats,
}

impl MinifyState {
    /// Where to resume from.
    pub fn resume_point(&self) -> ResumePoint {
        ResumePoint {
            kept: self.kept.clone(),
            retained: self.retained.clone(),
            signature: self.signature.clone(),
        }
    }
}

/// FNV-1a fingerprint of bytes.
fn fnv(bytes: impl IntoIterator<Item = u8>) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

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

/// The output directory of a minification, and the sink that keeps it current.
pub struct MinifyDir<'v> {
    dir: PathBuf,
    fingerprint: String,
    values: &'v ReferenceValues,
    /// When minifying a repro directory: the manifest each minified repro gets.
    manifest: Option<Manifest>,
    /// The search this directory records (`--out` runs).
    run: Option<RunKey>,
}

impl<'v> MinifyDir<'v> {
    /// Prepares `dir` for the minification `run` of `graph` (whose inputs are `inputs`).
    ///
    /// A directory holding another graph's minification is refused, never mixed or
    /// overwritten. One holding this graph's is continued with `resume`, and otherwise
    /// started over: its state and minified graph are removed first, and the original
    /// is rewritten.
    pub fn create(
        dir: &Path,
        graph: &Graph,
        inputs: &[Tensor],
        values: &'v ReferenceValues,
        run: RunKey,
        resume: bool,
    ) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| ReproError::io(dir, e))?;
        let fingerprint = fingerprint(graph);
        let original = dir.join("original");
        let held = original.join(crate::save::GRAPH_FILE);
        let existing = std::fs::read_to_string(&held).ok();
        if let Some(text) = &existing {
            let same = graphbug_ir::parse_graph(text)
                .map(|g| crate::progress::fingerprint(&g) == fingerprint)
                .unwrap_or(false);
            if !same {
                return Err(ReproError::io(
                    dir,
                    format!(
                        "holds the minification of another graph ({}); choose another --out, or delete it",
                        held.display()
                    ),
                ));
            }
        }
        let this = MinifyDir {
            dir: dir.to_path_buf(),
            fingerprint,
            values,
            manifest: None,
            run: Some(run),
        };
        if existing.is_none() || !resume {
            if existing.is_some() {
                this.clear()?;
            }
            replace_dir_atomically(&original, |d| write_graph_and_inputs(d, graph, inputs))?;
        }
        Ok(this)
    }

    /// Removes the state, then the minified graph, of an earlier run.
    fn clear(&self) -> Result<()> {
        let state = self.dir.join(STATE_FILE);
        match std::fs::remove_file(&state) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(ReproError::io(&state, e)),
        }
        let minified = self.minified();
        if let Ok(target) = std::fs::read_link(&minified) {
            let _ = std::fs::remove_dir_all(self.dir.join(target));
            std::fs::remove_file(&minified).map_err(|e| ReproError::io(&minified, e))?;
        }
        Ok(())
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
            run: None,
        }
    }

    /// The saved state, if a previous run left one for this graph and this search; an
    /// error naming the difference if it was left by another graph, check, backend,
    /// `--check-str` or inputs.
    pub fn saved_state(&self) -> Result<Option<MinifyState>> {
        let path = self.dir.join(STATE_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ReproError::io(&path, e)),
        };
        let state: MinifyState =
            serde_json::from_str(&text).map_err(|e| ReproError::io(&path, e))?;
        if state.graph_fingerprint != self.fingerprint {
            return Err(ReproError::io(
                &path,
                "this state was saved while minifying another graph",
            ));
        }
        if let (Some(saved), Some(now)) = (&state.run, &self.run) {
            if let Some(diff) = saved.difference(now) {
                return Err(ReproError::io(
                    &path,
                    format!("this state was saved by another search: {diff}; resume with the same options, or start over without --resume"),
                ));
            }
        }
        Ok(Some(state))
    }

    /// The directory holding the smallest failing graph.
    pub fn minified(&self) -> PathBuf {
        self.dir.join("minified")
    }

    /// Writes the result of the minification when no improvement did (an original that
    /// is minimal already is its own smallest failing graph), so [`Self::minified`]
    /// always exists after a run.
    pub fn finish(&mut self, result: &graphbug_minifier::Minified) -> Result<()> {
        if self.minified().exists() {
            return Ok(());
        }
        self.improved(&result.candidate, &result.signature, &result.stats)
            .map_err(ReproError::Other)
    }
}

impl Sink for MinifyDir<'_> {
    fn improved(
        &mut self,
        best: &Candidate,
        signature: &Signature,
        stats: &Stats,
    ) -> std::result::Result<(), String> {
        let (inputs, constants) = self
            .values
            .candidate_inputs(best)
            .map_err(|e| e.to_string())?;
        match &self.manifest {
            Some(manifest) => {
                let bindings = graphbug_aten::dynamic::bind_positional(&best.graph, &inputs)?;
                // The minified graph records the failure it was minified for: the
                // original's, or when none was recorded (a captured graph minified under
                // `--backend`), the one the checker saw.
                let manifest = Manifest {
                    failure: manifest
                        .failure
                        .clone()
                        .or_else(|| FailureRecord::from_signature(signature)),
                    reliability: stats.reliability.or(manifest.reliability),
                    ..manifest.clone()
                };
                let case =
                    ReproCase::new(best.graph.clone(), &bindings, inputs, constants, manifest)
                        .map_err(|e| e.to_string())?;
                write_repro_dir(&self.minified(), &case)
            }
            None => replace_dir_atomically(&self.minified(), |d| {
                write_graph_and_inputs(d, &best.graph, &inputs)
            }),
        }
        .map_err(|e| e.to_string())?;
        let state = MinifyState {
            graph_fingerprint: self.fingerprint.clone(),
            run: self.run.clone(),
            kept: best.kept.clone(),
            retained: best.retained.clone(),
            signature: Some(signature.clone()),
            stats: stats.clone(),
        };
        let text = serde_json::to_string_pretty(&state).expect("the state serializes");
        write_file_atomically(&self.dir.join(STATE_FILE), text.as_bytes())
            .map_err(|e| e.to_string())
    }
}

//! A minification's output directory, for every family of programs: the original, the
//! smallest failing candidate so far (replaced atomically after every success), and the
//! state `--resume` continues from. What the original and a candidate are written as is
//! the family's (an aten graph and its inputs, a repro directory, an XLA program in the
//! input's form).
//!
//! ```text
//! DIR/original/     the program minification started from, and its inputs
//! DIR/minified/     the smallest failing candidate so far, and its inputs
//! DIR/state.json    kept nodes, counts, the failure
//! ```

use std::path::{Path, PathBuf};

use graphbug_files::{replace_dir_atomically, write_file_atomically};
use serde::{Deserialize, Serialize};

use crate::candidate::Candidate;
use crate::checker::Signature;
use crate::minify::{Minified, ResumePoint, Sink, Stats};

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
    /// The search so far, one step per smaller failing candidate: after how many queries,
    /// how many nodes (starting with the original at 0 queries). A resumed search's
    /// history starts anew with the original, then its own steps.
    #[serde(default)]
    pub history: Vec<Step>,
}

/// A point of a minification's progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// Queries made so far.
    pub queries: usize,
    /// Nodes of the smallest failing candidate then.
    pub nodes: usize,
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
pub fn fnv(bytes: impl IntoIterator<Item = u8>) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Writes the smallest failing candidate so far (with the failure and counts at the time)
/// into a fresh directory.
pub type WriteBest<'a> =
    Box<dyn FnMut(&Candidate, &Signature, &Stats, &Path) -> Result<(), String> + 'a>;

/// The output directory of a minification, and the sink that keeps it current.
pub struct MinifyDir<'a> {
    dir: PathBuf,
    /// What the family calls what it minifies, for messages (`graph`, `program`).
    noun: &'static str,
    fingerprint: String,
    write: WriteBest<'a>,
    /// The search this directory records (`--out` runs).
    run: Option<RunKey>,
    /// The search's steps so far.
    history: Vec<Step>,
}

fn io(path: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", path.display())
}

impl<'a> MinifyDir<'a> {
    /// Prepares `dir` for the minification `run` of the original (a `noun`: `graph`,
    /// `program`) whose fingerprint is `fingerprint`; `held` reads the fingerprint of the original a directory already
    /// holds (in `dir/original`), `write_original` writes the original there.
    ///
    /// A directory holding another original's minification is refused, never mixed or
    /// overwritten. One holding this original's is continued with `resume`, and otherwise
    /// started over: its state and minified candidate are removed first, and the original
    /// is rewritten.
    pub fn create(
        dir: &Path,
        (noun, fingerprint): (&'static str, String),
        held: impl FnOnce(&Path) -> Option<Option<String>>,
        write_original: impl FnOnce(&Path) -> Result<(), String>,
        write: WriteBest<'a>,
        run: RunKey,
        resume: bool,
    ) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let original = dir.join("original");
        // None: nothing held; Some(None): something this family cannot read.
        let existing = held(&original);
        if let Some(held) = &existing {
            if held.as_deref() != Some(fingerprint.as_str()) {
                return Err(io(
                    dir,
                    format!(
                        "holds the minification of another {noun} ({}); choose another --out, or delete it",
                        original.display()
                    ),
                ));
            }
        }
        let this = MinifyDir {
            dir: dir.to_path_buf(),
            noun,
            fingerprint,
            write,
            run: Some(run),
            history: Vec::new(),
        };
        if existing.is_none() || !resume {
            if existing.is_some() {
                this.clear()?;
            }
            replace_dir_atomically(&original, write_original, io)?;
        }
        Ok(this)
    }

    /// Removes the state, then the minified candidate, of an earlier run.
    fn clear(&self) -> Result<(), String> {
        let state = self.dir.join(STATE_FILE);
        match std::fs::remove_file(&state) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&state, e)),
        }
        let minified = self.minified();
        if let Ok(target) = std::fs::read_link(&minified) {
            let _ = std::fs::remove_dir_all(self.dir.join(target));
            std::fs::remove_file(&minified).map_err(|e| io(&minified, e))?;
        }
        Ok(())
    }

    /// Minifies inside directory `dir`, which is the original (a repro directory): each
    /// improvement is written to `dir/minified/` by `write`.
    pub fn in_place(
        dir: &Path,
        (noun, fingerprint): (&'static str, String),
        write: WriteBest<'a>,
    ) -> Self {
        MinifyDir {
            dir: dir.to_path_buf(),
            noun,
            fingerprint,
            write,
            run: None,
            history: Vec::new(),
        }
    }

    /// The saved state, if a previous run left one for this original and this search; an
    /// error naming the difference if it was left by another original, check, backend,
    /// `--check-str` or inputs.
    pub fn saved_state(&self) -> Result<Option<MinifyState>, String> {
        let path = self.dir.join(STATE_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path, e)),
        };
        let state: MinifyState = serde_json::from_str(&text).map_err(|e| io(&path, e))?;
        if state.graph_fingerprint != self.fingerprint {
            return Err(io(
                &path,
                format!("this state was saved while minifying another {}", self.noun),
            ));
        }
        if let (Some(saved), Some(now)) = (&state.run, &self.run) {
            if let Some(diff) = saved.difference(now) {
                return Err(io(
                    &path,
                    format!("this state was saved by another search: {diff}; resume with the same options, or start over without --resume"),
                ));
            }
        }
        Ok(Some(state))
    }

    /// The directory holding the smallest failing candidate.
    pub fn minified(&self) -> PathBuf {
        self.dir.join("minified")
    }

    /// Writes the result of the minification when no improvement did (an original that
    /// is minimal already is its own smallest failing candidate), so [`Self::minified`]
    /// always exists after a run.
    pub fn finish(&mut self, result: &Minified) -> Result<(), String> {
        if self.minified().exists() {
            return Ok(());
        }
        self.improved(&result.candidate, &result.signature, &result.stats)
    }
}

impl Sink for MinifyDir<'_> {
    fn improved(
        &mut self,
        best: &Candidate,
        signature: &Signature,
        stats: &Stats,
    ) -> Result<(), String> {
        let write = &mut self.write;
        replace_dir_atomically(
            &self.dir.join("minified"),
            |d| write(best, signature, stats, d),
            io,
        )?;
        if self.history.is_empty() {
            self.history.push(Step {
                queries: 0,
                nodes: stats.start_nodes,
            });
        }
        let step = Step {
            queries: stats.queries,
            nodes: stats.end_nodes,
        };
        if self.history.last() != Some(&step) {
            self.history.push(step);
        }
        let state = MinifyState {
            graph_fingerprint: self.fingerprint.clone(),
            run: self.run.clone(),
            kept: best.kept.clone(),
            retained: best.retained.clone(),
            signature: Some(signature.clone()),
            stats: stats.clone(),
            history: self.history.clone(),
        };
        let text = serde_json::to_string_pretty(&state).expect("the state serializes");
        let path = self.dir.join(STATE_FILE);
        write_file_atomically(&path, text.as_bytes()).map_err(|e| io(&path, e))
    }
}

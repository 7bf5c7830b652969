//! A repro directory as every dialect writes it: a `manifest.json` beside the graph or
//! program, `minified/` (the smallest failing one) and the minifier's `state.json`. Which
//! dialect wrote it, and what both dialects' manifests say alike, read once and typed.

use std::path::Path;

use graphbug_minifier::CheckKind;
use graphbug_run::{kind_text, parse_kind, Stage, Symptom};
use serde::Deserialize;

use crate::FlowError;

/// The manifest's file name, in every dialect's directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The aten graph's file name in an aten repro directory.
pub const ATEN_GRAPH_FILE: &str = "graph.py";

/// How the commands that go on name graphbug: `graphbug` where that name on `PATH` is
/// this binary, else this binary's full path, so the printed commands work from wherever
/// the user stands (a run through `cargo xtask repro` has no `graphbug` on `PATH`).
pub fn graphbug_command() -> String {
    let own = graphbug_run::process::own_exe().ok();
    let same = |p: &Path| {
        own.as_ref()
            .is_some_and(|o| std::fs::canonicalize(p).ok() == std::fs::canonicalize(o).ok())
    };
    match (graphbug_run::process::find_in_path("graphbug"), &own) {
        (Some(p), _) if same(&p) => "graphbug".into(),
        (_, Some(own)) => own.display().to_string(),
        _ => "graphbug".into(),
    }
}

/// What `graphbug repro DIR ACTION` does with a repro directory, whichever dialect wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirAction {
    /// Reproduce the recorded failure: exit 1 when it reproduces.
    Run,
    /// Shrink it into `DIR/minified`.
    Minify,
    /// Find the first node that diverges.
    Analyze,
    /// Write `DIR/shared`: the repro with nothing of its author's that the failure does
    /// not need, safe to send to a compiler's vendor.
    Share,
}

impl std::str::FromStr for DirAction {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "run" => Ok(DirAction::Run),
            "minify" => Ok(DirAction::Minify),
            "analyze" => Ok(DirAction::Analyze),
            "share" => Ok(DirAction::Share),
            other => Err(format!(
                "unknown action `{other}`: expected run, minify, analyze or share"
            )),
        }
    }
}

impl std::fmt::Display for DirAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DirAction::Run => "run",
            DirAction::Minify => "minify",
            DirAction::Analyze => "analyze",
            DirAction::Share => "share",
        })
    }
}

impl DirAction {
    /// The action asked of `dir` (`action` as given), checked against what only `minify`
    /// takes (`check_given`: `--check`). The errors say what to do instead.
    pub fn asked(
        dir: &Path,
        action: Option<&str>,
        check_given: bool,
    ) -> Result<DirAction, FlowError> {
        let action: DirAction = action
            .ok_or_else(|| {
                FlowError::Usage(format!(
                    "say what to do with {}: run, minify, analyze or share",
                    dir.display()
                ))
            })?
            .parse()
            .map_err(|e: String| FlowError::Usage(format!("{e} (for {})", dir.display())))?;
        if check_given && action != DirAction::Minify {
            return Err(FlowError::Usage(format!(
                "--check says what `minify` looks for; `{action}` checks the failure the directory records (or any, where it records none)"
            )));
        }
        Ok(action)
    }
}

/// What both dialects' manifests say, read from either.
#[derive(Clone, Debug, Deserialize)]
pub struct DirManifest {
    /// An XLA directory's program file.
    #[serde(default)]
    program: Option<String>,
    /// The backend that failed.
    pub backend: String,
    /// XLA: the plugin of the float64 reference.
    #[serde(default)]
    pub reference_backend: Option<String>,
    /// XLA: what counts as failing.
    #[serde(default)]
    pub check: Option<CheckKind>,
    /// The repro level the failure was found at.
    #[serde(default)]
    pub level: Option<u8>,
    /// aten: the device it ran on.
    #[serde(default)]
    pub device: Option<String>,
    /// XLA: the plugin's platform.
    #[serde(default)]
    pub platform: Option<String>,
    /// aten: where the graph was taken (`dynamo`, `aot`).
    #[serde(default)]
    pub after: Option<String>,
    /// XLA: `repro.py`'s tolerances.
    #[serde(default)]
    pub tolerance: Option<DirTolerance>,
    /// The failure, if one was recorded.
    #[serde(default)]
    pub failure: Option<DirFailure>,
}

/// `repro.py`'s `allclose` tolerances, as an XLA directory's manifest records them.
#[derive(Clone, Debug, Deserialize)]
pub struct DirTolerance {
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

/// A recorded failure, as either dialect writes it: aten's stage and symptom, or XLA's
/// kind in one text (`accuracy wrong result`), with the nodes it is pinned to.
#[derive(Clone, Debug, Deserialize)]
pub struct DirFailure {
    /// XLA: the kind as one text.
    #[serde(default)]
    kind: Option<String>,
    /// aten: the stage.
    #[serde(default)]
    stage: Option<Stage>,
    /// aten: the symptom.
    #[serde(default)]
    symptom: Option<Symptom>,
    /// The message.
    #[serde(default)]
    pub message: String,
    /// aten: the node, when known.
    #[serde(default)]
    node: Option<String>,
    /// XLA: the instructions where a wrong result starts.
    #[serde(default)]
    culprits: Vec<String>,
    /// XLA: how far beyond its tolerance the worst output is (NaN or infinite where the
    /// result is, written as a string).
    #[serde(
        default,
        deserialize_with = "graphbug_minifier::checker::non_finite::deserialize"
    )]
    pub margin: Option<f64>,
}

impl DirFailure {
    /// The failure's stage and symptom, from either dialect's record.
    pub fn stage_symptom(&self) -> Option<(Stage, Symptom)> {
        match (self.stage, self.symptom, &self.kind) {
            (Some(stage), Some(symptom), _) => Some((stage, symptom)),
            (_, _, Some(kind)) => parse_kind(kind),
            _ => None,
        }
    }

    /// The kind as one text (`runtime error`): the stage and symptom, else what was
    /// recorded (a capture's), else `failure`.
    pub fn kind(&self) -> String {
        match (self.stage_symptom(), &self.kind) {
            (Some((stage, symptom)), _) => kind_text(stage, symptom),
            (None, Some(kind)) => kind.clone(),
            (None, None) => "failure".into(),
        }
    }

    /// The nodes the failure is pinned to: XLA's culprits, aten's node.
    pub fn nodes(&self) -> Vec<String> {
        self.culprits.iter().chain(&self.node).cloned().collect()
    }
}

impl DirManifest {
    /// Reads `dir/manifest.json`.
    pub fn read(dir: &Path) -> Result<DirManifest, FlowError> {
        let path = dir.join(MANIFEST_FILE);
        let bytes = std::fs::read(&path).map_err(|e| FlowError::io(&path, e))?;
        serde_json::from_slice(&bytes).map_err(|e| FlowError::bad(&path, e))
    }

    /// The graph or program file's name: an XLA directory's program, or `graph.py`.
    pub fn file(&self) -> &str {
        self.program.as_deref().unwrap_or(ATEN_GRAPH_FILE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One reading of `repro DIR ACTION` for every dialect: the three actions, and what
    /// to do instead of a missing or unknown one, or of `--check` with another.
    #[test]
    fn actions_are_asked_once_for_every_dialect() {
        let dir = Path::new("case");
        for (action, want) in [
            ("run", DirAction::Run),
            ("minify", DirAction::Minify),
            ("analyze", DirAction::Analyze),
        ] {
            assert_eq!(DirAction::asked(dir, Some(action), false).unwrap(), want);
            assert_eq!(want.to_string(), action);
        }
        assert!(DirAction::asked(dir, Some("minify"), true).is_ok());
        for (action, check, says) in [
            (
                None,
                false,
                "say what to do with case: run, minify, analyze or share",
            ),
            (
                Some("dance"),
                false,
                "unknown action `dance`: expected run, minify, analyze or share (for case)",
            ),
            (
                Some("run"),
                true,
                "--check says what `minify` looks for; `run` checks",
            ),
            (Some("analyze"), true, "`analyze` checks"),
        ] {
            let e = DirAction::asked(dir, action, check)
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{action:?}: {e}");
        }
    }

    /// Both dialects' directories, as the committed fixtures hold them (written by an
    /// earlier graphbug), read alike.
    #[test]
    fn both_dialects_manifests_read_alike() {
        let fixtures =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/repro-dirs");
        let aten = DirManifest::read(&fixtures.join("aten")).unwrap();
        assert_eq!(aten.file(), "graph.py");
        let failure = aten.failure.as_ref().unwrap();
        assert_eq!(failure.kind(), "runtime error");
        assert_eq!(failure.nodes(), ["relu"]);
        assert_eq!(aten.after.as_deref(), Some("dynamo"));
        let hlo = DirManifest::read(&fixtures.join("hlo")).unwrap();
        assert_eq!(hlo.file(), "program.hlo");
        let failure = hlo.failure.as_ref().unwrap();
        assert_eq!(
            failure.stage_symptom(),
            Some((Stage::Accuracy, Symptom::WrongResult))
        );
        assert_eq!(failure.nodes(), ["reduce_max.7"]);
        assert_eq!(hlo.check, Some(CheckKind::Accuracy));
        assert_eq!(hlo.tolerance.as_ref().map(|t| t.rtol), Some(1e-3));
        // A directory without a manifest, or with a bad one, is an error naming the file.
        let e = DirManifest::read(&fixtures).unwrap_err().to_string();
        assert!(e.contains("repro-dirs/manifest.json"), "{e}");
        let bad = tempfile::tempdir().unwrap();
        std::fs::write(bad.path().join(MANIFEST_FILE), "{\"failure\": 3}").unwrap();
        let e = DirManifest::read(bad.path()).unwrap_err().to_string();
        assert!(e.contains("manifest.json: "), "{e}");
        // A NaN result where the reference is finite: its margin is written as a string.
        for (margin, infinite) in [("\"inf\"", true), ("\"NaN\"", false), ("2.5", false)] {
            let text = format!(
                "{{\"backend\": \"pjrt:cpu\", \"failure\": {{\"kind\": \"accuracy wrong result\", \"margin\": {margin}}}}}"
            );
            std::fs::write(bad.path().join(MANIFEST_FILE), text).unwrap();
            let m = DirManifest::read(bad.path()).unwrap();
            let read = m.failure.unwrap().margin.unwrap();
            assert_eq!(read.is_infinite(), infinite, "{margin}: {read}");
        }
    }
}

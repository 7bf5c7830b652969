//! How a backend failed: the stage, the symptom, and where.

use std::fmt;

use serde::{Deserialize, Serialize};

/// When the failure happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// While compiling the graph.
    Compile,
    /// While running the compiled graph.
    Runtime,
    /// The results were wrong.
    Accuracy,
}

/// What the failure looked like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Symptom {
    /// An error was reported.
    Error,
    /// The process died (abort, segfault).
    Crash,
    /// It did not finish in time.
    Timeout,
    /// It finished with wrong numbers.
    WrongResult,
}

/// A classified backend failure, carrying the backend, node and op it concerns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The backend that failed.
    pub backend: String,
    /// When.
    pub stage: Stage,
    /// How.
    pub symptom: Symptom,
    /// The node concerned, when known.
    pub node: Option<String>,
    /// Its op, when known.
    pub op: Option<String>,
    /// The message, with its causes.
    pub message: String,
}

impl Failure {
    /// A failure with no node or op attached.
    pub fn new(backend: &str, stage: Stage, symptom: Symptom, message: impl Into<String>) -> Self {
        Failure {
            backend: backend.to_string(),
            stage,
            symptom,
            node: None,
            op: None,
            message: message.into(),
        }
    }

    /// Attaches the node and op concerned.
    pub fn at(mut self, node: &str, op: &str) -> Self {
        self.node = Some(node.to_string());
        self.op = Some(op.to_string());
        self
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Compile => "compile",
            Stage::Runtime => "runtime",
            Stage::Accuracy => "accuracy",
        })
    }
}

impl fmt::Display for Symptom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Symptom::Error => "error",
            Symptom::Crash => "crash",
            Symptom::Timeout => "timeout",
            Symptom::WrongResult => "wrong result",
        })
    }
}

impl std::str::FromStr for Stage {
    type Err = String;

    /// As [`fmt::Display`] writes it.
    fn from_str(s: &str) -> Result<Self, String> {
        [Stage::Compile, Stage::Runtime, Stage::Accuracy]
            .into_iter()
            .find(|k| k.to_string() == s)
            .ok_or_else(|| format!("`{s}` is no stage: compile, runtime or accuracy"))
    }
}

impl std::str::FromStr for Symptom {
    type Err = String;

    /// As [`fmt::Display`] writes it.
    fn from_str(s: &str) -> Result<Self, String> {
        [
            Symptom::Error,
            Symptom::Crash,
            Symptom::Timeout,
            Symptom::WrongResult,
        ]
        .into_iter()
        .find(|k| k.to_string() == s)
        .ok_or_else(|| format!("`{s}` is no symptom: error, crash, timeout or wrong result"))
    }
}

/// A failure's kind as one text, `<stage> <symptom>` (`runtime error`, `accuracy wrong
/// result`): what minifier signatures and reports carry. [`parse_kind`] reads it back.
pub fn kind_text(stage: Stage, symptom: Symptom) -> String {
    format!("{stage} {symptom}")
}

/// The stage and symptom of a kind [`kind_text`] wrote; `None` for any other text (a
/// `contains` check's kind, a check command's).
pub fn parse_kind(kind: &str) -> Option<(Stage, Symptom)> {
    let (stage, symptom) = kind.split_once(' ')?;
    Some((stage.parse().ok()?, symptom.parse().ok()?))
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} in backend `{}`",
            self.stage, self.symptom, self.backend
        )?;
        match (&self.node, &self.op) {
            (Some(n), Some(o)) => write!(f, " at node `{n}` ({o})")?,
            (Some(n), None) => write!(f, " at node `{n}`")?,
            _ => {}
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for Failure {}

#[cfg(test)]
mod tests {
    use super::*;

    /// One writer and one reader of a failure's kind: every stage and symptom survives
    /// the round trip, and nothing else reads as a failure.
    #[test]
    fn kinds_read_back_as_written() {
        for stage in [Stage::Compile, Stage::Runtime, Stage::Accuracy] {
            for symptom in [
                Symptom::Error,
                Symptom::Crash,
                Symptom::Timeout,
                Symptom::WrongResult,
            ] {
                let text = kind_text(stage, symptom);
                assert_eq!(parse_kind(&text), Some((stage, symptom)), "{text}");
            }
        }
        assert_eq!(
            kind_text(Stage::Accuracy, Symptom::WrongResult),
            "accuracy wrong result"
        );
        for other in [
            "contains",
            "runtime",
            "runtime wrong",
            "Runtime error",
            "exit 1",
            "",
        ] {
            assert_eq!(parse_kind(other), None, "{other}");
        }
    }
}

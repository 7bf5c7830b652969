//! Checkers decide whether a candidate still shows the bug; bug identity keeps the
//! minifier from drifting onto another one.

use std::collections::BTreeSet;

use graphbug_ir::fault::OpPattern;
use graphbug_ir::OpName;
use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::candidate::Candidate;

/// How a candidate failed, enough to tell one bug from another.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Signature {
    /// The kind of failure, e.g. `runtime error`, `compile error`, `accuracy wrong result`,
    /// `runtime crash`, `contains`.
    pub kind: String,
    /// The op the failure is at, when known.
    pub op: Option<String>,
    /// The message.
    pub message: String,
    /// For wrong results: the nodes (by name) where the divergence that reaches the
    /// differing outputs starts, when the checker could localize it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub culprits: Vec<String>,
    /// For wrong results: how far beyond its tolerance the worst failing output is (1 is
    /// on the edge), when measured; NaN or infinite where the result is NaN or infinite
    /// and the reference finite (written `"NaN"`, `"inf"`: JSON has no such numbers).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "non_finite")]
    pub margin: Option<f64>,
}

/// An `Option<f64>` in JSON with its non-finite values kept, as the strings `"NaN"`,
/// `"inf"` and `"-inf"` (serde_json writes them as `null`, which reads back as `None`);
/// for `#[serde(with = "graphbug_minifier::checker::non_finite")]`.
pub mod non_finite {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `v`, a non-finite value as its string.
    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(x) if x.is_nan() => s.serialize_str("NaN"),
            Some(x) if x.is_infinite() => s.serialize_str(if *x > 0.0 { "inf" } else { "-inf" }),
            Some(x) => s.serialize_f64(*x),
            None => s.serialize_none(),
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Number(f64),
        Text(String),
    }

    /// Reads a number, or `"NaN"`, `"inf"` or `"-inf"`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        Ok(match Option::<Written>::deserialize(d)? {
            None => None,
            Some(Written::Number(x)) => Some(x),
            Some(Written::Text(t)) => Some(match t.as_str() {
                "NaN" => f64::NAN,
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                other => {
                    return Err(serde::de::Error::custom(format!(
                        "margin `{other}`: expected a number, NaN, inf or -inf"
                    )))
                }
            }),
        })
    }
}

impl Signature {
    /// The stage and symptom of a backend failure's signature (its kind as
    /// [`graphbug_run::kind_text`] writes it); `None` for other kinds (`contains`, a
    /// check command's).
    pub fn failure_kind(&self) -> Option<(graphbug_run::Stage, graphbug_run::Symptom)> {
        graphbug_run::parse_kind(&self.kind)
    }
}

/// A checker's answer for one candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Verdict {
    /// The candidate fails, like this.
    Fails(Signature),
    /// The candidate works.
    Passes,
    /// The candidate could not be judged (for example its reference run failed).
    Unresolved(String),
}

/// Whether a checker can take queries yet (see [`Checker::await_start`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Startup {
    /// It can.
    Started,
    /// Not yet (a worker whose job still waits in an engine's queue); ask again.
    Waiting,
    /// It never will (its start-up limit passed, or its launcher failed): why.
    Failed(String),
}

/// Which failure of a backend a checker looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckKind {
    /// Compiling fails (the candidate is not run).
    Compile,
    /// Compiling or running fails.
    Runtime,
    /// The outputs differ from eager's beyond TorchDynamo's `same()` tolerance.
    Accuracy,
}

impl std::str::FromStr for CheckKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "compile" => Ok(CheckKind::Compile),
            "runtime" => Ok(CheckKind::Runtime),
            "accuracy" => Ok(CheckKind::Accuracy),
            other => Err(format!(
                "unknown check `{other}`: expected compile, runtime, accuracy, contains:OPS"
            )),
        }
    }
}

impl std::fmt::Display for CheckKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CheckKind::Compile => "compile",
            CheckKind::Runtime => "runtime",
            CheckKind::Accuracy => "accuracy",
        })
    }
}

impl CheckKind {
    /// The check that finds a failure at `stage`: `compile` a compile failure, `runtime` a
    /// runtime one, `accuracy` a wrong result.
    pub fn finding(stage: graphbug_run::Stage) -> CheckKind {
        match stage {
            graphbug_run::Stage::Compile => CheckKind::Compile,
            graphbug_run::Stage::Runtime => CheckKind::Runtime,
            graphbug_run::Stage::Accuracy => CheckKind::Accuracy,
        }
    }
}

/// What counts as failing, as `--check` says it, parsed once: a failure of the backend of
/// one kind, or (no backend runs) a candidate that calls every op listed.
#[derive(Clone, Debug)]
pub enum Check {
    /// `compile`, `runtime` or `accuracy`: a failure of the backend of this kind.
    Backend(CheckKind),
    /// `contains:OP[,OP...]`.
    Contains(Contains),
}

impl Check {
    /// The ops a `contains:` check looks for.
    pub fn contains(&self) -> Option<&Contains> {
        match self {
            Check::Contains(c) => Some(c),
            Check::Backend(_) => None,
        }
    }

    /// The kind of backend failure looked for; `None` for `contains:`, which runs none.
    pub fn backend_kind(&self) -> Option<CheckKind> {
        match self {
            Check::Backend(kind) => Some(*kind),
            Check::Contains(_) => None,
        }
    }
}

impl std::str::FromStr for Check {
    type Err = String;

    /// `compile`, `runtime`, `accuracy` or `contains:OP[,OP...]`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.strip_prefix("contains:") {
            Some(ops) => Contains::parse(ops).map(Check::Contains),
            None => s.parse().map(Check::Backend),
        }
    }
}

/// As it was given: the text `--resume` compares with the saved state's.
impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Check::Backend(kind) => kind.fmt(f),
            Check::Contains(c) => write!(f, "contains:{}", c.list),
        }
    }
}

/// The message of every accuracy failure, so candidates of one accuracy bug match.
pub const ACCURACY_MESSAGE: &str = "outputs differ from eager beyond the same() tolerance";

/// The signature of a backend failure: stage and symptom, op, message.
pub fn signature_of(f: &graphbug_run::Failure) -> Signature {
    Signature {
        kind: graphbug_run::kind_text(f.stage, f.symptom),
        op: f.op.clone(),
        message: f.message.clone(),
        ..Signature::default()
    }
}

/// Told the stage a check enters (`compile`, `runtime`).
pub type StageHook = Box<dyn FnMut(&str) + Send>;

/// What a backend check looks for, for logs: e.g. `accuracy errors of backend eager`.
pub fn describe_check(kind: CheckKind, backend: &str) -> String {
    let kind = match kind {
        CheckKind::Compile => "compile errors",
        CheckKind::Runtime => "compile or runtime errors",
        CheckKind::Accuracy => "accuracy errors",
    };
    format!("{kind} of backend {backend}")
}

/// Decides whether candidates fail.
pub trait Checker {
    /// What is checked, for logs (e.g. `runtime error of backend eager`).
    fn describe(&self) -> String;

    /// Runs the check on one candidate.
    fn check(&mut self, candidate: &Candidate) -> Verdict;

    /// Waits at most `limit` for the checker to be able to take queries: a parallel search
    /// gives a checker nothing to answer before, so one whose worker still waits in a queue
    /// holds up no candidate. A checker with nothing to start is always started.
    fn await_start(&mut self, limit: std::time::Duration) -> Startup {
        let _ = limit;
        Startup::Started
    }

    /// Hands the checker a flag that, once set, says the check in progress is no longer
    /// wanted (a parallel search ended while a worker answered a try ahead of it): a checker
    /// that can stop early (ending its worker mid-query) watches it. Checks run to the end
    /// otherwise.
    fn abandon_when(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        let _ = flag;
    }
}

/// How far beyond its tolerance a wrong result must be to count as clear of the edge: a
/// candidate whose outputs fail by less (where round-off could flip the verdict) does not
/// count as failing, unless the original itself fails by no more.
pub const CLEAR_MARGIN: f64 = 2.0;

/// Whether a failure is the original bug: same kind, same op (when both name one), and a
/// message that matches `--check-str` or, without it, resembles the original's.
#[derive(Clone, Debug)]
pub struct BugIdentity {
    original: Signature,
    check_str: Option<Regex>,
}

impl BugIdentity {
    /// The identity of `original`, optionally pinned by a regex on the message.
    pub fn new(original: Signature, check_str: Option<&str>) -> Result<Self, regex::Error> {
        Ok(BugIdentity {
            original,
            check_str: check_str.map(Regex::new).transpose()?,
        })
    }

    /// The original failure.
    pub fn original(&self) -> &Signature {
        &self.original
    }

    /// For a wrong result too close to its tolerance's edge: the margin it falls short of
    /// (the original's, or [`CLEAR_MARGIN`] if that is less).
    pub fn short_of_margin(&self, sig: &Signature) -> Option<f64> {
        let need = self.original.margin?.min(CLEAR_MARGIN);
        sig.margin.filter(|&m| m < need).map(|_| need)
    }

    /// True when `sig` is the same bug: the same kind and op, a message that matches
    /// (`--check-str`, or similar), and, when the original's wrong result was localized,
    /// a divergence starting only at nodes where the original's started (so a candidate
    /// never trades the original's fault for one the original's outputs did not show);
    /// a wrong result must also be clear of its tolerance's edge (see [`CLEAR_MARGIN`]).
    pub fn matches(&self, sig: &Signature) -> bool {
        if sig.kind != self.original.kind {
            return false;
        }
        if self.short_of_margin(sig).is_some() {
            return false;
        }
        if let (Some(a), Some(b)) = (&sig.op, &self.original.op) {
            if a != b {
                return false;
            }
        }
        if !self.original.culprits.is_empty()
            && (sig.culprits.is_empty()
                || !sig
                    .culprits
                    .iter()
                    .all(|c| self.original.culprits.contains(c)))
        {
            return false;
        }
        match &self.check_str {
            Some(re) => re.is_match(&sig.message),
            None => similar(&self.original.message, &sig.message),
        }
    }
}

/// Words of a message with numbers masked, so sizes and counts do not make two reports of
/// one bug look different.
fn words(message: &str) -> BTreeSet<String> {
    message
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .filter(|w| !w.is_empty())
        .map(|w| {
            // Every run of digits becomes one `#`: `2x3` and `4x5` are the same word.
            let mut out = String::with_capacity(w.len());
            for c in w.chars() {
                if c.is_ascii_digit() {
                    if !out.ends_with('#') {
                        out.push('#');
                    }
                } else {
                    out.push(c.to_ascii_lowercase());
                }
            }
            out
        })
        .collect()
}

/// True when two failure messages describe the same problem: at least 80% of their
/// (number-masked) words are shared.
pub fn similar(a: &str, b: &str) -> bool {
    let (wa, wb) = (words(a), words(b));
    if wa.is_empty() && wb.is_empty() {
        return true;
    }
    let shared = wa.intersection(&wb).count();
    let union = wa.union(&wb).count();
    shared * 5 >= union * 4
}

/// `contains:OP[,OP…]`: a candidate "fails" when it calls every listed op.
#[derive(Clone, Debug)]
pub struct Contains {
    ops: Vec<OpPattern>,
    /// The list as given.
    list: String,
}

impl Contains {
    /// Parses `aten._softmax.default,aten.native_layer_norm.default` (also `aten::x.y`,
    /// `_softmax`, and in XLA programs `hlo.dot`, `dot_general`: as fault specs name ops).
    pub fn parse(list: &str) -> Result<Contains, String> {
        let ops = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(OpPattern::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if ops.is_empty() {
            return Err("contains: needs at least one op, e.g. contains:aten.gelu.default".into());
        }
        Ok(Contains {
            ops,
            list: list.to_string(),
        })
    }

    /// Whether every op listed is one of `ops`.
    pub fn present<'a>(&self, ops: impl Iterator<Item = &'a OpName> + Clone) -> bool {
        self.ops.iter().all(|p| ops.clone().any(|o| p.matches(o)))
    }

    /// One copy of the check for each of `workers` workers (it runs nothing: the copies
    /// only read candidates side by side).
    pub fn checkers(&self, workers: usize) -> Vec<Box<dyn Checker + Send>> {
        (0..workers)
            .map(|_| Box::new(self.clone()) as Box<dyn Checker + Send>)
            .collect()
    }
}

impl Checker for Contains {
    fn describe(&self) -> String {
        let names: Vec<String> = self.ops.iter().map(ToString::to_string).collect();
        format!("contains {}", names.join(", "))
    }

    fn check(&mut self, candidate: &Candidate) -> Verdict {
        if self.present(candidate.graph.nodes.iter().filter_map(|n| n.op())) {
            Verdict::Fails(Signature {
                kind: "contains".into(),
                op: None,
                message: self.describe(),
                ..Signature::default()
            })
        } else {
            Verdict::Passes
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margins_keep_nan_and_infinity_through_json() {
        for margin in [
            Some(2.5),
            Some(f64::INFINITY),
            Some(f64::NEG_INFINITY),
            None,
        ] {
            let sig = Signature {
                margin,
                ..Signature::default()
            };
            let back: Signature =
                serde_json::from_str(&serde_json::to_string(&sig).unwrap()).unwrap();
            assert_eq!(back.margin, margin);
        }
        let nan = Signature {
            margin: Some(f64::NAN),
            ..Signature::default()
        };
        let json = serde_json::to_string(&nan).unwrap();
        assert!(json.contains("\"margin\":\"NaN\""), "{json}");
        let back: Signature = serde_json::from_str(&json).unwrap();
        assert!(back.margin.is_some_and(f64::is_nan));
        let bad = serde_json::from_str::<Signature>(&json.replace("NaN", "lots"));
        assert!(bad.unwrap_err().to_string().contains("margin `lots`"));
    }

    /// `--check` is parsed once into a `Check`, and prints as it was given (the text
    /// `--resume` compares with a saved state's).
    #[test]
    fn checks_parse_once_and_print_as_given() {
        for (text, kind) in [
            ("compile", Some(CheckKind::Compile)),
            ("runtime", Some(CheckKind::Runtime)),
            ("accuracy", Some(CheckKind::Accuracy)),
            ("contains:aten::relu.default, gelu", None),
        ] {
            let check: Check = text.parse().unwrap();
            assert_eq!(check.backend_kind(), kind, "{text}");
            assert_eq!(check.contains().is_some(), kind.is_none(), "{text}");
            assert_eq!(check.to_string(), text);
        }
        let e = "Runtime".parse::<Check>().unwrap_err();
        assert_eq!(
            e,
            "unknown check `Runtime`: expected compile, runtime, accuracy, contains:OPS"
        );
        let e = "contains: ,".parse::<Check>().unwrap_err();
        assert!(e.starts_with("contains: needs at least one op"), "{e}");
    }

    fn sig(kind: &str, op: Option<&str>, message: &str) -> Signature {
        Signature {
            kind: kind.into(),
            op: op.map(str::to_string),
            message: message.into(),
            ..Signature::default()
        }
    }

    #[test]
    fn identity_needs_kind_op_and_a_similar_message() {
        let orig = sig("runtime error", Some("aten::mm.default"), "failed on inputs [f32[2, 3], f32[2, 3]]: mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)");
        let id = BugIdentity::new(orig.clone(), None).unwrap();
        assert!(id.matches(&orig));
        // Other sizes: the same bug.
        assert!(id.matches(&sig("runtime error", Some("aten::mm.default"), "failed on inputs [f32[4, 5], f32[4, 5]]: mat1 and mat2 shapes cannot be multiplied (4x5 and 4x5)")));
        // Another op, kind or message: another bug.
        assert!(!id.matches(&sig(
            "runtime error",
            Some("aten::bmm.default"),
            &orig.message
        )));
        assert!(!id.matches(&sig(
            "compile error",
            Some("aten::mm.default"),
            &orig.message
        )));
        assert!(!id.matches(&sig(
            "runtime error",
            Some("aten::mm.default"),
            "failed on inputs [f32[2, 3]]: ReluRuntimeError"
        )));
        // A --check-str regex decides the message instead.
        let id = BugIdentity::new(orig.clone(), Some("ReluRuntime")).unwrap();
        assert!(!id.matches(&orig));
        assert!(id.matches(&sig("runtime error", None, "x ReluRuntimeError")));
        assert!(BugIdentity::new(orig, Some("(")).is_err());
    }

    #[test]
    fn localized_wrong_results_keep_to_the_original_culprits() {
        let wrong = |culprits: &[&str]| Signature {
            culprits: culprits.iter().map(|c| c.to_string()).collect(),
            ..sig("accuracy wrong result", None, "outputs differ")
        };
        let id = BugIdentity::new(wrong(&["relu", "relu_1"]), None).unwrap();
        assert!(id.matches(&wrong(&["relu"])));
        assert!(id.matches(&wrong(&["relu_1", "relu"])));
        // A fault the original's outputs did not show, or an unlocalized one: another bug.
        assert!(!id.matches(&wrong(&["log1p"])));
        assert!(!id.matches(&wrong(&["relu", "log1p"])));
        assert!(!id.matches(&wrong(&[])));
        // An original that could not be localized accepts any wrong result.
        let id = BugIdentity::new(wrong(&[]), None).unwrap();
        assert!(id.matches(&wrong(&["log1p"])));
    }

    #[test]
    fn contains_parses_op_lists() {
        assert!(Contains::parse("aten._softmax.default, aten::native_layer_norm.default").is_ok());
        assert!(Contains::parse("").is_err());
        assert!(Contains::parse("a b").is_err());
        assert!(Contains::parse("aten..relu").is_err());
        // Ops are named as fault specs name them: bare, with a namespace, or in full.
        let graph = graphbug_ir::parse_graph(
            r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4]"):
        relu: "f32[4]" = torch.ops.aten.relu.default(x)
        return (relu,)
"#,
        )
        .unwrap();
        let candidate = crate::Original::borrowing(&graph).as_given();
        for (ops, contains) in [
            ("relu", true),
            ("aten.relu", true),
            ("torch.ops.aten.relu.default", true),
            ("aten::relu.default", true),
            ("hlo.relu", false),
            ("relu,sin", false),
        ] {
            let verdict = Contains::parse(ops).unwrap().check(&candidate);
            assert_eq!(matches!(verdict, Verdict::Fails(_)), contains, "{ops}");
        }
    }
}

/// How reliably the original fails: in how many of how many runs (when it is flaky, or
/// `--repeat` asked to measure it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reliability {
    /// Runs of the original.
    pub runs: usize,
    /// Of those, runs that failed with the original's bug.
    pub failures: usize,
}

impl std::fmt::Display for Reliability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} runs ({:.0}%)",
            self.failures,
            self.runs,
            100.0 * self.failures as f64 / self.runs.max(1) as f64
        )
    }
}

/// A checker for a flaky bug: a candidate fails only when it fails with the original's bug
/// in at least as many of `runs` runs as the original did, so a flaky original never lets
/// a candidate that shows the bug less often through. Runs stop as soon as the answer is
/// known.
pub struct Reliably<'c, C: Checker + ?Sized = dyn Checker> {
    inner: &'c mut C,
    reliability: Reliability,
    identity: BugIdentity,
}

impl<'c, C: Checker + ?Sized> Reliably<'c, C> {
    /// Wraps `inner`, holding candidates to the original's `reliability` for the bug
    /// `identity` names.
    pub fn new(inner: &'c mut C, reliability: Reliability, identity: BugIdentity) -> Self {
        Reliably {
            inner,
            reliability,
            identity,
        }
    }
}

impl<C: Checker + ?Sized> Checker for Reliably<'_, C> {
    fn describe(&self) -> String {
        format!(
            "{}, failing at least {} of {} runs",
            self.inner.describe(),
            self.reliability.failures,
            self.reliability.runs
        )
    }

    fn await_start(&mut self, limit: std::time::Duration) -> Startup {
        self.inner.await_start(limit)
    }

    fn abandon_when(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.inner.abandon_when(flag);
    }

    fn check(&mut self, candidate: &Candidate) -> Verdict {
        let Reliability { runs, failures } = self.reliability;
        let (mut failed, mut first, mut other, mut unresolved) = (0, None, None, None);
        for run in 0..runs {
            match self.inner.check(candidate) {
                Verdict::Fails(sig) if self.identity.matches(&sig) => {
                    failed += 1;
                    first.get_or_insert(sig);
                }
                Verdict::Unresolved(why) => unresolved = Some(why),
                v => other = Some(v),
            }
            if failed >= failures {
                return Verdict::Fails(first.expect("failed at least once"));
            }
            // Too few runs are left to fail often enough.
            if failed + (runs - run - 1) < failures {
                break;
            }
        }
        match (unresolved, other) {
            (Some(why), _) => Verdict::Unresolved(format!(
                "{why} (and {failed} of the runs failing with the original's bug, fewer than its {failures})"
            )),
            (None, Some(v)) if failed == 0 => v,
            _ => Verdict::Passes,
        }
    }
}

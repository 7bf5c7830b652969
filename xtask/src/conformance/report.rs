//! The conformance report: a table per source and stage, JSON, and the targets.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Value};

use super::{producer_of, stages_of, CaseResult, Outcome, Skipped, Stage};

/// Share of cases that must pass every stage they reach, per source (`xla` has none yet:
/// graphbug's XLA side is being built, and the suite measures it).
pub const TARGETS: [(&str, f64); 3] = [("opinfo", 98.0), ("zoo", 100.0), ("capture", 100.0)];

/// The results of a run.
#[derive(Clone, Debug)]
pub struct Report {
    /// One result per case that ran, in case-id order.
    pub results: Vec<CaseResult>,
    /// Cases with nothing to run (PyTorch could not produce them, or the case files
    /// cannot hold them), in id order.
    pub skipped: Vec<Skipped>,
    /// Wall time of the run.
    pub seconds: f64,
}

/// Whether one source met its target.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetCheck {
    /// `opinfo` or `zoo`.
    pub source: String,
    /// Cases that passed every stage they reached.
    pub passed: usize,
    /// Cases that ran.
    pub total: usize,
    /// The target, in percent.
    pub target: f64,
}

impl TargetCheck {
    /// The share of passing cases, in percent (100 for no cases).
    pub fn percent(&self) -> f64 {
        percent(self.passed, self.total)
    }

    /// Whether the target is met.
    pub fn met(&self) -> bool {
        self.percent() + 1e-9 >= self.target
    }
}

fn percent(a: usize, b: usize) -> f64 {
    if b == 0 {
        100.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

/// Counts of one stage over one source.
#[derive(Clone, Debug, Default)]
pub struct StageCounts {
    /// Passed.
    pub passed: usize,
    /// Passed or failed.
    pub reached: usize,
    /// Not run because a stage it needs failed.
    pub not_reached: usize,
    /// Nothing to check.
    pub not_applicable: usize,
    /// graphbug has no command for it (with the reason).
    pub not_available: Option<String>,
    /// Failures per op.
    pub failing_ops: BTreeMap<String, usize>,
}

impl Report {
    /// The sources present (capture, opinfo, xla, zoo), sorted.
    pub fn sources(&self) -> Vec<String> {
        let mut s: Vec<String> = self
            .results
            .iter()
            .map(|r| r.source.clone())
            .chain(self.skipped.iter().map(|s| s.source.clone()))
            .collect();
        s.sort();
        s.dedup();
        s
    }

    /// Counts of `stage` over the cases of `source`.
    pub fn counts(&self, source: &str, stage: Stage) -> StageCounts {
        let mut c = StageCounts::default();
        for r in self.results.iter().filter(|r| r.source == source) {
            match r.outcome(stage) {
                Outcome::Passed => {
                    c.passed += 1;
                    c.reached += 1;
                }
                Outcome::Failed(_) => {
                    c.reached += 1;
                    *c.failing_ops.entry(r.op.clone()).or_default() += 1;
                }
                Outcome::NotReached(_) => c.not_reached += 1,
                Outcome::NotApplicable(_) => c.not_applicable += 1,
                Outcome::NotAvailable(why) => c.not_available = Some(why.clone()),
            }
        }
        c
    }

    /// The target check of every source that has a target and cases.
    pub fn targets(&self) -> Vec<TargetCheck> {
        TARGETS
            .iter()
            .filter_map(|&(source, target)| {
                let cases: Vec<&CaseResult> =
                    self.results.iter().filter(|r| r.source == source).collect();
                (!cases.is_empty()).then(|| TargetCheck {
                    source: source.to_string(),
                    passed: cases.iter().filter(|r| r.passed()).count(),
                    total: cases.len(),
                    target,
                })
            })
            .collect()
    }

    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        for source in self.sources() {
            let ran = self.results.iter().filter(|r| r.source == source).count();
            let (by_pytorch, unsupported): (Vec<&Skipped>, Vec<&Skipped>) = self
                .skipped
                .iter()
                .filter(|k| k.source == source)
                .partition(|k| k.by_pytorch);
            let _ = writeln!(
                s,
                "\n== {source}: {ran} cases run, {} skipped by {}{}, {} not held by the case files{}",
                by_pytorch.len(),
                producer_of(&source),
                skip_summary(&by_pytorch),
                unsupported.len(),
                skip_summary(&unsupported)
            );
            let _ = writeln!(
                s,
                "{:<18} {:>16} {:>7} {:>11} {:>5}  top failing ops",
                "stage", "passed / reached", "%", "not reached", "n/a"
            );
            for &stage in stages_of(&source) {
                let c = self.counts(&source, stage);
                if let Some(why) = &c.not_available {
                    let _ = writeln!(s, "{:<18} not available: {why}", stage.name());
                    continue;
                }
                let pct = if c.reached == 0 {
                    "-".to_string()
                } else {
                    format!("{:.1}%", percent(c.passed, c.reached))
                };
                let _ = writeln!(
                    s,
                    "{:<18} {:>16} {:>7} {:>11} {:>5}  {}",
                    stage.name(),
                    format!("{} / {}", c.passed, c.reached),
                    pct,
                    c.not_reached,
                    c.not_applicable,
                    top_ops(&c.failing_ops, 6)
                );
            }
            let judged: Vec<&str> = self
                .results
                .iter()
                .filter(|r| r.source == source && !r.notes.is_empty())
                .map(|r| r.op.as_str())
                .collect();
            if !judged.is_empty() {
                let _ = writeln!(
                    s,
                    "gradients judged by float64 finite differences, PyTorch's own being known wrong: {}",
                    judged.join(", ")
                );
            }
            if let Some(t) = self.targets().into_iter().find(|t| t.source == source) {
                let _ = writeln!(
                    s,
                    "cases passing every stage they reach: {} / {} = {:.1}% (target {}%){}",
                    t.passed,
                    t.total,
                    t.percent(),
                    t.target,
                    if t.met() { "" } else { ": BELOW TARGET" }
                );
            } else if ran > 0 {
                let passed = self
                    .results
                    .iter()
                    .filter(|r| r.source == source && r.passed())
                    .count();
                let _ = writeln!(
                    s,
                    "cases passing every stage they reach: {passed} / {ran} = {:.1}% (no target)",
                    percent(passed, ran)
                );
            }
        }
        let _ = writeln!(s, "\n{:.0} s", self.seconds);
        s
    }

    /// The report as JSON: per case every stage's status (and error line), the counts
    /// per source and stage, the targets and the skipped cases.
    pub fn to_json(&self) -> Value {
        let cases: Vec<Value> = self
            .results
            .iter()
            .map(|r| {
                let stages: serde_json::Map<String, Value> = r
                    .stages
                    .iter()
                    .map(|(stage, o)| {
                        let mut v = json!({"status": o.status()});
                        match o {
                            Outcome::Failed(line) => v["error"] = json!(line),
                            Outcome::NotReached(s) => v["needs"] = json!(s.name()),
                            Outcome::NotApplicable(why) | Outcome::NotAvailable(why) => {
                                v["reason"] = json!(why)
                            }
                            Outcome::Passed => {}
                        }
                        (stage.name().to_string(), v)
                    })
                    .collect();
                let mut v = json!({"id": r.id, "source": r.source, "op": r.op, "passed": r.passed(),
                       "seconds": (r.seconds * 1000.0).round() / 1000.0, "stages": stages});
                if !r.notes.is_empty() {
                    v["notes"] = json!(r.notes);
                }
                v
            })
            .collect();
        let mut summary = serde_json::Map::new();
        for source in self.sources() {
            let stages: serde_json::Map<String, Value> = stages_of(&source)
                .iter()
                .map(|&stage| {
                    let c = self.counts(&source, stage);
                    (
                        stage.name().to_string(),
                        json!({"passed": c.passed, "reached": c.reached,
                               "not_reached": c.not_reached, "not_applicable": c.not_applicable,
                               "not_available": c.not_available, "failing_ops": c.failing_ops}),
                    )
                })
                .collect();
            let skipped = |by_pytorch: bool| {
                self.skipped
                    .iter()
                    .filter(|k| k.source == source && k.by_pytorch == by_pytorch)
                    .count()
            };
            // `skipped_by_pytorch` counts the cases the source's producer skipped (JAX's
            // for `xla`), under the name the report always had.
            let entry = json!({"stages": stages, "skipped_by_pytorch": skipped(true),
                               "skipped_by": producer_of(&source),
                               "unsupported_by_case_files": skipped(false)});
            summary.insert(source, entry);
        }
        let targets: Vec<Value> = self
            .targets()
            .iter()
            .map(|t| {
                json!({"source": t.source, "passed": t.passed, "total": t.total,
                       "percent": (t.percent() * 100.0).round() / 100.0, "target": t.target,
                       "met": t.met()})
            })
            .collect();
        let skipped: Vec<Value> = self
            .skipped
            .iter()
            .map(|k| {
                json!({"id": k.id, "source": k.source, "by_pytorch": k.by_pytorch,
                       "reason": k.reason})
            })
            .collect();
        json!({"summary": summary, "targets": targets, "cases": cases, "skipped": skipped,
               "seconds": self.seconds.round()})
    }
}

/// `op (n), op (n), ...` for the `n` most failing ops (ties by name).
fn top_ops(ops: &BTreeMap<String, usize>, n: usize) -> String {
    let mut v: Vec<(&String, &usize)> = ops.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut out: Vec<String> = v
        .iter()
        .take(n)
        .map(|(op, k)| {
            if **k == 1 {
                (*op).clone()
            } else {
                format!("{op} ({k})")
            }
        })
        .collect();
    if v.len() > n {
        out.push(format!("+{} more", v.len() - n));
    }
    out.join(", ")
}

/// ` (reason (n), ...)` for the most common skip reasons (up to the first colon).
fn skip_summary(skipped: &[&Skipped]) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for Skipped { reason, .. } in skipped {
        let head = reason
            .split(':')
            .next()
            .unwrap_or(reason)
            .trim()
            .to_string();
        *reasons.entry(head).or_default() += 1;
    }
    format!(" ({})", top_ops(&reasons, 4))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::STAGES;

    fn result(source: &str, op: &str, values: Outcome) -> CaseResult {
        CaseResult {
            id: format!("{source}/{op}"),
            source: source.into(),
            op: op.into(),
            stages: STAGES
                .iter()
                .map(|&s| {
                    (
                        s,
                        if s == Stage::Values {
                            values.clone()
                        } else if s == Stage::AotEager {
                            Outcome::NotAvailable("none".into())
                        } else {
                            Outcome::Passed
                        },
                    )
                })
                .collect(),
            seconds: 0.0,
            notes: Vec::new(),
        }
    }

    #[test]
    fn counts_and_targets() {
        let mut results: Vec<CaseResult> = (0..49)
            .map(|i| result("opinfo", &format!("op{i:02}"), Outcome::Passed))
            .collect();
        results.push(result("opinfo", "bad", Outcome::Failed("x".into())));
        results.push(result("zoo", "m", Outcome::NotApplicable("random".into())));
        let report = Report {
            results,
            skipped: vec![Skipped {
                id: "opinfo/s".into(),
                source: "opinfo".into(),
                by_pytorch: true,
                reason: "make_fx cannot: y".into(),
            }],
            seconds: 1.0,
        };
        let c = report.counts("opinfo", Stage::Values);
        assert_eq!((c.passed, c.reached), (49, 50));
        assert_eq!(c.failing_ops["bad"], 1);
        let t = report.targets();
        assert_eq!(t[0].passed, 49);
        assert!(t[0].met(), "49/50 = 98% meets 98%");
        assert!(t[1].met());
        let table = report.table();
        assert!(
            table.contains("values                      49 / 50   98.0%"),
            "{table}"
        );
        assert!(
            table.contains("1 skipped by PyTorch (make_fx cannot), 0 not held"),
            "{table}"
        );
        assert!(
            table.contains("aot-eager          not available: none"),
            "{table}"
        );
        let json = report.to_json();
        assert_eq!(
            json["summary"]["zoo"]["stages"]["values"]["not_applicable"],
            1
        );
    }

    #[test]
    fn xla_cases_count_their_own_stages() {
        use crate::conformance::XLA_STAGES;
        let xla = |op: &str, run: Outcome| CaseResult {
            id: format!("xla/harness/{op}/0"),
            source: "xla".into(),
            op: op.into(),
            stages: XLA_STAGES
                .iter()
                .map(|&s| {
                    let o = if s == Stage::RunHlo {
                        run.clone()
                    } else {
                        Outcome::Passed
                    };
                    (s, o)
                })
                .collect(),
            seconds: 0.0,
            notes: Vec::new(),
        };
        let report = Report {
            results: vec![
                xla("abs", Outcome::Passed),
                xla(
                    "cholesky",
                    Outcome::Failed("compile: no custom call".into()),
                ),
                xla("rng", Outcome::NotApplicable("random".into())),
            ],
            skipped: vec![Skipped {
                id: "xla/harness/eig/1".into(),
                source: "xla".into(),
                by_pytorch: true,
                reason: "JAX does not implement it on CPU: eig".into(),
            }],
            seconds: 1.0,
        };
        let table = report.table();
        assert!(
            table.contains("== xla: 3 cases run, 1 skipped by JAX (JAX does not implement it on CPU), 0 not held"),
            "{table}"
        );
        assert!(
            table.contains(
                "run-hlo                       1 / 2   50.0%           0     1  cholesky"
            ),
            "{table}"
        );
        assert!(!table.contains("values"), "{table}");
        assert!(
            table.contains("cases passing every stage they reach: 2 / 3 = 66.7% (no target)"),
            "{table}"
        );
        assert!(report.targets().is_empty());
        let json = report.to_json();
        assert_eq!(json["summary"]["xla"]["stages"]["run-hlo"]["passed"], 1);
        assert_eq!(json["summary"]["xla"]["skipped_by"], "JAX");
        assert!(json["summary"]["xla"]["stages"]["values"].is_null());
    }
}

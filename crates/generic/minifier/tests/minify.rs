//! The minification driver with synthetic checkers: identity, flakiness, caching,
//! determinism, 1-minimality, resuming and saving.

use std::collections::HashSet;

use graphbug_ir::models::{gpt_forward, GptConfig};
use graphbug_ir::{Graph, NodeKind};
use graphbug_minifier::{
    minify, Candidate, Checker, MinifyError, MinifyOptions, NoSink, ResumePoint, Signature, Sink,
    Stats, Verdict,
};
use proptest::prelude::*;

/// Fails when the candidate calls every op in `ops` (by op name); records every query.
struct Ops {
    ops: Vec<&'static str>,
    message: &'static str,
    /// Every candidate checked, as text.
    seen: Vec<String>,
}

impl Ops {
    fn new(ops: &[&'static str]) -> Self {
        Ops {
            ops: ops.to_vec(),
            message: "boom at the op",
            seen: Vec::new(),
        }
    }
}

fn calls(c: &Candidate, op: &str) -> bool {
    c.graph
        .nodes
        .iter()
        .any(|n| n.op().is_some_and(|o| o.name == op))
}

fn sig(message: &str) -> Signature {
    Signature {
        kind: "runtime error".into(),
        op: None,
        message: message.into(),
        ..Signature::default()
    }
}

impl Checker for Ops {
    fn describe(&self) -> String {
        format!("calls {:?}", self.ops)
    }
    fn check(&mut self, c: &Candidate) -> Verdict {
        self.seen.push(graphbug_ir::print_graph(&c.graph));
        if self.ops.iter().all(|op| calls(c, op)) {
            Verdict::Fails(sig(self.message))
        } else {
            Verdict::Passes
        }
    }
}

fn gpt4() -> Graph {
    gpt_forward(&GptConfig::gpt4())
}

#[test]
fn no_candidate_is_queried_twice_and_runs_are_deterministic() {
    let g = gpt4();
    let mut a = Ops::new(&["_softmax", "native_layer_norm"]);
    let ma = minify(&g, &mut a, &MinifyOptions::default(), &mut NoSink).unwrap();
    // The original is checked twice on purpose (flakiness); nothing else repeats.
    let distinct: HashSet<&String> = a.seen.iter().collect();
    assert_eq!(distinct.len(), a.seen.len() - 1);
    assert_eq!(a.seen.len(), ma.stats.queries);
    let mut b = Ops::new(&["_softmax", "native_layer_norm"]);
    let mb = minify(&g, &mut b, &MinifyOptions::default(), &mut NoSink).unwrap();
    assert_eq!(ma.candidate, mb.candidate);
    assert_eq!(ma.stats, mb.stats);
    assert_eq!(a.seen, b.seen);
    assert_eq!(ma.log, mb.log);
}

/// Asserts no single kept node can be dropped without losing the failure.
fn assert_one_minimal(g: &Graph, kept: &[u32], checker: &mut dyn Checker) {
    let original = graphbug_minifier::Original::new(g.clone());
    for i in 0..kept.len() {
        let rest: Vec<u32> = kept
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .map(|(_, &k)| k)
            .collect();
        let v = checker.check(&original.candidate(&rest));
        assert!(
            !matches!(v, Verdict::Fails(_)),
            "dropping node #{} still fails",
            kept[i]
        );
    }
}

#[test]
fn results_are_one_minimal() {
    let g = gpt4();
    for ops in [
        vec!["gelu"],
        vec!["_softmax", "native_layer_norm"],
        vec!["masked_fill", "addmm", "tril"],
    ] {
        let mut c = Ops::new(&ops);
        let m = minify(&g, &mut c, &MinifyOptions::default(), &mut NoSink).unwrap();
        assert_eq!(m.stats.end_nodes, ops.len(), "{ops:?}");
        assert_one_minimal(&g, &m.candidate.kept, &mut c);
    }
}

/// Fails with the original bug while node `bug` is kept; with another message when only
/// node `other` is: a minifier that drifts would settle on `other`'s smaller failure.
struct TwoBugs {
    bug: String,
    other: String,
}

impl Checker for TwoBugs {
    fn describe(&self) -> String {
        "two bugs".into()
    }
    fn check(&mut self, c: &Candidate) -> Verdict {
        let has = |name: &str| {
            c.graph
                .nodes
                .iter()
                .any(|n| n.name == name && !n.is_placeholder())
        };
        if has(&self.bug) {
            Verdict::Fails(sig("ReluRuntimeError: the relu fired"))
        } else if has(&self.other) {
            Verdict::Fails(sig(
                "CUDA illegal memory access in a completely different kernel",
            ))
        } else {
            Verdict::Passes
        }
    }
}

#[test]
fn the_minifier_never_drifts_onto_another_bug() {
    let g = gpt4();
    let mut c = TwoBugs {
        bug: "gelu_3".into(),
        other: "t".into(),
    };
    let m = minify(&g, &mut c, &MinifyOptions::default(), &mut NoSink).unwrap();
    let names: Vec<&str> = m
        .graph()
        .nodes
        .iter()
        .filter(|n| !n.is_placeholder())
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(names, ["gelu_3"]);
    // With --check-str pinned to the other bug, that one is minified instead.
    let mut c = TwoBugs {
        bug: "t".into(),
        other: "gelu_3".into(),
    };
    let opts = MinifyOptions {
        check_str: Some("ReluRuntime".into()),
        ..MinifyOptions::default()
    };
    let m = minify(&g, &mut c, &opts, &mut NoSink).unwrap();
    assert_eq!(m.stats.end_nodes, 1);
    assert!(m
        .graph()
        .find("t")
        .is_some_and(|id| !m.graph().node(id).is_placeholder()));
}

#[test]
fn a_passing_graph_a_flaky_checker_and_a_bad_regex_are_errors() {
    let g = gpt4();
    let err = minify(
        &g,
        &mut Ops::new(&["relu"]),
        &MinifyOptions::default(),
        &mut NoSink,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "input graph does not fail (calls [\"relu\"]): passes"
    );

    // Fails once, then never again: too rare to minify.
    struct Once(usize);
    impl Checker for Once {
        fn describe(&self) -> String {
            "once".into()
        }
        fn check(&mut self, _: &Candidate) -> Verdict {
            self.0 += 1;
            if self.0 == 1 {
                Verdict::Fails(sig("sometimes"))
            } else {
                Verdict::Passes
            }
        }
    }
    let err = minify(&g, &mut Once(0), &MinifyOptions::default(), &mut NoSink).unwrap_err();
    assert!(matches!(err, MinifyError::Flaky { .. }), "{err}");
    assert!(err.to_string().contains("1 of 10 runs (10%)"), "{err}");

    let opts = MinifyOptions {
        check_str: Some("(".into()),
        ..MinifyOptions::default()
    };
    let err = minify(&g, &mut Ops::new(&["gelu"]), &opts, &mut NoSink).unwrap_err();
    assert!(matches!(err, MinifyError::CheckStr(_)), "{err}");
    let opts = MinifyOptions {
        check_str: Some("not in the message".into()),
        ..MinifyOptions::default()
    };
    let err = minify(&g, &mut Ops::new(&["gelu"]), &opts, &mut NoSink).unwrap_err();
    assert!(
        err.to_string().contains("does not match --check-str"),
        "{err}"
    );
}

/// Records the sizes it is told about.
struct Recorder(Vec<(usize, Vec<u32>)>);

impl Sink for Recorder {
    fn improved(&mut self, best: &Candidate, _: &Signature, stats: &Stats) -> Result<(), String> {
        assert_eq!(stats.end_nodes, best.size());
        self.0.push((best.size(), best.kept.clone()));
        Ok(())
    }
}

#[test]
fn every_improvement_reaches_the_sink_and_a_resumed_run_ends_the_same() {
    let g = gpt4();
    let mut rec = Recorder(Vec::new());
    let full = minify(
        &g,
        &mut Ops::new(&["_softmax", "native_layer_norm"]),
        &MinifyOptions::default(),
        &mut rec,
    )
    .unwrap();
    let sizes: Vec<usize> = rec.0.iter().map(|(s, _)| *s).collect();
    assert!(sizes.windows(2).all(|w| w[1] < w[0]), "{sizes:?}");
    assert_eq!(*sizes.last().unwrap(), full.stats.end_nodes);

    // Stop early (as a killed run would), then resume from the last saved state.
    let stopped = minify(
        &g,
        &mut Ops::new(&["_softmax", "native_layer_norm"]),
        &MinifyOptions {
            max_queries: Some(8),
            ..MinifyOptions::default()
        },
        &mut NoSink,
    )
    .unwrap();
    assert!(stopped.stats.end_nodes > full.stats.end_nodes);
    let resumed = minify(
        &g,
        &mut Ops::new(&["_softmax", "native_layer_norm"]),
        &MinifyOptions {
            resume: Some(ResumePoint {
                kept: stopped.candidate.kept.clone(),
                retained: stopped.candidate.retained.clone(),
                signature: Some(stopped.signature.clone()),
            }),
            ..MinifyOptions::default()
        },
        &mut NoSink,
    )
    .unwrap();
    assert_eq!(resumed.stats.end_nodes, full.stats.end_nodes);
    let err = minify(
        &g,
        &mut Ops::new(&["gelu"]),
        &MinifyOptions {
            resume: Some(ResumePoint {
                kept: vec![999_999],
                ..ResumePoint::default()
            }),
            ..MinifyOptions::default()
        },
        &mut NoSink,
    )
    .unwrap_err();
    assert!(matches!(err, MinifyError::Resume(_)));
}

#[test]
fn the_original_runs_again_only_once_a_candidate_does_not_fail() {
    // One relu on an input: every candidate the search asks keeps the relu and fails, so
    // no verdict could be the flaky bug not showing, and the original runs once.
    let mut b = graphbug_ir::GraphBuilder::new("G");
    let x = b.input(
        "x",
        graphbug_ir::TensorMeta::new(graphbug_ir::Dtype::Float32, vec![4]),
    );
    let r = b.call(graphbug_ir::OpName::aten("relu", "default"), [x.into()]);
    b.output([r.into()]);
    let g = b.finish().unwrap();
    let mut c = Ops::new(&["relu"]);
    let m = minify(&g, &mut c, &MinifyOptions::default(), &mut NoSink).unwrap();
    let original = graphbug_ir::print_graph(&g);
    assert_eq!(c.seen.iter().filter(|s| **s == original).count(), 1);
    assert_eq!(c.seen.len(), m.stats.queries);
    // A candidate that does not fail runs the original again, once (gpt4: see
    // `no_candidate_is_queried_twice_and_runs_are_deterministic`).
    let mut c = Ops::new(&["gelu"]);
    let m = minify(&gpt4(), &mut c, &MinifyOptions::default(), &mut NoSink).unwrap();
    let original = graphbug_ir::print_graph(&gpt4());
    assert_eq!(c.seen.iter().filter(|s| **s == original).count(), 2);
    assert_eq!(c.seen.len(), m.stats.queries);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// On random chains of ops, the result keeps exactly the ops asked for and is 1-minimal.
    #[test]
    fn random_graphs_minify_to_the_ops_asked_for(
        ops in prop::collection::vec(0usize..5, 4..40),
        wanted in prop::collection::btree_set(0usize..5, 1..3),
    ) {
        const NAMES: [&str; 5] = ["relu", "sin", "cos", "neg", "abs"];
        let mut b = graphbug_ir::GraphBuilder::new("G");
        let x = b.input("x", graphbug_ir::TensorMeta::new(graphbug_ir::Dtype::Float32, vec![4]));
        let mut vals = vec![x];
        for (i, &o) in ops.iter().enumerate() {
            let a = vals[i % vals.len()];
            let t = b.call(graphbug_ir::OpName::aten(NAMES[o], "default"), [a.into()]);
            vals.push(t);
        }
        b.output([vals.last().copied().unwrap().into()]);
        let g = b.finish().unwrap();
        let wanted: Vec<&'static str> = wanted.into_iter().map(|i| NAMES[i]).collect();
        prop_assume!(wanted.iter().all(|w| ops.iter().any(|&o| NAMES[o] == *w)));
        let mut c = Ops::new(&wanted);
        let m = minify(&g, &mut c, &MinifyOptions::default(), &mut NoSink).unwrap();
        prop_assert_eq!(m.stats.end_nodes, wanted.len());
        for node in &m.graph().nodes {
            if let NodeKind::Call { op, .. } = &node.kind {
                prop_assert!(wanted.contains(&op.name.as_str()));
            }
        }
        assert_one_minimal(&g, &m.candidate.kept, &mut c);
    }
}

#[test]
fn inputs_holding_equal_values_are_consolidated() {
    use graphbug_minifier::Origin;
    let g = gpt4();
    // Every layer builds the same causal mask: tell the minifier those values are equal.
    let id = |name: &str| g.find(name).unwrap().0;
    let mut keys = std::collections::HashMap::new();
    for name in [
        "bitwise_not",
        "bitwise_not_1",
        "bitwise_not_2",
        "bitwise_not_3",
    ] {
        keys.insert(Origin::Node(id(name)), 42u64);
    }
    struct TwoFills;
    impl Checker for TwoFills {
        fn describe(&self) -> String {
            "two masked fills".into()
        }
        fn check(&mut self, c: &Candidate) -> Verdict {
            let fills = c
                .graph
                .nodes
                .iter()
                .filter(|n| n.op().is_some_and(|o| o.name == "masked_fill"))
                .count();
            if fills >= 2 {
                Verdict::Fails(sig("two fills"))
            } else {
                Verdict::Passes
            }
        }
    }
    let opts = MinifyOptions {
        value_keys: Some(keys),
        ..MinifyOptions::default()
    };
    let m = minify(&g, &mut TwoFills, &opts, &mut NoSink).unwrap();
    assert_eq!(m.stats.end_nodes, 2);
    // Two different scores, one shared mask.
    assert_eq!(m.candidate.inputs.len(), 3, "{:?}", m.candidate.inputs);
    assert!(
        m.log
            .iter()
            .any(|l| l.starts_with("Strategy: Consolidate inputs") && l.contains("SUCCESS")),
        "{:#?}",
        m.log
    );
    // Without fingerprints nothing is merged.
    let m = minify(&g, &mut TwoFills, &MinifyOptions::default(), &mut NoSink).unwrap();
    assert_eq!(m.candidate.inputs.len(), 4);
}

#[test]
fn removing_outputs_together_is_removing_them_one_by_one() {
    let g = gpt4();
    let o = graphbug_minifier::Original::new(g);
    let all = o.all();
    let sinks = o.sinks(&all);
    assert!(sinks.len() > 4, "{sinks:?}");
    // A prefix has more sinks: every node whose readers come later.
    let prefix = &all[..all.len() / 2];
    for kept in [&all[..], prefix] {
        let sinks = o.sinks(kept);
        for group in [
            &sinks[..1],
            &sinks[..2],
            &sinks[1..sinks.len() - 1],
            &sinks[..],
        ] {
            let one_by_one = group
                .iter()
                .fold(kept.to_vec(), |k, &s| o.without_output(&k, s));
            assert_eq!(o.without_outputs(kept, group), one_by_one, "{group:?}");
        }
    }
}

/// A flaky bug: while node `bug` is kept the candidate fails in a fixed pseudo-random
/// `rate` (per mille) of its runs, or `weak` (per mille) when node `helper` is gone too;
/// without `bug` it never fails. Counts the runs.
struct Flaky {
    bug: &'static str,
    helper: &'static str,
    rate: u64,
    weak: u64,
    runs: u64,
}

impl Checker for Flaky {
    fn describe(&self) -> String {
        "flaky".into()
    }
    fn check(&mut self, c: &Candidate) -> Verdict {
        self.runs += 1;
        let has = |name: &str| {
            c.graph
                .nodes
                .iter()
                .any(|n| n.name == name && !n.is_placeholder())
        };
        // splitmix64 of the run number: a fixed sequence, so the test is deterministic.
        let mut z = self.runs.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let roll = (z ^ (z >> 31)) % 1000;
        let rate = if has(self.helper) {
            self.rate
        } else {
            self.weak
        };
        if has(self.bug) && roll < rate {
            Verdict::Fails(sig("flaky wrong result"))
        } else {
            Verdict::Passes
        }
    }
}

fn kept_names(m: &graphbug_minifier::Minified) -> Vec<String> {
    m.graph()
        .nodes
        .iter()
        .filter(|n| !n.is_placeholder())
        .map(|n| n.name.to_string())
        .collect()
}

#[test]
fn a_flaky_bug_is_measured_and_every_candidate_held_to_its_rate() {
    let g = gpt4();
    // A bug that shows in 70% of runs: measured automatically once the first two runs
    // disagree (or asked for with `repeat`), then minified to its node.
    let mut c = Flaky {
        bug: "gelu_2",
        helper: "gelu_2",
        rate: 700,
        weak: 700,
        runs: 0,
    };
    let opts = MinifyOptions {
        repeat: Some(20),
        ..MinifyOptions::default()
    };
    let m = minify(&g, &mut c, &opts, &mut NoSink).unwrap();
    assert_eq!(kept_names(&m), ["gelu_2"]);
    let r = m.stats.reliability.unwrap();
    assert_eq!(r.runs, 20);
    assert!((8..=19).contains(&r.failures), "{r}");
    assert!(
        m.log[0].contains(&format!("in {r}; a candidate must fail as often")),
        "{}",
        m.log[0]
    );
    // Dropping `t_2` makes the bug show in only 20% of runs: a candidate without it fails
    // less reliably than the original, so it is never taken, though single runs of it
    // often fail.
    let mut c = Flaky {
        bug: "gelu_2",
        helper: "t_2",
        rate: 900,
        weak: 200,
        runs: 0,
    };
    let m = minify(&g, &mut c, &opts, &mut NoSink).unwrap();
    let kept = kept_names(&m);
    assert!(
        kept.contains(&"gelu_2".to_string()) && kept.contains(&"t_2".to_string()),
        "{kept:?}"
    );
    // Each query ran the checker up to 20 times, stopping once the answer was known.
    assert!(c.runs > m.stats.queries as u64 && c.runs <= 20 * m.stats.queries as u64);
    // A deterministic bug with `repeat`: every run fails, and candidates must fail every
    // run; the result is the same as without `repeat`.
    let mut once = Ops::new(&["gelu"]);
    let plain = minify(&g, &mut once, &MinifyOptions::default(), &mut NoSink).unwrap();
    let mut again = Ops::new(&["gelu"]);
    let held = minify(&g, &mut again, &opts, &mut NoSink).unwrap();
    assert_eq!(held.stats.reliability.unwrap().failures, 20);
    assert_eq!(plain.candidate, held.candidate);
    assert_eq!(plain.stats.reliability, None);
}

#[test]
fn a_flaky_original_is_found_without_being_asked() {
    let g = gpt4();
    // Half the runs fail; from run 8 on, the original's run fails, and its second run,
    // taken at the search's first candidate that does not fail, passes: the two disagree,
    // the search starts again, and the original is run AUTO_REPEAT times without `repeat`.
    let mut c = Flaky {
        bug: "gelu_1",
        helper: "gelu_1",
        rate: 500,
        weak: 500,
        runs: 7,
    };
    let m = minify(&g, &mut c, &MinifyOptions::default(), &mut NoSink).unwrap();
    let r = m.stats.reliability.expect("measured without being asked");
    assert_eq!(r.runs, graphbug_minifier::minify::AUTO_REPEAT);
    assert!(m.stats.queries > r.runs, "{}", m.stats.queries);
    assert_eq!(kept_names(&m), ["gelu_1"]);
}

#[test]
fn a_flaky_bug_with_several_workers_holds_every_worker_to_its_rate() {
    let g = gpt4();
    /// The flaky checker, counting the runs each worker made.
    struct Counted(Flaky, std::sync::Arc<std::sync::atomic::AtomicUsize>);
    impl Checker for Counted {
        fn describe(&self) -> String {
            self.0.describe()
        }
        fn check(&mut self, c: &Candidate) -> Verdict {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.check(c)
        }
    }
    let counts: Vec<_> = (0..3)
        .map(|_| std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0)))
        .collect();
    let mut checkers: Vec<Box<dyn Checker + Send>> = counts
        .iter()
        .enumerate()
        .map(|(k, n)| {
            Box::new(Counted(
                Flaky {
                    bug: "gelu_2",
                    helper: "gelu_2",
                    rate: 700,
                    weak: 700,
                    runs: 100 * k as u64,
                },
                n.clone(),
            )) as Box<dyn Checker + Send>
        })
        .collect();
    let opts = MinifyOptions {
        repeat: Some(20),
        ..MinifyOptions::default()
    };
    let m = graphbug_minifier::minify_parallel(&g, &mut checkers, &opts, &mut NoSink).unwrap();
    // Which worker answers what depends on timing, and a flaky checker's answers on its
    // own sequence: the result always keeps the bug (only candidates with it can fail),
    // and every worker ran repeated queries.
    assert!(
        kept_names(&m).contains(&"gelu_2".to_string()),
        "{:?}",
        kept_names(&m)
    );
    assert_eq!(m.stats.reliability.unwrap().runs, 20);
    let runs: Vec<usize> = counts
        .iter()
        .map(|n| n.load(std::sync::atomic::Ordering::Relaxed))
        .collect();
    assert!(runs.iter().all(|&n| n > 0), "{runs:?}");
    assert!(
        runs.iter().sum::<usize>() > m.stats.queries,
        "{runs:?} runs for {} queries",
        m.stats.queries
    );
}

/// A wrong result whose size depends on the node kept: `gelu_2` makes it 5x its
/// tolerance, `gelu_1` alone only 1.1x (on the edge, where round-off could flip it).
struct Margins;

impl Checker for Margins {
    fn describe(&self) -> String {
        "margins".into()
    }
    fn check(&mut self, c: &Candidate) -> Verdict {
        let has = |name: &str| {
            c.graph
                .nodes
                .iter()
                .any(|n| n.name == name && !n.is_placeholder())
        };
        let margin = if has("gelu_2") {
            5.0
        } else if has("gelu_1") {
            1.1
        } else {
            return Verdict::Passes;
        };
        Verdict::Fails(Signature {
            kind: "accuracy wrong result".into(),
            message: "outputs differ".into(),
            margin: Some(margin),
            ..Signature::default()
        })
    }
}

#[test]
fn a_wrong_result_on_the_edge_of_its_tolerance_does_not_count() {
    let g = gpt4();
    let m = minify(&g, &mut Margins, &MinifyOptions::default(), &mut NoSink).unwrap();
    // The shortest failing prefix ends at gelu_1, but only 1.1x its tolerance.
    assert_eq!(kept_names(&m), ["gelu_2"]);
    assert!(m.log[0].contains("(5.00x its tolerance)"), "{}", m.log[0]);
    assert!(
        m.log.iter().any(|l| l
            .contains("fails only 1.10x its tolerance, short of 2.00x: on the edge, not counted")),
        "{:#?}",
        m.log
    );
    // An original on the edge itself: candidates must fail by as much as it does.
    struct Edge;
    impl Checker for Edge {
        fn describe(&self) -> String {
            "edge".into()
        }
        fn check(&mut self, c: &Candidate) -> Verdict {
            let mut m = Margins;
            match m.check(c) {
                Verdict::Fails(mut s) => {
                    s.margin = s
                        .margin
                        .map(|x| x.min(1.1) - if x > 2.0 { 0.0 } else { 0.05 });
                    Verdict::Fails(s)
                }
                v => v,
            }
        }
    }
    let m = minify(&g, &mut Edge, &MinifyOptions::default(), &mut NoSink).unwrap();
    assert_eq!(kept_names(&m), ["gelu_2"]);
    assert!(m.log[1].contains("on the edge"), "{}", m.log[1]);
}

#[test]
fn inputs_become_constants_only_where_the_bug_survives_it() {
    // A bug that needs a constant operand (a folding bug: with parameters, it shows only in
    // a bigger program) and one that needs a parameter.
    struct Softmax {
        needs_constants: bool,
        constant_queries: usize,
    }
    impl Checker for Softmax {
        fn describe(&self) -> String {
            "softmax".into()
        }
        fn check(&mut self, c: &Candidate) -> Verdict {
            self.constant_queries += usize::from(c.constants());
            // Needing constants, it shows with parameters only in a bigger program.
            let shows = if self.needs_constants {
                c.constants() || c.size() > 1
            } else {
                !c.constants()
            };
            if calls(c, "_softmax") && shows {
                Verdict::Fails(sig("softmax"))
            } else {
                Verdict::Passes
            }
        }
    }
    let g = gpt4();
    let with = MinifyOptions {
        constants: true,
        ..MinifyOptions::default()
    };
    for needs_constants in [false, true] {
        let mut checker = Softmax {
            needs_constants,
            constant_queries: 0,
        };
        let m = minify(&g, &mut checker, &with, &mut NoSink).unwrap();
        assert_eq!(m.stats.end_nodes, 1, "{:#?}", m.log);
        assert_eq!(m.candidate.constants(), needs_constants, "{:#?}", m.log);
        let inputs = m.candidate.inputs.len();
        assert!(inputs > 0);
        assert_eq!(
            m.candidate.parameters(),
            if needs_constants { 0 } else { inputs }
        );
        // Tried on the 1-minimal candidate; where it stays, the search goes on from there.
        if !needs_constants {
            assert_eq!(checker.constant_queries, 1);
        }
        // Tried at the truncation point (hlo_bisect's way) or after 1-minimality.
        let tried: Vec<&String> = m.log.iter().filter(|l| l.contains("constants (")).collect();
        assert!(!tried.is_empty(), "{:#?}", m.log);
        assert_eq!(
            tried.iter().any(|l| l.contains("SUCCESS")),
            needs_constants,
            "{tried:#?}"
        );
    }
    // Not asked for (aten graphs), never tried.
    let mut checker = Softmax {
        needs_constants: false,
        constant_queries: 0,
    };
    let m = minify(&g, &mut checker, &MinifyOptions::default(), &mut NoSink).unwrap();
    assert!(!m.candidate.constants());
    assert_eq!(checker.constant_queries, 0);
}

/// Fails while the candidate has the call node `bug` (by name), saying `message`.
struct Named {
    bug: &'static str,
    message: String,
}

impl Checker for Named {
    fn describe(&self) -> String {
        format!("has {}", self.bug)
    }
    fn check(&mut self, c: &Candidate) -> Verdict {
        let has = c
            .graph
            .nodes
            .iter()
            .any(|n| n.op().is_some() && n.name.as_str() == self.bug);
        if has {
            Verdict::Fails(sig(&self.message))
        } else {
            Verdict::Passes
        }
    }
}

/// A failure whose message names the node it is at (as graphbug's faults and XLA's errors
/// do) is tried at that node alone first: one query after the preprocessing instead of a
/// halving search. A message naming another node (a wrong lead) costs one query, and the
/// search then ends where the bug is, as it would have.
#[test]
fn a_node_the_failure_names_is_tried_alone_first() {
    let g = gpt4();
    let opts = MinifyOptions::default();
    let run = |message: &str| {
        let mut c = Named {
            bug: "gelu_2",
            message: message.to_string(),
        };
        minify(&g, &mut c, &opts, &mut NoSink).unwrap()
    };
    let silent = run("the backend failed");
    let named = run("injected runtime fault at node `gelu_2` (aten::gelu.default)");
    let wrong = run("failed near %gelu_1");
    for m in [&silent, &named, &wrong] {
        assert_eq!(m.stats.end_nodes, 1, "{:#?}", m.log);
        let left: Vec<&str> = m
            .candidate
            .graph
            .nodes
            .iter()
            .filter(|n| n.op().is_some())
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(left, ["gelu_2"], "{:#?}", m.log);
    }
    assert!(
        named.log.iter().any(
            |l| l.starts_with("Strategy: Named by the failure, alone") && l.contains("SUCCESS")
        ),
        "{:#?}",
        named.log
    );
    // Two checks of the original, the preprocessing, the named node alone, and what
    // 1-minimality asks of one node.
    assert!(named.stats.queries <= 5, "{:#?}", named.log);
    assert!(
        named.stats.queries < silent.stats.queries,
        "{} vs {}",
        named.stats.queries,
        silent.stats.queries
    );
    assert!(
        wrong
            .log
            .iter()
            .any(|l| l.starts_with("Strategy: Named by the failure, alone") && l.contains("FAIL")),
        "{:#?}",
        wrong.log
    );
    assert_eq!(wrong.stats.queries, silent.stats.queries + 1);
}

/// Fails while the candidate calls `cos` and returns one value alone; a candidate that also
/// returns a value the original leaves unread fails otherwise (as IREE crashes when a
/// program returns a loop's unread results).
struct OneResult;

impl Checker for OneResult {
    fn describe(&self) -> String {
        "cos, one result".into()
    }
    fn check(&mut self, c: &Candidate) -> Verdict {
        match (calls(c, "cos"), c.graph.outputs().len()) {
            (true, 1) => Verdict::Fails(sig("boom at cos")),
            (true, _) => Verdict::Fails(sig("another crash")),
            _ => Verdict::Passes,
        }
    }
}

#[test]
fn a_bug_that_more_results_hide_starts_from_what_reaches_the_outputs() {
    let g = graphbug_ir::parse_graph(
        "class GraphModule(torch.nn.Module):\n    def forward(self, x: \"f32[4]\"):\n        relu: \"f32[4]\" = torch.ops.aten.relu.default(x)\n        sin: \"f32[4]\" = torch.ops.aten.sin.default(x)\n        cos: \"f32[4]\" = torch.ops.aten.cos.default(relu)\n        return (cos,)\n",
    )
    .unwrap();
    let m = minify(&g, &mut OneResult, &MinifyOptions::default(), &mut NoSink).unwrap();
    assert_eq!(kept_names(&m), ["cos"], "{}", m.log.join("\n"));
    let log = m.log.join("\n");
    assert!(
        log.contains("Preprocessing: only what reaches the original's outputs"),
        "{log}"
    );
}

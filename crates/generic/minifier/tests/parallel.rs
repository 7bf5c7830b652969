//! Parallel minification: speculative workers never change what the serial search finds,
//! asks (as counted), logs or saves, whatever the number of workers and the order their
//! answers arrive in.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use graphbug_ir::models::{gpt_forward, GptConfig};
use graphbug_ir::Graph;
use graphbug_minifier::{
    minify, minify_parallel, Candidate, Checker, Minified, MinifyOptions, Signature, Sink, Stats,
    Verdict,
};

/// Fails when the candidate calls every op in `ops`; answers after a delay that depends on
/// the candidate, so workers finish out of order; records what it ran.
#[derive(Clone)]
struct SlowOps {
    ops: Vec<&'static str>,
    /// Every candidate checked (by any clone), as text.
    ran: Arc<Mutex<Vec<String>>>,
    /// Panics on candidates of this many nodes.
    panic_at: Option<usize>,
}

impl SlowOps {
    fn new(ops: &[&'static str]) -> Self {
        SlowOps {
            ops: ops.to_vec(),
            ran: Arc::default(),
            panic_at: None,
        }
    }
}

impl Checker for SlowOps {
    fn describe(&self) -> String {
        format!("calls {:?}", self.ops)
    }
    fn check(&mut self, c: &Candidate) -> Verdict {
        let text = graphbug_ir::print_graph(&c.graph);
        // 0 to 3 ms, by the candidate's text.
        let jitter = text
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
        std::thread::sleep(Duration::from_micros(jitter % 3000));
        self.ran.lock().unwrap().push(text);
        if Some(c.size()) == self.panic_at {
            panic!("the checker broke on a candidate of {} nodes", c.size());
        }
        let calls = |op: &str| {
            c.graph
                .nodes
                .iter()
                .any(|n| n.op().is_some_and(|o| o.name == op))
        };
        if self.ops.iter().all(|op| calls(op)) {
            Verdict::Fails(Signature {
                kind: "runtime error".into(),
                message: "boom".into(),
                ..Signature::default()
            })
        } else {
            Verdict::Passes
        }
    }
}

/// Records every improvement, as text.
#[derive(Default)]
struct Saved(Vec<(String, Stats)>);

impl Sink for Saved {
    fn improved(&mut self, best: &Candidate, _: &Signature, stats: &Stats) -> Result<(), String> {
        self.0
            .push((graphbug_ir::print_graph(&best.graph), stats.clone()));
        Ok(())
    }
}

fn gpt4() -> Graph {
    gpt_forward(&GptConfig::gpt4())
}

fn parallel(g: &Graph, checker: &SlowOps, jobs: usize, opts: &MinifyOptions) -> (Minified, Saved) {
    let mut checkers: Vec<Box<dyn Checker + Send>> = (0..jobs)
        .map(|_| Box::new(checker.clone()) as Box<dyn Checker + Send>)
        .collect();
    let mut saved = Saved::default();
    let m = minify_parallel(g, &mut checkers, opts, &mut saved).unwrap();
    (m, saved)
}

fn assert_same(serial: &(Minified, Saved), other: &(Minified, Saved), jobs: usize) {
    assert_eq!(
        graphbug_ir::print_graph(serial.0.graph()),
        graphbug_ir::print_graph(other.0.graph()),
        "-j {jobs}"
    );
    assert_eq!(serial.0.stats, other.0.stats, "-j {jobs}");
    assert_eq!(serial.0.log, other.0.log, "-j {jobs}");
    assert_eq!(serial.1 .0, other.1 .0, "-j {jobs}: the improvements saved");
}

#[test]
fn any_number_of_workers_finds_asks_logs_and_saves_what_one_does() {
    let g = gpt4();
    for ops in [&["_softmax", "native_layer_norm"][..], &["gelu"][..]] {
        let opts = MinifyOptions::default();
        let mut one = SlowOps::new(ops);
        let mut saved = Saved::default();
        let serial = (minify(&g, &mut one, &opts, &mut saved).unwrap(), saved);
        assert_eq!(serial.0.speculative, 0);
        let asked: HashSet<String> = one.ran.lock().unwrap().iter().cloned().collect();
        for jobs in [1, 2, 4, 7] {
            let checker = SlowOps::new(ops);
            let run = parallel(&g, &checker, jobs, &opts);
            assert_same(&serial, &run, jobs);
            let ran = checker.ran.lock().unwrap().clone();
            // Every query the serial search made was run, and only the speculative ones
            // besides (each at most once).
            let distinct: HashSet<String> = ran.iter().cloned().collect();
            assert!(asked.is_subset(&distinct), "-j {jobs}");
            // (The original runs twice, to catch a flaky checker.)
            assert_eq!(
                distinct.len() + 1,
                ran.len(),
                "-j {jobs}: a candidate ran twice"
            );
            assert_eq!(
                ran.len(),
                serial.0.stats.queries + run.0.speculative,
                "-j {jobs}"
            );
            if jobs == 1 {
                assert_eq!(run.0.speculative, 0);
            }
        }
    }
}

#[test]
fn workers_speculate_ahead_of_the_search() {
    let g = gpt4();
    let checker = SlowOps::new(&["gelu"]);
    let (m, _) = parallel(&g, &checker, 4, &MinifyOptions::default());
    // The search waits on one candidate while the others run the ones it tries next:
    // some of them turn out not to be needed.
    assert!(m.speculative > 0, "{}", m.speculative);
    assert!(
        m.speculative < 4 * m.stats.queries,
        "{} wasted for {} queries",
        m.speculative,
        m.stats.queries
    );
}

#[test]
fn a_query_budget_is_the_serial_budget() {
    let g = gpt4();
    let opts = MinifyOptions {
        max_queries: Some(9),
        ..MinifyOptions::default()
    };
    let mut saved = Saved::default();
    let serial = (
        minify(&g, &mut SlowOps::new(&["gelu"]), &opts, &mut saved).unwrap(),
        saved,
    );
    assert_eq!(serial.0.stats.queries, 9);
    let run = parallel(&g, &SlowOps::new(&["gelu"]), 3, &opts);
    assert_same(&serial, &run, 3);
}

#[test]
fn a_panicking_checker_is_an_unresolved_verdict_not_a_hang() {
    let g = gpt4();
    let probe = SlowOps::new(&["gelu"]);
    let m1 = minify(
        &g,
        &mut probe.clone(),
        &MinifyOptions::default(),
        &mut Saved::default(),
    )
    .unwrap();
    // A size the search queries but that is never the bug: a panic there is an
    // unresolved verdict, and the search ends where it does without one.
    let ran = probe.ran.lock().unwrap().clone();
    let nodes = |t: &String| t.matches(" = torch.ops.").count();
    let size = (2..g.nodes.len())
        .find(|&k| {
            let of_size: Vec<&String> = ran.iter().filter(|t| nodes(t) == k).collect();
            !of_size.is_empty() && of_size.iter().all(|t| !t.contains("aten.gelu"))
        })
        .expect("some size is queried and never the bug");
    let checker = SlowOps {
        panic_at: Some(size),
        ..SlowOps::new(&["gelu"])
    };
    let (m, _) = parallel(&g, &checker, 3, &MinifyOptions::default());
    assert_eq!(
        graphbug_ir::print_graph(m.graph()),
        graphbug_ir::print_graph(m1.graph())
    );
    assert!(checker.ran.lock().unwrap().iter().any(|t| nodes(t) == size));
}

#[test]
fn no_checker_is_an_error() {
    let err = minify_parallel(
        &gpt4(),
        &mut [],
        &MinifyOptions::default(),
        &mut Saved::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("at least one checker"), "{err}");
}

//! Benchmark: the parallel search alone. Checkers that wait 100 ms per query and fail when
//! the candidate computes given nodes of a 48-layer gpt4 forward graph (2,987 nodes): a
//! single node (gelu_24, found by bisection), and two nodes 90 layers apart (gelu_1 and
//! the last layer norm but one). Wall time with four workers against one, in interleaved
//! rounds, for each; the result and the queries counted must be the same. Target: the
//! median ratio at most 0.35x.
//!
//! `cargo bench -p graphbug-minifier --bench parallel`

use std::time::{Duration, Instant};

use graphbug_ir::bench::{Ratio, Targets};

/// Interleaved rounds of -j 4 and -j 1.
const ROUNDS: usize = 3;
use graphbug_ir::models::{gpt_forward, GptConfig};
use graphbug_ir::print_graph;
use graphbug_minifier::{
    minify_parallel, Candidate, Checker, Minified, MinifyOptions, NoSink, Signature, Verdict,
};

/// Fails when the candidate computes every named node; waits first, as a slow backend.
#[derive(Clone)]
struct Computes(Vec<String>);

impl Checker for Computes {
    fn describe(&self) -> String {
        format!("computes {:?}", self.0)
    }
    fn check(&mut self, c: &Candidate) -> Verdict {
        std::thread::sleep(Duration::from_millis(100));
        let computes = |name: &String| {
            c.graph
                .nodes
                .iter()
                .any(|n| n.name == name && n.op().is_some())
        };
        if self.0.iter().all(computes) {
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

fn run(graph: &graphbug_ir::Graph, check: &Computes, jobs: usize) -> (f64, Minified) {
    let mut checkers: Vec<Box<dyn Checker + Send>> = (0..jobs)
        .map(|_| Box::new(check.clone()) as Box<dyn Checker + Send>)
        .collect();
    let t = Instant::now();
    let m = minify_parallel(graph, &mut checkers, &MinifyOptions::default(), &mut NoSink)
        .expect("minifies");
    (t.elapsed().as_secs_f64(), m)
}

fn main() {
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        if !"minifier parallel".contains(&filter) {
            return;
        }
    }
    let graph = gpt_forward(&GptConfig::gpt4_layers(48));
    let named = |op: &str| -> Vec<String> {
        graph
            .nodes
            .iter()
            .filter(|n| n.op().is_some_and(|o| o.name == op))
            .map(|n| n.name.to_string())
            .collect()
    };
    let (gelus, norms) = (named("gelu"), named("native_layer_norm"));
    let cases = [
        ("a single node", vec![gelus[gelus.len() / 2].clone()]),
        (
            "two nodes 90 layers apart",
            vec![gelus[1].clone(), norms[norms.len() - 2].clone()],
        ),
    ];
    let mut targets = Targets::new("minifier_parallel");
    for (what, nodes) in cases {
        let check = Computes(nodes);
        let (_, first) = run(&graph, &check, 1);
        let mut speculative = 0;
        let ratio = Ratio::measure(
            ROUNDS,
            || {
                let (t4, m4) = run(&graph, &check, 4);
                assert_eq!(print_graph(first.graph()), print_graph(m4.graph()));
                assert_eq!(first.stats, m4.stats);
                speculative = m4.speculative;
                t4
            },
            || run(&graph, &check, 1).0,
        );
        println!(
            "minifier_parallel: {what} ({:?}): -j 4 / -j 1 {ratio}, {} queries each, {speculative} speculative",
            check.0, first.stats.queries
        );
        targets.ratio_at_most(&format!("{what}: -j 4 / -j 1"), &ratio, 0.35);
    }
    targets.finish();
}

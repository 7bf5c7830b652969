//! Benchmark: graphbug at a million nodes. Joint (forward + backward) graphs of GPTs made of
//! gpt4's blocks, built with GraphBuilder and differentiated by graphbug-autodiff, of about
//! 10k, 100k and 1M nodes (the last about 6,000 layers), go through every stage a user
//! runs on a captured graph: print, parse, verify, meta check (`graphbug check --meta`,
//! libtorch's meta kernels), default and min-cut partition, and minification with a
//! `contains:` check. Each stage is reported in µs per node at each size.
//!
//! Targets: each stage's time per node at 1M at most 2x its time per node at 10k (linear
//! time), min-cut's at most 1.25x (no worse, within noise), and the process's peak
//! resident memory within 4 GiB.
//!
//! `[GRAPHBUG_SCALE_MAX_NODES=N] cargo bench --bench scale`

use std::time::Instant;

use graphbug::autodiff::Joint;
use graphbug::ir::bench::Targets;
use graphbug::ir::{parse_graph, print_graph};
use graphbug::minifier::{minify, Contains, MinifyOptions, NoSink};
use graphbug::partition::{default_partition, min_cut_rematerialization_partition, MinCutOptions};

/// The joint graph of an N-layer GPT; the parameters require grad, the token ids do not.
fn gpt_joint(layers: usize) -> Joint {
    graphbug::autodiff::gpt_joint(layers).expect("the GPT joint graph builds")
}

/// The process's peak resident memory so far, in bytes (Linux; 0 elsewhere).
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Starts a new peak for [`peak_rss`] (Linux 4.0+: the peak becomes the current size).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Microseconds per node that `f` takes on a graph of `nodes` nodes (the best of three
/// runs at every size, so that every size is measured alike), its result, and the peak
/// resident memory of the process while it ran (what holds the joint graph too, as the CLI
/// holds the graph it works on).
fn per_node<T>(nodes: usize, f: impl Fn() -> T) -> (f64, T, u64) {
    let mut best = f64::INFINITY;
    let mut out = None;
    reset_peak();
    for _ in 0..3 {
        drop(out.take());
        let t = Instant::now();
        out = Some(f());
        best = best.min(t.elapsed().as_secs_f64() * 1e6 / nodes as f64);
    }
    (best, out.expect("ran at least once"), peak_rss())
}

const STAGES: [&str; 7] = [
    "print",
    "parse",
    "verify",
    "meta check",
    "default partition",
    "min-cut partition",
    "minify contains",
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(filter) = args.iter().find(|a| !a.starts_with('-')) {
        if !"scale".contains(filter.as_str()) {
            return;
        }
    }
    let max_nodes: usize = std::env::var("GRAPHBUG_SCALE_MAX_NODES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    // Nodes per layer, from two small joints.
    let (small, big) = (
        gpt_joint(2).graph.nodes.len(),
        gpt_joint(4).graph.nodes.len(),
    );
    let per_layer = (big - small) / 2;
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let mut rows: Vec<(usize, Vec<f64>)> = Vec::new();
    // The largest peak of any stage, and the stage.
    let mut peak = (0u64, "");
    for target in [10_000usize, 100_000, 1_000_000] {
        if target > max_nodes {
            break;
        }
        let layers = (target / per_layer).max(1);
        let started = Instant::now();
        let joint = gpt_joint(layers);
        let (graph, n_out) = (&joint.graph, joint.num_fwd_outputs);
        let nodes = graph.nodes.len();
        let built = started.elapsed().as_secs_f64();
        reset_peak();
        let holding = peak_rss();
        let mut us = Vec::new();
        let mut note = |k: usize, (t, peak_bytes): (f64, u64)| {
            us.push(t);
            if peak_bytes > peak.0 {
                peak = (peak_bytes, STAGES[k]);
            }
        };
        let (t, text, p) = per_node(nodes, || print_graph(graph));
        note(0, (t, p));
        let (t, parsed, p) = per_node(nodes, || parse_graph(&text).expect("parses"));
        note(1, (t, p));
        assert_eq!(parsed.nodes.len(), nodes);
        drop(text);
        let (t, (), p) = per_node(nodes, || parsed.verify().expect("verifies"));
        note(2, (t, p));
        drop(parsed);
        let (t, check, p) = per_node(nodes, || {
            graphbug::aten::meta::check_meta(graph).expect("meta check")
        });
        note(3, (t, p));
        assert!(
            check.mismatches.is_empty(),
            "meta mismatches at {nodes} nodes"
        );
        drop(check);
        let (t, d, p) = per_node(nodes, || {
            default_partition(graph, n_out).expect("default partition")
        });
        note(4, (t, p));
        let (t, m, p) = per_node(nodes, || {
            min_cut_rematerialization_partition(graph, n_out, &MinCutOptions::default())
                .expect("min-cut partition")
        });
        note(5, (t, p));
        // A CLI run holds only the graph it works on: the partitions go before minify.
        let saved = (d.report.saved_bytes, m.report.saved_bytes);
        drop((d, m));
        let (t, minified, p) = per_node(nodes, || {
            let mut contains = Contains::parse("aten.gelu_backward.default").expect("op list");
            minify(graph, &mut contains, &MinifyOptions::default(), &mut NoSink).expect("minifies")
        });
        note(6, (t, p));
        assert_eq!(minified.stats.end_nodes, 1);
        let shown: Vec<String> = STAGES
            .iter()
            .zip(&us)
            .map(|(stage, t)| format!("{stage} {t:.3}"))
            .collect();
        println!(
            "{layers:>5} layers, {nodes:>8} nodes (built in {built:.1} s; the process holding it: {:.2} GiB), µs/node: {}; minify: {} queries; saved {} B (default) / {} B (min-cut); largest peak memory {:.2} GiB ({})",
            gib(holding),
            shown.join(", "),
            minified.stats.queries,
            saved.0,
            saved.1,
            gib(peak.0),
            peak.1,
        );
        rows.push((nodes, us));
    }
    let mut targets = Targets::new("scale");
    if let (Some((n0, first)), Some((n1, last))) = (rows.first(), rows.last()) {
        if n1 > n0 {
            for (k, stage) in STAGES.iter().enumerate() {
                let limit = if *stage == "min-cut partition" {
                    1.25
                } else {
                    2.0
                };
                targets.at_most(
                    &format!("{stage}: µs/node at {n1} nodes / at {n0}"),
                    last[k] / first[k],
                    limit,
                    "x",
                );
            }
        }
    }
    targets.at_most(
        &format!("peak resident memory of a stage ({})", peak.1),
        gib(peak.0),
        4.0,
        " GiB",
    );
    targets.finish();
}

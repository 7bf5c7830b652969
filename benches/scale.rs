//! Benchmark: graphbug at a million nodes. Joint (forward + backward) graphs of GPTs made of
//! gpt4's blocks, built with GraphBuilder and differentiated by graphbug-autodiff, of about
//! 10k, 100k and 1M nodes (the last about 6,000 layers), go through every stage a user
//! runs on a captured graph: print, parse, verify, meta check (`graphbug check --meta`,
//! libtorch's meta kernels), default and min-cut partition, and minification with a
//! `contains:` check. Each stage is reported in µs per node at each size (the median of
//! three rounds), each round at a larger size interleaved with the same stage at 10k.
//!
//! Targets: each stage's time per node at 1M at most 2x its time per node at 10k (linear
//! time), min-cut's at most 1.25x (no worse, within noise), as the median of the rounds'
//! ratios (with their spread); and the process's peak resident memory within 4 GiB.
//!
//! `[GRAPHBUG_SCALE_MAX_NODES=N] cargo bench --bench scale`

use std::time::Instant;

use graphbug::autodiff::Joint;
use graphbug::ir::bench::{Ratio, Targets};
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

/// A joint graph with what its stages start from: its text and the parsed graph.
struct Prepared {
    joint: Joint,
    text: String,
    parsed: graphbug::ir::Graph,
}

impl Prepared {
    /// The joint graph of `layers` layers, printed and parsed once.
    fn new(layers: usize) -> Prepared {
        let joint = gpt_joint(layers);
        let text = print_graph(&joint.graph);
        let parsed = parse_graph(&text).expect("parses");
        Prepared {
            joint,
            text,
            parsed,
        }
    }

    /// Nodes of the joint graph.
    fn nodes(&self) -> usize {
        self.joint.graph.nodes.len()
    }

    /// Runs `stage` (of [`STAGES`]) once: its seconds, and what the run says of itself
    /// (minify's queries, the partitions' saved bytes).
    fn run(&self, stage: &str) -> (f64, String) {
        let (graph, n_out) = (&self.joint.graph, self.joint.num_fwd_outputs);
        let t = Instant::now();
        match stage {
            "print" => drop(print_graph(graph)),
            "parse" => drop(parse_graph(&self.text).expect("parses")),
            "verify" => self.parsed.verify().expect("verifies"),
            "meta check" => {
                let check = graphbug::aten::meta::check_meta(graph).expect("meta check");
                assert!(check.mismatches.is_empty(), "meta mismatches");
            }
            "default partition" => {
                let d = default_partition(graph, n_out).expect("default partition");
                return (
                    elapsed(t),
                    format!("default saves {} B", d.report.saved_bytes),
                );
            }
            "min-cut partition" => {
                let m =
                    min_cut_rematerialization_partition(graph, n_out, &MinCutOptions::default())
                        .expect("min-cut partition");
                return (
                    elapsed(t),
                    format!("min-cut saves {} B", m.report.saved_bytes),
                );
            }
            "minify contains" => {
                let mut contains = Contains::parse("aten.gelu_backward.default").expect("op list");
                let m = minify(graph, &mut contains, &MinifyOptions::default(), &mut NoSink)
                    .expect("minifies");
                assert_eq!(m.stats.end_nodes, 1);
                return (elapsed(t), format!("minify: {} queries", m.stats.queries));
            }
            other => unreachable!("stage {other}"),
        }
        (elapsed(t), String::new())
    }
}

/// Seconds since `t`.
fn elapsed(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

/// Rounds of each stage at each size.
const ROUNDS: usize = 3;

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
    let layers_for = |target: usize| (target / per_layer).max(1);
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    // The smallest size stays, so that each stage at a larger size is timed in rounds
    // interleaved with the same stage at the smallest (both meet the same machine).
    let smallest = Prepared::new(layers_for(10_000));
    let mut largest: Option<(usize, Vec<Ratio>)> = None;
    // The largest peak of any stage, and the stage.
    let mut peak = (0u64, "");
    for target in [10_000usize, 100_000, 1_000_000] {
        if target > max_nodes {
            break;
        }
        let started = Instant::now();
        let owned = (target > 10_000).then(|| Prepared::new(layers_for(target)));
        let here = owned.as_ref().unwrap_or(&smallest);
        let nodes = here.nodes();
        let built = started.elapsed().as_secs_f64();
        reset_peak();
        let holding = peak_rss();
        let (mut us, mut ratios, mut notes) = (Vec::new(), Vec::new(), Vec::new());
        for stage in STAGES {
            reset_peak();
            let (mut times, mut per_round) = (Vec::new(), Vec::new());
            for round in 0..ROUNDS {
                let at = |p: &Prepared| {
                    let (t, note) = p.run(stage);
                    (t * 1e6 / p.nodes() as f64, note)
                };
                let ((t, note), (t0, _)) = if round % 2 == 0 {
                    let a = at(here);
                    (a, at(&smallest))
                } else {
                    let b = at(&smallest);
                    (at(here), b)
                };
                times.push(t);
                per_round.push(t / t0);
                if round == 0 && !note.is_empty() {
                    notes.push(note);
                }
            }
            let p = peak_rss();
            if p > peak.0 {
                peak = (p, stage);
            }
            times.sort_by(f64::total_cmp);
            us.push(times[ROUNDS / 2]);
            ratios.push(Ratio::of(&mut per_round));
        }
        let shown: Vec<String> = STAGES
            .iter()
            .zip(&us)
            .map(|(stage, t)| format!("{stage} {t:.3}"))
            .collect();
        println!(
            "{:>5} layers, {nodes:>8} nodes (built in {built:.1} s; the process holding it: {:.2} GiB), µs/node (median of {ROUNDS} rounds): {}; {}; largest peak memory {:.2} GiB ({})",
            layers_for(target),
            gib(holding),
            shown.join(", "),
            notes.join(", "),
            gib(peak.0),
            peak.1,
        );
        if target > 10_000 {
            largest = Some((nodes, ratios));
        }
    }
    let mut targets = Targets::new("scale");
    if let Some((n1, ratios)) = largest {
        let n0 = smallest.nodes();
        for (stage, ratio) in STAGES.iter().zip(&ratios) {
            let limit = if *stage == "min-cut partition" {
                1.25
            } else {
                2.0
            };
            targets.ratio_at_most(
                &format!("{stage}: µs/node at {n1} nodes / at {n0}"),
                ratio,
                limit,
            );
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

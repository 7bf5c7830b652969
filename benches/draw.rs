//! Benchmark: `graphbug draw` on large graphs. A 48-layer gpt4 forward (2,987 nodes) and
//! its joint graph (7,037 nodes, built by `graphbug joint`) are drawn through the CLI: the
//! forward as SVG, the joint partitioned by the min-cut partitioner as an HTML page
//! (forward and backward laid out by Graphviz, repeated layers folded). Targets: each draw
//! within 5 s (the median of three runs, the partition included), and the joint's page
//! loading in headless Chromium within 2 s (the page's own record of navigation to the
//! load event). For scale, the draw is also given as a ratio of `graphbug partition` of the
//! same joint, the work the picture is made from.

#[path = "../tests/common/browser.rs"]
mod browser;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use graphbug::ir::bench::{Ratio, Targets};
use graphbug::ir::models::{gpt_forward, GptConfig};

/// Runs graphbug with `args`; returns its seconds.
fn graphbug(args: &[&str], stdout: Option<&Path>) -> f64 {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_graphbug"))
        .args(args)
        .output()
        .expect("graphbug runs");
    let seconds = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "graphbug {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if let Some(path) = stdout {
        std::fs::write(path, &out.stdout).expect("output written");
    }
    seconds
}

/// The median of three runs of `f`.
fn median3(mut f: impl FnMut() -> f64) -> f64 {
    let mut t = [f(), f(), f()];
    t.sort_by(f64::total_cmp);
    t[1]
}

fn main() {
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        if !"draw".contains(&filter) {
            return;
        }
    }
    let dir = graphbug::run::scratch::Scratch::new("draw-bench").expect("a scratch directory");
    let p = |name: &str| dir.path().join(name);
    let forward = p("gpt48.py");
    std::fs::write(
        &forward,
        graphbug::ir::print_graph(&gpt_forward(&GptConfig::gpt4_layers(48))),
    )
    .expect("graph written");
    let joint = p("gpt48_joint.py");
    graphbug(&["joint", forward.to_str().unwrap()], Some(&joint));
    let (f, j) = (forward.to_str().unwrap(), joint.to_str().unwrap());
    let nodes = graphbug::ir::parse_graph(&std::fs::read_to_string(&joint).unwrap())
        .expect("the joint reads")
        .nodes
        .len();

    let svg = p("gpt48.svg");
    let forward_s = median3(|| graphbug(&["draw", f, "-o", svg.to_str().unwrap()], None));
    println!("draw, gpt48 forward (2,987 nodes) as SVG: {forward_s:.2} s");
    let page = p("gpt48_joint.html");
    let page_arg = page.to_str().unwrap();
    let draw_joint = || graphbug(&["draw", j, "--partition", "min-cut", "-o", page_arg], None);
    let joint_s = median3(draw_joint);
    println!(
        "draw, gpt48 joint ({nodes} nodes) with the min-cut partition as HTML: {joint_s:.2} s"
    );
    let ratio = Ratio::measure(3, draw_joint, || {
        graphbug(
            &["partition", j, "--partitioner", "min-cut", "--json"],
            None,
        )
    });
    println!("draw --partition min-cut / partition --partitioner min-cut: {ratio}");
    let loaded = browser::load(&page, dir.path());
    assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
    let load_ms = loaded.load_ms.expect("the page records its load time") as f64;
    println!(
        "the joint's page ({} KiB) loads in headless Chromium in {load_ms} ms",
        std::fs::metadata(&page).unwrap().len() / 1024
    );
    let mut targets = Targets::new("draw");
    targets.at_most("draw of the gpt48 forward", forward_s, 5.0, "s");
    targets.at_most(
        "draw of the gpt48 joint, min-cut partition",
        joint_s,
        5.0,
        "s",
    );
    targets.at_most(
        "the joint's page loading in Chromium",
        load_ms,
        2000.0,
        "ms",
    );
    drop(dir);
    targets.finish();
}

//! Benchmark: `same()` on the host (graphbug-accuracy, through `graphbug_aten::accuracy`,
//! copies to the host included) against the tch implementation it replaced
//! (`tests/tch_same`), in interleaved rounds: on gpt4's outputs (PyTorch's stored outputs
//! against the interpreter's, judged by its float64 run) and on a pair of 10M-element
//! float32 tensors, once close (allclose decides) and once not (the float64 rule decides).
//! Target: the host version takes at most 2x the tch version's time on the large pairs.
//! libtorch runs with its default threads, as graphbug runs it; the host version uses one.

#[path = "../tests/tch_same/mod.rs"]
mod tch_same;

use std::collections::HashMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use graphbug_aten::accuracy::{same, SameOptions};
use graphbug_aten::reference::fp64_reference;
use graphbug_aten::Interpreter;
use graphbug_ir::bench::{median_time, Ratio, Targets};
use graphbug_ir::{parse_graph, Device};
use tch::{Kind, Tensor};

const TARGET_RATIO: f64 = 2.0;
const ROUNDS: usize = 7;

/// Median wall time of `f` over `runs` runs, after a warm-up.
fn median(runs: usize, f: impl FnMut()) -> Duration {
    median_time(runs, 2, f)
}

fn fixture(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../tests/fixtures/gpt4")
        .join(file)
}

fn npz(file: &str, prefix: &str) -> Vec<Tensor> {
    let mut named = Tensor::read_npz(fixture(file)).expect("gpt4 fixture reads");
    named.sort_by_key(|(n, _)| n.trim_start_matches(prefix).parse::<usize>().unwrap_or(0));
    named.into_iter().map(|(_, t)| t).collect()
}

/// Times host and tch `same()` on one case in interleaved rounds; prints both medians and
/// the ratio, and returns it.
fn compare(
    what: &str,
    runs: usize,
    reference: &[Tensor],
    result: &[Tensor],
    fp64: Option<&[Tensor]>,
    opts: &SameOptions,
) -> Ratio {
    let host_report = same(reference, result, fp64, opts);
    let tch_report = tch_same::same(reference, result, fp64, opts);
    assert_eq!(
        host_report.to_string(),
        tch_report.to_string(),
        "{what}: the two implementations disagree"
    );
    let host = || {
        median(runs, || {
            black_box(same(reference, result, fp64, opts));
        })
        .as_secs_f64()
    };
    let old = || {
        median(runs, || {
            black_box(tch_same::same(reference, result, fp64, opts));
        })
        .as_secs_f64()
    };
    let ratio = Ratio::measure(ROUNDS, host, old);
    println!(
        "  {what}: host {:.3} ms, tch {:.3} ms per call; host takes {ratio} of tch's time ({})",
        host() * 1e3,
        old() * 1e3,
        host_report.outputs[0].reason
    );
    ratio
}

fn main() {
    println!(
        "accuracy: same() on the host against the tch implementation (libtorch threads: {})",
        tch::get_num_threads()
    );
    // gpt4: PyTorch's stored outputs against the interpreter's, with the float64 run.
    let graph = parse_graph(&std::fs::read_to_string(fixture("forward.py")).unwrap()).unwrap();
    let inputs = npz("inputs.npz", "arg");
    let expected = npz("outputs.npz", "out");
    let cpu = Device::cpu();
    let out: Vec<Tensor> = Interpreter::new(&graph, &cpu, &HashMap::new())
        .unwrap()
        .run(&inputs)
        .unwrap()
        .into_iter()
        .flatten()
        .collect();
    let fp64: Vec<Tensor> = fp64_reference(&graph, &inputs, &cpu, &HashMap::new())
        .unwrap()
        .into_iter()
        .flatten()
        .collect();
    let numel: i64 = out.iter().map(Tensor::numel).map(|n| n as i64).sum();
    let gpt4 = compare(
        &format!("gpt4 ({} outputs, {numel} elements)", out.len()),
        200,
        &expected,
        &out,
        Some(&fp64),
        &SameOptions::repro(),
    );

    // 10M float32 elements: close, then only the float64 rule passes it.
    const N: i64 = 10_000_000;
    tch::manual_seed(0);
    let truth = Tensor::randn([N], (Kind::Double, tch::Device::Cpu));
    let reference = truth.to_kind(Kind::Float);
    let close = &reference + Tensor::randn([N], (Kind::Float, tch::Device::Cpu)) * 1e-6;
    let large_close = compare(
        "10M float32, close",
        5,
        std::slice::from_ref(&reference),
        std::slice::from_ref(&close),
        None,
        &SameOptions::repro(),
    );
    let noisy = &reference + Tensor::randn([N], (Kind::Float, tch::Device::Cpu)) * 1e-2;
    let noisy_ref = &reference + Tensor::randn([N], (Kind::Float, tch::Device::Cpu)) * 1e-2;
    let large_rule = compare(
        "10M float32, float64 rule",
        5,
        std::slice::from_ref(&noisy_ref),
        std::slice::from_ref(&noisy),
        Some(std::slice::from_ref(&truth)),
        &SameOptions::repro(),
    );

    let mut targets = Targets::new("aten_accuracy");
    targets.ratio_at_most(
        "same() on 10M float32, close, of tch's",
        &large_close,
        TARGET_RATIO,
    );
    targets.ratio_at_most(
        "same() on 10M float32, float64 rule, of tch's",
        &large_rule,
        TARGET_RATIO,
    );
    targets.ratio_at_most("same() on gpt4's outputs, of tch's", &gpt4, TARGET_RATIO);
    targets.finish();
}

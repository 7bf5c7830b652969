//! The modelled peak memory of a training step (graphbug-partition's `model_peak`, from
//! annotations, the aliasing libtorch's kernels show on the meta device and the storages
//! its CPU kernels allocate beyond their results) against the peak measured by running it (the
//! interpreter's tally of live storages), on PyTorch's own partitions of the reference models
//! and on every cut of the peak frontier; and the peak budget's choices.

use graphbug_aten::memory::{allocated_on_cpu, measure_step_peak, MeasuredPeak, ObservedAliases};
use graphbug_aten::meta::infer_meta;
use graphbug_ir::schema::{Schema, Schemas};
use graphbug_ir::{parse_graph, Device, Graph, OpName};
use graphbug_partition::{
    choose_by_peak, model_peak, peak_frontier, MinCutOptions, MinCutProblem, PeakBudget, PeakModel,
    SchemaAliases,
};
use graphbug_tests::{fixtures_dir, placeholder_metas, reference_joint};

fn read(model: &str, file: &str) -> Graph {
    parse_graph(&std::fs::read_to_string(fixtures_dir().join(model).join(file)).unwrap()).unwrap()
}

/// Each node's meta as libtorch infers it.
fn inferred_metas(g: &Graph) -> Vec<graphbug_ir::Meta> {
    infer_meta(g)
        .unwrap()
        .nodes
        .into_iter()
        .map(|n| n.meta)
        .collect()
}

fn measure(fw: &Graph, bw: &Graph, n: usize) -> MeasuredPeak {
    let primals =
        graphbug_aten::io::random_tensors(&placeholder_metas(fw), 0, tch::Device::Cpu).unwrap();
    measure_step_peak(fw, bw, n, &primals, &Default::default(), &Device::cpu()).unwrap()
}

/// [`measure`] on the model's own primals where its fixture has them (`inputs.safetensors`,
/// keyed `arg0_1`, `arg1_1`, ... in the primals' order): embedding_bag's offsets must start
/// at 0, which random values do not.
fn measure_model(model: &str, fw: &Graph, bw: &Graph, n: usize) -> MeasuredPeak {
    let file = fixtures_dir().join(model).join("inputs.safetensors");
    if !file.exists() {
        return measure(fw, bw, n);
    }
    let mut named = graphbug_aten::io::read_tensors(&file).unwrap();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let primals: Vec<tch::Tensor> = named.into_iter().map(|(_, t)| t).collect();
    measure_step_peak(fw, bw, n, &primals, &Default::default(), &Device::cpu()).unwrap()
}

fn agree(label: &str, model: &PeakModel, measured: &MeasuredPeak) {
    assert_eq!(
        (model.forward_peak, model.backward_peak, model.peak),
        (measured.forward_peak, measured.backward_peak, measured.peak),
        "{label}: modelled {model:?}, measured {measured:?}"
    );
    assert_eq!(model.sizeless, 0, "{label}");
}

#[test]
fn the_model_is_the_measured_peak_on_pytorchs_partitions() {
    for model in ["mlp", "cnn", "gpt4"] {
        let (_, n) = reference_joint(model);
        for partitioner in ["default", "mincut"] {
            let fw = read(model, &format!("fw_{partitioner}.py"));
            let bw = read(model, &format!("bw_{partitioner}.py"));
            let modelled = model_peak(&fw, &bw, n, &ObservedAliases);
            let label = format!("{model} {partitioner}");
            agree(&label, &modelled, &measure(&fw, &bw, n));
            // The step holds at least its primals, and the backward the saved values too.
            assert!(modelled.forward_peak > modelled.resident, "{label}");
            assert!(
                modelled.backward_peak >= modelled.resident + modelled.saved,
                "{label}"
            );
        }
    }
}

/// Knows no op: every result is a fresh allocation, views included.
struct NoAliases;

impl Schemas for NoAliases {
    fn schema(&self, _: &OpName) -> Option<std::sync::Arc<Schema>> {
        None
    }
}

#[test]
fn a_model_that_ignores_aliasing_is_caught_by_the_measurement() {
    let (_, n) = reference_joint("gpt4");
    let (fw, bw) = (read("gpt4", "fw_mincut.py"), read("gpt4", "bw_mincut.py"));
    let wrong = model_peak(&fw, &bw, n, &SchemaAliases(&NoAliases));
    let measured = measure(&fw, &bw, n);
    // Counting every view as a new tensor overstates the peak: the comparison sees it.
    assert!(wrong.peak > measured.peak, "{wrong:?} {measured:?}");
}

#[test]
fn the_peak_frontier_is_monotonic_measured_and_bounds_the_budget() {
    // zoo_embedding_bag: `_embedding_bag` allocates `offset2bag` beyond the empty result it
    // returns, which only the model's CPU run shows; the joint's carries it to every cut.
    for model in ["gpt4", "cnn", "mlp", "zoo_transformer", "zoo_embedding_bag"] {
        frontier_of(model);
    }
}

/// The frontier of a reference joint, checked; returned.
fn frontier_of(model: &str) -> Vec<graphbug_partition::PeakPoint> {
    let (joint, n) = reference_joint(model);
    let problem = MinCutProblem::new(&joint, n, &MinCutOptions::default()).unwrap();
    let frontier = peak_frontier(&problem, &ObservedAliases, 10).unwrap();
    assert!(!frontier.is_empty());
    for w in frontier.windows(2) {
        assert!(w[0].peak.peak < w[1].peak.peak);
        assert!(w[0].recompute_seconds > w[1].recompute_seconds);
    }
    // Every cut of the frontier runs at the peak the model gives, the peak priced with
    // the joint's aliasing is the one observed on the cut's own graphs, and the peak search
    // found a cut lower than every budget's.
    // The check below sees random ops where they are: the joint computes all its own.
    if model == "zoo_transformer" {
        assert_eq!(problem.recomputed_random_ops(problem.graph()).len(), 10);
    }
    for p in &frontier {
        let part = problem.partition(&p.saved).unwrap();
        let label = format!(
            "{model} at functorch's budget {} ({:?}, {} moves)",
            p.saved_budget, p.family, p.moves
        );
        agree(
            &label,
            &p.peak,
            &measure_model(model, &part.forward, &part.backward, n),
        );
        assert_eq!(
            p.peak,
            model_peak(&part.forward, &part.backward, n, &ObservedAliases),
            "{label}"
        );
        // No cut buys memory by drawing new random values in the backward.
        assert_eq!(
            problem.recomputed_random_ops(&part.backward),
            Vec::<&str>::new(),
            "{label}: the backward recomputes random ops"
        );
    }
    // A lower budget never ends at a higher peak, and the peak never exceeds the limit.
    let (least, optimal) = (
        frontier.first().unwrap().peak.peak,
        frontier.last().unwrap().peak.peak,
    );
    let mut last = 0;
    for k in 0..=20 {
        let f = k as f64 / 20.0;
        let (i, limit) = choose_by_peak(&frontier, PeakBudget::Fraction(f)).unwrap();
        let peak = frontier[i].peak.peak;
        assert!(
            peak <= limit && peak >= last,
            "{f}: {peak} (limit {limit}, before {last})"
        );
        last = peak;
    }
    assert_eq!(last, optimal);
    let (i, _) = choose_by_peak(&frontier, PeakBudget::Bytes(least)).unwrap();
    assert_eq!(frontier[i].peak.peak, least);
    // Below the least peak: an error that says it.
    let err = choose_by_peak(&frontier, PeakBudget::Bytes(least - 1)).unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "least peak of graphbug's cuts (at saved-bytes budgets from 0 to 1, and the peak search's): {least} bytes"
        )),
        "{err}"
    );
    frontier
}

#[test]
fn the_peak_search_goes_below_every_budgets_cut() {
    // zoo/transformer: the budgets' cuts (in every family) bottom out at 51,028 bytes; the
    // search, toggling one node's ban at a time, finds a lower peak, which the measurement
    // confirms (`frontier_of`).
    let frontier = frontier_of("zoo_transformer");
    let least = &frontier[0];
    assert!(least.moves > 0, "{least:?}");
    let (joint, n) = reference_joint("zoo_transformer");
    let problem = MinCutProblem::new(&joint, n, &MinCutOptions::default()).unwrap();
    let search = graphbug_partition::BudgetSearch::new(&problem).unwrap();
    for family in graphbug_partition::CutFamily::ALL {
        for k in 0..=20 {
            let Ok(choice) = search.choose(k as f64 / 20.0, family) else {
                continue;
            };
            let p = problem.partition(&choice.saved).unwrap();
            let peak = model_peak(&p.forward, &p.backward, n, &ObservedAliases).peak;
            assert!(least.peak.peak < peak, "{family:?} budget {k}/20: {peak}");
        }
    }
}

#[test]
fn peak_budgets_parse_as_fractions_or_bytes() {
    let parse = |t: &str| t.parse::<PeakBudget>();
    assert_eq!(parse("0.25"), Ok(PeakBudget::Fraction(0.25)));
    assert_eq!(parse("1.0"), Ok(PeakBudget::Fraction(1.0)));
    assert_eq!(parse("1000"), Ok(PeakBudget::Bytes(1000)));
    assert_eq!(parse("2MiB"), Ok(PeakBudget::Bytes(2 << 20)));
    assert_eq!(parse("1.5GB"), Ok(PeakBudget::Bytes(1_500_000_000)));
    assert!(parse("1.5").unwrap_err().contains("outside 0..=1"));
    assert!(parse("12 parsecs").unwrap_err().contains("unknown unit"));
    assert!(parse("lots").is_err());
}

#[test]
fn memory_a_kernel_allocates_beyond_its_result_is_modelled_measured_and_named() {
    // On CPU mse_loss returns a 0-d view of its elementwise buffer: 80 B held for a 4 B
    // result. No meta kernel shows it; the model sees it in its run on CPU stand-ins, and
    // the measurement counts it and says how much of its peak it is.
    let fw = parse_graph(
        r#"class G(torch.nn.Module):
    def forward(self, x: "f32[4, 5]", y: "f32[4, 5]"):
        mse_loss: "f32[]" = torch.ops.aten.mse_loss.default(x, y)
        return (mse_loss,)
"#,
    )
    .unwrap();
    let bw = parse_graph(
        r#"class G(torch.nn.Module):
    def forward(self, tangents_1: "f32[]"):
        mul: "f32[]" = torch.ops.aten.mul.Tensor(tangents_1, 2)
        return (mul,)
"#,
    )
    .unwrap();
    let model = model_peak(&fw, &bw, 1, &ObservedAliases);
    let measured = measure(&fw, &bw, 1);
    assert_eq!((model.forward_peak, measured.forward_peak), (240, 240));
    assert_eq!(measured.kernel_slack, 76, "{measured:?}");
    let metas = inferred_metas(&fw);
    // Node 2 is mse_loss.
    assert_eq!(
        allocated_on_cpu(&fw, &metas).map(|a| a[2].clone()),
        Some(vec![Some(80)])
    );
    // Without the CPU run, the model counts the results themselves: where they peak.
    struct ResultsOnly;
    impl graphbug_partition::Aliases for ResultsOnly {
        fn shares(&self, graph: &graphbug_ir::Graph) -> graphbug_partition::Shares {
            ObservedAliases.shares(graph)
        }
        fn observe(&self, graph: &graphbug_ir::Graph) -> graphbug_partition::Observation {
            graphbug_partition::Observation {
                allocated: None,
                ..ObservedAliases.observe(graph)
            }
        }
    }
    let results = model_peak(&fw, &bw, 1, &ResultsOnly);
    assert_eq!(results.forward_peak, 164);
    assert_eq!(measured.results_peak, results.peak, "{measured:?}");
    // Where every kernel's storage is its result, there is no slack.
    let (_, n) = reference_joint("gpt4");
    let gpt4 = measure(
        &read("gpt4", "fw_mincut.py"),
        &read("gpt4", "bw_mincut.py"),
        n,
    );
    assert_eq!(
        (gpt4.kernel_slack, gpt4.results_peak),
        (0, gpt4.peak),
        "{gpt4:?}"
    );
}

#[test]
fn the_models_cpu_run_leaves_the_random_generator_as_it_was() {
    // Dropout runs on the stand-ins; numbers drawn after the model are those drawn without it.
    let g = parse_graph(
        r#"class G(torch.nn.Module):
    def forward(self, x: "f32[64]"):
        native_dropout = torch.ops.aten.native_dropout.default(x, 0.5, True)
        getitem: "f32[64]" = native_dropout[0]
        return (getitem,)
"#,
    )
    .unwrap();
    let metas = inferred_metas(&g);
    tch::manual_seed(7);
    let without = tch::Tensor::rand([8], (tch::Kind::Float, tch::Device::Cpu));
    tch::manual_seed(7);
    assert!(allocated_on_cpu(&g, &metas).is_some());
    let with = tch::Tensor::rand([8], (tch::Kind::Float, tch::Device::Cpu));
    assert!(with.equal(&without));
}

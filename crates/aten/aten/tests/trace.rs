//! Numeric traces: summaries that see every kind of change, files that survive a cut-short
//! run, and a diff that names the first diverging node and never calls a wrong value fine.

use graphbug_aten::trace::{
    compare_values, diff, Agreement, TensorSummary, Tolerance, Trace, TraceHeader, TraceSink,
    TraceValue,
};
use graphbug_aten::{Interpreter, RtValue};
use graphbug_ir::{parse_graph, Device};
use tch::{Kind, Tensor};

fn summary(t: &Tensor) -> TraceValue {
    TraceValue::Tensor(TensorSummary::of(t).unwrap())
}

fn agree(a: &Tensor, b: &Tensor) -> Agreement {
    compare_values(&summary(a), &summary(b), &Tolerance::default())
}

fn randn(n: i64) -> Tensor {
    tch::manual_seed(7);
    Tensor::randn([n], (Kind::Float, tch::Device::Cpu))
}

#[test]
fn a_summary_counts_and_samples() {
    let t = Tensor::from_slice(&[1.0f32, f32::NAN, -2.0, f32::INFINITY, 3.0]);
    let s = TensorSummary::of(&t).unwrap();
    assert_eq!((s.nan, s.inf), (1, 1));
    assert_eq!((s.min.unwrap().0, s.max.unwrap().0), (-2.0, 3.0));
    assert!((s.mean.unwrap().0 - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(s.sample.len(), 5);
    assert_eq!(s.shape, [5]);
    // The hash is of the values, not of their layout or device.
    let m = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).reshape([2, 2]);
    assert_eq!(
        TensorSummary::of(&m.tr().contiguous().tr()).unwrap().hash,
        TensorSummary::of(&m).unwrap().hash
    );
    // Complex, bool, int and empty tensors summarize too.
    for t in [
        Tensor::from_slice(&[1.0f32, 2.0]).to_kind(Kind::ComplexFloat),
        Tensor::from_slice(&[true, false]),
        Tensor::from_slice(&[3i64, -4]),
        Tensor::zeros([0, 3], (Kind::Float, tch::Device::Cpu)),
    ] {
        TensorSummary::of(&t).unwrap();
    }
    let empty = TensorSummary::of(&Tensor::zeros([0], (Kind::Float, tch::Device::Cpu))).unwrap();
    assert_eq!((empty.min, empty.mean), (None, None));
}

#[test]
fn comparisons_see_every_kind_of_change() {
    let x = randn(100_000);
    assert_eq!(agree(&x, &x.copy()), Agreement::Identical);
    // Round-off: within tolerance.
    assert_eq!(agree(&x, &(&x * 1.000_000_1)), Agreement::Within);
    // One element off, not at a sampled position, min, max or mean: the projections see it.
    let one = x.copy();
    let _ = one
        .get(12_345)
        .fill_(one.get(12_345).double_value(&[]) + 2.0);
    assert!(matches!(agree(&x, &one), Agreement::Diverged(w) if w.contains("projection")));
    // Two elements swapped: same min, max, mean and samples, different projections.
    let swapped = x.copy();
    let (a, b) = (x.get(10).double_value(&[]), x.get(20).double_value(&[]));
    let _ = swapped.get(10).fill_(b);
    let _ = swapped.get(20).fill_(a);
    assert!(matches!(agree(&x, &swapped), Agreement::Diverged(_)));
    // A NaN, a new shape or dtype, a scalar.
    let nan = x.copy();
    let _ = nan.get(3).fill_(f64::NAN);
    assert!(matches!(agree(&x, &nan), Agreement::Diverged(w) if w.contains("NaN")));
    assert!(matches!(
        agree(&x, &x.reshape([100, 1000])),
        Agreement::Diverged(_)
    ));
    assert!(matches!(
        agree(&x, &x.to_kind(Kind::Double)),
        Agreement::Diverged(_)
    ));
    assert!(matches!(
        compare_values(
            &TraceValue::Int(3),
            &TraceValue::Int(4),
            &Tolerance::default()
        ),
        Agreement::Diverged(_)
    ));
    // A mean near zero is compared at the scale of the values, so round-off passes.
    let centered = Tensor::from_slice(&[1.0f32, -1.0]);
    let nudged = Tensor::from_slice(&[1.000_000_1f32, -1.0]);
    let tight = Tolerance {
        atol: 0.0,
        rtol: 1e-4,
    };
    assert_eq!(
        compare_values(&summary(&centered), &summary(&nudged), &tight),
        Agreement::Within
    );
    // A tolerance of zero calls any change a divergence.
    let exact = Tolerance {
        atol: 0.0,
        rtol: 0.0,
    };
    assert!(matches!(
        compare_values(&summary(&centered), &summary(&nudged), &exact),
        Agreement::Diverged(_)
    ));
}

const GRAPH: &str = r#"class G(torch.nn.Module):
    def forward(self, x: "f32[64]"):
        sin: "f32[64]" = torch.ops.aten.sin.default(x)
        mul: "f32[64]" = torch.ops.aten.mul.Tensor(sin, 2)
        split = torch.ops.aten.split.Tensor(mul, 32)
        getitem: "f32[32]" = split[0]
        getitem_1: "f32[32]" = split[1]
        add: "f32[32]" = torch.ops.aten.add.Tensor(getitem, getitem_1)
        return (add,)
"#;

const WRONG: &str = r#"class G(torch.nn.Module):
    def forward(self, x: "f32[64]"):
        sin: "f32[64]" = torch.ops.aten.sin.default(x)
        mul: "f32[64]" = torch.ops.aten.mul.Tensor(sin, 3)
        split = torch.ops.aten.split.Tensor(mul, 32)
        getitem: "f32[32]" = split[0]
        getitem_1: "f32[32]" = split[1]
        add: "f32[32]" = torch.ops.aten.add.Tensor(getitem, getitem_1)
        return (add,)
"#;

/// Runs `text` on `x`, tracing to `path`; `finish` writes the end line.
fn traced_run(text: &str, x: &Tensor, path: &std::path::Path, finish: bool) {
    let g = parse_graph(text).unwrap();
    let sink = TraceSink::create(
        path,
        TraceHeader {
            backend: "eager".into(),
            ..TraceHeader::default()
        },
    )
    .unwrap();
    Interpreter::new(&g, &Device::cpu(), &Default::default())
        .unwrap()
        .with_trace(Some(sink.clone()))
        .run(&[x.shallow_clone()])
        .unwrap();
    if finish {
        sink.finish("completed").unwrap();
    }
}

#[test]
fn the_diff_names_the_first_diverging_node_and_its_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        dir.path().join("a.jsonl"),
        dir.path().join("b.jsonl"),
        dir.path().join("c.jsonl"),
    );
    let x = randn(64);
    traced_run(GRAPH, &x, &a, true);
    traced_run(WRONG, &x, &b, true);
    let (ta, tb) = (Trace::read(&a).unwrap(), Trace::read(&b).unwrap());
    assert_eq!(ta.outcome.as_deref(), Some("completed"));
    assert_eq!(ta.header.libtorch, graphbug_aten::shim::torch_version());
    // x, sin, mul, split (two items), getitem, getitem_1, add.
    assert_eq!(ta.entries.len(), 8);
    assert_eq!(ta.entries[3].item, Some(0));
    let d = diff(&ta, &tb, &Tolerance::default()).unwrap();
    let first = &d.diverged[0];
    assert_eq!(first.a.node, "mul");
    assert_eq!(d.first_inputs.len(), 1);
    assert_eq!(d.first_inputs[0].0, "sin");
    assert_eq!(d.first_inputs[0].1, Some(Agreement::Identical));
    assert_eq!((d.compared, d.identical), (8, 2));
    let text = d.to_string();
    assert!(
        text.contains("first divergence: graph node `mul`"),
        "{text}"
    );
    assert!(text.contains("input `sin`: identical"), "{text}");
    // Same trace: no divergence; the same input twice: identical.
    let same = diff(&ta, &ta, &Tolerance::default()).unwrap();
    assert!(!same.diverges());
    assert_eq!(same.identical, 8);
    // A run cut short (no end line) says so, and what it never reached.
    traced_run(GRAPH, &x, &c, false);
    let mut cut = Trace::read(&c).unwrap();
    assert_eq!(cut.outcome, None);
    cut.entries.truncate(3);
    let d = diff(&ta, &cut, &Tolerance::default()).unwrap();
    assert!(d.diverged.is_empty());
    assert!(
        d.diverges(),
        "a run cut short is never the same as one that completed"
    );
    assert_eq!(d.only_in_a.len(), 5);
    let ends = d.ended_differently.as_deref().unwrap();
    assert!(
        ends.contains("crashed or was killed after graph `mul`"),
        "{ends}"
    );
    assert!(d
        .to_string()
        .contains("no value diverges, but the runs end differently"));
    // Traces that share nothing cannot be compared.
    cut.entries.clear();
    let err = diff(&ta, &cut, &Tolerance::default()).unwrap_err();
    assert!(err.to_string().contains("share no value"), "{err}");
}

#[test]
fn a_node_recorded_twice_counts_by_its_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let sink = TraceSink::create(&path, TraceHeader::default()).unwrap();
    let x = Tensor::from_slice(&[1.0f32]);
    sink.record("n", "aten::relu.default", &[], &RtValue::Tensor(x.copy()));
    sink.record("n", "aten::relu.default", &[], &RtValue::Tensor(&x + 1.0));
    sink.finish("completed").unwrap();
    let once = TraceSink::create(&dir.path().join("u.jsonl"), TraceHeader::default()).unwrap();
    once.record("n", "aten::relu.default", &[], &RtValue::Tensor(x.copy()));
    once.finish("completed").unwrap();
    let (t, u) = (
        Trace::read(&path).unwrap(),
        Trace::read(&dir.path().join("u.jsonl")).unwrap(),
    );
    let d = diff(&u, &t, &Tolerance::default()).unwrap();
    assert_eq!((d.compared, d.diverged.len()), (1, 1));
}

#[test]
fn bad_trace_files_are_errors_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("", "empty"),
        ("{\"node\":{}}\n", ":1: not a trace line"),
        ("not json\n", ":1: not a trace line"),
        (
            "{\"header\":{\"format\":\"other/9\",\"graph\":\"\",\"backend\":\"\",\"device\":\"\",\"graphbug\":\"\"}}\n",
            "format `other/9`",
        ),
        (
            "{\"header\":{\"format\":\"graphbug-trace/1\",\"graph\":\"\",\"backend\":\"\",\"device\":\"\",\"graphbug\":\"\"}}\n{\"end\":{\"outcome\":\"completed\"}}\n{\"end\":{\"outcome\":\"completed\"}}\n",
            ":3: a line after the end line",
        ),
    ];
    for (k, (text, want)) in cases.iter().enumerate() {
        let p = dir.path().join(format!("{k}.jsonl"));
        std::fs::write(&p, text).unwrap();
        let err = Trace::read(&p).unwrap_err().to_string();
        assert!(err.contains(want), "case {k}: {err}");
    }
    let missing = Trace::read(&dir.path().join("missing.jsonl")).unwrap_err();
    assert!(missing.to_string().contains("missing.jsonl"), "{missing}");
}

#[test]
fn a_graph_is_matched_with_an_aot_forward_by_name_op_and_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let x = Tensor::from_slice(&[1.0f32, -2.0]);
    let relu = "aten::relu.default";
    // Eager traces the graph as given; an AOT pipeline its forward, whose placeholders are
    // named primals_K.
    let eager = TraceSink::create(&dir.path().join("e.jsonl"), TraceHeader::default()).unwrap();
    eager.record("arg0_1", "placeholder", &[], &RtValue::Tensor(x.copy()));
    eager.record("relu", relu, &["arg0_1"], &RtValue::Tensor(x.relu()));
    eager.record(
        "neg",
        "aten::neg.default",
        &["relu"],
        &RtValue::Tensor(-x.relu()),
    );
    eager.finish("completed").unwrap();
    let write_aot = |name: &str, neg_input: &str, neg: Tensor| {
        let sink = TraceSink::create(&dir.path().join(name), TraceHeader::default())
            .unwrap()
            .part("forward");
        sink.record("primals_1", "placeholder", &[], &RtValue::Tensor(x.copy()));
        sink.record("relu", relu, &["primals_1"], &RtValue::Tensor(x.relu()));
        sink.record(
            "neg",
            "aten::neg.default",
            &[neg_input],
            &RtValue::Tensor(neg),
        );
        sink.finish("completed").unwrap();
        Trace::read(&dir.path().join(name)).unwrap()
    };
    let e = Trace::read(&dir.path().join("e.jsonl")).unwrap();
    let same = write_aot("same.jsonl", "relu", -x.relu());
    let d = diff(&e, &same, &Tolerance::default()).unwrap();
    assert_eq!(
        (d.compared, d.identical, d.diverged.len()),
        (3, 3, 0),
        "{d}"
    );
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("placeholders by position")),
        "{d}"
    );
    // A wrong value is caught and named as in the graph given; its input agreed.
    let wrong = write_aot("wrong.jsonl", "relu", x.relu());
    let d = diff(&e, &wrong, &Tolerance::default()).unwrap();
    assert_eq!(d.diverged.len(), 1, "{d}");
    assert_eq!(
        (d.diverged[0].a.node.as_str(), d.diverged[0].b.part.as_str()),
        ("neg", "forward")
    );
    assert_eq!(
        d.first_inputs,
        vec![("relu".to_string(), Some(Agreement::Identical))]
    );
    // The same name over a different computation (another input) is not compared.
    let other = write_aot("other.jsonl", "primals_1", x.relu());
    let d = diff(&e, &other, &Tolerance::default()).unwrap();
    assert_eq!(
        (d.compared, d.diverged.len(), d.not_comparable.len()),
        (2, 0, 1),
        "{d}"
    );
    assert!(
        d.not_comparable[0]
            .1
            .contains("inputs (relu) vs (primals_1)"),
        "{d}"
    );
}

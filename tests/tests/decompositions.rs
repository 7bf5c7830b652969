//! graphbug's decompositions against libtorch: every decomposed op, in small graphs with
//! several shapes, dims and overload arguments in float32 and float64, gives the numbers
//! of the op it replaces, and every meta the decomposition fills is the one libtorch's meta
//! device infers. The reference joint graphs decompose and still compute the same forward
//! outputs and gradients. Random dropout is checked through its definition.

use std::collections::{BTreeMap, HashMap};

use graphbug_aten::io::random_tensors;
use graphbug_aten::meta::infer_meta;
use graphbug_aten::Interpreter;
use graphbug_autodiff::{decompose, DecompositionSet};
use graphbug_ir::{parse_graph, print_graph, Device, Graph, Meta, NodeKind, Value};
use graphbug_tests::{joint_inputs, placeholder_metas, reference_joint, relative_error};
use tch::{Kind, Tensor};

/// The largest relative error allowed for results of this kind.
fn tolerance(kind: Kind) -> f64 {
    match kind {
        Kind::Double => 1e-12,
        Kind::Half | Kind::BFloat16 => 2e-3,
        _ => 1e-5,
    }
}

fn run(label: &str, g: &Graph, inputs: &[Tensor]) -> Vec<Option<Tensor>> {
    let inputs: Vec<Tensor> = inputs.iter().map(Tensor::shallow_clone).collect();
    Interpreter::new(g, &Device::cpu(), &HashMap::new())
        .unwrap_or_else(|e| panic!("{label}: interpreter for `{}`: {e}", g.name))
        .run(&inputs)
        .unwrap_or_else(|e| panic!("{label}: running `{}`: {e}\n{}", g.name, print_graph(g)))
}

/// Every meta the decomposed graph carries is what libtorch infers on the meta device.
fn check_metas(label: &str, d: &Graph) {
    let inferred = infer_meta(d).unwrap_or_else(|e| panic!("{label}: infer_meta: {e}"));
    for (ours, theirs) in d.nodes.iter().zip(&inferred.nodes) {
        let ok = match (&ours.meta, &theirs.meta) {
            (Meta::Tensor(a), Meta::Tensor(b)) => a == b,
            (Meta::Multi(a), Meta::Multi(b)) => a
                .iter()
                .enumerate()
                .all(|(k, m)| m.is_none() || b.get(k) == Some(m)),
            (Meta::Unknown, _) => panic!("{label}: `{}` has no meta", ours.name),
            _ => false,
        };
        assert!(
            ok,
            "{label}: `{}` is annotated {:?}, libtorch infers {:?}\n{}",
            ours.name,
            ours.meta,
            theirs.meta,
            print_graph(d)
        );
    }
}

/// The largest relative error of each dtype of floating-point results.
type Worst = BTreeMap<&'static str, f64>;

fn dtype_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Float => "f32",
        Kind::Double => "f64",
        Kind::Half => "f16",
        Kind::BFloat16 => "bf16",
        _ => "other",
    }
}

fn merge(into: &mut Worst, from: &Worst) {
    for (&k, &e) in from {
        let w = into.entry(k).or_insert(0.0);
        *w = w.max(e);
    }
}

fn show(worst: &Worst) -> String {
    let parts: Vec<String> = worst.iter().map(|(k, e)| format!("{k} {e:.1e}")).collect();
    parts.join(", ")
}

/// Compares the outputs of two runs: floating-point ones within `tolerance`, others
/// exactly. Returns the largest relative error of each dtype.
fn compare_outputs(label: &str, ours: &[Option<Tensor>], theirs: &[Option<Tensor>]) -> Worst {
    assert_eq!(ours.len(), theirs.len(), "{label}: number of outputs");
    let mut worst = Worst::new();
    for (k, (a, b)) in ours.iter().zip(theirs).enumerate() {
        match (a, b) {
            (Some(a), Some(b)) => {
                assert_eq!(a.kind(), b.kind(), "{label}: output {k} dtype");
                assert_eq!(a.size(), b.size(), "{label}: output {k} shape");
                if a.is_floating_point() {
                    let e = relative_error(a, b);
                    assert!(
                        e <= tolerance(b.kind()),
                        "{label}: output {k}: relative error {e:e}"
                    );
                    merge(&mut worst, &Worst::from([(dtype_name(b.kind()), e)]));
                } else {
                    assert!(a.equal(b), "{label}: output {k} differs");
                }
            }
            (None, None) => {}
            _ => panic!("{label}: output {k} is None in one graph only"),
        }
    }
    worst
}

/// Decomposes `g` with `set`, checks the result, and compares it with `g` on `inputs`.
fn compare_decomposed(label: &str, g: &Graph, set: &DecompositionSet, inputs: &[Tensor]) -> Worst {
    compare_against(label, g, g, set, inputs)
}

/// As `compare_decomposed`, libtorch running `reference`, a graph computing what `g` does
/// (for the calls libtorch's CPU kernels refuse).
fn compare_against(
    label: &str,
    g: &Graph,
    reference: &Graph,
    set: &DecompositionSet,
    inputs: &[Tensor],
) -> Worst {
    let d = decompose(g, set).unwrap_or_else(|e| panic!("{label}: decompose: {e}"));
    d.verify().expect("the decomposed graph verifies");
    let left: Vec<String> = d
        .nodes
        .iter()
        .filter_map(|n| {
            n.op()
                .filter(|op| set.decomposes(op))
                .map(|op| op.to_string())
        })
        .collect();
    assert!(left.is_empty(), "{label}: still there: {left:?}");
    check_metas(label, &d);
    compare_outputs(
        label,
        &run(label, &d, inputs),
        &run(label, reference, inputs),
    )
}

/// A graph from `inputs` (name, annotation) and body lines `name = torch.ops.aten...`,
/// annotated by libtorch's meta inference.
fn graph(name: &str, inputs: &[(&str, String)], body: &[String], outputs: &[&str]) -> Graph {
    let params: Vec<String> = inputs
        .iter()
        .map(|(n, a)| format!("{n}: \"{a}\""))
        .collect();
    let mut text = format!(
        "class {name}(torch.nn.Module):\n    def forward(self, {}):\n",
        params.join(", ")
    );
    for line in body {
        text.push_str(&format!("        {line}\n"));
    }
    text.push_str(&format!("        return ({},)\n", outputs.join(", ")));
    let g = parse_graph(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
    infer_meta(&g).unwrap_or_else(|e| panic!("{name}: infer_meta: {e}\n{text}"))
}

fn ann(dtype: &str, shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("{dtype}[{}]", dims.join(", "))
}

const DTYPES: [&str; 2] = ["f32", "f64"];

/// Runs every case of one op: decomposing only that op, and with every decomposition.
/// Prints the worst relative error of each result dtype.
fn check_op(op: &str, cases: &[(String, Graph)], seed: u64) {
    let with_references: Vec<(String, Graph, Graph)> = cases
        .iter()
        .map(|(l, g)| (l.clone(), g.clone(), g.clone()))
        .collect();
    check_op_against(op, &with_references, seed);
}

/// As `check_op`, each case (label, graph, reference) run against its reference graph.
fn check_op_against(op: &str, cases: &[(String, Graph, Graph)], seed: u64) {
    let only = DecompositionSet::select([op]).expect("a known op");
    let mut worst = Worst::new();
    for (k, (label, g, reference)) in cases.iter().enumerate() {
        let inputs = random_tensors(&placeholder_metas(g), seed + k as u64, tch::Device::Cpu)
            .expect("random inputs");
        for (which, set) in [("only", &only), ("all", &DecompositionSet::all())] {
            let label = format!("{op} {label} ({which})");
            merge(
                &mut worst,
                &compare_against(&label, g, reference, set, &inputs),
            );
        }
    }
    println!(
        "worst relative error of {op} over {} graphs: {}",
        cases.len(),
        show(&worst)
    );
}

#[test]
fn gelu_and_gelu_backward() {
    let mut fwd = Vec::new();
    let mut bwd = Vec::new();
    for dt in DTYPES {
        for shape in [&[7][..], &[3, 5], &[2, 3, 4]] {
            let a = ann(dt, shape);
            fwd.push((
                a.clone(),
                graph(
                    "Gelu",
                    &[("x", a.clone())],
                    &[
                        "gelu = torch.ops.aten.gelu.default(x)".into(),
                        "gelu_1 = torch.ops.aten.gelu.default(x, approximate = 'tanh')".into(),
                        "gelu_2 = torch.ops.aten.gelu.default(x, approximate = 'none')".into(),
                    ],
                    &["gelu", "gelu_1", "gelu_2"],
                ),
            ));
            bwd.push((
                a.clone(),
                graph(
                    "GeluBackward",
                    &[("g", a.clone()), ("x", a.clone())],
                    &[
                        "gelu_backward = torch.ops.aten.gelu_backward.default(g, x)".into(),
                        "gelu_backward_1 = torch.ops.aten.gelu_backward.default(g, x, approximate = 'tanh')".into(),
                    ],
                    &["gelu_backward", "gelu_backward_1"],
                ),
            ));
        }
    }
    check_op("aten::gelu.default", &fwd, 100);
    check_op("aten::gelu_backward.default", &bwd, 200);
}

#[test]
fn silu_sigmoid_tanh_and_threshold_backward() {
    let mut cases: HashMap<&str, Vec<(String, Graph)>> = HashMap::new();
    for dt in DTYPES {
        for shape in [&[9][..], &[4, 6], &[2, 3, 5]] {
            let a = ann(dt, shape);
            let inputs = [("g", a.clone()), ("x", a.clone())];
            let mut add = |op: &'static str, body: Vec<String>, outs: &[&str]| {
                cases
                    .entry(op)
                    .or_default()
                    .push((a.clone(), graph("Pointwise", &inputs, &body, outs)));
            };
            add(
                "aten::silu.default",
                vec!["silu = torch.ops.aten.silu.default(x)".into()],
                &["silu"],
            );
            add(
                "aten::silu_backward.default",
                vec!["silu_backward = torch.ops.aten.silu_backward.default(g, x)".into()],
                &["silu_backward"],
            );
            add(
                "aten::sigmoid_backward.default",
                vec![
                    "sigmoid = torch.ops.aten.sigmoid.default(x)".into(),
                    "sigmoid_backward = torch.ops.aten.sigmoid_backward.default(g, sigmoid)".into(),
                ],
                &["sigmoid_backward"],
            );
            add(
                "aten::tanh_backward.default",
                vec![
                    "tanh = torch.ops.aten.tanh.default(x)".into(),
                    "tanh_backward = torch.ops.aten.tanh_backward.default(g, tanh)".into(),
                ],
                &["tanh_backward"],
            );
            add(
                "aten::threshold_backward.default",
                vec![
                    "relu = torch.ops.aten.relu.default(x)".into(),
                    "threshold_backward = torch.ops.aten.threshold_backward.default(g, relu, 0)"
                        .into(),
                    "threshold_backward_1 = torch.ops.aten.threshold_backward.default(g, x, 0.25)"
                        .into(),
                    "threshold_backward_2 = torch.ops.aten.threshold_backward.default(g, x, -1)"
                        .into(),
                ],
                &[
                    "threshold_backward",
                    "threshold_backward_1",
                    "threshold_backward_2",
                ],
            );
        }
    }
    let mut ops: Vec<_> = cases.into_iter().collect();
    ops.sort_by(|a, b| a.0.cmp(b.0));
    for (k, (op, cases)) in ops.iter().enumerate() {
        check_op(op, cases, 300 + 10 * k as u64);
    }
}

#[test]
fn softmax_and_log_softmax_with_their_backwards() {
    let mut fwd = Vec::new();
    let mut log_fwd = Vec::new();
    let mut bwd = Vec::new();
    let mut log_bwd = Vec::new();
    for dt in DTYPES {
        let dtype = if dt == "f32" {
            "torch.float32"
        } else {
            "torch.float64"
        };
        for (shape, dims) in [
            (&[7][..], &[0, -1][..]),
            (&[4, 6], &[0, 1, -1]),
            (&[2, 3, 5], &[0, 1, 2, -2]),
        ] {
            let a = ann(dt, shape);
            for &dim in dims {
                let label = format!("{a} dim {dim}");
                let inputs = [("x", a.clone()), ("g", a.clone())];
                fwd.push((
                    label.clone(),
                    graph(
                        "Softmax",
                        &inputs,
                        &[format!(
                            "_softmax = torch.ops.aten._softmax.default(x, {dim}, False)"
                        )],
                        &["_softmax"],
                    ),
                ));
                log_fwd.push((
                    label.clone(),
                    graph(
                        "LogSoftmax",
                        &inputs,
                        &[format!(
                            "_log_softmax = torch.ops.aten._log_softmax.default(x, {dim}, False)"
                        )],
                        &["_log_softmax"],
                    ),
                ));
                bwd.push((
                    label.clone(),
                    graph(
                        "SoftmaxBackward",
                        &inputs,
                        &[
                            format!("_softmax = torch.ops.aten._softmax.default(x, {dim}, False)"),
                            format!("_softmax_backward_data = torch.ops.aten._softmax_backward_data.default(g, _softmax, {dim}, {dtype})"),
                        ],
                        &["_softmax_backward_data"],
                    ),
                ));
                log_bwd.push((
                    label.clone(),
                    graph(
                        "LogSoftmaxBackward",
                        &inputs,
                        &[
                            format!("_log_softmax = torch.ops.aten._log_softmax.default(x, {dim}, False)"),
                            format!("_log_softmax_backward_data = torch.ops.aten._log_softmax_backward_data.default(g, _log_softmax, {dim}, {dtype})"),
                        ],
                        &["_log_softmax_backward_data"],
                    ),
                ));
            }
        }
    }
    // A causal mask of -inf, as attention has it.
    let masked = graph(
        "MaskedSoftmax",
        &[("x", ann("f32", &[2, 4, 4])), ("m", ann("b8", &[4, 4]))],
        &[
            "ones = torch.ops.aten.ones.default([4, 4], dtype = torch.bool, device = device(type='cpu'), pin_memory = False)".into(),
            "tril = torch.ops.aten.tril.default(ones)".into(),
            "bitwise_not = torch.ops.aten.bitwise_not.default(tril)".into(),
            "masked_fill = torch.ops.aten.masked_fill.Scalar(x, bitwise_not, -inf)".into(),
            "_softmax = torch.ops.aten._softmax.default(masked_fill, -1, False)".into(),
            "_log_softmax = torch.ops.aten._log_softmax.default(x, -1, False)".into(),
        ],
        &["_softmax", "_log_softmax"],
    );
    fwd.push(("f32[2, 4, 4] masked".into(), masked.clone()));
    // float16: computed in float32; half_to_float keeps the float32 result. libtorch's CPU
    // kernel refuses half_to_float, so the reference converts first.
    let mut half = Vec::new();
    let mut half_log = Vec::new();
    for (dim, htf) in [(1, true), (0, true), (-1, false), (0, false)] {
        let label = format!("f16[3, 8] dim {dim} half_to_float {htf}");
        let inputs = [("x", ann("f16", &[3, 8]))];
        for (op, cases) in [("_softmax", &mut half), ("_log_softmax", &mut half_log)] {
            let py = if htf { "True" } else { "False" };
            let g = graph(
                "Half",
                &inputs,
                &[format!(
                    "{op} = torch.ops.aten.{op}.default(x, {dim}, {py})"
                )],
                &[op],
            );
            let reference = if htf {
                graph(
                    "HalfReference",
                    &inputs,
                    &[
                        "_to_copy = torch.ops.aten._to_copy.default(x, dtype = torch.float32)"
                            .into(),
                        format!("{op} = torch.ops.aten.{op}.default(_to_copy, {dim}, False)"),
                    ],
                    &[op],
                )
            } else {
                g.clone()
            };
            cases.push((label.clone(), g, reference));
        }
    }
    check_op("aten::_softmax.default", &fwd, 400);
    check_op("aten::_log_softmax.default", &log_fwd, 500);
    check_op_against("aten::_softmax.default", &half, 450);
    check_op_against("aten::_log_softmax.default", &half_log, 550);
    check_op("aten::_softmax_backward_data.default", &bwd, 600);
    check_op("aten::_log_softmax_backward_data.default", &log_bwd, 700);
}

#[test]
fn layer_norm_and_its_backward() {
    let mut fwd = Vec::new();
    let mut bwd = Vec::new();
    for dt in DTYPES {
        for (shape, normalized) in [
            (&[4, 6][..], &[6][..]),
            (&[2, 3, 4], &[4]),
            (&[2, 3, 4], &[3, 4]),
            (&[5], &[5]),
        ] {
            let a = ann(dt, shape);
            let wa = ann(dt, normalized);
            let ns = format!("{normalized:?}");
            let inputs = [
                ("x", a.clone()),
                ("w", wa.clone()),
                ("b", wa.clone()),
                ("g", a.clone()),
            ];
            for (weight, bias) in [("w", "b"), ("None", "None"), ("w", "None"), ("None", "b")] {
                let label = format!("{a} normalized {ns} weight {weight} bias {bias}");
                let forward = format!(
                    "native_layer_norm = torch.ops.aten.native_layer_norm.default(x, {ns}, {weight}, {bias}, 1e-05)"
                );
                let items = [
                    "getitem = native_layer_norm[0]".to_string(),
                    "getitem_1 = native_layer_norm[1]".to_string(),
                    "getitem_2 = native_layer_norm[2]".to_string(),
                ];
                let mut body = vec![forward.clone()];
                body.extend(items.iter().cloned());
                fwd.push((
                    label.clone(),
                    graph(
                        "LayerNorm",
                        &inputs,
                        &body,
                        &["getitem", "getitem_1", "getitem_2"],
                    ),
                ));
                for mask in [
                    [true, true, true],
                    [true, false, false],
                    [false, true, true],
                ] {
                    // Autograd asks for no gradient of an absent weight or bias, and
                    // libtorch cannot run a graph that does; the graph under test asks
                    // anyway, and its decomposition must leave that gradient undefined.
                    let defined = [
                        mask[0],
                        mask[1] && weight != "None",
                        mask[2] && bias != "None",
                    ];
                    if !defined.contains(&true) {
                        continue;
                    }
                    let py = |m: [bool; 3]| m.map(|b| if b { "True" } else { "False" }).join(", ");
                    let mut body = vec![forward.clone()];
                    body.extend(items.iter().cloned());
                    body.push(format!(
                        "native_layer_norm_backward = torch.ops.aten.native_layer_norm_backward.default(g, x, {ns}, getitem_1, getitem_2, {weight}, {bias}, [{}])",
                        py(defined)
                    ));
                    let mut outs = Vec::new();
                    for (k, name) in ["getitem_3", "getitem_4", "getitem_5"].iter().enumerate() {
                        if defined[k] {
                            body.push(format!("{name} = native_layer_norm_backward[{k}]"));
                            outs.push(*name);
                        }
                    }
                    let reference = graph("LayerNormBackward", &inputs, &body, &outs);
                    let mut g = reference.clone();
                    let id = g
                        .find("native_layer_norm_backward")
                        .expect("the backward node");
                    if let NodeKind::Call { args, .. } = &mut g.nodes[id.index()].kind {
                        args[7] = Value::List(mask.iter().map(|&b| Value::Bool(b)).collect());
                    }
                    bwd.push((format!("{label} mask {mask:?}"), g, reference));
                }
            }
        }
    }
    check_op("aten::native_layer_norm.default", &fwd, 800);
    check_op_against("aten::native_layer_norm_backward.default", &bwd, 900);
}

#[test]
fn addmm_with_beta_and_alpha() {
    let mut cases = Vec::new();
    for dt in DTYPES {
        for (n, k, p) in [(3, 4, 5), (1, 7, 2), (6, 1, 3)] {
            for bias in [vec![p], vec![n, p], vec![1, p]] {
                for extra in [
                    "",
                    ", beta = 0.5, alpha = 2",
                    ", beta = 0",
                    ", alpha = -1.5",
                    ", beta = 2",
                ] {
                    let label = format!("{dt} [{n}, {k}] @ [{k}, {p}] + {bias:?}{extra}");
                    cases.push((
                        label,
                        graph(
                            "Addmm",
                            &[
                                ("b", ann(dt, &bias)),
                                ("x", ann(dt, &[n, k])),
                                ("w", ann(dt, &[p, k])),
                            ],
                            &[
                                "t = torch.ops.aten.t.default(w)".into(),
                                format!("addmm = torch.ops.aten.addmm.default(b, x, t{extra})"),
                            ],
                            &["addmm"],
                        ),
                    ));
                }
            }
        }
    }
    check_op("aten::addmm.default", &cases, 1000);
}

#[test]
fn dropout_backward_losses_rsub_and_var_mean() {
    let mut dropout_bwd = Vec::new();
    let mut mse = Vec::new();
    let mut mse_bwd = Vec::new();
    let mut rsub = Vec::new();
    let mut var_mean = Vec::new();
    for dt in DTYPES {
        for shape in [&[8][..], &[3, 4], &[2, 3, 4]] {
            let a = ann(dt, shape);
            dropout_bwd.push((
                a.clone(),
                graph(
                    "DropoutBackward",
                    &[("g", a.clone()), ("m", ann("b8", shape))],
                    &[
                        "native_dropout_backward = torch.ops.aten.native_dropout_backward.default(g, m, 1.25)".into(),
                        "native_dropout_backward_1 = torch.ops.aten.native_dropout_backward.default(g, m, 1.0)".into(),
                    ],
                    &["native_dropout_backward", "native_dropout_backward_1"],
                ),
            ));
            mse.push((
                a.clone(),
                graph(
                    "MseLoss",
                    &[("x", a.clone()), ("y", a.clone())],
                    &[
                        "mse_loss = torch.ops.aten.mse_loss.default(x, y)".into(),
                        "mse_loss_1 = torch.ops.aten.mse_loss.default(x, y, 0)".into(),
                        "mse_loss_2 = torch.ops.aten.mse_loss.default(x, y, 2)".into(),
                    ],
                    &["mse_loss", "mse_loss_1", "mse_loss_2"],
                ),
            ));
            mse_bwd.push((
                a.clone(),
                graph(
                    "MseLossBackward",
                    &[("x", a.clone()), ("y", a.clone()), ("g", ann(dt, &[])), ("h", a.clone())],
                    &[
                        "mse_loss_backward = torch.ops.aten.mse_loss_backward.default(g, x, y, 1)".into(),
                        "mse_loss_backward_1 = torch.ops.aten.mse_loss_backward.default(g, x, y, 2)".into(),
                        "mse_loss_backward_2 = torch.ops.aten.mse_loss_backward.default(h, x, y, 0)".into(),
                    ],
                    &["mse_loss_backward", "mse_loss_backward_1", "mse_loss_backward_2"],
                ),
            ));
            let last = *shape.last().expect("non-empty shape");
            rsub.push((
                a.clone(),
                graph(
                    "Rsub",
                    &[("x", a.clone()), ("y", ann(dt, &[last]))],
                    &[
                        "rsub = torch.ops.aten.rsub.Scalar(x, 1)".into(),
                        "rsub_1 = torch.ops.aten.rsub.Scalar(x, 2.5, 3)".into(),
                        "rsub_2 = torch.ops.aten.rsub.Tensor(x, y)".into(),
                        "rsub_3 = torch.ops.aten.rsub.Tensor(y, x, alpha = 0.5)".into(),
                    ],
                    &["rsub", "rsub_1", "rsub_2", "rsub_3"],
                ),
            ));
            let n = shape.len() as i64;
            for (dims, extra) in [
                (format!("[{}]", n - 1), ", correction = 0, keepdim = True"),
                ("[0]".to_string(), ""),
                ("None".to_string(), ", correction = 0"),
                (
                    if n > 1 { "[0, -1]" } else { "[0]" }.to_string(),
                    ", keepdim = True",
                ),
                ("[-1]".to_string(), ", correction = 2"),
            ] {
                var_mean.push((
                    format!("{a} dims {dims}{extra}"),
                    graph(
                        "VarMean",
                        &[("x", a.clone())],
                        &[
                            format!(
                                "var_mean = torch.ops.aten.var_mean.correction(x, {dims}{extra})"
                            ),
                            "getitem = var_mean[0]".into(),
                            "getitem_1 = var_mean[1]".into(),
                        ],
                        &["getitem", "getitem_1"],
                    ),
                ));
            }
        }
    }
    check_op("aten::native_dropout_backward.default", &dropout_bwd, 1100);
    check_op("aten::mse_loss.default", &mse, 1200);
    check_op("aten::mse_loss_backward.default", &mse_bwd, 1300);
    check_op("aten::rsub", &rsub, 1400);
    check_op("aten::var_mean.correction", &var_mean, 1500);
}

fn dropout_graph(dt: &str, shape: &[i64], p: &str, train: &str) -> Graph {
    graph(
        "Dropout",
        &[("x", ann(dt, shape))],
        &[
            format!("native_dropout = torch.ops.aten.native_dropout.default(x, {p}, {train})"),
            "getitem = native_dropout[0]".into(),
            "getitem_1 = native_dropout[1]".into(),
        ],
        &["getitem", "getitem_1", "x"],
    )
}

#[test]
fn dropout_without_randomness_is_exact() {
    let set = DecompositionSet::select(["native_dropout"]).unwrap();
    let mut worst = Worst::new();
    for dt in DTYPES {
        for shape in [&[10][..], &[3, 7]] {
            for (p, train) in [
                ("0.0", "True"),
                ("1.0", "True"),
                ("0.5", "False"),
                ("0.0", "False"),
            ] {
                let g = dropout_graph(dt, shape, p, train);
                let inputs = random_tensors(&placeholder_metas(&g), 7, tch::Device::Cpu).unwrap();
                let label = format!("native_dropout {dt}{shape:?} p={p} train={train}");
                let e = compare_decomposed(&label, &g, &set, &inputs);
                assert!(e.values().all(|&e| e == 0.0), "{label}: exact");
                merge(&mut worst, &e);
            }
        }
    }
    println!(
        "worst relative error of aten::native_dropout.default (p = 0, p = 1, eval): {}",
        show(&worst)
    );
}

#[test]
fn dropout_keeps_one_minus_p_and_rescales() {
    let set = DecompositionSet::select(["native_dropout"]).unwrap();
    for (dt, p) in [("f32", 0.3), ("f64", 0.1), ("f32", 0.75)] {
        let shape = [1000, 1000];
        let g = dropout_graph(dt, &shape, &p.to_string(), "True");
        let d = decompose(&g, &set).unwrap();
        check_metas("dropout", &d);
        let inputs = random_tensors(&placeholder_metas(&g), 11, tch::Device::Cpu).unwrap();
        tch::manual_seed(5);
        let ours = run("dropout", &d, &inputs);
        let (out, mask, x) = (
            ours[0].as_ref().unwrap(),
            ours[1].as_ref().unwrap(),
            ours[2].as_ref().unwrap(),
        );
        assert_eq!(mask.kind(), Kind::Bool);
        let expected = x * mask.to_kind(x.kind()) / (1.0 - p);
        let e = relative_error(out, &expected);
        assert!(
            e <= tolerance(x.kind()) * 10.0,
            "{dt} p={p}: out vs x * mask / (1 - p): {e:e}"
        );
        let keep = mask
            .to_kind(Kind::Double)
            .mean(Kind::Double)
            .double_value(&[]);
        assert!(
            (keep - (1.0 - p)).abs() < 0.005,
            "{dt} p={p}: keep rate {keep}"
        );
        // libtorch's own dropout keeps the same share.
        let theirs = run("dropout", &g, &inputs);
        let their_keep = theirs[1]
            .as_ref()
            .unwrap()
            .to_kind(Kind::Double)
            .mean(Kind::Double)
            .double_value(&[]);
        assert!(
            (their_keep - keep).abs() < 0.01,
            "{dt} p={p}: {their_keep} vs {keep}"
        );
        println!("native_dropout {dt} p={p}: keep rate {keep}, out vs x * mask / (1 - p) {e:e}");
    }
}

/// Decomposes a reference joint graph and compares it with the original.
fn check_joint(model: &str, seed: u64) {
    let (g, _) = reference_joint(model);
    let inputs = joint_inputs(model, &g, seed);
    let e = compare_decomposed(
        &format!("{model} joint"),
        &g,
        &DecompositionSet::default(),
        &inputs,
    );
    let all = compare_decomposed(
        &format!("{model} joint (all)"),
        &g,
        &DecompositionSet::all(),
        &inputs,
    );
    println!(
        "{model} joint: worst relative error {} (default set), {} (all)",
        show(&e),
        show(&all)
    );
}

#[test]
fn mlp_joint_decomposes_to_the_same_gradients() {
    check_joint("mlp", 21);
}

#[test]
fn cnn_joint_decomposes_to_the_same_gradients() {
    check_joint("cnn", 22);
}

#[test]
fn gpt4_joint_decomposes_to_the_same_gradients() {
    check_joint("gpt4", 23);
}

//! Property: any graph the builder makes prints to text that parses back to the same graph,
//! and survives JSON.

use graphbug_ir::{
    parse_graph, print_graph, Device, Dtype, Graph, GraphBuilder, Layout, MemoryFormat, Meta,
    OpName, TensorMeta, TensorRef, Value,
};
use proptest::prelude::*;

/// A constant argument (no node references).
fn constant() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Value::Int),
        any::<f64>().prop_map(Value::Float),
        prop_oneof![
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(f64::NAN),
            Just(-0.0)
        ]
        .prop_map(Value::Float),
        (any::<f64>(), any::<f64>()).prop_map(|(re, im)| Value::Complex(re, im)),
        prop_oneof![
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(f64::NAN),
            Just(-0.0),
            Just(0.0),
            Just(1.0)
        ]
        .prop_flat_map(|re| prop_oneof![
            Just(Value::Complex(re, f64::INFINITY)),
            Just(Value::Complex(re, f64::NAN)),
            Just(Value::Complex(re, -0.0)),
            Just(Value::Complex(re, 0.0))
        ]),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::None),
        "\\PC{0,8}".prop_map(Value::Str),
        (0..Dtype::ALL.len()).prop_map(|i| Value::Dtype(Dtype::ALL[i])),
        (0u32..4).prop_map(|i| Value::Device(Device::cuda(i))),
        Just(Value::Device(Device::cpu())),
        Just(Value::MemoryFormat(MemoryFormat::ChannelsLast)),
        Just(Value::Layout(Layout::Strided)),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::List),
            prop::collection::vec(inner, 0..4).prop_map(Value::Tuple),
        ]
    })
}

#[derive(Debug, Clone)]
enum Step {
    /// Call `op` on earlier values picked by index, plus constants and kwargs.
    Call {
        op: usize,
        inputs: Vec<usize>,
        consts: Vec<Value>,
        kwargs: Vec<Value>,
        meta: Option<Vec<i64>>,
    },
    /// A two-output call read by getitems.
    Multi { input: usize, take: Vec<usize> },
}

const OPS: [&str; 5] = ["add", "mul", "relu", "sum", "foo_bar"];

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (
            0..OPS.len(),
            prop::collection::vec(any::<usize>(), 0..3),
            prop::collection::vec(constant(), 0..3),
            prop::collection::vec(constant(), 0..2),
            prop::option::of(prop::collection::vec(0i64..5, 0..3)),
        )
            .prop_map(|(op, inputs, consts, kwargs, meta)| Step::Call {
                op,
                inputs,
                consts,
                kwargs,
                meta
            }),
        (any::<usize>(), prop::collection::vec(0usize..3, 1..3))
            .prop_map(|(input, take)| Step::Multi { input, take }),
    ]
}

fn build(n_inputs: usize, steps: &[Step], outs: &[usize]) -> Graph {
    let mut b = GraphBuilder::new("Prop");
    let mut vals: Vec<TensorRef> = (0..n_inputs)
        .map(|i| {
            b.input(
                "arg",
                TensorMeta::new(Dtype::ALL[i % 12], vec![i as i64, 2]),
            )
        })
        .collect();
    for s in steps {
        match s {
            Step::Call {
                op,
                inputs,
                consts,
                kwargs,
                meta,
            } => {
                let mut args: Vec<Value> =
                    inputs.iter().map(|i| vals[i % vals.len()].into()).collect();
                args.extend(consts.iter().cloned());
                let kw: Vec<(&str, Value)> = kwargs
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (["alpha", "dim", "keepdim"][i % 3], v.clone()))
                    .collect();
                let t = b.call_kw(OpName::aten(OPS[*op], "default"), args, kw);
                if let Some(shape) = meta {
                    b.set_meta(t, TensorMeta::new(Dtype::Float32, shape.clone()));
                }
                vals.push(t);
            }
            Step::Multi { input, take } => {
                let m = b.call_multi(
                    OpName::aten("split", "Tensor"),
                    [vals[input % vals.len()].into(), 2.into()],
                    [],
                );
                let mut metas = vec![None; 3];
                for &i in take {
                    let g = b.getitem(m, i);
                    let meta = TensorMeta::new(Dtype::Float32, vec![i as i64]);
                    metas[i] = Some(meta.clone());
                    b.set_meta(g, meta);
                    vals.push(g);
                }
                // What the parser can learn back: the metas the getitems carry.
                metas.truncate(take.iter().max().map_or(0, |m| m + 1));
                b.set_multi_meta(m, metas);
            }
        }
    }
    b.output(outs.iter().map(|i| vals[i % vals.len()].into()));
    b.finish().expect("the builder makes valid graphs")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn printed_graphs_parse_back(
        n_inputs in 1usize..4,
        steps in prop::collection::vec(step(), 0..12),
        outs in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        let g = build(n_inputs, &steps, &outs);
        let text = print_graph(&g);
        let back = parse_graph(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&back, &g, "{}", text);
        prop_assert_eq!(print_graph(&back), text);
        let json = g.to_json().unwrap();
        prop_assert_eq!(Graph::from_json(&json).unwrap(), g);
    }
}

#[test]
fn multi_meta_is_learnt_from_getitems() {
    let g = build(
        1,
        &[Step::Multi {
            input: 0,
            take: vec![1],
        }],
        &[1],
    );
    let back = parse_graph(&print_graph(&g)).unwrap();
    assert_eq!(
        back.nodes[1].meta,
        Meta::Multi(vec![None, Some(TensorMeta::new(Dtype::Float32, vec![1]))])
    );
}

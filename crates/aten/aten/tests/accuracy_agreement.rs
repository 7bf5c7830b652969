//! The host implementation of `same()` (graphbug-accuracy, reached through
//! `graphbug_aten::accuracy`) agrees with the tch implementation it replaced
//! (`tch_same`, kept here only to be compared with), on random outputs of every family:
//! float32, float64, bfloat16, float16, complex64, int64, int32, uint8 and bool tensors of
//! random shapes, with NaN, infinities and large errors injected, with and without a
//! float64 run, under random options.
//!
//! Where they may differ, by design, no case goes: integers beyond 2^53 and uint16/32/64
//! beyond their signed range (the tch version printed them rounded or as signed), dtypes
//! graphbug does not model (float8: the tch version compared them as truncated integers),
//! and float-to-integer conversions of values out of range (undefined in C++). The RMSE
//! sums may differ in their last bits (libtorch's cascade sum against a compensated one),
//! so `res_error`, `ref_error` and the margin they make agree to 1e-12, relative.

mod tch_same;

use graphbug_aten::accuracy::{same, AccuracyReport, SameOptions};
use proptest::prelude::*;
use tch::{Kind, Tensor};

/// splitmix64: the values of one case from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Roughly normal (sum of uniforms).
    fn normal(&mut self) -> f64 {
        (0..4).map(|_| self.unit()).sum::<f64>() - 2.0
    }
}

const KINDS: [Kind; 9] = [
    Kind::Float,
    Kind::Double,
    Kind::BFloat16,
    Kind::Half,
    Kind::ComplexFloat,
    Kind::Int64,
    Kind::Int,
    Kind::Uint8,
    Kind::Bool,
];

fn is_float(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Float | Kind::Double | Kind::BFloat16 | Kind::Half | Kind::ComplexFloat
    )
}

/// How a result departs from its reference.
#[derive(Clone, Copy, Debug)]
enum Noise {
    None,
    Tiny,
    Small,
    Large,
}

/// One output's recipe.
#[derive(Clone, Debug)]
struct Spec {
    seed: u64,
    kind: usize,
    /// Another dtype for the result (exact_dtype then decides).
    other_kind: Option<usize>,
    shape: Vec<i64>,
    scale: f64,
    noise: Noise,
    /// NaN / +inf / -inf / large error injections: (which side, what, where).
    events: Vec<(u8, u8, u16)>,
    /// 0 none, 1 undefined, 2 close to the reference, 3 with non-finite values, 4 of
    /// another shape, 5 float32 instead of float64, 6 far from the reference.
    fp: u8,
    /// 0 both defined, 1 reference undefined, 2 result undefined, 3 both.
    undefined: u8,
    /// Another shape for the result.
    reshape: bool,
}

fn spec() -> impl Strategy<Value = Spec> {
    let shape = prop_oneof![
        6 => prop::collection::vec(0i64..5, 0..4),
        1 => (990i64..1010).prop_map(|n| vec![n]),
        1 => (1i64..4, 1i64..4).prop_map(|(a, b)| vec![a * 16, b * 16, 1, 1]),
    ];
    let noise = prop_oneof![
        Just(Noise::None),
        Just(Noise::Tiny),
        Just(Noise::Small),
        Just(Noise::Large)
    ];
    (
        any::<u64>(),
        0..KINDS.len(),
        prop::option::weighted(0.15, 0..KINDS.len()),
        shape,
        prop_oneof![Just(1e-3), Just(1.0), Just(1e3)],
        noise,
        prop::collection::vec((0u8..3, 0u8..4, any::<u16>()), 0..4),
        0u8..7,
        prop_oneof![8 => Just(0u8), 1 => 1u8..4],
        prop::bool::weighted(0.05),
    )
        .prop_map(
            |(seed, kind, other_kind, shape, scale, noise, events, fp, undefined, reshape)| Spec {
                seed,
                kind,
                other_kind,
                shape,
                scale,
                noise,
                events,
                fp,
                undefined,
                reshape,
            },
        )
}

fn options() -> impl Strategy<Value = SameOptions> {
    (
        prop_oneof![Just(1e-4), Just(1e-3), Just(1e-2), Just(2e-2), Just(0.0)],
        any::<bool>(),
        prop::bool::weighted(0.8),
        any::<bool>(),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(tol, equal_nan, exact_dtype, ignore_non_fp, larger, force)| SameOptions {
                tol,
                equal_nan,
                exact_dtype,
                ignore_non_fp,
                use_larger_multiplier_for_smaller_tensor: larger,
                force_max_multiplier: force,
            },
        )
}

/// A conversion of the reference to the result's dtype (and of the result to the
/// reference's, as `check` also swaps them) whose values stay in range both ways: none,
/// to or from bool, between real floats, or from integers to a real float that holds them
/// (never floats with fractions, NaN or infinities to integers: undefined in C++).
fn convertible(from: Kind, to: Kind) -> bool {
    let real = |k: Kind| is_float(k) && k != Kind::ComplexFloat;
    from == to
        || from == Kind::Bool
        || to == Kind::Bool
        || (real(from) && real(to))
        || (!is_float(from) && real(to) && (to != Kind::Half || from == Kind::Uint8))
}

/// The reference, result and float64 run of one output.
fn build(spec: &Spec) -> (Tensor, Tensor, Option<Tensor>) {
    let mut rng = Rng(spec.seed);
    let kind = KINDS[spec.kind];
    let res_kind = spec
        .other_kind
        .map(|k| KINDS[k])
        .filter(|&k| convertible(kind, k))
        .unwrap_or(kind);
    let shape = if kind == Kind::ComplexFloat {
        // Complex: built from a trailing pair.
        [spec.shape.clone(), vec![2]].concat()
    } else {
        spec.shape.clone()
    };
    let n: i64 = shape.iter().product();
    let n = n as usize;
    let floating = is_float(kind);
    let truth: Vec<f64> = (0..n)
        .map(|_| match kind {
            Kind::Bool => (rng.below(2)) as f64,
            Kind::Uint8 => rng.below(256) as f64,
            Kind::Int => (rng.normal() * 1e5).round(),
            Kind::Int64 => (rng.normal() * 1e12).round(),
            _ => rng.normal() * spec.scale,
        })
        .collect();
    let noise = |rng: &mut Rng, x: f64| match spec.noise {
        Noise::None => x,
        Noise::Tiny => x + x.abs() * 1e-7 * rng.normal(),
        Noise::Small => x + (x.abs() + spec.scale) * 1e-3 * rng.normal(),
        Noise::Large => x + (x.abs() + spec.scale) * rng.normal(),
    };
    let mut reference: Vec<f64> = truth
        .iter()
        .map(|&x| {
            if floating {
                noise(&mut rng, x) * 0.5 + x * 0.5
            } else {
                x
            }
        })
        .collect();
    let mut result: Vec<f64> = truth
        .iter()
        .map(|&x| {
            if floating {
                noise(&mut rng, x)
            } else if matches!(spec.noise, Noise::Large) && rng.below(8) == 0 {
                match kind {
                    Kind::Bool => 1.0 - x,
                    Kind::Uint8 => ((x as i64 + 1 + rng.below(50) as i64) % 256) as f64,
                    _ => x + rng.below(1000) as f64 - 500.0,
                }
            } else {
                x
            }
        })
        .collect();
    let mut fp: Vec<f64> = truth.clone();
    if n > 0 {
        for &(side, what, at) in &spec.events {
            let at = at as usize % n;
            let value = match what {
                0 if floating => f64::NAN,
                1 if floating => f64::INFINITY,
                2 if floating => f64::NEG_INFINITY,
                _ if floating => truth[at] + 1e3 * spec.scale,
                _ => continue,
            };
            match side {
                0 => reference[at] = value,
                1 => result[at] = value,
                _ => {
                    reference[at] = value;
                    result[at] = value;
                    if spec.fp == 3 {
                        fp[at] = value;
                    }
                }
            }
        }
    }
    if spec.fp == 3 && n > 0 {
        let at = rng.below(n);
        fp[at] = f64::NAN;
    }
    if spec.fp == 6 {
        fp.iter_mut().for_each(|x| *x += spec.scale);
    }
    let make = |values: &[f64], to: Kind| {
        let t = Tensor::from_slice(values).reshape(shape.as_slice());
        if kind == Kind::ComplexFloat {
            t.to_kind(Kind::Float).view_as_complex().to_kind(to)
        } else {
            t.to_kind(to)
        }
    };
    let make_fp = |values: &[f64]| {
        let t = Tensor::from_slice(values).reshape(shape.as_slice());
        if kind == Kind::ComplexFloat {
            t.view_as_complex()
        } else {
            t
        }
    };
    let mut r = make(&reference, kind);
    let mut s = make(&result, res_kind);
    if spec.reshape {
        s = s.reshape([-1]);
    }
    match spec.undefined {
        1 => r = Tensor::new(),
        2 => s = Tensor::new(),
        3 => (r, s) = (Tensor::new(), Tensor::new()),
        _ => {}
    }
    let fp = match spec.fp {
        0 => None,
        1 => Some(Tensor::new()),
        4 => Some(make_fp(&fp).reshape([-1]).narrow(0, 0, (n as i64).min(1))),
        5 => Some(make_fp(&fp).to_kind(if kind == Kind::ComplexFloat {
            Kind::ComplexFloat
        } else {
            Kind::Float
        })),
        _ => Some(make_fp(&fp)),
    };
    (r, s, fp)
}

fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
        }
        (a, b) => a == b,
    }
}

/// The two reports agree: every field equal, the RMSE-made ones to 1e-12.
fn agree(host: &AccuracyReport, tch: &AccuracyReport) -> Result<(), String> {
    if host.outputs.len() != tch.outputs.len() {
        return Err("output counts differ".into());
    }
    for (h, t) in host.outputs.iter().zip(&tch.outputs) {
        let exact = (
            h.index,
            h.passed,
            &h.reason,
            &h.meta,
            &h.worst,
            h.multiplier,
            h.max_abs_diff.map(f64::to_bits),
        ) == (
            t.index,
            t.passed,
            &t.reason,
            &t.meta,
            &t.worst,
            t.multiplier,
            t.max_abs_diff.map(f64::to_bits),
        );
        let near = close(h.res_error, t.res_error)
            && close(h.ref_error, t.ref_error)
            && close(h.margin, t.margin);
        if !(exact && near) {
            return Err(format!("host {h:#?}\ntch {t:#?}"));
        }
    }
    Ok(())
}

/// The same case through both implementations.
fn check(specs: &[Spec], extra: usize, opts: &SameOptions) -> Result<(), TestCaseError> {
    let built: Vec<_> = specs.iter().map(build).collect();
    let mut reference: Vec<Tensor> = built.iter().map(|b| b.0.shallow_clone()).collect();
    let result: Vec<Tensor> = built.iter().map(|b| b.1.shallow_clone()).collect();
    // Missing outputs on one side.
    for _ in 0..extra {
        reference.push(Tensor::from_slice(&[1.0f32]));
    }
    let fp: Vec<Tensor> = built
        .iter()
        .map(|b| b.2.as_ref().map_or_else(Tensor::new, Tensor::shallow_clone))
        .collect();
    let fp = built.iter().any(|b| b.2.is_some()).then_some(fp);
    let host = same(&reference, &result, fp.as_deref(), opts);
    let old = tch_same::same(&reference, &result, fp.as_deref(), opts);
    agree(&host, &old).map_err(|e| TestCaseError::fail(format!("{e}\noptions {opts:?}")))?;
    // Both ways round.
    let host = same(&result, &reference, fp.as_deref(), opts);
    let old = tch_same::same(&result, &reference, fp.as_deref(), opts);
    agree(&host, &old).map_err(|e| TestCaseError::fail(format!("swapped: {e}\noptions {opts:?}")))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn host_and_tch_implementations_agree(
        specs in prop::collection::vec(spec(), 1..4),
        extra in prop_oneof![9 => Just(0usize), 1 => 1usize..3],
        opts in options(),
    ) {
        check(&specs, extra, &opts)?;
    }
}

/// A named case: reference, result, float64 run, options.
type Case = (
    &'static str,
    Vec<Tensor>,
    Vec<Tensor>,
    Option<Vec<Tensor>>,
    SameOptions,
);

/// Cases the random ones may miss, each named.
#[test]
fn named_cases_agree() {
    let f32s = |v: &[f32]| Tensor::from_slice(v);
    let f64s = |v: &[f64]| Tensor::from_slice(v);
    let repro = SameOptions::repro();
    let cases: Vec<Case> = vec![
        (
            "rmse rule, large",
            vec![Tensor::full([2000], 0.01, (Kind::Float, tch::Device::Cpu))],
            vec![Tensor::full([2000], 0.025, (Kind::Float, tch::Device::Cpu))],
            Some(vec![Tensor::zeros(
                [2000],
                (Kind::Double, tch::Device::Cpu),
            )]),
            SameOptions::default(),
        ),
        (
            "nan on one side",
            vec![f32s(&[f32::NAN, 1.0])],
            vec![f32s(&[1.0, 1.0])],
            None,
            repro.clone(),
        ),
        (
            "complex float64 run of another shape",
            vec![f32s(&[1.0, 2.0])],
            vec![f32s(&[1.5, 2.0])],
            Some(vec![Tensor::complex(
                &f64s(&[1.0, 2.0]),
                &f64s(&[0.0, 0.0]),
            )]),
            repro.clone(),
        ),
        (
            "float64 fallback",
            vec![f64s(&[1.0, 2.0])],
            vec![f64s(&[1.5, 2.0])],
            None,
            repro.clone(),
        ),
        (
            "bfloat16 reference of a float32 result, loose dtypes",
            vec![f32s(&[1.0, 2.001]).to_kind(Kind::BFloat16)],
            vec![f32s(&[1.0, 2.001])],
            None,
            SameOptions {
                exact_dtype: false,
                ..SameOptions::default()
            },
        ),
        (
            "float64 reference rounded to bfloat16",
            vec![f64s(&[1.0 + 2f64.powi(-8) + 2f64.powi(-30), 3.0])],
            vec![f32s(&[1.0, 3.0]).to_kind(Kind::BFloat16)],
            None,
            SameOptions {
                exact_dtype: false,
                tol: 0.0,
                ..SameOptions::default()
            },
        ),
        (
            "complex reference of a float result, loose dtypes",
            vec![Tensor::complex(&f32s(&[1.0, 2.0]), &f32s(&[5.0, 6.0]))],
            vec![f32s(&[1.0, 2.0])],
            None,
            SameOptions {
                exact_dtype: false,
                ..SameOptions::default()
            },
        ),
        (
            "zero tolerance",
            vec![f32s(&[0.0, 1.0])],
            vec![f32s(&[0.0, 1.0])],
            None,
            SameOptions {
                tol: 0.0,
                ..SameOptions::default()
            },
        ),
        (
            "int64 near 2^53, within float64",
            vec![Tensor::from_slice(&[(1i64 << 52) + 1, -5])],
            vec![Tensor::from_slice(&[1i64 << 52, -5])],
            None,
            SameOptions::default(),
        ),
        (
            "empty",
            vec![Tensor::zeros([0, 3], (Kind::Float, tch::Device::Cpu))],
            vec![Tensor::zeros([0, 3], (Kind::Float, tch::Device::Cpu))],
            None,
            SameOptions::default(),
        ),
        (
            "scalar",
            vec![Tensor::from(1.5f64).to_kind(Kind::Float)],
            vec![Tensor::from(1.6f64).to_kind(Kind::Float)],
            Some(vec![Tensor::from(1.55f64)]),
            repro.clone(),
        ),
    ];
    for (name, reference, result, fp, opts) in cases {
        let host = same(&reference, &result, fp.as_deref(), &opts);
        let old = tch_same::same(&reference, &result, fp.as_deref(), &opts);
        if let Err(e) = agree(&host, &old) {
            panic!("{name}: {e}");
        }
    }
}

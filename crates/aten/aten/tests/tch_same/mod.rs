//! The tch implementation of `same()` that graphbug-aten had before the rules moved to
//! graphbug-accuracy (host tensors), kept verbatim for one purpose: checking that the host
//! implementation agrees with it (tests/accuracy_agreement.rs) and timing both
//! (benches/accuracy.rs). Nothing else uses it.

#![allow(dead_code)]

use graphbug_aten::accuracy::{AccuracyReport, Element, OutputVerdict, SameOptions, LOOSE_TOL};
use graphbug_aten::dtype::{bits_dtype, describe, dtype_of, kind_of, tensor_dtype, view_bits};
use graphbug_ir::Dtype;
use tch::{Kind, TchError, Tensor};

/// Compares `result` with `reference` output by output (see the module docs).
///
/// `fp64_ref`, when given, holds the same graph's outputs computed in float64; entry `i`
/// judges output `i` (a missing entry falls back to the reference itself, as PyTorch does
/// when no float64 reference exists). Never fails: libtorch errors during the
/// comparison become failing verdicts that say so.
pub fn same(
    reference: &[Tensor],
    result: &[Tensor],
    fp64_ref: Option<&[Tensor]>,
    opts: &SameOptions,
) -> AccuracyReport {
    let n = reference.len().max(result.len());
    let outputs = (0..n)
        .map(|i| match (reference.get(i), result.get(i)) {
            (Some(r), Some(s)) => {
                let fp64 = fp64_ref.and_then(|f| f.get(i));
                compare(i, r, s, fp64, opts).unwrap_or_else(|e| {
                    OutputVerdict::new(
                        i,
                        false,
                        format!("libtorch error while comparing: {e}"),
                        describe(s),
                    )
                })
            }
            (Some(_), None) => OutputVerdict::new(
                i,
                false,
                format!(
                    "output count mismatch: reference has {} outputs, result has {}; this one is missing",
                    reference.len(),
                    result.len()
                ),
                "missing".to_string(),
            ),
            (None, Some(s)) => OutputVerdict::new(
                i,
                false,
                format!(
                    "output count mismatch: reference has {} outputs, result has {}; this one is extra",
                    reference.len(),
                    result.len()
                ),
                describe(s),
            ),
            (None, None) => unreachable!("invariant: i < max(len) so one side has output i"),
        })
        .collect();
    AccuracyReport { outputs }
}

fn cpu(t: &Tensor) -> Result<Tensor, TchError> {
    t.f_to_device(tch::Device::Cpu)
}

fn any(t: &Tensor) -> Result<bool, TchError> {
    Ok(t.f_any()?.f_int64_value(&[])? != 0)
}

fn count(mask: &Tensor) -> Result<i64, TchError> {
    mask.f_sum(Kind::Int64)?.f_int64_value(&[])
}

fn is_complex(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::ComplexHalf | Kind::ComplexFloat | Kind::ComplexDouble
    )
}

fn is_floating(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Half | Kind::BFloat16 | Kind::Float | Kind::Double
    )
}

/// A complex tensor as real numbers (a trailing dimension of 2), in float64.
fn as_real_f64(t: &Tensor) -> Result<Tensor, TchError> {
    if is_complex(t.f_kind()?) {
        t.f_to_kind(Kind::ComplexDouble)?.f_view_as_real()
    } else {
        t.f_to_kind(Kind::Double)
    }
}

/// Root mean squared error of two float64 vectors (0 for empty ones).
fn rmse(a: &Tensor, b: &Tensor) -> Result<f64, TchError> {
    if a.numel() == 0 {
        return Ok(0.0);
    }
    a.f_sub(b)?
        .f_square()?
        .f_mean(Kind::Double)?
        .f_sqrt()?
        .f_double_value(&[])
}

/// The multi-dimensional index of flat position `flat` in a tensor of `shape`.
fn unravel(mut flat: i64, shape: &[i64]) -> Vec<i64> {
    let mut index = vec![0; shape.len()];
    for (d, &size) in shape.iter().enumerate().rev() {
        if size > 0 {
            index[d] = flat % size;
            flat /= size;
        }
    }
    index
}

/// How an element's values print: as integers, or as the shortest text that reads back
/// as the same single- or double-precision float.
#[derive(Clone, Copy)]
enum Show {
    Integer,
    Single,
    Double,
}

impl Show {
    fn of(kind: Kind) -> Show {
        match kind {
            Kind::Double | Kind::ComplexDouble => Show::Double,
            k if is_floating(k) || is_complex(k) => Show::Single,
            _ => Show::Integer,
        }
    }

    fn text(self, value: f64) -> String {
        if value.is_nan() {
            return "nan".into();
        }
        if value.is_infinite() {
            return if value > 0.0 { "inf" } else { "-inf" }.into();
        }
        match self {
            Show::Integer => format!("{}", value as i64),
            Show::Single => format!("{:e}", value as f32),
            Show::Double => format!("{value:e}"),
        }
    }
}

/// The value at flat position `flat`.
fn value_at(t: &Tensor, flat: i64) -> Result<f64, TchError> {
    t.f_reshape([-1])?.f_double_value(&[flat])
}

/// `3, 7` for index `[3, 7]`.
fn index_text(index: &[i64]) -> String {
    index
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Both values at flat position `flat` of two same-shaped tensors, as an [`Element`].
fn element(
    reference: &Tensor,
    result: &Tensor,
    flat: i64,
    show: Show,
) -> Result<Element, TchError> {
    Ok(Element {
        index: unravel(flat, &reference.size()),
        reference: show.text(value_at(reference, flat)?),
        result: show.text(value_at(result, flat)?),
    })
}

/// Where `|a - b|` is largest (the first such flat position) and how large it is there,
/// for tensors of the same shape with at least one element.
fn largest_difference(a: &Tensor, b: &Tensor) -> Result<(i64, f64), TchError> {
    let diff = a.f_sub(b)?.f_abs()?.f_reshape([-1])?;
    let flat = diff.f_argmax(0, false)?.f_int64_value(&[])?;
    Ok((flat, diff.f_double_value(&[flat])?))
}

/// The first flat position where `mask` is true.
fn first_true(mask: &Tensor) -> Result<i64, TchError> {
    mask.f_reshape([-1])?
        .f_to_kind(Kind::Uint8)?
        .f_argmax(0, false)?
        .f_int64_value(&[])
}

/// TorchDynamo's `get_multiplier()`: how much worse than the reference the result may be.
fn multiplier(res_kind: Kind, reference: &Tensor, numel: i64, opts: &SameOptions) -> f64 {
    if opts.force_max_multiplier {
        return 10.0;
    }
    // Mixed precision (f16/bf16) gets 3 to avoid false alarms; everything else 2.
    let base = if matches!(res_kind, Kind::Half | Kind::BFloat16) {
        3.0
    } else {
        2.0
    };
    let one_by_one_kernel = matches!(reference.size().as_slice(), [_, _, 1, 1]);
    if opts.use_larger_multiplier_for_smaller_tensor && numel <= 10 {
        10.0
    } else if opts.use_larger_multiplier_for_smaller_tensor && numel <= 500 {
        8.0
    } else if numel < 1000 || one_by_one_kernel || opts.tol >= 2e-2 {
        // Noise dominates small tensors, 1x1 kernels are noisy under AMP, and a large
        // tol marks a model that needs higher tolerance.
        3.0
    } else {
        base
    }
}

fn short(kind: Kind) -> String {
    dtype_of(kind)
        .map(|d| d.short_name().to_string())
        .unwrap_or_else(|| format!("{kind:?}"))
}

fn compare(
    index: usize,
    reference: &Tensor,
    result: &Tensor,
    fp64_ref: Option<&Tensor>,
    opts: &SameOptions,
) -> Result<OutputVerdict, TchError> {
    let meta = describe(result);
    let verdict =
        |passed: bool, reason: String| OutputVerdict::new(index, passed, reason, meta.clone());
    match (reference.defined(), result.defined()) {
        (true, true) => {}
        (false, false) => return Ok(verdict(true, "both undefined".to_string())),
        (false, true) => return Ok(verdict(false, "reference is undefined".to_string())),
        (true, false) => return Ok(verdict(false, "result is undefined".to_string())),
    }
    let (mut r, mut s) = (cpu(reference)?, cpu(result)?);
    // uint16/32/64 have no tch kind: their dtypes must agree, then their bits compare as the
    // signed integers of the same width (equal bits, equal values).
    let (r_dtype, s_dtype) = (tensor_dtype(&r), tensor_dtype(&s));
    let tch_less = |d: Option<Dtype>| d.is_some_and(|d| kind_of(d).is_none());
    if tch_less(r_dtype) || tch_less(s_dtype) {
        let name = |d: Option<Dtype>| d.map_or("unknown", Dtype::short_name);
        if r_dtype != s_dtype {
            return Ok(verdict(
                false,
                format!(
                    "dtype mismatch: reference {} vs result {}",
                    name(r_dtype),
                    name(s_dtype)
                ),
            ));
        }
        let signed = |t: &Tensor, d: Option<Dtype>| {
            view_bits(t, bits_dtype(d.unwrap_or(Dtype::Int64))).map_err(TchError::Torch)
        };
        (r, s) = (signed(&r, r_dtype)?, signed(&s, s_dtype)?);
    }
    let (r_kind, s_kind) = (r.f_kind()?, s.f_kind()?);

    if opts.exact_dtype && r_kind != s_kind {
        return Ok(verdict(
            false,
            format!(
                "dtype mismatch: reference {} vs result {}",
                short(r_kind),
                short(s_kind)
            ),
        ));
    }
    if r.size() != s.size() {
        return Ok(verdict(
            false,
            format!(
                "shape mismatch: reference {} vs result {}",
                describe(&r),
                describe(&s)
            ),
        ));
    }
    if !opts.exact_dtype && r_kind != s_kind {
        r = r.f_to_kind(s_kind)?;
    }
    if is_floating(s_kind) || is_complex(s_kind) {
        let fp = match fp64_ref {
            Some(f) if f.defined() => Some(cpu(f)?),
            _ => None,
        };
        return compare_floats(&r, &s, fp.as_ref(), opts, verdict);
    }

    // Bools and integers: equal element for element.
    let what = if s_kind == Kind::Bool {
        "bool"
    } else {
        "integer"
    };
    let (rw, sw) = (r.f_to_kind(Kind::Int64)?, s.f_to_kind(Kind::Int64)?);
    let differ = rw.f_ne_tensor(&sw)?;
    let differing = count(&differ)?;
    let largest = if s.numel() > 0 {
        Some(largest_difference(&rw, &sw)?)
    } else {
        None
    };
    let mut v = if differing == 0 {
        verdict(true, format!("{what} values equal"))
    } else if opts.ignore_non_fp {
        verdict(
            true,
            format!(
                "{what} values differ at {differing} of {} elements, ignored (ignore_non_fp)",
                s.numel()
            ),
        )
    } else {
        let mut v = verdict(
            false,
            format!(
                "{what} values differ at {differing} of {} elements",
                s.numel()
            ),
        );
        if let Some((flat, _)) = largest {
            v.worst = Some(element(&rw, &sw, flat, Show::Integer)?);
        }
        v
    };
    v.max_abs_diff = largest.map(|(_, d)| d);
    Ok(v)
}

/// Steps 3 to 6 of the module docs for floating and complex outputs.
fn compare_floats(
    r: &Tensor,
    s: &Tensor,
    fp: Option<&Tensor>,
    opts: &SameOptions,
    verdict: impl Fn(bool, String) -> OutputVerdict,
) -> Result<OutputVerdict, TchError> {
    let s_kind = s.f_kind()?;
    let show = Show::of(s_kind);
    let (rd, sd) = (as_real_f64(r)?, as_real_f64(s)?);
    if rd.numel() == 0 {
        return Ok(verdict(true, "both empty".to_string()));
    }
    // 3. Non-finite elements, position by position.
    let (r_nan, s_nan) = (rd.f_isnan()?, sd.f_isnan()?);
    let nan_mismatch = r_nan.f_logical_xor(&s_nan)?;
    let inf_mismatch = rd
        .f_isposinf()?
        .f_logical_xor(&sd.f_isposinf()?)?
        .f_logical_or(&rd.f_isneginf()?.f_logical_xor(&sd.f_isneginf()?)?)?;
    let mut mismatch = nan_mismatch.f_logical_or(&inf_mismatch)?;
    let both_nan = r_nan.f_logical_and(&s_nan)?;
    if !opts.equal_nan {
        mismatch = mismatch.f_logical_or(&both_nan)?;
    }
    if any(&mismatch)? {
        let n = count(&mismatch)?;
        let flat = first_true(&mismatch)?;
        let mut v = verdict(
            false,
            format!(
                "non-finite values differ at {n} of {} elements{}",
                rd.numel(),
                if !opts.equal_nan && any(&both_nan)? {
                    " (NaN against NaN counts as different without equal_nan)"
                } else {
                    ""
                }
            ),
        );
        v.max_abs_diff = Some(f64::INFINITY);
        v.margin = Some(f64::INFINITY);
        v.worst = Some(element(&rd, &sd, flat, show)?);
        return Ok(v);
    }
    // 4. allclose on the elements both have finite.
    let finite = rd.f_isfinite()?;
    let positions = finite.f_reshape([-1])?.f_nonzero()?.f_reshape([-1])?;
    let (rf, sf) = (rd.f_masked_select(&finite)?, sd.f_masked_select(&finite)?);
    // allclose's own measure: |ref - res| against tol + tol |res|, at its worst.
    let close_ratio = if rf.numel() > 0 {
        rf.f_sub(&sf)?
            .f_abs()?
            .f_div(&sf.f_abs()?.f_mul_scalar(opts.tol)?.f_add_scalar(opts.tol)?)?
            .f_max()?
            .f_double_value(&[])?
    } else {
        0.0
    };
    let with_worst = |mut v: OutputVerdict| -> Result<OutputVerdict, TchError> {
        if rf.numel() > 0 {
            let (k, d) = largest_difference(&rf, &sf)?;
            v.max_abs_diff = Some(d);
            let flat = positions.f_int64_value(&[k])?;
            v.worst = Some(element(&rd, &sd, flat, show)?);
        } else {
            v.max_abs_diff = Some(0.0);
        }
        v.margin = Some(close_ratio);
        Ok(v)
    };
    if rf.f_allclose(&sf, opts.tol, opts.tol, false)? {
        return with_worst(verdict(true, format!("allclose within tol={}", opts.tol)));
    }
    // 5. The float64 rule, with a credible reference only.
    let not_close = format!("not allclose within tol={}", opts.tol);
    let fpd = match fp {
        Some(f) if matches!(f.f_kind()?, Kind::Double | Kind::ComplexDouble) => {
            let f = as_real_f64(f)?;
            if f.size() != rd.size() {
                return with_worst(verdict(
                    false,
                    format!(
                        "{not_close}, and the float64 reference {} does not fit the reference {}",
                        describe(&f),
                        describe(r)
                    ),
                ));
            }
            f
        }
        // Without a float64 run, a float64 reference is its own (PyTorch's fallback).
        None if matches!(r.f_kind()?, Kind::Double | Kind::ComplexDouble) => rd.shallow_clone(),
        _ => {
            return with_worst(verdict(
                false,
                format!("{not_close}, and no float64 reference to judge by"),
            ))
        }
    };
    let fpf = fpd.f_masked_select(&finite)?;
    let fp_bad = fpf.f_isfinite()?.f_logical_not()?;
    if any(&fp_bad)? {
        let k = first_true(&fp_bad)?;
        let flat = positions.f_int64_value(&[k])?;
        return with_worst(verdict(
            false,
            format!(
                "{not_close}, and the float64 run is not finite where both are (float64 {} at [{}]), so it cannot judge",
                Show::Double.text(value_at(&fpd, flat)?),
                index_text(&unravel(flat, &rd.size()))
            ),
        ));
    }
    if !rf.f_allclose(&fpf, LOOSE_TOL, LOOSE_TOL, false)? {
        let (k, _) = largest_difference(&rf, &fpf)?;
        let flat = positions.f_int64_value(&[k])?;
        return with_worst(verdict(
            false,
            format!(
                "{not_close}; the float64 rule does not apply: the reference itself is not within {LOOSE_TOL} of graphbug's float64 run (at [{}]: reference {}, float64 {})",
                index_text(&unravel(flat, &rd.size())),
                show.text(value_at(&rd, flat)?),
                Show::Double.text(value_at(&fpd, flat)?)
            ),
        ));
    }
    let ref_error = rmse(&fpf, &rf)?;
    let res_error = rmse(&fpf, &sf)?;
    let m = multiplier(s_kind, r, r.numel() as i64, opts);
    let bound = m * ref_error + opts.tol / 10.0;
    let passed = res_error <= bound;
    let reason = if passed {
        format!(
            "{not_close}, but RMSE (res-fp64) {res_error:.6e} <= {m:.1} x RMSE (ref-fp64) {ref_error:.6e} + tol/10 {:.6e}",
            opts.tol / 10.0
        )
    } else {
        format!(
            "RMSE (res-fp64) {res_error:.6e} > {m:.1} x RMSE (ref-fp64) {ref_error:.6e} + tol/10 {:.6e}",
            opts.tol / 10.0
        )
    };
    let mut v = with_worst(verdict(passed, reason))?;
    v.res_error = Some(res_error);
    v.ref_error = Some(ref_error);
    v.multiplier = Some(m);
    v.margin = Some(if bound > 0.0 {
        res_error / bound
    } else if res_error > 0.0 {
        f64::INFINITY
    } else {
        0.0
    });
    Ok(v)
}

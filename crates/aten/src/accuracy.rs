//! Accuracy checks: the aten-level analogue of TorchDynamo's `torch._dynamo.utils.same()`.
//!
//! [`same`] compares a compiled graph's outputs (`result`) with eager outputs
//! (`reference`), optionally judged against a float64 run of the same graph (`fp64_ref`),
//! with the rules TorchDynamo's accuracy minifier uses:
//!
//! 1. the output counts must match; then, per output,
//! 2. the dtypes must match (`exact_dtype`; otherwise the reference is cast to the
//!    result's dtype), and the shapes must match;
//! 3. bool tensors are compared as uint8 with `allclose(tol)` (skipped with `ignore_non_fp`);
//! 4. `allclose(atol = rtol = tol, equal_nan)` passes;
//! 5. otherwise, with a float64 reference (when none is given the reference itself
//!    plays that role, as in PyTorch): a result free of NaN that matches the float64
//!    reference loosely passes when the reference has NaN; else the result passes iff
//!    `rmse(fp64, res) <= multiplier * rmse(fp64, ref) + tol / 10` (or both RMSEs are
//!    NaN and `equal_nan`);
//! 6. otherwise the output fails, unless `ignore_non_fp`.
//!
//! Tensors are compared on the CPU whatever devices they live on.

use std::fmt;

use serde::{Deserialize, Serialize};
use tch::{Kind, TchError, Tensor};

use crate::dtype::{describe, dtype_of};

/// Tolerances and switches of [`same`], named as in `torch._dynamo.utils.same()`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SameOptions {
    /// Absolute and relative tolerance of `allclose` (default `1e-4`).
    pub tol: f64,
    /// NaN equals NaN (default false).
    pub equal_nan: bool,
    /// Dtypes must match; when false the reference is cast to the result's dtype (default true).
    pub exact_dtype: bool,
    /// Outputs that cannot be judged against a float64 reference (bool, integers) pass.
    pub ignore_non_fp: bool,
    /// RMSE multiplier 10 for tensors of at most 10 elements and 8 up to 500.
    pub use_larger_multiplier_for_smaller_tensor: bool,
    /// RMSE multiplier 10 always.
    pub force_max_multiplier: bool,
}

impl Default for SameOptions {
    fn default() -> Self {
        SameOptions {
            tol: 1e-4,
            equal_nan: false,
            exact_dtype: true,
            ignore_non_fp: false,
            use_larger_multiplier_for_smaller_tensor: false,
            force_max_multiplier: false,
        }
    }
}

impl SameOptions {
    /// The options of TorchDynamo's minifier accuracy check (`same_two_models`):
    /// `tol = torch._dynamo.config.repro_tolerance` (1e-3) and `equal_nan = true`.
    pub fn repro() -> Self {
        SameOptions {
            tol: 1e-3,
            equal_nan: true,
            ..SameOptions::default()
        }
    }
}

/// The verdict on one output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputVerdict {
    /// Position of the output.
    pub index: usize,
    /// Whether the result is accurate enough.
    pub passed: bool,
    /// Why it passed or failed, e.g. `allclose within tol=0.0001`.
    pub reason: String,
    /// Largest absolute difference between reference and result (NaN against a number
    /// counts as infinity; NaN against NaN as 0 with `equal_nan`), when comparable.
    pub max_abs_diff: Option<f64>,
    /// RMSE of the result against the float64 reference, when computed.
    pub res_error: Option<f64>,
    /// RMSE of the reference against the float64 reference, when computed.
    pub ref_error: Option<f64>,
    /// The RMSE multiplier applied, when the RMSE rule ran.
    pub multiplier: Option<f64>,
    /// The result's dtype and shape, e.g. `f32[8, 10]` (`missing` when absent).
    pub meta: String,
}

/// The verdicts on all outputs of one comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AccuracyReport {
    /// One verdict per output position (the longer of the two output lists).
    pub outputs: Vec<OutputVerdict>,
}

impl AccuracyReport {
    /// True when every output passed.
    pub fn passed(&self) -> bool {
        self.outputs.iter().all(|o| o.passed)
    }

    /// The first output that failed.
    pub fn first_failure(&self) -> Option<&OutputVerdict> {
        self.outputs.iter().find(|o| !o.passed)
    }
}

impl fmt::Display for AccuracyReport {
    /// A header line, then one line per output: index, meta, verdict, reason, max diff.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failed = self.outputs.iter().filter(|o| !o.passed).count();
        match self.first_failure() {
            None => writeln!(f, "accuracy: all {} outputs match", self.outputs.len())?,
            Some(first) => writeln!(
                f,
                "accuracy: {failed} of {} outputs differ (first: output {})",
                self.outputs.len(),
                first.index
            )?,
        }
        for o in &self.outputs {
            write!(
                f,
                "  output {} {}: {}: {}",
                o.index,
                o.meta,
                if o.passed { "ok" } else { "FAIL" },
                o.reason
            )?;
            if let Some(d) = o.max_abs_diff {
                write!(f, " (max abs diff {d:.6e})")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// Compares `result` with `reference` output by output, as TorchDynamo's `same()` does.
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

impl OutputVerdict {
    fn new(index: usize, passed: bool, reason: String, meta: String) -> Self {
        OutputVerdict {
            index,
            passed,
            reason,
            max_abs_diff: None,
            res_error: None,
            ref_error: None,
            multiplier: None,
            meta,
        }
    }
}

fn cpu(t: &Tensor) -> Result<Tensor, TchError> {
    t.f_to_device(tch::Device::Cpu)
}

fn any(t: &Tensor) -> Result<bool, TchError> {
    Ok(t.f_any()?.f_int64_value(&[])? != 0)
}

fn is_complex(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::ComplexHalf | Kind::ComplexFloat | Kind::ComplexDouble
    )
}

/// The common wide kind two tensors are compared in: complex128 or float64.
fn wide_kind(a: &Tensor, b: &Tensor) -> Result<Kind, TchError> {
    Ok(if is_complex(a.f_kind()?) || is_complex(b.f_kind()?) {
        Kind::ComplexDouble
    } else {
        Kind::Double
    })
}

/// Root mean squared error, computed in float64 (`sqrt(mean(|a - b|^2))`).
fn rmse(a: &Tensor, b: &Tensor) -> Result<f64, TchError> {
    let wide = wide_kind(a, b)?;
    let diff = a.f_to_kind(wide)?.f_sub(&b.f_to_kind(wide)?)?;
    diff.f_abs()?
        .f_square()?
        .f_mean(Kind::Double)?
        .f_sqrt()?
        .f_double_value(&[])
}

/// Largest `|a - b|`: equal values (infinities included) count 0; NaN against NaN counts
/// 0 with `equal_nan` (NaN without); NaN against a number counts infinity.
fn max_abs_diff(a: &Tensor, b: &Tensor, equal_nan: bool) -> Result<Option<f64>, TchError> {
    if a.numel() == 0 {
        return Ok(None);
    }
    let wide = wide_kind(a, b)?;
    let (a, b) = (a.f_to_kind(wide)?, b.f_to_kind(wide)?);
    let same = a.f_eq_tensor(&b)?;
    let diff = a
        .f_sub(&b)?
        .f_abs()?
        .f_where_scalarother(&same.f_logical_not()?, 0.0)?;
    let both_nan = a.f_isnan()?.f_logical_and(&b.f_isnan()?)?;
    let one_nan = diff.f_isnan()?.f_logical_and(&both_nan.f_logical_not()?)?;
    let diff = diff.f_where_scalarother(&one_nan.f_logical_not()?, f64::INFINITY)?;
    let diff = if equal_nan {
        diff.f_where_scalarother(&both_nan.f_logical_not()?, 0.0)?
    } else {
        diff
    };
    Ok(Some(diff.f_max()?.f_double_value(&[])?))
}

/// TorchDynamo's `get_multiplier()`: how much worse than the reference the result may be.
fn multiplier(res: &Tensor, reference: &Tensor, fp64: &Tensor, opts: &SameOptions) -> f64 {
    if opts.force_max_multiplier {
        return 10.0;
    }
    // Mixed precision (f16/bf16) gets 3 to avoid false alarms; everything else 2.
    let base = if matches!(res.f_kind(), Ok(Kind::Half | Kind::BFloat16)) {
        3.0
    } else {
        2.0
    };
    let numel = fp64.numel();
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
    let (mut r, s) = (cpu(reference)?, cpu(result)?);
    let fp = match fp64_ref {
        Some(f) if f.defined() => cpu(f)?,
        _ => r.shallow_clone(),
    };
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
    if s_kind == Kind::Bool {
        if opts.ignore_non_fp {
            return Ok(verdict(
                true,
                "bool output ignored (ignore_non_fp)".to_string(),
            ));
        }
        let (r8, s8) = (r.f_to_kind(Kind::Uint8)?, s.f_to_kind(Kind::Uint8)?);
        let mut v = if r8.f_allclose(&s8, opts.tol, opts.tol, opts.equal_nan)? {
            verdict(true, "bool values equal (compared as uint8)".to_string())
        } else {
            let differing = r8
                .f_ne_tensor(&s8)?
                .f_sum(Kind::Int64)?
                .f_int64_value(&[])?;
            verdict(
                false,
                format!(
                    "bool values differ at {differing} of {} elements",
                    s.numel()
                ),
            )
        };
        v.max_abs_diff = max_abs_diff(&r8, &s8, opts.equal_nan)?;
        return Ok(v);
    }

    let max_diff = max_abs_diff(&r, &s, opts.equal_nan)?;
    let with_diff = |mut v: OutputVerdict| {
        v.max_abs_diff = max_diff;
        v
    };
    if r.f_allclose(&s, opts.tol, opts.tol, opts.equal_nan)? {
        return Ok(with_diff(verdict(
            true,
            format!("allclose within tol={}", opts.tol),
        )));
    }

    if fp.f_kind()? == Kind::Double {
        if fp.size() != r.size() {
            return Ok(with_diff(verdict(
                false,
                format!(
                    "float64 reference {} does not fit reference {}",
                    describe(&fp),
                    describe(&r)
                ),
            )));
        }
        // The reference has NaN, the result has none and matches the float64 reference
        // loosely: the result is better than the reference.
        const LOOSE_TOL: f64 = 4e-2;
        if !any(&fp.f_isnan()?)?
            && !any(&s.f_isnan()?)?
            && any(&r.f_isnan()?)?
            && fp
                .f_to_kind(s_kind)?
                .f_allclose(&s, LOOSE_TOL, LOOSE_TOL, opts.equal_nan)?
        {
            return Ok(with_diff(verdict(
                true,
                format!(
                    "reference has NaN; result has none and matches the float64 reference within {LOOSE_TOL}"
                ),
            )));
        }
        let ref_error = rmse(&fp, &r)?;
        let res_error = rmse(&fp, &s)?;
        let m = multiplier(&s, &r, &fp, opts);
        let bound = m * ref_error + opts.tol / 10.0;
        let mut passed = res_error <= bound;
        let reason = if passed {
            format!(
                "not allclose within tol={}, but RMSE (res-fp64) {res_error:.6e} <= {m:.1} x RMSE (ref-fp64) {ref_error:.6e} + tol/10 {:.6e}",
                opts.tol,
                opts.tol / 10.0
            )
        } else if opts.equal_nan && ref_error.is_nan() && res_error.is_nan() {
            passed = true;
            "RMSE is NaN for both reference and result (equal_nan)".to_string()
        } else {
            format!(
                "RMSE (res-fp64) {res_error:.6e} > {m:.1} x RMSE (ref-fp64) {ref_error:.6e} + tol/10 {:.6e}",
                opts.tol / 10.0
            )
        };
        let mut v = with_diff(verdict(passed, reason));
        v.res_error = Some(res_error);
        v.ref_error = Some(ref_error);
        v.multiplier = Some(m);
        return Ok(v);
    }

    let what = match dtype_of(s_kind) {
        Some(d) if d.is_floating_point() || d.is_complex() => "no float64 reference",
        _ => "a non-floating output",
    };
    Ok(with_diff(if opts.ignore_non_fp {
        verdict(
            true,
            format!(
                "not allclose within tol={}, ignored: {what} (ignore_non_fp)",
                opts.tol
            ),
        )
    } else {
        verdict(
            false,
            format!("not allclose within tol={}, and {what}", opts.tol),
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Tensor {
        Tensor::from_slice(v)
    }

    fn full(n: i64, value: f64, kind: Kind) -> Tensor {
        Tensor::full([n], value, (kind, tch::Device::Cpu))
    }

    fn one(
        reference: Tensor,
        result: Tensor,
        fp64: Option<Tensor>,
        opts: &SameOptions,
    ) -> OutputVerdict {
        let fp64: Option<Vec<Tensor>> = fp64.map(|t| vec![t]);
        let report = same(&[reference], &[result], fp64.as_deref(), opts);
        assert_eq!(report.outputs.len(), 1);
        report.outputs[0].clone()
    }

    /// ref 0.01 and res `res` away from a zero float64 reference, `n` elements.
    fn rmse_case(n: i64, res: f64, kind: Kind, opts: &SameOptions) -> OutputVerdict {
        one(
            full(n, 0.01, kind),
            full(n, res, kind),
            Some(full(n, 0.0, Kind::Double)),
            opts,
        )
    }

    #[test]
    fn options() {
        let d = SameOptions::default();
        assert_eq!((d.tol, d.equal_nan, d.exact_dtype), (1e-4, false, true));
        let r = SameOptions::repro();
        assert_eq!(
            (r.tol, r.equal_nan, r.exact_dtype, r.ignore_non_fp),
            (1e-3, true, true, false)
        );
    }

    #[test]
    fn exact_match_passes() {
        let v = one(
            f32s(&[1.0, 2.0]),
            f32s(&[1.0, 2.0]),
            None,
            &SameOptions::default(),
        );
        assert!(v.passed, "{v:?}");
        assert_eq!(v.reason, "allclose within tol=0.0001");
        assert_eq!(v.max_abs_diff, Some(0.0));
        assert_eq!(v.meta, "f32[2]");
    }

    #[test]
    fn tiny_noise_passes_allclose() {
        let v = one(
            f32s(&[1.0, -2.0, 3.0]),
            f32s(&[1.000_01, -2.000_02, 3.0]),
            None,
            &SameOptions::default(),
        );
        assert!(v.passed, "{v:?}");
        assert!(v.max_abs_diff.unwrap() > 0.0 && v.max_abs_diff.unwrap() < 1e-4);
        assert_eq!(v.res_error, None);
    }

    #[test]
    fn rmse_rule_passes_when_result_no_worse_than_twice_the_reference() {
        // 2000 elements: multiplier 2; res error 0.015 <= 2 x 0.01.
        let v = rmse_case(2000, 0.015, Kind::Float, &SameOptions::default());
        assert!(v.passed, "{v:?}");
        assert_eq!(v.multiplier, Some(2.0));
        assert!((v.ref_error.unwrap() - 0.01).abs() < 1e-6);
        assert!((v.res_error.unwrap() - 0.015).abs() < 1e-6);
        assert!(v.reason.starts_with("not allclose within tol=0.0001, but RMSE (res-fp64) 1.500000e-2 <= 2.0 x RMSE (ref-fp64) 1.000000e-2 + tol/10 1.000000e-5"), "{}", v.reason);
    }

    #[test]
    fn rmse_rule_fails_when_result_much_worse() {
        let v = rmse_case(2000, 0.025, Kind::Float, &SameOptions::default());
        assert!(!v.passed, "{v:?}");
        assert_eq!(
            v.reason,
            "RMSE (res-fp64) 2.500000e-2 > 2.0 x RMSE (ref-fp64) 1.000000e-2 + tol/10 1.000000e-5"
        );
        assert!((v.max_abs_diff.unwrap() - 0.015).abs() < 1e-6);
    }

    #[test]
    fn half_precision_gets_multiplier_three() {
        let opts = SameOptions::default();
        for kind in [Kind::Half, Kind::BFloat16] {
            let v = rmse_case(2000, 0.025, kind, &opts);
            assert!(v.passed, "{kind:?}: {v:?}");
            assert_eq!(v.multiplier, Some(3.0));
        }
        assert!(!rmse_case(2000, 0.035, Kind::Half, &opts).passed);
    }

    #[test]
    fn multiplier_rules() {
        let opts = SameOptions::default();
        // Fewer than 1000 elements: 3; 1000 or more: 2.
        let small = rmse_case(999, 0.025, Kind::Float, &opts);
        assert!(small.passed && small.multiplier == Some(3.0), "{small:?}");
        let large = rmse_case(1000, 0.025, Kind::Float, &opts);
        assert!(!large.passed && large.multiplier == Some(2.0), "{large:?}");
        // 1x1 kernels: 3 even when large.
        let kernel = one(
            Tensor::full([64, 32, 1, 1], 0.01, (Kind::Float, tch::Device::Cpu)),
            Tensor::full([64, 32, 1, 1], 0.025, (Kind::Float, tch::Device::Cpu)),
            Some(Tensor::zeros(
                [64, 32, 1, 1],
                (Kind::Double, tch::Device::Cpu),
            )),
            &opts,
        );
        assert!(
            kernel.passed && kernel.multiplier == Some(3.0),
            "{kernel:?}"
        );
        // A large tol (>= 2e-2) means 3.
        let loose = SameOptions {
            tol: 2e-3 * 10.0,
            ..SameOptions::default()
        };
        let v = rmse_case(2000, 0.055, Kind::Float, &loose);
        assert_eq!(v.multiplier, Some(3.0), "{v:?}");
        // Larger multipliers for smaller tensors, when asked.
        let larger = SameOptions {
            use_larger_multiplier_for_smaller_tensor: true,
            ..SameOptions::default()
        };
        assert_eq!(
            rmse_case(10, 0.09, Kind::Float, &larger).multiplier,
            Some(10.0)
        );
        assert!(rmse_case(10, 0.09, Kind::Float, &larger).passed);
        assert_eq!(
            rmse_case(500, 0.07, Kind::Float, &larger).multiplier,
            Some(8.0)
        );
        assert_eq!(
            rmse_case(501, 0.025, Kind::Float, &larger).multiplier,
            Some(3.0)
        );
        let forced = SameOptions {
            force_max_multiplier: true,
            ..SameOptions::default()
        };
        let v = rmse_case(2000, 0.09, Kind::Float, &forced);
        assert!(v.passed && v.multiplier == Some(10.0), "{v:?}");
    }

    #[test]
    fn nan_handling() {
        let nan = f32::NAN;
        // NaN in the same places: equal with equal_nan, not without.
        let eq = SameOptions {
            equal_nan: true,
            ..SameOptions::default()
        };
        let v = one(f32s(&[nan, 1.0]), f32s(&[nan, 1.0]), None, &eq);
        assert!(v.passed && v.max_abs_diff == Some(0.0), "{v:?}");
        let v = one(
            f32s(&[nan, 1.0]),
            f32s(&[nan, 1.0]),
            None,
            &SameOptions::default(),
        );
        assert!(!v.passed, "{v:?}");
        // As PyTorch's test_nan: NaN vs NaN with a finite fp64 reference passes with equal_nan.
        let fp = Tensor::from_slice(&[5.0f64]);
        let v = one(f32s(&[nan]), f32s(&[nan]), Some(fp.shallow_clone()), &eq);
        assert!(v.passed, "{v:?}");
        // Without equal_nan both RMSEs are NaN and the check fails.
        let v = one(
            f32s(&[nan]),
            f32s(&[nan]),
            Some(fp),
            &SameOptions::default(),
        );
        assert!(!v.passed && v.res_error.unwrap().is_nan(), "{v:?}");
        // The reference has NaN, the result has none and matches the fp64 reference: pass.
        let v = one(
            f32s(&[nan, 2.0]),
            f32s(&[1.01, 2.0]),
            Some(Tensor::from_slice(&[1.0f64, 2.0])),
            &SameOptions::default(),
        );
        assert!(
            v.passed && v.reason.starts_with("reference has NaN"),
            "{v:?}"
        );
        // A NaN in the result only is infinitely far off.
        let v = one(
            f32s(&[1.0, 2.0]),
            f32s(&[nan, 2.0]),
            Some(Tensor::from_slice(&[1.0f64, 2.0])),
            &eq,
        );
        assert!(!v.passed && v.max_abs_diff == Some(f64::INFINITY), "{v:?}");
    }

    #[test]
    fn dtype_shape_and_count_mismatches() {
        let opts = SameOptions::default();
        let v = one(f32s(&[1.0]), Tensor::from_slice(&[1.0f64]), None, &opts);
        assert!(!v.passed);
        assert_eq!(v.reason, "dtype mismatch: reference f32 vs result f64");
        let loose = SameOptions {
            exact_dtype: false,
            ..SameOptions::default()
        };
        assert!(one(f32s(&[1.0]), Tensor::from_slice(&[1.0f64]), None, &loose).passed);

        let v = one(
            f32s(&[1.0, 2.0]),
            f32s(&[1.0, 2.0]).reshape([1, 2]),
            None,
            &opts,
        );
        assert!(!v.passed);
        assert_eq!(
            v.reason,
            "shape mismatch: reference f32[2] vs result f32[1, 2]"
        );

        let r = same(&[f32s(&[1.0]), f32s(&[2.0])], &[f32s(&[1.0])], None, &opts);
        assert!(!r.passed());
        assert!(r.outputs[0].passed);
        let miss = r.first_failure().unwrap();
        assert_eq!((miss.index, miss.meta.as_str()), (1, "missing"));
        assert!(
            miss.reason
                .contains("reference has 2 outputs, result has 1"),
            "{}",
            miss.reason
        );
        let r = same(&[], &[f32s(&[1.0])], None, &opts);
        assert!(r.first_failure().unwrap().reason.contains("extra"));
        assert!(same(&[], &[], None, &opts).passed());
    }

    #[test]
    fn bool_outputs() {
        let a = Tensor::from_slice(&[true, false, true]);
        let b = Tensor::from_slice(&[true, true, false]);
        let opts = SameOptions::default();
        assert!(one(a.shallow_clone(), a.copy(), None, &opts).passed);
        let v = one(a.shallow_clone(), b.shallow_clone(), None, &opts);
        assert!(!v.passed);
        assert_eq!(v.reason, "bool values differ at 2 of 3 elements");
        assert_eq!(v.max_abs_diff, Some(1.0));
        let ignore = SameOptions {
            ignore_non_fp: true,
            ..SameOptions::default()
        };
        let v = one(a, b, None, &ignore);
        assert!(v.passed && v.reason.contains("ignore_non_fp"), "{v:?}");
    }

    #[test]
    fn integer_outputs() {
        let a = Tensor::from_slice(&[1i64, 2, 3]);
        let b = Tensor::from_slice(&[1i64, 2, 4]);
        let opts = SameOptions::default();
        assert!(one(a.shallow_clone(), a.copy(), None, &opts).passed);
        // An integer fp64 "reference" (integers stay integers in a float64 run) cannot judge.
        let v = one(a.shallow_clone(), b.shallow_clone(), Some(a.copy()), &opts);
        assert!(!v.passed);
        assert_eq!(
            v.reason,
            "not allclose within tol=0.0001, and a non-floating output"
        );
        assert_eq!(v.max_abs_diff, Some(1.0));
        let ignore = SameOptions {
            ignore_non_fp: true,
            ..SameOptions::default()
        };
        assert!(one(a, b, None, &ignore).passed);
    }

    #[test]
    fn without_fp64_reference() {
        let opts = SameOptions::default();
        // f32 outputs: no RMSE rule.
        let v = one(f32s(&[1.0]), f32s(&[1.1]), None, &opts);
        assert!(!v.passed && v.res_error.is_none());
        assert_eq!(
            v.reason,
            "not allclose within tol=0.0001, and no float64 reference"
        );
        // f64 outputs: the reference itself is the float64 reference (ref error 0), so the
        // result must be within tol/10 in RMSE.
        let r = Tensor::from_slice(&[1.0f64, 2.0]);
        let v = one(r.shallow_clone(), &r + 0.5, None, &opts);
        assert!(!v.passed && v.ref_error == Some(0.0), "{v:?}");
        let v = one(
            r.shallow_clone(),
            &r + 0.5,
            None,
            &SameOptions { tol: 10.0, ..opts },
        );
        assert!(v.passed);
    }

    #[test]
    fn complex_outputs() {
        let re = Tensor::from_slice(&[1.0f32, 2.0]);
        let a = Tensor::complex(&re, &re);
        let b = Tensor::complex(&re, &(&re + 1.0));
        let opts = SameOptions::default();
        assert!(one(a.shallow_clone(), a.copy(), None, &opts).passed);
        let v = one(a, b, None, &opts);
        assert!(!v.passed && v.max_abs_diff == Some(1.0), "{v:?}");
    }

    #[test]
    fn report_text_and_json_are_deterministic() {
        let opts = SameOptions::default();
        let report = same(
            &[f32s(&[1.0, 2.0]), full(2000, 0.01, Kind::Float)],
            &[f32s(&[1.0, 2.0]), full(2000, 0.025, Kind::Float)],
            Some(&[
                Tensor::from_slice(&[1.0f64, 2.0]),
                full(2000, 0.0, Kind::Double),
            ]),
            &opts,
        );
        assert!(!report.passed());
        assert_eq!(
            report.to_string(),
            "accuracy: 1 of 2 outputs differ (first: output 1)\n\
             \x20 output 0 f32[2]: ok: allclose within tol=0.0001 (max abs diff 0.000000e0)\n\
             \x20 output 1 f32[2000]: FAIL: RMSE (res-fp64) 2.500000e-2 > 2.0 x RMSE (ref-fp64) 1.000000e-2 + tol/10 1.000000e-5 (max abs diff 1.500000e-2)\n"
        );
        let json = serde_json::to_string(&report).unwrap();
        let back: AccuracyReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, report);
        let ok = same(&[f32s(&[1.0])], &[f32s(&[1.0])], None, &opts);
        assert!(ok
            .to_string()
            .starts_with("accuracy: all 1 outputs match\n"));
    }

    #[test]
    fn undefined_tensors_fail_cleanly() {
        let v = one(Tensor::new(), f32s(&[1.0]), None, &SameOptions::default());
        assert!(!v.passed, "{v:?}");
        assert_eq!(v.reason, "reference is undefined");
        let v = one(Tensor::new(), Tensor::new(), None, &SameOptions::default());
        assert!(v.passed && v.meta == "undefined", "{v:?}");
    }

    #[test]
    fn cuda_results_are_compared_on_cpu() {
        if !tch::Cuda::is_available() {
            eprintln!("notice: no CUDA device, cuda_results_are_compared_on_cpu skipped");
            return;
        }
        let a = f32s(&[1.0, 2.0]);
        let v = one(
            a.shallow_clone(),
            a.to_device(tch::Device::Cuda(0)),
            None,
            &SameOptions::default(),
        );
        assert!(v.passed, "{v:?}");
    }
}

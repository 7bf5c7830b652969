//! Accuracy checks: the aten-level analogue of TorchDynamo's `torch._dynamo.utils.same()`,
//! made so that it cannot say "fine" about values that differ.
//!
//! [`same`] compares a compiled graph's outputs (`result`) with reference outputs
//! (`reference`: eager's, or a file a user trusts), optionally judged against a float64
//! run of the same graph (`fp64_ref`). Per output:
//!
//! 1. the output counts must match, then the dtypes (`exact_dtype`; otherwise the
//!    reference is cast to the result's dtype) and the shapes;
//! 2. bool and integer outputs must be equal element for element (no tolerance: an index
//!    off by one is wrong at any magnitude), unless `ignore_non_fp`;
//! 3. floating and complex outputs must agree on every non-finite element, position by
//!    position: NaN where the other has NaN (and only with `equal_nan`), +inf where +inf,
//!    -inf where -inf;
//! 4. on the finite elements, `allclose(atol = rtol = tol)` passes;
//! 5. otherwise TorchDynamo's float64 rule may still pass the output:
//!    `rmse(fp64, res) <= multiplier * rmse(fp64, ref) + tol / 10`, but only when the
//!    float64 run is finite there *and the reference itself is close to it*
//!    (`allclose` within [`LOOSE_TOL`]). PyTorch's rule lets a reference that is far from
//!    the truth excuse a result that is just as far; here a reference that is not
//!    credible cannot excuse anything. Without a float64 run, a float64 reference plays
//!    that role (as in PyTorch), so the result must be within `tol / 10` in RMSE;
//! 6. otherwise the output fails.
//!
//! Every failure names the output, its worst element (index) and both values there.
//! Tensors are compared on the CPU whatever devices they live on.

use std::fmt;

use graphbug_ir::Dtype;
use serde::{Deserialize, Serialize};
use tch::{Kind, TchError, Tensor};

use crate::dtype::{bits_dtype, describe, dtype_of, kind_of, tensor_dtype, view_bits};

/// How far (atol = rtol) a reference may be from the float64 run for the float64 RMSE
/// rule to trust it: PyTorch's own "loosely matches the float64 reference" tolerance.
pub const LOOSE_TOL: f64 = 4e-2;

/// Tolerances and switches of [`same`], named as in `torch._dynamo.utils.same()`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SameOptions {
    /// Absolute and relative tolerance of `allclose` (default `1e-4`).
    pub tol: f64,
    /// NaN equals NaN at the same position (default false).
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

/// One element of an output: where it is and both values there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Element {
    /// Its index, one entry per dimension (complex values add a last entry: 0 real,
    /// 1 imaginary).
    pub index: Vec<i64>,
    /// The reference's value there, as text (`nan`, `inf` and integers exactly).
    pub reference: String,
    /// The result's value there.
    pub result: String,
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "at [{}]: reference {}, result {}",
            index_text(&self.index),
            self.reference,
            self.result
        )
    }
}

/// How strictly a minifier compares outputs, as TorchDynamo's `--accuracy` option names
/// it: `accuracy` (the default) ignores non-floating outputs, so a float error quantized
/// into a flipped boolean does not count; `strict_accuracy` counts every output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccuracyMode {
    /// Non-floating outputs are ignored (`same(..., ignore_non_fp=True)`).
    #[default]
    Accuracy,
    /// Every output counts.
    StrictAccuracy,
}

impl AccuracyMode {
    /// The `same()` options of this mode (TorchDynamo's repro tolerance, NaN = NaN).
    pub fn options(self) -> SameOptions {
        SameOptions {
            ignore_non_fp: self == AccuracyMode::Accuracy,
            ..SameOptions::repro()
        }
    }

    /// `accuracy` or `strict_accuracy`.
    pub fn name(self) -> &'static str {
        match self {
            AccuracyMode::Accuracy => "accuracy",
            AccuracyMode::StrictAccuracy => "strict_accuracy",
        }
    }
}

/// Ends the report of a failure that only non-floating outputs show: the `accuracy`
/// mode does not see it, `strict_accuracy` does.
pub const ONLY_NON_FLOATING: &str =
    "only non-floating outputs differ, which the accuracy mode ignores: strict_accuracy sees it";

/// TorchDynamo's detection of wrong results: every output counts (strict, as PyTorch's
/// `repro_ignore_non_fp` default). The report of a failure, if any, ends with
/// [`ONLY_NON_FLOATING`] when the default `accuracy` mode would not see it.
pub fn detect(
    reference: &[Tensor],
    result: &[Tensor],
    fp64_ref: Option<&[Tensor]>,
) -> Option<String> {
    let strict = same(
        reference,
        result,
        fp64_ref,
        &AccuracyMode::StrictAccuracy.options(),
    );
    if strict.passed() {
        return None;
    }
    let mut text = strict.to_string().trim_end().to_string();
    if same(
        reference,
        result,
        fp64_ref,
        &AccuracyMode::Accuracy.options(),
    )
    .passed()
    {
        text.push_str(&format!("\n{ONLY_NON_FLOATING}"));
    }
    Some(text)
}

/// The mode a repro of a detected accuracy failure needs: `strict_accuracy` when only
/// non-floating outputs showed it (see [`detect`]), else `preferred`.
pub fn mode_for(report: &str, preferred: AccuracyMode) -> AccuracyMode {
    if report.contains(ONLY_NON_FLOATING) {
        AccuracyMode::StrictAccuracy
    } else {
        preferred
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
    /// Largest absolute difference between reference and result over the elements both
    /// have finite (a non-finite element that differs counts as infinity), when comparable.
    pub max_abs_diff: Option<f64>,
    /// The element that decided a failure: the first non-finite mismatch, or the largest
    /// difference.
    pub worst: Option<Element>,
    /// RMSE of the result against the float64 reference, when computed.
    pub res_error: Option<f64>,
    /// RMSE of the reference against the float64 reference, when computed.
    pub ref_error: Option<f64>,
    /// The RMSE multiplier applied, when the RMSE rule ran.
    pub multiplier: Option<f64>,
    /// How the deciding rule's measure compares with its limit (above 1 fails): the
    /// largest `|ref - res| / (tol + tol |res|)`, or the RMSE over its bound when the
    /// float64 rule decided; infinite for non-finite mismatches; `None` when no values
    /// were compared (a missing output, another shape or dtype).
    #[serde(default)]
    pub margin: Option<f64>,
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

    /// How far the failing outputs are beyond their tolerance: the largest margin among
    /// them (see [`OutputVerdict::margin`]); `None` when nothing failed, or a failure was
    /// not measured (a missing output, another shape or dtype: no edge to sit on).
    pub fn failure_margin(&self) -> Option<f64> {
        let failed: Vec<&OutputVerdict> = self.outputs.iter().filter(|o| !o.passed).collect();
        if failed.is_empty() || failed.iter().any(|o| o.margin.is_none()) {
            return None;
        }
        failed.iter().filter_map(|o| o.margin).reduce(f64::max)
    }
}

impl fmt::Display for AccuracyReport {
    /// A header line, then one line per output.
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
            writeln!(f, "  {o}")?;
        }
        Ok(())
    }
}

impl fmt::Display for OutputVerdict {
    /// `output <i> <meta>: ok|FAIL: <reason> (max abs diff <d>)`, and for a failure its
    /// worst element.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "output {} {}: {}: {}",
            self.index,
            self.meta,
            if self.passed { "ok" } else { "FAIL" },
            self.reason
        )?;
        if let Some(d) = self.max_abs_diff {
            write!(f, " (max abs diff {d:.6e})")?;
        }
        if let (false, Some(w)) = (self.passed, &self.worst) {
            write!(f, "; worst element {w}")?;
        }
        Ok(())
    }
}

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

impl OutputVerdict {
    fn new(index: usize, passed: bool, reason: String, meta: String) -> Self {
        OutputVerdict {
            index,
            passed,
            reason,
            max_abs_diff: None,
            worst: None,
            res_error: None,
            ref_error: None,
            multiplier: None,
            margin: None,
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
    fn margins_say_how_far_beyond_the_tolerance() {
        let opts = SameOptions::default();
        // allclose's measure, with no float64 reference to excuse anything: 3e-4 off
        // against 1e-4 + 1e-4 x 1.0003 is 1.5x the tolerance.
        let v = one(f32s(&[1.0]), f32s(&[1.0003]), None, &opts);
        assert!(!v.passed);
        let m = v.margin.unwrap();
        assert!((m - 1.5).abs() < 1e-3, "{m}");
        // Within tolerance: below 1.
        let v = one(f32s(&[1.0]), f32s(&[1.00005]), None, &opts);
        assert!(v.passed && v.margin.unwrap() < 1.0);
        // The float64 rule decides: the RMSE over its bound.
        let v = rmse_case(100, 0.02, Kind::Float, &opts);
        let want =
            v.res_error.unwrap() / (v.multiplier.unwrap() * v.ref_error.unwrap() + opts.tol / 10.0);
        assert_eq!(v.margin, Some(want));
        assert_eq!(v.passed, want <= 1.0);
        // NaN where the reference has a number: infinitely far.
        let v = one(f32s(&[1.0]), f32s(&[f32::NAN]), None, &opts);
        assert_eq!(v.margin, Some(f64::INFINITY));
        // A report's failure margin is its worst failing output's; a shape mismatch has none.
        let r = same(
            &[f32s(&[1.0]), f32s(&[1.0])],
            &[f32s(&[1.0003]), f32s(&[1.003])],
            None,
            &opts,
        );
        assert!((r.failure_margin().unwrap() - 14.98).abs() < 0.1, "{r}");
        let r = same(&[f32s(&[1.0])], &[f32s(&[1.0, 2.0])], None, &opts);
        assert_eq!(r.failure_margin(), None);
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
    fn unsigned_dtypes_tch_cannot_name_compare_exactly() {
        use crate::dtype::view_bits;
        let u64s = |v: &[i64]| view_bits(&Tensor::from_slice(v), Dtype::UInt64).unwrap();
        let opts = SameOptions::default();
        let same = one(u64s(&[-1, 5]), u64s(&[-1, 5]), None, &opts);
        assert!(same.passed, "{same:?}");
        assert_eq!(same.meta, "u64[2]");
        // 2^64-1 against 2^64-2: one bit apart, still a failure.
        let wrong = one(u64s(&[-1, 5]), u64s(&[-2, 5]), None, &opts);
        assert!(!wrong.passed, "{wrong:?}");
        let dtype = one(u64s(&[1]), Tensor::from_slice(&[1i64]), None, &opts);
        assert!(!dtype.passed, "{dtype:?}");
        assert_eq!(dtype.reason, "dtype mismatch: reference u64 vs result i64");
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
    fn nan_and_inf_must_match_position_by_position() {
        let (nan, inf) = (f32::NAN, f32::INFINITY);
        let eq = SameOptions {
            equal_nan: true,
            ..SameOptions::default()
        };
        // NaN in the same places: equal with equal_nan, not without.
        let v = one(f32s(&[nan, 1.0]), f32s(&[nan, 1.0]), None, &eq);
        assert!(v.passed && v.max_abs_diff == Some(0.0), "{v:?}");
        let v = one(
            f32s(&[nan, 1.0]),
            f32s(&[nan, 1.0]),
            None,
            &SameOptions::default(),
        );
        assert!(!v.passed && v.reason.contains("without equal_nan"), "{v:?}");
        // Infinities of the same sign in the same places are equal.
        let v = one(f32s(&[inf, -inf, 2.0]), f32s(&[inf, -inf, 2.0]), None, &eq);
        assert!(v.passed, "{v:?}");
        // A NaN, or an infinity, on one side only fails, whatever the float64 run says.
        let fp = Tensor::from_slice(&[1.0f64, 2.0]);
        for (reference, result, at, r, s) in [
            ([nan, 2.0], [1.0, 2.0], 0, "nan", "1e0"),
            ([1.0, 2.0], [nan, 2.0], 0, "1e0", "nan"),
            ([1.0, 2.0], [1.0, inf], 1, "2e0", "inf"),
            ([1.0, inf], [1.0, -inf], 1, "inf", "-inf"),
        ] {
            let v = one(
                f32s(&reference),
                f32s(&result),
                Some(fp.shallow_clone()),
                &eq,
            );
            assert!(!v.passed, "{reference:?} vs {result:?}: {v:?}");
            assert!(
                v.reason.starts_with("non-finite values differ at 1 of 2"),
                "{v:?}"
            );
            let w = v.worst.unwrap();
            assert_eq!(
                (w.index, w.reference.as_str(), w.result.as_str()),
                (vec![at], r, s)
            );
        }
        // A result that is NaN where the float64 run is NaN too (graphbug interprets the
        // graph wrongly in both precisions) fails against a finite reference.
        let v = one(
            f32s(&[1.0, 2.0]),
            f32s(&[nan, nan]),
            Some(Tensor::from_slice(&[f64::NAN, f64::NAN])),
            &eq,
        );
        assert!(!v.passed && v.max_abs_diff == Some(f64::INFINITY), "{v:?}");
    }

    /// A reference that is far from the truth cannot excuse anything: the float64 rule
    /// applies only when the reference is itself close to the float64 run.
    #[test]
    fn wrong_references_fail() {
        let truth: Vec<f64> = (0..80).map(|i| (f64::from(i) * 0.37).sin()).collect();
        let fp = Tensor::from_slice(&truth);
        let good = fp.to_kind(Kind::Float);
        let opts = SameOptions::repro();
        for (name, bogus) in [
            ("1e6", good.full_like(1e6)),
            ("zeros", good.zeros_like()),
            ("nan", good.full_like(f64::NAN)),
            ("negated", -&good),
            ("one element off", {
                let b = good.copy();
                let _ = b.get(17).fill_(5.0);
                b
            }),
        ] {
            let v = one(bogus, good.copy(), Some(fp.shallow_clone()), &opts);
            assert!(!v.passed, "{name}: {v:?}");
            assert!(v.worst.is_some(), "{name}: {v:?}");
        }
        // A credible reference still lets the float64 rule pass float noise.
        let noisy_ref = &good + Tensor::from_slice(&[2e-3f32]).repeat([80]);
        let v = one(noisy_ref, good.copy(), Some(fp.shallow_clone()), &opts);
        assert!(v.passed && v.reason.contains("but RMSE"), "{v:?}");
        // The worst element is named with both values.
        let off = good.copy();
        let _ = off.get(3).fill_(9.5);
        let v = one(good.copy(), off, Some(fp), &opts);
        let w = v.worst.as_ref().unwrap();
        assert_eq!(w.index, [3]);
        assert_eq!(w.result, "9.5e0");
        assert_eq!(w.reference, format!("{:e}", truth[3] as f32));
        assert!(
            v.to_string().contains("worst element at [3]: reference"),
            "{v:?}"
        );
    }

    /// Faults like those the accuracy backends inject: wrong results against a right
    /// reference fail by every rule.
    #[test]
    fn wrong_results_fail() {
        let fp = Tensor::from_slice(&[0.5f64, -1.0, 2.0, 4.0]).reshape([2, 2]);
        let r = fp.to_kind(Kind::Float);
        let opts = SameOptions::repro();
        for (name, res) in [
            ("plus one", &r + 1.0),
            ("relu as identity plus one", r.relu() + 1.0),
            ("zeros", r.zeros_like()),
            ("nan", r.full_like(f64::NAN)),
            ("inf", r.full_like(f64::INFINITY)),
        ] {
            let v = one(r.copy(), res, Some(fp.shallow_clone()), &opts);
            assert!(!v.passed, "{name}: {v:?}");
            assert_eq!(v.worst.as_ref().unwrap().index.len(), 2, "{name}");
        }
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
    fn integer_outputs_must_be_equal() {
        let a = Tensor::from_slice(&[1i64, 2, 3]);
        let b = Tensor::from_slice(&[1i64, 2, 4]);
        let opts = SameOptions::default();
        assert!(one(a.shallow_clone(), a.copy(), None, &opts).passed);
        let v = one(a.shallow_clone(), b.shallow_clone(), Some(a.copy()), &opts);
        assert!(!v.passed);
        assert_eq!(v.reason, "integer values differ at 1 of 3 elements");
        assert_eq!(v.max_abs_diff, Some(1.0));
        let w = v.worst.unwrap();
        assert_eq!(
            (w.index, w.reference, w.result),
            (vec![2], "3".into(), "4".into())
        );
        // No tolerance: allclose(tol=1e-3) would let 1001 pass for 1000.
        let big = Tensor::from_slice(&[1000i64]);
        let v = one(big.shallow_clone(), &big + 1, None, &SameOptions::repro());
        assert!(!v.passed, "{v:?}");
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
            "not allclose within tol=0.0001, and no float64 reference to judge by"
        );
        // Even when non-floating outputs are ignored, a float output is judged.
        let ignore = SameOptions {
            ignore_non_fp: true,
            ..SameOptions::default()
        };
        assert!(!one(f32s(&[1.0]), f32s(&[1.1]), None, &ignore).passed);
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
        // The worst element names the imaginary part (last index 1).
        assert_eq!(v.worst.unwrap().index, [0, 1]);
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
             \x20 output 1 f32[2000]: FAIL: RMSE (res-fp64) 2.500000e-2 > 2.0 x RMSE (ref-fp64) 1.000000e-2 + tol/10 1.000000e-5 (max abs diff 1.500000e-2); worst element at [0]: reference 1e-2, result 2.5e-2\n"
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

//! Accuracy checks on host tensors: TorchDynamo's `torch._dynamo.utils.same()`, made so
//! that it cannot say "fine" about values that differ, for every graph family graphbug
//! runs (aten graphs through libtorch, XLA programs through PJRT) and without libtorch.
//!
//! [`same`] compares a compiled graph's outputs (`result`) with reference outputs
//! (`reference`: eager's, or a file a user trusts), optionally judged against a float64
//! run of the same graph (`fp64_ref`). Outputs are [`HostTensor`]s (a dtype, a shape and
//! little-endian C-order bytes); `None` stands for an undefined tensor (libtorch's
//! `Tensor()`, an output a graph does not produce). Per output:
//!
//! 1. the output counts must match, then the dtypes (`exact_dtype`; otherwise the
//!    reference is converted to the result's dtype as libtorch's `to(dtype)` does) and
//!    the shapes; uint16/32/64 compare with their own dtype only;
//! 2. bool and integer outputs must be equal element for element (no tolerance: an index
//!    off by one is wrong at any magnitude), unless `ignore_non_fp`; integers compare
//!    exactly (as `i128`), int64 and uint64 beyond 2^53 included;
//! 3. floating and complex outputs must agree on every non-finite element, position by
//!    position: NaN where the other has NaN (and only with `equal_nan`), +inf where +inf,
//!    -inf where -inf (a complex element is two real ones, as `view_as_real` shows it);
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
//! Elements are read in float64 (float16 and bfloat16 exactly), in one pass over each
//! pair, without allocating per element.

mod elements;

use std::fmt;

pub use graphbug_files::HostTensor;
use graphbug_ir::Dtype;
use serde::{Deserialize, Serialize};

use elements::{convert, int_at, lane_at, scan_floats, scan_fp64, scan_ints, Lane};

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
    /// The mode `--strict-accuracy` asks for when `strict`, else TorchDynamo's default.
    pub fn strict_if(strict: bool) -> AccuracyMode {
        if strict {
            AccuracyMode::StrictAccuracy
        } else {
            AccuracyMode::Accuracy
        }
    }

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
    reference: &[Option<HostTensor>],
    result: &[Option<HostTensor>],
    fp64_ref: Option<&[Option<HostTensor>]>,
) -> Option<String> {
    detect_by(|opts| same(reference, result, fp64_ref, opts))
}

/// [`detect`] for outputs that `same` compares under the options it is given (a caller
/// that holds its outputs in another form, e.g. libtorch tensors copied to the host once).
pub fn detect_by(same: impl Fn(&SameOptions) -> AccuracyReport) -> Option<String> {
    let strict = same(&AccuracyMode::StrictAccuracy.options());
    if strict.passed() {
        return None;
    }
    let mut text = strict.to_string().trim_end().to_string();
    if same(&AccuracyMode::Accuracy.options()).passed() {
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
/// Compares `result` with `reference` output by output (see the crate docs).
///
/// `None` entries are undefined tensors. `fp64_ref`, when given, holds the same graph's
/// outputs computed in float64; entry `i` judges output `i` (a missing or undefined entry
/// falls back to the reference itself, as PyTorch does when no float64 reference exists).
/// Never fails: a host tensor whose bytes do not fit its dtype and shape fails its output
/// with a verdict that says so.
pub fn same(
    reference: &[Option<HostTensor>],
    result: &[Option<HostTensor>],
    fp64_ref: Option<&[Option<HostTensor>]>,
    opts: &SameOptions,
) -> AccuracyReport {
    let n = reference.len().max(result.len());
    let outputs = (0..n)
        .map(|i| match (reference.get(i), result.get(i)) {
            (Some(r), Some(s)) => {
                let fp64 = fp64_ref.and_then(|f| f.get(i)).and_then(Option::as_ref);
                compare(i, r.as_ref(), s.as_ref(), fp64, opts)
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
                describe(s.as_ref()),
            ),
            (None, None) => unreachable!("invariant: i < max(len) so one side has output i"),
        })
        .collect();
    AccuracyReport { outputs }
}

impl OutputVerdict {
    /// A verdict with a reason and nothing measured.
    pub fn new(index: usize, passed: bool, reason: String, meta: String) -> Self {
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

/// `tensor` in double precision, as a float64 reference run takes it: float16, bfloat16
/// and float32 become float64 and complex64 complex128, exactly; other dtypes are returned
/// as they are.
pub fn to_fp64(tensor: &HostTensor) -> HostTensor {
    let to = match tensor.dtype {
        Dtype::Float16 | Dtype::BFloat16 | Dtype::Float32 => Dtype::Float64,
        Dtype::Complex64 => Dtype::Complex128,
        _ => return tensor.clone(),
    };
    // A tensor whose bytes do not fit its shape stays as it is, for `same` to report.
    if checked_numel(tensor, "tensor").is_err() {
        return tensor.clone();
    }
    HostTensor {
        dtype: to,
        shape: tensor.shape.clone(),
        data: convert(&tensor.data, tensor.dtype, tensor.numel(), to),
        strides: tensor.strides.clone(),
    }
}

/// The elements of a floating tensor as float64 (float16 and bfloat16 exactly), for
/// statistics; `None` for other dtypes (complex included).
pub fn float_values(tensor: &HostTensor) -> Option<Vec<f64>> {
    let lane = Lane::of(tensor.dtype).filter(|_| !tensor.dtype.is_complex())?;
    checked_numel(tensor, "tensor").ok()?;
    Some(
        (0..tensor.numel())
            .map(|i| lane_at(&tensor.data, lane, i))
            .collect(),
    )
}

/// A short description such as `f32[2, 3]`; `undefined` for `None`.
pub fn describe(tensor: Option<&HostTensor>) -> String {
    match tensor {
        None => "undefined".to_string(),
        Some(t) => shape_text(t.dtype, &t.shape),
    }
}

fn shape_text(dtype: Dtype, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("{}[{}]", dtype.short_name(), dims.join(", "))
}

fn is_unsigned_wide(dtype: Dtype) -> bool {
    matches!(dtype, Dtype::UInt16 | Dtype::UInt32 | Dtype::UInt64)
}

/// `Ok(numel)` when `t`'s bytes are exactly what its dtype and shape need.
fn checked_numel(t: &HostTensor, what: &str) -> Result<usize, String> {
    let numel = t
        .shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d));
    match numel.and_then(|n| n.checked_mul(t.dtype.itemsize()).map(|b| (n, b))) {
        Some((n, bytes)) if bytes == t.data.len() => Ok(n),
        Some((_, bytes)) => Err(format!(
            "the {what} {} needs {bytes} bytes of data, but has {}",
            describe(Some(t)),
            t.data.len()
        )),
        None => Err(format!(
            "the {what} {} is too large to address",
            describe(Some(t))
        )),
    }
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
    Single,
    Double,
}

impl Show {
    fn of(dtype: Dtype) -> Show {
        match dtype {
            Dtype::Float64 | Dtype::Complex128 => Show::Double,
            _ => Show::Single,
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
            Show::Single => format!("{:e}", value as f32),
            Show::Double => format!("{value:e}"),
        }
    }
}

/// `3, 7` for index `[3, 7]`.
fn index_text(index: &[i64]) -> String {
    index
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// TorchDynamo's `get_multiplier()`: how much worse than the reference the result may be.
fn multiplier(res_dtype: Dtype, ref_shape: &[usize], numel: usize, opts: &SameOptions) -> f64 {
    if opts.force_max_multiplier {
        return 10.0;
    }
    // Mixed precision (f16/bf16) gets 3 to avoid false alarms; everything else 2.
    let base = if matches!(res_dtype, Dtype::Float16 | Dtype::BFloat16) {
        3.0
    } else {
        2.0
    };
    let one_by_one_kernel = matches!(ref_shape, [_, _, 1, 1]);
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

/// A floating or complex tensor seen as float64 lanes: its data, lane type, and the
/// shape of `view_as_real` (a trailing 2 for complex).
struct Lanes<'a> {
    data: &'a [u8],
    lane: Lane,
    shape: Vec<i64>,
}

impl<'a> Lanes<'a> {
    fn of(data: &'a [u8], dtype: Dtype, shape: &[usize]) -> Option<Lanes<'a>> {
        let mut dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        if dtype.is_complex() {
            dims.push(2);
        }
        Some(Lanes {
            data,
            lane: Lane::of(dtype)?,
            shape: dims,
        })
    }

    fn count(&self) -> usize {
        self.shape.iter().product::<i64>() as usize
    }

    fn at(&self, flat: usize) -> f64 {
        lane_at(self.data, self.lane, flat)
    }

    /// `f64[..]` of the real view's shape.
    fn describe(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(i64::to_string).collect();
        format!("f64[{}]", dims.join(", "))
    }
}

fn compare(
    index: usize,
    reference: Option<&HostTensor>,
    result: Option<&HostTensor>,
    fp64_ref: Option<&HostTensor>,
    opts: &SameOptions,
) -> OutputVerdict {
    let meta = describe(result);
    let verdict =
        |passed: bool, reason: String| OutputVerdict::new(index, passed, reason, meta.clone());
    let (r, s) = match (reference, result) {
        (Some(r), Some(s)) => (r, s),
        (None, None) => return verdict(true, "both undefined".to_string()),
        (None, Some(_)) => return verdict(false, "reference is undefined".to_string()),
        (Some(_), None) => return verdict(false, "result is undefined".to_string()),
    };
    let numel = match checked_numel(r, "reference").and_then(|_| checked_numel(s, "result")) {
        Ok(n) => n,
        Err(e) => return verdict(false, format!("cannot compare: {e}")),
    };
    // uint16/32/64 compare with their own dtype only (libtorch converts them to nothing
    // else the comparison could use).
    if (is_unsigned_wide(r.dtype) || is_unsigned_wide(s.dtype) || opts.exact_dtype)
        && r.dtype != s.dtype
    {
        return verdict(
            false,
            format!(
                "dtype mismatch: reference {} vs result {}",
                r.dtype.short_name(),
                s.dtype.short_name()
            ),
        );
    }
    if r.shape != s.shape {
        return verdict(
            false,
            format!(
                "shape mismatch: reference {} vs result {}",
                describe(Some(r)),
                describe(Some(s))
            ),
        );
    }
    let converted;
    let r_data: &[u8] = if r.dtype != s.dtype {
        converted = convert(&r.data, r.dtype, numel, s.dtype);
        &converted
    } else {
        &r.data
    };
    let dtype = s.dtype;
    if Lane::of(dtype).is_some() {
        if let Some(Err(e)) = fp64_ref.map(|f| checked_numel(f, "float64 reference")) {
            return verdict(false, format!("cannot compare: {e}"));
        }
        let lanes = |data| Lanes::of(data, dtype, &s.shape).expect("invariant: floating dtype");
        return compare_floats(
            lanes(r_data),
            lanes(&s.data),
            dtype,
            &s.shape,
            fp64_ref,
            opts,
            verdict,
        );
    }

    // Bools and integers: equal element for element.
    let what = if dtype == Dtype::Bool {
        "bool"
    } else {
        "integer"
    };
    let scan = scan_ints(r_data, &s.data, dtype);
    let mut v = if scan.differing == 0 {
        verdict(true, format!("{what} values equal"))
    } else if opts.ignore_non_fp {
        verdict(
            true,
            format!(
                "{what} values differ at {} of {numel} elements, ignored (ignore_non_fp)",
                scan.differing
            ),
        )
    } else {
        let mut v = verdict(
            false,
            format!(
                "{what} values differ at {} of {numel} elements",
                scan.differing
            ),
        );
        if let Some((flat, _)) = scan.largest {
            let shape: Vec<i64> = s.shape.iter().map(|&d| d as i64).collect();
            v.worst = Some(Element {
                index: unravel(flat as i64, &shape),
                reference: int_at(r_data, dtype, flat).to_string(),
                result: int_at(&s.data, dtype, flat).to_string(),
            });
        }
        v
    };
    v.max_abs_diff = scan.largest.map(|(_, d)| d as f64);
    v
}

/// Steps 3 to 6 of the crate docs for floating and complex outputs of `dtype`: `rd` and
/// `sd` are the reference (already of `dtype`) and the result as lanes.
fn compare_floats(
    rd: Lanes<'_>,
    sd: Lanes<'_>,
    dtype: Dtype,
    shape: &[usize],
    fp: Option<&HostTensor>,
    opts: &SameOptions,
    verdict: impl Fn(bool, String) -> OutputVerdict,
) -> OutputVerdict {
    let show = Show::of(dtype);
    let n = rd.count();
    if n == 0 {
        return verdict(true, "both empty".to_string());
    }
    let element = |flat: usize| Element {
        index: unravel(flat as i64, &rd.shape),
        reference: show.text(rd.at(flat)),
        result: show.text(sd.at(flat)),
    };
    // 3. Non-finite elements, position by position (one pass also measures step 4).
    let scan = scan_floats(rd.data, sd.data, rd.lane, opts.tol, opts.equal_nan);
    if let Some(flat) = scan.first_mismatch {
        let mut v = verdict(
            false,
            format!(
                "non-finite values differ at {} of {n} elements{}",
                scan.mismatches,
                if !opts.equal_nan && scan.both_nan {
                    " (NaN against NaN counts as different without equal_nan)"
                } else {
                    ""
                }
            ),
        );
        v.max_abs_diff = Some(f64::INFINITY);
        v.margin = Some(f64::INFINITY);
        v.worst = Some(element(flat));
        return v;
    }
    // 4. allclose on the elements both have finite.
    let with_worst = |mut v: OutputVerdict| -> OutputVerdict {
        match scan.largest {
            Some((flat, d)) => {
                v.max_abs_diff = Some(d);
                v.worst = Some(element(flat));
            }
            None => v.max_abs_diff = Some(0.0),
        }
        v.margin = Some(scan.close_ratio);
        v
    };
    if scan.allclose {
        return with_worst(verdict(true, format!("allclose within tol={}", opts.tol)));
    }
    // 5. The float64 rule, with a credible reference only.
    let not_close = format!("not allclose within tol={}", opts.tol);
    let fpd = match fp {
        Some(f) if matches!(f.dtype, Dtype::Float64 | Dtype::Complex128) => {
            let f = Lanes::of(&f.data, f.dtype, &f.shape).expect("invariant: floating dtype");
            if f.shape != rd.shape {
                return with_worst(verdict(
                    false,
                    format!(
                        "{not_close}, and the float64 reference {} does not fit the reference {}",
                        f.describe(),
                        shape_text(dtype, shape)
                    ),
                ));
            }
            f
        }
        // Without a float64 run, a float64 reference is its own (PyTorch's fallback).
        None if matches!(dtype, Dtype::Float64 | Dtype::Complex128) => Lanes {
            data: rd.data,
            lane: Lane::F64,
            shape: rd.shape.clone(),
        },
        _ => {
            return with_worst(verdict(
                false,
                format!("{not_close}, and no float64 reference to judge by"),
            ))
        }
    };
    let fps = scan_fp64(rd.data, sd.data, rd.lane, fpd.data, LOOSE_TOL);
    if let Some(flat) = fps.first_not_finite {
        return with_worst(verdict(
            false,
            format!(
                "{not_close}, and the float64 run is not finite where both are (float64 {} at [{}]), so it cannot judge",
                Show::Double.text(fpd.at(flat)),
                index_text(&unravel(flat as i64, &rd.shape))
            ),
        ));
    }
    if !fps.loose_close {
        let flat = fps
            .loose_worst
            .expect("invariant: allclose failed, so some element is finite");
        return with_worst(verdict(
            false,
            format!(
                "{not_close}; the float64 rule does not apply: the reference itself is not within {LOOSE_TOL} of graphbug's float64 run (at [{}]: reference {}, float64 {})",
                index_text(&unravel(flat as i64, &rd.shape)),
                show.text(rd.at(flat)),
                Show::Double.text(fpd.at(flat))
            ),
        ));
    }
    let (ref_error, res_error) = (fps.ref_error, fps.res_error);
    let numel = shape.iter().product();
    let m = multiplier(dtype, shape, numel, opts);
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
    let mut v = with_worst(verdict(passed, reason));
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
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    type T = Option<HostTensor>;

    fn host(dtype: Dtype, shape: &[usize], data: Vec<u8>) -> T {
        Some(HostTensor::new(dtype, shape.to_vec(), data).expect("test data fits its shape"))
    }

    /// `values` converted to `dtype` as libtorch's `to(dtype)` would (a 1-d tensor).
    fn of(dtype: Dtype, values: &[f64]) -> T {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let data = convert(&bytes, Dtype::Float64, values.len(), dtype);
        host(dtype, &[values.len()], data)
    }

    fn f32s(v: &[f32]) -> T {
        host(
            Dtype::Float32,
            &[v.len()],
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        )
    }

    fn f64s(v: &[f64]) -> T {
        of(Dtype::Float64, v)
    }

    fn i64s(v: &[i64]) -> T {
        host(
            Dtype::Int64,
            &[v.len()],
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        )
    }

    fn full(n: usize, value: f64, dtype: Dtype) -> T {
        of(dtype, &vec![value; n])
    }

    fn reshape(t: T, shape: &[usize]) -> T {
        let t = t.unwrap();
        host(t.dtype, shape, t.data)
    }

    /// Element `i` of a float32 tensor set to `value`.
    fn set(t: &T, i: usize, value: f32) -> T {
        let mut t = t.clone().unwrap();
        t.data[4 * i..4 * i + 4].copy_from_slice(&value.to_le_bytes());
        Some(t)
    }

    /// A float32 tensor's values mapped by `f`.
    fn map(t: &T, f: impl Fn(f32) -> f32) -> T {
        let t = t.clone().unwrap();
        let data = t
            .data
            .chunks_exact(4)
            .flat_map(|b| f(f32::from_le_bytes(b.try_into().unwrap())).to_le_bytes())
            .collect();
        host(t.dtype, &t.shape, data)
    }

    fn one(reference: T, result: T, fp64: T, opts: &SameOptions) -> OutputVerdict {
        let fp64 = fp64.map(|t| vec![Some(t)]);
        let report = same(&[reference], &[result], fp64.as_deref(), opts);
        assert_eq!(report.outputs.len(), 1);
        report.outputs[0].clone()
    }

    /// ref 0.01 and res `res` away from a zero float64 reference, `n` elements.
    fn rmse_case(n: usize, res: f64, dtype: Dtype, opts: &SameOptions) -> OutputVerdict {
        one(
            full(n, 0.01, dtype),
            full(n, res, dtype),
            full(n, 0.0, Dtype::Float64),
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
        let v = rmse_case(100, 0.02, Dtype::Float32, &opts);
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
        assert_eq!(AccuracyMode::Accuracy.name(), "accuracy");
        assert!(AccuracyMode::Accuracy.options().ignore_non_fp);
        assert!(!AccuracyMode::StrictAccuracy.options().ignore_non_fp);
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
    fn unsigned_dtypes_compare_exactly() {
        let u64s = |v: &[u64]| {
            host(
                Dtype::UInt64,
                &[v.len()],
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            )
        };
        let opts = SameOptions::default();
        let same_values = one(u64s(&[u64::MAX, 5]), u64s(&[u64::MAX, 5]), None, &opts);
        assert!(same_values.passed, "{same_values:?}");
        assert_eq!(same_values.meta, "u64[2]");
        // 2^64-1 against 2^64-2: one apart, still a failure, and both values exact.
        let wrong = one(u64s(&[u64::MAX, 5]), u64s(&[u64::MAX - 1, 5]), None, &opts);
        assert!(!wrong.passed, "{wrong:?}");
        assert_eq!(wrong.max_abs_diff, Some(1.0));
        let w = wrong.worst.unwrap();
        assert_eq!(
            (w.reference.as_str(), w.result.as_str()),
            ("18446744073709551615", "18446744073709551614")
        );
        let dtype = one(u64s(&[1]), i64s(&[1]), None, &opts);
        assert!(!dtype.passed, "{dtype:?}");
        assert_eq!(dtype.reason, "dtype mismatch: reference u64 vs result i64");
        // Even when dtypes need not match: uint64 converts to nothing comparable.
        let loose = SameOptions {
            exact_dtype: false,
            ..SameOptions::default()
        };
        let dtype = one(u64s(&[1]), i64s(&[1]), None, &loose);
        assert_eq!(dtype.reason, "dtype mismatch: reference u64 vs result i64");
        // A shape mismatch names the unsigned dtype.
        let v = one(u64s(&[1, 2]), reshape(u64s(&[1, 2]), &[1, 2]), None, &opts);
        assert_eq!(
            v.reason,
            "shape mismatch: reference u64[2] vs result u64[1, 2]"
        );
    }

    #[test]
    fn int64_beyond_two_to_the_53_compares_exactly() {
        let big = 1i64 << 53;
        let v = one(
            i64s(&[big + 1]),
            i64s(&[big]),
            None,
            &SameOptions::default(),
        );
        assert!(!v.passed, "{v:?}");
        let w = v.worst.unwrap();
        assert_eq!(
            (w.reference.as_str(), w.result.as_str()),
            ("9007199254740993", "9007199254740992")
        );
        let v = one(
            i64s(&[i64::MAX]),
            i64s(&[i64::MIN]),
            None,
            &SameOptions::default(),
        );
        assert_eq!(v.max_abs_diff, Some(u64::MAX as f64));
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
        let v = rmse_case(2000, 0.015, Dtype::Float32, &SameOptions::default());
        assert!(v.passed, "{v:?}");
        assert_eq!(v.multiplier, Some(2.0));
        assert!((v.ref_error.unwrap() - 0.01).abs() < 1e-6);
        assert!((v.res_error.unwrap() - 0.015).abs() < 1e-6);
        assert!(v.reason.starts_with("not allclose within tol=0.0001, but RMSE (res-fp64) 1.500000e-2 <= 2.0 x RMSE (ref-fp64) 1.000000e-2 + tol/10 1.000000e-5"), "{}", v.reason);
    }

    #[test]
    fn rmse_rule_fails_when_result_much_worse() {
        let v = rmse_case(2000, 0.025, Dtype::Float32, &SameOptions::default());
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
        for dtype in [Dtype::Float16, Dtype::BFloat16] {
            let v = rmse_case(2000, 0.025, dtype, &opts);
            assert!(v.passed, "{dtype:?}: {v:?}");
            assert_eq!(v.multiplier, Some(3.0));
        }
        assert!(!rmse_case(2000, 0.035, Dtype::Float16, &opts).passed);
    }

    #[test]
    fn multiplier_rules() {
        let opts = SameOptions::default();
        // Fewer than 1000 elements: 3; 1000 or more: 2.
        let small = rmse_case(999, 0.025, Dtype::Float32, &opts);
        assert!(small.passed && small.multiplier == Some(3.0), "{small:?}");
        let large = rmse_case(1000, 0.025, Dtype::Float32, &opts);
        assert!(!large.passed && large.multiplier == Some(2.0), "{large:?}");
        // 1x1 kernels: 3 even when large.
        let shape = [64, 32, 1, 1];
        let kernel = one(
            reshape(full(2048, 0.01, Dtype::Float32), &shape),
            reshape(full(2048, 0.025, Dtype::Float32), &shape),
            reshape(full(2048, 0.0, Dtype::Float64), &shape),
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
        let v = rmse_case(2000, 0.055, Dtype::Float32, &loose);
        assert_eq!(v.multiplier, Some(3.0), "{v:?}");
        // Larger multipliers for smaller tensors, when asked.
        let larger = SameOptions {
            use_larger_multiplier_for_smaller_tensor: true,
            ..SameOptions::default()
        };
        assert_eq!(
            rmse_case(10, 0.09, Dtype::Float32, &larger).multiplier,
            Some(10.0)
        );
        assert!(rmse_case(10, 0.09, Dtype::Float32, &larger).passed);
        assert_eq!(
            rmse_case(500, 0.07, Dtype::Float32, &larger).multiplier,
            Some(8.0)
        );
        assert_eq!(
            rmse_case(501, 0.025, Dtype::Float32, &larger).multiplier,
            Some(3.0)
        );
        let forced = SameOptions {
            force_max_multiplier: true,
            ..SameOptions::default()
        };
        let v = rmse_case(2000, 0.09, Dtype::Float32, &forced);
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
        let fp = f64s(&[1.0, 2.0]);
        for (reference, result, at, r, s) in [
            ([nan, 2.0], [1.0, 2.0], 0, "nan", "1e0"),
            ([1.0, 2.0], [nan, 2.0], 0, "1e0", "nan"),
            ([1.0, 2.0], [1.0, inf], 1, "2e0", "inf"),
            ([1.0, inf], [1.0, -inf], 1, "inf", "-inf"),
        ] {
            let v = one(f32s(&reference), f32s(&result), fp.clone(), &eq);
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
            f64s(&[f64::NAN, f64::NAN]),
            &eq,
        );
        assert!(!v.passed && v.max_abs_diff == Some(f64::INFINITY), "{v:?}");
    }

    /// A reference that is far from the truth cannot excuse anything: the float64 rule
    /// applies only when the reference is itself close to the float64 run.
    #[test]
    fn wrong_references_fail() {
        let truth: Vec<f64> = (0..80).map(|i| (f64::from(i) * 0.37).sin()).collect();
        let fp = f64s(&truth);
        let good = of(Dtype::Float32, &truth);
        let opts = SameOptions::repro();
        for (name, bogus) in [
            ("1e6", map(&good, |_| 1e6)),
            ("zeros", map(&good, |_| 0.0)),
            ("nan", map(&good, |_| f32::NAN)),
            ("negated", map(&good, |x| -x)),
            ("one element off", set(&good, 17, 5.0)),
        ] {
            let v = one(bogus, good.clone(), fp.clone(), &opts);
            assert!(!v.passed, "{name}: {v:?}");
            assert!(v.worst.is_some(), "{name}: {v:?}");
        }
        // A credible reference still lets the float64 rule pass float noise.
        let noisy_ref = map(&good, |x| x + 2e-3);
        let v = one(noisy_ref, good.clone(), fp.clone(), &opts);
        assert!(v.passed && v.reason.contains("but RMSE"), "{v:?}");
        // The worst element is named with both values.
        let off = set(&good, 3, 9.5);
        let v = one(good.clone(), off, fp, &opts);
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
        let fp = reshape(f64s(&[0.5, -1.0, 2.0, 4.0]), &[2, 2]);
        let r = reshape(f32s(&[0.5, -1.0, 2.0, 4.0]), &[2, 2]);
        let opts = SameOptions::repro();
        for (name, res) in [
            ("plus one", map(&r, |x| x + 1.0)),
            ("relu as identity plus one", map(&r, |x| x.max(0.0) + 1.0)),
            ("zeros", map(&r, |_| 0.0)),
            ("nan", map(&r, |_| f32::NAN)),
            ("inf", map(&r, |_| f32::INFINITY)),
        ] {
            let v = one(r.clone(), res, fp.clone(), &opts);
            assert!(!v.passed, "{name}: {v:?}");
            assert_eq!(v.worst.as_ref().unwrap().index.len(), 2, "{name}");
        }
    }

    #[test]
    fn dtype_shape_and_count_mismatches() {
        let opts = SameOptions::default();
        let v = one(f32s(&[1.0]), f64s(&[1.0]), None, &opts);
        assert!(!v.passed);
        assert_eq!(v.reason, "dtype mismatch: reference f32 vs result f64");
        let loose = SameOptions {
            exact_dtype: false,
            ..SameOptions::default()
        };
        assert!(one(f32s(&[1.0]), f64s(&[1.0]), None, &loose).passed);

        let v = one(
            f32s(&[1.0, 2.0]),
            reshape(f32s(&[1.0, 2.0]), &[1, 2]),
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

    /// Without exact dtypes the reference is converted to the result's dtype first, as
    /// libtorch converts it.
    #[test]
    fn references_convert_to_the_results_dtype() {
        let loose = SameOptions {
            exact_dtype: false,
            ..SameOptions::default()
        };
        // 2.7 truncates to 2 as an integer.
        assert!(one(f32s(&[2.7]), i64s(&[2]), None, &loose).passed);
        assert!(!one(f32s(&[2.7]), i64s(&[3]), None, &loose).passed);
        // float64 rounds to float32: a difference below float32's precision vanishes.
        let v = one(f64s(&[1.0 + 1e-12]), f32s(&[1.0]), None, &loose);
        assert!(v.passed && v.max_abs_diff == Some(0.0), "{v:?}");
        // Anything not zero is true.
        let b = host(Dtype::Bool, &[2], vec![1, 0]);
        assert!(one(f32s(&[0.5, 0.0]), b, None, &loose).passed);
    }

    #[test]
    fn bool_outputs() {
        let a = host(Dtype::Bool, &[3], vec![1, 0, 1]);
        let b = host(Dtype::Bool, &[3], vec![1, 1, 0]);
        let opts = SameOptions::default();
        assert!(one(a.clone(), a.clone(), None, &opts).passed);
        let v = one(a.clone(), b.clone(), None, &opts);
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
        let a = i64s(&[1, 2, 3]);
        let b = i64s(&[1, 2, 4]);
        let opts = SameOptions::default();
        assert!(one(a.clone(), a.clone(), None, &opts).passed);
        let v = one(a.clone(), b.clone(), a.clone(), &opts);
        assert!(!v.passed);
        assert_eq!(v.reason, "integer values differ at 1 of 3 elements");
        assert_eq!(v.max_abs_diff, Some(1.0));
        let w = v.worst.unwrap();
        assert_eq!(
            (w.index, w.reference, w.result),
            (vec![2], "3".into(), "4".into())
        );
        // No tolerance: allclose(tol=1e-3) would let 1001 pass for 1000.
        let v = one(i64s(&[1000]), i64s(&[1001]), None, &SameOptions::repro());
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
        let (r, plus) = (f64s(&[1.0, 2.0]), f64s(&[1.5, 2.5]));
        let v = one(r.clone(), plus.clone(), None, &opts);
        assert!(!v.passed && v.ref_error == Some(0.0), "{v:?}");
        let v = one(r, plus, None, &SameOptions { tol: 10.0, ..opts });
        assert!(v.passed);
    }

    #[test]
    fn complex_outputs() {
        let c64 = |v: &[f32]| {
            host(
                Dtype::Complex64,
                &[v.len() / 2],
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            )
        };
        let a = c64(&[1.0, 1.0, 2.0, 2.0]);
        let b = c64(&[1.0, 2.0, 2.0, 3.0]);
        let opts = SameOptions::default();
        assert!(one(a.clone(), a.clone(), None, &opts).passed);
        let v = one(a, b, None, &opts);
        assert!(!v.passed && v.max_abs_diff == Some(1.0), "{v:?}");
        // The worst element names the imaginary part (last index 1).
        assert_eq!(v.worst.unwrap().index, [0, 1]);
    }

    #[test]
    fn report_text_and_json_are_deterministic() {
        let opts = SameOptions::default();
        let report = same(
            &[f32s(&[1.0, 2.0]), full(2000, 0.01, Dtype::Float32)],
            &[f32s(&[1.0, 2.0]), full(2000, 0.025, Dtype::Float32)],
            Some(&[f64s(&[1.0, 2.0]), full(2000, 0.0, Dtype::Float64)]),
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
        let v = one(None, f32s(&[1.0]), None, &SameOptions::default());
        assert!(!v.passed, "{v:?}");
        assert_eq!(v.reason, "reference is undefined");
        let v = one(f32s(&[1.0]), None, None, &SameOptions::default());
        assert_eq!(
            (v.passed, v.reason.as_str()),
            (false, "result is undefined")
        );
        let v = one(None, None, None, &SameOptions::default());
        assert!(v.passed && v.meta == "undefined", "{v:?}");
        // An undefined float64 entry is no float64 reference.
        let v = one(f64s(&[1.0]), f64s(&[1.5]), None, &SameOptions::default());
        assert_eq!(v.ref_error, Some(0.0), "{v:?}");
    }

    /// Bytes that do not fit the dtype and shape fail the output, never panic.
    #[test]
    fn malformed_host_tensors_fail_cleanly() {
        let mut bad = f32s(&[1.0, 2.0]).unwrap();
        bad.data.pop();
        let v = one(
            f32s(&[1.0, 2.0]),
            Some(bad.clone()),
            None,
            &SameOptions::default(),
        );
        assert!(!v.passed);
        assert_eq!(
            v.reason,
            "cannot compare: the result f32[2] needs 8 bytes of data, but has 7"
        );
        let mut fp = f64s(&[1.0, 2.0]).unwrap();
        fp.shape = vec![3];
        let v = one(
            f32s(&[1.0, 2.0]),
            f32s(&[1.0, 2.5]),
            Some(fp),
            &SameOptions::default(),
        );
        assert!(!v.passed && v.reason.contains("float64 reference f64[3] needs 24 bytes"));
    }

    #[test]
    fn detect_and_mode_for() {
        let b = |v: &[u8]| host(Dtype::Bool, &[v.len()], v.to_vec());
        // Only a bool output differs: strict sees it, the accuracy mode does not.
        let report = detect(
            &[b(&[1, 0]), f32s(&[1.0])],
            &[b(&[1, 1]), f32s(&[1.0])],
            None,
        )
        .expect("strict accuracy sees the bool");
        assert!(report.ends_with(ONLY_NON_FLOATING), "{report}");
        assert_eq!(
            mode_for(&report, AccuracyMode::Accuracy),
            AccuracyMode::StrictAccuracy
        );
        // A float output differs: both modes see it.
        let report = detect(&[f32s(&[1.0])], &[f32s(&[2.0])], None).unwrap();
        assert!(!report.contains(ONLY_NON_FLOATING), "{report}");
        assert_eq!(
            mode_for(&report, AccuracyMode::Accuracy),
            AccuracyMode::Accuracy
        );
        assert_eq!(detect(&[f32s(&[1.0])], &[f32s(&[1.0])], None), None);
    }
}

//! Reading a host tensor's elements, one pass per question, without allocating per
//! element: floating and complex tensors as float64 lanes (a complex element is two lanes,
//! real then imaginary, as `view_as_real` lays it out), integers and bools as `i128` (so
//! int64 and uint64 compare exactly, never through float64), and the conversion of a
//! reference to its result's dtype as libtorch's `to(dtype)` does it.

use graphbug_ir::Dtype;
use half::{bf16, f16};

/// The lane type of a floating or complex dtype's float64 view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    F16,
    BF16,
    F32,
    F64,
}

impl Lane {
    /// The lanes of `dtype`'s elements; `None` for integers and bools.
    pub(crate) fn of(dtype: Dtype) -> Option<Lane> {
        match dtype {
            Dtype::Float16 => Some(Lane::F16),
            Dtype::BFloat16 => Some(Lane::BF16),
            Dtype::Float32 | Dtype::Complex64 => Some(Lane::F32),
            Dtype::Float64 | Dtype::Complex128 => Some(Lane::F64),
            _ => None,
        }
    }
}

/// One lane type, read from its little-endian bytes.
trait Real {
    const SIZE: usize;
    fn get(bytes: &[u8]) -> f64;
}

struct F16;
struct BF16;
struct F32;
struct F64;

impl Real for F16 {
    const SIZE: usize = 2;
    #[inline(always)]
    fn get(b: &[u8]) -> f64 {
        f64::from(f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
    }
}

impl Real for BF16 {
    const SIZE: usize = 2;
    #[inline(always)]
    fn get(b: &[u8]) -> f64 {
        f64::from(f32::from_bits(
            u32::from(u16::from_le_bytes([b[0], b[1]])) << 16,
        ))
    }
}

impl Real for F32 {
    const SIZE: usize = 4;
    #[inline(always)]
    fn get(b: &[u8]) -> f64 {
        f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

impl Real for F64 {
    const SIZE: usize = 8;
    #[inline(always)]
    fn get(b: &[u8]) -> f64 {
        f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

/// Lane `i` of `data`, whose lanes are `lane`s.
pub(crate) fn lane_at(data: &[u8], lane: Lane, i: usize) -> f64 {
    match lane {
        Lane::F16 => F16::get(&data[2 * i..]),
        Lane::BF16 => BF16::get(&data[2 * i..]),
        Lane::F32 => F32::get(&data[4 * i..]),
        Lane::F64 => F64::get(&data[8 * i..]),
    }
}

/// What one pass over a reference and a result of the same floating dtype finds.
#[derive(Clone, Debug)]
pub(crate) struct FloatScan {
    /// Lanes whose non-finite values differ (NaN against NaN too without `equal_nan`).
    pub mismatches: usize,
    /// The first of them.
    pub first_mismatch: Option<usize>,
    /// Whether some lane is NaN on both sides.
    pub both_nan: bool,
    /// The largest `|ref - res|` over the lanes where the reference is finite, and the
    /// first lane where it is (`None` when no lane is finite).
    pub largest: Option<(usize, f64)>,
    /// The largest `|ref - res| / (tol + tol |res|)` there (NaN when one is NaN, as
    /// `torch.max`), 0 without finite lanes.
    pub close_ratio: f64,
    /// `allclose(ref, res, rtol = atol = tol)` there.
    pub allclose: bool,
}

/// Scans `r` and `s`, both of lane type `lane` (see [`FloatScan`]).
pub(crate) fn scan_floats(r: &[u8], s: &[u8], lane: Lane, tol: f64, equal_nan: bool) -> FloatScan {
    match lane {
        Lane::F16 => scan_floats_of::<F16>(r, s, tol, equal_nan),
        Lane::BF16 => scan_floats_of::<BF16>(r, s, tol, equal_nan),
        Lane::F32 => scan_floats_of::<F32>(r, s, tol, equal_nan),
        Lane::F64 => scan_floats_of::<F64>(r, s, tol, equal_nan),
    }
}

/// `torch.max`'s update: NaN wins and stays.
#[inline(always)]
fn nan_max(current: f64, x: f64) -> f64 {
    if current.is_nan() || x <= current {
        current
    } else {
        // x > current, or x is NaN.
        x
    }
}

fn scan_floats_of<L: Real>(r: &[u8], s: &[u8], tol: f64, equal_nan: bool) -> FloatScan {
    let mut mismatches = 0usize;
    let mut first_mismatch = None;
    let mut both_nan = false;
    let mut largest: Option<(usize, f64)> = None;
    let mut close_ratio = f64::NEG_INFINITY;
    let mut allclose = true;
    for (i, (rb, sb)) in r
        .chunks_exact(L::SIZE)
        .zip(s.chunks_exact(L::SIZE))
        .enumerate()
    {
        let (a, b) = (L::get(rb), L::get(sb));
        if !(a.is_finite() && b.is_finite()) {
            let (a_nan, b_nan) = (a.is_nan(), b.is_nan());
            let nan_both = a_nan && b_nan;
            both_nan |= nan_both;
            let differ = a_nan != b_nan
                || (a == f64::INFINITY) != (b == f64::INFINITY)
                || (a == f64::NEG_INFINITY) != (b == f64::NEG_INFINITY)
                || (!equal_nan && nan_both);
            if differ {
                mismatches += 1;
                first_mismatch.get_or_insert(i);
            }
            if !a.is_finite() {
                continue;
            }
        }
        // The reference is finite here (and, unless a mismatch was counted, so is the
        // result).
        let diff = (a - b).abs();
        match largest {
            Some((_, d)) if diff <= d => {}
            _ => largest = Some((i, diff)),
        }
        let allowed = (tol * b).abs() + tol;
        close_ratio = nan_max(close_ratio, diff / allowed);
        // torch.isclose: equal, or a finite error within the allowed one.
        allclose &= a == b || (diff.is_finite() && diff <= allowed);
    }
    FloatScan {
        mismatches,
        first_mismatch,
        both_nan,
        close_ratio: if largest.is_some() { close_ratio } else { 0.0 },
        largest,
        allclose,
    }
}

/// A sum with Neumaier's compensation: about as exact as libtorch's cascade sum.
#[derive(Clone, Copy, Default, Debug)]
struct Sum {
    sum: f64,
    compensation: f64,
}

impl Sum {
    #[inline(always)]
    fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.compensation += (self.sum - t) + x;
        } else {
            self.compensation += (x - t) + self.sum;
        }
        self.sum = t;
    }

    fn value(self) -> f64 {
        self.sum + self.compensation
    }
}

/// What one pass over a reference, a result and a float64 run finds, on the lanes where
/// the reference is finite (where the result is finite too: the non-finite values
/// matched).
#[derive(Clone, Debug)]
pub(crate) struct Fp64Scan {
    /// The first of those lanes where the float64 run is not finite.
    pub first_not_finite: Option<usize>,
    /// `allclose(ref, fp64, LOOSE_TOL, LOOSE_TOL)` there.
    pub loose_close: bool,
    /// The first lane where `|ref - fp64|` is largest (`None` without finite lanes).
    pub loose_worst: Option<usize>,
    /// RMSE of the reference against the float64 run.
    pub ref_error: f64,
    /// RMSE of the result against the float64 run.
    pub res_error: f64,
}

/// Scans `r` and `s` (lane type `lane`) against `fp` (float64 lanes).
pub(crate) fn scan_fp64(r: &[u8], s: &[u8], lane: Lane, fp: &[u8], loose: f64) -> Fp64Scan {
    match lane {
        Lane::F16 => scan_fp64_of::<F16>(r, s, fp, loose),
        Lane::BF16 => scan_fp64_of::<BF16>(r, s, fp, loose),
        Lane::F32 => scan_fp64_of::<F32>(r, s, fp, loose),
        Lane::F64 => scan_fp64_of::<F64>(r, s, fp, loose),
    }
}

fn scan_fp64_of<L: Real>(r: &[u8], s: &[u8], fp: &[u8], loose: f64) -> Fp64Scan {
    let mut first_not_finite = None;
    let mut loose_close = true;
    let mut loose_worst: Option<(usize, f64)> = None;
    let (mut ref_sq, mut res_sq) = (Sum::default(), Sum::default());
    let mut n = 0usize;
    for (i, ((rb, sb), fb)) in r
        .chunks_exact(L::SIZE)
        .zip(s.chunks_exact(L::SIZE))
        .zip(fp.chunks_exact(8))
        .enumerate()
    {
        let a = L::get(rb);
        if !a.is_finite() {
            continue;
        }
        let (b, f) = (L::get(sb), F64::get(fb));
        n += 1;
        if !f.is_finite() {
            first_not_finite.get_or_insert(i);
        }
        let diff = (a - f).abs();
        match loose_worst {
            Some((_, d)) if diff <= d => {}
            _ => loose_worst = Some((i, diff)),
        }
        loose_close &= a == f || (diff.is_finite() && diff <= (loose * f).abs() + loose);
        ref_sq.add((f - a) * (f - a));
        res_sq.add((f - b) * (f - b));
    }
    let rmse = |sq: Sum| {
        if n == 0 {
            0.0
        } else {
            (sq.value() / n as f64).sqrt()
        }
    };
    Fp64Scan {
        first_not_finite,
        loose_close,
        loose_worst: loose_worst.map(|(i, _)| i),
        ref_error: rmse(ref_sq),
        res_error: rmse(res_sq),
    }
}

/// Element `i` of an integer or bool tensor's data, exactly.
pub(crate) fn int_at(data: &[u8], dtype: Dtype, i: usize) -> i128 {
    let w = dtype.itemsize();
    read_int(dtype, &data[w * i..w * (i + 1)])
}

#[inline(always)]
fn read_int(dtype: Dtype, b: &[u8]) -> i128 {
    match dtype {
        Dtype::Bool => i128::from(b[0] != 0),
        Dtype::UInt8 => i128::from(b[0]),
        Dtype::Int8 => i128::from(b[0] as i8),
        Dtype::Int16 => i128::from(i16::from_le_bytes([b[0], b[1]])),
        Dtype::UInt16 => i128::from(u16::from_le_bytes([b[0], b[1]])),
        Dtype::Int32 => i128::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Dtype::UInt32 => i128::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Dtype::Int64 => i128::from(i64::from_le_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ])),
        Dtype::UInt64 => i128::from(u64::from_le_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ])),
        other => unreachable!("invariant: read_int is called for integer dtypes, not {other}"),
    }
}

/// What one pass over two integer (or bool) tensors of one dtype finds.
#[derive(Clone, Debug)]
pub(crate) struct IntScan {
    /// Elements that differ.
    pub differing: usize,
    /// The first element where `|ref - res|` is largest, and that difference (`None`
    /// without elements).
    pub largest: Option<(usize, u128)>,
}

/// Scans two integer or bool tensors' data, both of `dtype`.
pub(crate) fn scan_ints(r: &[u8], s: &[u8], dtype: Dtype) -> IntScan {
    match dtype {
        Dtype::Bool => scan_ints_of(r, s, 1, |b| i128::from(b[0] != 0)),
        Dtype::UInt8 => scan_ints_of(r, s, 1, |b| i128::from(b[0])),
        Dtype::Int8 => scan_ints_of(r, s, 1, |b| i128::from(b[0] as i8)),
        Dtype::Int16 => scan_ints_of(r, s, 2, |b| read_int(Dtype::Int16, b)),
        Dtype::UInt16 => scan_ints_of(r, s, 2, |b| read_int(Dtype::UInt16, b)),
        Dtype::Int32 => scan_ints_of(r, s, 4, |b| read_int(Dtype::Int32, b)),
        Dtype::UInt32 => scan_ints_of(r, s, 4, |b| read_int(Dtype::UInt32, b)),
        Dtype::Int64 => scan_ints_of(r, s, 8, |b| read_int(Dtype::Int64, b)),
        Dtype::UInt64 => scan_ints_of(r, s, 8, |b| read_int(Dtype::UInt64, b)),
        other => unreachable!("invariant: scan_ints is called for integer dtypes, not {other}"),
    }
}

#[inline(always)]
fn scan_ints_of(r: &[u8], s: &[u8], size: usize, get: impl Fn(&[u8]) -> i128) -> IntScan {
    let mut differing = 0usize;
    let mut largest: Option<(usize, u128)> = None;
    for (i, (rb, sb)) in r.chunks_exact(size).zip(s.chunks_exact(size)).enumerate() {
        let (a, b) = (get(rb), get(sb));
        differing += usize::from(a != b);
        let diff = a.abs_diff(b);
        match largest {
            Some((_, d)) if diff <= d => {}
            _ => largest = Some((i, diff)),
        }
    }
    IntScan { differing, largest }
}

/// One element's value, whatever its dtype.
#[derive(Clone, Copy)]
enum Value {
    Int(i128),
    Real(f64),
    Complex(f64, f64),
}

fn value_at(data: &[u8], dtype: Dtype, i: usize) -> Value {
    match (Lane::of(dtype), dtype.is_complex()) {
        (Some(lane), false) => Value::Real(lane_at(data, lane, i)),
        (Some(lane), true) => {
            Value::Complex(lane_at(data, lane, 2 * i), lane_at(data, lane, 2 * i + 1))
        }
        (None, _) => Value::Int(int_at(data, dtype, i)),
    }
}

/// A float to a signed integer of `bits` bits as x86's truncating conversion does it
/// (NaN and out-of-range values give the type's minimum); libtorch's `static_cast` leaves
/// those undefined.
fn truncate(x: f64, bits: u32) -> i128 {
    let (min, max) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
    if x.is_nan() {
        return min;
    }
    let t = x.trunc();
    if t < min as f64 || t > max as f64 {
        min
    } else {
        t as i128
    }
}

/// `v` wrapped into the integers of `bits` bits (two's complement; `signed` or not).
fn wrap(v: i128, bits: u32, signed: bool) -> i128 {
    let m = v & ((1i128 << bits) - 1);
    if signed && m >= 1i128 << (bits - 1) {
        m - (1i128 << bits)
    } else {
        m
    }
}

/// `data` (of `from`) converted to `to` as libtorch's `Tensor.to(dtype)` converts it on the
/// CPU: complex to real keeps the real part, anything to bool is "not zero", floats to
/// integers truncate (through int64 for uint8, as c10 does), integers wrap, and float64
/// (or an integer) becomes float16 or bfloat16 through float32, as c10's constructors
/// take a float. Neither dtype is uint16, uint32 or uint64 (those only compare with their
/// own dtype).
pub(crate) fn convert(data: &[u8], from: Dtype, numel: usize, to: Dtype) -> Vec<u8> {
    let mut out = Vec::with_capacity(numel * to.itemsize());
    for i in 0..numel {
        let v = value_at(data, from, i);
        let (re, im) = match v {
            Value::Int(n) => (n as f64, 0.0),
            Value::Real(x) => (x, 0.0),
            Value::Complex(re, im) => (re, im),
        };
        // As float32: ints round once (i64 -> f32), floats once (f64 -> f32).
        let single = |x: f64| match v {
            Value::Int(n) => n as i64 as f32,
            _ => x as f32,
        };
        let integer = |bits: u32| match v {
            Value::Int(n) => wrap(n, bits, true),
            _ => truncate(re, bits),
        };
        match to {
            Dtype::Bool => out.push(u8::from(match v {
                Value::Int(n) => n != 0,
                _ => re != 0.0 || im != 0.0,
            })),
            Dtype::Float32 => out.extend_from_slice(&single(re).to_le_bytes()),
            Dtype::Float64 => out.extend_from_slice(&re.to_le_bytes()),
            Dtype::Float16 => out.extend_from_slice(&f16::from_f32(single(re)).to_le_bytes()),
            Dtype::BFloat16 => out.extend_from_slice(&bf16::from_f32(single(re)).to_le_bytes()),
            Dtype::Complex64 => {
                out.extend_from_slice(&single(re).to_le_bytes());
                out.extend_from_slice(&(im as f32).to_le_bytes());
            }
            Dtype::Complex128 => {
                out.extend_from_slice(&re.to_le_bytes());
                out.extend_from_slice(&im.to_le_bytes());
            }
            Dtype::Int8 => out.push(wrap(integer(32), 8, true) as i8 as u8),
            Dtype::Int16 => {
                out.extend_from_slice(&(wrap(integer(32), 16, true) as i16).to_le_bytes())
            }
            Dtype::Int32 => out.extend_from_slice(&(integer(32) as i32).to_le_bytes()),
            Dtype::Int64 => out.extend_from_slice(&(integer(64) as i64).to_le_bytes()),
            Dtype::UInt8 => out.push(wrap(integer(64), 8, false) as u8),
            Dtype::UInt16 | Dtype::UInt32 | Dtype::UInt64 => {
                unreachable!("invariant: uint16/32/64 only compare with their own dtype")
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_decodes_exactly() {
        // Every f16 and bf16 bit pattern widens to the value half computes, and NaN stays NaN.
        for bits in 0..=u16::MAX {
            let b = bits.to_le_bytes();
            let h = f16::from_bits(bits).to_f64();
            let got = F16::get(&b);
            assert!(got == h || (got.is_nan() && h.is_nan()), "{bits:#x}");
            let w = bf16::from_bits(bits).to_f64();
            let got = BF16::get(&b);
            assert!(got == w || (got.is_nan() && w.is_nan()), "{bits:#x}");
        }
    }

    #[test]
    fn integers_beyond_float64_compare_exactly() {
        let big = (1i64 << 53) + 1;
        let a: Vec<u8> = [big, i64::MAX]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let b: Vec<u8> = [big - 1, i64::MIN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let scan = scan_ints(&a, &b, Dtype::Int64);
        assert_eq!(scan.differing, 2);
        assert_eq!(scan.largest, Some((1, u128::from(u64::MAX))));
        let u: Vec<u8> = [u64::MAX, 1].iter().flat_map(|v| v.to_le_bytes()).collect();
        let v: Vec<u8> = [u64::MAX - 1, 1]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let scan = scan_ints(&u, &v, Dtype::UInt64);
        assert_eq!((scan.differing, scan.largest), (1, Some((0, 1))));
        assert_eq!(int_at(&u, Dtype::UInt64, 0), i128::from(u64::MAX));
    }

    #[test]
    fn conversions_follow_libtorch() {
        let f64s = |v: &[f64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let out = convert(
            &f64s(&[-1.5, 2.7, 0.0, f64::NAN]),
            Dtype::Float64,
            4,
            Dtype::Int64,
        );
        let ints: Vec<i64> = out
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(ints, [-1, 2, 0, i64::MIN]);
        let out = convert(&f64s(&[-1.0, 300.0]), Dtype::Float64, 2, Dtype::UInt8);
        assert_eq!(out, [255, 44]);
        let out = convert(
            &f64s(&[0.0, -0.5, f64::NAN]),
            Dtype::Float64,
            3,
            Dtype::Bool,
        );
        assert_eq!(out, [0, 1, 1]);
        let out = convert(&f64s(&[1.0, 2.0]), Dtype::Complex128, 1, Dtype::Float32);
        assert_eq!(out, 1.0f32.to_le_bytes());
        // float64 -> bfloat16 rounds through float32, as c10 does: 1 + 2^-8 + 2^-30 is
        // 1 + 2^-8 in float32, a tie that rounds to even (1.0), where rounding once would
        // give 1 + 2^-7.
        let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-30);
        let out = convert(&f64s(&[x]), Dtype::Float64, 1, Dtype::BFloat16);
        assert_eq!(out, bf16::from_f32(1.0).to_le_bytes());
    }
}

//! Rewrites of XLA programs (HLO text, StableHLO) that make a new program for the compiler to
//! run: the float64 reference of a program ([`raise_to_f64`]), and faults the compiled code
//! itself computes ([`inject`]).
//!
//! **Raise to float64** is the reference run of TorchDynamo's accuracy rules for XLA
//! programs: every floating element type narrower than 64 bits (`f16`, `bf16`, `f32`, the
//! `f8`/`f6`/`f4` types) becomes `f64`, and `c64` (`complex<f32>`) becomes `c128`
//! (`complex<f64>`), wherever a type is written: instruction and operand shapes, tuple
//! shapes, computation and function signatures, `entry_computation_layout`, every
//! computation and function (reduce, sort, scatter, while bodies...), attributes. Run on
//! XLA CPU with the inputs cast to float64, the raised program gives a float64 reference of
//! the original. The rule is one for every op: element types are found as types (HLO:
//! each `type[` the shape parser reads as a shape; StableHLO: each type token, `3x4x` sizes
//! aside), never through a table of opcodes. Integer and `pred`/`i1` types stay.
//! - Constants: a decimal literal is kept as written and read as float64 (XLA and MLIR
//!   print a value in the fewest digits that give it back, so `0.1` stays `0.1`; a value
//!   printed with nine digits, such as float32's `0.797884583`, is read as that decimal,
//!   within a fraction of a float32 ulp of the float32 value). `inf` and `nan` stay. MLIR's
//!   hex forms (`dense<0x7FC00000>`, `[1.0, 0xFF800000]`, `dense<"0x...">` raw
//!   little-endian data, and a `0x...` float attribute) are decoded from the original type's
//!   bits and re-encoded as float64's, exactly.
//! - `convert` stays: a convert to `bf16` becomes `f64` to `f64` (the reference keeps full
//!   precision, as PyTorch's float64 reference does).
//! - `reduce-precision` (`stablehlo.reduce_precision`) keeps its exponent and mantissa bits:
//!   it rounds the float64 value as it rounded the narrower one.
//! - Refused, naming the op and its line, where the raise would change their types: ops
//!   whose meaning is the bits of a width (`bitcast-convert`, `stablehlo.bitcast_convert`;
//!   `rng-bit-generator`, `stablehlo.rng_bit_generator`; `stochastic-convert`), ops that draw
//!   random values in the element type (`rng`, `stablehlo.rng`), custom calls (a target
//!   compiled for the types it was given, whose semantics graphbug cannot know), and dots or
//!   convolutions with an `algorithm` (it names the operands' precision). The same ops on
//!   types the raise keeps (a `bitcast-convert` from `u32` to `u64`) stay.
//! - A program already in float64 comes back byte for byte.
//!
//! **Faults as rewrites**: a [`FaultSpec`] of kind `accuracy`, `nan`, `compile` or `hang`
//! becomes instructions
//! after each target (the nodes [`FaultSpec::targets`] names in the entry computation's or
//! main function's graph, [`HloGraph`] / [`StableHloGraph`]; for HLO, a `node:` name may be
//! an instruction of a computation the entry calls: [`HloGraph::fault_graph`]): HLO gets `constant` +
//! `broadcast` + `add` (fresh names, in the text's style), StableHLO a splat
//! `stablehlo.constant` + `stablehlo.add` (fresh SSA names); every reader of the target,
//! `ROOT` and `return` included, then reads the faulted value. As the aten `fault:`
//! backend's `graphbug::fault` op does: `accuracy` adds `amount` to a floating or complex
//! value, `max(1, round(amount))` to an integer one, and negates a `pred`/`i1` one (`not`);
//! `nan` adds NaN, and needs a floating value (an integer, `pred` or complex target is an
//! error). A target whose value is a tuple (a `while`, a `sort` of several operands, a
//! multi-result StableHLO op) has its first reading element faulted, as the aten backend
//! faults the first getitem reader: the first `get-tuple-element` of it in graph order (HLO),
//! the first result (StableHLO); a tuple no `get-tuple-element` reads is an error naming it.
//! A `compile` fault passes the target through a custom call to
//! [`COMPILE_FAULT_TARGET`], which no compiler registers, so the compiler itself fails; a
//! `hang` fault passes it through a `while` loop of a 64-bit counter that flips the value
//! when the counter wraps to -1 (2^64 iterations away), which no compiler can drop or
//! count, so the run never returns. `runtime` and `crash` faults change no program
//! (compiled XLA code has no portable way to fail or abort; the caller simulates them);
//! `alias`, `mutate` and `shape` break aten schemas and mean nothing for XLA programs: both
//! are errors, as is a spec that names no node (with
//! [`FaultSpec::why_no_target`]'s message). A flaky spec (`%<percent>`) is rewritten as any
//! other: whether it fires is the caller's draw.
//!
//! Every rewritten program is read back, and checked ([`crate::hlo::check::check`],
//! [`crate::stablehlo::check`]) where the original checks; the output is deterministic.

use std::collections::HashSet;

use graphbug_ir::fault::{FaultKind, FaultSpec};
use graphbug_ir::{Graph, Meta, NodeId, NodeKind};

use crate::hlo::check::check as check_hlo;
use crate::hlo::graph::HloGraph;
use crate::hlo::shape::{is_element_type, parse_shape, Shape};
use crate::hlo::text::{
    parse_module as parse_hlo, print_module, split_top, HloError, Instruction, Module as HloModule,
    Operands,
};
use crate::stablehlo::{
    angle_len, check as check_mlir, parse_module as parse_mlir, parse_type, string_len, MlirError,
    Module as MlirModule, StableHloGraph, Type,
};

/// Why a program cannot be rewritten.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RewriteError {
    /// An op the raise to float64 would change the meaning of.
    #[error("line {line}: {} cannot be raised to float64: {why}", what(op, value))]
    NotRaisable {
        /// 1-based line of the op.
        line: usize,
        /// The opcode or op (`bitcast-convert`, `stablehlo.custom_call`).
        op: String,
        /// The instruction (HLO) or the first value (StableHLO) it defines, if any.
        value: Option<String>,
        /// Why.
        why: String,
    },
    /// A fault kind that is no rewrite of a program.
    #[error("fault:{spec}: {why}")]
    NotARewrite {
        /// The spec, as printed.
        spec: String,
        /// Why.
        why: String,
    },
    /// A spec that names no node of the program's graph ([`FaultSpec::why_no_target`]).
    #[error("{0}")]
    NoTarget(String),
    /// A target that cannot be faulted as the spec asks.
    #[error("line {line}: {}: {why}", what(op, &Some(node.clone())))]
    BadTarget {
        /// 1-based line of the target.
        line: usize,
        /// The target's node name (instruction or value).
        node: String,
        /// Its opcode or op.
        op: String,
        /// Why.
        why: String,
    },
    /// HLO text that does not read or check (of the program given, or, a bug, of the
    /// rewritten one).
    #[error(transparent)]
    Hlo(#[from] HloError),
    /// StableHLO text that does not read or check (likewise).
    #[error(transparent)]
    Mlir(#[from] MlirError),
}

/// `` `op` `` or `` `op` `name` ``, for messages.
fn what(op: &str, value: &Option<String>) -> String {
    match value {
        Some(v) => format!("`{v}` (`{op}`)"),
        None => format!("`{op}`"),
    }
}

/// A rewritten program: its text, and the module that text reads as.
#[derive(Clone, Debug, PartialEq)]
pub struct Rewritten<M> {
    /// The program's text.
    pub text: String,
    /// The module it reads as (it prints as `text`).
    pub module: M,
}

/// A program the rewrites apply to: an HLO module or a StableHLO module.
pub trait Rewrite: Sized {
    /// The program's float64 reference (see the module docs).
    fn raise_to_f64(&self) -> Result<Rewritten<Self>, RewriteError>;
    /// The program computing `spec`'s fault itself (see the module docs).
    fn inject(&self, spec: &FaultSpec) -> Result<Rewritten<Self>, RewriteError>;
}

/// `program` with every float type narrower than 64 bits raised to float64 (module docs).
pub fn raise_to_f64<P: Rewrite>(program: &P) -> Result<Rewritten<P>, RewriteError> {
    program.raise_to_f64()
}

/// `program` with `spec`'s fault written into it (module docs).
pub fn inject<P: Rewrite>(program: &P, spec: &FaultSpec) -> Result<Rewritten<P>, RewriteError> {
    program.inject(spec)
}

impl Rewrite for HloModule {
    fn raise_to_f64(&self) -> Result<Rewritten<Self>, RewriteError> {
        raise_hlo(self)
    }

    fn inject(&self, spec: &FaultSpec) -> Result<Rewritten<Self>, RewriteError> {
        inject_hlo(self, spec)
    }
}

impl Rewrite for MlirModule {
    fn raise_to_f64(&self) -> Result<Rewritten<Self>, RewriteError> {
        raise_mlir(self)
    }

    fn inject(&self, spec: &FaultSpec) -> Result<Rewritten<Self>, RewriteError> {
        inject_mlir(self, spec)
    }
}

// ---- element types ----

/// What the raise makes of an HLO element type, if it changes it.
fn raised_hlo_type(ty: &str) -> Option<&'static str> {
    match ty {
        "c64" => Some("c128"),
        "f64" => None,
        t if t == "bf16" || t.starts_with('f') => Some("f64"),
        _ => None,
    }
}

/// Whether the raise changes any element type of `shape`.
fn hlo_shape_changes(shape: &Shape) -> bool {
    match shape {
        Shape::Array { ty, .. } => raised_hlo_type(ty).is_some(),
        Shape::Tuple(e) => e.iter().any(hlo_shape_changes),
    }
}

/// Whether an MLIR type token is a float narrower than 64 bits (`f32`, `bf16`, `tf32`,
/// `f8E4M3FN`...).
fn is_narrow_mlir_float(t: &str) -> bool {
    if t == "bf16" || t == "tf32" {
        return true;
    }
    let Some(rest) = t.strip_prefix('f') else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let Ok(bits) = rest[..digits].parse::<u32>() else {
        return false;
    };
    let suffix = &rest[digits..];
    match suffix.strip_prefix('E') {
        None => suffix.is_empty() && matches!(bits, 16 | 32),
        Some(s) => bits < 64 && s.bytes().all(|b| b.is_ascii_alphanumeric()),
    }
}

/// What a value of an element type is, for faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Float,
    Complex,
    Int,
    Pred,
    Other,
}

/// The class of an HLO element type.
fn hlo_class(ty: &str) -> Class {
    match ty {
        "pred" => Class::Pred,
        "c64" | "c128" => Class::Complex,
        "token" | "opaque" => Class::Other,
        t if t == "bf16" || t.starts_with('f') => Class::Float,
        t if t.starts_with('s') || t.starts_with('u') => Class::Int,
        _ => Class::Other,
    }
}

/// The class of a StableHLO element type.
fn mlir_class(element: &str) -> Class {
    if element == "i1" {
        return Class::Pred;
    }
    if element.starts_with("complex<") {
        return Class::Complex;
    }
    if mlir_format(element).is_some() || is_narrow_mlir_float(element) {
        return Class::Float;
    }
    let int = element
        .strip_prefix("ui")
        .or_else(|| element.strip_prefix("si"))
        .or_else(|| element.strip_prefix('i'));
    match int {
        Some(d) if !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) => Class::Int,
        _ => Class::Other,
    }
}

/// How a float format's special values are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Special {
    /// IEEE 754: the top exponent is infinity (mantissa 0) or NaN.
    Ieee,
    /// `FN`: no infinity; NaN is the top exponent with every mantissa bit set.
    Fn,
    /// `FNUZ`: no infinity, no negative zero; NaN is the sign bit alone.
    Fnuz,
    /// Finite only (`f4E2M1FN`, `f6...FN`).
    Finite,
    /// `f8E8M0FNU`: an unsigned exponent; all ones is NaN.
    E8m0,
}

/// A float format: width, exponent and mantissa bits, bias, special values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Format {
    bits: u32,
    exp: u32,
    mant: u32,
    bias: i32,
    special: Special,
}

/// The format of an MLIR float type, where graphbug can decode it.
fn mlir_format(t: &str) -> Option<Format> {
    let f = |bits, exp, mant, bias, special| Format {
        bits,
        exp,
        mant,
        bias,
        special,
    };
    Some(match t {
        "f64" => f(64, 11, 52, 1023, Special::Ieee),
        "f32" => f(32, 8, 23, 127, Special::Ieee),
        "f16" => f(16, 5, 10, 15, Special::Ieee),
        "bf16" => f(16, 8, 7, 127, Special::Ieee),
        "f8E5M2" => f(8, 5, 2, 15, Special::Ieee),
        "f8E4M3" => f(8, 4, 3, 7, Special::Ieee),
        "f8E3M4" => f(8, 3, 4, 3, Special::Ieee),
        "f8E4M3FN" => f(8, 4, 3, 7, Special::Fn),
        "f8E5M2FNUZ" => f(8, 5, 2, 16, Special::Fnuz),
        "f8E4M3FNUZ" => f(8, 4, 3, 8, Special::Fnuz),
        "f8E4M3B11FNUZ" => f(8, 4, 3, 11, Special::Fnuz),
        "f8E8M0FNU" => f(8, 8, 0, 127, Special::E8m0),
        "f6E3M2FN" => f(6, 3, 2, 3, Special::Finite),
        "f6E2M3FN" => f(6, 2, 3, 1, Special::Finite),
        "f4E2M1FN" => f(4, 2, 1, 1, Special::Finite),
        _ => return None,
    })
}

impl Format {
    /// The value of bit pattern `raw`, exactly, as a float64 (a NaN keeps its sign, and an
    /// IEEE NaN its payload).
    fn decode(self, raw: u64) -> f64 {
        let raw = raw & mask(self.bits);
        if self.special == Special::E8m0 {
            return if raw == 0xff {
                f64::NAN
            } else {
                pow2(raw as i32 - self.bias)
            };
        }
        let negative = raw >> (self.bits - 1) & 1 == 1;
        let e = (raw >> self.mant) & mask(self.exp);
        let m = raw & mask(self.mant);
        let sign = if negative { 1u64 << 63 } else { 0 };
        let nan = |payload: u64| f64::from_bits(sign | 0x7ff << 52 | payload);
        match self.special {
            Special::Ieee if e == mask(self.exp) => {
                return if m == 0 {
                    f64::from_bits(sign | 0x7ff << 52)
                } else {
                    nan(m << (52 - self.mant))
                };
            }
            Special::Fn if e == mask(self.exp) && m == mask(self.mant) => return nan(1 << 51),
            Special::Fnuz if raw == 1 << (self.bits - 1) => return f64::NAN,
            _ => {}
        }
        let magnitude = if e == 0 {
            m as f64 * pow2(1 - self.bias - self.mant as i32)
        } else {
            (m | 1 << self.mant) as f64 * pow2(e as i32 - self.bias - self.mant as i32)
        };
        if negative {
            -magnitude
        } else {
            magnitude
        }
    }

    /// The bit pattern of a quiet NaN, if the format has one.
    fn nan(self) -> Option<u64> {
        match self.special {
            Special::Ieee => Some(mask(self.exp) << self.mant | 1 << (self.mant - 1)),
            Special::Fn => Some(mask(self.bits - 1)),
            Special::Fnuz => Some(1 << (self.bits - 1)),
            Special::E8m0 => Some(0xff),
            Special::Finite => None,
        }
    }
}

/// The low `bits` bits set.
fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// 2^k, exactly (k within float64's range).
fn pow2(k: i32) -> f64 {
    2f64.powi(k)
}

// ---- HLO: raise ----

fn raise_hlo(m: &HloModule) -> Result<Rewritten<HloModule>, RewriteError> {
    refuse_hlo(m)?;
    let mut out = m.clone();
    out.header_line = raise_hlo_shapes(&m.header_line);
    for c in &mut out.computations {
        c.header_line = raise_hlo_shapes(&c.header_line);
        for i in &mut c.instructions {
            i.text = raise_hlo_shapes(&i.text);
        }
    }
    let text = print_module(&out);
    let module = reread_hlo(&text, check_hlo(m).is_ok())?;
    Ok(Rewritten { text, module })
}

/// The ops the raise would change the meaning of (see the module docs), each with why.
fn refuse_hlo(m: &HloModule) -> Result<(), RewriteError> {
    for c in &m.computations {
        let shape_of = |name: &str| {
            c.instructions
                .iter()
                .find(|i| i.name == name)
                .map(|i| &i.shape)
        };
        for i in &c.instructions {
            let result = hlo_shape_changes(&i.shape);
            let operands = match &i.operands {
                Operands::Values(ops) => ops.iter().any(|o| {
                    o.shape
                        .as_ref()
                        .or_else(|| shape_of(&o.name))
                        .is_some_and(hlo_shape_changes)
                }),
                _ => false,
            };
            let changes = result || operands;
            let why = match i.opcode.as_str() {
                "bitcast-convert" if changes => Some(format!(
                    "it reinterprets the bits of its operand as {}, and the raise changes their width",
                    i.shape
                )),
                "custom-call"
                    if changes
                        && !is_sharding_annotation(i.attr("custom_call_target").unwrap_or("")) =>
                {
                    Some(format!(
                    "custom call target {} is compiled for the types it was given, and what it computes is unknown to graphbug",
                        i.attr("custom_call_target").unwrap_or("(none)")
                    ))
                }
                "rng-bit-generator" if result => Some(
                    "its random bits fill values of the raised type differently".to_string(),
                ),
                "rng" if result => Some(
                    "the random values it draws depend on the element type they are drawn in"
                        .to_string(),
                ),
                "stochastic-convert" if changes => Some(
                    "it rounds with random bits of its operand's width".to_string(),
                ),
                "dot" | "convolution" if changes && i.attr("algorithm").is_some() => {
                    Some(format!(
                        "its algorithm={} names the precision of its operands",
                        i.attr("algorithm").unwrap_or_default()
                    ))
                }
                _ => None,
            };
            if let Some(why) = why {
                return Err(RewriteError::NotRaisable {
                    line: i.line,
                    op: i.opcode.clone(),
                    value: Some(i.name.clone()),
                    why,
                });
            }
        }
    }
    Ok(())
}

/// `text` (HLO lines) with the element type of every shape in it raised: each `type[` the
/// shape parser reads as a shape, outside strings and comments.
fn raise_hlo_shapes(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 16);
    let (mut i, mut last) = (0, 0);
    while i < b.len() {
        match b[i] {
            b'"' => i += quoted_len(&text[i..]),
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += text[i..].find("*/").map_or(text.len() - i, |e| e + 2)
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i += text[i..].find('\n').unwrap_or(text.len() - i)
            }
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b'.' | b'-'))
                {
                    i += 1;
                }
                let word = &text[start..i];
                let after_name = start > 0 && b[start - 1] == b'%';
                if !after_name
                    && b.get(i) == Some(&b'[')
                    && is_element_type(word)
                    && parse_shape(&text[start..]).is_ok()
                {
                    if let Some(new) = raised_hlo_type(word) {
                        out.push_str(&text[last..start]);
                        out.push_str(new);
                        last = i;
                    }
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[last..]);
    out
}

/// The length of the `"..."` string at the start of `text` (escapes honoured).
fn quoted_len(text: &str) -> usize {
    let mut escaped = false;
    for (k, c) in text.char_indices().skip(1) {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return k + 1,
            _ => escaped = false,
        }
    }
    text.len()
}

/// Reads a rewritten HLO text, and checks it when the original checked (XLA reads some
/// programs graphbug's check refuses, such as names repeated across computations).
fn reread_hlo(text: &str, checks: bool) -> Result<HloModule, RewriteError> {
    let bug = |e: HloError| HloError {
        message: format!(
            "the rewritten program does not read back (a graphbug bug): {}",
            e.message
        ),
        ..e
    };
    let module = parse_hlo(text).map_err(bug)?;
    if checks {
        check_hlo(&module).map_err(bug)?;
    }
    Ok(module)
}

// ---- StableHLO: raise ----

fn raise_mlir(m: &MlirModule) -> Result<Rewritten<MlirModule>, RewriteError> {
    refuse_mlir(m)?;
    let text = raise_mlir_text(&m.text)?;
    let module = reread_mlir(&text, check_mlir(m).is_ok())?;
    Ok(Rewritten { text, module })
}

/// Whether a custom call target is one of XLA's partitioner annotations, which hand their
/// operand on (its shape moved between a device's piece and the whole array) whatever its
/// element type: GSPMD's `Sharding`, `SPMDFullToShardShape` and `SPMDShardToFullShape`, and
/// Shardy's `xla.sdy.*` (as JAX lowers shardings and shard_map).
fn is_sharding_annotation(target: &str) -> bool {
    let target = target.trim_matches('"');
    matches!(
        target,
        "Sharding" | "SPMDFullToShardShape" | "SPMDShardToFullShape"
    ) || target.starts_with("xla.sdy.")
}

/// The target a StableHLO custom call's text (from its op on) names: `@target`, or
/// `call_target_name = "target"` in the generic form.
fn call_target(op_text: &str) -> String {
    if let Some(at) = op_text.find('@') {
        return op_text[at + 1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '"'))
            .collect();
    }
    op_text
        .find("call_target_name = \"")
        .map(|at| {
            op_text[at + "call_target_name = \"".len()..]
                .chars()
                .take_while(|&c| c != '"')
                .collect()
        })
        .unwrap_or_default()
}

/// The ops the raise would change the meaning of, by line (see the module docs).
fn refuse_mlir(m: &MlirModule) -> Result<(), RewriteError> {
    for (no, line) in m.text.lines().enumerate() {
        let t = line.trim_start();
        let (value, rest) = match t.strip_prefix('%') {
            Some(r) => match r.find(" = ") {
                Some(eq) => {
                    let name: String = r[..eq]
                        .chars()
                        .take_while(|c| !matches!(c, ',' | ':' | ' '))
                        .collect();
                    (Some(format!("%{name}")), &r[eq + 3..])
                }
                None => (None, t),
            },
            None => (None, t),
        };
        let rest = rest.trim_start();
        let op: String = match rest.strip_prefix('"') {
            Some(q) => q.chars().take_while(|c| *c != '"').collect(),
            None => rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
                .collect(),
        };
        let why = match op.as_str() {
            "stablehlo.bitcast_convert" => {
                "it reinterprets the bits of its operand, and the raise changes their width"
            }
            "stablehlo.custom_call" if !is_sharding_annotation(&call_target(rest)) => {
                "its target is compiled for the types it was given, and what it computes is unknown to graphbug"
            }
            "stablehlo.rng_bit_generator" => {
                "its random bits fill values of the raised type differently"
            }
            "stablehlo.rng" => {
                "the random values it draws depend on the element type they are drawn in"
            }
            "stablehlo.dot_general" | "stablehlo.dot" if line.contains("algorithm") => {
                "its algorithm names the precision of its operands"
            }
            _ => continue,
        };
        if !type_edits(line).is_empty() {
            return Err(RewriteError::NotRaisable {
                line: no + 1,
                op,
                value,
                why: why.to_string(),
            });
        }
    }
    Ok(())
}

/// The narrow float type tokens of `text` (outside strings and comments): (start, end).
/// A token is a word not after `%`, `@`, `#`, `^`, `!`, `.` or `$`, its sizes (`3x4x`,
/// `x` after `?`) aside.
fn type_edits(text: &str) -> Vec<(usize, usize)> {
    let mut edits = Vec::new();
    scan_mlir(text, &mut |start, end, _| {
        if is_narrow_mlir_float(&text[start..end]) {
            edits.push((start, end));
        }
        None
    });
    edits
}

/// Walks the words of MLIR text outside strings and comments, calling `f(start, end,
/// word_start)` with each word's type part (sizes stripped); `f` may return how far to
/// skip (an end offset).
fn scan_mlir(text: &str, f: &mut dyn FnMut(usize, usize, usize) -> Option<usize>) {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => i += string_len(&text[i..]),
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i += text[i..].find('\n').unwrap_or(text.len() - i)
            }
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let prev = start.checked_sub(1).map(|p| b[p]);
                if matches!(
                    prev,
                    Some(b'%' | b'@' | b'#' | b'^' | b'!' | b'.' | b'$' | b'-')
                ) {
                    continue;
                }
                // Sizes: `3x4xf32`, `x4xf32` after `?`.
                let word = &b[start..i];
                let hex = word.len() > 2
                    && word[0] == b'0'
                    && matches!(word[1], b'x' | b'X')
                    && word[2..].iter().all(u8::is_ascii_hexdigit);
                let at = if hex {
                    0
                } else {
                    sizes_len(word, prev == Some(b'?'))
                };
                if let Some(skip) = f(start + at, i, start) {
                    i = skip.max(i);
                }
            }
            _ => i += 1,
        }
    }
}

/// The length of the sizes at the start of a word of a tensor type (`3x4x` of `3x4xf32`,
/// `x` of `x4xf32` after `?`).
fn sizes_len(word: &[u8], after_question: bool) -> usize {
    let mut at = 0;
    loop {
        let d = word[at..].iter().take_while(|c| c.is_ascii_digit()).count();
        let sized = word.get(at + d) == Some(&b'x') && (d > 0 || (at == 0 && after_question));
        if !sized {
            return at;
        }
        at += d + 1;
    }
}

/// `text` (a StableHLO module) with its narrow float types raised and the constants of those
/// types re-encoded where they are written in hex.
fn raise_mlir_text(text: &str) -> Result<String, RewriteError> {
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut error = None;
    scan_mlir(text, &mut |start, end, word_start| {
        if error.is_some() {
            return Some(text.len());
        }
        let word = &text[word_start..end];
        if start == word_start && word == "dense" && text[end..].starts_with('<') {
            let len = angle_len(&text[end..])?;
            let body = end + 1..end + len - 1;
            match raise_dense(text, body.clone()) {
                Ok(Some(new)) => edits.push((body.start, body.end, new)),
                Ok(None) => {}
                Err(e) => error = Some(e),
            }
            // The body is done; its type comes next.
            return Some(end + len - 1);
        }
        if start == word_start && word == "dense_resource" {
            if let Some(element) =
                attribute_element(text, end + angle_len(&text[end..]).unwrap_or(0))
            {
                if is_narrow_mlir_float(
                    element.trim_start_matches("complex<").trim_end_matches('>'),
                ) {
                    error = Some(at_line(
                        text,
                        word_start,
                        format!("a dense_resource constant of {element} cannot be raised to float64 (its data is a blob graphbug does not re-encode); print the module with its constants inline"),
                    ));
                }
            }
            return None;
        }
        if start == word_start && (word.starts_with("0x") || word.starts_with("0X")) {
            // A float attribute written in hex: `0x7FC00000 : f32`.
            if let Some(element) = attribute_element(text, end) {
                if is_narrow_mlir_float(&element) {
                    match reencode_hex(word, &element) {
                        Ok(new) => edits.push((word_start, end, new)),
                        Err(m) => error = Some(at_line(text, word_start, m)),
                    }
                }
            }
            return None;
        }
        if is_narrow_mlir_float(&text[start..end]) {
            edits.push((start, end, "f64".to_string()));
        }
        None
    });
    if let Some(e) = error {
        return Err(e);
    }
    Ok(apply_edits(text, edits))
}

/// The element type of the ` : type` that follows offset `at` of `text`, if one does.
fn attribute_element(text: &str, at: usize) -> Option<String> {
    let rest = text.get(at..)?.trim_start_matches([' ', '\t']);
    let rest = rest.strip_prefix(':')?.trim_start_matches([' ', '\t']);
    match parse_type(rest) {
        Ok((Type::Tensor { element, .. }, _)) => Some(element),
        Ok((Type::Other(t), _)) => t.starts_with("complex<").then_some(t),
        // A scalar type: `f32`.
        Err(_) => {
            let word: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (!word.is_empty()).then_some(word)
        }
    }
}

/// The re-encoded body of the `dense<...>` at `body` of `text`, when its type is a narrow
/// float (or complex of one) and it holds hex; `None` when nothing changes.
fn raise_dense(text: &str, body: std::ops::Range<usize>) -> Result<Option<String>, RewriteError> {
    let Some(element) = attribute_element(text, body.end + 1) else {
        return Ok(None);
    };
    let component = element
        .strip_prefix("complex<")
        .and_then(|e| e.strip_suffix('>'))
        .unwrap_or(&element);
    if !is_narrow_mlir_float(component) {
        return Ok(None);
    }
    let s = &text[body.clone()];
    let fail = |m: String| at_line(text, body.start, m);
    let trimmed = s.trim();
    if let Some(hex) = trimmed
        .strip_prefix("\"0x")
        .or_else(|| trimmed.strip_prefix("\"0X"))
        .and_then(|h| h.strip_suffix('"'))
    {
        let format = mlir_format(component).ok_or_else(|| {
            fail(format!(
                "hex-encoded {component} values cannot be re-encoded as float64"
            ))
        })?;
        if format.bits % 8 != 0 {
            return Err(fail(format!(
                "hex-encoded {component} values ({} bits each) cannot be re-encoded as float64",
                format.bits
            )));
        }
        let width = (format.bits / 8) as usize;
        let bytes = (0..hex.len() / 2)
            .map(|k| u8::from_str_radix(&hex[2 * k..2 * k + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| fail(format!("malformed hex data in `dense<{}>`", head(s))))?;
        if hex.len() % 2 != 0 || bytes.len() % width != 0 {
            return Err(fail(format!(
                "hex data of {} bytes is no whole number of {component} values",
                hex.len() / 2
            )));
        }
        let mut out = String::with_capacity(bytes.len() / width * 16 + 4);
        out.push_str("\"0x");
        for chunk in bytes.chunks(width) {
            let raw = chunk
                .iter()
                .rev()
                .fold(0u64, |acc, b| acc << 8 | u64::from(*b));
            for b in format.decode(raw).to_bits().to_le_bytes() {
                out.push_str(&format!("{b:02X}"));
            }
        }
        out.push('"');
        let lead = &s[..s.len() - s.trim_start().len()];
        let trail = &s[s.trim_end().len()..];
        return Ok(Some(format!("{lead}{out}{trail}")));
    }
    // Literals: each hex one is a bit pattern of the component type.
    let mut edits = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let boundary = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'.');
        if boundary && b[i] == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X')) {
            let end = i
                + 2
                + b[i + 2..]
                    .iter()
                    .take_while(|c| c.is_ascii_hexdigit())
                    .count();
            let new = reencode_hex(&s[i..end], component).map_err(&fail)?;
            edits.push((i, end, new));
            i = end;
        } else {
            i += 1;
        }
    }
    if edits.is_empty() {
        return Ok(None);
    }
    Ok(Some(apply_edits(s, edits)))
}

/// A hex literal (`0x7FC00000`) of `element` as float64's (`0x7FF8000000000000`).
fn reencode_hex(literal: &str, element: &str) -> Result<String, String> {
    let format = mlir_format(element)
        .ok_or_else(|| format!("hex-encoded {element} values cannot be re-encoded as float64"))?;
    let raw = u64::from_str_radix(&literal[2..], 16)
        .map_err(|_| format!("malformed hex literal `{literal}`"))?;
    Ok(format!("0x{:016X}", format.decode(raw).to_bits()))
}

/// `text` with `(start, end, new)` edits (not overlapping) applied.
fn apply_edits(text: &str, mut edits: Vec<(usize, usize, String)>) -> String {
    edits.sort_by_key(|e| e.0);
    let mut out = String::with_capacity(text.len() + edits.len() * 8);
    let mut last = 0;
    for (start, end, new) in edits {
        out.push_str(&text[last..start]);
        out.push_str(&new);
        last = end;
    }
    out.push_str(&text[last..]);
    out
}

/// A `NotRaisable` error at byte `at` of `text`, for a constant.
fn at_line(text: &str, at: usize, why: String) -> RewriteError {
    let line = text[..at].matches('\n').count() + 1;
    let op = text
        .lines()
        .nth(line - 1)
        .and_then(|l| {
            l.split_whitespace()
                .find(|w| w.contains('.') && !w.starts_with('%'))
                .map(|w| w.trim_matches('"').to_string())
        })
        .unwrap_or_else(|| "constant".into());
    RewriteError::NotRaisable {
        line,
        op,
        value: None,
        why,
    }
}

/// The first characters of `text`, for messages.
fn head(text: &str) -> String {
    let s: String = text.chars().take(24).collect();
    if s.len() < text.len() {
        format!("{s}...")
    } else {
        s
    }
}

/// Reads a rewritten StableHLO text, and checks it when the original checked.
fn reread_mlir(text: &str, checks: bool) -> Result<MlirModule, RewriteError> {
    let bug = |e: MlirError| MlirError {
        message: format!(
            "the rewritten program does not read back (a graphbug bug): {}",
            e.message
        ),
        ..e
    };
    let module = parse_mlir(text).map_err(bug)?;
    if checks {
        check_mlir(&module).map_err(bug)?;
    }
    Ok(module)
}

// ---- faults ----

/// Refuses the kinds that are no rewrite (see the module docs).
fn rewritable(spec: &FaultSpec) -> Result<(), RewriteError> {
    let why = match spec.kind {
        FaultKind::Accuracy | FaultKind::Nan | FaultKind::Compile | FaultKind::Hang => {
            return Ok(())
        }
        FaultKind::Runtime | FaultKind::Crash => format!(
            "a {} fault changes no program: compiled XLA code has no portable way to {}, so the caller simulates it when the program runs",
            spec.kind.name(),
            match spec.kind {
                FaultKind::Runtime => "fail a run",
                _ => "abort the process",
            }
        ),
        FaultKind::Alias | FaultKind::Mutate | FaultKind::Shape => format!(
            "{} faults break an aten op's schema (undeclared aliasing, an undeclared mutation, a shape the meta function does not give) to test schema checkers; XLA programs have no such schemas, so they mean nothing here",
            spec.kind.name()
        ),
    };
    Err(RewriteError::NotARewrite {
        spec: spec.to_string(),
        why,
    })
}

/// The nodes a spec faults, a tuple-valued target replaced by its first getitem reader,
/// each once, in graph order; `line_op` gives a node's line and op for errors.
fn fault_sites(
    graph: &Graph,
    spec: &FaultSpec,
    line_op: &dyn Fn(&str) -> (usize, String),
) -> Result<Vec<NodeId>, RewriteError> {
    let targets = spec.targets(graph);
    if targets.is_empty() {
        let source = format!("fault:{spec}");
        return Err(RewriteError::NoTarget(
            spec.why_no_target(graph, &source)
                .unwrap_or_else(|| format!("`{source}` names no node")),
        ));
    }
    let users = graph.users();
    let mut sites: Vec<NodeId> = Vec::new();
    for t in targets {
        let site = if matches!(graph.node(t).meta, Meta::Multi(_)) {
            let name = graph.node(t).name.to_string();
            users.nodes[t.index()]
                .iter()
                .copied()
                .find(|u| matches!(graph.node(*u).kind, NodeKind::GetItem { .. }))
                .ok_or_else(|| {
                    let (line, op) = line_op(&name);
                    RewriteError::BadTarget {
                        line,
                        node: name.clone(),
                        op,
                        why:
                            "its value is a tuple, and no element of it is read (nothing to fault)"
                                .into(),
                    }
                })?
        } else {
            t
        };
        if !sites.contains(&site) {
            sites.push(site);
        }
    }
    sites.sort();
    Ok(sites)
}

/// What a fault does to a value.
enum Perturb {
    /// Add a float (the amount, or NaN).
    Float(f64),
    /// Add a complex number with this real part.
    Complex(f64),
    /// Add an integer.
    Int(i64),
    /// Negate a boolean.
    Not,
    /// Pass the value through a custom call no compiler has ([`COMPILE_FAULT_TARGET`]).
    CompileError,
    /// Pass the value through a loop that never ends (it would after 2^64 iterations).
    Hang,
}

/// The custom-call target of a compile fault: no compiler registers it, so compiling the
/// program fails in the compiler itself.
pub const COMPILE_FAULT_TARGET: &str = "graphbug_injected_compile_fault";

/// What `spec` does to a value of class `class` (the aten fault's rules), or why it cannot.
fn perturbation(spec: &FaultSpec, class: Class, ty: &str) -> Result<Perturb, String> {
    Ok(match (spec.kind, class) {
        (_, Class::Other) => return Err(format!("values of type {ty} cannot be faulted")),
        (FaultKind::Compile, _) => Perturb::CompileError,
        (FaultKind::Hang, _) => Perturb::Hang,
        (FaultKind::Nan, Class::Float) => Perturb::Float(f64::NAN),
        (FaultKind::Nan, _) => {
            return Err(format!(
                "a nan fault needs a floating value, and this one is {ty}"
            ))
        }
        (_, Class::Float) => Perturb::Float(spec.amount),
        (_, Class::Complex) => Perturb::Complex(spec.amount),
        (_, Class::Int) => Perturb::Int(spec.amount.round().max(1.0) as i64),
        (_, Class::Pred) => Perturb::Not,
    })
}

// ---- HLO: faults ----

fn inject_hlo(m: &HloModule, spec: &FaultSpec) -> Result<Rewritten<HloModule>, RewriteError> {
    rewritable(spec)?;
    let g = HloGraph::new(m)?;
    let graph = g.fault_graph(spec);
    let line_op = |name: &str| {
        m.computations
            .iter()
            .flat_map(|c| &c.instructions)
            .find(|i| i.name == name)
            .map_or((0, String::new()), |i| (i.line, i.opcode.clone()))
    };
    let sites = fault_sites(&graph, spec, &line_op)?;
    let names: Vec<String> = sites
        .iter()
        .map(|&id| graph.node(id).name.to_string())
        .collect();
    let mut module = m.clone();
    for name in &names {
        module = fault_hlo(&module, name, spec)?;
    }
    let text = print_module(&module);
    let module = reread_hlo(&text, check_hlo(m).is_ok())?;
    Ok(Rewritten { text, module })
}

/// `m` with instruction `name` faulted, in whichever computation it is (the entry's, or
/// one the entry calls: see [`HloGraph::fault_graph`]).
fn fault_hlo(m: &HloModule, name: &str, spec: &FaultSpec) -> Result<HloModule, RewriteError> {
    let (e, k) = m
        .computations
        .iter()
        .enumerate()
        .find_map(|(e, c)| {
            c.instructions
                .iter()
                .position(|i| i.name == name)
                .map(|k| (e, k))
        })
        .expect("a node of the fault graph is an instruction of the module");
    let comp = &m.computations[e];
    let t = &comp.instructions[k];
    let bad = |why: String| RewriteError::BadTarget {
        line: t.line,
        node: t.name.clone(),
        op: t.opcode.clone(),
        why,
    };
    let Shape::Array { ty, dims, .. } = &t.shape else {
        return Err(bad(format!("its value is a tuple ({})", t.shape)));
    };
    let perturb = perturbation(spec, hlo_class(ty), ty).map_err(bad)?;
    // The text's style: `%` sigils, operand shapes, indentation, newlines.
    let pct = if t.percent { "%" } else { "" };
    let shapes = comp.instructions.iter().any(|i| match &i.operands {
        Operands::Values(v) => v.iter().any(|o| o.shape.is_some()),
        _ => false,
    });
    let operand = |shape: &str, n: &str| {
        if shapes {
            format!("{shape} {pct}{n}")
        } else {
            format!("{pct}{n}")
        }
    };
    let own_line = t.text.trim_end_matches(['\n', '\r']);
    let own_line = &own_line[own_line.rfind('\n').map_or(0, |p| p + 1)..];
    let indent = &own_line[..own_line.len() - own_line.trim_start().len()];
    let nl = if t.text.ends_with("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let root = if t.is_root { "ROOT " } else { "" };
    let mut taken: HashSet<String> = m
        .computations
        .iter()
        .flat_map(|c| c.instructions.iter().map(|i| i.name.clone()))
        .chain(m.computations.iter().map(|c| c.name.clone()))
        .collect();
    let mut fresh = |base: String| {
        let mut n = base.clone();
        let mut k = 0;
        while taken.contains(&n) {
            k += 1;
            n = format!("{base}.{k}");
        }
        taken.insert(n.clone());
        n
    };
    let shape = t.shape.to_string();
    let scalar = format!("{ty}[]");
    let faulted = fresh(format!("{name}.fault"));
    let mut lines = String::new();
    let mut computations = String::new();
    match perturb {
        Perturb::Not => lines.push_str(&format!(
            "{indent}{root}{pct}{faulted} = {shape} not({}){nl}",
            operand(&shape, name)
        )),
        Perturb::CompileError => lines.push_str(&format!(
            "{indent}{root}{pct}{faulted} = {shape} custom-call({}), custom_call_target=\"{COMPILE_FAULT_TARGET}\"{nl}",
            operand(&shape, name)
        )),
        Perturb::Hang => {
            // while (i != -1) { i += 1; v = (i == -1) ? -v : v }: a loop on the value
            // that the compiler can neither drop nor count, from i = 0.
            let tuple = format!("({shape}, s64[])");
            let flip = if hlo_class(ty) == Class::Pred {
                "not"
            } else {
                "negate"
            };
            let dims: Vec<String> = dims.iter().map(ToString::to_string).collect();
            let mask_shape = format!("pred[{}]", dims.join(","));
            let cond = fresh(format!("{name}.hang_condition"));
            let body = fresh(format!("{name}.hang_body"));
            let mut v = |stem: &str| fresh(format!("{name}.hang_{stem}"));
            let (cp, ci, cm, cc) = (v("p"), v("i"), v("m"), v("c"));
            let (bp, bv, bi, bo, bj, bm, be) = (v("p"), v("v"), v("i"), v("one"), v("j"), v("m"), v("e"));
            let (bb, bn, bs, br) = (v("mask"), v("flipped"), v("s"), v("r"));
            let (z, init, lp) = (v("zero"), v("init"), v("loop"));
            let mask = if dims.is_empty() { &be } else { &bb };
            let broadcast = if dims.is_empty() {
                String::new()
            } else {
                format!(
                    "  {pct}{bb} = {mask_shape} broadcast({}), dimensions={{}}{nl}",
                    operand("pred[]", &be)
                )
            };
            computations = format!(
                "{pct}{cond} {{{nl}\
                 \x20 {pct}{cp} = {tuple} parameter(0){nl}\
                 \x20 {pct}{ci} = s64[] get-tuple-element({}), index=1{nl}\
                 \x20 {pct}{cm} = s64[] constant(-1){nl}\
                 \x20 ROOT {pct}{cc} = pred[] compare({}, {}), direction=NE{nl}\
                 }}{nl}{nl}\
                 {pct}{body} {{{nl}\
                 \x20 {pct}{bp} = {tuple} parameter(0){nl}\
                 \x20 {pct}{bv} = {shape} get-tuple-element({}), index=0{nl}\
                 \x20 {pct}{bi} = s64[] get-tuple-element({}), index=1{nl}\
                 \x20 {pct}{bo} = s64[] constant(1){nl}\
                 \x20 {pct}{bj} = s64[] add({}, {}){nl}\
                 \x20 {pct}{bm} = s64[] constant(-1){nl}\
                 \x20 {pct}{be} = pred[] compare({}, {}), direction=EQ{nl}\
                 {broadcast}\
                 \x20 {pct}{bn} = {shape} {flip}({}){nl}\
                 \x20 {pct}{bs} = {shape} select({}, {}, {}){nl}\
                 \x20 ROOT {pct}{br} = {tuple} tuple({}, {}){nl}\
                 }}{nl}{nl}",
                operand(&tuple, &cp),
                operand("s64[]", &ci),
                operand("s64[]", &cm),
                operand(&tuple, &bp),
                operand(&tuple, &bp),
                operand("s64[]", &bi),
                operand("s64[]", &bo),
                operand("s64[]", &bj),
                operand("s64[]", &bm),
                operand(&shape, &bv),
                operand(if dims.is_empty() { "pred[]" } else { &mask_shape }, mask),
                operand(&shape, &bn),
                operand(&shape, &bv),
                operand(&shape, &bs),
                operand("s64[]", &bj),
            );
            lines.push_str(&format!(
                "{indent}{pct}{z} = s64[] constant(0){nl}\
                 {indent}{pct}{init} = {tuple} tuple({}, {}){nl}\
                 {indent}{pct}{lp} = {tuple} while({}), condition={pct}{cond}, body={pct}{body}{nl}\
                 {indent}{root}{pct}{faulted} = {shape} get-tuple-element({}), index=0{nl}",
                operand(&shape, name),
                operand("s64[]", &z),
                operand(&tuple, &init),
                operand(&tuple, &lp),
            ));
        }
        Perturb::Float(_) | Perturb::Complex(_) | Perturb::Int(_) => {
            let literal = match perturb {
                Perturb::Float(v) => hlo_float(v),
                Perturb::Complex(v) => format!("({}, 0)", hlo_float(v)),
                Perturb::Int(v) => v.to_string(),
                _ => unreachable!("matched above"),
            };
            let amount = fresh(format!("{name}.fault_amount"));
            lines.push_str(&format!(
                "{indent}{pct}{amount} = {scalar} constant({literal}){nl}"
            ));
            let addend = if dims.is_empty() {
                amount
            } else {
                let b = fresh(format!("{name}.fault_broadcast"));
                lines.push_str(&format!(
                    "{indent}{pct}{b} = {shape} broadcast({}), dimensions={{}}{nl}",
                    operand(&scalar, &amount)
                ));
                b
            };
            let addend_shape = if dims.is_empty() { &scalar } else { &shape };
            lines.push_str(&format!(
                "{indent}{root}{pct}{faulted} = {shape} add({}, {}){nl}",
                operand(&shape, name),
                operand(addend_shape, &addend)
            ));
        }
    }
    let mut out = m.clone();
    let instructions = &mut out.computations[e].instructions;
    for (j, i) in instructions.iter_mut().enumerate() {
        if j != k && i.operand_names().contains(&name) {
            i.text = rename_operand(i, name, &faulted);
        }
    }
    let target = &mut instructions[k];
    if target.is_root {
        target.text = without_root(&target.text);
    }
    let mut added = target.clone();
    added.text = lines;
    instructions.insert(k + 1, added);
    // New computations (a hang's loop) go right before the computation faulted.
    out.computations[e].leading.push_str(&computations);
    parse_hlo(&print_module(&out)).map_err(RewriteError::from)
}

/// A float as an HLO literal (`0.5`, `1e-07`, `nan`).
fn hlo_float(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else {
        format!("{v:?}")
    }
}

/// An instruction's text with its operand `from` read as `to`.
fn rename_operand(i: &Instruction, from: &str, to: &str) -> String {
    let (s, e) = i.operands_span;
    let inside = &i.text[s + 1..e - 1];
    let parts: Vec<String> = split_top(inside)
        .into_iter()
        .map(|part| {
            let body = part.trim_end();
            match body.strip_suffix(from) {
                Some(head)
                    if !head.ends_with(|c: char| {
                        c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
                    }) =>
                {
                    format!("{head}{to}{}", &part[body.len()..])
                }
                _ => part.to_string(),
            }
        })
        .collect();
    format!("{}({}){}", &i.text[..s], parts.join(","), &i.text[e..])
}

/// An instruction's text without its `ROOT ` marker.
fn without_root(text: &str) -> String {
    let body = text.trim_end_matches(['\n', '\r']);
    let line_start = body.rfind('\n').map_or(0, |p| p + 1);
    let line = &text[line_start..];
    let indent = line.len() - line.trim_start().len();
    match line[indent..].strip_prefix("ROOT ") {
        Some(rest) => format!("{}{}{rest}", &text[..line_start], &line[..indent]),
        None => text.to_string(),
    }
}

// ---- StableHLO: faults ----

fn inject_mlir(m: &MlirModule, spec: &FaultSpec) -> Result<Rewritten<MlirModule>, RewriteError> {
    rewritable(spec)?;
    let g = StableHloGraph::new(m)?;
    let main = m.main().expect("StableHloGraph found the main function");
    // A node's statement: a value (`5`, `1#2`), several results (`1:4`), none (`stmt12`).
    let line_op = |name: &str| {
        let base = name.split(':').next().unwrap_or(name);
        let k = defining(main, base)
            .map(|(k, _)| k)
            .or_else(|| {
                main.body
                    .iter()
                    .position(|s| s.results.iter().any(|(r, _)| r == base))
            })
            .or_else(|| {
                let line: usize = name.strip_prefix("stmt")?.parse().ok()?;
                main.body.iter().position(|s| s.line == line)
            });
        k.map_or((0, String::new()), |k| {
            (main.body[k].line, main.body[k].op.clone())
        })
    };
    let sites = fault_sites(&g.graph, spec, &line_op)?;
    let mut text = m.text.clone();
    for &id in &sites {
        let name = g.graph.node(id).name.to_string();
        let ty = g
            .type_of(&name)
            .cloned()
            .expect("every value of the graph has a type");
        let module = parse_mlir(&text)?;
        text = fault_mlir(&module, &name, &ty, spec)?;
    }
    let module = reread_mlir(&text, check_mlir(m).is_ok())?;
    Ok(Rewritten { text, module })
}

/// The statement (index in `f`'s body) defining value `name` (`5`, `1#2`), and how its uses
/// name it: (value, result index).
fn defining(f: &crate::stablehlo::Func, name: &str) -> Option<(usize, (String, Option<usize>))> {
    f.body.iter().enumerate().find_map(|(k, s)| {
        s.results.iter().find_map(|(r, c)| {
            if *c == 1 && r == name {
                return Some((k, (r.clone(), None)));
            }
            let (base, index) = name.rsplit_once('#')?;
            let index: usize = index.parse().ok()?;
            (*c > 1 && base == r && index < *c).then(|| (k, (r.clone(), Some(index))))
        })
    })
}

/// The text of `m` with value `name` (of type `ty`) of its main function faulted.
fn fault_mlir(
    m: &MlirModule,
    name: &str,
    ty: &Type,
    spec: &FaultSpec,
) -> Result<String, RewriteError> {
    let main = m.main().expect("the module has a main function");
    let (k, (value, index)) =
        defining(main, name).expect("a node of the main graph is a value of main");
    let s = &main.body[k];
    let bad = |why: String| RewriteError::BadTarget {
        line: s.line,
        node: name.to_string(),
        op: s.op.clone(),
        why,
    };
    let Type::Tensor { element, .. } = ty else {
        return Err(bad(format!("values of type {ty} cannot be faulted")));
    };
    let perturb = perturbation(spec, mlir_class(element), element).map_err(bad)?;
    let reference = match index {
        Some(i) => format!("%{value}#{i}"),
        None => format!("%{value}"),
    };
    let stmt_text = &m.text[s.span.clone()];
    let indent = &stmt_text[..stmt_text.len() - stmt_text.trim_start().len()];
    let nl = if stmt_text.ends_with("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    // Fresh SSA names: none the module writes.
    let mut taken: HashSet<String> = HashSet::new();
    let b = m.text.as_bytes();
    for (p, _) in m.text.match_indices('%') {
        let n = b[p + 1..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'$' | b'-'))
            .count();
        taken.insert(m.text[p + 1..p + 1 + n].to_string());
    }
    let base: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut fresh = |stem: &str| {
        let first = format!("{stem}_{base}");
        let mut n = first.clone();
        let mut k = 0;
        while taken.contains(&n) {
            k += 1;
            n = format!("{first}_{k}");
        }
        taken.insert(n.clone());
        n
    };
    let faulted = fresh("fault");
    // What later statements read instead of the target.
    let mut replacement = format!("%{faulted}");
    let lines = match perturb {
        Perturb::Not => format!("{indent}%{faulted} = stablehlo.not {reference} : {ty}{nl}"),
        Perturb::CompileError => format!(
            "{indent}%{faulted} = stablehlo.custom_call @{COMPILE_FAULT_TARGET}({reference}) : ({ty}) -> {ty}{nl}"
        ),
        Perturb::Hang => {
            // while (i != -1) { i += 1; v = (i == -1) ? -v : v }, from i = 0 (see HLO's).
            let flip = if mlir_class(element) == Class::Pred {
                "not"
            } else {
                "negate"
            };
            let (zero, value, count) = (fresh("hang_zero"), fresh("hang_v"), fresh("hang_i"));
            let (cm, cc) = (fresh("hang_m"), fresh("hang_c"));
            let (one, j, bm, e, n, sel) = (
                fresh("hang_one"),
                fresh("hang_j"),
                fresh("hang_m"),
                fresh("hang_e"),
                fresh("hang_flipped"),
                fresh("hang_s"),
            );
            replacement = format!("%{faulted}#0");
            let i64 = "tensor<i64>";
            let compare = "(tensor<i64>, tensor<i64>) -> tensor<i1>";
            format!(
                "{indent}%{zero} = stablehlo.constant dense<0> : {i64}{nl}\
                 {indent}%{faulted}:2 = stablehlo.while(%{value} = {reference}, %{count} = %{zero}) : {ty}, {i64}{nl}\
                 {indent}cond {{{nl}\
                 {indent}  %{cm} = stablehlo.constant dense<-1> : {i64}{nl}\
                 {indent}  %{cc} = stablehlo.compare  NE, %{count}, %{cm},  SIGNED : {compare}{nl}\
                 {indent}  stablehlo.return %{cc} : tensor<i1>{nl}\
                 {indent}}} do {{{nl}\
                 {indent}  %{one} = stablehlo.constant dense<1> : {i64}{nl}\
                 {indent}  %{j} = stablehlo.add %{count}, %{one} : {i64}{nl}\
                 {indent}  %{bm} = stablehlo.constant dense<-1> : {i64}{nl}\
                 {indent}  %{e} = stablehlo.compare  EQ, %{j}, %{bm},  SIGNED : {compare}{nl}\
                 {indent}  %{n} = stablehlo.{flip} %{value} : {ty}{nl}\
                 {indent}  %{sel} = stablehlo.select %{e}, %{n}, %{value} : tensor<i1>, {ty}{nl}\
                 {indent}  stablehlo.return %{sel}, %{j} : {ty}, {i64}{nl}\
                 {indent}}}{nl}"
            )
        }
        Perturb::Float(_) | Perturb::Complex(_) | Perturb::Int(_) => {
            let literal = match perturb {
                Perturb::Float(v) if v.is_nan() => {
                    let format = mlir_format(element).ok_or_else(|| {
                        bad(format!("graphbug cannot write a NaN of type {element}"))
                    })?;
                    let nan = format
                        .nan()
                        .ok_or_else(|| bad(format!("{element} has no NaN")))?;
                    format!("0x{:0w$X}", nan, w = format.bits.div_ceil(4) as usize)
                }
                Perturb::Float(v) => mlir_float(v),
                Perturb::Complex(v) => format!("({},{})", mlir_float(v), mlir_float(0.0)),
                Perturb::Int(v) => v.to_string(),
                _ => unreachable!("matched above"),
            };
            let amount = fresh("fault_amount");
            format!(
                "{indent}%{amount} = stablehlo.constant dense<{literal}> : {ty}{nl}{indent}%{faulted} = stablehlo.add {reference}, %{amount} : {ty}{nl}"
            )
        }
    };
    let mut edits = vec![(s.span.end, s.span.end, lines)];
    for later in &main.body[k + 1..] {
        for u in &later.uses {
            if u.name == value && u.index == index {
                edits.push((u.span.start, u.span.end, replacement.clone()));
            }
        }
    }
    Ok(apply_edits(&m.text, edits))
}

/// A float as an MLIR literal: always with a `.` (`5.0e-1`, `1.0e0`).
fn mlir_float(v: f64) -> String {
    let s = format!("{v:e}");
    let (mantissa, exponent) = s.split_once('e').expect("`{:e}` writes an exponent");
    if mantissa.contains('.') {
        s
    } else {
        format!("{mantissa}.0e{exponent}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HLO: &str = "HloModule m, entry_computation_layout={(f32[3]{0}, bf16[3]{0}, s32[])->(f32[], c64[3]{0}, bf16[3]{0})}

add.0 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main.1 {
  x = f32[3]{0} parameter(0)
  y = bf16[3]{0} parameter(1)
  n = s32[] parameter(2)
  w = f32[3]{0} convert(y)
  z = f32[3]{0} multiply(x, w), metadata={op_name=\"f32[3] in a string\"}
  c = f32[] constant(-inf)
  k = f32[2]{0} constant({0.1, nan})
  r = f32[] reduce(z, c), dimensions={0}, to_apply=add.0
  cz = c64[3]{0} convert(z)
  i = s32[3]{0} bitcast-convert(n), dimensions={}
  p = f32[3]{0} reduce-precision(z), exponent_bits=5, mantissa_bits=10
  q = bf16[3]{0} convert(p)
  ROOT t = (f32[], c64[3]{0}, bf16[3]{0}) tuple(r, cz, q)
}
";

    #[test]
    fn hlo_raises_every_narrow_float_type_and_nothing_else() {
        let m = parse_hlo(HLO).unwrap();
        let r = raise_to_f64(&m).unwrap();
        let want = HLO
            .replace("f32[", "f64[")
            .replace("bf16[", "f64[")
            .replace("c64[", "c128[")
            .replace("\"f64[3] in a string\"", "\"f32[3] in a string\"");
        assert_eq!(r.text, want);
        assert!(r.text.contains("constant({0.1, nan})") && r.text.contains("exponent_bits=5"));
        assert_eq!(print_module(&r.module), r.text);
        // Already float64: byte for byte.
        assert_eq!(raise_to_f64(&r.module).unwrap().text, r.text);
    }

    #[test]
    fn hlo_older_style_raises_operand_shapes_and_signatures() {
        let old = "HloModule m, entry_computation_layout={(f32[3]{0})->(f32[3]{0}, /*index=1*/f16[])}\n\n%sum (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(f32[] %a, f32[] %b)\n}\n\nENTRY %e (x: f32[3]) -> (f32[3], f16[]) {\n  %x = f32[3]{0} parameter(0)\n  // a comment: f32[3] stays\n  %z = f32[] constant(0)\n  %r = f32[] reduce(f32[3]{0} %x, f32[] %z), dimensions={0}, to_apply=%sum\n  %h = f16[] convert(f32[] %r)\n  ROOT %t = (f32[3]{0}, f16[]) tuple(f32[3]{0} %x, /*index=1*/f16[] %h)\n}\n";
        let r = raise_to_f64(&parse_hlo(old).unwrap()).unwrap();
        let want = old
            .replace("f32[", "f64[")
            .replace("f16[", "f64[")
            .replace("comment: f64[3]", "comment: f32[3]");
        assert_eq!(r.text, want);
        check_hlo(&r.module).unwrap();
    }

    #[test]
    fn hlo_ops_of_a_bit_width_are_refused_where_their_types_change() {
        let module = |line: &str| {
            format!("HloModule m\n\nENTRY e {{\n  x = f32[4]{{0}} parameter(0)\n  u = u32[4]{{0}} parameter(1)\n{line}\n  ROOT o = f32[4]{{0}} add(x, x)\n}}\n")
        };
        for (line, want) in [
            (
                "  b = s32[4]{0} bitcast-convert(x)",
                "line 6: `b` (`bitcast-convert`) cannot be raised to float64: it reinterprets the bits of its operand as s32[4]{0}",
            ),
            (
                "  b = f32[4]{0} bitcast-convert(u)",
                "line 6: `b` (`bitcast-convert`)",
            ),
            (
                "  c = f32[4]{0} custom-call(x), custom_call_target=\"foo\"",
                "line 6: `c` (`custom-call`) cannot be raised to float64: custom call target \"foo\" is compiled for the types it was given",
            ),
            (
                "  g = (u64[2]{0}, f32[4]{0}) rng-bit-generator(u), algorithm=rng_default",
                "`g` (`rng-bit-generator`)",
            ),
            ("  s = f32[] constant(0)\n  g = f32[4]{0} rng(s, s), distribution=rng_uniform", "line 7: `g` (`rng`)"),
            (
                "  d = f32[] dot(x, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, algorithm=dot_bf16_bf16_f32",
                "`d` (`dot`) cannot be raised to float64: its algorithm=dot_bf16_bf16_f32 names",
            ),
        ] {
            let e = raise_to_f64(&parse_hlo(&module(line)).unwrap()).unwrap_err();
            assert!(e.to_string().contains(want), "{line}: {e}");
        }
        // The same ops on types the raise keeps stay.
        for line in [
            "  b = s32[4]{0} bitcast-convert(u)",
            "  c = u32[4]{0} custom-call(u), custom_call_target=\"foo\"",
            "  g = (u64[2]{0}, u32[4]{0}) rng-bit-generator(u), algorithm=rng_default",
            "  p = f32[4]{0} reduce-precision(x), exponent_bits=5, mantissa_bits=10",
            // Partitioner annotations hand their operand on, whatever its type.
            "  s = f32[4]{0} custom-call(x), custom_call_target=\"Sharding\", sharding={replicated}",
            "  s = f32[4]{0} custom-call(x), custom_call_target=\"xla.sdy.FuncResultSharding\"",
        ] {
            let r = raise_to_f64(&parse_hlo(&module(line)).unwrap()).unwrap();
            assert!(r.text.contains(&line.replace("f32[", "f64[")), "{}", r.text);
        }
        assert_eq!(
            call_target("stablehlo.custom_call @Sharding(%0) {"),
            "Sharding"
        );
        assert_eq!(
            call_target(
                "\"stablehlo.custom_call\"(%0) {call_target_name = \"xla.sdy.GlobalToLocalShape\"}"
            ),
            "xla.sdy.GlobalToLocalShape"
        );
        assert!(
            !is_sharding_annotation("foo") && is_sharding_annotation("\"SPMDFullToShardShape\"")
        );
    }

    #[test]
    fn float_formats_decode_exactly() {
        let f = |t: &str| mlir_format(t).unwrap();
        assert_eq!(f("f16").decode(0x3c00), 1.0);
        assert_eq!(f("f16").decode(0x0001), 2f64.powi(-24));
        assert_eq!(f("f16").decode(0xfbff), -65504.0);
        assert_eq!(f("bf16").decode(0x3f80), 1.0);
        assert_eq!(f("f32").decode(0x3dcc_cccd), f64::from(0.1f32));
        assert_eq!(f("f8E4M3FN").decode(0x7e), 448.0);
        assert!(f("f8E4M3FN").decode(0x7f).is_nan());
        assert_eq!(f("f8E5M2").decode(0x7c), f64::INFINITY);
        assert!(f("f8E5M2FNUZ").decode(0x80).is_nan());
        assert_eq!(f("f8E4M3FNUZ").decode(0x08), 2f64.powi(-7));
        assert_eq!(f("f8E8M0FNU").decode(0x7f), 1.0);
        assert_eq!(f("f4E2M1FN").decode(0x7), 6.0);
        // NaNs keep their sign and (IEEE) payload; quiet NaNs stay quiet.
        assert_eq!(
            f("f32").decode(0x7fc0_0000).to_bits(),
            0x7ff8_0000_0000_0000
        );
        assert_eq!(f("bf16").decode(0xffc1).to_bits(), 0xfff8_2000_0000_0000);
        assert_eq!(f("f32").nan(), Some(0x7fc0_0000));
        assert_eq!(f("bf16").nan(), Some(0x7fc0));
        assert_eq!(f("f16").nan(), Some(0x7e00));
        assert_eq!(f("f8E4M3FN").nan(), Some(0x7f));
        assert_eq!(f("f4E2M1FN").nan(), None);
    }

    const MLIR: &str = r#"module @m attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2xf32>, %arg1: tensor<?x2xbf16>) -> (tensor<2xf32> {jax.result_info = "f32 in a string"}, tensor<2xcomplex<f32>>) {
    %cst = stablehlo.constant dense<[0x7FC00000, 1.500000e+00]> : tensor<2xf32>
    %cst_0 = stablehlo.constant dense<"0x003C00BC"> : tensor<2xf16>
    %cst_1 = stablehlo.constant dense<0xFF80> : tensor<bf16>
    %cst_2 = stablehlo.constant dense<[(0x7F800000,2.500000e-01), (1.000000e+00,0.000000e+00)]> : tensor<2xcomplex<f32>>
    %c = stablehlo.constant dense<7> : tensor<2xi32>
    %e = stablehlo.constant dense<> : tensor<0x3xf32>
    %0 = stablehlo.convert %cst_0 : (tensor<2xf16>) -> tensor<2xf32>
    %1 = stablehlo.add %arg0, %0 : tensor<2xf32>
    %2 = "stablehlo.batch_norm_inference"(%1, %1, %1, %1, %1) <{epsilon = 0x7FC00000 : f32, feature_index = 0 : i64}> : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %3 = stablehlo.reduce_precision %2, format = e5m10 : tensor<2xf32>
    return %3, %cst_2 : tensor<2xf32>, tensor<2xcomplex<f32>>
  }
}
"#;

    #[test]
    fn stablehlo_raises_types_and_reencodes_hex_constants() {
        let m = parse_mlir(MLIR).unwrap();
        let r = raise_to_f64(&m).unwrap();
        let want = MLIR
            .replace("xf32>", "xf64>")
            .replace("<f32>", "<f64>")
            .replace("xbf16>", "xf64>")
            .replace("<bf16>", "<f64>")
            .replace("xf16>", "xf64>")
            .replace(": f32,", ": f64,")
            .replace("[0x7FC00000, 1.5", "[0x7FF8000000000000, 1.5")
            .replace("\"0x003C00BC\"", "\"0x000000000000F03F000000000000F0BF\"")
            .replace("<0xFF80>", "<0xFFF0000000000000>")
            .replace("(0x7F800000,", "(0x7FF0000000000000,")
            .replace("epsilon = 0x7FC00000", "epsilon = 0x7FF8000000000000");
        assert_eq!(r.text, want);
        assert!(r.text.contains("\"f32 in a string\"") && r.text.contains("format = e5m10"));
        assert!(r.text.contains("dense<7> : tensor<2xi32>"));
        assert_eq!(raise_to_f64(&r.module).unwrap().text, r.text);
    }

    #[test]
    fn stablehlo_ops_of_a_bit_width_are_refused_by_line() {
        let text = MLIR.replace(
            "    %3 = stablehlo.reduce_precision",
            "    %9 = stablehlo.bitcast_convert %c : (tensor<2xi32>) -> tensor<2xui32>\n    %8 = stablehlo.bitcast_convert %1 : (tensor<2xf32>) -> tensor<2xi32>\n    %3 = stablehlo.reduce_precision",
        );
        let e = raise_to_f64(&parse_mlir(&text).unwrap()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 13: `%8` (`stablehlo.bitcast_convert`) cannot be raised to float64: it reinterprets the bits of its operand, and the raise changes their width"
        );
        let text = MLIR.replace(
            "    %3 = stablehlo.reduce_precision",
            "    %4 = stablehlo.custom_call @lapack(%1) : (tensor<2xf32>) -> tensor<2xf32>\n    %3 = stablehlo.reduce_precision",
        );
        let e = raise_to_f64(&parse_mlir(&text).unwrap()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("line 12: `%4` (`stablehlo.custom_call`) cannot be raised"),
            "{e}"
        );
    }

    const SMALL: &str = "HloModule m, entry_computation_layout={(f32[3]{0}, s32[3]{0})->(f32[3]{0}, s32[3]{0}, pred[3]{0})}

ENTRY e {
  x = f32[3]{0} parameter(0)
  n = s32[3]{0} parameter(1)
  m = f32[3]{0} multiply(x, x)
  a = f32[3]{0} add(m, x)
  s = s32[3]{0} add(n, n)
  p = pred[3]{0} compare(m, a), direction=LT
  ROOT t = (f32[3]{0}, s32[3]{0}, pred[3]{0}) tuple(a, s, p)
}
";

    fn fault(text: &str, spec: &str) -> Result<String, RewriteError> {
        let spec = FaultSpec::parse(spec).unwrap();
        if text.starts_with("HloModule") {
            inject(&parse_hlo(text).unwrap(), &spec).map(|r| r.text)
        } else {
            inject(&parse_mlir(text).unwrap(), &spec).map(|r| r.text)
        }
    }

    #[test]
    fn hlo_faults_reach_instructions_of_called_computations_only_while_called() {
        let text = "HloModule m, entry_computation_layout={(f32[4]{0})->f32[]}

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT add.1 = f32[] add(a, b)
}

unused {
  c = f32[] parameter(0)
  ROOT neg.1 = f32[] negate(c)
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  zero = f32[] constant(0)
  ROOT r = f32[] reduce(x, zero), dimensions={0}, to_apply=sum
}
";
        let got = fault(text, "accuracy=0.5@node:add.1").unwrap();
        assert!(
            got.contains(
                "  add.1 = f32[] add(a, b)\n  add.1.fault_amount = f32[] constant(0.5)\n  ROOT add.1.fault = f32[] add(add.1, add.1.fault_amount)\n"
            ),
            "{got}"
        );
        // A computation nothing calls holds no target; an op counts the entry's nodes.
        let e = fault(text, "accuracy@node:neg.1").unwrap_err().to_string();
        assert!(e.contains("names no node"), "{e}");
        let e = fault(text, "accuracy@add").unwrap_err().to_string();
        assert!(e.contains("names no node"), "{e}");
    }

    #[test]
    fn hlo_faults_add_after_the_target_and_its_readers_read_the_sum() {
        let got = fault(SMALL, "accuracy=0.25@multiply").unwrap();
        let want = SMALL.replace(
            "  a = f32[3]{0} add(m, x)\n",
            "  m.fault_amount = f32[] constant(0.25)\n  m.fault_broadcast = f32[3]{0} broadcast(m.fault_amount), dimensions={}\n  m.fault = f32[3]{0} add(m, m.fault_broadcast)\n  a = f32[3]{0} add(m.fault, x)\n",
        ).replace("compare(m, a)", "compare(m.fault, a)");
        assert_eq!(got, want);
        // Every `add`, in graph order: the second reads the first's fault; NaN is `nan`.
        let got = fault(SMALL, "nan@node:a").unwrap();
        assert!(
            got.contains("  a.fault_amount = f32[] constant(nan)\n"),
            "{got}"
        );
        assert!(got.contains("compare(m, a.fault)") && got.contains("tuple(a.fault, s, p)"));
        // Integers get max(1, round(amount)); booleans are negated.
        let got = fault(SMALL, "accuracy=0.25@node:s").unwrap();
        assert!(
            got.contains("  s.fault_amount = s32[] constant(1)\n"),
            "{got}"
        );
        assert!(got.contains("tuple(a, s.fault, p)"));
        let got = fault(SMALL, "accuracy@compare").unwrap();
        assert!(
            got.contains("  p.fault = pred[3]{0} not(p)\n  ROOT t"),
            "{got}"
        );
        // A root target: the fault becomes the root; a scalar needs no broadcast.
        let scalar = "HloModule m\n\nENTRY %e (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  ROOT %y = f32[] sine(f32[] %x)\n}\n";
        let got = fault(scalar, "accuracy=-2@sine").unwrap();
        assert_eq!(got, "HloModule m\n\nENTRY %e (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  %y = f32[] sine(f32[] %x)\n  %y.fault_amount = f32[] constant(-2.0)\n  ROOT %y.fault = f32[] add(f32[] %y, f32[] %y.fault_amount)\n}\n");
        // Names stay unique.
        let clash = SMALL
            .replace(
                "  s = s32[3]{0} add(n, n)",
                "  m.fault = s32[3]{0} add(n, n)",
            )
            .replace("tuple(a, s, p)", "tuple(a, m.fault, p)");
        let got = fault(&clash, "accuracy@multiply").unwrap();
        assert!(
            got.contains("  m.fault.1 = f32[3]{0} add(m, m.fault_broadcast)\n"),
            "{got}"
        );
    }

    #[test]
    fn hlo_tuple_targets_fault_their_first_read_element() {
        let text = "HloModule m\n\nc {\n  cs = (s32[], f32[2]{0}) parameter(0)\n  ci = s32[] get-tuple-element(cs), index=0\n  k = s32[] constant(3)\n  ROOT l = pred[] compare(ci, k), direction=LT\n}\n\nb {\n  s = (s32[], f32[2]{0}) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n  one = s32[] constant(1)\n  j = s32[] add(i, one)\n  v = f32[2]{0} get-tuple-element(s), index=1\n  w = f32[2]{0} add(v, v)\n  ROOT r = (s32[], f32[2]{0}) tuple(j, w)\n}\n\nENTRY e {\n  x = f32[2]{0} parameter(0)\n  z = s32[] constant(0)\n  t = (s32[], f32[2]{0}) tuple(z, x)\n  loop = (s32[], f32[2]{0}) while(t), condition=c, body=b\n  out = f32[2]{0} get-tuple-element(loop), index=1\n  ROOT neg = f32[2]{0} negate(out)\n}\n";
        let got = fault(text, "accuracy=0.5@while").unwrap();
        assert!(got.contains("  out.fault = f32[2]{0} add(out, out.fault_broadcast)\n  ROOT neg = f32[2]{0} negate(out.fault)\n"), "{got}");
        // A tuple nothing takes an element of.
        let e = fault(text, "accuracy@node:t").unwrap_err();
        assert_eq!(e.to_string(), "line 23: `t` (`tuple`): its value is a tuple, and no element of it is read (nothing to fault)");
    }

    #[test]
    fn faults_that_are_no_rewrite_are_errors_saying_why() {
        for (spec, want) in [
            ("nan@node:s", "line 8: `s` (`add`): a nan fault needs a floating value, and this one is s32"),
            ("runtime@multiply", "fault:runtime@multiply: a runtime fault changes no program: compiled XLA code has no portable way to fail a run, so the caller simulates it"),
            ("crash@multiply", "fault:crash@multiply: a crash fault changes no program"),
            ("alias@multiply", "fault:alias@multiply: alias faults break an aten op's schema"),
            ("shape@multiply", "XLA programs have no such schemas"),
            ("accuracy@node:x", "`fault:accuracy@node:x` names no node: the graph has no node `x` that calls an op"),
            ("accuracy@divide", "`fault:accuracy@divide` names no node: no node of the graph calls `divide`"),
            ("accuracy@add#3", "the graph has 2 nodes calling `add` (`a`, `s`), so #3 is out of range"),
        ] {
            let e = fault(SMALL, spec).unwrap_err().to_string();
            assert!(e.starts_with(want) || e.contains(want), "{spec}: {e}");
        }
    }

    #[test]
    fn compile_and_hang_faults_are_rewrites_the_compiler_meets() {
        // Compile: the value passes through a custom call no compiler has.
        let got = fault(SMALL, "compile@multiply").unwrap();
        assert!(
            got.contains(&format!(
                "custom-call(m), custom_call_target=\"{COMPILE_FAULT_TARGET}\""
            )),
            "{got}"
        );
        // Hang: a loop computation pair before the entry, the value read from the loop.
        let got = fault(SMALL, "hang@multiply").unwrap();
        let m = parse_hlo(&got).unwrap();
        check_hlo(&m).unwrap();
        assert_eq!(
            m.computations.len(),
            parse_hlo(SMALL).unwrap().computations.len() + 2
        );
        assert!(
            got.contains("direction=NE") && got.contains("while(m.hang_init)"),
            "{got}"
        );
        assert!(got.contains("  m.hang_flipped = f32[3]{0} negate(m.hang_v)\n  m.hang_s = f32[3]{0} select(m.hang_mask, m.hang_flipped, m.hang_v)\n"), "{got}");
        assert!(
            got.contains("get-tuple-element(m.hang_loop), index=0"),
            "{got}"
        );
        // The same in XLA's `%` style with operand shapes, and on a scalar of StableHLO.
        let old = "HloModule m\n\nENTRY %e (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  ROOT %n = f32[] negate(f32[] %x)\n}\n";
        let got = fault(old, "hang@node:x").unwrap_err();
        assert!(got.to_string().contains("names no node"), "{got}");
        let got = fault(old, "hang@negate").unwrap();
        check_hlo(&parse_hlo(&got).unwrap()).unwrap();
        assert!(
            got.contains(
                "ROOT %n.fault = f32[] get-tuple-element((f32[], s64[]) %n.hang_loop), index=0"
            ),
            "{got}"
        );
        let mlir = "module {\n  func.func @main(%arg0: tensor<2xi1>) -> tensor<2xi1> {\n    %0 = stablehlo.not %arg0 : tensor<2xi1>\n    return %0 : tensor<2xi1>\n  }\n}\n";
        for spec in ["hang@not", "compile@not"] {
            let got = fault(mlir, spec).unwrap();
            let m = parse_mlir(&got).unwrap();
            check_mlir(&m).unwrap();
            if spec.starts_with("hang") {
                assert!(got.contains("return %fault_0#0 : tensor<2xi1>"), "{got}");
                assert!(
                    got.contains("stablehlo.not %hang_v_0 : tensor<2xi1>"),
                    "{got}"
                );
            } else {
                assert!(got.contains("stablehlo.custom_call @graphbug_injected_compile_fault(%0) : (tensor<2xi1>) -> tensor<2xi1>"), "{got}");
            }
        }
    }

    const MAIN: &str = r#"module @m {
  func.func public @main(%arg0: tensor<3xf32>, %arg1: tensor<3xbf16>) -> (tensor<3xf32>, tensor<3xi1>, tensor<3xbf16>) {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<3xf32>
    %1:2 = stablehlo.sort %0, %arg0, dimension = 0 : tensor<3xf32>, tensor<3xf32>
    %2 = stablehlo.add %1#0, %0 : tensor<3xf32>
    %3 = stablehlo.compare LT, %2, %1#1 : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
    return %2, %3, %arg1 : tensor<3xf32>, tensor<3xi1>, tensor<3xbf16>
  }
}
"#;

    #[test]
    fn stablehlo_faults_add_a_splat_constant_after_the_value() {
        let got = fault(MAIN, "accuracy=0.5@multiply").unwrap();
        let want = MAIN
            .replace(
                "    %1:2 = stablehlo.sort %0,",
                "    %fault_amount_0 = stablehlo.constant dense<5.0e-1> : tensor<3xf32>\n    %fault_0 = stablehlo.add %0, %fault_amount_0 : tensor<3xf32>\n    %1:2 = stablehlo.sort %fault_0,",
            )
            .replace("%1#0, %0 :", "%1#0, %fault_0 :");
        assert_eq!(got, want);
        // Several results: the first is faulted, where it is read.
        let got = fault(MAIN, "nan@sort").unwrap();
        assert!(got.contains("    %fault_amount_1_0 = stablehlo.constant dense<0x7FC00000> : tensor<3xf32>\n    %fault_1_0 = stablehlo.add %1#0, %fault_amount_1_0 : tensor<3xf32>\n    %2 = stablehlo.add %fault_1_0, %0"), "{got}");
        assert!(got.contains("%2, %1#1 :"), "{got}");
        // Booleans are negated; the return reads the fault.
        let got = fault(MAIN, "accuracy@compare").unwrap();
        assert!(
            got.contains(
                "    %fault_3 = stablehlo.not %3 : tensor<3xi1>\n    return %2, %fault_3, %arg1"
            ),
            "{got}"
        );
        let e = fault(MAIN, "nan@compare").unwrap_err().to_string();
        assert_eq!(e, "line 6: `3` (`stablehlo.compare`): a nan fault needs a floating value, and this one is i1");
        check_mlir(&parse_mlir(&fault(MAIN, "accuracy=3@add").unwrap()).unwrap()).unwrap();
    }
}

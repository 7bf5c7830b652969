//! Argument values of graph nodes, with Python's spelling of each.

use std::fmt::{self, Write as _};
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

use crate::graph::NodeId;
use crate::types::{Device, Dtype, Layout, MemoryFormat, OpName};

/// An argument of a call: a reference to a node, or a constant.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Value {
    /// The value produced by another node.
    Node(NodeId),
    /// A Python int.
    Int(i64),
    /// A Python float; `inf`, `-inf` and `nan` included.
    Float(#[serde(with = "float_serde")] f64),
    /// A Python complex number (real, imaginary): `1j`, `(1+2j)`, as backward formulas use
    /// (`polar`'s multiplies by `1j`).
    Complex(
        #[serde(with = "float_serde")] f64,
        #[serde(with = "float_serde")] f64,
    ),
    /// `True` / `False`.
    Bool(bool),
    /// `None`.
    None,
    /// A Python string.
    Str(String),
    /// A Python list, e.g. sizes `[2, 8]` or a `Tensor[]` of node references.
    List(Vec<Value>),
    /// A Python tuple.
    Tuple(Vec<Value>),
    /// `torch.float32`, ...
    Dtype(Dtype),
    /// `device(type='cuda', index=0)`
    Device(Device),
    /// `torch.contiguous_format`, ...
    MemoryFormat(MemoryFormat),
    /// `torch.strided`, ...
    Layout(Layout),
    /// An op passed as a value, as higher-order ops take one
    /// (`with_effects(token, torch.ops.aten._linalg_check_errors.default, ...)`).
    Op(OpName),
    /// `slice(start, stop, step)` in an index (`x[(slice(None, None, None), 0)]`): three items.
    Slice(Vec<Value>),
    /// `Ellipsis` (`...`) in an index.
    Ellipsis,
}

impl PartialEq for Value {
    /// Structural equality; floats compare by bit pattern, all NaNs alike.
    fn eq(&self, other: &Self) -> bool {
        use Value::*;
        match (self, other) {
            (Node(a), Node(b)) => a == b,
            (Int(a), Int(b)) => a == b,
            (Float(a), Float(b)) => float_key(*a) == float_key(*b),
            (Complex(a, b), Complex(c, d)) => {
                float_key(*a) == float_key(*c) && float_key(*b) == float_key(*d)
            }
            (Bool(a), Bool(b)) => a == b,
            (None, None) => true,
            (Str(a), Str(b)) => a == b,
            (List(a), List(b)) | (Tuple(a), Tuple(b)) => a == b,
            (Dtype(a), Dtype(b)) => a == b,
            (Device(a), Device(b)) => a == b,
            (MemoryFormat(a), MemoryFormat(b)) => a == b,
            (Layout(a), Layout(b)) => a == b,
            (Op(a), Op(b)) => a == b,
            (Slice(a), Slice(b)) => a == b,
            (Ellipsis, Ellipsis) => true,
            _ => false,
        }
    }
}

impl Eq for Value {}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Value::Node(n) => n.hash(state),
            Value::Int(i) => i.hash(state),
            Value::Float(f) => float_key(*f).hash(state),
            Value::Complex(re, im) => {
                float_key(*re).hash(state);
                float_key(*im).hash(state);
            }
            Value::Bool(b) => b.hash(state),
            Value::None => {}
            Value::Str(s) => s.hash(state),
            Value::List(v) | Value::Tuple(v) => v.hash(state),
            Value::Dtype(d) => d.hash(state),
            Value::Device(d) => d.hash(state),
            Value::MemoryFormat(m) => m.hash(state),
            Value::Layout(l) => l.hash(state),
            Value::Op(op) => op.hash(state),
            Value::Slice(v) => v.hash(state),
            Value::Ellipsis => {}
        }
    }
}

fn float_key(f: f64) -> u64 {
    if f.is_nan() {
        f64::NAN.to_bits()
    } else {
        f.to_bits()
    }
}

impl Value {
    /// The node this value refers to, if it is a node reference.
    pub fn as_node(&self) -> Option<NodeId> {
        match self {
            Value::Node(n) => Some(*n),
            _ => None,
        }
    }

    /// Calls `f` on every node reference, depth first, in argument order.
    pub fn for_each_node(&self, f: &mut impl FnMut(NodeId)) {
        match self {
            Value::Node(n) => f(*n),
            Value::List(items) | Value::Tuple(items) | Value::Slice(items) => {
                items.iter().for_each(|v| v.for_each_node(f))
            }
            _ => {}
        }
    }

    /// A copy with every node reference replaced by `f(reference)`.
    pub fn map_nodes(&self, f: &mut impl FnMut(NodeId) -> Value) -> Value {
        match self {
            Value::Node(n) => f(*n),
            Value::List(items) => Value::List(items.iter().map(|v| v.map_nodes(f)).collect()),
            Value::Tuple(items) => Value::Tuple(items.iter().map(|v| v.map_nodes(f)).collect()),
            Value::Slice(items) => Value::Slice(items.iter().map(|v| v.map_nodes(f)).collect()),
            other => other.clone(),
        }
    }

    /// A copy with every node reference renumbered by `f`; fails where `f` fails.
    pub fn try_remap<E>(
        &self,
        f: &mut impl FnMut(NodeId) -> Result<NodeId, E>,
    ) -> Result<Value, E> {
        Ok(match self {
            Value::Node(n) => Value::Node(f(*n)?),
            Value::List(items) => Value::List(
                items
                    .iter()
                    .map(|v| v.try_remap(f))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Tuple(items) => Value::Tuple(
                items
                    .iter()
                    .map(|v| v.try_remap(f))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Slice(items) => Value::Slice(
                items
                    .iter()
                    .map(|v| v.try_remap(f))
                    .collect::<Result<_, _>>()?,
            ),
            other => other.clone(),
        })
    }

    /// Writes the value as Python source, naming node references through `name`.
    pub fn write_python(&self, out: &mut String, name: &dyn Fn(NodeId) -> String) -> fmt::Result {
        match self {
            Value::Node(n) => out.push_str(&name(*n)),
            Value::Int(i) => write!(out, "{i}")?,
            Value::Float(f) => out.push_str(&python_float_repr(*f)),
            Value::Complex(re, im) => out.push_str(&python_complex_repr(*re, *im)),
            Value::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
            Value::None => out.push_str("None"),
            Value::Str(s) => out.push_str(&python_str_repr(s)),
            Value::List(items) => {
                out.push('[');
                write_items(out, items, name)?;
                out.push(']');
            }
            Value::Tuple(items) => {
                out.push('(');
                write_items(out, items, name)?;
                if items.len() == 1 {
                    out.push(',');
                }
                out.push(')');
            }
            Value::Dtype(d) => write!(out, "{d}")?,
            Value::Device(d) => match d.index {
                Some(i) => write!(out, "device(type='{}', index={i})", d.kind)?,
                None => write!(out, "device(type='{}')", d.kind)?,
            },
            Value::MemoryFormat(m) => write!(out, "torch.{}", m.torch_name())?,
            Value::Layout(l) => write!(out, "torch.{}", l.torch_name())?,
            Value::Op(op) => out.push_str(&op.torch_path()),
            Value::Slice(items) => {
                out.push_str("slice(");
                write_items(out, items, name)?;
                out.push(')');
            }
            Value::Ellipsis => out.push_str("Ellipsis"),
        }
        Ok(())
    }
}

fn write_items(out: &mut String, items: &[Value], name: &dyn Fn(NodeId) -> String) -> fmt::Result {
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        v.write_python(out, name)?;
    }
    Ok(())
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_string())
    }
}

impl From<Dtype> for Value {
    fn from(v: Dtype) -> Self {
        Value::Dtype(v)
    }
}

impl From<Device> for Value {
    fn from(v: Device) -> Self {
        Value::Device(v)
    }
}

impl From<MemoryFormat> for Value {
    fn from(v: MemoryFormat) -> Self {
        Value::MemoryFormat(v)
    }
}

impl From<Layout> for Value {
    fn from(v: Layout) -> Self {
        Value::Layout(v)
    }
}

impl From<Vec<i64>> for Value {
    /// An int list such as a shape.
    fn from(v: Vec<i64>) -> Self {
        Value::List(v.into_iter().map(Value::Int).collect())
    }
}

impl<const N: usize> From<[i64; N]> for Value {
    /// An int list such as a shape.
    fn from(v: [i64; N]) -> Self {
        Value::List(v.into_iter().map(Value::Int).collect())
    }
}

/// Formats a float exactly as Python's `repr(float)` does (`1e-05`, `0.1`, `inf`, `-0.0`).
pub fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    // Rust's `{:e}` gives the shortest round-tripping digits, as Python's repr does.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci
        .split_once('e')
        .expect("`{:e}` output always contains an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let digits = half_even(f.abs(), digits);
    let mut out = String::new();
    if f.is_sign_negative() {
        out.push('-');
    }
    if !(-4..16).contains(&exp) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let sign = if exp < 0 { '-' } else { '+' };
        let _ = write!(out, "e{sign}{:02}", exp.abs());
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', int_len - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    } else {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
        out.push_str(&digits);
    }
    out
}

/// Formats a complex number as Python's `repr(complex)` does: `1j`, `(1+2j)`, `(-0-1j)`,
/// `(1.5-0.25j)`, each part as `repr(float)` without a trailing `.0`.
pub fn python_complex_repr(re: f64, im: f64) -> String {
    let part = |x: f64| {
        let s = python_float_repr(x);
        match s.strip_suffix(".0") {
            Some(whole) if !s.contains('e') => whole.to_string(),
            _ => s,
        }
    };
    if re == 0.0 && re.is_sign_positive() {
        return format!("{}j", part(im));
    }
    let sign = if im.is_sign_negative() && !im.is_nan() {
        ""
    } else {
        "+"
    };
    format!("({}{sign}{}j)", part(re), part(im))
}

/// When a float lies exactly halfway between the two shortest digit strings that round-trip
/// (`2**-24 * 10` = 5.9604644775390625e-07), Python picks the even one (`...062`) where
/// Rust's shortest formatting may pick the other; this returns Python's choice.
fn half_even(f: f64, digits: String) -> String {
    let n = digits.len();
    // `{:.N$e}` rounds the exact binary value correctly, so enough digits show it exactly
    // (a double's expansion has at most 767 significant digits). A cheap look first: a
    // tie shows as `5000...` after the n-th digit.
    let near = format!("{:.*e}", n + 20, f);
    let near_tail = near.split_once('e').map_or("", |(m, _)| m);
    if !near_tail
        .get(n + 1..)
        .is_some_and(|t| t.starts_with("50000"))
    {
        return digits;
    }
    let exact = format!("{:.*e}", n + 800, f);
    let exact_digits: String = exact
        .split_once('e')
        .map_or("", |(m, _)| m)
        .chars()
        .filter(|c| *c != '.')
        .collect();
    let (Some(head), Some(tail)) = (exact_digits.get(..n), exact_digits.get(n..)) else {
        return digits;
    };
    let tie = tail.starts_with('5') && tail[1..].bytes().all(|b| b == b'0');
    let (Ok(low), true) = (head.parse::<u64>(), tie) else {
        return digits;
    };
    let high = low + 1;
    let even = if low % 2 == 0 { low } else { high };
    let even = even.to_string();
    if even.len() == n {
        even
    } else {
        digits
    }
}

/// Formats a string as Python's `repr(str)` does (single quotes unless the text holds one).
pub fn python_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let v = c as u32;
                if v <= 0xff {
                    let _ = write!(out, "\\x{v:02x}");
                } else if v <= 0xffff {
                    let _ = write!(out, "\\u{v:04x}");
                } else {
                    let _ = write!(out, "\\U{v:08x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Serde for floats that keeps `inf`, `-inf` and `nan`, which JSON numbers cannot hold.
mod float_serde {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(f: &f64, s: S) -> Result<S::Ok, S::Error> {
        if f.is_finite() {
            s.serialize_f64(*f)
        } else {
            s.serialize_str(&super::python_float_repr(*f))
        }
    }

    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Num(f64),
        Text(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        match Repr::deserialize(d)? {
            Repr::Num(f) => Ok(f),
            Repr::Text(t) => match t.as_str() {
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                "nan" => Ok(f64::NAN),
                other => Err(serde::de::Error::custom(format!(
                    "expected a number, \"inf\", \"-inf\" or \"nan\", found \"{other}\""
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        let cases = [
            (1e-05, "1e-05"),
            (0.1, "0.1"),
            (0.25, "0.25"),
            (1.0, "1.0"),
            (-2.0, "-2.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e15, "1000000000000000.0"),
            (123456.789, "123456.789"),
            (1e-300, "1e-300"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (0.125, "0.125"),
            (3.0517578125e-05, "3.0517578125e-05"),
            // Halfway between two shortest forms: Python picks the even last digit.
            (5.960464477539063e-07, "5.960464477539062e-07"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (-0.044715, "-0.044715"),
            (0.7978845608028654, "0.7978845608028654"),
        ];
        for (f, want) in cases {
            assert_eq!(python_float_repr(f), want, "repr of {f:?}");
        }
    }

    #[test]
    fn complex_repr_matches_python() {
        let cases = [
            ((0.0, 1.0), "1j"),
            ((1.0, 2.0), "(1+2j)"),
            ((-0.0, -1.0), "(-0-1j)"),
            ((1.5, -0.25), "(1.5-0.25j)"),
            ((0.0, 0.0), "0j"),
            ((-0.0, 0.0), "(-0+0j)"),
            ((1e16, 1e-5), "(1e+16+1e-05j)"),
            ((0.0, f64::INFINITY), "infj"),
            ((1.0, f64::NAN), "(1+nanj)"),
            ((2.0, -0.0), "(2-0j)"),
            ((0.0, 0.5), "0.5j"),
        ];
        for ((re, im), want) in cases {
            assert_eq!(
                python_complex_repr(re, im),
                want,
                "repr of ({re:?}, {im:?})"
            );
        }
    }

    #[test]
    fn str_repr_matches_python() {
        assert_eq!(python_str_repr("tanh"), "'tanh'");
        assert_eq!(python_str_repr("it's"), "\"it's\"");
        assert_eq!(python_str_repr("a'b\"c"), "'a\\'b\"c'");
        assert_eq!(python_str_repr("x\ny\\"), "'x\\ny\\\\'");
        assert_eq!(python_str_repr("\u{1}"), "'\\x01'");
        assert_eq!(python_str_repr("é"), "'é'");
    }

    #[test]
    fn nan_values_are_equal_and_serde_keeps_them() {
        let v = Value::List(vec![
            Value::Float(f64::NAN),
            Value::Float(f64::NEG_INFINITY),
            Value::Float(1e-05),
        ]);
        assert_eq!(v, v.clone());
        let json = serde_json::to_string(&v).unwrap();
        let back: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back, v);
        assert_ne!(Value::Float(0.0), Value::Float(-0.0));
        assert_ne!(Value::Int(1), Value::Float(1.0));
    }
}

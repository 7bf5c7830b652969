//! Literals of `constant`: text (`{ { 1, 2 }, { 3, 4 } }`, `(1.5, 2)`, `nan`, `-inf`,
//! `true`) ⇄ `xla.LiteralProto`, every element type, elements stored in the layout's
//! physical order, floats printed as XLA prints them.

use super::schema::xla::{LiteralProto, PrimitiveType as T, ShapeProto};
use super::shapes::{default_layout, element_name, proto_element_type};

/// How a minifloat encodes infinities and NaNs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Style {
    /// IEEE: infinities, NaNs with payloads.
    Ieee,
    /// No infinities; NaN is all ones (`fn`).
    Fn,
    /// No infinities, no negative zero; NaN is the sign bit alone (`fnuz`).
    Fnuz,
    /// Finite only (`f4e2m1fn`, `f6*`).
    Finite,
    /// Unsigned exponent only, NaN is all ones (`f8e8m0fnu`).
    E8m0,
}

/// A binary float format narrower than f32 (or f32 itself for its NaN rules).
#[derive(Clone, Copy, Debug)]
struct Mini {
    exp: u32,
    man: u32,
    bias: i32,
    style: Style,
    /// Digits XLA prints it with (`max_digits10`).
    digits: usize,
}

/// What an element type's values are.
#[derive(Clone, Copy, Debug)]
enum Elem {
    Pred,
    Int {
        bits: u32,
        signed: bool,
    },
    F32,
    F64,
    /// f16, bf16 (rounded through f32, as XLA's casts do) and the 8/6/4-bit floats.
    Mini(Mini, bool),
    C64,
    C128,
}

fn elem_of(ty: T) -> Option<Elem> {
    let mini = |exp, man, bias, style, digits| Mini {
        exp,
        man,
        bias,
        style,
        digits,
    };
    Some(match ty {
        T::Pred => Elem::Pred,
        T::S1 | T::S2 | T::S4 | T::S8 | T::S16 | T::S32 | T::S64 => Elem::Int {
            bits: int_bits(ty),
            signed: true,
        },
        T::U1 | T::U2 | T::U4 | T::U8 | T::U16 | T::U32 | T::U64 => Elem::Int {
            bits: int_bits(ty),
            signed: false,
        },
        T::F32 => Elem::F32,
        T::F64 => Elem::F64,
        T::F16 => Elem::Mini(mini(5, 10, 15, Style::Ieee, 5), true),
        T::Bf16 => Elem::Mini(mini(8, 7, 127, Style::Ieee, 4), true),
        T::F8e5m2 => Elem::Mini(mini(5, 2, 15, Style::Ieee, 2), false),
        T::F8e4m3 => Elem::Mini(mini(4, 3, 7, Style::Ieee, 3), false),
        T::F8e3m4 => Elem::Mini(mini(3, 4, 3, Style::Ieee, 3), false),
        T::F8e4m3fn => Elem::Mini(mini(4, 3, 7, Style::Fn, 3), false),
        T::F8e4m3fnuz => Elem::Mini(mini(4, 3, 8, Style::Fnuz, 3), false),
        T::F8e5m2fnuz => Elem::Mini(mini(5, 2, 16, Style::Fnuz, 2), false),
        T::F8e4m3b11fnuz => Elem::Mini(mini(4, 3, 11, Style::Fnuz, 3), false),
        T::F4e2m1fn => Elem::Mini(mini(2, 1, 1, Style::Finite, 2), false),
        T::F6e2m3fn => Elem::Mini(mini(2, 3, 1, Style::Finite, 3), false),
        T::F6e3m2fn => Elem::Mini(mini(3, 2, 3, Style::Finite, 2), false),
        T::F8e8m0fnu => Elem::Mini(mini(8, 0, 127, Style::E8m0, 2), false),
        T::C64 => Elem::C64,
        T::C128 => Elem::C128,
        _ => return None,
    })
}

fn int_bits(ty: T) -> u32 {
    match ty {
        T::S1 | T::U1 => 1,
        T::S2 | T::U2 => 2,
        T::S4 | T::U4 => 4,
        T::S8 | T::U8 => 8,
        T::S16 | T::U16 => 16,
        T::S32 | T::U32 => 32,
        _ => 64,
    }
}

/// The bytes field of the element types the proto stores one or two bytes an element.
fn bytes_field(lit: &mut LiteralProto, ty: T) -> Option<&mut Vec<u8>> {
    Some(match ty {
        T::S1 => &mut lit.s1s,
        T::S2 => &mut lit.s2s,
        T::S4 => &mut lit.s4s,
        T::S8 => &mut lit.s8s,
        T::U1 => &mut lit.u1s,
        T::U2 => &mut lit.u2s,
        T::U4 => &mut lit.u4s,
        T::U8 => &mut lit.u8s,
        T::S16 => &mut lit.s16s,
        T::U16 => &mut lit.u16s,
        T::F16 => &mut lit.f16s,
        T::Bf16 => &mut lit.bf16s,
        T::F4e2m1fn => &mut lit.f4e2m1fns,
        T::F8e3m4 => &mut lit.f8e3m4s,
        T::F8e4m3b11fnuz => &mut lit.f8e4m3b11fnuzs,
        T::F8e4m3fn => &mut lit.f8e4m3fns,
        T::F8e4m3fnuz => &mut lit.f8e4m3fnuzs,
        T::F8e4m3 => &mut lit.f8e4m3s,
        T::F8e5m2fnuz => &mut lit.f8e5m2fnuzs,
        T::F8e5m2 => &mut lit.f8e5m2s,
        T::F8e8m0fnu => &mut lit.f8e8m0fnus,
        T::F6e3m2fn => &mut lit.f6e3m2fns,
        T::F6e2m3fn => &mut lit.f6e2m3fns,
        _ => return None,
    })
}

/// One element as read from text.
#[derive(Clone, Copy, Debug)]
enum Value {
    Bool(bool),
    Int(i128),
    /// A float; for a NaN, its sign and payload (`nan(0x..)`) if written.
    Float(f64, Option<(bool, Option<u64>)>),
    Complex(f64, f64),
}

/// Tokens of a literal: brackets, commas and words, comments dropped.
fn tokens(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if text[i..].starts_with("/*") {
            i = text[i..].find("*/").map_or(bytes.len(), |e| i + e + 2);
        } else if matches!(c, b'{' | b'}' | b'(' | b')' | b',') {
            out.push(&text[i..=i]);
            i += 1;
        } else {
            let start = i;
            while i < bytes.len()
                && !bytes[i].is_ascii_whitespace()
                && !matches!(bytes[i], b'{' | b'}' | b'(' | b')' | b',')
                && !text[i..].starts_with("/*")
            {
                i += 1;
            }
            out.push(&text[start..i]);
        }
    }
    out
}

struct Reader<'a> {
    toks: Vec<&'a str>,
    at: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.toks.get(self.at).copied()
    }

    fn next(&mut self) -> Result<&'a str, String> {
        let t = self
            .peek()
            .ok_or_else(|| "the literal ends too early".to_string())?;
        self.at += 1;
        Ok(t)
    }

    fn expect(&mut self, want: &str) -> Result<(), String> {
        match self.next()? {
            t if t == want => Ok(()),
            t => Err(format!("expected `{want}` in the literal, found `{t}`")),
        }
    }

    /// A real number: `1.5`, `-3`, `inf`, `-nan`, `nan(0x1)`.
    fn real(&mut self) -> Result<Value, String> {
        let t = self.next()?;
        let (negative, body) = match t.strip_prefix('-') {
            Some(b) => (true, b),
            None => (false, t.strip_prefix('+').unwrap_or(t)),
        };
        if body == "nan" {
            let mut payload = None;
            if self.peek() == Some("(") {
                self.at += 1;
                let p = self.next()?;
                let hex = p
                    .strip_prefix("0x")
                    .ok_or_else(|| format!("expected a NaN payload `0x..`, found `{p}`"))?;
                payload = Some(
                    u64::from_str_radix(hex, 16).map_err(|_| format!("bad NaN payload `{p}`"))?,
                );
                self.expect(")")?;
            }
            return Ok(Value::Float(f64::NAN, Some((negative, payload))));
        }
        if body == "inf" {
            let v = if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            };
            return Ok(Value::Float(v, None));
        }
        // XLA's lexer reads an integer token as an integer: `-0` is 0.
        if !t.is_empty()
            && t.trim_start_matches('-')
                .bytes()
                .all(|b| b.is_ascii_digit())
        {
            if let Ok(i) = t.parse::<i128>() {
                return Ok(Value::Int(i));
            }
        }
        t.parse::<f64>()
            .map(|v| Value::Float(v, None))
            .map_err(|_| format!("expected a number in the literal, found `{t}`"))
    }

    fn scalar(&mut self, elem: Elem) -> Result<Value, String> {
        match elem {
            Elem::Pred => match self.next()? {
                "true" | "1" => Ok(Value::Bool(true)),
                "false" | "0" => Ok(Value::Bool(false)),
                t => Err(format!("expected `true` or `false`, found `{t}`")),
            },
            Elem::Int { .. } => {
                let t = self.next()?;
                t.parse::<i128>()
                    .map(Value::Int)
                    .map_err(|_| format!("expected an integer in the literal, found `{t}`"))
            }
            Elem::C64 | Elem::C128 => {
                self.expect("(")?;
                let re = as_f64(self.real()?);
                self.expect(",")?;
                let im = as_f64(self.real()?);
                self.expect(")")?;
                Ok(Value::Complex(re, im))
            }
            _ => self.real(),
        }
    }
}

fn as_f64(v: Value) -> f64 {
    match v {
        Value::Int(i) => i as f64,
        Value::Float(f, _) => f,
        Value::Bool(b) => f64::from(u8::from(b)),
        Value::Complex(re, _) => re,
    }
}

/// Reads the literal text of a `constant` of shape `shape` (with its layout).
pub(crate) fn parse_literal(text: &str, shape: &ShapeProto) -> Result<LiteralProto, String> {
    let mut r = Reader {
        toks: tokens(text),
        at: 0,
    };
    if r.toks == ["{", "...", "}"] {
        // XLA's parser makes values up for an elided literal (`constant({...})`, as XLA
        // prints large constants); graphbug makes zeros, the same every time.
        return zeros(shape);
    }
    let lit = read(&mut r, shape)?;
    if let Some(t) = r.peek() {
        return Err(format!("unexpected `{t}` after the literal"));
    }
    Ok(lit)
}

fn read(r: &mut Reader<'_>, shape: &ShapeProto) -> Result<LiteralProto, String> {
    let ty = proto_element_type(shape.element_type)?;
    let mut lit = LiteralProto {
        shape: Some(shape.clone()),
        ..LiteralProto::default()
    };
    if ty == T::Tuple {
        r.expect("(")?;
        for (k, e) in shape.tuple_shapes.iter().enumerate() {
            if k > 0 {
                r.expect(",")?;
            }
            lit.tuple_literals.push(read(r, e)?);
        }
        r.expect(")")?;
        return Ok(lit);
    }
    let elem = array_elem(ty, shape)?;
    let dims = &shape.dimensions;
    let mut values = Vec::new();
    if dims.is_empty() {
        values.push(r.scalar(elem)?);
    } else {
        nested(r, elem, dims, 0, &mut values)?;
    }
    store(&mut lit, ty, elem, shape, values)?;
    Ok(lit)
}

/// How the elements of an array constant of type `ty` and `shape` are written; an error for
/// a type without literals or a dynamic shape.
fn array_elem(ty: T, shape: &ShapeProto) -> Result<Elem, String> {
    let elem = elem_of(ty).ok_or_else(|| {
        format!(
            "a constant of element type {} has no literal",
            element_name(ty).unwrap_or_default()
        )
    })?;
    if shape.is_dynamic_dimension.iter().any(|d| *d) {
        return Err("a constant of a dynamic shape".into());
    }
    Ok(elem)
}

/// An array literal of `shape` holding zeros.
fn zeros(shape: &ShapeProto) -> Result<LiteralProto, String> {
    let ty = proto_element_type(shape.element_type)?;
    let elem = array_elem(ty, shape)?;
    let n: i64 = shape.dimensions.iter().product();
    let zero = match elem {
        Elem::Pred => Value::Bool(false),
        Elem::Int { .. } => Value::Int(0),
        Elem::C64 | Elem::C128 => Value::Complex(0.0, 0.0),
        _ => Value::Float(0.0, None),
    };
    let mut lit = LiteralProto {
        shape: Some(shape.clone()),
        ..LiteralProto::default()
    };
    let n = usize::try_from(n).map_err(|_| format!("{n} elements"))?;
    store(&mut lit, ty, elem, shape, vec![zero; n])?;
    Ok(lit)
}

/// `{ ... }` at depth `depth` of an array of sizes `dims`.
fn nested(
    r: &mut Reader<'_>,
    elem: Elem,
    dims: &[i64],
    depth: usize,
    out: &mut Vec<Value>,
) -> Result<(), String> {
    r.expect("{")?;
    let mut n = 0i64;
    if r.peek() != Some("}") {
        loop {
            if depth + 1 == dims.len() {
                out.push(r.scalar(elem)?);
            } else {
                nested(r, elem, dims, depth + 1, out)?;
            }
            n += 1;
            match r.next()? {
                "," => continue,
                "}" => break,
                t => return Err(format!("expected `,` or `}}` in the literal, found `{t}`")),
            }
        }
    } else {
        r.at += 1;
    }
    if n != dims[depth] {
        return Err(format!(
            "the literal has {n} elements in dimension {depth}, the shape says {}",
            dims[depth]
        ));
    }
    Ok(())
}

/// The physical position of each element, in logical (row-major) order.
fn physical_order(shape: &ShapeProto) -> Vec<usize> {
    let dims: Vec<usize> = shape.dimensions.iter().map(|d| *d as usize).collect();
    let n: usize = dims.iter().product();
    let m2m = shape
        .layout
        .as_ref()
        .filter(|l| l.minor_to_major.len() == dims.len())
        .map_or_else(
            || default_layout(dims.len()).minor_to_major,
            |l| l.minor_to_major.clone(),
        );
    let mut stride = vec![0usize; dims.len()];
    let mut s = 1;
    for &d in &m2m {
        stride[d as usize] = s;
        s *= dims[d as usize];
    }
    let mut out = Vec::with_capacity(n);
    let mut index = vec![0usize; dims.len()];
    for _ in 0..n {
        out.push(index.iter().zip(&stride).map(|(i, s)| i * s).sum());
        for d in (0..dims.len()).rev() {
            index[d] += 1;
            if index[d] < dims[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}

fn store(
    lit: &mut LiteralProto,
    ty: T,
    elem: Elem,
    shape: &ShapeProto,
    values: Vec<Value>,
) -> Result<(), String> {
    if shape.layout.as_ref().is_some_and(|l| !l.tiles.is_empty()) {
        return Err("a constant with a tiled layout".into());
    }
    let order = physical_order(shape);
    let mut phys = vec![Value::Int(0); values.len()];
    for (v, p) in values.into_iter().zip(order) {
        phys[p] = v;
    }
    let name = element_name(ty).unwrap_or_default();
    match elem {
        Elem::Pred => {
            lit.preds = phys
                .iter()
                .map(|v| match v {
                    Value::Bool(b) => *b,
                    _ => false,
                })
                .collect();
        }
        Elem::Int { bits, signed } => {
            let (lo, hi) = if signed {
                (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
            } else {
                (0, (1i128 << bits) - 1)
            };
            let mut ints = Vec::with_capacity(phys.len());
            for v in &phys {
                let Value::Int(i) = v else {
                    return Err(format!("a {name} literal holds a non-integer"));
                };
                if *i < lo || *i > hi {
                    return Err(format!("value {i} is out of range for {name}"));
                }
                ints.push(*i);
            }
            match ty {
                T::S32 => lit.s32s = ints.iter().map(|i| *i as i32).collect(),
                T::S64 => lit.s64s = ints.iter().map(|i| *i as i64).collect(),
                T::U32 => lit.u32s = ints.iter().map(|i| *i as u32).collect(),
                T::U64 => lit.u64s = ints.iter().map(|i| *i as u64).collect(),
                T::S16 | T::U16 => {
                    let field = bytes_field(lit, ty).expect("16-bit ints are bytes");
                    *field = ints
                        .iter()
                        .flat_map(|i| (*i as u16).to_le_bytes())
                        .collect();
                }
                _ => {
                    let mask = if bits == 8 { 0xff } else { (1u8 << bits) - 1 };
                    let field = bytes_field(lit, ty).expect("narrow ints are bytes");
                    *field = ints.iter().map(|i| (*i as u8) & mask).collect();
                }
            }
        }
        Elem::F32 => {
            lit.f32s = phys
                .iter()
                .map(|v| float_bits_f32(v).map(f32::from_bits))
                .collect::<Result<_, _>>()?;
        }
        Elem::F64 => {
            lit.f64s = phys
                .iter()
                .map(|v| float_bits_f64(v).map(f64::from_bits))
                .collect::<Result<_, _>>()?;
        }
        Elem::Mini(m, via_f32) => {
            let mut bits = Vec::with_capacity(phys.len());
            for v in &phys {
                bits.push(encode_mini(v, m, via_f32, &name)?);
            }
            let field = bytes_field(lit, ty).expect("minifloats are bytes");
            *field = if m.bits() > 8 {
                bits.iter()
                    .flat_map(|b| (*b as u16).to_le_bytes())
                    .collect()
            } else {
                bits.iter().map(|b| *b as u8).collect()
            };
        }
        Elem::C64 | Elem::C128 => {
            for v in &phys {
                let Value::Complex(re, im) = v else {
                    return Err(format!("a {name} literal holds a non-complex"));
                };
                if elem_is_c64(elem) {
                    lit.c64s.extend([*re as f32, *im as f32]);
                } else {
                    lit.c128s.extend([*re, *im]);
                }
            }
        }
    }
    Ok(())
}

fn elem_is_c64(e: Elem) -> bool {
    matches!(e, Elem::C64)
}

fn float_bits_f32(v: &Value) -> Result<u32, String> {
    Ok(match *v {
        Value::Float(_, Some((neg, payload))) => {
            let p = payload.unwrap_or(1 << 22);
            if p == 0 || p >= 1 << 23 {
                return Err(format!("NaN payload {p:#x} does not fit f32"));
            }
            (u32::from(neg) << 31) | 0x7f80_0000 | p as u32
        }
        other => {
            let x = as_f64(other);
            let f = x as f32;
            if f.is_infinite() && x.is_finite() {
                return Err(format!("value {x} is out of range for f32"));
            }
            f.to_bits()
        }
    })
}

fn float_bits_f64(v: &Value) -> Result<u64, String> {
    Ok(match *v {
        Value::Float(_, Some((neg, payload))) => {
            let p = payload.unwrap_or(1 << 51);
            if p == 0 || p >= 1 << 52 {
                return Err(format!("NaN payload {p:#x} does not fit f64"));
            }
            (u64::from(neg) << 63) | 0x7ff0_0000_0000_0000 | p
        }
        other => as_f64(other).to_bits(),
    })
}

impl Mini {
    fn bits(&self) -> u32 {
        1 + self.exp + self.man - u32::from(self.style == Style::E8m0)
    }

    fn max_exp_field(&self) -> u32 {
        let all = (1 << self.exp) - 1;
        match self.style {
            Style::Ieee => all - 1,
            Style::E8m0 => all - 1,
            _ => all,
        }
    }

    fn max_man_at_top(&self) -> u32 {
        let all = (1 << self.man) - 1;
        match self.style {
            Style::Fn => all - 1,
            _ => all,
        }
    }

    fn nan_bits(&self, negative: bool, payload: Option<u64>) -> Result<u32, String> {
        let sign = 1 << (self.exp + self.man);
        match self.style {
            Style::Ieee => {
                let p = payload.unwrap_or(1 << (self.man - 1));
                if p == 0 || p >= 1 << self.man {
                    return Err(format!("NaN payload {p:#x} does not fit"));
                }
                Ok(
                    if negative { sign } else { 0 }
                        | (((1 << self.exp) - 1) << self.man)
                        | p as u32,
                )
            }
            Style::Fn => Ok(if negative { sign } else { 0 } | (sign - 1)),
            Style::Fnuz => Ok(sign),
            Style::E8m0 => Ok(0xff),
            Style::Finite => Err("this type has no NaN".into()),
        }
    }

    /// The value of a bit pattern.
    fn decode(&self, bits: u32) -> f64 {
        if self.style == Style::E8m0 {
            return if bits == 0xff {
                f64::NAN
            } else {
                2f64.powi(bits as i32 - self.bias)
            };
        }
        let sign = bits >> (self.exp + self.man) & 1 == 1;
        let e = (bits >> self.man) & ((1 << self.exp) - 1);
        let m = bits & ((1 << self.man) - 1);
        let magnitude = match self.style {
            Style::Ieee if e == (1 << self.exp) - 1 => {
                if m == 0 {
                    f64::INFINITY
                } else {
                    f64::NAN
                }
            }
            Style::Fn if e == (1 << self.exp) - 1 && m == (1 << self.man) - 1 => f64::NAN,
            Style::Fnuz if sign && e == 0 && m == 0 => return f64::NAN,
            _ if e == 0 => f64::from(m) * 2f64.powi(1 - self.bias - self.man as i32),
            _ => {
                (1.0 + f64::from(m) / f64::from(1u32 << self.man)) * 2f64.powi(e as i32 - self.bias)
            }
        };
        if sign {
            -magnitude
        } else {
            magnitude
        }
    }

    /// The largest finite value.
    fn max_finite(&self) -> f64 {
        if self.style == Style::E8m0 {
            return 2f64.powi(254 - self.bias);
        }
        self.decode((self.max_exp_field() << self.man) | self.max_man_at_top())
    }

    /// Rounds `v` to nearest, ties to even; `None` when it overflows.
    fn encode(&self, v: f64) -> Option<u32> {
        let a = v.abs();
        if self.style == Style::E8m0 {
            if v <= 0.0 {
                return None;
            }
            let e = a.log2().round_ties_even() as i32 + self.bias;
            return (0..=254).contains(&e).then_some(e as u32);
        }
        let sign = if v.is_sign_negative() {
            1 << (self.exp + self.man)
        } else {
            0
        };
        let zero = if self.style == Style::Fnuz { 0 } else { sign };
        let emin = 1 - self.bias;
        let Some(exponent) = exponent_of(a) else {
            return Some(zero);
        };
        let quantum = 2f64.powi(exponent.max(emin) - self.man as i32);
        let rounded = (a / quantum).round_ties_even() * quantum;
        if rounded > self.max_finite() {
            return None;
        }
        let Some(e) = exponent_of(rounded) else {
            return Some(zero);
        };
        let bits = if e < emin {
            (rounded / 2f64.powi(emin - self.man as i32)) as u32
        } else {
            let m = (rounded / 2f64.powi(e - self.man as i32)) as u32 - (1 << self.man);
            (((e + self.bias) as u32) << self.man) | m
        };
        Some(sign | bits)
    }
}

/// The binary exponent of a positive normal f64 (`None` for zero and subnormals, which
/// round to zero in every narrower format).
fn exponent_of(a: f64) -> Option<i32> {
    let biased = ((a.to_bits() >> 52) & 0x7ff) as i32;
    (biased != 0).then_some(biased - 1023)
}

fn encode_mini(v: &Value, m: Mini, via_f32: bool, name: &str) -> Result<u32, String> {
    if let Value::Float(_, Some((neg, payload))) = v {
        return m
            .nan_bits(*neg, *payload)
            .map_err(|e| format!("{name}: {e}"));
    }
    let mut x = as_f64(*v);
    if via_f32 {
        let finite = x.is_finite();
        x = f64::from(x as f32);
        if finite && x.is_infinite() {
            // Out of f32's range, so out of the narrower type's: XLA refuses it.
            return Err(format!("value {} is out of range for {name}", as_f64(*v)));
        }
    }
    if x.is_infinite() {
        return match m.style {
            Style::Ieee => {
                Ok((u32::from(x < 0.0) << (m.exp + m.man)) | (((1 << m.exp) - 1) << m.man))
            }
            _ => Err(format!("{name} has no infinity")),
        };
    }
    m.encode(x)
        .ok_or_else(|| format!("value {x} is out of range for {name}"))
}

/// `%.{digits}g`, as C's printf writes it.
pub(crate) fn fmt_g(v: f64, digits: usize) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let e_form = format!("{:.*e}", digits - 1, v);
    let (mantissa, exp) = e_form.split_once('e').expect("`{:e}` writes an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= digits as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip(mantissa), exp.abs())
    } else {
        let decimals = (digits as i32 - 1 - exp).max(0) as usize;
        strip(&format!("{v:.decimals$}"))
    }
}

fn nan_text(negative: bool, payload: u64, quiet: u64) -> String {
    let mut s = if negative { "-nan" } else { "nan" }.to_string();
    if payload != quiet {
        s.push_str(&format!("(0x{payload:x})"));
    }
    s
}

fn fmt_f32(v: f32) -> String {
    if v.is_nan() {
        let b = v.to_bits();
        return nan_text(b >> 31 == 1, u64::from(b & 0x7f_ffff), 1 << 22);
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.into();
    }
    let short = fmt_g(f64::from(v), 6);
    if short.parse::<f32>().ok() == Some(v) {
        short
    } else {
        fmt_g(f64::from(v), 9)
    }
}

fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        let b = v.to_bits();
        return nan_text(b >> 63 == 1, b & 0xf_ffff_ffff_ffff, 1 << 51);
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.into();
    }
    let short = fmt_g(v, 15);
    if short.parse::<f64>().ok() == Some(v) {
        short
    } else {
        fmt_g(v, 17)
    }
}

fn fmt_mini(bits: u32, m: Mini) -> String {
    let v = m.decode(bits);
    if v.is_nan() {
        let negative =
            m.style != Style::Fnuz && m.style != Style::E8m0 && bits >> (m.exp + m.man) & 1 == 1;
        let (payload, quiet) = match m.style {
            Style::Ieee => (u64::from(bits & ((1 << m.man) - 1)), 1u64 << (m.man - 1)),
            _ => (0, 0),
        };
        return nan_text(negative, payload, quiet);
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.into();
    }
    fmt_g(v, m.digits)
}

/// The literal of an array of `shape` (its layout's physical order) whose elements are
/// `data`, little-endian as host tensors and XLA's buffers hold them (a `pred` a byte).
pub(crate) fn literal_of_bytes(shape: &ShapeProto, data: &[u8]) -> Result<LiteralProto, String> {
    let ty = proto_element_type(shape.element_type)?;
    let n: i64 = shape.dimensions.iter().product();
    let width = match elem_of(ty) {
        Some(Elem::Pred) => 1,
        Some(Elem::Int { bits, .. }) if bits >= 8 => bits as usize / 8,
        Some(Elem::F32) => 4,
        Some(Elem::F64) | Some(Elem::C64) => 8,
        Some(Elem::C128) => 16,
        Some(Elem::Mini(m, _)) if m.bits() % 8 == 0 => m.bits() as usize / 8,
        _ => return Err(format!("constants of element type {ty:?} are not written")),
    };
    if data.len() as i64 != n * width as i64 {
        return Err(format!(
            "{} bytes for {n} elements of {width} bytes",
            data.len()
        ));
    }
    let mut lit = LiteralProto {
        shape: Some(shape.clone()),
        ..LiteralProto::default()
    };
    fn words<const N: usize, T>(data: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
        data.chunks_exact(N)
            .map(|c| f(c.try_into().expect("chunks of N")))
            .collect()
    }
    match ty {
        T::Pred => lit.preds = data.iter().map(|b| *b != 0).collect(),
        T::S32 => lit.s32s = words(data, i32::from_le_bytes),
        T::S64 => lit.s64s = words(data, i64::from_le_bytes),
        T::U32 => lit.u32s = words(data, u32::from_le_bytes),
        T::U64 => lit.u64s = words(data, u64::from_le_bytes),
        T::F32 | T::C64 => {
            let v = words(data, f32::from_le_bytes);
            if ty == T::F32 {
                lit.f32s = v;
            } else {
                lit.c64s = v;
            }
        }
        T::F64 | T::C128 => {
            let v = words(data, f64::from_le_bytes);
            if ty == T::F64 {
                lit.f64s = v;
            } else {
                lit.c128s = v;
            }
        }
        _ => {
            *bytes_field(&mut lit, ty)
                .ok_or_else(|| format!("constants of element type {ty:?} are not written"))? =
                data.to_vec();
        }
    }
    Ok(lit)
}

/// The elements of an array literal as host tensors hold them: its element type's text
/// name (`f32`), its sizes, and its elements row-major and little-endian (a `pred` a
/// byte), whatever its layout's physical order. The inverse of [`literal_of_bytes`]; what
/// it cannot hand out (a tuple, a dynamic size, a tiled or packed layout, sub-byte
/// integers) is an error naming it.
pub(crate) fn bytes_of_literal(
    mut lit: LiteralProto,
) -> Result<(String, Vec<i64>, Vec<u8>), String> {
    let shape = lit
        .shape
        .take()
        .ok_or_else(|| "a literal without a shape".to_string())?;
    let ty = proto_element_type(shape.element_type)?;
    if ty == T::Tuple {
        return Err("a tuple literal (a tuple-typed argument)".into());
    }
    let name = element_name(ty).ok_or_else(|| format!("a literal of element type {ty:?}"))?;
    if shape.is_dynamic_dimension.iter().any(|d| *d) || shape.dimensions.iter().any(|d| *d < 0) {
        return Err(format!(
            "a {name} literal of dynamic sizes {:?}",
            shape.dimensions
        ));
    }
    let n: usize = shape.dimensions.iter().map(|d| *d as usize).product();
    fn flat<const N: usize, V: Copy>(values: &[V], f: fn(V) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(|v| f(*v)).collect()
    }
    let (width, data) = match ty {
        T::Pred => (1, lit.preds.iter().map(|b| u8::from(*b)).collect()),
        T::S32 => (4, flat(&lit.s32s, i32::to_le_bytes)),
        T::S64 => (8, flat(&lit.s64s, i64::to_le_bytes)),
        T::U32 => (4, flat(&lit.u32s, u32::to_le_bytes)),
        T::U64 => (8, flat(&lit.u64s, u64::to_le_bytes)),
        T::F32 => (4, flat(&lit.f32s, f32::to_le_bytes)),
        T::F64 => (8, flat(&lit.f64s, f64::to_le_bytes)),
        T::C64 => (8, flat(&lit.c64s, f32::to_le_bytes)),
        T::C128 => (16, flat(&lit.c128s, f64::to_le_bytes)),
        _ => {
            let bits = match elem_of(ty) {
                Some(Elem::Int { bits, .. }) => bits,
                Some(Elem::Mini(m, _)) => m.bits(),
                _ => 0,
            };
            if bits % 8 != 0 || bits == 0 {
                return Err(format!("{name} elements ({bits} bits) are not read"));
            }
            let field =
                bytes_field(&mut lit, ty).ok_or_else(|| format!("{name} elements are not read"))?;
            (bits as usize / 8, std::mem::take(field))
        }
    };
    if data.len() != n * width {
        return Err(format!(
            "a {name}{:?} literal holds {} bytes, not {} ({n} elements of {width} bytes)",
            shape.dimensions,
            data.len(),
            n * width
        ));
    }
    if let Some(layout) = shape.layout.as_deref() {
        if !layout.tiles.is_empty() || layout.element_size_in_bits != 0 {
            return Err(format!(
                "a {name}{:?} literal in a tiled or packed layout",
                shape.dimensions
            ));
        }
        if !layout_orders_dimensions(&shape) {
            return Err(format!(
                "a {name}{:?} literal's layout {{{:?}}} is no order of its dimensions",
                shape.dimensions, layout.minor_to_major
            ));
        }
    }
    let data = reorder(&data, &shape, width, true);
    Ok((name, shape.dimensions, data))
}

/// The elements `data` (`width` bytes each) of an array of `shape`, from its layout's
/// physical order to row-major order (`to_row_major`), or back. The layout must order the
/// shape's dimensions (see [`layout_orders_dimensions`]).
pub(crate) fn reorder(
    data: &[u8],
    shape: &ShapeProto,
    width: usize,
    to_row_major: bool,
) -> Vec<u8> {
    let positions = physical_order(shape);
    let mut out = vec![0u8; data.len()];
    for (logical, physical) in positions.into_iter().enumerate() {
        let (from, to) = if to_row_major {
            (physical, logical)
        } else {
            (logical, physical)
        };
        out[to * width..(to + 1) * width].copy_from_slice(&data[from * width..(from + 1) * width]);
    }
    out
}

/// Whether `shape`'s layout, if it has one, is an order of its dimensions.
pub(crate) fn layout_orders_dimensions(shape: &ShapeProto) -> bool {
    shape.layout.as_ref().is_none_or(|l| {
        let mut m2m = l.minor_to_major.clone();
        m2m.sort_unstable();
        m2m.is_empty() || m2m.into_iter().eq(0..shape.dimensions.len() as i64)
    })
}

/// Prints a literal as XLA prints a `constant`'s.
pub(crate) fn print_literal(lit: &LiteralProto) -> Result<String, String> {
    let shape = lit
        .shape
        .as_ref()
        .ok_or_else(|| "a literal without a shape".to_string())?;
    let ty = proto_element_type(shape.element_type)?;
    if ty == T::Tuple {
        if lit.tuple_literals.len() != shape.tuple_shapes.len() {
            return Err("a tuple literal with the wrong number of elements".into());
        }
        let parts: Vec<String> = lit
            .tuple_literals
            .iter()
            .map(print_literal)
            .collect::<Result<_, _>>()?;
        return Ok(format!("( {} )", parts.join(", ")));
    }
    if !lit.sparse_indices.is_empty() || !lit.dynamic_sizes.is_empty() {
        return Err("a literal with sparse indices or dynamic sizes".into());
    }
    let elem = elem_of(ty).ok_or_else(|| format!("a literal of element type {ty:?}"))?;
    if shape.layout.as_ref().is_some_and(|l| !l.tiles.is_empty()) {
        return Err("a literal with a tiled layout".into());
    }
    let n: i64 = shape.dimensions.iter().product();
    let mut copy = lit.clone();
    let phys: Vec<String> = match elem {
        Elem::Pred => {
            let scalar = shape.dimensions.is_empty();
            lit.preds
                .iter()
                .map(|b| match (scalar, b) {
                    (true, true) => "true",
                    (true, false) => "false",
                    (false, true) => "1",
                    (false, false) => "0",
                })
                .map(str::to_string)
                .collect()
        }
        Elem::Int { bits, signed } => match ty {
            T::S32 => lit.s32s.iter().map(i32::to_string).collect(),
            T::S64 => lit.s64s.iter().map(i64::to_string).collect(),
            T::U32 => lit.u32s.iter().map(u32::to_string).collect(),
            T::U64 => lit.u64s.iter().map(u64::to_string).collect(),
            T::S16 => pairs(bytes_field(&mut copy, ty))
                .map(|b| (b as i16).to_string())
                .collect(),
            T::U16 => pairs(bytes_field(&mut copy, ty))
                .map(|b| b.to_string())
                .collect(),
            _ => bytes_field(&mut copy, ty)
                .expect("narrow ints are bytes")
                .iter()
                .map(|b| {
                    let v = i64::from(*b) & ((1 << bits) - 1);
                    if signed && v >= 1 << (bits - 1) {
                        (v - (1 << bits)).to_string()
                    } else {
                        v.to_string()
                    }
                })
                .collect(),
        },
        Elem::F32 => lit.f32s.iter().map(|v| fmt_f32(*v)).collect(),
        Elem::F64 => lit.f64s.iter().map(|v| fmt_f64(*v)).collect(),
        Elem::Mini(m, _) => {
            let field = bytes_field(&mut copy, ty).expect("minifloats are bytes");
            if m.bits() > 8 {
                pairs(Some(field))
                    .map(|b| fmt_mini(u32::from(b), m))
                    .collect()
            } else {
                field.iter().map(|b| fmt_mini(u32::from(*b), m)).collect()
            }
        }
        Elem::C64 => lit
            .c64s
            .chunks(2)
            .map(|c| {
                format!(
                    "({}, {})",
                    fmt_f32(c[0]),
                    fmt_f32(*c.get(1).unwrap_or(&0.0))
                )
            })
            .collect(),
        Elem::C128 => lit
            .c128s
            .chunks(2)
            .map(|c| {
                format!(
                    "({}, {})",
                    fmt_f64(c[0]),
                    fmt_f64(*c.get(1).unwrap_or(&0.0))
                )
            })
            .collect(),
    };
    if phys.len() as i64 != n {
        return Err(format!(
            "the literal holds {} elements, its shape {n}",
            phys.len()
        ));
    }
    let order = physical_order(shape);
    let logical: Vec<&str> = order.iter().map(|p| phys[*p].as_str()).collect();
    let dims = &shape.dimensions;
    if dims.is_empty() {
        return Ok(logical[0].to_string());
    }
    let mut at = 0;
    Ok(print_nested(&logical, dims, &mut Vec::new(), &mut at))
}

fn pairs(field: Option<&mut Vec<u8>>) -> impl Iterator<Item = u16> + '_ {
    field
        .expect("two-byte elements are bytes")
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], *c.get(1).unwrap_or(&0)]))
}

/// XLA's one-line print of an array: `{1, 2}`; at rank 2 and more `{ { 1, 2 }, { 3, 4 } }`,
/// with `/*iK=N*/` before the inner arrays from rank 4 on.
fn print_nested(values: &[&str], dims: &[i64], index: &mut Vec<i64>, at: &mut usize) -> String {
    let rank = dims.len();
    let rest = &dims[index.len()..];
    if rest.len() == 1 {
        let items: Vec<&str> = values[*at..*at + rest[0] as usize].to_vec();
        *at += rest[0] as usize;
        return if rank == 1 || rest[0] <= 1 {
            format!("{{{}}}", items.join(", "))
        } else {
            format!("{{ {} }}", items.join(", "))
        };
    }
    let mut children = Vec::new();
    for i in 0..rest[0] {
        index.push(i);
        children.push(print_nested(values, dims, index, at));
        index.pop();
    }
    if rank > 3 && !index.is_empty() {
        let comment = format!("/*i{}={}*/", index.len() - 1, index[index.len() - 1]);
        if children.is_empty() {
            format!("{{ {comment} }}")
        } else {
            format!("{{ {comment} {} }}", children.join(", "))
        }
    } else {
        format!("{{ {} }}", children.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::super::shapes::parse_shape_proto;
    use super::*;

    fn round(shape: &str, text: &str) -> String {
        let s = parse_shape_proto(shape).unwrap();
        print_literal(&parse_literal(text, &s).unwrap()).unwrap()
    }

    #[test]
    fn literals_print_as_xla_prints_them() {
        // Expected texts are XLA's (jaxlib 0.10.2) prints of the same constants.
        let cases = [
            ("f32[20]", "{0.1, 1e-8, 123456789, 1e30, 3.4028235e38, 1.17549435e-38, 1e-45, 0.5, 100, 1234567, 12345678, 0.0001, 0.00001, -0.0, nan, -nan, inf, -inf, nan(0x1), -nan(0x400001)}",
             "{0.1, 1e-08, 123456792, 1e+30, 3.40282347e+38, 1.17549435e-38, 1.4013e-45, 0.5, 100, 1234567, 12345678, 0.0001, 1e-05, -0, nan, -nan, inf, -inf, nan(0x1), -nan(0x400001)}"),
            ("f64[17]", "{0.1, 1e-8, 123456789, 1e30, 1e300, 0.7, 100, 1234567, 1e16, 1e17, 0.0001, 0.00001, -0.0, -0, 5e-324, 1.7976931348623157e308, nan}",
             "{0.1, 1e-08, 123456789, 1e+30, 1e+300, 0.7, 100, 1234567, 1e+16, 1e+17, 0.0001, 1e-05, -0, 0, 4.94065645841247e-324, 1.7976931348623157e+308, nan}"),
            ("bf16[9]", "{0.1, 1e-8, 100, 1234567, 3.14159, -0.0, nan, -inf, 1e30}",
             "{0.1001, 1.001e-08, 100, 1.237e+06, 3.141, -0, nan, -inf, 1e+30}"),
            ("f16[9]", "{0.1, 1e-8, 100, 65504, 3.14159, -0.0, nan, -inf, 6e-8}",
             "{0.099976, 0, 100, 65504, 3.1406, -0, nan, -inf, 5.9605e-08}"),
            ("c64[2]", "{(1, 2), (0.1, -0.5)}", "{(1, 2), (0.1, -0.5)}"),
            ("pred[4]", "{1, 0, true, false}", "{1, 0, 1, 0}"),
            ("pred[]", "true", "true"),
            ("s8[2]", "{-128, 127}", "{-128, 127}"),
            ("u64[1]", "{18446744073709551615}", "{18446744073709551615}"),
            ("s64[1]", "{-9223372036854775808}", "{-9223372036854775808}"),
            ("f8e4m3fn[3]", "{0.5, 448, -0.0}", "{0.5, 448, -0}"),
            ("s4[2]", "{-8, 7}", "{-8, 7}"),
            ("u4[2]", "{15, 3}", "{15, 3}"),
            ("s16[2]", "{-1, 300}", "{-1, 300}"),
            ("(f32[], (s32[], pred[2]))", "(1.5, (2, {1, 0}))", "( 1.5, ( 2, {1, 0} ) )"),
            ("f32[2,3]{0,1}", "{ {1, 2, 3}, {4, 5, 6} }", "{ { 1, 2, 3 }, { 4, 5, 6 } }"),
            ("s32[2,2,2]", "{{{1,2},{3,4}},{{5,6},{7,8}}}", "{ { { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 7, 8 } } }"),
            ("s32[0,2]", "{ }", "{  }"),
            ("s32[2,0,2]", "{ {}, {} }", "{ {  }, {  } }"),
            ("s32[2,1]", "{{1},{2}}", "{ {1}, {2} }"),
            ("s32[1,1,1,1]", "{{{{7}}}}", "{ { /*i0=0*/ { /*i1=0*/ {7} } } }"),
            ("s32[2,2,1,2]", "{{{{1,2}},{{3,4}}},{{{5,6}},{{7,8}}}}",
             "{ { /*i0=0*/ { /*i1=0*/ { 1, 2 } }, { /*i1=1*/ { 3, 4 } } }, { /*i0=1*/ { /*i1=0*/ { 5, 6 } }, { /*i1=1*/ { 7, 8 } } } }"),
            ("s32[2,0,1,1]", "{ {}, {} }", "{ { /*i0=0*/ }, { /*i0=1*/ } }"),
            ("s32[1,1,2,0,0]", "{{{{},{}}}}", "{ { /*i0=0*/ { /*i1=0*/ { /*i2=0*/ }, { /*i2=1*/ } } } }"),
        ];
        for (shape, text, want) in cases {
            assert_eq!(round(shape, text), want, "{shape} {text}");
        }
    }

    #[test]
    fn layouts_store_physical_order() {
        let s = parse_shape_proto("f32[2,3]{0,1}").unwrap();
        let lit = parse_literal("{ {1, 2, 3}, {4, 5, 6} }", &s).unwrap();
        assert_eq!(lit.f32s, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        let bf = parse_literal("{1.5, -inf, nan}", &parse_shape_proto("bf16[3]").unwrap()).unwrap();
        assert_eq!(bf.bf16s, [192, 63, 128, 255, 192, 127]);
        let s4 = parse_literal("{-8, 7, 1}", &parse_shape_proto("s4[3]").unwrap()).unwrap();
        assert_eq!(s4.s4s, [8, 7, 1]);
    }

    #[test]
    fn recorded_bytes_print_as_literals_that_read_back_exactly() {
        // (shape, little-endian bytes of its elements in row-major order)
        let f32s: Vec<u8> = [1.5f32, -0.0, 1e-40, f32::MAX, f32::INFINITY, -3.25e-7]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let f64s: Vec<u8> = [0.1f64, -1e300, 5e-324, 2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("f32[2,3]", f32s.clone()),
            ("f64[4]", f64s.clone()),
            ("c64[3]", f32s),
            ("c128[2]", f64s),
            ("pred[2,2]", vec![1, 0, 0, 1]),
            ("pred[]", vec![1]),
            ("s8[3]", vec![0x80, 0x7f, 0xff]),
            ("u8[2]", vec![0, 255]),
            ("s16[2]", vec![0x00, 0x80, 0xff, 0x7f]),
            ("u16[1]", vec![0xff, 0xff]),
            ("bf16[2]", vec![0x80, 0x3f, 0xc0, 0x7f]),
            ("f16[2]", vec![0x00, 0x3c, 0x01, 0x00]),
            (
                "s32[2]",
                [-7i32, i32::MAX]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
            ),
            ("s64[1]", i64::MIN.to_le_bytes().to_vec()),
            ("u32[1]", u32::MAX.to_le_bytes().to_vec()),
            ("u64[1]", u64::MAX.to_le_bytes().to_vec()),
        ];
        for (shape, data) in cases {
            let s = parse_shape_proto(shape).unwrap();
            let lit = literal_of_bytes(&s, &data).unwrap();
            let text = print_literal(&lit).unwrap();
            let back = parse_literal(&text, &s).unwrap();
            let same = if shape.starts_with("bf16") {
                // NaN: compare the text of both, not the values.
                print_literal(&back).unwrap() == text
            } else {
                back == lit
            };
            assert!(same, "{shape}: {text}");
        }
        // Not one element more or fewer than the shape holds.
        let s = parse_shape_proto("f32[2]").unwrap();
        assert!(literal_of_bytes(&s, &[0; 4]).is_err());
    }

    /// A literal's elements come back as they were recorded, row-major whatever its
    /// layout; what host tensors cannot hold is named.
    #[test]
    fn literals_hand_out_their_elements_row_major() {
        for (shape, data) in [
            (
                "f32[3]",
                [1.5f32, -2.0, 0.25]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<u8>>(),
            ),
            ("pred[2,2]", vec![1, 0, 0, 1]),
            ("s8[3]", vec![0x80, 0x7f, 0xff]),
            ("bf16[2]", vec![0x80, 0x3f, 0xc0, 0x7f]),
            ("s64[1]", i64::MIN.to_le_bytes().to_vec()),
            (
                "c64[1]",
                [1.0f32, -1.0]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
            ),
            ("u16[0]", vec![]),
        ] {
            let s = parse_shape_proto(shape).unwrap();
            let lit = literal_of_bytes(&s, &data).unwrap();
            let (ty, dims, back) = bytes_of_literal(lit).unwrap();
            assert_eq!(back, data, "{shape}");
            assert!(shape.starts_with(&ty), "{shape}: {ty}");
            assert_eq!(dims, s.dimensions, "{shape}");
        }
        // [[1, 2, 3], [4, 5, 6]] stored column-major ({0,1}: dimension 0 most minor) and
        // a rank-3 array stored {1,2,0}.
        let s = parse_shape_proto("s32[2,3]{0,1}").unwrap();
        let physical: Vec<u8> = [1i32, 4, 2, 5, 3, 6]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let (_, _, back) = bytes_of_literal(literal_of_bytes(&s, &physical).unwrap()).unwrap();
        let row_major: Vec<u8> = (1i32..=6).flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(back, row_major);
        let s = parse_shape_proto("u8[2,2,3]{1,2,0}").unwrap();
        // Element [i][j][k] = 100i + 10j + k, stored with j fastest, then k, then i.
        let mut physical = Vec::new();
        for i in 0..2u8 {
            for k in 0..3u8 {
                for j in 0..2u8 {
                    physical.push(100 * i + 10 * j + k);
                }
            }
        }
        let (_, _, back) = bytes_of_literal(literal_of_bytes(&s, &physical).unwrap()).unwrap();
        let mut expected = Vec::new();
        for i in 0..2u8 {
            for j in 0..2u8 {
                for k in 0..3u8 {
                    expected.push(100 * i + 10 * j + k);
                }
            }
        }
        assert_eq!(back, expected);
        // A tuple, and elements missing, are named.
        let tuple = LiteralProto {
            shape: Some(parse_shape_proto("(f32[], s32[])").unwrap()),
            ..LiteralProto::default()
        };
        assert!(bytes_of_literal(tuple).unwrap_err().contains("tuple"));
        let short = LiteralProto {
            shape: Some(parse_shape_proto("f32[4]").unwrap()),
            f32s: vec![1.0],
            ..LiteralProto::default()
        };
        let e = bytes_of_literal(short).unwrap_err();
        assert!(e.contains("holds 4 bytes, not 16"), "{e}");
    }

    #[test]
    fn bad_literals_say_why() {
        let s = parse_shape_proto("f32[2,3]").unwrap();
        for (text, want) in [
            (
                "{ {1, 2}, {4, 5, 6} }",
                "2 elements in dimension 1, the shape says 3",
            ),
            (
                "{ {1, 2, 3} }",
                "1 elements in dimension 0, the shape says 2",
            ),
            ("{ {1, 2, x}, {4, 5, 6} }", "expected a number"),
            ("{ {1, 2, 3}, {4, 5, 6} } 7", "unexpected `7`"),
        ] {
            let e = parse_literal(text, &s).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
        let e = parse_literal("{300}", &parse_shape_proto("s8[1]").unwrap()).unwrap_err();
        assert!(e.contains("out of range for s8"), "{e}");
        let e = parse_literal("1e40", &parse_shape_proto("f32[]").unwrap()).unwrap_err();
        assert!(e.contains("out of range for f32"), "{e}");
        let e = parse_literal("1e100", &parse_shape_proto("bf16[]").unwrap()).unwrap_err();
        assert!(e.contains("out of range for bf16"), "{e}");
        // An elided literal (`{...}`, as XLA prints large constants) reads as zeros.
        let zeros = parse_literal("{...}", &s).unwrap();
        assert_eq!(zeros.f32s, vec![0.0; 6]);
    }
}

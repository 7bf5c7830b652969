//! HLO shapes as XLA prints them: `f32[3,8]{1,0}`, `pred[]`, `s32[<=5]`, tuples
//! `(s64[], f32[5]{0})`, `token[]`.

use std::fmt;

use graphbug_ir::Dtype;

/// An HLO shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// An array: element type, sizes (with which are dynamic, `<=N`), and the layout as
    /// written (`{1,0}`, `{1,0:T(8,128)}`), if any.
    Array {
        /// The element type, as XLA names it (`f32`, `pred`, `s64`, `bf16`, `f8e4m3fn`...).
        ty: String,
        /// The sizes (a bound for a dynamic one).
        dims: Vec<i64>,
        /// Which sizes are dynamic (`<=N` or `?`).
        dynamic: Vec<bool>,
        /// The layout braces, verbatim.
        layout: Option<String>,
    },
    /// A tuple of shapes.
    Tuple(Vec<Shape>),
}

/// The element types XLA prints, with the dtype graphbug holds them as where it has one.
const ELEMENT_TYPES: [(&str, Option<Dtype>); 29] = [
    ("pred", Some(Dtype::Bool)),
    ("s2", None),
    ("s4", None),
    ("s8", Some(Dtype::Int8)),
    ("s16", Some(Dtype::Int16)),
    ("s32", Some(Dtype::Int32)),
    ("s64", Some(Dtype::Int64)),
    ("u2", None),
    ("u4", None),
    ("u8", Some(Dtype::UInt8)),
    ("u16", Some(Dtype::UInt16)),
    ("u32", Some(Dtype::UInt32)),
    ("u64", Some(Dtype::UInt64)),
    ("f16", Some(Dtype::Float16)),
    ("bf16", Some(Dtype::BFloat16)),
    ("f32", Some(Dtype::Float32)),
    ("f64", Some(Dtype::Float64)),
    ("c64", Some(Dtype::Complex64)),
    ("c128", Some(Dtype::Complex128)),
    ("f8e5m2", None),
    ("f8e4m3fn", None),
    ("f8e4m3b11fnuz", None),
    ("f8e5m2fnuz", None),
    ("f8e4m3fnuz", None),
    ("f8e4m3", None),
    ("f8e3m4", None),
    ("f4e2m1fn", None),
    ("token", None),
    ("opaque", None),
];

/// Whether `ty` is an element type XLA knows.
pub fn is_element_type(ty: &str) -> bool {
    ELEMENT_TYPES.iter().any(|(t, _)| *t == ty) || ty == "f8e8m0fnu"
}

/// The dtype graphbug holds an XLA element type as, if it has one.
pub fn dtype_of(ty: &str) -> Option<Dtype> {
    ELEMENT_TYPES
        .iter()
        .find(|(t, _)| *t == ty)
        .and_then(|(_, d)| *d)
}

/// The XLA element type of a dtype.
pub fn element_type_of(dtype: Dtype) -> &'static str {
    ELEMENT_TYPES
        .iter()
        .find(|(_, d)| *d == Some(dtype))
        .map(|(t, _)| *t)
        .expect("every dtype has an XLA element type")
}

impl Shape {
    /// An array of `dtype` with static sizes `dims` and no layout written.
    pub fn array(dtype: Dtype, dims: &[i64]) -> Shape {
        Shape::Array {
            ty: element_type_of(dtype).to_string(),
            dims: dims.to_vec(),
            dynamic: vec![false; dims.len()],
            layout: None,
        }
    }

    /// The tuple's elements, or `None` for an array.
    pub fn tuple(&self) -> Option<&[Shape]> {
        match self {
            Shape::Tuple(e) => Some(e),
            Shape::Array { .. } => None,
        }
    }

    /// The shape without any layout written (what two shapes must agree on).
    pub fn without_layout(&self) -> Shape {
        match self {
            Shape::Array {
                ty, dims, dynamic, ..
            } => Shape::Array {
                ty: ty.clone(),
                dims: dims.clone(),
                dynamic: dynamic.clone(),
                layout: None,
            },
            Shape::Tuple(e) => Shape::Tuple(e.iter().map(Shape::without_layout).collect()),
        }
    }

    /// XLA's default layout written out (`{1,0}`, major to minor) on every array without
    /// one, as XLA prints an entry computation's layout.
    pub fn with_default_layout(&self) -> Shape {
        match self {
            Shape::Array {
                ty,
                dims,
                dynamic,
                layout,
            } => Shape::Array {
                ty: ty.clone(),
                dims: dims.clone(),
                dynamic: dynamic.clone(),
                layout: layout.clone().or_else(|| {
                    (!dims.is_empty() && ty != "token" && ty != "opaque").then(|| {
                        let minor_to_major: Vec<String> =
                            (0..dims.len()).rev().map(|d| d.to_string()).collect();
                        format!("{{{}}}", minor_to_major.join(","))
                    })
                }),
            },
            Shape::Tuple(e) => Shape::Tuple(e.iter().map(Shape::with_default_layout).collect()),
        }
    }
}

impl fmt::Display for Shape {
    /// As XLA prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Array {
                ty,
                dims,
                dynamic,
                layout,
            } => {
                write!(f, "{ty}[")?;
                for (k, d) in dims.iter().enumerate() {
                    if k > 0 {
                        f.write_str(",")?;
                    }
                    if dynamic.get(k).copied().unwrap_or(false) {
                        write!(f, "<={d}")?;
                    } else {
                        write!(f, "{d}")?;
                    }
                }
                f.write_str("]")?;
                if let Some(l) = layout {
                    f.write_str(l)?;
                }
                Ok(())
            }
            Shape::Tuple(elements) => {
                f.write_str("(")?;
                for (k, e) in elements.iter().enumerate() {
                    if k > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// Parses a shape at the start of `text`: the shape and the bytes it took, or why not.
pub fn parse_shape(text: &str) -> Result<(Shape, usize), String> {
    let bytes = text.as_bytes();
    if bytes.first() == Some(&b'(') {
        let mut elements = Vec::new();
        let mut at = 1;
        loop {
            at += skip_spaces_and_comments(&text[at..]);
            if text[at..].starts_with(')') {
                return Ok((Shape::Tuple(elements), at + 1));
            }
            if !elements.is_empty() {
                if !text[at..].starts_with(',') {
                    return Err(format!(
                        "expected `,` or `)` in a tuple shape, found `{}`",
                        snippet(&text[at..])
                    ));
                }
                at += 1;
                at += skip_spaces_and_comments(&text[at..]);
            }
            let (e, n) = parse_shape(&text[at..])?;
            elements.push(e);
            at += n;
        }
    }
    let ty_len = text
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    let ty = &text[..ty_len];
    if ty.is_empty() {
        return Err(format!("expected a shape, found `{}`", snippet(text)));
    }
    if !is_element_type(ty) {
        return Err(format!("unknown element type `{ty}`"));
    }
    let rest = &text[ty_len..];
    if !rest.starts_with('[') {
        return Err(format!("expected `[` after element type `{ty}`"));
    }
    let close = rest
        .find(']')
        .ok_or_else(|| format!("unterminated sizes of `{ty}[`"))?;
    let (mut dims, mut dynamic) = (Vec::new(), Vec::new());
    let body = &rest[1..close];
    if !body.trim().is_empty() {
        for d in body.split(',') {
            let d = d.trim();
            let (is_dyn, n) = match d.strip_prefix("<=") {
                Some(n) => (true, n),
                None if d == "?" => (true, "-1"),
                None => (false, d),
            };
            let n: i64 = n
                .parse()
                .map_err(|_| format!("bad size `{d}` in `{ty}[{body}]`"))?;
            dims.push(n);
            dynamic.push(is_dyn);
        }
    }
    let mut at = ty_len + close + 1;
    let mut layout = None;
    if text[at..].starts_with('{') {
        let n = balanced(&text[at..])
            .ok_or_else(|| format!("unterminated layout of `{ty}[{body}]`"))?;
        layout = Some(text[at..at + n].to_string());
        at += n;
    }
    Ok((
        Shape::Array {
            ty: ty.to_string(),
            dims,
            dynamic,
            layout,
        },
        at,
    ))
}

/// Parses a whole string as one shape.
pub fn parse_shape_all(text: &str) -> Result<Shape, String> {
    let (shape, n) = parse_shape(text)?;
    if n != text.len() {
        return Err(format!(
            "unexpected `{}` after shape `{}`",
            snippet(&text[n..]),
            &text[..n]
        ));
    }
    Ok(shape)
}

/// Bytes of white space (newlines too: XLA's lexer reads across lines), `/*...*/` comments
/// (XLA's `/*index=5*/`) and `//` comments at the start of `text`.
pub(crate) fn skip_spaces_and_comments(text: &str) -> usize {
    let mut at = 0;
    loop {
        at += text[at..]
            .bytes()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .count();
        let rest = &text[at..];
        if rest.starts_with("/*") {
            match rest.find("*/") {
                Some(end) => at += end + 2,
                None => return at,
            }
        } else if rest.starts_with("//") {
            at += rest.find('\n').unwrap_or(rest.len());
        } else {
            return at;
        }
    }
}

/// The length of the balanced bracket group at the start of `text` (`{...}`, `(...)`,
/// `[...]`), strings and nested groups included; `None` when it does not close.
pub(crate) fn balanced(text: &str) -> Option<usize> {
    // The closing brackets awaited, innermost last.
    let mut open: Vec<char> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    // The end of a comment being skipped.
    let mut skip_to = 0;
    for (i, c) in text.char_indices() {
        if i < skip_to {
            continue;
        }
        if in_string {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => in_string = false,
                _ => escaped = false,
            }
            continue;
        }
        let rest = &text[i..];
        if rest.starts_with("/*") {
            skip_to = i + rest.find("*/").map_or(rest.len(), |e| e + 2);
            continue;
        }
        if rest.starts_with("//") && !open.is_empty() {
            skip_to = i + rest.find('\n').unwrap_or(rest.len());
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => open.push('}'),
            '(' => open.push(')'),
            '[' => open.push(']'),
            '}' | ')' | ']' => {
                if open.pop() != Some(c) {
                    return None;
                }
                if open.is_empty() {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        if open.is_empty() {
            return None;
        }
    }
    None
}

/// The first characters of `text`, for messages.
pub(crate) fn snippet(text: &str) -> String {
    let s: String = text.chars().take(24).collect();
    if s.len() < text.len() {
        format!("{s}...")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_print_back_as_written() {
        for text in [
            "f32[3,8]{1,0}",
            "pred[]",
            "s32[<=5,2]{1,0}",
            "(s64[], f32[], f32[5]{0}, f32[5]{0})",
            "((f32[2]), token[])",
            "bf16[2,128]{1,0:T(8,128)(2,1)}",
            "f8e4m3fn[4]{0}",
            "()",
        ] {
            let s = parse_shape_all(text).unwrap();
            assert_eq!(s.to_string(), text);
        }
        // XLA's `/*index=5*/` comments in long tuples are read (and not printed back).
        let long = parse_shape_all("(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[2]{0})");
        assert_eq!(long.unwrap().tuple().unwrap().len(), 6);
        assert!(parse_shape_all("f33[2]")
            .unwrap_err()
            .contains("unknown element type `f33`"));
        assert!(parse_shape_all("f32[2").is_err());
        assert!(parse_shape_all("f32[a]").unwrap_err().contains("bad size"));
        assert_eq!(
            parse_shape_all("f32[3,8]")
                .unwrap()
                .with_default_layout()
                .to_string(),
            "f32[3,8]{1,0}"
        );
        assert_eq!(
            parse_shape_all("(f32[], s32[2])")
                .unwrap()
                .with_default_layout()
                .to_string(),
            "(f32[], s32[2]{0})"
        );
    }
}

//! Symbolic sizes as PyTorch prints them in dynamic-shape graphs: `s0`, `2*s97`,
//! `(s98//2)`, `s1 + 1`, `Max(1, s0)`.
//!
//! An expression keeps the text it was written as, so graphs print back byte-exact, and
//! evaluates under [`Bindings`] (symbol name to value) with Python's integer semantics.
//! Parsing only checks the grammar (no tree is built, so a dynamic graph parses about as
//! fast as a static one); evaluation walks the text again with the values.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// How many of the smallest sizes [`SymExpr::int`] shares the text of.
const SMALL_INTS: i64 = 1024;

/// Values of size symbols, by name (`s0` -> 8); ordered so reports are deterministic.
pub type Bindings = BTreeMap<String, i64>;

/// A symbolic integer expression and the text it was written as (shared: clones are cheap).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SymExpr {
    text: Arc<str>,
    /// What the whole expression is, when it is that simple.
    form: Form,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Form {
    Int(i64),
    Symbol,
    Compound,
}

impl SymExpr {
    /// Parses an expression such as `2*s97 + 1`; the text is kept as written (trimmed).
    pub fn parse(text: &str) -> Result<SymExpr, String> {
        let text = text.trim();
        let bytes = text.as_bytes();
        let form = match bytes.first() {
            Some(c) if c.is_ascii_digit() || *c == b'-' => match text.parse::<i64>() {
                Ok(v) => return Ok(SymExpr::int(v)),
                Err(_) => Form::Compound,
            },
            Some(c)
                if (c.is_ascii_alphabetic() || *c == b'_')
                    && bytes
                        .iter()
                        .all(|c| c.is_ascii_alphanumeric() || *c == b'_') =>
            {
                Form::Symbol
            }
            _ => Form::Compound,
        };
        if form == Form::Compound {
            Walk::new(text, None).whole()?;
        }
        Ok(SymExpr {
            text: Arc::from(text),
            form,
        })
    }

    /// A constant.
    pub fn int(value: i64) -> SymExpr {
        /// The texts of the sizes graphs name most, made once (a dynamic graph's annotations
        /// repeat them: `f32[s0, 16]`).
        static SMALL: std::sync::LazyLock<Vec<Arc<str>>> = std::sync::LazyLock::new(|| {
            (0..SMALL_INTS).map(|v| Arc::from(v.to_string())).collect()
        });
        let text = match usize::try_from(value) {
            Ok(v) if v < SMALL.len() => SMALL[v].clone(),
            _ => Arc::from(value.to_string()),
        };
        SymExpr {
            text,
            form: Form::Int(value),
        }
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The value when the expression is a plain integer.
    pub fn as_int(&self) -> Option<i64> {
        match self.form {
            Form::Int(v) => Some(v),
            _ => None,
        }
    }

    /// The value when the expression is a float literal (a SymFloat's known value).
    pub fn as_float(&self) -> Option<f64> {
        match self.form {
            Form::Int(_) => None,
            _ => self.text.parse::<f64>().ok().filter(|v| v.is_finite()),
        }
    }

    /// The symbol's name when the expression is a single symbol (`s0`).
    pub fn as_symbol(&self) -> Option<&str> {
        (self.form == Form::Symbol).then_some(&*self.text)
    }

    /// The symbols the expression mentions, each once, in first-use order.
    pub fn symbols(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        let bytes = self.text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            if c.is_ascii_digit() {
                while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
                    i += 1;
                }
            } else if c.is_ascii_alphabetic() || c == b'_' {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let is_call = self.text[i..].trim_start().starts_with('(');
                let name = &self.text[start..i];
                if !is_call && !out.contains(&name) {
                    out.push(name);
                }
            } else {
                i += 1;
            }
        }
        out
    }

    /// The value under `bindings`; an unbound symbol, an overflow, a division by zero or a
    /// function graphbug cannot evaluate is an error naming it.
    pub fn eval(&self, bindings: &Bindings) -> Result<i64, String> {
        if let Form::Int(v) = self.form {
            return Ok(v);
        }
        Walk::new(&self.text, Some(bindings))
            .whole()
            .map(|v| v.unwrap_or_default())
            .map_err(|e| format!("{e} in `{}`", self.text))
    }
}

impl fmt::Display for SymExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl From<SymExpr> for String {
    fn from(e: SymExpr) -> String {
        e.text.to_string()
    }
}

impl TryFrom<String> for SymExpr {
    type Error = String;
    fn try_from(text: String) -> Result<SymExpr, String> {
        SymExpr::parse(&text)
    }
}

/// Applies a binary operator with Python's semantics; `None` operands (checking the
/// grammar only) give `None`.
fn apply(op: &str, x: Option<i64>, y: Option<i64>) -> Result<Option<i64>, String> {
    let (Some(x), Some(y)) = (x, y) else {
        return Ok(None);
    };
    let overflow = || "integer overflow".to_string();
    Ok(Some(match op {
        "+" => x.checked_add(y).ok_or_else(overflow)?,
        "-" => x.checked_sub(y).ok_or_else(overflow)?,
        "*" => x.checked_mul(y).ok_or_else(overflow)?,
        "//" => floor_div(x, y)?,
        "%" => python_mod(x, y)?,
        _ => {
            let e = u32::try_from(y).map_err(|_| format!("negative power {y}"))?;
            x.checked_pow(e).ok_or_else(overflow)?
        }
    }))
}

/// The functions sympy prints that graphbug evaluates.
fn call(f: &str, vals: &[i64]) -> Result<i64, String> {
    let overflow = || "integer overflow".to_string();
    let two = || -> Result<(i64, i64), String> {
        match vals {
            [x, y] => Ok((*x, *y)),
            _ => Err(format!("`{f}` takes 2 arguments, not {}", vals.len())),
        }
    };
    Ok(match f {
        "Max" if !vals.is_empty() => *vals.iter().max().expect("not empty"),
        "Min" if !vals.is_empty() => *vals.iter().min().expect("not empty"),
        "Abs" if vals.len() == 1 => vals[0].checked_abs().ok_or_else(overflow)?,
        "FloorDiv" => {
            let (x, y) = two()?;
            floor_div(x, y)?
        }
        "CeilDiv" => {
            let (x, y) = two()?;
            floor_div(x.checked_neg().ok_or_else(overflow)?, y)?
                .checked_neg()
                .ok_or_else(overflow)?
        }
        "Mod" | "PythonMod" => {
            let (x, y) = two()?;
            python_mod(x, y)?
        }
        "CleanDiv" | "IntTrueDiv" => {
            let (x, y) = two()?;
            if y == 0 || x % y != 0 {
                return Err(format!("`{f}({x}, {y})` is not a whole number"));
            }
            x / y
        }
        _ => return Err(format!("function `{f}` cannot be evaluated by graphbug")),
    })
}

fn floor_div(x: i64, y: i64) -> Result<i64, String> {
    if y == 0 {
        return Err(format!("division by zero ({x}//0)"));
    }
    let q = x.checked_div(y).ok_or("integer overflow")?;
    Ok(if (x % y != 0) && ((x < 0) != (y < 0)) {
        q - 1
    } else {
        q
    })
}

fn python_mod(x: i64, y: i64) -> Result<i64, String> {
    if y == 0 {
        return Err(format!("modulo by zero ({x}%0)"));
    }
    let r = x.checked_rem(y).ok_or("integer overflow")?;
    Ok(if r != 0 && ((r < 0) != (y < 0)) {
        r + y
    } else {
        r
    })
}

/// Deepest nesting of parentheses accepted in one expression.
const MAX_DEPTH: usize = 64;

/// A recursive-descent walk over an expression's text: with bindings it computes the value,
/// without them it only checks the grammar (values are `None`).
struct Walk<'a> {
    text: &'a str,
    bindings: Option<&'a Bindings>,
    pos: usize,
    depth: usize,
}

impl<'a> Walk<'a> {
    fn new(text: &'a str, bindings: Option<&'a Bindings>) -> Self {
        Walk {
            text,
            bindings,
            pos: 0,
            depth: 0,
        }
    }

    /// The whole text as one expression.
    fn whole(&mut self) -> Result<Option<i64>, String> {
        let v = self.sum()?;
        self.skip_spaces();
        if self.pos < self.text.len() {
            return Err(format!(
                "unexpected `{}` in symbolic expression `{}`",
                self.rest(),
                self.text
            ));
        }
        Ok(v)
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    fn eat(&mut self, s: &str) -> bool {
        self.skip_spaces();
        if self.text.as_bytes()[self.pos..].starts_with(s.as_bytes()) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn rest(&self) -> &str {
        self.text.get(self.pos..).unwrap_or("")
    }

    fn err<T>(&self, wanted: &str) -> Result<T, String> {
        let found = match self.rest() {
            "" => "the end".to_string(),
            rest => format!("`{rest}`"),
        };
        Err(format!(
            "expected {wanted} at {found} in symbolic expression `{}`",
            self.text
        ))
    }

    fn sum(&mut self) -> Result<Option<i64>, String> {
        let mut left = self.product()?;
        loop {
            let op = if self.eat("+") {
                "+"
            } else if self.eat("-") {
                "-"
            } else {
                return Ok(left);
            };
            let right = self.product()?;
            left = apply(op, left, right)?;
        }
    }

    fn product(&mut self) -> Result<Option<i64>, String> {
        let mut left = self.unary()?;
        loop {
            let op = if self.eat("//") {
                "//"
            } else if self.eat("**") {
                // `**` binds tighter than `*`; handled in `unary`'s power, never here.
                return self.err("an operand before `**`");
            } else if self.eat("*") {
                "*"
            } else if self.eat("%") {
                "%"
            } else {
                return Ok(left);
            };
            let right = self.unary()?;
            left = apply(op, left, right)?;
        }
    }

    fn unary(&mut self) -> Result<Option<i64>, String> {
        if self.eat("-") {
            return match self.unary()? {
                Some(v) => v.checked_neg().map(Some).ok_or("integer overflow".into()),
                None => Ok(None),
            };
        }
        let base = self.atom()?;
        if self.eat("**") {
            let exp = self.unary()?;
            return apply("**", base, exp);
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Option<i64>, String> {
        self.skip_spaces();
        let start = self.pos;
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err(format!(
                        "symbolic expression `{}` nests deeper than {MAX_DEPTH} levels",
                        self.text
                    ));
                }
                let inner = self.sum()?;
                self.depth -= 1;
                if !self.eat(")") {
                    return self.err("`)`");
                }
                Ok(inner)
            }
            Some(c) if c.is_ascii_digit() => {
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.pos += 1;
                }
                // A float (a SymFloat's value, `0.100000000000000`): checked, never a size.
                if self.peek() == Some(b'.') || self.peek() == Some(b'e') {
                    self.pos += 1;
                    if matches!(self.peek(), Some(b'-' | b'+')) {
                        self.pos += 1;
                    }
                    while self.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
                        self.pos += 1;
                    }
                    let literal = &self.text[start..self.pos];
                    if literal.parse::<f64>().is_err() {
                        return Err(format!(
                            "bad number `{literal}` in symbolic expression `{}`",
                            self.text
                        ));
                    }
                    return match self.bindings {
                        None => Ok(None),
                        Some(_) => Err(format!("`{literal}` is a float, not an integer size")),
                    };
                }
                let digits = &self.text[start..self.pos];
                digits
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("integer `{digits}` does not fit in 64 bits"))
            }
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                {
                    self.pos += 1;
                }
                let name = &self.text[start..self.pos];
                if !self.eat("(") {
                    return match self.bindings {
                        None => Ok(None),
                        Some(b) => b
                            .get(name)
                            .copied()
                            .map(Some)
                            .ok_or_else(|| format!("symbol `{name}` has no value")),
                    };
                }
                let mut args = Vec::new();
                if !self.eat(")") {
                    loop {
                        args.push(self.sum()?);
                        if self.eat(")") {
                            break;
                        }
                        if !self.eat(",") {
                            return self.err("`,` or `)`");
                        }
                    }
                }
                match args.into_iter().collect::<Option<Vec<i64>>>() {
                    Some(vals) if self.bindings.is_some() => call(name, &vals).map(Some),
                    _ => Ok(None),
                }
            }
            _ => self.err("a size, a symbol or `(`"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(pairs: &[(&str, i64)]) -> Bindings {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn parses_what_pytorch_prints_and_keeps_the_text() {
        let b = bind(&[("s0", 7), ("s97", 3), ("s98", 9)]);
        for (text, want) in [
            ("s0", 7),
            ("8", 8),
            ("2*s97", 6),
            ("(s98//2)", 4),
            ("s0 + 1", 8),
            ("s0 - 2*s97", 1),
            ("-s0 + 10", 3),
            ("Max(1, s0)", 7),
            ("Min(4, s0)", 4),
            ("s97**2", 9),
            ("Mod(s0, 4)", 3),
            ("PythonMod(-s0, 4)", 1),
            ("CeilDiv(s0, 2)", 4),
            ("((s0 - 1)//2) + 1", 4),
        ] {
            let e = SymExpr::parse(text).unwrap();
            assert_eq!(e.to_string(), text);
            assert_eq!(e.eval(&b).unwrap(), want, "{text}");
        }
        assert_eq!(SymExpr::parse("2*s0 + s1").unwrap().symbols(), ["s0", "s1"]);
        assert_eq!(SymExpr::parse("s4").unwrap().as_symbol(), Some("s4"));
        assert_eq!(SymExpr::parse("16").unwrap().as_int(), Some(16));
    }

    #[test]
    fn python_integer_semantics() {
        assert_eq!(floor_div(-7, 2).unwrap(), -4);
        assert_eq!(floor_div(7, -2).unwrap(), -4);
        assert_eq!(python_mod(-7, 3).unwrap(), 2);
        assert_eq!(python_mod(7, -3).unwrap(), -2);
        assert!(floor_div(1, 0).unwrap_err().contains("division by zero"));
        assert!(floor_div(i64::MIN, -1).is_err());
    }

    #[test]
    fn errors_name_the_culprit() {
        let e = SymExpr::parse("2*s0")
            .unwrap()
            .eval(&Bindings::new())
            .unwrap_err();
        assert_eq!(e, "symbol `s0` has no value in `2*s0`");
        let e = SymExpr::parse("Frob(s0)")
            .unwrap()
            .eval(&bind(&[("s0", 1)]));
        assert!(e.unwrap_err().contains("function `Frob`"));
        assert!(SymExpr::parse("s0 +").unwrap_err().contains("expected"));
        assert!(SymExpr::parse("(s0").unwrap_err().contains("`)`"));
        assert!(SymExpr::parse("s0 $")
            .unwrap_err()
            .contains("unexpected `$`"));
        let deep = "(".repeat(100) + "1" + &")".repeat(100);
        assert!(SymExpr::parse(&deep).unwrap_err().contains("deeper"));
        let big = SymExpr::parse("s0*s0*s0").unwrap();
        assert!(big
            .eval(&bind(&[("s0", 1 << 40)]))
            .unwrap_err()
            .contains("overflow"));
    }

    #[test]
    fn serde_round_trips_through_the_text() {
        let e = SymExpr::parse("2*s0 + 1").unwrap();
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(json, "\"2*s0 + 1\"");
        let back: SymExpr = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
    }
}

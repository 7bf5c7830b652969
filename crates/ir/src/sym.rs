//! Symbolic sizes as PyTorch prints them in dynamic-shape graphs: `s0`, `2*s97`,
//! `(s98//2)`, `s1 + 1`, `Max(1, s0)`.
//!
//! An expression keeps the text it was written as, so graphs print back byte-exact, and
//! evaluates under [`Bindings`] (symbol name to value) with Python's integer semantics.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Values of size symbols, by name (`s0` -> 8); ordered so reports are deterministic.
pub type Bindings = BTreeMap<String, i64>;

/// A symbolic integer expression and the text it was written as.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SymExpr {
    text: String,
    ast: Ast,
}

/// The parsed form of a [`SymExpr`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Ast {
    Int(i64),
    Sym(String),
    Neg(Box<Ast>),
    Bin(BinOp, Box<Ast>, Box<Ast>),
    Call(String, Vec<Ast>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum BinOp {
    Add,
    Sub,
    Mul,
    FloorDiv,
    Mod,
    Pow,
}

impl SymExpr {
    /// Parses an expression such as `2*s97 + 1`; the text is kept as written (trimmed).
    pub fn parse(text: &str) -> Result<SymExpr, String> {
        let text = text.trim();
        let mut p = ExprParser {
            text,
            chars: text.char_indices().collect(),
            pos: 0,
            depth: 0,
        };
        let ast = p.sum()?;
        p.skip_spaces();
        if p.pos < p.chars.len() {
            return Err(format!(
                "unexpected `{}` in symbolic expression `{text}`",
                &text[p.chars[p.pos].0..]
            ));
        }
        Ok(SymExpr {
            text: text.to_string(),
            ast,
        })
    }

    /// A constant.
    pub fn int(value: i64) -> SymExpr {
        SymExpr {
            text: value.to_string(),
            ast: Ast::Int(value),
        }
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The value when the expression is a plain integer.
    pub fn as_int(&self) -> Option<i64> {
        match self.ast {
            Ast::Int(v) => Some(v),
            _ => None,
        }
    }

    /// The symbol's name when the expression is a single symbol (`s0`).
    pub fn as_symbol(&self) -> Option<&str> {
        match &self.ast {
            Ast::Sym(s) => Some(s),
            _ => None,
        }
    }

    /// The symbols the expression mentions, each once, in first-use order.
    pub fn symbols(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.ast.symbols(&mut out);
        out
    }

    /// The value under `bindings`; an unbound symbol, an overflow, a division by zero or a
    /// function graphbug cannot evaluate is an error naming it.
    pub fn eval(&self, bindings: &Bindings) -> Result<i64, String> {
        self.ast
            .eval(bindings)
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
        e.text
    }
}

impl TryFrom<String> for SymExpr {
    type Error = String;
    fn try_from(text: String) -> Result<SymExpr, String> {
        SymExpr::parse(&text)
    }
}

impl Ast {
    fn symbols<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Ast::Int(_) => {}
            Ast::Sym(s) => {
                if !out.contains(&s.as_str()) {
                    out.push(s);
                }
            }
            Ast::Neg(a) => a.symbols(out),
            Ast::Bin(_, a, b) => {
                a.symbols(out);
                b.symbols(out);
            }
            Ast::Call(_, args) => args.iter().for_each(|a| a.symbols(out)),
        }
    }

    fn eval(&self, b: &Bindings) -> Result<i64, String> {
        let overflow = || "integer overflow".to_string();
        Ok(match self {
            Ast::Int(v) => *v,
            Ast::Sym(s) => *b
                .get(s)
                .ok_or_else(|| format!("symbol `{s}` has no value"))?,
            Ast::Neg(a) => a.eval(b)?.checked_neg().ok_or_else(overflow)?,
            Ast::Bin(op, l, r) => {
                let (x, y) = (l.eval(b)?, r.eval(b)?);
                match op {
                    BinOp::Add => x.checked_add(y).ok_or_else(overflow)?,
                    BinOp::Sub => x.checked_sub(y).ok_or_else(overflow)?,
                    BinOp::Mul => x.checked_mul(y).ok_or_else(overflow)?,
                    BinOp::FloorDiv => floor_div(x, y)?,
                    BinOp::Mod => python_mod(x, y)?,
                    BinOp::Pow => {
                        let e = u32::try_from(y).map_err(|_| format!("negative power {y}"))?;
                        x.checked_pow(e).ok_or_else(overflow)?
                    }
                }
            }
            Ast::Call(f, args) => {
                let vals = args
                    .iter()
                    .map(|a| a.eval(b))
                    .collect::<Result<Vec<_>, _>>()?;
                let two = |name: &str| -> Result<(i64, i64), String> {
                    match vals.as_slice() {
                        [x, y] => Ok((*x, *y)),
                        _ => Err(format!("`{name}` takes 2 arguments, not {}", vals.len())),
                    }
                };
                match f.as_str() {
                    "Max" if !vals.is_empty() => *vals.iter().max().expect("not empty"),
                    "Min" if !vals.is_empty() => *vals.iter().min().expect("not empty"),
                    "Abs" if vals.len() == 1 => vals[0].checked_abs().ok_or_else(overflow)?,
                    "FloorDiv" => {
                        let (x, y) = two(f)?;
                        floor_div(x, y)?
                    }
                    "CeilDiv" => {
                        let (x, y) = two(f)?;
                        floor_div(x.checked_neg().ok_or_else(overflow)?, y)?
                            .checked_neg()
                            .ok_or_else(overflow)?
                    }
                    "Mod" | "PythonMod" => {
                        let (x, y) = two(f)?;
                        python_mod(x, y)?
                    }
                    "CleanDiv" | "IntTrueDiv" => {
                        let (x, y) = two(f)?;
                        if y == 0 || x % y != 0 {
                            return Err(format!("`{f}({x}, {y})` is not a whole number"));
                        }
                        x / y
                    }
                    _ => return Err(format!("function `{f}` cannot be evaluated by graphbug")),
                }
            }
        })
    }
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

struct ExprParser<'a> {
    text: &'a str,
    chars: Vec<(usize, char)>,
    pos: usize,
    depth: usize,
}

impl ExprParser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).map(|c| c.1)
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(' ') {
            self.pos += 1;
        }
    }

    fn eat(&mut self, s: &str) -> bool {
        self.skip_spaces();
        let rest = self.chars.get(self.pos).map_or("", |c| &self.text[c.0..]);
        if rest.starts_with(s) {
            self.pos += s.chars().count();
            true
        } else {
            false
        }
    }

    fn err<T>(&self, wanted: &str) -> Result<T, String> {
        let found = self.chars.get(self.pos).map_or("the end".to_string(), |c| {
            format!("`{}`", &self.text[c.0..])
        });
        Err(format!(
            "expected {wanted} at {found} in symbolic expression `{}`",
            self.text
        ))
    }

    fn sum(&mut self) -> Result<Ast, String> {
        let mut left = self.product()?;
        loop {
            let op = if self.eat("+") {
                BinOp::Add
            } else if self.eat("-") {
                BinOp::Sub
            } else {
                return Ok(left);
            };
            let right = self.product()?;
            left = Ast::Bin(op, Box::new(left), Box::new(right));
        }
    }

    fn product(&mut self) -> Result<Ast, String> {
        let mut left = self.unary()?;
        loop {
            let op = if self.eat("//") {
                BinOp::FloorDiv
            } else if self.eat("**") {
                // `**` binds tighter than `*`; handled in `unary`'s power, never here.
                return self.err("an operand before `**`");
            } else if self.eat("*") {
                BinOp::Mul
            } else if self.eat("%") {
                BinOp::Mod
            } else {
                return Ok(left);
            };
            let right = self.unary()?;
            left = Ast::Bin(op, Box::new(left), Box::new(right));
        }
    }

    fn unary(&mut self) -> Result<Ast, String> {
        if self.eat("-") {
            return Ok(Ast::Neg(Box::new(self.unary()?)));
        }
        let base = self.atom()?;
        if self.eat("**") {
            let exp = self.unary()?;
            return Ok(Ast::Bin(BinOp::Pow, Box::new(base), Box::new(exp)));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Ast, String> {
        self.skip_spaces();
        let start = self.pos;
        match self.peek() {
            Some('(') => {
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
                let digits = self.slice(start);
                digits
                    .parse()
                    .map(Ast::Int)
                    .map_err(|_| format!("integer `{digits}` does not fit in 64 bits"))
            }
            Some(c) if c.is_alphabetic() || c == '_' => {
                while self.peek().is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    self.pos += 1;
                }
                let name = self.slice(start).to_string();
                if !self.eat("(") {
                    return Ok(Ast::Sym(name));
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
                Ok(Ast::Call(name, args))
            }
            _ => self.err("a size, a symbol or `(`"),
        }
    }

    fn slice(&self, start: usize) -> &str {
        let from = self.chars[start].0;
        let to = self.chars.get(self.pos).map_or(self.text.len(), |c| c.0);
        &self.text[from..to]
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

//! Parser for PyTorch's `print_readable()` graph text, flat and pytree forms.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use crate::error::{IrError, ParseError};
use crate::graph::{Graph, Node, NodeId, NodeKind};
use crate::naming::is_valid_name;
use crate::text::lexer::{source_line, Lexer, Tok, Token, ARROW};
use crate::types::{Device, Dtype, Layout, MemoryFormat, Meta, OpName, BINARY_OPERATORS, METHOD};
use crate::value::Value;

/// The precedence of `**` in [`BINARY_OPERATORS`], parsed apart from the left-associative
/// levels below it.
const POWER: u8 = 7;

/// Deepest bracket nesting accepted, so hostile input cannot exhaust the stack.
const MAX_DEPTH: usize = 64;

/// The graph a graph file's `bytes` hold (read from `path`); errors name the file, with the
/// line and column of bad text.
pub fn read_graph_file(path: &std::path::Path, bytes: Vec<u8>) -> Result<Graph, IrError> {
    let file = |message: String| IrError::File {
        path: path.display().to_string(),
        message,
    };
    let text = String::from_utf8(bytes).map_err(|e| file(format!("not UTF-8 text: {e}")))?;
    parse_graph(&text).map_err(|e| file(e.to_string()))
}

/// Parses graph text (flat or pytree form) into a verified graph.
pub fn parse_graph(src: &str) -> Result<Graph, IrError> {
    let mut parser = Parser {
        src,
        lexer: Lexer::new(src),
        toks: Vec::new(),
        pos: 0,
        depth: 0,
        lex_error: None,
    };
    parser.fill();
    let module = parser.module();
    // A line that could not be lexed ended the tokens there: its error comes first.
    if let Some(e) = parser.lex_error {
        return Err(e.into());
    }
    Builder::new(src).build(module?)
}

/// A position in the source.
#[derive(Clone, Copy, Debug)]
struct Pos {
    line: usize,
    col: usize,
}

#[derive(Clone, Debug)]
struct Expr {
    kind: ExprKind,
    pos: Pos,
}

#[derive(Clone, Debug)]
enum ExprKind {
    /// A name or dotted path: `x`, `torch.ops.aten.add.Tensor`.
    Path(Vec<String>),
    Call {
        func: Box<Expr>,
        args: Vec<Expr>,
        kwargs: Vec<(String, Expr)>,
    },
    Index(Box<Expr>, Box<Expr>),
    Int(i64),
    Float(f64),
    /// A complex number literal (real, imaginary): `1j`, `(1+2j)`.
    Complex(f64, f64),
    Str(String),
    List(Vec<Expr>),
    Tuple(Vec<Expr>),
    /// `a * b`, `a // b`, ...: a call of the `operator` function named here (`mul`).
    Binary(&'static str, Box<Expr>, Box<Expr>),
    /// `-a` of a value that is not a number literal (`operator.neg`), `~a` (`operator.invert`).
    Unary(&'static str, Box<Expr>),
}

impl Expr {
    /// `torch.ops.aten.add.Tensor` as ["torch", "ops", "aten", "add", "Tensor"].
    fn dotted(&self) -> Option<Vec<&str>> {
        match &self.kind {
            ExprKind::Path(parts) => Some(parts.iter().map(String::as_str).collect()),
            _ => None,
        }
    }

    /// The plain name this expression is, if it is one.
    fn name(&self) -> Option<&str> {
        match &self.kind {
            ExprKind::Path(parts) if parts.len() == 1 => Some(&parts[0]),
            _ => None,
        }
    }
}

/// An annotation string and where it is.
type Annotation = (String, Pos);

enum Stmt {
    /// `name[: "ann"] = expr`
    Assign {
        target: String,
        ann: Option<Annotation>,
        value: Expr,
        pos: Pos,
    },
    /// `name: "ann"` (pytree form's placeholder declarations)
    Declare {
        target: String,
        ann: Annotation,
        pos: Pos,
    },
    /// `a, b, = fx_pytree.tree_flatten_spec([primals, tangents], self._in_spec)`
    Flatten {
        targets: Vec<(String, Pos)>,
        value: Expr,
        pos: Pos,
    },
    /// `a += b`: FX's in-place operator (`op` is the operator's `operator` function, `add`;
    /// the node calls `iadd`), whose node the next statement names (`out = a`).
    AugAssign {
        target: String,
        op: &'static str,
        value: Expr,
        pos: Pos,
    },
    /// `a[index] = value`: FX's `operator.setitem`, whose node the next statement names
    /// (`setitem = a`).
    SetItem {
        target: String,
        index: Expr,
        value: Expr,
        pos: Pos,
    },
    /// `return expr`
    Return { value: Expr, pos: Pos },
    /// FX's liveness tail `a = b = None`: the names are dead from here on.
    Free { names: Vec<(String, Pos)> },
}

/// An in-place statement waiting for the statement that names its node.
enum InPlace<'a> {
    /// `a += value` (the `operator` function's name, `add`).
    Operator(&'static str, &'a Expr),
    /// `a[index] = value`.
    SetItem(&'a Expr, &'a Expr),
}

struct Param {
    name: String,
    ann: Option<Annotation>,
    pos: Pos,
}

struct Module {
    class_name: String,
    params: Vec<Param>,
    stmts: Vec<Stmt>,
    end: Pos,
}

struct Parser<'a> {
    src: &'a str,
    lexer: Lexer<'a>,
    /// The tokens from the current logical line to the end of the next one (or of input):
    /// a statement looks ahead within its line, and past its end by one token.
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
    /// Why lexing stopped early (the tokens then end there).
    lex_error: Option<ParseError>,
}

fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Name(n) => format!("`{n}`"),
        Tok::Int(i) => format!("`{i}`"),
        Tok::Float(f) => format!("`{f}`"),
        Tok::Imag(f) => format!("`{f}j`"),
        Tok::Str(s) => format!("string {}", crate::value::python_str_repr(s)),
        Tok::Punct(c) => format!("`{c}`"),
        Tok::Newline => "end of line".into(),
        Tok::Eof => "end of input".into(),
    }
}

fn error_at(src: &str, pos: Pos, message: String) -> ParseError {
    ParseError {
        line: pos.line,
        column: pos.col,
        message,
        source_line: source_line(src, pos.line),
    }
}

impl Parser<'_> {
    fn tok(&self) -> &Tok {
        &self.toks[self.pos.min(self.toks.len() - 1)].tok
    }

    fn here(&self) -> Pos {
        let t = &self.toks[self.pos.min(self.toks.len() - 1)];
        Pos {
            line: t.line,
            col: t.col,
        }
    }

    /// Lexes the next logical line into the buffer (an error ends the tokens there).
    fn fill(&mut self) {
        if matches!(self.toks.last(), Some(Token { tok: Tok::Eof, .. })) {
            return;
        }
        if let Err(e) = self.lexer.line_into(&mut self.toks) {
            let (line, col) = (e.line, e.column);
            self.lex_error = Some(e);
            self.toks.push(Token {
                tok: Tok::Eof,
                line,
                col,
            });
        }
    }

    /// Moves past the current token and returns it (the end-of-input token stays put).
    fn advance(&mut self) -> Tok {
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
            let tok = std::mem::replace(&mut self.toks[self.pos - 1].tok, Tok::Newline);
            self.at_line_end();
            tok
        } else {
            Tok::Eof
        }
    }

    /// Moves the cursor `n` tokens on, within the line.
    fn skip(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.toks.len() - 1);
        self.at_line_end();
    }

    /// At the end of the buffered lines: the ones before are done, the next comes in.
    fn at_line_end(&mut self) {
        if self.pos == self.toks.len() - 1 && self.toks[self.pos].tok == Tok::Newline {
            self.toks.drain(..self.pos);
            self.pos = 0;
            self.fill();
        }
    }

    fn err<T>(&self, message: String) -> Result<T, ParseError> {
        Err(error_at(self.src, self.here(), message))
    }

    fn unexpected<T>(&self, wanted: &str) -> Result<T, ParseError> {
        self.err(format!("expected {wanted}, found {}", describe(self.tok())))
    }

    fn is_punct(&self, c: char) -> bool {
        *self.tok() == Tok::Punct(c)
    }

    fn eat_punct(&mut self, c: char) -> bool {
        if self.is_punct(c) {
            self.advance();
            true
        } else {
            false
        }
    }

    fn expect_punct(&mut self, c: char) -> Result<(), ParseError> {
        if self.eat_punct(c) {
            Ok(())
        } else {
            self.unexpected(&format!("`{c}`"))
        }
    }

    fn is_name(&self, word: &str) -> bool {
        matches!(self.tok(), Tok::Name(n) if n == word)
    }

    fn expect_name(&mut self, what: &str) -> Result<(String, Pos), ParseError> {
        let pos = self.here();
        match self.tok() {
            Tok::Name(_) => match self.advance() {
                Tok::Name(n) => Ok((n, pos)),
                _ => unreachable!("the current token is a name"),
            },
            _ => self.unexpected(what),
        }
    }

    fn expect_keyword(&mut self, word: &str) -> Result<(), ParseError> {
        if self.is_name(word) {
            self.advance();
            Ok(())
        } else {
            self.unexpected(&format!("`{word}`"))
        }
    }

    fn expect_line_end(&mut self) -> Result<(), ParseError> {
        match self.tok() {
            Tok::Newline => {
                self.advance();
                Ok(())
            }
            Tok::Eof => Ok(()),
            _ => self.unexpected("end of line"),
        }
    }

    fn skip_newlines(&mut self) {
        while *self.tok() == Tok::Newline {
            self.advance();
        }
    }

    fn module(&mut self) -> Result<Module, ParseError> {
        self.skip_newlines();
        let mut class_name = "GraphModule".to_string();
        if self.is_name("class") {
            self.advance();
            let (name, _) = self.expect_name("a class name")?;
            class_name = name;
            if self.eat_punct('(') {
                while !self.is_punct(')') {
                    if matches!(self.tok(), Tok::Newline | Tok::Eof) {
                        return self.unexpected("`)`");
                    }
                    self.advance();
                }
                self.advance();
            }
            self.expect_punct(':')?;
            self.expect_line_end()?;
            self.skip_newlines();
        }
        self.expect_keyword("def")?;
        if !self.is_name("forward") {
            return self.unexpected("`forward`");
        }
        self.advance();
        self.expect_punct('(')?;
        self.expect_keyword("self")?;
        let mut params = Vec::new();
        while self.eat_punct(',') {
            if self.is_punct(')') {
                break;
            }
            let (name, pos) = self.expect_name("a parameter name")?;
            let ann = if self.eat_punct(':') {
                Some(self.annotation()?)
            } else {
                None
            };
            params.push(Param { name, ann, pos });
        }
        self.expect_punct(')')?;
        if self.eat_punct(ARROW) {
            // A return annotation carries nothing the graph needs.
            self.expr()?;
        }
        self.expect_punct(':')?;
        self.expect_line_end()?;

        let mut stmts = Vec::new();
        loop {
            self.skip_newlines();
            if *self.tok() == Tok::Eof {
                break;
            }
            self.statement_line(&mut stmts)?;
        }
        Ok(Module {
            class_name,
            params,
            stmts,
            end: self.here(),
        })
    }

    fn annotation(&mut self) -> Result<Annotation, ParseError> {
        let pos = self.here();
        match self.tok() {
            Tok::Str(_) => match self.advance() {
                Tok::Str(s) => Ok((s, pos)),
                _ => unreachable!("the current token is a string"),
            },
            _ => self.unexpected("a quoted annotation such as \"f32[2, 8]\""),
        }
    }

    /// One logical line: statements separated by `;`.
    fn statement_line(&mut self, out: &mut Vec<Stmt>) -> Result<(), ParseError> {
        loop {
            if let Some(stmt) = self.statement()? {
                out.push(stmt);
            }
            if !self.eat_punct(';') {
                break;
            }
            if matches!(self.tok(), Tok::Newline | Tok::Eof) {
                break;
            }
        }
        self.expect_line_end()
    }

    fn statement(&mut self) -> Result<Option<Stmt>, ParseError> {
        let pos = self.here();
        if matches!(self.tok(), Tok::Name(n) if n == "def" || n == "class") {
            return self.err(
                "only one `forward` method is supported; nested modules and extra methods are not"
                    .into(),
            );
        }
        let (first, first_pos) = self.expect_name("a statement")?;
        if first == "return" {
            let value = if matches!(self.tok(), Tok::Newline | Tok::Eof | Tok::Punct(';')) {
                Expr {
                    kind: ExprKind::Tuple(Vec::new()),
                    pos,
                }
            } else {
                self.expr_list_as_tuple()?
            };
            return Ok(Some(Stmt::Return { value, pos }));
        }
        if self.is_punct(',') {
            let mut targets = vec![(first, first_pos)];
            while self.eat_punct(',') {
                if self.is_punct('=') {
                    break;
                }
                targets.push(self.expect_name("a name")?);
            }
            self.expect_punct('=')?;
            let value = self.expr()?;
            return Ok(Some(Stmt::Flatten {
                targets,
                value,
                pos,
            }));
        }
        if self.eat_punct('[') {
            let index = self.expr()?;
            self.expect_punct(']')?;
            self.expect_punct('=')?;
            let value = self.expr()?;
            return Ok(Some(Stmt::SetItem {
                target: first,
                index,
                value,
                pos: first_pos,
            }));
        }
        if let Some((op, len)) = self.augmented_operator() {
            self.skip(len);
            let value = self.expr()?;
            return Ok(Some(Stmt::AugAssign {
                target: first,
                op,
                value,
                pos: first_pos,
            }));
        }
        let ann = if self.eat_punct(':') {
            Some(self.annotation()?)
        } else {
            None
        };
        if !self.eat_punct('=') {
            return match ann {
                Some(ann) => Ok(Some(Stmt::Declare {
                    target: first,
                    ann,
                    pos: first_pos,
                })),
                None => self.unexpected("`=` or `:`"),
            };
        }
        // FX's liveness tails: `a = b = None` frees values; it defines nothing.
        if ann.is_none() {
            if let Some((end, rest)) = self.free_chain() {
                self.skip(end - self.pos);
                let mut names = vec![(first, first_pos)];
                names.extend(rest);
                return Ok(Some(Stmt::Free { names }));
            }
        }
        let value = self.expr()?;
        Ok(Some(Stmt::Assign {
            target: first,
            ann,
            value,
            pos: first_pos,
        }))
    }

    /// If the tokens ahead are `b = c = None` (the rest of a liveness tail), where it ends
    /// and the names it frees (`b`, `c`).
    fn free_chain(&self) -> Option<(usize, Vec<(String, Pos)>)> {
        let mut i = self.pos;
        let mut names = Vec::new();
        loop {
            let next = &self.toks.get(i + 1)?.tok;
            let here = self.toks.get(i)?;
            match &here.tok {
                Tok::Name(n)
                    if n == "None" && matches!(next, Tok::Newline | Tok::Eof | Tok::Punct(';')) =>
                {
                    return Some((i + 1, names))
                }
                Tok::Name(n) if *next == Tok::Punct('=') => {
                    let pos = Pos {
                        line: here.line,
                        col: here.col,
                    };
                    names.push((n.clone(), pos));
                    i += 2;
                }
                _ => return None,
            }
        }
    }

    /// `a, b` without brackets is a tuple, as in `return a, b`.
    fn expr_list_as_tuple(&mut self) -> Result<Expr, ParseError> {
        let first = self.expr()?;
        if !self.is_punct(',') {
            return Ok(first);
        }
        let pos = first.pos;
        let mut items = vec![first];
        while self.eat_punct(',') {
            if matches!(self.tok(), Tok::Newline | Tok::Eof | Tok::Punct(';')) {
                break;
            }
            items.push(self.expr()?);
        }
        Ok(Expr {
            kind: ExprKind::Tuple(items),
            pos,
        })
    }

    fn expr(&mut self) -> Result<Expr, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(format!("expression nested deeper than {MAX_DEPTH} levels"));
        }
        let result = self.binary_level(0);
        self.depth -= 1;
        result
    }

    /// Whether the current token is `c` immediately followed by another `c` (`**`, `//`).
    fn is_double(&self, c: char) -> bool {
        let (Some(a), Some(b)) = (self.toks.get(self.pos), self.toks.get(self.pos + 1)) else {
            return false;
        };
        a.tok == Tok::Punct(c) && b.tok == Tok::Punct(c) && a.line == b.line && b.col == a.col + 1
    }

    fn binary(op: &'static str, left: Expr, right: Expr) -> Expr {
        let pos = left.pos;
        // `(1+2j)`, `(-0-1j)`, `(nan+infj)`: Python's repr of a complex number, read back
        // as the parts it spells (signed zeros included).
        let real = |e: &Expr| match &e.kind {
            ExprKind::Int(i) => Some(*i as f64),
            ExprKind::Float(f) => Some(*f),
            ExprKind::Path(p) if p == &["inf"] => Some(f64::INFINITY),
            ExprKind::Path(p) if p == &["nan"] => Some(f64::NAN),
            _ => None,
        };
        let complex = |e: &Expr| match e.kind {
            ExprKind::Complex(re, im) => Some((re, im)),
            _ => real(e).map(|re| (re, 0.0)),
        };
        let imaginary =
            matches!(right.kind, ExprKind::Complex(re, _) if re == 0.0 && re.is_sign_positive());
        match (op, real(&left), &right.kind) {
            ("add", Some(re), ExprKind::Complex(_, im)) if imaginary => {
                return Expr {
                    kind: ExprKind::Complex(re, *im),
                    pos,
                }
            }
            ("sub", Some(re), ExprKind::Complex(_, im)) if imaginary => {
                return Expr {
                    kind: ExprKind::Complex(re, -im),
                    pos,
                }
            }
            _ => {}
        }
        // Other sums of complex constants, as Python computes them.
        let any_complex = [&left, &right]
            .iter()
            .any(|e| matches!(e.kind, ExprKind::Complex(..)));
        if let (true, Some((a, ai)), Some((b, bi)), "add" | "sub") =
            (any_complex, complex(&left), complex(&right), op)
        {
            let kind = if op == "add" {
                ExprKind::Complex(a + b, ai + bi)
            } else {
                ExprKind::Complex(a - b, ai - bi)
            };
            return Expr { kind, pos };
        }
        Expr {
            kind: ExprKind::Binary(op, Box::new(left), Box::new(right)),
            pos,
        }
    }

    /// Whether the tokens at the cursor spell `op` with nothing between them (`==`, `//`).
    fn at_op(&self, op: &str) -> bool {
        let mut prev: Option<&Token> = None;
        for (k, c) in op.chars().enumerate() {
            let Some(t) = self.toks.get(self.pos + k) else {
                return false;
            };
            if t.tok != Tok::Punct(c) {
                return false;
            }
            if let Some(p) = prev {
                if t.line != p.line || t.col != p.col + 1 {
                    return false;
                }
            }
            prev = Some(t);
        }
        // `<` must not be the start of `<<` or `<=` when `<` alone is asked for, etc.
        let next = self.toks.get(self.pos + op.len());
        let glued = next.is_some_and(|n| {
            prev.is_some_and(|p| n.line == p.line && n.col == p.col + 1)
                && matches!(n.tok, Tok::Punct('=' | '<' | '>' | '*' | '/'))
        });
        !glued || op.len() == 2
    }

    /// At an augmented assignment (`+=`, `//=`, ...): the `operator` function of its
    /// operator (`add`) and how many tokens it spans.
    fn augmented_operator(&self) -> Option<(&'static str, usize)> {
        // The punctuation at the cursor up to a glued `=`: `+=` is `+` then `=`.
        let mut spelled = [0u8; 4];
        let mut n = 0;
        let mut prev: Option<&Token> = None;
        let mut assigns = false;
        for t in self.toks.get(self.pos..)? {
            let Tok::Punct(c) = t.tok else { return None };
            if n == spelled.len()
                || !c.is_ascii()
                || prev.is_some_and(|p| t.line != p.line || t.col != p.col + 1)
            {
                return None;
            }
            if c == '=' {
                assigns = true;
                break;
            }
            spelled[n] = c as u8;
            n += 1;
            prev = Some(t);
        }
        if !assigns {
            return None;
        }
        let spelling = std::str::from_utf8(&spelled[..n]).ok()?;
        BINARY_OPERATORS
            .iter()
            .find(|(_, s, precedence)| *precedence >= 1 && *s == spelling)
            .map(|(name, s, _)| (*name, s.len() + 1))
    }

    /// A left-associative chain of the operators of precedence `level` and tighter
    /// ([`BINARY_OPERATORS`]; `**` binds tighter than unary minus, see [`Self::power`]).
    fn binary_level(&mut self, level: u8) -> Result<Expr, ParseError> {
        if level == POWER {
            return self.unary();
        }
        let mut left = self.binary_level(level + 1)?;
        'chain: loop {
            for (name, spelling, _) in BINARY_OPERATORS.iter().filter(|e| e.2 == level) {
                // `**` is a power, not two multiplications.
                if *spelling == "*" && self.at_op("**") {
                    break;
                }
                if self.at_op(spelling) {
                    self.skip(spelling.len());
                    let right = self.binary_level(level + 1)?;
                    left = Self::binary(name, left, right);
                    continue 'chain;
                }
            }
            return Ok(left);
        }
    }

    /// `a ** b` (right-associative, tighter than unary minus on its left).
    fn power(&mut self, base: Expr) -> Result<Expr, ParseError> {
        if !self.is_double('*') {
            return Ok(base);
        }
        self.advance();
        self.advance();
        let exponent = self.unary()?;
        Ok(Self::binary("pow", base, exponent))
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        let pos = self.here();
        if self.eat_punct('-') {
            if let Tok::Int(mag) = *self.tok() {
                self.advance();
                // `(-0-1j)`, Python's repr of `-1j`: the real part is -0.0.
                let imaginary_follows = matches!(self.tok(), Tok::Punct('+' | '-'))
                    && matches!(
                        self.toks.get(self.pos + 1).map(|t| &t.tok),
                        Some(Tok::Imag(_))
                    )
                    || matches!(self.tok(), Tok::Punct('+' | '-'))
                        && matches!(
                            self.toks.get(self.pos + 1).map(|t| &t.tok),
                            Some(Tok::Name(n)) if n == "infj" || n == "nanj"
                        );
                if mag == 0 && imaginary_follows {
                    return Ok(Expr {
                        kind: ExprKind::Float(-0.0),
                        pos,
                    });
                }
                let value = if mag == 1u64 << 63 {
                    i64::MIN
                } else {
                    match i64::try_from(mag) {
                        Ok(v) => -v,
                        Err(_) => {
                            return Err(error_at(
                                self.src,
                                pos,
                                format!("integer `-{mag}` does not fit in 64 bits"),
                            ))
                        }
                    }
                };
                return self.trailers(Expr {
                    kind: ExprKind::Int(value),
                    pos,
                });
            }
            let inner = self.unary()?;
            let kind = match inner.kind {
                ExprKind::Int(i) => match i.checked_neg() {
                    Some(v) => ExprKind::Int(v),
                    None => {
                        return Err(error_at(
                            self.src,
                            pos,
                            format!("integer `-({i})` does not fit in 64 bits"),
                        ))
                    }
                },
                ExprKind::Float(f) => ExprKind::Float(-f),
                // `-1j` is how Python's repr spells complex(0.0, -1.0): read it so.
                ExprKind::Complex(re, im) if re == 0.0 && re.is_sign_positive() => {
                    ExprKind::Complex(re, -im)
                }
                ExprKind::Complex(re, im) => ExprKind::Complex(-re, -im),
                ExprKind::Path(p) if p == ["inf"] => ExprKind::Float(f64::NEG_INFINITY),
                ExprKind::Path(p) if p == ["nan"] => ExprKind::Float(f64::NAN),
                other => ExprKind::Unary("neg", Box::new(Expr { kind: other, pos })),
            };
            return Ok(Expr { kind, pos });
        }
        if self.eat_punct('+') {
            return self.unary();
        }
        if self.eat_punct('~') {
            let inner = self.unary()?;
            return Ok(Expr {
                kind: ExprKind::Unary("invert", Box::new(inner)),
                pos,
            });
        }
        let atom = self.atom()?;
        let e = self.trailers(atom)?;
        self.power(e)
    }

    fn atom(&mut self) -> Result<Expr, ParseError> {
        let pos = self.here();
        let kind = match self.tok() {
            Tok::Name(_) | Tok::Int(_) | Tok::Float(_) | Tok::Imag(_) | Tok::Str(_) => {
                match self.advance() {
                    // Python's repr of an infinite or NaN imaginary part.
                    Tok::Name(n) if n == "infj" => ExprKind::Complex(0.0, f64::INFINITY),
                    Tok::Name(n) if n == "nanj" => ExprKind::Complex(0.0, f64::NAN),
                    Tok::Name(n) => ExprKind::Path(vec![n]),
                    Tok::Int(i) => ExprKind::Int(i64::try_from(i).map_err(|_| {
                        error_at(
                            self.src,
                            pos,
                            format!("integer `{i}` does not fit in 64 bits"),
                        )
                    })?),
                    Tok::Float(f) => ExprKind::Float(f),
                    Tok::Imag(f) => ExprKind::Complex(0.0, f),
                    Tok::Str(s) => ExprKind::Str(s),
                    _ => unreachable!("matched a literal or name token"),
                }
            }
            Tok::Punct('[') => {
                self.advance();
                let (items, _) = self.items(']')?;
                ExprKind::List(items)
            }
            Tok::Punct('(') => {
                self.advance();
                let (mut items, trailing_comma) = self.items(')')?;
                if items.len() == 1 && !trailing_comma {
                    return Ok(items.pop().expect("one item"));
                }
                ExprKind::Tuple(items)
            }
            _ => return self.unexpected("a value"),
        };
        Ok(Expr { kind, pos })
    }

    /// Comma-separated expressions up to `close`; reports whether a trailing comma was seen.
    fn items(&mut self, close: char) -> Result<(Vec<Expr>, bool), ParseError> {
        let mut items = Vec::new();
        let mut trailing = false;
        while !self.eat_punct(close) {
            if !items.is_empty() {
                if !self.eat_punct(',') {
                    return self.unexpected(&format!("`,` or `{close}`"));
                }
                trailing = true;
                if self.eat_punct(close) {
                    break;
                }
            }
            items.push(self.expr()?);
            trailing = false;
        }
        Ok((items, trailing))
    }

    fn trailers(&mut self, mut e: Expr) -> Result<Expr, ParseError> {
        loop {
            let pos = e.pos;
            if self.is_punct('.') {
                let ExprKind::Path(parts) = &mut e.kind else {
                    return self.err("attribute access is supported on names only".into());
                };
                self.advance();
                let (attr, _) = self.expect_name("an attribute name")?;
                parts.push(attr);
            } else if self.eat_punct('(') {
                let (args, kwargs) = self.call_args()?;
                e = Expr {
                    kind: ExprKind::Call {
                        func: Box::new(e),
                        args,
                        kwargs,
                    },
                    pos,
                };
            } else if self.eat_punct('[') {
                let index = self.expr()?;
                self.expect_punct(']')?;
                e = Expr {
                    kind: ExprKind::Index(Box::new(e), Box::new(index)),
                    pos,
                };
            } else {
                return Ok(e);
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn call_args(&mut self) -> Result<(Vec<Expr>, Vec<(String, Expr)>), ParseError> {
        let mut args = Vec::new();
        let mut kwargs: Vec<(String, Expr)> = Vec::new();
        let mut first = true;
        while !self.eat_punct(')') {
            if !first {
                if !self.eat_punct(',') {
                    return self.unexpected("`,` or `)`");
                }
                if self.eat_punct(')') {
                    break;
                }
            }
            first = false;
            let is_kw = matches!(self.tok(), Tok::Name(_))
                && self.toks.get(self.pos + 1).map(|t| &t.tok) == Some(&Tok::Punct('='))
                && self.toks.get(self.pos + 2).map(|t| &t.tok) != Some(&Tok::Punct('='));
            if is_kw {
                let (key, kpos) = self.expect_name("a keyword")?;
                self.advance();
                if kwargs.iter().any(|(k, _)| *k == key) {
                    return Err(error_at(
                        self.src,
                        kpos,
                        format!("keyword argument `{key}` repeated"),
                    ));
                }
                kwargs.push((key, self.expr()?));
            } else {
                if !kwargs.is_empty() {
                    return self.err("positional argument follows keyword arguments".into());
                }
                args.push(self.expr()?);
            }
        }
        Ok((args, kwargs))
    }
}

/// Where each name is defined, for "used before definition" messages: worked out only
/// when a message needs it.
struct Later<'m> {
    stmts: &'m [Stmt],
    defined: std::cell::OnceCell<FxHashMap<&'m str, Pos>>,
}

impl<'m> Later<'m> {
    fn new(stmts: &'m [Stmt]) -> Self {
        Later {
            stmts,
            defined: std::cell::OnceCell::new(),
        }
    }

    /// Where a statement first defines `name`.
    fn definition(&self, name: &str) -> Option<Pos> {
        let defined = self.defined.get_or_init(|| {
            let mut map: FxHashMap<&str, Pos> = FxHashMap::default();
            for s in self.stmts {
                match s {
                    Stmt::Assign { target, pos, .. } => {
                        map.entry(target).or_insert(*pos);
                    }
                    Stmt::Flatten { targets, .. } => {
                        for (t, p) in targets {
                            map.entry(t).or_insert(*p);
                        }
                    }
                    _ => {}
                }
            }
            map
        });
        defined.get(name).copied()
    }
}

/// What the parser knows of a name it has seen defined or freed.
#[derive(Default)]
struct Name {
    /// Its node (none before its definition, or once an alias took the name over).
    id: Option<NodeId>,
    /// Where it is defined.
    defined: Option<Pos>,
    /// Where a liveness tail (`x = None`) first freed it.
    freed: Option<Pos>,
}

/// Turns parsed statements into a graph, resolving names.
struct Builder<'a> {
    src: &'a str,
    graph: Graph,
    /// Each name defined or freed so far.
    names: FxHashMap<String, Name>,
    /// `forward` parameters that are pytree containers, not placeholders.
    pytree_args: Vec<String>,
    /// Symbolic annotations already parsed: dynamic graphs repeat a few shapes many times.
    symbolic: FxHashMap<String, Meta>,
}

impl<'a> Builder<'a> {
    fn new(src: &'a str) -> Self {
        Builder {
            src,
            graph: Graph::new("GraphModule"),
            names: FxHashMap::default(),
            pytree_args: Vec::new(),
            symbolic: FxHashMap::default(),
        }
    }

    /// The node a name refers to now.
    fn id_of(&self, name: &str) -> Option<NodeId> {
        self.names.get(name).and_then(|n| n.id)
    }

    /// The node `name` refers to, and where it was first freed if it was: one lookup.
    fn reference(&self, name: &str) -> Option<(NodeId, Option<Pos>)> {
        let entry = self.names.get(name)?;
        Some((entry.id?, entry.freed))
    }

    fn err<T>(&self, pos: Pos, message: String) -> Result<T, IrError> {
        Err(error_at(self.src, pos, message).into())
    }

    fn meta_of(&mut self, ann: &Option<Annotation>) -> Result<Meta, IrError> {
        let Some((text, pos)) = ann else {
            return Ok(Meta::Unknown);
        };
        if let Some(meta) = self.symbolic.get(text) {
            return Ok(meta.clone());
        }
        let meta = Meta::parse_annotation(text).or_else(|m| self.err(*pos, m))?;
        if meta.is_symbolic() {
            self.symbolic.insert(text.clone(), meta.clone());
        }
        Ok(meta)
    }

    fn add_node(
        &mut self,
        name: &str,
        pos: Pos,
        kind: NodeKind,
        meta: Meta,
    ) -> Result<NodeId, IrError> {
        if !is_valid_name(name) {
            return self.err(pos, format!("`{name}` cannot be a node name"));
        }
        let id = NodeId(self.graph.nodes.len() as u32);
        let entry = self.names.entry(name.to_string()).or_default();
        if let Some(first) = entry.defined {
            return self.err(
                pos,
                format!(
                    "duplicate name `{name}` (first defined on line {})",
                    first.line
                ),
            );
        }
        entry.id = Some(id);
        entry.defined = Some(pos);
        self.graph.nodes.push(Node {
            name: name.into(),
            kind,
            meta,
        });
        Ok(id)
    }

    fn build(mut self, module: Module) -> Result<Graph, IrError> {
        self.graph.name = module.class_name;
        let flatten = module
            .stmts
            .iter()
            .position(|s| matches!(s, Stmt::Flatten { .. }));
        let later = Later::new(&module.stmts);

        if let Some(fi) = flatten {
            // Pytree form: parameters are containers; the flatten targets are the inputs.
            for p in &module.params {
                if let Some((_, apos)) = &p.ann {
                    return self.err(
                        *apos,
                        format!("pytree parameter `{}` must not be annotated", p.name),
                    );
                }
                self.pytree_args.push(p.name.clone());
            }
            if let Some(first_node) = module.stmts[..fi]
                .iter()
                .find(|s| matches!(s, Stmt::Assign { .. } | Stmt::Return { .. }))
            {
                let pos = match first_node {
                    Stmt::Assign { pos, .. } | Stmt::Return { pos, .. } => *pos,
                    _ => unreachable!("filtered to Assign and Return"),
                };
                return self.err(pos, "statement before the pytree flatten line".into());
            }
            let mut declared: HashMap<&str, &Annotation> = HashMap::new();
            for s in &module.stmts[..fi] {
                if let Stmt::Declare { target, ann, .. } = s {
                    declared.insert(target, ann);
                }
            }
            let Stmt::Flatten {
                targets,
                value,
                pos,
            } = &module.stmts[fi]
            else {
                unreachable!("index found by position()")
            };
            self.check_flatten_call(value, *pos)?;
            for (t, tpos) in targets {
                let meta = self.meta_of(&declared.get(t.as_str()).map(|a| (*a).clone()))?;
                self.add_node(t, *tpos, NodeKind::Placeholder, meta)?;
            }
            for s in &module.stmts[..fi] {
                if let Stmt::Declare { target, pos, .. } = s {
                    if self.id_of(target).is_none() {
                        return self.err(
                            *pos,
                            format!("`{target}` is declared but not produced by the flatten line"),
                        );
                    }
                }
            }
        } else {
            for p in &module.params {
                let meta = self.meta_of(&p.ann)?;
                self.add_node(&p.name, p.pos, NodeKind::Placeholder, meta)?;
            }
        }

        let body_start = flatten.map_or(0, |f| f + 1);
        let mut output: Option<(Vec<Value>, Pos)> = None;
        // `a += b` or `a[i] = b` waiting for the statement that names its node (`out = a`).
        let mut augmented: Option<(&str, InPlace<'_>, Pos)> = None;
        for s in &module.stmts[body_start..] {
            if let Some((target, in_place, apos)) = augmented.take() {
                let named = match s {
                    Stmt::Assign {
                        target: name,
                        ann,
                        value,
                        pos,
                    } if value.name() == Some(target) => Some((name, ann, *pos)),
                    _ => None,
                };
                let Some((name, ann, pos)) = named else {
                    return self.err(
                        apos,
                        format!("`{target} ...=` must be followed by the statement naming its result (`out = {target}`)"),
                    );
                };
                let base = Expr {
                    kind: ExprKind::Path(vec![target.to_string()]),
                    pos: apos,
                };
                let meta = self.meta_of(ann)?;
                let kind = match in_place {
                    InPlace::Operator(op, value) => self.call(
                        OpName::python("operator", &format!("i{op}")),
                        [&base, value],
                        &[],
                        &later,
                    )?,
                    InPlace::SetItem(index, value) => self.call(
                        OpName::python("operator", "setitem"),
                        [&base, index, value],
                        &[],
                        &later,
                    )?,
                };
                self.add_node(name, pos, kind, meta)?;
                continue;
            }
            if let Some((_, rpos)) = &output {
                let pos = match s {
                    Stmt::Assign { pos, .. }
                    | Stmt::AugAssign { pos, .. }
                    | Stmt::SetItem { pos, .. }
                    | Stmt::Declare { pos, .. }
                    | Stmt::Flatten { pos, .. }
                    | Stmt::Return { pos, .. } => *pos,
                    Stmt::Free { names } => names[0].1,
                };
                return self.err(
                    pos,
                    format!("statement after the `return` on line {}", rpos.line),
                );
            }
            match s {
                Stmt::Assign {
                    target,
                    ann,
                    value,
                    pos,
                } => self.assign(target, ann, value, *pos, &later)?,
                Stmt::AugAssign {
                    target,
                    op,
                    value,
                    pos,
                } => {
                    augmented = Some((target, InPlace::Operator(op, value), *pos));
                }
                Stmt::SetItem {
                    target,
                    index,
                    value,
                    pos,
                } => {
                    augmented = Some((target, InPlace::SetItem(index, value), *pos));
                }
                Stmt::Declare { target, pos, .. } => {
                    return self.err(*pos, format!("`{target}` is annotated but never assigned"))
                }
                Stmt::Flatten { pos, .. } => {
                    return self.err(*pos, "only one pytree flatten line is allowed".into())
                }
                Stmt::Return { value, pos } => {
                    let values = self.output_values(value, &later)?;
                    output = Some((values, *pos));
                }
                Stmt::Free { names } => {
                    for (name, pos) in names {
                        // (Most names are defined already: no key to copy.)
                        match self.names.get_mut(name.as_str()) {
                            Some(entry) => {
                                entry.freed.get_or_insert(*pos);
                            }
                            None => {
                                let freed = Some(*pos);
                                let entry = Name {
                                    freed,
                                    ..Name::default()
                                };
                                self.names.insert(name.clone(), entry);
                            }
                        }
                    }
                }
            }
        }
        if let Some((target, _, apos)) = augmented {
            return self.err(
                apos,
                format!("`{target} ...=` must be followed by the statement naming its result (`out = {target}`)"),
            );
        }
        let Some((values, _)) = output else {
            return self.err(module.end, "the graph has no `return` statement".into());
        };
        self.graph.output = Some(values);
        self.graph.verify()?;
        Ok(self.graph)
    }

    fn check_flatten_call(&self, value: &Expr, pos: Pos) -> Result<(), IrError> {
        let ok = match &value.kind {
            ExprKind::Call { func, args, .. } => {
                func.dotted()
                    .is_some_and(|d| d.last() == Some(&"tree_flatten_spec"))
                    && matches!(args.first(), Some(Expr { kind: ExprKind::List(items), .. })
                        if items.len() == self.pytree_args.len()
                            && items.iter().zip(&self.pytree_args).all(|(e, p)|
                                e.name() == Some(p.as_str())))
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            self.err(
                pos,
                format!(
                    "expected `fx_pytree.tree_flatten_spec([{}], self._in_spec)`",
                    self.pytree_args.join(", ")
                ),
            )
        }
    }

    /// A call of `op` with its arguments as graph values.
    fn call<'e>(
        &mut self,
        op: OpName,
        args: impl IntoIterator<Item = &'e Expr>,
        kwargs: &[(String, Expr)],
        later: &Later<'_>,
    ) -> Result<NodeKind, IrError> {
        let args = args
            .into_iter()
            .map(|a| self.value(a, later))
            .collect::<Result<_, _>>()?;
        let kwargs = kwargs
            .iter()
            .map(|(k, v)| Ok((k.clone(), self.value(v, later)?)))
            .collect::<Result<_, IrError>>()?;
        Ok(NodeKind::Call { op, args, kwargs })
    }

    fn assign(
        &mut self,
        target: &str,
        ann: &Option<Annotation>,
        value: &Expr,
        pos: Pos,
        later: &Later<'_>,
    ) -> Result<(), IrError> {
        if ann.is_none() {
            if let Some(param) = value.name() {
                if self.alias_input(target, param, pos)? {
                    return Ok(());
                }
            }
        }
        let meta = self.meta_of(ann)?;
        let kind = match &value.kind {
            ExprKind::Call { func, args, kwargs } => {
                let path = func.dotted();
                match path.as_deref() {
                    Some(["torch", "ops", ns, name, overload]) => {
                        self.call(OpName::new(ns, name, overload), args, kwargs, later)?
                    }
                    Some(["torch", "ops", "higher_order", name]) => {
                        self.call(OpName::higher_order(name), args, kwargs, later)?
                    }
                    Some(["torch", "ops", ns, name]) => {
                        return self.err(
                            func.pos,
                            format!(
                                "`torch.ops.{ns}.{name}` names no overload; write e.g. `torch.ops.{ns}.{name}.default`"
                            ),
                        )
                    }
                    Some(["operator", "getitem"]) if args.len() == 2 && kwargs.is_empty() => {
                        self.getitem(&args[0], &args[1], later)?
                    }
                    // A torch-level function, as dynamo-level graphs call them
                    // (`torch.cat`, `torch.nn.functional.relu`, `torch._C._nn.linear`).
                    Some(["torch", module @ .., name]) if module.first() != Some(&"ops") => {
                        let namespace = std::iter::once("torch")
                            .chain(module.iter().copied())
                            .collect::<Vec<_>>()
                            .join(".");
                        self.call(OpName::python(&namespace, name), args, kwargs, later)?
                    }
                    // A Tensor method: `x.view(12, -1)`.
                    Some([receiver, method]) if self.id_of(receiver).is_some() => {
                        let this = Expr {
                            kind: ExprKind::Path(vec![receiver.to_string()]),
                            pos: func.pos,
                        };
                        self.call(
                            OpName::python(METHOD, method),
                            std::iter::once(&this).chain(args.iter()),
                            kwargs,
                            later,
                        )?
                    }
                    Some(parts) => {
                        return self.err(
                            func.pos,
                            format!(
                                "unsupported call target `{}`; expected torch.ops.<namespace>.<op>.<overload>, a torch function, a Tensor method or an operator",
                                parts.join(".")
                            ),
                        )
                    }
                    None => {
                        return self.err(
                            func.pos,
                            "unsupported call; expected torch.ops.<namespace>.<op>.<overload>(...)"
                                .into(),
                        )
                    }
                }
            }
            ExprKind::Index(base, index) => self.getitem(base, index, later)?,
            ExprKind::Binary(op, left, right) => self.call(
                OpName::python("operator", op),
                [&**left, &**right],
                &[],
                later,
            )?,
            ExprKind::Unary(op, inner) => {
                self.call(OpName::python("operator", op), [&**inner], &[], later)?
            }
            ExprKind::Path(_) => match value.dotted().as_deref() {
                Some(["self", rest @ ..]) if !rest.is_empty() => NodeKind::GetAttr {
                    target: rest.join("."),
                },
                _ => {
                    return self.err(
                        value.pos,
                        "expected `self.<attribute>` for a constant".into(),
                    )
                }
            },
            _ => {
                return self.err(
                    value.pos,
                    "expected an op call `torch.ops.<ns>.<op>.<overload>(...)`, `x[i]` or `self.<attr>`"
                        .into(),
                )
            }
        };
        let getitem = match &kind {
            NodeKind::GetItem { source, index } => Some((*source, *index)),
            _ => None,
        };
        let item_meta = meta.tensor().cloned();
        self.add_node(target, pos, kind, meta)?;
        if let Some((source, index)) = getitem {
            // A getitem's annotation tells the source's output meta.
            let src = &mut self.graph.nodes[source.index()];
            if let Meta::Unknown = src.meta {
                src.meta = Meta::Multi(Vec::new());
            }
            if let Meta::Multi(items) = &mut src.meta {
                if items.len() <= index {
                    items.resize(index + 1, None);
                }
                if item_meta.is_some() {
                    items[index] = item_meta;
                }
            }
        }
        Ok(())
    }

    /// Dynamo's `l_x_ = L_x_`: the placeholder of parameter `param` takes the name `target`
    /// (the parameter name is kept for printing). False when `param` is not a parameter
    /// still under its own name.
    fn alias_input(&mut self, target: &str, param: &str, pos: Pos) -> Result<bool, IrError> {
        let Some(id) = self.id_of(param) else {
            return Ok(false);
        };
        let node = &self.graph.nodes[id.index()];
        let freed = self.names.get(param).and_then(|n| n.freed);
        if !node.is_placeholder() || node.name != param || freed.is_some() {
            return Ok(false);
        }
        if !is_valid_name(target) {
            return self.err(pos, format!("`{target}` cannot be a node name"));
        }
        if let Some(first) = self.names.get(target).and_then(|n| n.defined) {
            return self.err(
                pos,
                format!(
                    "duplicate name `{target}` (first defined on line {})",
                    first.line
                ),
            );
        }
        self.graph.nodes[id.index()].name = target.into();
        self.graph
            .param_names
            .insert(target.to_string(), param.to_string());
        if let Some(entry) = self.names.get_mut(param) {
            entry.id = None;
        }
        let entry = self.names.entry(target.to_string()).or_default();
        entry.id = Some(id);
        entry.defined = Some(pos);
        Ok(true)
    }

    /// `x[i]`: an output of a multi-output node, or (on a tensor) Python indexing,
    /// `operator.getitem(x, i)`, as dynamo-level graphs index tensors.
    fn getitem(
        &mut self,
        base: &Expr,
        index: &Expr,
        later: &Later<'_>,
    ) -> Result<NodeKind, IrError> {
        let source = match self.value(base, later)? {
            Value::Node(n) => n,
            _ => return self.err(base.pos, "only a node can be indexed".into()),
        };
        let src = self.graph.node(source);
        let tensor = matches!(src.meta, Meta::Tensor(_) | Meta::SymTensor(_));
        let small_int = matches!(index.kind, ExprKind::Int(i) if (0..(1 << 20)).contains(&i));
        if tensor || src.is_placeholder() || !small_int {
            return self.call(
                OpName::python("operator", "getitem"),
                [base, index],
                &[],
                later,
            );
        }
        let index = match index.kind {
            ExprKind::Int(i) if (0..(1 << 20)).contains(&i) => i as usize,
            _ => {
                return self.err(
                    index.pos,
                    "getitem index must be a small non-negative integer".into(),
                )
            }
        };
        Ok(NodeKind::GetItem { source, index })
    }

    fn output_values(&self, value: &Expr, later: &Later<'_>) -> Result<Vec<Value>, IrError> {
        match &value.kind {
            ExprKind::Tuple(items) | ExprKind::List(items) => {
                items.iter().map(|e| self.value(e, later)).collect()
            }
            ExprKind::Call { func, args, .. }
                if func
                    .dotted()
                    .is_some_and(|d| d.last() == Some(&"tree_unflatten")) =>
            {
                match args.first() {
                    Some(Expr {
                        kind: ExprKind::List(items),
                        ..
                    }) => items.iter().map(|e| self.value(e, later)).collect(),
                    _ => self.err(
                        value.pos,
                        "expected `pytree.tree_unflatten([...], self._out_spec)`".into(),
                    ),
                }
            }
            _ => Ok(vec![self.value(value, later)?]),
        }
    }

    fn value(&self, e: &Expr, later: &Later<'_>) -> Result<Value, IrError> {
        Ok(match &e.kind {
            ExprKind::Int(i) => Value::Int(*i),
            ExprKind::Float(f) => Value::Float(*f),
            ExprKind::Complex(re, im) => Value::Complex(*re, *im),
            ExprKind::Str(s) => Value::Str(s.clone()),
            ExprKind::List(items) => Value::List(
                items
                    .iter()
                    .map(|i| self.value(i, later))
                    .collect::<Result<_, _>>()?,
            ),
            ExprKind::Tuple(items) => Value::Tuple(
                items
                    .iter()
                    .map(|i| self.value(i, later))
                    .collect::<Result<_, _>>()?,
            ),
            ExprKind::Path(p) if p.len() == 1 => match p[0].as_str() {
                "True" => Value::Bool(true),
                "False" => Value::Bool(false),
                "None" => Value::None,
                "inf" => Value::Float(f64::INFINITY),
                "nan" => Value::Float(f64::NAN),
                "Ellipsis" => Value::Ellipsis,
                n => match self.reference(n) {
                    Some((_, Some(freed))) => {
                        return self.err(
                            e.pos,
                            format!(
                                "`{n}` is used after `{n} = None` on line {} freed it (PyTorch's generated code would read None here)",
                                freed.line
                            ),
                        );
                    }
                    Some((id, None)) => Value::Node(id),
                    None => {
                        return self.err(e.pos, self.unknown_name_message(n, later));
                    }
                },
            },
            ExprKind::Path(_) => match e.dotted().as_deref() {
                Some(["torch", attr]) => {
                    if let Some(d) = Dtype::from_torch_name(attr) {
                        Value::Dtype(d)
                    } else if let Some(m) = MemoryFormat::from_torch_name(attr) {
                        Value::MemoryFormat(m)
                    } else if let Some(l) = Layout::from_torch_name(attr) {
                        Value::Layout(l)
                    } else {
                        return self.err(
                            e.pos,
                            format!("unknown constant `torch.{attr}` (expected a dtype, memory format or layout)"),
                        );
                    }
                }
                Some(["torch", "ops", ns, name, overload]) => {
                    Value::Op(OpName::new(ns, name, overload))
                }
                Some(parts) => {
                    return self.err(e.pos, format!("unsupported value `{}`", parts.join(".")))
                }
                None => return self.err(e.pos, "unsupported attribute access".into()),
            },
            ExprKind::Call { func, args, kwargs } => match func.dotted().as_deref() {
                Some(["device"]) | Some(["torch", "device"]) => {
                    Value::Device(self.device(e.pos, args, kwargs)?)
                }
                Some(["slice"]) if args.len() == 3 && kwargs.is_empty() => Value::Slice(
                    args.iter()
                        .map(|a| self.value(a, later))
                        .collect::<Result<_, _>>()?,
                ),
                _ => {
                    return self.err(
                        e.pos,
                        "calls are allowed only as a node's right-hand side (op calls) or as device(...)"
                            .into(),
                    )
                }
            },
            ExprKind::Index(..) => {
                return self.err(e.pos, "indexing is allowed only as a node's right-hand side".into())
            }
            ExprKind::Binary(..) | ExprKind::Unary(..) => {
                return self.err(
                    e.pos,
                    "arithmetic is allowed only as a node's right-hand side (`mul = s0 * 2`)"
                        .into(),
                )
            }
        })
    }

    fn unknown_name_message(&self, n: &str, later: &Later<'_>) -> String {
        if self.pytree_args.iter().any(|p| p == n) {
            format!("`{n}` is a pytree container; use the flattened names")
        } else if let Some(p) = later.definition(n) {
            format!("`{n}` is used before its definition on line {}", p.line)
        } else {
            format!("unknown name `{n}`")
        }
    }

    fn device(
        &self,
        pos: Pos,
        args: &[Expr],
        kwargs: &[(String, Expr)],
    ) -> Result<Device, IrError> {
        let mut kind: Option<String> = None;
        let mut index: Option<i64> = None;
        for (i, a) in args.iter().enumerate() {
            match (i, &a.kind) {
                (0, ExprKind::Str(s)) => kind = Some(s.clone()),
                (1, ExprKind::Int(v)) => index = Some(*v),
                _ => return self.err(a.pos, "bad device argument".into()),
            }
        }
        for (k, v) in kwargs {
            match (k.as_str(), &v.kind) {
                ("type", ExprKind::Str(s)) => kind = Some(s.clone()),
                ("index", ExprKind::Int(i)) => index = Some(*i),
                ("index", ExprKind::Path(p)) if *p == ["None"] => index = None,
                _ => return self.err(v.pos, format!("bad device argument `{k}`")),
            }
        }
        let Some(kind) = kind else {
            return self.err(
                pos,
                "device(...) needs a type, e.g. device(type='cpu')".into(),
            );
        };
        let mut dev: Device = kind.parse().or_else(|m| self.err(pos, m))?;
        if let Some(i) = index {
            let i = u32::try_from(i).or_else(|_| self.err(pos, format!("bad device index {i}")))?;
            dev.index = Some(i);
        }
        Ok(dev)
    }
}

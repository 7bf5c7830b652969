//! StableHLO in MLIR's text form, as JAX (`jax.jit(f).lower(...).as_text()`) and torch_xla
//! print it: pretty or generic form, with or without locations.
//!
//! A [`Module`] keeps the text and reads out of it what graphbug needs, without a table of
//! StableHLO's ops: the functions, their arguments and results, and in each function its
//! statements, each with the values it defines (`%0`, `%1:4`, `%a, %b`), the values it
//! uses (every `%name` its text reads that its own regions do not define, `%1#2` naming
//! one result of several), its op's name and its results' types (the op's type signature
//! after its last top-level ` : `: a function type gives them, a list gives one a result
//! (`while`) or the last for one result (`select`), a single type all results). Printing
//! an unchanged module gives its text back; the main function, as a graphbug graph
//! ([`StableHloGraph`]), prints the graphs cut from it as modules of their own, each kept
//! statement as written.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::ops::Range;

use graphbug_ir::{Dialect, Dtype, Graph, Meta, Node, NodeId, NodeKind, OpName, TensorMeta, Value};

use crate::program::{Constants, Outlined};

/// An error in StableHLO text: where, and what.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct MlirError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl MlirError {
    /// The error `message` at byte `at` of `text`.
    fn at(text: &str, at: usize, message: String) -> MlirError {
        let (line, column) = position(text, at);
        MlirError {
            line,
            column,
            message,
        }
    }
}

impl fmt::Display for MlirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// A value's type: a tensor (dtype and static sizes) or another type, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    /// `tensor<3x4xf32>`: its element type (as written) and sizes (`None`: `?`).
    Tensor {
        /// The element type (`f32`, `i1`, `ui8`, `complex<f32>`...).
        element: String,
        /// The sizes.
        dims: Vec<Option<i64>>,
        /// The type as written.
        text: String,
    },
    /// Anything else (`!stablehlo.token`, `tuple<...>`), as written.
    Other(String),
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Tensor { text, .. } | Type::Other(text) => f.write_str(text),
        }
    }
}

/// The dtype of a StableHLO element type, where graphbug has one.
pub fn dtype_of(element: &str) -> Option<Dtype> {
    Some(match element {
        "f32" => Dtype::Float32,
        "f64" => Dtype::Float64,
        "f16" => Dtype::Float16,
        "bf16" => Dtype::BFloat16,
        "i1" => Dtype::Bool,
        "i8" | "si8" => Dtype::Int8,
        "i16" | "si16" => Dtype::Int16,
        "i32" | "si32" => Dtype::Int32,
        "i64" | "si64" => Dtype::Int64,
        "ui8" => Dtype::UInt8,
        "ui16" => Dtype::UInt16,
        "ui32" => Dtype::UInt32,
        "ui64" => Dtype::UInt64,
        "complex<f32>" => Dtype::Complex64,
        "complex<f64>" => Dtype::Complex128,
        _ => return None,
    })
}

/// The StableHLO element type of a dtype.
pub fn element_of(dtype: Dtype) -> &'static str {
    match dtype {
        Dtype::Float32 => "f32",
        Dtype::Float64 => "f64",
        Dtype::Float16 => "f16",
        Dtype::BFloat16 => "bf16",
        Dtype::Bool => "i1",
        Dtype::Int8 => "i8",
        Dtype::Int16 => "i16",
        Dtype::Int32 => "i32",
        Dtype::Int64 => "i64",
        Dtype::UInt8 => "ui8",
        Dtype::UInt16 => "ui16",
        Dtype::UInt32 => "ui32",
        Dtype::UInt64 => "ui64",
        Dtype::Complex64 => "complex<f32>",
        Dtype::Complex128 => "complex<f64>",
    }
}

impl Type {
    /// The tensor type of `meta`.
    pub fn of_meta(meta: &TensorMeta) -> Type {
        let sizes: String = meta.shape.iter().map(|d| format!("{d}x")).collect();
        let element = element_of(meta.dtype).to_string();
        Type::Tensor {
            text: format!("tensor<{sizes}{element}>"),
            dims: meta.shape.iter().map(|&d| Some(d)).collect(),
            element,
        }
    }

    /// The meta of a value of this type.
    pub fn meta(&self) -> Result<TensorMeta, String> {
        match self {
            Type::Tensor {
                element,
                dims,
                text,
            } => {
                let dtype = dtype_of(element).ok_or_else(|| {
                    format!("element type `{element}` ({text}) is not supported yet")
                })?;
                let sizes = dims
                    .iter()
                    .map(|d| {
                        d.ok_or_else(|| format!("dynamic sizes ({text}) are not supported yet"))
                    })
                    .collect::<Result<Vec<i64>, String>>()?;
                Ok(TensorMeta::new(dtype, sizes))
            }
            Type::Other(text) => Err(format!("values of type `{text}` are not supported yet")),
        }
    }
}

/// Parses a type at the start of `text`: the type and the bytes it took.
pub(crate) fn parse_type(text: &str) -> Result<(Type, usize), String> {
    if let Some(rest) = text.strip_prefix("tensor<") {
        let len = angle_len(&text[6..]).ok_or("unterminated `tensor<`")? + 6;
        let _ = rest;
        let inner = &text[7..len - 1];
        // `3x4xf32`, `f32`, `?x4xf32`, `4xcomplex<f32>`, with an optional `, #encoding`.
        let inner = split_top_commas(inner)[0].trim();
        let mut dims = Vec::new();
        let mut rest = inner;
        loop {
            let n = rest
                .bytes()
                .take_while(|b| b.is_ascii_digit() || *b == b'?')
                .count();
            if n > 0 && rest[n..].starts_with('x') {
                let d = &rest[..n];
                dims.push(if d == "?" {
                    None
                } else {
                    Some(d.parse().map_err(|_| format!("bad size `{d}`"))?)
                });
                rest = &rest[n + 1..];
            } else {
                break;
            }
        }
        return Ok((
            Type::Tensor {
                element: rest.to_string(),
                dims,
                text: text[..len].to_string(),
            },
            len,
        ));
    }
    if text.starts_with('!')
        || text.starts_with("tuple<")
        || text.starts_with("complex<")
        || text.starts_with("memref<")
    {
        let start = text.find('<');
        let word = text
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'!' | b'.' | b'_'))
            .count();
        let len = match start {
            Some(s) if s == word => word + angle_len(&text[s..]).ok_or("unterminated `<`")?,
            _ => word,
        };
        return Ok((Type::Other(text[..len].to_string()), len));
    }
    Err(format!("expected a type, found `{}`", head(text)))
}

/// The length of the `<...>` group at the start of `text` (nested, `->` skipped).
pub(crate) fn angle_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0i32;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'-' if bytes.get(i + 1) == Some(&b'>') => i += 1,
            b'<' => depth += 1,
            b'>' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b'"' => i += string_len(&text[i..]) - 1,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The length of the string literal at the start of `text`, quotes included.
pub(crate) fn string_len(text: &str) -> usize {
    let mut escaped = false;
    for (i, c) in text.char_indices().skip(1) {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return i + 1,
            _ => escaped = false,
        }
    }
    text.len()
}

/// Splits at commas outside brackets, angle brackets and strings.
fn split_top_commas(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let bytes = text.as_bytes();
    let (mut depth, mut start, mut i) = (0i32, 0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'-' if bytes.get(i + 1) == Some(&b'>') => i += 1,
            b'"' => i += string_len(&text[i..]) - 1,
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth -= 1,
            b',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&text[start..]);
    parts
}

/// The types a region yields: its terminator's (`stablehlo.return %x : t, u`), the last of
/// `lines` (trimmed, as [`StableHloGraph::lines_of`] gives them) that is one.
fn yielded(lines: &[(usize, &str)]) -> Option<Vec<String>> {
    let ret = lines
        .iter()
        .rev()
        .find(|(_, l)| l.starts_with("stablehlo.return "))?;
    let (_, types) = ret.1.rsplit_once(" : ")?;
    Some(
        split_top_commas(types)
            .into_iter()
            .map(|t| t.trim().to_string())
            .collect(),
    )
}

/// `text` with every use of the value `%from` written `%to` (whole names only: `%arg1` is
/// not `%arg10`).
fn rename_value(text: &str, from: &str, to: &str) -> String {
    let pattern = format!("%{from}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(&pattern) {
        let after = &rest[i + pattern.len()..];
        let whole = !after
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$' | '-'));
        out.push_str(&rest[..i]);
        out.push_str(if whole { "%" } else { &pattern });
        if whole {
            out.push_str(to);
        }
        rest = after;
    }
    out.push_str(rest);
    out
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

/// A use of a value in a statement: its name, which result of several (`%1#2`), where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Use {
    /// The value's name, without `%`.
    pub name: String,
    /// The result index of `%name#k`.
    pub index: Option<usize>,
    /// Where in the module's text (the whole `%name#k`).
    pub span: Range<usize>,
}

/// One statement of a function: an op, with its regions.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// Its text in the module (from its line's start to its last line's end).
    pub span: Range<usize>,
    /// 1-based line of its start.
    pub line: usize,
    /// The values it defines, with their counts: `%0` (1), `%1:4` (4), `%a, %b` (1 each).
    pub results: Vec<(String, usize)>,
    /// Its op's name (`stablehlo.add`, `func.call`, `return`).
    pub op: String,
    /// Its uses of values its regions do not define, in text order (every occurrence).
    pub uses: Vec<Use>,
    /// Its results' types.
    pub types: Vec<Type>,
    /// The functions it names (`@relu`).
    pub symbols: Vec<String>,
}

impl Stmt {
    /// Whether it returns from its function.
    pub fn is_return(&self) -> bool {
        // JAX ends some functions (approx_top_k's comparator) with `stablehlo.return`,
        // which MLIR takes as a function's terminator too.
        matches!(
            self.op.as_str(),
            "return" | "func.return" | "stablehlo.return"
        )
    }
}

/// A function: `func.func [public|private] @name(args) -> results { statements }`.
#[derive(Clone, Debug, PartialEq)]
pub struct Func {
    /// Its name, without `@`.
    pub name: String,
    /// Its text, from its line's start to its closing line's end.
    pub span: Range<usize>,
    /// Its header (up to and including the `{` line).
    pub header: Range<usize>,
    /// Its closing line.
    pub closing: Range<usize>,
    /// 1-based line of its header.
    pub line: usize,
    /// Its arguments: name (without `%`) and type.
    pub args: Vec<(String, Type)>,
    /// Its results' types.
    pub results: Vec<Type>,
    /// Its statements.
    pub body: Vec<Stmt>,
}

/// A StableHLO module.
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    /// The text.
    pub text: String,
    /// The module op's header (`module @m attributes {...} {` line).
    pub header: Range<usize>,
    /// Its functions.
    pub funcs: Vec<Func>,
}

/// Whether a text looks like MLIR: a `module`, or a function, before anything else.
pub fn looks_like_mlir(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with("#loc"))
        .is_some_and(|l| {
            l.starts_with("module")
                || l.starts_with("func.func")
                || l.starts_with("\"builtin.module\"")
        })
}

/// Whether bytes are MLIR bytecode (`ML\xefR`).
pub fn is_bytecode(bytes: &[u8]) -> bool {
    bytes.starts_with(b"ML\xefR")
}

impl Module {
    /// The function named `name`.
    pub fn func(&self, name: &str) -> Option<&Func> {
        self.funcs.iter().find(|f| f.name == name)
    }

    /// The entry function: `main`, or the one public function.
    pub fn main(&self) -> Option<&Func> {
        self.func("main").or(match self.funcs.as_slice() {
            [only] => Some(only),
            _ => None,
        })
    }

    /// The text of `span`.
    pub fn at(&self, span: &Range<usize>) -> &str {
        &self.text[span.clone()]
    }
}

/// The 1-based line and column of byte `at` in `text`.
fn position(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = at - before.rfind('\n').map_or(0, |p| p + 1) + 1;
    (line, column)
}

/// Reads a module.
pub fn parse_module(text: &str) -> Result<Module, MlirError> {
    let err = |at: usize, message: String| MlirError::at(text, at, message);
    let lines: Vec<Range<usize>> = line_spans(text);
    let mut k = 0;
    // Up to the module's header (location aliases may come first).
    let header = loop {
        let Some(l) = lines.get(k) else {
            return Err(err(
                text.len(),
                "expected `module`, found the end of the text".into(),
            ));
        };
        let t = text[l.clone()].trim();
        k += 1;
        if t.is_empty() || t.starts_with("//") || t.starts_with('#') {
            continue;
        }
        if !t.starts_with("module") {
            return Err(err(
                l.start,
                format!("expected `module`, found `{}`", head(t)),
            ));
        }
        if !t.ends_with('{') {
            return Err(err(
                l.start,
                "expected `{` at the end of the module's header".into(),
            ));
        }
        break l.clone();
    };
    let mut funcs = Vec::new();
    while let Some(l) = lines.get(k) {
        let t = text[l.clone()].trim();
        k += 1;
        if t.is_empty() || t.starts_with("//") || t.starts_with('#') || t.starts_with('}') {
            continue;
        }
        if t.starts_with("func.func") {
            let (f, next) = parse_func(text, &lines, k - 1)?;
            funcs.push(f);
            k = next;
        }
        // Other top-level ops (`sdy.mesh`, globals) are kept as written and not read.
    }
    if funcs.is_empty() {
        return Err(err(header.start, "the module has no `func.func`".into()));
    }
    Ok(Module {
        text: text.to_string(),
        header,
        funcs,
    })
}

/// Each line's span, its newline included.
fn line_spans(text: &str) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    let mut start = 0;
    for l in text.split_inclusive('\n') {
        spans.push(start..start + l.len());
        start += l.len();
    }
    spans
}

/// How many more brackets `line` opens than it closes (strings and `->` aside).
fn depth_change(line: &str) -> i32 {
    let bytes = line.as_bytes();
    let (mut d, mut i) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'-' if bytes.get(i + 1) == Some(&b'>') => i += 1,
            b'"' => i += string_len(&line[i..]) - 1,
            b'(' | b'[' | b'{' | b'<' => d += 1,
            b')' | b']' | b'}' | b'>' => d -= 1,
            _ => {}
        }
        i += 1;
    }
    d
}

/// Whether a line (trimmed) starts a new statement rather than continuing one (`cond {`,
/// `reducer(...)`).
fn starts_statement(t: &str) -> bool {
    if t.starts_with('%')
        || t.starts_with('"')
        || t.starts_with('^')
        || t.starts_with('}')
        || t.starts_with("return")
    {
        return true;
    }
    let word: String = t
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
        .collect();
    word.contains('.') || word == "call"
}

/// A function starting at line `k`; returns it and the line after it.
fn parse_func(text: &str, lines: &[Range<usize>], k: usize) -> Result<(Func, usize), MlirError> {
    let err = |at: usize, message: String| MlirError::at(text, at, message);
    let start = lines[k].start;
    // The header runs to the line its brackets balance on, ending in `{`.
    let (mut depth, mut j) = (0, k);
    loop {
        let l = lines
            .get(j)
            .ok_or_else(|| err(start, "the function's header does not end".into()))?;
        depth += depth_change(&text[l.clone()]);
        j += 1;
        if depth <= 1 && text[l.clone()].trim_end().ends_with('{') {
            break;
        }
    }
    let header = start..lines[j - 1].end;
    let htext = &text[header.clone()];
    let name_at = htext
        .find('@')
        .ok_or_else(|| err(start, "a function without `@name`".into()))?;
    let (name, name_len) = symbol_at(&htext[name_at + 1..]);
    let open = name_at + 1 + name_len;
    if !htext[open..].starts_with('(') {
        return Err(err(
            start + open,
            format!("expected `(` after function `@{name}`"),
        ));
    }
    let close = open
        + group_len(&htext[open..])
            .ok_or_else(|| err(start + open, "unterminated argument list".into()))?;
    let mut args = Vec::new();
    for a in split_top_commas(&htext[open + 1..close - 1]) {
        let a = a.trim();
        if a.is_empty() {
            continue;
        }
        let (n, ty) = a
            .split_once(':')
            .ok_or_else(|| err(start + open, format!("argument `{a}` has no type")))?;
        let ty = parse_type(ty.trim()).map_err(|m| err(start + open, m))?.0;
        args.push((n.trim().trim_start_matches('%').to_string(), ty));
    }
    let mut results = Vec::new();
    let rest = htext[close..].trim_start();
    if let Some(r) = rest.strip_prefix("->") {
        let r = r.trim_start();
        let at = start + htext.len() - r.len();
        if r.starts_with('(') {
            let len = group_len(r).ok_or_else(|| err(at, "unterminated result list".into()))?;
            for t in split_top_commas(&r[1..len - 1]) {
                let t = t.trim();
                if !t.is_empty() {
                    results.push(parse_type(t).map_err(|m| err(at, m))?.0);
                }
            }
        } else {
            results.push(parse_type(r).map_err(|m| err(at, m))?.0);
        }
    }
    // The body: statements until the line that closes the function.
    let mut body = Vec::new();
    loop {
        let l = lines
            .get(j)
            .ok_or_else(|| err(start, format!("function `@{name}` is not closed by `}}`")))?
            .clone();
        let t = text[l.clone()].trim();
        if t.is_empty() || t.starts_with("//") {
            j += 1;
            continue;
        }
        if t.starts_with('}') {
            let f = Func {
                name,
                span: start..l.end,
                header,
                closing: l.clone(),
                line: position(text, start).0,
                args,
                results,
                body,
            };
            return Ok((f, j + 1));
        }
        let (stmt, next) = parse_stmt(text, lines, j)?;
        body.push(stmt);
        j = next;
    }
}

/// The length of the `(...)` group at the start of `text`.
fn group_len(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let (mut depth, mut i) = (0i32, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'-' if bytes.get(i + 1) == Some(&b'>') => i += 1,
            b'"' => i += string_len(&text[i..]) - 1,
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// A statement starting at line `k`; returns it and the line after it.
fn parse_stmt(text: &str, lines: &[Range<usize>], k: usize) -> Result<(Stmt, usize), MlirError> {
    let err = |at: usize, message: String| MlirError::at(text, at, message);
    let start = lines[k].start;
    let (mut depth, mut j) = (0, k);
    loop {
        let l = lines
            .get(j)
            .ok_or_else(|| err(start, "a statement that does not end".into()))?;
        depth += depth_change(&text[l.clone()]);
        j += 1;
        if depth <= 0 {
            match lines.get(j) {
                Some(n)
                    if !starts_statement(text[n.clone()].trim())
                        && !text[n.clone()].trim().is_empty() =>
                {
                    continue
                }
                _ => break,
            }
        }
    }
    let span = start..lines[j - 1].end;
    let s = &text[span.clone()];
    let lead = s.len() - s.trim_start().len();
    // Results: `%0 = `, `%1:4 = `, `%a, %b = `.
    let mut results = Vec::new();
    let mut at = lead;
    let eq = top_level_eq(&s[at..]);
    if let Some(eq) = eq {
        for r in s[at..at + eq].split(',') {
            let r = r.trim().trim_start_matches('%');
            let (name, count) = match r.split_once(':') {
                Some((n, c)) => (
                    n,
                    c.trim()
                        .parse()
                        .map_err(|_| err(span.start + at, format!("bad result count in `%{r}`")))?,
                ),
                None => (r, 1),
            };
            if name.is_empty() {
                return Err(err(span.start + at, "a result without a name".into()));
            }
            results.push((name.to_string(), count));
        }
        at += eq + 1;
        at += s[at..].len() - s[at..].trim_start().len();
    }
    // The op's name: `stablehlo.add`, `"stablehlo.add"`, `call`.
    let op_text = &s[at..];
    let op = if let Some(q) = op_text.strip_prefix('"') {
        q[..q
            .find('"')
            .ok_or_else(|| err(span.start + at, "unterminated op name".into()))?]
            .to_string()
    } else {
        op_text
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
            .collect()
    };
    if op.is_empty() {
        return Err(err(
            span.start + at,
            format!("expected an op, found `{}`", head(op_text)),
        ));
    }
    let op = if op == "call" {
        "func.call".to_string()
    } else {
        op
    };
    let body_at = span.start + at;
    let (uses, symbols) = uses_in(text, body_at..span.end);
    let n_results: usize = results.iter().map(|(_, c)| c).sum();
    let types = if n_results == 0 {
        Vec::new()
    } else {
        result_types(&text[body_at..span.end], n_results)
            .map_err(|m| err(body_at, format!("`{op}`: {m}")))?
    };
    Ok((
        Stmt {
            line: position(text, start).0,
            span,
            results,
            op,
            uses,
            types,
            symbols,
        },
        j,
    ))
}

/// The offset of the `=` that ends a statement's result list, if it has one.
fn top_level_eq(s: &str) -> Option<usize> {
    if !s.starts_with('%') {
        return None;
    }
    let bytes = s.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b'=' if bytes.get(i + 1) != Some(&b'=') => return Some(i),
            b'%' | b',' | b':' | b' ' | b'#' | b'_' | b'.' | b'$' | b'-' => {}
            c if c.is_ascii_alphanumeric() => {}
            _ => return None,
        }
    }
    None
}

/// The values `span` of `text` uses that it does not define (a region's arguments and
/// results), and the symbols it names.
/// The symbol name `text` starts with (after its `@`): bare (`main`, `foo.bar$1`) or
/// quoted (`"<lambda>"`, as JAX names a lambda's function), without the quotes; and the
/// length it takes in `text`.
fn symbol_at(text: &str) -> (String, usize) {
    if text.starts_with('"') {
        let len = string_len(text);
        let inner = text[1..len].strip_suffix('"').unwrap_or(&text[1..len]);
        return (inner.to_string(), len);
    }
    let name: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$' | '-'))
        .collect();
    let len = name.len();
    (name, len)
}

fn uses_in(text: &str, span: Range<usize>) -> (Vec<Use>, Vec<String>) {
    let s = &text[span.clone()];
    let bytes = s.as_bytes();
    let mut defined: HashSet<String> = HashSet::new();
    let mut found: Vec<Use> = Vec::new();
    let mut symbols = Vec::new();
    let mut i = 0;
    // Lines of region statements start with their results: `%a, %b:2 = `.
    let mut line_start = true;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'"' {
            i += string_len(&s[i..]);
            line_start = false;
            continue;
        }
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if line_start && c != b' ' && c != b'\t' {
            line_start = false;
            if c == b'%' {
                if let Some(eq) = top_level_eq(&s[i..]) {
                    for r in s[i..i + eq].split(',') {
                        let r = r.trim().trim_start_matches('%');
                        defined.insert(r.split(':').next().unwrap_or(r).to_string());
                    }
                    i += eq + 1;
                    continue;
                }
            }
        }
        if c == b'@' {
            let (n, len) = symbol_at(&s[i + 1..]);
            i += 1 + len;
            symbols.push(n);
            continue;
        }
        if c != b'%' {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        let n = s[i..]
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'$' | b'-'))
            .count();
        let name = s[i..i + n].to_string();
        i += n;
        let mut index = None;
        if s[i..].starts_with('#') {
            let d = s[i + 1..].bytes().take_while(u8::is_ascii_digit).count();
            index = s[i + 1..i + 1 + d].parse().ok();
            i += 1 + d;
        }
        // `%x: type` (no space) defines a region argument; `%x = ` a region's value.
        let after = &s[i..];
        let defines = after.starts_with(':') && !after.starts_with("::")
            || after.trim_start().starts_with('=') && !after.trim_start().starts_with("==");
        if defines {
            defined.insert(name);
        } else if !name.is_empty() {
            found.push(Use {
                name,
                index,
                span: span.start + start..span.start + i,
            });
        }
    }
    let uses = found
        .into_iter()
        .filter(|u| !defined.contains(&u.name))
        .collect();
    (uses, symbols)
}

/// The types of a statement's `n` results, read from its type signature: the text after
/// its last ` : ` outside brackets (see the module docs).
fn result_types(s: &str, n: usize) -> Result<Vec<Type>, String> {
    let bytes = s.as_bytes();
    let (mut depth, mut colon, mut i) = (0i32, None, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'-' if bytes.get(i + 1) == Some(&b'>') => i += 1,
            b'"' => i += string_len(&s[i..]) - 1,
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth -= 1,
            b':' if depth == 0
                && i > 0
                && bytes[i - 1] == b' '
                && bytes.get(i + 1) == Some(&b' ') =>
            {
                colon = Some(i)
            }
            _ => {}
        }
        i += 1;
    }
    let colon = colon.ok_or("no type signature (` : type`)")?;
    let sig = s[colon + 1..].trim_start();
    if sig.starts_with('(') {
        // A function type: `(ins) -> outs`.
        let len = group_len(sig).ok_or("unterminated type list")?;
        let rest = sig[len..]
            .trim_start()
            .strip_prefix("->")
            .ok_or("expected `->` in the function type")?
            .trim_start();
        let outs = if rest.starts_with('(') {
            let len = group_len(rest).ok_or("unterminated result types")?;
            split_top_commas(&rest[1..len - 1])
                .into_iter()
                .filter(|t| !t.trim().is_empty())
                .map(|t| parse_type(t.trim()).map(|(t, _)| t))
                .collect::<Result<Vec<_>, _>>()?
        } else {
            vec![parse_type(rest)?.0]
        };
        if outs.len() != n {
            return Err(format!("{} result types for {n} results", outs.len()));
        }
        return Ok(outs);
    }
    // A list of types, up to what is not a type (`cond {`, `reducer(...)`, `loc(...)`).
    let mut types = Vec::new();
    let mut rest = sig;
    loop {
        let (t, len) = parse_type(rest)?;
        types.push(t);
        rest = rest[len..].trim_start();
        match rest.strip_prefix(',') {
            Some(r) if parse_type(r.trim_start()).is_ok() => rest = r.trim_start(),
            _ => break,
        }
    }
    match (types.len(), n) {
        (k, n) if k == n => Ok(types),
        (1, n) => Ok(vec![types[0].clone(); n]),
        (_, 1) => Ok(vec![types.last().expect("one type at least").clone()]),
        (k, n) => Err(format!("{k} types for {n} results: cannot tell which types are the results' (print the module in MLIR's generic form)")),
    }
}

/// `graphbug check` of a StableHLO module: every value a statement of a function uses is
/// defined before (in that function), every function a statement calls exists, the main
/// function returns as many values as it declares. Returns (statements of the main
/// function, its arguments, its results).
pub fn check(module: &Module) -> Result<(usize, usize, usize), MlirError> {
    let err = |at: usize, message: String| MlirError::at(&module.text, at, message);
    let names: HashSet<&str> = module.funcs.iter().map(|f| f.name.as_str()).collect();
    for f in &module.funcs {
        let mut defined: HashMap<&str, usize> =
            f.args.iter().map(|(n, _)| (n.as_str(), 1)).collect();
        let mut returned = None;
        for s in &f.body {
            for u in &s.uses {
                let Some(&count) = defined.get(u.name.as_str()) else {
                    return Err(err(
                        u.span.start,
                        format!(
                            "`%{}` is used before it is defined (function `@{}`)",
                            u.name, f.name
                        ),
                    ));
                };
                if let Some(k) = u.index {
                    if k >= count {
                        return Err(err(
                            u.span.start,
                            format!("`%{}#{k}`: `%{}` has {count} results", u.name, u.name),
                        ));
                    }
                }
            }
            for sym in &s.symbols {
                if s.op == "func.call" && !names.contains(sym.as_str()) {
                    return Err(err(
                        s.span.start,
                        format!("calls `@{sym}`, which is not defined"),
                    ));
                }
            }
            for (r, c) in &s.results {
                defined.insert(r, *c);
            }
            if s.is_return() {
                returned = Some(s);
            }
        }
        let r = returned.ok_or_else(|| {
            err(
                f.closing.start,
                format!("function `@{}` does not return", f.name),
            )
        })?;
        if r.uses.len() != f.results.len() && !r.uses.is_empty() {
            // A value returned twice is one use: count the operands as written.
            let written = module.text[r.span.clone()]
                .split(':')
                .next()
                .unwrap_or("")
                .matches('%')
                .count();
            if written != f.results.len() {
                return Err(err(
                    r.span.start,
                    format!(
                        "function `@{}` returns {written} values and declares {}",
                        f.name,
                        f.results.len()
                    ),
                ));
            }
        }
    }
    let main = module.main().ok_or_else(|| {
        err(
            module.header.start,
            "no `main` function (and not one function alone)".into(),
        )
    })?;
    Ok((
        main.body.len().saturating_sub(1),
        main.args.len(),
        main.results.len(),
    ))
}

/// The main function of a StableHLO module as a graphbug graph, and the printing of graphs
/// cut from it as modules (see the module docs).
#[derive(Clone, Debug)]
pub struct StableHloGraph {
    /// The graph: arguments as inputs, each statement with results a node (`stablehlo.add`
    /// is a call of `stablehlo.add`), one of several results a getitem (`1#2`), the
    /// returned values the outputs.
    pub graph: Graph,
    module: Module,
    main: usize,
    /// The statement (index in the main function's body) of each call node, by name.
    stmt: HashMap<String, usize>,
    /// The type of every value, by node name.
    types: HashMap<String, Type>,
}

/// `stablehlo.add` as an op: namespace `stablehlo`, name `add`.
pub fn op_of(name: &str) -> OpName {
    let (ns, n) = name.split_once('.').unwrap_or(("builtin", name));
    OpName::new(ns, n, "default")
}

/// A node's name for result `k` of `%name:count`.
fn result_name(name: &str, count: usize, k: usize) -> String {
    if count == 1 {
        name.to_string()
    } else {
        format!("{name}#{k}")
    }
}

impl StableHloGraph {
    /// The main function of `module` as a graph.
    pub fn new(module: &Module) -> Result<StableHloGraph, MlirError> {
        let main_func = module.main().ok_or_else(|| MlirError {
            line: 1,
            column: 1,
            message: "no `main` function (and not one function alone)".into(),
        })?;
        let main = module
            .funcs
            .iter()
            .position(|f| f.name == main_func.name)
            .expect("found above");
        let err = |at: usize, message: String| MlirError::at(&module.text, at, message);
        let mut graph = Graph::new_in(&main_func.name, Dialect::StableHlo);
        let mut id: HashMap<String, NodeId> = HashMap::new();
        let mut types = HashMap::new();
        let mut stmt = HashMap::new();
        let push = |graph: &mut Graph,
                    id: &mut HashMap<String, NodeId>,
                    name: String,
                    kind: NodeKind,
                    meta: Meta| {
            id.insert(name.clone(), NodeId(graph.nodes.len() as u32));
            graph.nodes.push(Node {
                name: name.as_str().into(),
                kind,
                meta,
            });
        };
        for (n, t) in &main_func.args {
            let meta = t
                .meta()
                .map_err(|m| err(main_func.header.start, format!("argument `%{n}`: {m}")))?;
            types.insert(n.clone(), t.clone());
            push(
                &mut graph,
                &mut id,
                n.clone(),
                NodeKind::Placeholder,
                Meta::Tensor(meta),
            );
        }
        let mut output = None;
        for (k, s) in main_func.body.iter().enumerate() {
            // Each value once, in order of first use (a return keeps repeats: it returns
            // a value as often as written).
            let mut seen = HashSet::new();
            let args: Vec<Value> = s
                .uses
                .iter()
                .filter(|u| s.is_return() || seen.insert((u.name.as_str(), u.index)))
                .map(|u| {
                    let name = match u.index {
                        Some(i) => format!("{}#{i}", u.name),
                        None => u.name.clone(),
                    };
                    id.get(&name).map(|&n| Value::Node(n)).ok_or_else(|| {
                        err(
                            u.span.start,
                            format!("`%{name}` is used before it is defined"),
                        )
                    })
                })
                .collect::<Result<_, _>>()?;
            if s.is_return() {
                output = Some(args);
                continue;
            }
            let count: usize = s.results.iter().map(|(_, c)| c).sum();
            let metas: Vec<TensorMeta> = s
                .types
                .iter()
                .map(|t| {
                    t.meta()
                        .map_err(|m| err(s.span.start, format!("`{}`: {m}", s.op)))
                })
                .collect::<Result<_, _>>()?;
            let call = NodeKind::Call {
                op: op_of(&s.op),
                args,
                kwargs: Vec::new(),
            };
            match s.results.as_slice() {
                [(name, 1)] => {
                    types.insert(name.clone(), s.types[0].clone());
                    stmt.insert(name.clone(), k);
                    push(
                        &mut graph,
                        &mut id,
                        name.clone(),
                        call,
                        Meta::Tensor(metas[0].clone()),
                    );
                }
                _ => {
                    // Several results: the op as one node, each result a getitem of it.
                    let op_name = match s.results.as_slice() {
                        [(name, c)] => format!("{name}:{c}"),
                        [] => format!("stmt{}", s.line),
                        many => format!("{}:{}", many[0].0, many.len()),
                    };
                    stmt.insert(op_name.clone(), k);
                    push(
                        &mut graph,
                        &mut id,
                        op_name.clone(),
                        call,
                        Meta::Multi(metas.iter().cloned().map(Some).collect()),
                    );
                    let source = id[&op_name];
                    let mut index = 0;
                    for (name, c) in &s.results {
                        for j in 0..*c {
                            let n = result_name(name, *c, j);
                            types.insert(n.clone(), s.types[index].clone());
                            push(
                                &mut graph,
                                &mut id,
                                n,
                                NodeKind::GetItem { source, index },
                                Meta::Tensor(metas[index].clone()),
                            );
                            index += 1;
                        }
                    }
                    debug_assert_eq!(index, count);
                }
            }
        }
        graph.output = Some(output.ok_or_else(|| {
            err(
                main_func.closing.start,
                "the main function does not return".into(),
            )
        })?);
        graph.verify().map_err(|e| {
            err(
                main_func.header.start,
                format!("the main function as a graph: {e}"),
            )
        })?;
        Ok(StableHloGraph {
            graph,
            module: module.clone(),
            main,
            stmt,
            types,
        })
    }

    /// The module the graph was read from.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The type of a value of the graph (or of a graph cut from it), by node name.
    pub fn type_of(&self, name: &str) -> Option<&Type> {
        self.types.get(name)
    }

    /// `cut` (a graph cut from [`StableHloGraph::graph`], its nodes named as the original's)
    /// printed as a module: the main function with an argument per input, each kept
    /// statement as written (a use of one result of several that became an argument
    /// renamed), a `return` of the outputs, and the functions kept statements call.
    pub fn print(&self, cut: &Graph) -> Result<String, String> {
        self.print_with(cut, &Constants::new())
    }

    /// [`StableHloGraph::print`], the inputs named in `constants` printed as
    /// `stablehlo.constant` statements holding their values rather than as arguments.
    pub fn print_with(&self, cut: &Graph, constants: &Constants) -> Result<String, String> {
        let m = &self.module;
        let f = &m.funcs[self.main];
        // A result of several (`6#4`) as an argument: a name MLIR reads (`%6_4` is none:
        // a name that starts with a digit is all digits), none of the original's.
        let arg_name = |name: &str| {
            let mut a = name.replace(['#', ':'], "_");
            if a.starts_with(|c: char| c.is_ascii_digit()) && !a.chars().all(|c| c.is_ascii_digit())
            {
                a.insert(0, 'v');
                while self.types.contains_key(&a) {
                    a.push('_');
                }
            }
            a
        };
        let ty = |name: &str| -> Result<&Type, String> {
            self.types
                .get(name)
                .ok_or_else(|| format!("value `%{name}` is not one of the original's"))
        };
        let indent = f
            .body
            .first()
            .map(|s| {
                let t = &m.text[s.span.clone()];
                t[..t.len() - t.trim_start().len()].to_string()
            })
            .unwrap_or_else(|| "    ".into());
        let mut args = Vec::new();
        let mut renamed: HashMap<String, String> = HashMap::new();
        let mut body = String::new();
        for n in cut.nodes.iter().filter(|n| n.is_placeholder()) {
            let a = arg_name(&n.name);
            if a != n.name.as_str() {
                renamed.insert(n.name.to_string(), a.clone());
            }
            let t = ty(&n.name)?;
            match constants.get(n.name.as_str()) {
                Some(value) => {
                    let dense = dense_text(t, value)
                        .map_err(|e| format!("`%{}` as a constant: {e}", n.name))?;
                    body.push_str(&format!(
                        "{indent}%{a} = stablehlo.constant {dense} : {t}\n"
                    ));
                }
                None => args.push(format!("%{a}: {t}")),
            }
        }
        let mut symbols = BTreeSet::new();
        for n in cut
            .nodes
            .iter()
            .filter(|n| matches!(n.kind, NodeKind::Call { .. }))
        {
            let k = *self
                .stmt
                .get(n.name.as_str())
                .ok_or_else(|| format!("node `{}` is no statement of the original", n.name))?;
            let s = &f.body[k];
            symbols.extend(s.symbols.iter().cloned());
            // The statement as written, its uses of arguments that were results renamed.
            let mut text = String::new();
            let mut at = s.span.start;
            for u in &s.uses {
                let name = match u.index {
                    Some(i) => format!("{}#{i}", u.name),
                    None => u.name.clone(),
                };
                if let Some(new) = renamed.get(&name) {
                    text.push_str(&m.text[at..u.span.start]);
                    text.push('%');
                    text.push_str(new);
                    at = u.span.end;
                }
            }
            text.push_str(&m.text[at..s.span.end]);
            body.push_str(&text);
        }
        let mut outs = Vec::new();
        let mut out_types = Vec::new();
        for v in cut.outputs() {
            let Value::Node(id) = v else {
                return Err(format!("an output that is no value ({v:?})"));
            };
            let n = &cut.node(*id).name;
            outs.push(format!(
                "%{}",
                renamed.get(n.as_str()).map_or(n.as_str(), String::as_str)
            ));
            out_types.push(ty(n)?.to_string());
        }
        body.push_str(&format!(
            "{indent}return {} : {}\n",
            outs.join(", "),
            out_types.join(", ")
        ));
        // The functions kept statements call, and those they call in turn.
        let needed = self.needed_by(&symbols);
        let results = match out_types.len() {
            1 => out_types[0].clone(),
            _ => format!("({})", out_types.join(", ")),
        };
        let main = format!(
            "{}func.func public @{}({}) -> {results} {{\n{body}{}",
            self.header_indent(),
            f.name,
            args.join(", "),
            m.at(&f.closing)
        );
        Ok(self.assemble((self.main, &main), &needed))
    }

    /// The indentation of main's header line.
    fn header_indent(&self) -> String {
        let t = self.module.at(&self.module.funcs[self.main].header);
        t[..t.len() - t.trim_start().len()].to_string()
    }

    /// The module's text with function `k` written as `text` and, of the others, those in
    /// `needed` as written (what lies between functions, other top-level ops, stays).
    fn assemble(&self, (k, text): (usize, &str), needed: &BTreeSet<String>) -> String {
        let m = &self.module;
        let mut out = String::new();
        out.push_str(&m.text[..m.header.end]);
        let mut at = m.header.end;
        for (j, g) in m.funcs.iter().enumerate() {
            out.push_str(&m.text[at..g.span.start]);
            at = g.span.end;
            if j == k {
                out.push_str(text);
            } else if needed.contains(&g.name) {
                out.push_str(m.at(&g.span));
            }
        }
        out.push_str(&m.text[at..]);
        used_locations(&out)
    }
}

/// `text` without the location aliases (`#loc12 = loc("add.3")`) nothing left in it refers
/// to, directly or through another alias: a cut keeps the locations of what it keeps.
fn used_locations(text: &str) -> String {
    let alias = |l: &str| -> Option<String> {
        let name = l.split_once(" = ")?.0.trim();
        (name.starts_with("#loc") && name.len() > 4).then(|| name.to_string())
    };
    let refs = |l: &str| -> Vec<String> {
        let mut found = Vec::new();
        let mut rest = l;
        while let Some(at) = rest.find("#loc") {
            let tail = &rest[at + 4..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            found.push(format!("#loc{}", &tail[..end]));
            rest = &tail[end..];
        }
        found
    };
    let mut defs: HashMap<String, &str> = HashMap::new();
    let mut used: BTreeSet<String> = BTreeSet::new();
    for l in text.lines() {
        match alias(l) {
            Some(name) => {
                defs.insert(name, l);
            }
            None => used.extend(refs(l)),
        }
    }
    if defs.is_empty() {
        return text.to_string();
    }
    let mut todo: Vec<String> = used.iter().cloned().collect();
    while let Some(name) = todo.pop() {
        if let Some(def) = defs.get(&name) {
            let value = def.split_once(" = ").map_or("", |(_, v)| v);
            for r in refs(value) {
                if used.insert(r.clone()) {
                    todo.push(r);
                }
            }
        }
    }
    let mut out = String::with_capacity(text.len());
    for l in text.split_inclusive('\n') {
        if alias(l).is_some_and(|name| !used.contains(&name)) {
            continue;
        }
        out.push_str(l);
    }
    out
}

/// A region of a statement of main taken apart, as a program of its own needs it.
struct Region<'a> {
    /// The statement.
    stmt: &'a Stmt,
    /// Its arguments: name (without `%`), type, and the value of main that gives it where
    /// the statement says (a `stablehlo.while`'s loop-carried values start with its
    /// operands; a reducer's or comparator's block arguments come from nowhere in main).
    args: Vec<(String, String, Option<&'a Use>)>,
    /// The text of its statements, terminator included (between its braces, without its
    /// block header).
    body: Range<usize>,
    /// The types it yields.
    results: Vec<String>,
}

/// The suffixes of a `stablehlo.while`'s regions taken out as programs (`6:9.cond`).
const WHILE_REGIONS: [&str; 2] = [".cond", ".body"];

/// The suffix of the k-th region of any other op in MLIR's generic form (`5.region0`: a
/// reducer, a sort comparator, a scatter's update computation, a case branch).
const REGION: &str = ".region";

impl StableHloGraph {
    /// The computations the statement `name` of main calls, in order: a `stablehlo.while`'s
    /// regions (`NAME.cond`, `NAME.body`) or another op's regions in MLIR's generic form
    /// (`NAME.region0`...), then the functions it calls (`func.call @f`, in its regions too).
    pub fn called_by(&self, name: &str) -> Vec<String> {
        let base = name.split('#').next().unwrap_or(name);
        let Some(&k) = self.stmt.get(base) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if self.while_parts(base).is_some() {
            out.extend(WHILE_REGIONS.iter().map(|r| format!("{base}{r}")));
        } else if let Some(regions) = self.generic_regions(base) {
            out.extend((0..regions.len()).map(|r| format!("{base}{REGION}{r}")));
        }
        out.extend(self.module.funcs[self.main].body[k].symbols.iter().cloned());
        out
    }

    /// The lines of statement `s` with where each starts in the module's text, trimmed.
    fn lines_of(&self, s: &Stmt) -> Vec<(usize, &str)> {
        let m = &self.module;
        let mut lines = Vec::new();
        let mut at = s.span.start;
        for line in m.text[s.span.clone()].split_inclusive('\n') {
            lines.push((at, line.trim()));
            at += line.len();
        }
        lines
    }

    /// The statement `name` of main, when it is a `stablehlo.while` in the form MLIR prints
    /// (`stablehlo.while(%iterArg = %v, ...) : types cond { ... } do { ... }`): its `cond`
    /// and `do` regions.
    fn while_parts(&self, name: &str) -> Option<[Region<'_>; 2]> {
        let m = &self.module;
        let s = &m.funcs[self.main].body[*self.stmt.get(name)?];
        if s.op != "stablehlo.while" {
            return None;
        }
        let text = &m.text[s.span.clone()];
        let open = s.span.start + text.find("stablehlo.while(")? + "stablehlo.while(".len();
        let mut depth = 1;
        let close = open
            + m.text[open..s.span.end].find(|c: char| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })?;
        let mut args = Vec::new();
        for (entry, ty) in m.text[open..close].split(", ").zip(&s.types) {
            let (arg, _) = entry.split_once(" = ")?;
            let start = open + m.text[open..close].find(entry)?;
            let init = s
                .uses
                .iter()
                .find(|u| u.span.start > start && u.span.end <= start + entry.len())?;
            args.push((
                arg.trim().trim_start_matches('%').to_string(),
                ty.to_string(),
                Some(init),
            ));
        }
        // The regions: from `cond {` to `} do {`, and from there to the last `}`.
        let lines = self.lines_of(s);
        let cond = lines.iter().position(|(_, l)| *l == "cond {")?;
        let body = lines.iter().position(|(_, l)| *l == "} do {")?;
        let last = lines.iter().rposition(|(_, l)| *l == "}")?;
        let types: Vec<String> = s.types.iter().map(ToString::to_string).collect();
        (cond < body && body < last && args.len() == s.types.len()).then(|| {
            [
                Region {
                    stmt: s,
                    args: args.clone(),
                    body: lines[cond + 1].0..lines[body].0,
                    results: vec!["tensor<i1>".into()],
                },
                Region {
                    stmt: s,
                    args,
                    body: lines[body + 1].0..lines[last].0,
                    results: types,
                },
            ]
        })
    }

    /// The regions of the statement `name` of main in MLIR's generic form
    /// (`"stablehlo.sort"(...) ({ ^bb0(%a: t, ...): ... stablehlo.return %x : t }, { ... })
    /// : ...`): a reducer's, a comparator's, a scatter's update computation, a case's
    /// branches. Each region's block arguments come from nowhere in main; what it yields is
    /// what its terminator returns.
    fn generic_regions(&self, name: &str) -> Option<Vec<Region<'_>>> {
        let s = &self.module.funcs[self.main].body[*self.stmt.get(name)?];
        let lines = self.lines_of(s);
        let first = lines.first()?;
        if !first.1.ends_with("({") {
            return self.reducer_region(s, &lines).map(|r| vec![r]);
        }
        let mut regions = Vec::new();
        let mut from = 1;
        for (k, (_, line)) in lines.iter().enumerate().skip(1) {
            let closes = *line == "}, {" || line.starts_with("})");
            if !closes {
                continue;
            }
            let mut body_from = from;
            let mut args = Vec::new();
            if let Some(header) = lines
                .get(from)
                .map(|l| l.1)
                .filter(|l| l.starts_with("^bb"))
            {
                let inner = header.split_once('(')?.1.rsplit_once(')')?.0;
                for arg in split_top_commas(inner)
                    .into_iter()
                    .filter(|a| !a.trim().is_empty())
                {
                    let (n, ty) = arg.split_once(':')?;
                    args.push((
                        n.trim().trim_start_matches('%').to_string(),
                        ty.trim().to_string(),
                        None,
                    ));
                }
                body_from += 1;
            }
            let results = yielded(&lines[body_from..k])?;
            regions.push(Region {
                stmt: s,
                args,
                body: lines.get(body_from)?.0..lines[k].0,
                results,
            });
            if line.starts_with("})") {
                return Some(regions);
            }
            from = k + 1;
        }
        None
    }

    /// The region of a `stablehlo.reduce` in the form MLIR prints when its body is more
    /// than one op: `reducer(%a: t, %c: t) (%b: u, %d: u) { ... stablehlo.return ... }`.
    fn reducer_region<'a>(&self, s: &'a Stmt, lines: &[(usize, &str)]) -> Option<Region<'a>> {
        let open = lines
            .iter()
            .position(|(_, l)| l.starts_with("reducer(") && l.ends_with('{'))?;
        let last = lines.iter().rposition(|(_, l)| *l == "}")?;
        let header = lines[open].1;
        let mut args = Vec::new();
        let mut rest = &header["reducer".len()..header.len() - 1];
        while let Some(from) = rest.find('(') {
            let to = from + rest[from..].find(')')?;
            for arg in split_top_commas(&rest[from + 1..to]) {
                let (n, ty) = arg.split_once(':')?;
                let name = n.trim().trim_start_matches('%').to_string();
                args.push((name, ty.trim().to_string(), None));
            }
            rest = &rest[to + 1..];
        }
        let results = yielded(&lines[open + 1..last])?;
        (open < last).then(|| Region {
            stmt: s,
            args,
            body: lines[open + 1].0..lines[last].0,
            results,
        })
    }

    /// The region `name` of a statement of main (`NAME.cond`, `NAME.body`, `NAME.regionK`).
    fn region(&self, name: &str) -> Option<Region<'_>> {
        if let Some((stmt, which)) = WHILE_REGIONS
            .iter()
            .enumerate()
            .find_map(|(k, r)| name.strip_suffix(r).map(|s| (s, k)))
        {
            let [cond, body] = self.while_parts(stmt)?;
            return Some(if which == 0 { cond } else { body });
        }
        let (stmt, k) = name.rsplit_once(REGION)?;
        let k: usize = k.parse().ok()?;
        self.generic_regions(stmt)?.into_iter().nth(k)
    }

    /// A region of a statement of main (see [`StableHloGraph::called_by`]) as a module
    /// whose main function takes the region's arguments, then the values of main the region
    /// reads, and returns what the region yields; with the node names of those values in
    /// main, in argument order (an empty name where main has none: a block argument).
    fn outline_region(&self, name: &str) -> Option<Result<Outlined, String>> {
        let part = self.region(name)?;
        let m = &self.module;
        let region = part.body.clone();
        let node = |u: &Use| match u.index {
            Some(i) => format!("{}#{i}", u.name),
            None => u.name.clone(),
        };
        let mut args: Vec<String> = Vec::new();
        let mut sources: Vec<String> = Vec::new();
        // A block argument is renamed `%block_arg<k>`: the inputs file's positional keys
        // (`arg0`...) must not meet a parameter named `arg1` in another position.
        let mut renames: Vec<(String, String)> = Vec::new();
        for (k, (arg, ty, init)) in part.args.iter().enumerate() {
            let arg = match init {
                Some(_) => arg.clone(),
                None => {
                    let fresh = format!("block_arg{k}");
                    renames.push((arg.clone(), fresh.clone()));
                    fresh
                }
            };
            args.push(format!("%{arg}: {ty}"));
            sources.push(init.map(node).unwrap_or_default());
        }
        // Values of main the region reads become arguments too, renamed where their names
        // are no argument names (`%6#4`).
        let mut text = String::new();
        let mut at = region.start;
        let mut captured: Vec<String> = Vec::new();
        for u in part
            .stmt
            .uses
            .iter()
            .filter(|u| region.contains(&u.span.start))
        {
            let value = node(u);
            let Some(ty) = self.types.get(&value) else {
                return Some(Err(format!(
                    "`%{value}`, read in `{name}`, has no known type"
                )));
            };
            let arg = format!("captured_{}", value.replace(['#', ':'], "_"));
            if !captured.contains(&value) {
                args.push(format!("%{arg}: {ty}"));
                sources.push(value.clone());
                captured.push(value);
            }
            text.push_str(&m.text[at..u.span.start]);
            text.push('%');
            text.push_str(&arg);
            at = u.span.end;
        }
        text.push_str(&m.text[at..region.end]);
        for (from, to) in &renames {
            text = rename_value(&text, from, to);
        }
        // Its terminator returns from main.
        let Some(ret) = text.rfind("stablehlo.return ") else {
            return Some(Err(format!("`{name}` yields nothing")));
        };
        text.replace_range(ret..ret + "stablehlo.return ".len(), "return ");
        let indent = self.header_indent();
        let main = format!(
            "{indent}func.func public @main({}) -> ({}) {{\n{text}{indent}}}\n",
            args.join(", "),
            part.results.join(", ")
        );
        let needed = self.needed_by(&part.stmt.symbols.iter().cloned().collect());
        Some(Ok(Outlined {
            text: self.assemble((self.main, &main), &needed),
            parameters: (0..sources.len()).map(|k| (k, Vec::new())).collect(),
            sources,
        }))
    }

    /// The functions `symbols` name, and those they call in turn.
    fn needed_by(&self, symbols: &BTreeSet<String>) -> BTreeSet<String> {
        crate::program::with_callees(symbols.clone(), |name| {
            self.module
                .funcs
                .iter()
                .filter(|g| g.name == name)
                .flat_map(|g| g.body.iter().flat_map(|s| s.symbols.iter().cloned()))
                .collect::<Vec<_>>()
        })
    }

    /// The module whose main function is the function `name` (with the functions it
    /// calls), or the region `name` of a `stablehlo.while` (see
    /// [`StableHloGraph::called_by`]): the called computation alone, as a program.
    pub fn outline(&self, name: &str) -> Result<Outlined, String> {
        if let Some(region) = self.outline_region(name) {
            return region;
        }
        let m = &self.module;
        let k = m
            .funcs
            .iter()
            .position(|f| f.name == name)
            .ok_or_else(|| format!("the module has no function `@{name}`"))?;
        if k == self.main {
            return Err(format!("`@{name}` is the main function already"));
        }
        let f = &m.funcs[k];
        let needed = self.needed_by(
            &f.body
                .iter()
                .flat_map(|s| s.symbols.iter().cloned())
                .collect(),
        );
        if needed.contains(name) || needed.contains("main") {
            return Err(format!("`@{name}` calls itself or main"));
        }
        // Its header as `func.func public @main(...)`.
        let header = m
            .at(&f.header)
            .replacen(&format!("@{name}("), "@main(", 1)
            .replacen("func.func private ", "func.func public ", 1);
        let text = format!("{header}{}", &m.text[f.header.end..f.span.end]);
        Ok(Outlined {
            text: self.assemble((k, &text), &needed),
            parameters: (0..f.args.len()).map(|k| (k, Vec::new())).collect(),
            sources: Vec::new(),
        })
    }

    /// The node names of the values the statement `caller` of main passes to the function
    /// it calls, in argument order (a `func.call`'s operands).
    pub fn call_operands(&self, caller: &str) -> Vec<String> {
        let base = caller.split('#').next().unwrap_or(caller);
        let Some(&k) = self.stmt.get(base) else {
            return Vec::new();
        };
        let s = &self.module.funcs[self.main].body[k];
        if s.op != "func.call" && s.op != "call" {
            return Vec::new();
        }
        s.uses
            .iter()
            .map(|u| match u.index {
                Some(i) => format!("{}#{i}", u.name),
                None => u.name.clone(),
            })
            .collect()
    }
}

/// The `dense<...>` attribute holding `value` as a constant of type `t`: booleans as
/// `true`/`false`, every other element type as the exact bytes (`dense<"0x...">`).
fn dense_text(t: &Type, value: &graphbug_files::HostTensor) -> Result<String, String> {
    let Type::Tensor { element, dims, .. } = t else {
        return Err(format!("`{t}` is no tensor"));
    };
    if dtype_of(element) != Some(value.dtype) {
        return Err(format!(
            "its value is {}, its type {t}",
            value.dtype.short_name()
        ));
    }
    let n: i64 = dims.iter().map(|d| d.unwrap_or(-1)).product();
    if n < 0 || value.numel() as i64 != n {
        return Err(format!(
            "its value has {} elements, {t} another count",
            value.numel()
        ));
    }
    if value.dtype == Dtype::Bool {
        let items: Vec<&str> = value
            .data
            .iter()
            .map(|b| if *b != 0 { "true" } else { "false" })
            .collect();
        // Nested as the shape says (a flat list is only read for rank 1).
        fn nest(items: &[&str], dims: &[i64]) -> String {
            match dims {
                [] => items.first().copied().unwrap_or("false").to_string(),
                [_] => format!("[{}]", items.join(", ")),
                [d, rest @ ..] => {
                    let step = items.len() / (*d).max(1) as usize;
                    let parts: Vec<String> = (0..*d as usize)
                        .map(|k| nest(&items[k * step..(k + 1) * step], rest))
                        .collect();
                    format!("[{}]", parts.join(", "))
                }
            }
        }
        let dims: Vec<i64> = dims.iter().map(|d| d.unwrap_or(0)).collect();
        return Ok(format!("dense<{}>", nest(&items, &dims)));
    }
    let hex: String = value.data.iter().map(|b| format!("{b:02X}")).collect();
    Ok(format!("dense<\"0x{hex}\">"))
}

/// The Python graphbug asks to read MLIR bytecode: `GRAPHBUG_PYTHON`, else the workspace's
/// `.venv` (where set-up installs JAX, as it installs the plugins), else `python3`.
pub const PYTHON_ENV: &str = "GRAPHBUG_PYTHON";

/// The Python with JAX graphbug runs (see [`PYTHON_ENV`]).
pub fn jax_python() -> String {
    std::env::var(PYTHON_ENV).unwrap_or_else(|_| {
        let venv = graphbug_run::workspace_root().join(".venv/bin/python");
        if venv.is_file() {
            venv.display().to_string()
        } else {
            "python3".into()
        }
    })
}

/// Whether MLIR text needs MLIR to be read: its first operation is not a pretty `module`
/// (the generic `"builtin.module"() ...`, or a bare `func.func` MLIR wraps in one).
pub fn needs_mlir(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with("#loc"))
        .is_some_and(|l| !l.starts_with("module"))
}

/// MLIR as pretty text, through JAX's MLIR (`jaxlib`): bytecode (a StableHLO portable
/// artifact, or plain MLIR bytecode), which only MLIR can read, and text graphbug does not
/// read itself (see [`needs_mlir`]). The Python is [`jax_python`]; it runs
/// in a child process, with the bytes on its input, for at most a minute.
pub fn mlir_to_text(bytes: &[u8]) -> Result<String, String> {
    const SCRIPT: &str = r#"
import sys
data = sys.stdin.buffer.read()
from jax._src.lib import _jax
from jax._src.lib.mlir import ir
from jax._src.interpreters import mlir
with mlir.make_ir_context():
    try:
        # A portable artifact (VHLO) as StableHLO, as Exported.mlir_module() reads it.
        module = _jax.mlir.deserialize_portable_artifact(data)
    except Exception:
        module = ir.Module.parse(data)
    sys.stdout.write(mlir.module_to_string(module))
"#;
    let out = through_jax(
        SCRIPT,
        &[],
        bytes,
        "StableHLO bytecode and generic MLIR are read",
    )?;
    String::from_utf8(out).map_err(|e| format!("JAX's MLIR printed no text: {e}"))
}

/// Runs the Python `script` (with `args`) in a child process with JAX, `input` on its
/// standard input, for at most a minute; its standard output. The Python is
/// [`jax_python`]; errors say `what` needs it (`<what> through JAX's
/// MLIR`) and end with the script's last line of error.
pub(crate) fn through_jax(
    script: &str,
    args: &[&str],
    input: &[u8],
    what: &str,
) -> Result<Vec<u8>, String> {
    use std::io::Write;
    let python = jax_python();
    let mut cmd = std::process::Command::new(&python);
    cmd.arg("-c")
        .arg(script)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // Through graphbug-run: the child dies with graphbug (even by kill -9).
    let mut child = graphbug_run::process::spawn(cmd, true)
        .map_err(|e| format!("{what} through JAX's MLIR, but `{python}` cannot be started ({e}); set {PYTHON_ENV} to a Python with jax"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let data = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let limit = std::time::Duration::from_secs(60);
    let out = graphbug_run::process::output_bounded(child, limit, true)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "{what} through JAX's MLIR, which took more than {} s",
                limit.as_secs()
            )
        })?;
    let _ = writer.join();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message");
        return Err(format!(
            "{what} through JAX's MLIR (`{python}`, set {PYTHON_ENV} to another), which failed: {last}"
        ));
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MLP: &str = r#"module @jit_mlp attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3x4xf32>, %arg1: tensor<4x5xf32>, %arg2: tensor<5xf32>) -> (tensor<3xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
    %1 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<5xf32>) -> tensor<1x5xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x5xf32>) -> tensor<3x5xf32>
    %3 = stablehlo.add %0, %2 : tensor<3x5xf32>
    %4 = call @relu(%3) : (tensor<3x5xf32>) -> tensor<3x5xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.reduce(%4 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<3x5xf32>, tensor<f32>) -> tensor<3xf32>
    return %5 : tensor<3xf32>
  }
  func.func private @relu(%arg0: tensor<3x5xf32>) -> tensor<3x5xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x5xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<3x5xf32>
    return %1 : tensor<3x5xf32>
  }
}
"#;

    const SCAN: &str = r#"module @jit_scan attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<5xf32>) -> (tensor<f32> {jax.result_info = "result[0]"}, tensor<5xf32> {jax.result_info = "result[1]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<5xf32>
    %c = stablehlo.constant dense<0> : tensor<i64>
    %1:4 = stablehlo.while(%iterArg = %arg0, %iterArg_1 = %c, %iterArg_2 = %cst, %iterArg_3 = %0) : tensor<5xf32>, tensor<i64>, tensor<f32>, tensor<5xf32>
    cond {
      %c_4 = stablehlo.constant dense<5> : tensor<i64>
      %2 = stablehlo.compare LT, %iterArg_1, %c_4, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %2 : tensor<i1>
    } do {
      %c_4 = stablehlo.constant dense<1> : tensor<i64>
      %5 = stablehlo.add %iterArg_1, %c_4 : tensor<i64>
      %6 = stablehlo.select %5, %iterArg_2, %cst : tensor<i1>, tensor<f32>
      stablehlo.return %iterArg, %5, %iterArg_2, %iterArg_3 : tensor<5xf32>, tensor<i64>, tensor<f32>, tensor<5xf32>
    }
    %7 = stablehlo.select %3, %1#2, %cst : tensor<i1>, tensor<f32>
    return %1#2, %1#3 : tensor<f32>, tensor<5xf32>
  }
}
"#;

    #[test]
    fn statements_read_their_results_uses_and_types() {
        let m = parse_module(MLP).unwrap();
        let main = m.main().unwrap();
        assert_eq!(main.args.len(), 3);
        assert_eq!(main.body.len(), 8);
        let dot = &main.body[0];
        assert_eq!(dot.op, "stablehlo.dot_general");
        assert_eq!(
            dot.uses.iter().map(|u| u.name.as_str()).collect::<Vec<_>>(),
            ["arg0", "arg1"]
        );
        assert_eq!(dot.types[0].to_string(), "tensor<3x5xf32>");
        let reduce = &main.body[6];
        assert_eq!(
            reduce
                .uses
                .iter()
                .map(|u| u.name.as_str())
                .collect::<Vec<_>>(),
            ["4", "cst"]
        );
        assert_eq!(main.body[4].op, "func.call");
        assert_eq!(main.body[4].symbols, ["relu"]);
        assert_eq!(check(&m).unwrap(), (7, 3, 1));
        // The while: four results, a list of types; its regions' values are not uses.
        let s = parse_module(SCAN).unwrap();
        let w = &s.main().unwrap().body[3];
        assert_eq!(w.results, [("1".to_string(), 4)]);
        assert_eq!(w.types.len(), 4);
        let uses: Vec<&str> = w.uses.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(uses, ["arg0", "c", "cst", "0", "cst"]);
        let sel = &s.main().unwrap().body[4];
        assert_eq!(sel.op, "stablehlo.select");
        assert_eq!(sel.types[0].to_string(), "tensor<f32>");
        assert_eq!(sel.uses[1].index, Some(2));
    }

    #[test]
    fn quoted_symbol_names_are_functions_and_calls() {
        // JAX names a lambda's function `@"<lambda>"` (random_gamma's harness).
        let text = MLP.replace("call @relu(", "call @\"<lambda>\"(").replace(
            "func.func private @relu(",
            "func.func private @\"<lambda>\"(",
        );
        let m = parse_module(&text).unwrap();
        assert_eq!(m.main().unwrap().body[4].symbols, ["<lambda>"]);
        assert_eq!(check(&m).unwrap(), (7, 3, 1));
        let missing = text.replace("call @\"<lambda>\"(", "call @\"<other>\"(");
        let e = check(&parse_module(&missing).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("calls `@<other>`, which is not defined"), "{e}");
    }

    #[test]
    fn the_main_function_is_a_graph_and_its_cuts_print_as_modules() {
        let m = parse_module(MLP).unwrap();
        let g = StableHloGraph::new(&m).unwrap();
        assert_eq!(g.graph.placeholder_names(), ["arg0", "arg1", "arg2"]);
        assert_eq!(g.graph.num_call_function_nodes(), 7);
        let whole = g.print(&g.graph).unwrap();
        let again = parse_module(&whole).unwrap();
        assert_eq!(check(&again).unwrap(), (7, 3, 1));
        assert!(whole.contains("func.func private @relu"), "{whole}");
        // A cut: `%3` becomes an argument, `@relu` stays, the reduce is returned.
        let mut cut = Graph::new_in("main", Dialect::StableHlo);
        let node = |n: &str| g.graph.node(g.graph.find(n).unwrap()).clone();
        cut.nodes.push(Node {
            kind: NodeKind::Placeholder,
            ..node("3")
        });
        let mut call = node("4");
        call.kind = NodeKind::Call {
            op: op_of("func.call"),
            args: vec![Value::Node(NodeId(0))],
            kwargs: vec![],
        };
        cut.nodes.push(call);
        let mut cst = node("cst");
        cst.kind = NodeKind::Call {
            op: op_of("stablehlo.constant"),
            args: vec![],
            kwargs: vec![],
        };
        cut.nodes.push(cst);
        let mut red = node("5");
        red.kind = NodeKind::Call {
            op: op_of("stablehlo.reduce"),
            args: vec![Value::Node(NodeId(1)), Value::Node(NodeId(2))],
            kwargs: vec![],
        };
        cut.nodes.push(red);
        cut.output = Some(vec![Value::Node(NodeId(3))]);
        let text = g.print(&cut).unwrap();
        let m2 = parse_module(&text).unwrap();
        assert_eq!(check(&m2).unwrap(), (3, 1, 1), "{text}");
        assert!(
            text.contains("func.func public @main(%3: tensor<3x5xf32>) -> tensor<3xf32> {"),
            "{text}"
        );
    }

    #[test]
    fn several_results_are_getitems() {
        let text = SCAN.replace(
            "%7 = stablehlo.select %3, %1#2, %cst : tensor<i1>, tensor<f32>\n",
            "",
        );
        let m = parse_module(&text).unwrap();
        let g = StableHloGraph::new(&m).unwrap();
        assert!(g.graph.find("1:4").is_some());
        assert!(g.graph.find("1#2").is_some());
        // `%1#2` as an argument is renamed in the statements that use it, to a name MLIR
        // reads (`%1_2` is none: a name that starts with a digit is all digits).
        let mut cut = Graph::new_in("main", Dialect::StableHlo);
        let n = g.graph.node(g.graph.find("1#2").unwrap()).clone();
        cut.nodes.push(Node {
            kind: NodeKind::Placeholder,
            ..n
        });
        cut.output = Some(vec![Value::Node(NodeId(0))]);
        let out = g.print(&cut).unwrap();
        assert!(
            out.contains("@main(%v1_2: tensor<f32>) -> tensor<f32> {"),
            "{out}"
        );
        assert!(out.contains("return %v1_2 : tensor<f32>"), "{out}");
    }

    #[test]
    fn errors_say_where() {
        let bad = MLP.replace("%3 = stablehlo.add %0, %2", "%3 = stablehlo.add %0, %9");
        let e = check(&parse_module(&bad).unwrap()).unwrap_err().to_string();
        assert!(
            e.starts_with("6:28: `%9` is used before it is defined"),
            "{e}"
        );
        assert!(parse_module("HloModule m")
            .unwrap_err()
            .to_string()
            .contains("expected `module`"));
        let e = parse_module(&MLP.replace(" : tensor<3x5xf32>\n    %4", "\n    %4"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("stablehlo.add"), "{e}");
        assert!(looks_like_mlir(MLP));
        assert!(!looks_like_mlir("HloModule m"));
        assert!(is_bytecode(b"ML\xefR\x00"));
    }

    #[test]
    fn a_cut_keeps_the_locations_of_what_it_keeps() {
        let text = "module @m {\n  %0 = stablehlo.add %a, %a : tensor<f32> loc(#loc3)\n} loc(#loc)\n#loc = loc(unknown)\n#loc1 = loc(\"f.py\":1:0)\n#loc2 = loc(\"gone.1\")\n#loc3 = loc(callsite(#loc1 at #loc1))\n";
        let kept = used_locations(text);
        assert!(!kept.contains("#loc2 ="), "{kept}");
        for alias in ["#loc = ", "#loc1 = ", "#loc3 = "] {
            assert!(kept.contains(alias), "{alias} in {kept}");
        }
        assert_eq!(used_locations("module @m {\n}\n"), "module @m {\n}\n");
    }
}

//! HLO text as XLA prints it, read into a [`Module`] that prints back byte for byte.
//!
//! Both of XLA's styles are read: the current one (`add.7 = f32[3,5]{1,0} add(dot.1,
//! add.6)`, JAX's `as_text(dialect="hlo")`) and the one with `%` sigils, operand shapes
//! and computation signatures (`%add.13 = f32[3,8]{1,0} add(f32[3,8]{1,0} %dot.8, ...)`,
//! torch_xla's and `--xla_dump_to`'s). Every line keeps its text, so printing an unchanged
//! module gives the input back exactly; what graphbug needs to know (names, shapes,
//! opcodes, operands, the computations an attribute calls) is read out of it.

use std::fmt;

use super::shape::{balanced, parse_shape, skip_spaces, snippet, Shape};

/// An error in HLO text: where, and what.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct HloError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong.
    pub message: String,
    /// The instruction the error is in, if any.
    pub instruction: Option<String>,
}

impl fmt::Display for HloError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Line 0: not in a text (a proto's error).
        if self.line > 0 {
            write!(f, "{}:{}: ", self.line, self.column)?;
        }
        if let Some(i) = &self.instruction {
            write!(f, "instruction `{i}`: ")?;
        }
        f.write_str(&self.message)
    }
}

/// An HLO module: its header, its computations, and the text around them.
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    /// Lines before the header (comments, blank lines), verbatim.
    pub leading: String,
    /// The module's name (`HloModule <name>`).
    pub name: String,
    /// The header line, verbatim (with its newline).
    pub header_line: String,
    /// The header's attributes (`entry_computation_layout`, `is_scheduled`, ...).
    pub attrs: Vec<Attr>,
    /// The computations, in text order.
    pub computations: Vec<Computation>,
    /// Text after the last computation, verbatim.
    pub trailing: String,
}

/// One computation: `[ENTRY ]name[ (params) -> shape] {`, its instructions, `}`. XLA's
/// stack-frame tables, when a module has them, are the first computation's leading text.
#[derive(Clone, Debug, PartialEq)]
pub struct Computation {
    /// Blank lines (and comments) before its header, verbatim.
    pub leading: String,
    /// The header line, verbatim (with its newline).
    pub header_line: String,
    /// 1-based line of the header.
    pub line: usize,
    /// Whether it is the module's entry.
    pub is_entry: bool,
    /// Its name (without `%`).
    pub name: String,
    /// The parameters its signature declares, if it has one: (name, shape).
    pub signature: Option<(Vec<(String, Shape)>, Shape)>,
    /// Attributes written between the header and `{`, if any (XLA writes none there; graphbug
    /// refuses them when making a proto).
    pub attrs: Vec<Attr>,
    /// Its instructions, in text order.
    pub instructions: Vec<Instruction>,
    /// The closing line, verbatim.
    pub closing_line: String,
}

/// One instruction line.
#[derive(Clone, Debug, PartialEq)]
pub struct Instruction {
    /// The line, verbatim (with its newline).
    pub text: String,
    /// 1-based line.
    pub line: usize,
    /// Whether it is its computation's `ROOT`.
    pub is_root: bool,
    /// Whether its name is written with `%`.
    pub percent: bool,
    /// Its name (without `%`).
    pub name: String,
    /// Its result shape.
    pub shape: Shape,
    /// Its opcode (`add`, `get-tuple-element`, `custom-call`...).
    pub opcode: String,
    /// Its operands: other instructions by name, or the literal of a `constant` and the
    /// number of a `parameter`.
    pub operands: Operands,
    /// Its attributes after the operands, in order.
    pub attrs: Vec<Attr>,
    /// Byte offsets within `text` of the operands' parenthesized list (start of `(`, end
    /// after `)`), for rewriting it.
    pub operands_span: (usize, usize),
}

/// What an instruction takes.
#[derive(Clone, Debug, PartialEq)]
pub enum Operands {
    /// Other instructions' values.
    Values(Vec<Operand>),
    /// `constant(...)`: the literal, verbatim.
    Literal(String),
    /// `parameter(k)`: the parameter number.
    Parameter(u64),
}

/// One operand: an instruction's name, and the shape written before it (older style).
#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    /// The name (without `%`).
    pub name: String,
    /// The shape written before the name, if any.
    pub shape: Option<Shape>,
    /// 1-based column of the name in its line.
    pub column: usize,
}

/// An attribute `key=value`, the value verbatim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    /// The key.
    pub key: String,
    /// The value as written.
    pub value: String,
}

/// Attributes whose value names computations (one, or a `{...}` list).
pub const CALLING_ATTRS: [&str; 11] = [
    "to_apply",
    "calls",
    "body",
    "condition",
    "branch_computations",
    "true_computation",
    "false_computation",
    "select",
    "scatter",
    "called_computations",
    "async_execution_thread",
];

impl Instruction {
    /// The names of the instructions it reads, in operand order.
    pub fn operand_names(&self) -> Vec<&str> {
        match &self.operands {
            Operands::Values(v) => v.iter().map(|o| o.name.as_str()).collect(),
            _ => Vec::new(),
        }
    }

    /// The value of attribute `key`, if it has it.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|a| a.key == key)
            .map(|a| a.value.as_str())
    }

    /// The computations its attributes call, by name, in attribute order.
    pub fn called(&self) -> Vec<String> {
        let mut out = Vec::new();
        for a in &self.attrs {
            if !CALLING_ATTRS[..CALLING_ATTRS.len() - 1].contains(&a.key.as_str()) {
                continue;
            }
            let v = a.value.trim();
            let list = v.strip_prefix('{').and_then(|r| r.strip_suffix('}'));
            for name in list.unwrap_or(v).split(',') {
                let name = name.trim().trim_start_matches('%');
                if !name.is_empty() {
                    out.push(name.to_string());
                }
            }
        }
        out
    }
}

impl Module {
    /// The entry computation's index.
    pub fn entry(&self) -> Option<usize> {
        self.computations.iter().position(|c| c.is_entry)
    }

    /// The computation of the given name.
    pub fn computation(&self, name: &str) -> Option<&Computation> {
        self.computations.iter().find(|c| c.name == name)
    }

    /// The value of header attribute `key`, if the header has it.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|a| a.key == key)
            .map(|a| a.value.as_str())
    }

    /// The number of instructions over every computation.
    pub fn num_instructions(&self) -> usize {
        self.computations.iter().map(|c| c.instructions.len()).sum()
    }
}

impl Computation {
    /// The `ROOT` instruction.
    pub fn root(&self) -> Option<&Instruction> {
        self.instructions
            .iter()
            .find(|i| i.is_root)
            .or(self.instructions.last())
    }

    /// The parameters, ordered by number.
    pub fn parameters(&self) -> Vec<&Instruction> {
        let mut params: Vec<(u64, &Instruction)> = self
            .instructions
            .iter()
            .filter_map(|i| match i.operands {
                Operands::Parameter(k) => Some((k, i)),
                _ => None,
            })
            .collect();
        params.sort_by_key(|(k, _)| *k);
        params.into_iter().map(|(_, i)| i).collect()
    }
}

/// Prints a module: exactly its text, when it was read and not changed.
pub fn print_module(m: &Module) -> String {
    let mut out = String::with_capacity(m.num_instructions() * 96 + 256);
    out.push_str(&m.leading);
    out.push_str(&m.header_line);
    for c in &m.computations {
        out.push_str(&c.leading);
        out.push_str(&c.header_line);
        for i in &c.instructions {
            out.push_str(&i.text);
        }
        out.push_str(&c.closing_line);
    }
    out.push_str(&m.trailing);
    out
}

/// Whether a text looks like HLO text: its first word that is not a comment is `HloModule`.
pub fn looks_like_hlo(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with('#'))
        .is_some_and(|l| l.starts_with("HloModule"))
}

/// Reads a module.
pub fn parse_module(text: &str) -> Result<Module, HloError> {
    let mut lines = text.split_inclusive('\n').enumerate().peekable();
    let err = |line: usize, column: usize, message: String| HloError {
        line,
        column,
        message,
        instruction: None,
    };
    // Leading blank lines and comments, then the header.
    let mut leading = String::new();
    let (header_no, header_line) = loop {
        let Some((no, l)) = lines.next() else {
            return Err(err(
                1,
                1,
                "expected `HloModule`, found the end of the text".into(),
            ));
        };
        if is_filler(l) {
            leading.push_str(l);
            continue;
        }
        break (no + 1, l);
    };
    let body = header_line.trim_end_matches(['\n', '\r']);
    let rest = body.trim_start().strip_prefix("HloModule").ok_or_else(|| {
        err(
            header_no,
            1 + body.len() - body.trim_start().len(),
            format!(
                "expected `HloModule`, found `{}`",
                snippet(body.trim_start())
            ),
        )
    })?;
    let name_start = skip_spaces(rest);
    let name_len = ident_len(&rest[name_start..]);
    if name_len == 0 {
        return Err(err(
            header_no,
            body.len() - rest.len() + name_start + 1,
            "expected the module's name after `HloModule`".into(),
        ));
    }
    let name = rest[name_start..name_start + name_len].to_string();
    let attrs_text = &rest[name_start + name_len..];
    let attrs = parse_attrs(attrs_text)
        .map_err(|(at, m)| err(header_no, body.len() - attrs_text.len() + at + 1, m))?;
    let mut module = Module {
        leading,
        name,
        header_line: header_line.to_string(),
        attrs,
        computations: Vec::new(),
        trailing: String::new(),
    };
    let mut pending = String::new();
    while let Some((no, l)) = lines.next() {
        let no = no + 1;
        if is_filler(l) {
            pending.push_str(l);
            continue;
        }
        if STACK_FRAME_TABLES.contains(&l.trim()) {
            // A table runs to the next blank line; kept as the next computation's leading text.
            pending.push_str(l);
            while let Some((_, next)) = lines.next_if(|(_, next)| !next.trim().is_empty()) {
                pending.push_str(next);
            }
            continue;
        }
        let mut comp = parse_computation_header(l, no)?;
        comp.leading = std::mem::take(&mut pending);
        loop {
            let Some((ino, il)) = lines.next() else {
                return Err(err(
                    no,
                    1,
                    format!("computation `{}` is not closed by `}}`", comp.name),
                ));
            };
            let ino = ino + 1;
            let t = il.trim();
            if t == "}" {
                comp.closing_line = il.to_string();
                break;
            }
            if t.is_empty() || t.starts_with("//") {
                // Kept with the next instruction's text.
                pending.push_str(il);
                continue;
            }
            let mut instr = parse_instruction(il, ino)?;
            if !pending.is_empty() {
                instr.text = std::mem::take(&mut pending) + &instr.text;
                instr.operands_span.0 += instr.text.len() - il.len();
                instr.operands_span.1 += instr.text.len() - il.len();
            }
            comp.instructions.push(instr);
        }
        if !pending.is_empty() {
            comp.closing_line = std::mem::take(&mut pending) + &comp.closing_line;
        }
        module.computations.push(comp);
    }
    module.trailing = pending;
    if module.computations.is_empty() {
        return Err(err(
            header_no,
            1,
            format!("module `{}` has no computation", module.name),
        ));
    }
    Ok(module)
}

/// The titles of XLA's stack-frame tables, printed between the header and the first
/// computation (`FileNames`, then `1 "a.py"` lines, ...).
pub const STACK_FRAME_TABLES: [&str; 4] =
    ["FileNames", "FunctionNames", "FileLocations", "StackFrames"];

/// Blank lines and comments between items.
fn is_filler(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with("//")
}

/// The length of an HLO identifier at the start of `text` (`add.13`, `get-tuple-element.4`,
/// `jit_relu_.1`).
fn ident_len(text: &str) -> usize {
    let mut n = 0;
    for (i, c) in text.char_indices() {
        let ok = if i == 0 {
            c.is_ascii_alphabetic() || c == '_'
        } else {
            c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
        };
        if !ok {
            break;
        }
        n = i + c.len_utf8();
    }
    n
}

/// `[ENTRY ][%]name[ (params) -> shape][, attrs] {`.
fn parse_computation_header(line: &str, no: usize) -> Result<Computation, HloError> {
    let body = line.trim_end_matches(['\n', '\r']);
    let err = |col: usize, message: String| HloError {
        line: no,
        column: col + 1,
        message,
        instruction: None,
    };
    let mut at = skip_spaces(body);
    let is_entry = body[at..].starts_with("ENTRY ");
    if is_entry {
        at += "ENTRY ".len();
        at += skip_spaces(&body[at..]);
    }
    if body[at..].starts_with('%') {
        at += 1;
    }
    let n = ident_len(&body[at..]);
    if n == 0 {
        return Err(err(
            at,
            format!(
                "expected a computation (`name {{`) or `}}`, found `{}`",
                snippet(&body[at..])
            ),
        ));
    }
    let name = body[at..at + n].to_string();
    at += n;
    at += skip_spaces(&body[at..]);
    let mut signature = None;
    if body[at..].starts_with('(') {
        let len =
            balanced(&body[at..]).ok_or_else(|| err(at, "unterminated parameter list".into()))?;
        let params_text = &body[at + 1..at + len - 1];
        let mut params = Vec::new();
        for p in split_top(params_text) {
            let p = p.trim();
            if p.is_empty() {
                continue;
            }
            let (pname, pshape) = p
                .split_once(':')
                .ok_or_else(|| err(at, format!("parameter `{p}` has no `: shape`")))?;
            let shape = parse_shape(pshape.trim()).map_err(|m| err(at, m))?.0;
            params.push((pname.trim().trim_start_matches('%').to_string(), shape));
        }
        at += len;
        at += skip_spaces(&body[at..]);
        let arrow = body[at..]
            .strip_prefix("->")
            .ok_or_else(|| err(at, "expected `->` after the parameter list".into()))?;
        at = body.len() - arrow.len();
        at += skip_spaces(&body[at..]);
        let (result, len) = parse_shape(&body[at..]).map_err(|m| err(at, m))?;
        at += len;
        signature = Some((params, result));
    }
    let end = body.trim_end();
    let Some(tail) = end.strip_suffix('{') else {
        return Err(err(
            end.len(),
            format!("expected `{{` at the end of computation `{name}`'s header"),
        ));
    };
    // Between the signature and `{`: attributes (`, execution_thread="main"`), if any.
    let attrs = parse_attrs(tail.get(at..).unwrap_or_default()).map_err(|(o, m)| err(at + o, m))?;
    Ok(Computation {
        leading: String::new(),
        header_line: line.to_string(),
        line: no,
        is_entry,
        name,
        signature,
        attrs,
        instructions: Vec::new(),
        closing_line: String::new(),
    })
}

/// Splits at top-level commas (outside brackets, strings and `/* */` comments).
pub(crate) fn split_top(text: &str) -> Vec<&str> {
    split_top_at(text, b',')
}

/// Splits at top-level `sep` bytes (outside brackets, strings and `/* */` comments).
pub(crate) fn split_top_at(text: &str, sep: u8) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start, mut in_string, mut escaped) = (0i32, 0usize, false, false);
    let mut in_comment = false;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if in_comment {
            if c == b'*' && bytes.get(i + 1) == Some(&b'/') {
                in_comment = false;
                i += 1;
            }
        } else if in_string {
            match c {
                b'\\' if !escaped => escaped = true,
                b'"' if !escaped => in_string = false,
                _ => escaped = false,
            }
        } else {
            match c {
                b'/' if bytes.get(i + 1) == Some(&b'*') => in_comment = true,
                b'"' => in_string = true,
                b'{' | b'(' | b'[' => depth += 1,
                b'}' | b')' | b']' => depth -= 1,
                _ if c == sep && depth == 0 => {
                    parts.push(&text[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        i += 1;
    }
    parts.push(&text[start..]);
    parts
}

/// `text` without `/* ... */` comments.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        match rest[start..].find("*/") {
            Some(end) => rest = &rest[start + end + 2..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Attributes `, key=value, key=value` (each value verbatim); on error, the byte offset in
/// `text` and the message.
fn parse_attrs(text: &str) -> Result<Vec<Attr>, (usize, String)> {
    let mut attrs = Vec::new();
    let trimmed = text.trim_end();
    if trimmed.trim().is_empty() {
        return Ok(attrs);
    }
    let mut offset = 0;
    for (k, part) in split_top(trimmed).into_iter().enumerate() {
        let here = offset;
        offset += part.len() + 1;
        if k == 0 {
            if !part.trim().is_empty() {
                return Err((
                    here,
                    format!("expected `,` before `{}`", snippet(part.trim())),
                ));
            }
            continue;
        }
        let p = strip_comments(part);
        let p = p.trim();
        if p.is_empty() {
            continue;
        }
        let (key, value) = p.split_once('=').ok_or_else(|| {
            (
                here,
                format!("expected `key=value`, found `{}`", snippet(p)),
            )
        })?;
        attrs.push(Attr {
            key: key.trim().to_string(),
            value: value.trim().to_string(),
        });
    }
    Ok(attrs)
}

/// `[ROOT ][%]name = shape opcode(operands)[, attrs]`.
fn parse_instruction(line: &str, no: usize) -> Result<Instruction, HloError> {
    let body = line.trim_end_matches(['\n', '\r']);
    let mut name = None;
    let err = |col: usize, message: String, name: &Option<String>| HloError {
        line: no,
        column: col + 1,
        message,
        instruction: name.clone(),
    };
    let mut at = skip_spaces(body);
    let is_root = body[at..].starts_with("ROOT ");
    if is_root {
        at += "ROOT ".len();
        at += skip_spaces(&body[at..]);
    }
    let percent = body[at..].starts_with('%');
    if percent {
        at += 1;
    }
    let n = ident_len(&body[at..]);
    if n == 0 {
        return Err(err(
            at,
            format!(
                "expected an instruction (`name = shape opcode(...)`) or `}}`, found `{}`",
                snippet(&body[at..])
            ),
            &name,
        ));
    }
    name = Some(body[at..at + n].to_string());
    at += n;
    at += skip_spaces(&body[at..]);
    if !body[at..].starts_with('=') {
        return Err(err(
            at,
            "expected `=` after the instruction's name".into(),
            &name,
        ));
    }
    at += 1;
    at += skip_spaces(&body[at..]);
    let (shape, len) = parse_shape(&body[at..]).map_err(|m| err(at, m, &name))?;
    at += len;
    at += skip_spaces(&body[at..]);
    let op_len = body[at..]
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        .count();
    if op_len == 0 {
        return Err(err(
            at,
            format!(
                "expected an opcode after the shape, found `{}`",
                snippet(&body[at..])
            ),
            &name,
        ));
    }
    let opcode = body[at..at + op_len].to_string();
    at += op_len;
    if !body[at..].starts_with('(') {
        return Err(err(
            at,
            format!("expected `(` after opcode `{opcode}`"),
            &name,
        ));
    }
    let len = balanced(&body[at..]).ok_or_else(|| {
        err(
            at,
            format!("the operands of `{opcode}` are not closed by `)`"),
            &name,
        )
    })?;
    let operands_span = (at, at + len);
    let inside = &body[at + 1..at + len - 1];
    let operands = match opcode.as_str() {
        "constant" => Operands::Literal(inside.to_string()),
        "parameter" => Operands::Parameter(inside.trim().parse().map_err(|_| {
            err(
                at + 1,
                format!(
                    "expected a parameter number, found `{}`",
                    snippet(inside.trim())
                ),
                &name,
            )
        })?),
        _ => {
            let mut values = Vec::new();
            let mut offset = at + 1;
            for part in split_top(inside) {
                let here = offset;
                offset += part.len() + 1;
                let p = strip_comments(part);
                let lead = p.len() - p.trim_start().len();
                let p = p.trim();
                if p.is_empty() {
                    continue;
                }
                let (shape, rest, col) =
                    if p.starts_with('(') || (p.contains('[') && !p.starts_with('%')) {
                        let (s, n) = parse_shape(p).map_err(|m| err(here, m, &name))?;
                        let gap = skip_spaces(&p[n..]);
                        (Some(s), &p[n + gap..], here + lead + n + gap)
                    } else {
                        (None, p, here + lead)
                    };
                let rest = rest.strip_prefix('%').unwrap_or(rest);
                let n = ident_len(rest);
                if n == 0 || n != rest.len() {
                    return Err(err(
                        col,
                        format!("expected an operand name, found `{}`", snippet(rest)),
                        &name,
                    ));
                }
                values.push(Operand {
                    name: rest.to_string(),
                    shape,
                    column: col + 1,
                });
            }
            Operands::Values(values)
        }
    };
    at += len;
    let attrs_text = &body[at..];
    let attrs = parse_attrs(attrs_text).map_err(|(o, m)| err(at + o, m, &name))?;
    Ok(Instruction {
        text: line.to_string(),
        line: no,
        is_root,
        percent,
        name: name.expect("set above"),
        shape,
        opcode,
        operands,
        attrs,
        operands_span,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const JAX: &str =
        "HloModule jit_mlp, entry_computation_layout={(f32[3,4]{1,0}, f32[5]{0})->f32[3]{0}}

region_0.2 {
  reduce_sum.3 = f32[] parameter(0)
  reduce_sum.4 = f32[] parameter(1)
  ROOT reduce_sum.5 = f32[] add(reduce_sum.3, reduce_sum.4)
}

ENTRY main.3 {
  x.1 = f32[3,4]{1,0} parameter(0)
  b.1 = f32[5]{0} parameter(1)
  constant.3 = f32[] constant(0)
  ROOT reduce_sum.7 = f32[3]{0} reduce(x.1, constant.3), dimensions={1}, to_apply=region_0.2
}
";

    const OLD: &str = "HloModule m, entry_computation_layout={(f32[5]{0})->(f32[], f32[5]{0})}

%closed_call.2 (Arg_0.3: f32[], Arg_1.3: f32[]) -> (f32[], f32[]) {
  %Arg_0.3 = f32[] parameter(0)
  %Arg_1.3 = f32[] parameter(1)
  %add.1 = f32[] add(f32[] %Arg_0.3, f32[] %Arg_1.3), metadata={op_name=\"jit(f)/add\" source_file=\"a, b.py\" source_line=3}
  ROOT %tuple.1 = (f32[], f32[]) tuple(f32[] %add.1, /*index=1*/f32[] %Arg_1.3)
}

ENTRY %main.6 (xs.1: f32[5]) -> (f32[], f32[5]) {
  %xs.1 = f32[5]{0} parameter(0)
  %c = f32[2,2]{1,0} constant({ {1, 2}, {3, nan} })
  %r = f32[] reduce(f32[5]{0} %xs.1, f32[] %xs.1), dimensions={0}, to_apply=%closed_call.2
  ROOT %t = (f32[], f32[5]{0}) tuple(f32[] %r, f32[5]{0} %xs.1)
}
";

    #[test]
    fn both_styles_print_back_byte_for_byte() {
        for text in [
            JAX,
            OLD,
            &JAX.replace('\n', "\r\n"),
            &format!("// made by hand\n\n{JAX}\n\n"),
        ] {
            let m = parse_module(text).unwrap();
            assert_eq!(print_module(&m), text);
        }
        let m = parse_module(OLD).unwrap();
        assert_eq!(m.name, "m");
        let entry = &m.computations[m.entry().unwrap()];
        assert_eq!(entry.name, "main.6");
        assert_eq!(entry.signature.as_ref().unwrap().0[0].0, "xs.1");
        let r = &entry.instructions[2];
        assert_eq!(r.operand_names(), ["xs.1", "xs.1"]);
        assert_eq!(r.called(), ["closed_call.2"]);
        assert_eq!(r.attr("dimensions"), Some("{0}"));
        let t = m.computations[0].root().unwrap();
        assert_eq!(t.operand_names(), ["add.1", "Arg_1.3"]);
        assert_eq!(
            m.computations[0].instructions[2].attr("metadata"),
            Some("{op_name=\"jit(f)/add\" source_file=\"a, b.py\" source_line=3}")
        );
        assert!(
            matches!(&entry.instructions[1].operands, Operands::Literal(l) if l.contains("nan"))
        );
    }

    #[test]
    fn errors_say_where_and_name_the_instruction() {
        let cases = [
            ("", "1:1: expected `HloModule`"),
            (
                "HloModule m\nENTRY e {\n  x = f32[] parameter(0)\n",
                "2:1: computation `e` is not closed",
            ),
            (
                "HloModule m\nENTRY e {\n  x = f33[] parameter(0)\n}\n",
                "3:7: instruction `x`: unknown element type `f33`",
            ),
            (
                "HloModule m\nENTRY e {\n  x = f32[] add(a b)\n}\n",
                "instruction `x`: expected an operand name, found `a b`",
            ),
            (
                "HloModule m\nENTRY e {\n  x = f32[] add(a, b\n}\n",
                "instruction `x`: the operands of `add` are not closed",
            ),
            (
                "HloModule m\nENTRY e {\n  x f32[] add(a)\n}\n",
                "3:5: instruction `x`: expected `=`",
            ),
            (
                "HloModule m\nENTRY e {\n  x = f32[] parameter(a)\n}\n",
                "expected a parameter number",
            ),
            ("HloModule m\n", "module `m` has no computation"),
            ("graph():\n", "expected `HloModule`, found `graph():`"),
        ];
        for (text, want) in cases {
            let e = parse_module(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn stack_frame_tables_are_kept() {
        let text = "HloModule m\n\nFileNames\n1 \"a.py\"\n\nStackFrames\n1 {file_location_id=1 parent_frame_id=1}\n\n\nENTRY e {\n  ROOT x = f32[] parameter(0)\n}\n";
        let m = parse_module(text).unwrap();
        assert_eq!(print_module(&m), text);
        assert!(m.computations[0].leading.contains("StackFrames\n1 {"));
    }

    #[test]
    fn hlo_is_told_by_content() {
        assert!(looks_like_hlo(JAX));
        assert!(looks_like_hlo(&format!("// x\n\n{OLD}")));
        assert!(!looks_like_hlo("class G(torch.nn.Module):\n"));
        assert!(!looks_like_hlo("module @m {\n}"));
    }
}

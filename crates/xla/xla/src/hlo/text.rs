//! HLO text as XLA prints it, read into a [`Module`] that prints back byte for byte.
//!
//! Both of XLA's styles are read: the current one (`add.7 = f32[3,5]{1,0} add(dot.1,
//! add.6)`, JAX's `as_text(dialect="hlo")`) and the one with `%` sigils, operand shapes
//! and computation signatures (`%add.13 = f32[3,8]{1,0} add(f32[3,8]{1,0} %dot.8, ...)`,
//! torch_xla's and `--xla_dump_to`'s). Every line keeps its text, so printing an unchanged
//! module gives the input back exactly; what graphbug needs to know (names, shapes,
//! opcodes, operands, the computations an attribute calls) is read out of it.
//!
//! XLA's lexer reads across lines, and so does this reader: modules as XLA's own developers
//! write them (`//` and `/* */` comments anywhere, no `HloModule` header, no `ENTRY`
//! keyword, an instruction continued on the next lines, instructions written inside
//! another's operands, shapes left for XLA to infer) read as XLA's parser reads them, the
//! text kept verbatim.

use std::collections::HashMap;
use std::fmt;

use super::shape::{balanced, parse_shape, snippet, Shape};

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
    /// The module's name (`HloModule <name>`; without a header, XLA's name for the module:
    /// `module_<entry computation>`).
    pub name: String,
    /// The header line, verbatim (with its newline, and lines it continues on); empty for
    /// a module written without a header.
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
    /// Whether it is the module's entry (marked `ENTRY`, or the last computation where none
    /// is, as XLA takes it).
    pub is_entry: bool,
    /// Whether its header says `ENTRY`.
    pub entry_keyword: bool,
    /// Its name (without `%`).
    pub name: String,
    /// The parameters its signature declares, if it has one: (name, shape).
    pub signature: Option<(Vec<(String, Shape)>, Shape)>,
    /// Attributes written between the header and `{`, or after the closing `}` (XLA's
    /// `}, execution_thread="..."`), if any.
    pub attrs: Vec<Attr>,
    /// Its instructions, in text order.
    pub instructions: Vec<Instruction>,
    /// The closing line, verbatim (with comment and blank lines before it).
    pub closing_line: String,
}

/// One instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Instruction {
    /// Its text, verbatim: comment and blank lines before it, the lines it is written on,
    /// with its newline. Empty for an instruction written inside another's operands
    /// (`add(f32[] constant(1), x)`), which its user's text holds.
    pub text: String,
    /// Where in `text` the instruction itself starts (after the comment lines before it).
    pub start: usize,
    /// 1-based line it starts on.
    pub line: usize,
    /// Whether it is its computation's `ROOT`.
    pub is_root: bool,
    /// Whether its name is written with `%`.
    pub percent: bool,
    /// Its name (without `%`).
    pub name: String,
    /// Its result shape (inferred where the text leaves it out: see `shape_written`).
    pub shape: Shape,
    /// Whether the text writes its shape (XLA infers a shape left out).
    pub shape_written: bool,
    /// Whether it is written inside another instruction's operands (XLA names it
    /// `<opcode>.anon`).
    pub nested: bool,
    /// Its opcode (`add`, `get-tuple-element`, `custom-call`...).
    pub opcode: String,
    /// Its operands: other instructions by name, or the literal of a `constant` and the
    /// number of a `parameter`.
    pub operands: Operands,
    /// Its attributes after the operands, in order.
    pub attrs: Vec<Attr>,
    /// Byte offsets within `text` of the operands' parenthesized list (start of `(`, end
    /// after `)`), for rewriting it; `(0, 0)` for a nested instruction.
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
    /// 1-based line of the name.
    pub line: usize,
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
    /// Its own text: `text` without the comment and blank lines before it.
    pub fn own_text(&self) -> &str {
        &self.text[self.start..]
    }

    /// The line and column of byte `at` of `text` (at or after `start`).
    pub fn locate(&self, at: usize) -> (usize, usize) {
        let at = at.clamp(self.start, self.text.len());
        let line = self.line + self.text[self.start..at].matches('\n').count();
        let line_start = self.text[..at].rfind('\n').map_or(0, |p| p + 1);
        (line, at - line_start + 1)
    }

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

/// Whether a text looks like HLO text: its first word that is not a comment (`//`, `/* */`,
/// or a `#` line) is `HloModule` or `ENTRY`, or it opens with a computation (`name {`), as XLA reads a module without a
/// header. (A bare MLIR `module {` is not taken for a computation named `module`.)
pub fn looks_like_hlo(text: &str) -> bool {
    let code = blank_comments(text);
    let mut at = skip_ws(&code, 0);
    // `#` lines before it (a shell-style note) do not make it another form.
    while code[at..].starts_with('#') {
        at = skip_ws(&code, code[at..].find('\n').map_or(code.len(), |e| at + e));
    }
    match opening(&code, at) {
        Opening::Header => true,
        Opening::Computation { name_at, name_len } => {
            &code[name_at..name_at + name_len] != "module"
        }
        Opening::Other => false,
    }
}

/// Reads a module.
pub fn parse_module(text: &str) -> Result<Module, HloError> {
    Reader::new(text).module()
}

/// The titles of XLA's stack-frame tables, printed between the header and the first
/// computation (`FileNames`, then `1 "a.py"` lines, ...).
pub const STACK_FRAME_TABLES: [&str; 4] =
    ["FileNames", "FunctionNames", "FileLocations", "StackFrames"];

/// `text` with its comments (`/* ... */`, and `//` to the end of the line; not inside
/// strings) replaced by spaces, byte for byte, so that offsets into it are offsets into
/// `text`. XLA's lexer skips comments wherever white space may stand.
fn blank_comments(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let (mut i, mut in_string, mut escaped) = (0, false, false);
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            match c {
                b'\\' if !escaped => escaped = true,
                b'"' if !escaped => in_string = false,
                b'\n' => in_string = false,
                _ => escaped = false,
            }
            i += 1;
            continue;
        }
        let end = match (c, bytes.get(i + 1)) {
            (b'/', Some(b'*')) => text[i + 2..].find("*/").map_or(bytes.len(), |e| i + e + 4),
            (b'/', Some(b'/')) => text[i..].find('\n').map_or(bytes.len(), |e| i + e),
            (b'"', _) => {
                in_string = true;
                i += 1;
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        for b in &mut out[i..end] {
            if !matches!(*b, b'\n' | b'\r') {
                *b = b' ';
            }
        }
        i = end;
    }
    String::from_utf8(out).expect("only whole comments (ASCII-delimited) were blanked")
}

/// The offset after the white space at `at`.
fn skip_ws(code: &str, at: usize) -> usize {
    at + code[at..]
        .bytes()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .count()
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

/// Whether `word` stands at the start of `text` as a keyword (not a prefix of a name).
fn keyword(text: &str, word: &str) -> bool {
    text.strip_prefix(word).is_some_and(|rest| {
        !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    })
}

/// How a module's text opens.
enum Opening {
    /// `HloModule`.
    Header,
    /// A computation (`ENTRY ...`, or `[%]name {`): a module without a header.
    Computation { name_at: usize, name_len: usize },
    /// Anything else.
    Other,
}

fn opening(code: &str, at: usize) -> Opening {
    let rest = &code[at..];
    if keyword(rest, "HloModule") {
        return Opening::Header;
    }
    let (mut p, entry) = if keyword(rest, "ENTRY") {
        (skip_ws(code, at + "ENTRY".len()), true)
    } else {
        (at, false)
    };
    if code[p..].starts_with('%') {
        p += 1;
    }
    let n = ident_len(&code[p..]);
    if n == 0 {
        return Opening::Other;
    }
    let after = skip_ws(code, p + n);
    if entry || code[after..].starts_with('{') {
        Opening::Computation {
            name_at: p,
            name_len: n,
        }
    } else {
        Opening::Other
    }
}

/// Whether an operand or instruction text starts with a shape (`f32[2]`, `(s32[], ...)`,
/// `token[]`) rather than an opcode or a name.
fn starts_with_shape(code: &str) -> bool {
    if code.starts_with('(') {
        return true;
    }
    let n = code.bytes().take_while(u8::is_ascii_alphanumeric).count();
    n > 0 && code[n..].starts_with('[')
}

/// A module's text being read: the text, the same with comments blanked (what is scanned),
/// and where its lines start.
struct Reader<'a> {
    text: &'a str,
    code: String,
    line_starts: Vec<usize>,
}

/// The right-hand side of an instruction: `[shape] opcode(operands)`.
struct Rhs {
    shape: Option<Shape>,
    opcode: String,
    operands: Operands,
    /// Absolute offsets of `(` and after `)`.
    span: (usize, usize),
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Reader<'a> {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        Reader {
            text,
            code: blank_comments(text),
            line_starts,
        }
    }

    /// 1-based line and column of byte `at`.
    fn position(&self, at: usize) -> (usize, usize) {
        let k = self.line_starts.partition_point(|&s| s <= at) - 1;
        (k + 1, at - self.line_starts[k] + 1)
    }

    fn line_start(&self, at: usize) -> usize {
        self.line_starts[self.line_starts.partition_point(|&s| s <= at) - 1]
    }

    /// The text from `at` to the end of its line, shortened, for an error's "found `...`".
    fn rest_of_line(&self, at: usize) -> String {
        let end = self.code[at..]
            .find('\n')
            .map_or(self.code.len(), |e| at + e);
        snippet(self.text[at..end].trim_end())
    }

    fn err(&self, at: usize, message: String, instruction: Option<&str>) -> HloError {
        let (line, column) = self.position(at);
        HloError {
            line,
            column,
            message,
            instruction: instruction.map(str::to_string),
        }
    }

    fn ws(&self, at: usize) -> usize {
        skip_ws(&self.code, at)
    }

    /// The end of an item that ends at `at`: the spaces and comments after it on its line
    /// and the line's newline; or, where more follows on the line, `at` after the spaces.
    fn line_end(&self, at: usize) -> usize {
        let rest = &self.code[at..];
        let spaces = rest
            .bytes()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\r'))
            .count();
        match rest[spaces..].bytes().next() {
            Some(b'\n') => at + spaces + 1,
            None => self.code.len(),
            Some(_) => at + spaces,
        }
    }

    /// Where the text of an item found at `at` starts: the start of its line where only
    /// white space comes before it there (and the line starts at or after `floor`).
    fn item_start(&self, at: usize, floor: usize) -> usize {
        let start = self.line_start(at);
        if start >= floor && self.code[start..at].trim().is_empty() {
            start
        } else {
            at.max(floor)
        }
    }

    /// The end of a list of attributes (`, key=value, ...`, continued across lines) that
    /// may start at `at`: `at` when none does.
    fn attrs_end(&self, at: usize) -> usize {
        let mut end = at;
        loop {
            let comma = self.ws(end);
            if !self.code[comma..].starts_with(',') {
                return end;
            }
            let key = self.ws(comma + 1);
            let value_end = self.value_end(key);
            if value_end == key {
                return end;
            }
            end = value_end;
        }
    }

    /// The end of `key=value` at `at`: the first `,`, newline, `//` or unmatched closing
    /// bracket outside brackets and strings, less trailing spaces.
    fn value_end(&self, at: usize) -> usize {
        let bytes = self.code.as_bytes();
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        let mut i = at;
        while i < bytes.len() {
            let c = bytes[i];
            if in_string {
                match c {
                    b'\\' if !escaped => escaped = true,
                    b'"' if !escaped => in_string = false,
                    _ => escaped = false,
                }
            } else {
                match c {
                    b'"' => in_string = true,
                    b'{' | b'(' | b'[' => depth += 1,
                    b'}' | b')' | b']' if depth == 0 => break,
                    b'}' | b')' | b']' => depth -= 1,
                    b',' | b'\n' if depth == 0 => break,
                    _ => {}
                }
            }
            i += 1;
        }
        at + self.code[at..i].trim_end().len()
    }

    fn module(&self) -> Result<Module, HloError> {
        let code = &self.code;
        let first = self.ws(0);
        let header_start = self.item_start(first, 0);
        let mut module = Module {
            leading: self.text[..header_start].to_string(),
            name: String::new(),
            header_line: String::new(),
            attrs: Vec::new(),
            computations: Vec::new(),
            trailing: String::new(),
        };
        let mut at = match opening(code, first) {
            Opening::Header => {
                let name_at = self.ws(first + "HloModule".len());
                let name_len = ident_len(&code[name_at..]);
                if name_len == 0 {
                    return Err(self.err(
                        name_at,
                        "expected the module's name after `HloModule`".into(),
                        None,
                    ));
                }
                module.name = code[name_at..name_at + name_len].to_string();
                let attrs_at = name_at + name_len;
                let attrs_end = self.attrs_end(attrs_at);
                module.attrs = parse_attrs(&code[attrs_at..attrs_end])
                    .map_err(|(o, m)| self.err(attrs_at + o, m, None))?;
                let end = self.line_end(attrs_end);
                module.header_line = self.text[header_start..end].to_string();
                end
            }
            Opening::Computation { .. } => header_start,
            Opening::Other if first == code.len() => {
                return Err(self.err(
                    0,
                    "expected `HloModule`, found the end of the text".into(),
                    None,
                ));
            }
            Opening::Other => {
                return Err(self.err(
                    first,
                    format!("expected `HloModule`, found `{}`", self.rest_of_line(first)),
                    None,
                ));
            }
        };
        loop {
            // XLA's stack-frame tables (each runs to the next blank line) are kept as the
            // next computation's leading text.
            let mut floor = at;
            let mut p = self.ws(at);
            loop {
                let line_end = code[p..].find('\n').map_or(code.len(), |e| p + e);
                if p == code.len() || !STACK_FRAME_TABLES.contains(&code[p..line_end].trim()) {
                    break;
                }
                let mut end = (line_end + 1).min(code.len());
                while end < code.len() {
                    let next = code[end..].find('\n').map_or(code.len(), |e| end + e + 1);
                    if code[end..next].trim().is_empty() {
                        break;
                    }
                    end = next;
                }
                floor = end;
                p = self.ws(end);
            }
            if p == code.len() {
                module.trailing = self.text[at..].to_string();
                break;
            }
            let (mut comp, from) = self.computation(p, floor)?;
            comp.leading = self.text[at..floor].to_string() + &comp.leading;
            at = self.close_computation(&mut comp, from)?;
            module.computations.push(comp);
        }
        if module.computations.is_empty() {
            let (line, _) = self.position(header_start);
            return Err(HloError {
                line,
                column: 1,
                message: format!("module `{}` has no computation", module.name),
                instruction: None,
            });
        }
        // XLA takes the last computation for the entry where none says `ENTRY`.
        if !module.computations.iter().any(|c| c.entry_keyword) {
            if let Some(last) = module.computations.last_mut() {
                last.is_entry = true;
            }
        }
        if module.header_line.is_empty() {
            let entry = module.entry().expect("set above");
            module.name = format!("module_{}", module.computations[entry].name);
        }
        Ok(module)
    }

    /// The computation whose header is at `p`, its text starting at or after `floor`, with
    /// its instructions up to (not including) its closing `}`, and the offset its closing
    /// text starts at.
    fn computation(&self, p: usize, floor: usize) -> Result<(Computation, usize), HloError> {
        let code = &self.code;
        let start = self.item_start(p, floor);
        let mut at = p;
        let entry_keyword = keyword(&code[at..], "ENTRY");
        if entry_keyword {
            at = self.ws(at + "ENTRY".len());
        }
        if code[at..].starts_with('%') {
            at += 1;
        }
        let n = ident_len(&code[at..]);
        if n == 0 {
            return Err(self.err(
                at,
                format!(
                    "expected a computation (`name {{`) or `}}`, found `{}`",
                    snippet(self.text[at..].lines().next().unwrap_or_default())
                ),
                None,
            ));
        }
        let name = code[at..at + n].to_string();
        at = self.ws(at + n);
        let mut signature = None;
        let mut sig_end = at;
        if code[at..].starts_with('(') {
            let len = balanced(&code[at..])
                .ok_or_else(|| self.err(at, "unterminated parameter list".into(), None))?;
            let mut params = Vec::new();
            let mut offset = at + 1;
            for part in split_top(&code[at + 1..at + len - 1]) {
                let here = offset;
                offset += part.len() + 1;
                let p = part.trim();
                if p.is_empty() {
                    continue;
                }
                let (pname, pshape) = p.split_once(':').ok_or_else(|| {
                    self.err(here, format!("parameter `{p}` has no `: shape`"), None)
                })?;
                let shape = parse_shape(pshape.trim())
                    .map_err(|m| self.err(here, m, None))?
                    .0;
                params.push((pname.trim().trim_start_matches('%').to_string(), shape));
            }
            at = self.ws(at + len);
            if !code[at..].starts_with("->") {
                return Err(self.err(at, "expected `->` after the parameter list".into(), None));
            }
            at = self.ws(at + 2);
            let (result, len) = parse_shape(&code[at..]).map_err(|m| self.err(at, m, None))?;
            at += len;
            sig_end = at;
            signature = Some((params, result));
        }
        // Between the signature and `{`: attributes, if any.
        let attrs_end = self.attrs_end(sig_end);
        let brace = self.ws(attrs_end);
        if !code[brace..].starts_with('{') {
            return Err(self.err(
                brace,
                format!("expected `{{` at the end of computation `{name}`'s header"),
                None,
            ));
        }
        let attrs = parse_attrs(&code[sig_end..attrs_end])
            .map_err(|(o, m)| self.err(sig_end + o, m, None))?;
        let header_end = self.line_end(brace + 1);
        let mut comp = Computation {
            leading: self.text[floor..start].to_string(),
            header_line: self.text[start..header_end].to_string(),
            line: self.position(p).0,
            is_entry: entry_keyword,
            entry_keyword,
            name,
            signature,
            attrs,
            instructions: Vec::new(),
            closing_line: String::new(),
        };
        // Where each instruction read so far is, by name (for shapes left out).
        let mut names: HashMap<String, usize> = HashMap::new();
        let mut taken: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut at = header_end;
        loop {
            let q = self.ws(at);
            if q == code.len() {
                return Err(HloError {
                    line: comp.line,
                    column: 1,
                    message: format!("computation `{}` is not closed by `}}`", comp.name),
                    instruction: None,
                });
            }
            if code[q..].starts_with('}') {
                // What closes it is read by `close_computation`.
                return Ok((comp, at));
            }
            let first_new = comp.instructions.len();
            let end = self.instruction(q, at, &mut taken, &mut comp.instructions)?;
            for k in first_new..comp.instructions.len() {
                let (before, rest) = comp.instructions.split_at_mut(k);
                let i = &mut rest[0];
                if !i.shape_written {
                    let shape_of = |n: &str| names.get(n).map(|&j| &before[j].shape);
                    if let Some(shape) = infer(i, shape_of) {
                        i.shape = shape;
                    }
                }
                names.insert(i.name.clone(), k);
            }
            at = end;
        }
    }

    /// Reads the closing `}` (and any `, execution_thread=...` after it) of `comp`, read by
    /// [`Reader::computation`], its text starting at `from`; the offset after it.
    fn close_computation(&self, comp: &mut Computation, from: usize) -> Result<usize, HloError> {
        let brace = self.ws(from);
        let attrs_at = brace + 1;
        let attrs_end = self.attrs_end(attrs_at);
        comp.attrs.extend(
            parse_attrs(&self.code[attrs_at..attrs_end])
                .map_err(|(o, m)| self.err(attrs_at + o, m, None))?,
        );
        let end = self.line_end(attrs_end);
        comp.closing_line = self.text[from..end].to_string();
        Ok(end)
    }

    /// Reads the instruction at `q` (its text starting at `floor`, after the previous
    /// item), pushing it, after the instructions written inside its operands, onto `out`;
    /// the offset after its text.
    fn instruction(
        &self,
        q: usize,
        floor: usize,
        taken: &mut std::collections::HashSet<String>,
        out: &mut Vec<Instruction>,
    ) -> Result<usize, HloError> {
        let code = &self.code;
        let mut at = q;
        let is_root = keyword(&code[at..], "ROOT");
        if is_root {
            at = self.ws(at + "ROOT".len());
        }
        let percent = code[at..].starts_with('%');
        if percent {
            at += 1;
        }
        let n = ident_len(&code[at..]);
        if n == 0 {
            return Err(self.err(
                at,
                format!(
                    "expected an instruction (`name = shape opcode(...)`) or `}}`, found `{}`",
                    self.rest_of_line(at)
                ),
                None,
            ));
        }
        let name = code[at..at + n].to_string();
        at = self.ws(at + n);
        if !code[at..].starts_with('=') {
            return Err(self.err(
                at,
                "expected `=` after the instruction's name".into(),
                Some(&name),
            ));
        }
        at = self.ws(at + 1);
        let rhs = self.rhs(at, &name, taken, out)?;
        let attrs_at = rhs.span.1;
        let attrs_end = self.attrs_end(attrs_at);
        let attrs = parse_attrs(&code[attrs_at..attrs_end])
            .map_err(|(o, m)| self.err(attrs_at + o, m, Some(&name)))?;
        let end = self.line_end(attrs_end);
        taken.insert(name.clone());
        out.push(Instruction {
            text: self.text[floor..end].to_string(),
            start: q - floor,
            line: self.position(q).0,
            is_root,
            percent,
            name,
            shape_written: rhs.shape.is_some(),
            shape: rhs.shape.unwrap_or(Shape::Tuple(Vec::new())),
            nested: false,
            opcode: rhs.opcode,
            operands: rhs.operands,
            attrs,
            operands_span: (rhs.span.0 - floor, rhs.span.1 - floor),
        });
        Ok(end)
    }

    /// `[shape] opcode(operands)` at `at`, of instruction `owner`; instructions written
    /// inside the operands are pushed onto `out`.
    fn rhs(
        &self,
        mut at: usize,
        owner: &str,
        taken: &mut std::collections::HashSet<String>,
        out: &mut Vec<Instruction>,
    ) -> Result<Rhs, HloError> {
        let code = &self.code;
        let err = |at: usize, m: String| self.err(at, m, Some(owner));
        let mut shape = None;
        if starts_with_shape(&code[at..]) {
            let (s, n) = parse_shape(&code[at..]).map_err(|m| err(at, m))?;
            shape = Some(s);
            at = self.ws(at + n);
        }
        let op_len = code[at..]
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
            .count();
        if op_len == 0 {
            return Err(err(
                at,
                format!(
                    "expected an opcode after the shape, found `{}`",
                    self.rest_of_line(at)
                ),
            ));
        }
        let opcode = code[at..at + op_len].to_string();
        let open = self.ws(at + op_len);
        if !code[open..].starts_with('(') {
            return Err(err(
                at + op_len,
                format!("expected `(` after opcode `{opcode}`"),
            ));
        }
        let len = balanced(&code[open..]).ok_or_else(|| {
            err(
                open,
                format!("the operands of `{opcode}` are not closed by `)`"),
            )
        })?;
        let (from, to) = (open + 1, open + len - 1);
        let operands = match opcode.as_str() {
            "constant" => Operands::Literal(self.text[from..to].to_string()),
            "parameter" => Operands::Parameter(code[from..to].trim().parse().map_err(|_| {
                err(
                    from,
                    format!(
                        "expected a parameter number, found `{}`",
                        snippet(code[from..to].trim())
                    ),
                )
            })?),
            _ => Operands::Values(self.operands(from, to, owner, taken, out)?),
        };
        Ok(Rhs {
            shape,
            opcode,
            operands,
            span: (open, open + len),
        })
    }

    /// The operands between `from` and `to`: names (with any shape written before them), or
    /// instructions written in place, which are pushed onto `out` and named as XLA names
    /// them (`<opcode>.anon`, `.anon.1`, ...).
    fn operands(
        &self,
        from: usize,
        to: usize,
        owner: &str,
        taken: &mut std::collections::HashSet<String>,
        out: &mut Vec<Instruction>,
    ) -> Result<Vec<Operand>, HloError> {
        let code = &self.code;
        let err = |at: usize, m: String| self.err(at, m, Some(owner));
        let mut values = Vec::new();
        let mut offset = from;
        for part in split_top(&code[from..to]) {
            let here = offset;
            offset += part.len() + 1;
            let body = part.trim();
            if body.is_empty() {
                continue;
            }
            let start = here + (part.len() - part.trim_start().len());
            let end = start + body.len();
            let mut at = start;
            let mut shape = None;
            if starts_with_shape(body) {
                let (s, n) = parse_shape(&code[at..end]).map_err(|m| err(at, m))?;
                shape = Some(s);
                at = self.ws(at + n);
            }
            let name_at = at + usize::from(code[at..end].starts_with('%'));
            let n = ident_len(&code[name_at..end]);
            let after = self.ws(name_at + n);
            if n > 0 && name_at == at && after < end && code[after..].starts_with('(') {
                // An instruction written in place: `f32[] constant(0)`, `add(x, y)`.
                let rhs = self.rhs(start, owner, taken, out)?;
                if rhs.span.1 != end {
                    return Err(err(
                        rhs.span.1,
                        format!(
                            "unexpected `{}` after an operand written as an instruction",
                            snippet(code[rhs.span.1..end].trim())
                        ),
                    ));
                }
                let mut nested_name = format!("{}.anon", rhs.opcode);
                let mut k = 0;
                while taken.contains(&nested_name) {
                    k += 1;
                    nested_name = format!("{}.anon.{k}", rhs.opcode);
                }
                taken.insert(nested_name.clone());
                let (line, column) = self.position(start);
                out.push(Instruction {
                    text: String::new(),
                    start: 0,
                    line,
                    is_root: false,
                    percent: false,
                    name: nested_name.clone(),
                    shape_written: rhs.shape.is_some(),
                    shape: rhs.shape.unwrap_or(Shape::Tuple(Vec::new())),
                    nested: true,
                    opcode: rhs.opcode,
                    operands: rhs.operands,
                    attrs: Vec::new(),
                    operands_span: (0, 0),
                });
                values.push(Operand {
                    name: nested_name,
                    shape: None,
                    line,
                    column,
                });
                continue;
            }
            if n == 0 || name_at + n != end {
                return Err(err(
                    at,
                    format!(
                        "expected an operand name, found `{}`",
                        snippet(code[at..end].trim())
                    ),
                ));
            }
            let (line, column) = self.position(name_at);
            values.push(Operand {
                name: code[name_at..end].to_string(),
                shape,
                line,
                column,
            });
        }
        Ok(values)
    }
}

/// The shape XLA infers for instruction `i`, written without one, from its operands' shapes
/// (`shape_of` a name): for elementwise ops, `tuple` and `get-tuple-element` (see
/// [`super::check::infer_elementwise`]); `None` for the rest.
fn infer<'s>(i: &Instruction, shape_of: impl Fn(&str) -> Option<&'s Shape>) -> Option<Shape> {
    let operands: Option<Vec<&Shape>> = i.operand_names().iter().map(|n| shape_of(n)).collect();
    let operands = operands?;
    match i.opcode.as_str() {
        "tuple" => Some(Shape::Tuple(
            operands.iter().map(|s| s.without_layout()).collect(),
        )),
        "get-tuple-element" => {
            let index: usize = i.attr("index")?.trim().parse().ok()?;
            operands
                .first()?
                .tuple()?
                .get(index)
                .map(Shape::without_layout)
        }
        op => super::check::infer_elementwise(op, &operands),
    }
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
        let here = offset + (part.len() - part.trim_start().len());
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
        assert!(looks_like_hlo(&format!("# a note\n{JAX}")));
        assert!(looks_like_hlo("/* x */ ENTRY e {\n}"));
        assert!(looks_like_hlo(
            "// RUN: x\n%fused {\n  ROOT p = f32[] parameter(0)\n}\n"
        ));
        assert!(!looks_like_hlo("class G(torch.nn.Module):\n"));
        assert!(!looks_like_hlo("module @m {\n}"));
        assert!(!looks_like_hlo("module {\n  func.func @main() {\n  }\n}"));
    }

    #[test]
    fn modules_as_xla_developers_write_them_read_and_print_back() {
        let text = "/* a block\n comment */ // and a line\n\nadd {\n  a = f32[] parameter(0) /* x */\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, // first\n    b)\n}, execution_thread=\"side\"\n\nmain {\n  p = f32[4]\n    parameter(0)  n = f32[4] negate(p),\n      metadata={op_name=\"n\"}\n  ROOT r = (f32[4],\n    f32[4]) tuple(p, n)\n}\n// the end\n";
        let m = parse_module(text).unwrap();
        assert_eq!(print_module(&m), text);
        assert_eq!(m.name, "module_main");
        assert_eq!(m.entry(), Some(1));
        assert_eq!(m.computations[0].attrs[0].key, "execution_thread");
        let s = m.computations[0].root().unwrap();
        assert_eq!((s.line, s.operand_names()), (7, vec!["a", "b"]));
        assert_eq!(
            match &s.operands {
                Operands::Values(v) => (v[1].line, v[1].column),
                _ => unreachable!("add has values"),
            },
            (8, 5)
        );
        let main = &m.computations[1];
        let names: Vec<&str> = main.instructions.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["p", "n", "r"]);
        assert_eq!(main.instructions[1].line, 13);
        assert_eq!(
            main.instructions[1].attr("metadata"),
            Some("{op_name=\"n\"}")
        );
        assert_eq!(main.instructions[2].shape.to_string(), "(f32[4], f32[4])");
        assert_eq!(m.trailing, "// the end\n");
    }
}

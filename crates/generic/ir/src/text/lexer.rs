//! Tokenizer for the Python subset that `print_readable()` emits.

use crate::error::ParseError;

/// A token kind.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    /// An identifier (or the raw class name after `class`).
    Name(String),
    /// An unsigned integer literal's magnitude.
    Int(u64),
    /// A float literal.
    Float(f64),
    /// An imaginary literal (`1j`, `0.5j`): its imaginary part.
    Imag(f64),
    /// A string literal's value.
    Str(String),
    /// Punctuation: `( ) [ ] , : ; = . - + * / % @ < > ! & | ^ ~`, and `->` as [`ARROW`].
    Punct(char),
    /// End of a logical line.
    Newline,
    /// End of input.
    Eof,
}

/// The token `->` stands for (a return annotation's arrow).
pub(crate) const ARROW: char = '→';

/// A token with its 1-based position.
#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub tok: Tok,
    pub line: usize,
    pub col: usize,
}

/// Splits `src` into tokens; newlines inside brackets are not logical line ends.
#[cfg(test)]
pub(crate) fn tokenize(src: &str) -> Result<Vec<Token>, ParseError> {
    let mut lexer = Lexer::new(src);
    let mut out = Vec::new();
    while lexer.line_into(&mut out)? {}
    Ok(out)
}

/// Tokens of `src`, a logical line at a time (so a graph of a million nodes is never a
/// million lines of tokens at once).
pub(crate) struct Lexer<'a> {
    src: &'a str,
    /// Byte offset of the next character.
    pos: usize,
    line: usize,
    col: usize,
    depth: usize,
    /// Whether nothing but line ends was produced since the last line end.
    line_start: bool,
    /// The tokens of the line being lexed.
    out: Vec<Token>,
}

/// The text of 1-based line `line` of `src`, for error messages.
pub(crate) fn source_line(src: &str, line: usize) -> String {
    src.lines()
        .nth(line.saturating_sub(1))
        .unwrap_or("")
        .to_string()
}

impl<'a> Lexer<'a> {
    /// A lexer at the start of `src`.
    pub(crate) fn new(src: &'a str) -> Self {
        Lexer {
            src,
            pos: 0,
            line: 1,
            col: 1,
            depth: 0,
            line_start: true,
            out: Vec::new(),
        }
    }

    fn error(&self, line: usize, col: usize, message: String) -> ParseError {
        ParseError {
            line,
            column: col,
            message,
            source_line: source_line(self.src, line),
        }
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        let rest = self.src.as_bytes().get(self.pos..)?;
        // ASCII (all but strings and names in other scripts) without decoding.
        if rest.len() > ahead && rest[..=ahead].is_ascii() {
            return Some(rest[ahead] as char);
        }
        self.src[self.pos..].chars().nth(ahead)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn push(&mut self, tok: Tok, line: usize, col: usize) {
        self.line_start = tok == Tok::Newline;
        self.out.push(Token { tok, line, col });
    }

    fn at_line_start(&self) -> bool {
        self.line_start
    }

    /// Appends the tokens of the next logical line, its line end included, to `out`;
    /// after the last line, the end of input too. False once the end of input is there.
    pub(crate) fn line_into(&mut self, out: &mut Vec<Token>) -> Result<bool, ParseError> {
        self.out = std::mem::take(out);
        let result = self.line();
        *out = std::mem::take(&mut self.out);
        result
    }

    fn line(&mut self) -> Result<bool, ParseError> {
        while let Some(c) = self.peek(0) {
            let (line, col) = (self.line, self.col);
            match c {
                '\n' => {
                    self.bump();
                    if self.depth == 0 && !self.at_line_start() {
                        self.push(Tok::Newline, line, col);
                        return Ok(true);
                    }
                }
                ' ' | '\t' | '\r' | '\x0c' => {
                    self.bump();
                }
                '#' => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                '\\' if self.peek(1) == Some('\n') => {
                    self.bump();
                    self.bump();
                }
                '(' | '[' | '{' => {
                    self.bump();
                    self.depth += 1;
                    self.push(Tok::Punct(c), line, col);
                }
                ')' | ']' | '}' => {
                    self.bump();
                    self.depth = self.depth.saturating_sub(1);
                    self.push(Tok::Punct(c), line, col);
                }
                ',' | ':' | ';' | '=' | '+' | '*' | '/' | '%' | '@' | '<' | '>' | '!' | '&'
                | '|' | '^' | '~' => {
                    self.bump();
                    self.push(Tok::Punct(c), line, col);
                }
                '-' if self.peek(1) == Some('>') => {
                    self.bump();
                    self.bump();
                    self.push(Tok::Punct(ARROW), line, col);
                }
                '-' => {
                    self.bump();
                    self.push(Tok::Punct('-'), line, col);
                }
                '.' if self.peek(1).is_some_and(|d| d.is_ascii_digit()) => self.number()?,
                '.' => {
                    self.bump();
                    self.push(Tok::Punct('.'), line, col);
                }
                '\'' | '"' => self.string()?,
                c if c.is_ascii_digit() => self.number()?,
                c if c.is_alphabetic() || c == '_' => self.name()?,
                other => {
                    return Err(self.error(line, col, format!("unexpected character `{other}`")))
                }
            }
        }
        if !self.at_line_start() {
            self.push(Tok::Newline, self.line, self.col);
        }
        self.push(Tok::Eof, self.line, self.col);
        Ok(false)
    }

    fn name(&mut self) -> Result<(), ParseError> {
        let (line, col) = (self.line, self.col);
        let start = self.pos;
        while self
            .peek(0)
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            self.bump();
        }
        let word = self.src[start..self.pos].to_string();
        let is_class = word == "class" && self.at_line_start();
        self.push(Tok::Name(word), line, col);
        if is_class {
            // FX prints names such as `<lambda>`: take the class name raw, up to `(` or `:`.
            while self.peek(0).is_some_and(|c| c == ' ' || c == '\t') {
                self.bump();
            }
            let (nl, nc) = (self.line, self.col);
            let start = self.pos;
            while self
                .peek(0)
                .is_some_and(|c| !matches!(c, '(' | ':' | '\n' | '#'))
            {
                self.bump();
            }
            let raw = self.src[start..self.pos].trim_end().to_string();
            if raw.is_empty() {
                return Err(self.error(nl, nc, "`class` without a name".into()));
            }
            self.push(Tok::Name(raw), nl, nc);
        }
        Ok(())
    }

    fn number(&mut self) -> Result<(), ParseError> {
        let (line, col) = (self.line, self.col);
        let start = self.pos;
        let mut is_float = false;
        while self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
        }
        if self.peek(0) == Some('.') {
            is_float = true;
            self.bump();
            while self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
                self.bump();
            }
        }
        if matches!(self.peek(0), Some('e' | 'E')) {
            let sign = usize::from(matches!(self.peek(1), Some('+' | '-')));
            if self.peek(1 + sign).is_some_and(|c| c.is_ascii_digit()) {
                is_float = true;
                for _ in 0..=sign {
                    self.bump();
                }
                while self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
                    self.bump();
                }
            }
        }
        let text = &self.src[start..self.pos];
        // An imaginary literal: `1j`, `2.5e-3j`.
        if matches!(self.peek(0), Some('j' | 'J'))
            && !self
                .peek(1)
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            let im = text
                .parse::<f64>()
                .map_err(|_| self.error(line, col, format!("malformed number `{text}j`")))?;
            self.bump();
            self.push(Tok::Imag(im), line, col);
            return Ok(());
        }
        if self
            .peek(0)
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            let bad_end = self.pos + self.peek(0).map_or(0, char::len_utf8);
            let shown = &self.src[start..bad_end];
            return Err(self.error(line, col, format!("malformed number `{shown}`")));
        }
        let tok = if is_float {
            Tok::Float(
                text.parse::<f64>()
                    .map_err(|_| self.error(line, col, format!("malformed number `{text}`")))?,
            )
        } else {
            Tok::Int(text.parse::<u64>().map_err(|_| {
                self.error(
                    line,
                    col,
                    format!("integer `{text}` does not fit in 64 bits"),
                )
            })?)
        };
        self.push(tok, line, col);
        Ok(())
    }

    fn string(&mut self) -> Result<(), ParseError> {
        let (line, col) = (self.line, self.col);
        let quote = self
            .bump()
            .expect("string() is called on a quote character");
        let mut value = String::new();
        loop {
            let Some(c) = self.bump() else {
                return Err(self.error(line, col, "unterminated string".into()));
            };
            match c {
                '\n' => return Err(self.error(line, col, "unterminated string".into())),
                c if c == quote => break,
                '\\' => {
                    let (el, ec) = (self.line, self.col);
                    let Some(e) = self.bump() else {
                        return Err(self.error(line, col, "unterminated string".into()));
                    };
                    match e {
                        '\\' | '\'' | '"' => value.push(e),
                        'n' => value.push('\n'),
                        'r' => value.push('\r'),
                        't' => value.push('\t'),
                        '0' => value.push('\0'),
                        '\n' => {}
                        'x' | 'u' | 'U' => {
                            let len = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let mut code = 0u32;
                            for _ in 0..len {
                                let d =
                                    self.bump().and_then(|d| d.to_digit(16)).ok_or_else(|| {
                                        self.error(el, ec, format!("bad `\\{e}` escape in string"))
                                    })?;
                                code = code * 16 + d;
                            }
                            let ch = char::from_u32(code).ok_or_else(|| {
                                self.error(
                                    el,
                                    ec,
                                    format!("escape `\\{e}{code:x}` is not a character"),
                                )
                            })?;
                            value.push(ch);
                        }
                        other => {
                            return Err(self.error(
                                el,
                                ec,
                                format!("unsupported escape `\\{other}` in string"),
                            ))
                        }
                    }
                }
                c => value.push(c),
            }
        }
        self.push(Tok::Str(value), line, col);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Tok> {
        tokenize(src).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers_strings_and_lines() {
        assert_eq!(
            kinds("x = f(1, 1e-05, .5, 'a\\'b')  # c\n"),
            vec![
                Tok::Name("x".into()),
                Tok::Punct('='),
                Tok::Name("f".into()),
                Tok::Punct('('),
                Tok::Int(1),
                Tok::Punct(','),
                Tok::Float(1e-05),
                Tok::Punct(','),
                Tok::Float(0.5),
                Tok::Punct(','),
                Tok::Str("a'b".into()),
                Tok::Punct(')'),
                Tok::Newline,
                Tok::Eof
            ]
        );
        // Newlines inside brackets do not end the line.
        assert_eq!(
            kinds("f(1,\n 2)")
                .iter()
                .filter(|t| **t == Tok::Newline)
                .count(),
            1
        );
    }

    #[test]
    fn class_name_is_raw() {
        let toks = kinds("class <lambda>(torch.nn.Module):\n");
        assert_eq!(toks[1], Tok::Name("<lambda>".into()));
    }

    #[test]
    fn errors_have_positions() {
        let e = tokenize("x = 'abc\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 5));
        assert!(e.message.contains("unterminated"));
        let e = tokenize("a\n  b = $").unwrap_err();
        assert_eq!((e.line, e.column), (2, 7));
        let e = tokenize("x = 99999999999999999999").unwrap_err();
        assert!(e.message.contains("64 bits"), "{}", e.message);
        assert!(tokenize("x = 12abc").is_err());
    }
}

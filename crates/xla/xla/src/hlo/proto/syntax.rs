//! The small pieces of HLO attribute syntax: `{1,2}`, `"escaped"`, `{a, b}`, top-level
//! splitting (the text reader's, at any separator), and `key=value` words.

use std::fmt::Write;

pub(crate) use crate::hlo::text::split_top_at as split_top;

/// The inside of `{...}`, or an error naming what was expected.
pub(crate) fn braced<'a>(text: &'a str, what: &str) -> Result<&'a str, String> {
    text.trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(|| format!("expected {what} in `{{...}}`, found `{text}`"))
}

/// `{1,2,3}` (or `{}`).
pub(crate) fn parse_ints(text: &str) -> Result<Vec<i64>, String> {
    super::shapes::parse_ints(braced(text, "integers")?, ',')
}

/// `{1,2,3}`.
pub(crate) fn print_ints(values: &[i64]) -> String {
    let items: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("{{{}}}", items.join(","))
}

/// One integer.
pub(crate) fn parse_int(text: &str) -> Result<i64, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("expected an integer, found `{text}`"))
}

/// `true` or `false`.
pub(crate) fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        t => Err(format!("expected `true` or `false`, found `{t}`")),
    }
}

/// A `"..."` string, unescaped as C (and XLA's lexer) does.
pub(crate) fn parse_string(text: &str) -> Result<String, String> {
    let t = text.trim();
    let inner = t
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .filter(|_| t.len() >= 2)
        .ok_or_else(|| format!("expected a quoted string, found `{t}`"))?;
    let bytes = inner.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        i += 1;
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let e = *bytes
            .get(i)
            .ok_or_else(|| format!("a string ends in `\\`: `{t}`"))?;
        i += 1;
        out.push(match e {
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'a' => 7,
            b'b' => 8,
            b'f' => 12,
            b'v' => 11,
            b'0'..=b'7' => {
                let mut v = u32::from(e - b'0');
                for _ in 0..2 {
                    match bytes.get(i) {
                        Some(d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                u8::try_from(v).map_err(|_| format!("octal escape out of range in `{t}`"))?
            }
            b'x' => {
                let start = i;
                while bytes.get(i).is_some_and(u8::is_ascii_hexdigit) {
                    i += 1;
                }
                u8::from_str_radix(&inner[start..i], 16)
                    .map_err(|_| format!("bad `\\x` escape in `{t}`"))?
            }
            other => other,
        });
    }
    String::from_utf8(out).map_err(|_| format!("string `{t}` is not UTF-8 once unescaped"))
}

/// A string quoted and escaped as `absl::CEscape` does (XLA's printer).
pub(crate) fn print_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for b in s.bytes() {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out.push('"');
    out
}

/// `{a, %b}` or a single `a`: names without `%`.
pub(crate) fn parse_names(text: &str) -> Vec<String> {
    let t = text.trim();
    let list = t.strip_prefix('{').and_then(|r| r.strip_suffix('}'));
    list.unwrap_or(t)
        .split(',')
        .map(|n| n.trim().trim_start_matches('%').to_string())
        .filter(|n| !n.is_empty())
        .collect()
}

/// `key=value` words separated by spaces (values may be quoted or bracketed), in order.
pub(crate) fn words(text: &str) -> Result<Vec<(&str, &str)>, String> {
    let mut out = Vec::new();
    for word in split_top(text.trim(), b' ') {
        if word.is_empty() {
            continue;
        }
        match word.split_once('=') {
            Some((k, v)) => out.push((k, v)),
            None => out.push((word, "")),
        }
    }
    Ok(out)
}

/// Whether a string is a `{...}` block XLA prints without quotes (its braces balance and
/// the first one closes at the end).
pub(crate) fn is_dict(s: &str) -> bool {
    if !s.starts_with('{') || !s.ends_with('}') {
        return false;
    }
    let (mut depth, mut in_string, mut escaped) = (0i32, false, false);
    for (i, c) in s.bytes().enumerate() {
        if in_string {
            match c {
                b'\\' if !escaped => escaped = true,
                b'"' if !escaped => in_string = false,
                _ => escaped = false,
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i == s.len() - 1;
                }
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_escape_as_xla_does() {
        let s = "n\"q\u{1}é\\'\n";
        let printed = print_string(s);
        assert_eq!(printed, "\"n\\\"q\\001\\303\\251\\\\\\'\\n\"");
        assert_eq!(parse_string(&printed).unwrap(), s);
        assert_eq!(parse_string("\"a\\x41\\102\"").unwrap(), "aAB");
        assert!(parse_string("abc").is_err());
    }

    #[test]
    fn pieces() {
        assert_eq!(parse_ints("{1, -2,3}").unwrap(), [1, -2, 3]);
        assert_eq!(parse_ints("{}").unwrap(), Vec::<i64>::new());
        assert_eq!(print_ints(&[1, 0]), "{1,0}");
        assert_eq!(parse_names("{%a, b}"), ["a", "b"]);
        assert_eq!(parse_names("%c"), ["c"]);
        assert_eq!(
            words("size=3x3 pad=1_1x1_1").unwrap(),
            [("size", "3x3"), ("pad", "1_1x1_1")]
        );
        assert_eq!(
            split_top("{a,b},c,\"d,e\"", b','),
            ["{a,b}", "c", "\"d,e\""]
        );
        assert!(is_dict("{x = 1}"));
        assert!(!is_dict("{a}{b}"));
        assert!(!is_dict("abc"));
    }
}

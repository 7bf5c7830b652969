//! The protobuf wire format read against the schema's field table: finds the fields a
//! proto holds that the schema lacks (prost would drop them silently), and prints a proto
//! compactly by field name (for messages and tests).

use std::fmt::Write;

use super::schema::{FieldKind, MESSAGES};

/// One field as found on the wire: its number and value.
enum Value<'a> {
    /// A varint.
    Varint(u64),
    /// 8 bytes.
    Fixed64(u64),
    /// 4 bytes.
    Fixed32(u32),
    /// Length-delimited bytes (a string, bytes, a message or packed numbers).
    Bytes(&'a [u8]),
}

/// A varint at `at`: its value and the offset after it.
fn varint(b: &[u8], mut at: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let c = *b.get(at)?;
        at += 1;
        v |= u64::from(c & 0x7f) << shift;
        if c & 0x80 == 0 {
            return Some((v, at));
        }
    }
    None
}

/// The fields of a message's bytes, in order; `None` if they are not well formed.
fn fields(b: &[u8]) -> Option<Vec<(u32, Value<'_>)>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let (tag, next) = varint(b, at)?;
        at = next;
        let number = u32::try_from(tag >> 3).ok()?;
        let value = match tag & 7 {
            0 => {
                let (v, next) = varint(b, at)?;
                at = next;
                Value::Varint(v)
            }
            1 => {
                let bytes: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
                at += 8;
                Value::Fixed64(u64::from_le_bytes(bytes))
            }
            2 => {
                let (n, next) = varint(b, at)?;
                let end = next.checked_add(usize::try_from(n).ok()?)?;
                at = end;
                Value::Bytes(b.get(next..end)?)
            }
            5 => {
                let bytes: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
                at += 4;
                Value::Fixed32(u32::from_le_bytes(bytes))
            }
            _ => return None,
        };
        out.push((number, value));
    }
    Some(out)
}

/// The fields of message `name`, from the schema.
fn schema_of(name: &str) -> Option<&'static [(u32, &'static str, FieldKind)]> {
    MESSAGES.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// The first field in `bytes` (a message `message`) that the schema lacks, as
/// `Message.path.to.field number N`; `None` when every field is known.
pub(crate) fn unknown_field(bytes: &[u8], message: &str) -> Option<String> {
    let schema = schema_of(message)?;
    let Some(found) = fields(bytes) else {
        return Some(format!("{message} (its bytes are not well formed)"));
    };
    for (number, value) in found {
        let Some((_, name, kind)) = schema.iter().find(|(n, _, _)| *n == number) else {
            return Some(format!("{message} field number {number}"));
        };
        if let (FieldKind::Msg(sub), Value::Bytes(b)) = (kind, &value) {
            // A map entry is a message too (key = 1, value = 2).
            if let Some(path) = unknown_field(b, sub) {
                return Some(format!("{message}.{name} > {path}"));
            }
        }
    }
    None
}

/// The first field set in `bytes` (a message `message`), as a dotted path of field names
/// (`sharding.tile_shape`); messages that are present but empty do not count.
pub(crate) fn first_set_field(bytes: &[u8], message: &str) -> Option<String> {
    let schema = schema_of(message).unwrap_or(&[]);
    for (number, value) in fields(bytes)? {
        let field = schema.iter().find(|(n, _, _)| *n == number);
        let name = field.map_or_else(|| format!("#{number}"), |f| f.1.to_string());
        match (field.map(|f| f.2), &value) {
            (Some(FieldKind::Msg(_)), Value::Bytes([])) => continue,
            (Some(FieldKind::Msg(sub)), Value::Bytes(b)) => {
                return Some(match first_set_field(b, sub) {
                    Some(path) => format!("{name}.{path}"),
                    None => name,
                })
            }
            _ => return Some(name),
        }
    }
    None
}

/// A compact, field-named print of a message's bytes: `{name: value, sub: {...}}`, default
/// fields and empty messages absent. For messages and tests.
pub fn describe(bytes: &[u8], message: &str) -> String {
    let mut out = String::new();
    describe_into(bytes, message, &mut out);
    out
}

fn describe_into(bytes: &[u8], message: &str, out: &mut String) {
    let schema = schema_of(message).unwrap_or(&[]);
    let Some(found) = fields(bytes) else {
        out.push_str("<bad bytes>");
        return;
    };
    out.push('{');
    let mut first = true;
    for (number, value) in &found {
        let field = schema.iter().find(|(n, _, _)| n == number);
        // Present but empty messages read as absent.
        if matches!((field.map(|f| f.2), value), (Some(FieldKind::Msg(_)), Value::Bytes(b)) if b.is_empty())
        {
            continue;
        }
        if !first {
            out.push_str(", ");
        }
        first = false;
        let name = field.map_or_else(|| format!("#{number}"), |f| f.1.to_string());
        let _ = write!(out, "{name}: ");
        match (field.map(|f| f.2), value) {
            (Some(FieldKind::Msg(sub)), Value::Bytes(b)) => describe_into(b, sub, out),
            (_, Value::Bytes(b)) => match std::str::from_utf8(b) {
                Ok(s) if !s.chars().any(char::is_control) => {
                    let _ = write!(out, "{s:?}");
                }
                _ => {
                    let _ = write!(out, "{b:?}");
                }
            },
            (_, Value::Varint(v)) => {
                let _ = write!(out, "{}", *v as i64);
            }
            (_, Value::Fixed64(v)) => {
                let _ = write!(out, "{}", f64::from_bits(*v));
            }
            (_, Value::Fixed32(v)) => {
                let _ = write!(out, "{}", f32::from_bits(*v));
            }
        }
    }
    out.push('}');
}

//! Operator schemas as libtorch's dispatcher reports them, and the trait through which
//! pure-Rust passes (functionalization, autodiff, partitioning) ask for them.

use std::sync::Arc;

use serde::Deserialize;

use crate::types::OpName;

/// Where passes get op schemas from: libtorch's dispatcher (graphbug-aten implements this),
/// or a table in tests.
pub trait Schemas {
    /// The schema of `op`, or `None` when the op is unknown.
    fn schema(&self, op: &OpName) -> Option<Arc<Schema>>;

    /// Every overload of `namespace::name` (`default` for the unnamed one), sorted; empty
    /// when the source cannot list them.
    fn overloads(&self, _namespace: &str, _name: &str) -> Vec<String> {
        Vec::new()
    }
}

/// One argument or return of a schema.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Argument {
    /// Argument name (returns are often unnamed).
    pub name: String,
    /// The declared type as c10 prints it: `Tensor`, `int[]`, `Scalar?`, `Tensor?[]`, ...
    #[serde(rename = "type")]
    pub ty: String,
    /// Fixed list length, as in `int[2]`.
    pub n: Option<usize>,
    /// Declared after `*`: keyword only.
    pub kwarg_only: bool,
    /// The default value as c10 prints it, if there is one.
    pub default: Option<String>,
    /// Written to in place (`Tensor(a!)`).
    pub is_write: bool,
    /// Alias sets (`a` in `Tensor(a)`): the value may alias inputs with the same set.
    pub alias_set: Vec<String>,
    /// Alias sets of list elements (`a` in `Tensor(a)[]`).
    pub contained_alias_set: Vec<String>,
}

impl Argument {
    /// The type as the schema declares it, fixed list sizes included (`int[2]`).
    pub fn declared_type(&self) -> String {
        match (self.n, self.ty.find("[]")) {
            (Some(n), Some(pos)) => format!("{}[{n}]{}", &self.ty[..pos], &self.ty[pos + 2..]),
            _ => self.ty.clone(),
        }
    }

    /// The parsed type.
    pub fn arg_type(&self) -> ArgType {
        ArgType::parse(&self.ty)
    }
}

/// An operator schema.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Schema {
    /// Qualified name, e.g. `aten::add`.
    pub name: String,
    /// Overload name; empty for the default overload.
    pub overload: String,
    /// True when some argument is written to.
    pub is_mutable: bool,
    /// True for vararg schemas.
    pub is_vararg: bool,
    /// The schema as text, e.g. `aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`.
    pub text: String,
    /// Arguments in order.
    pub arguments: Vec<Argument>,
    /// Returns in order.
    pub returns: Vec<Argument>,
}

impl Schema {
    /// Parses the shim's JSON description.
    pub fn from_json(text: &str) -> Result<Schema, String> {
        serde_json::from_str(text).map_err(|e| format!("bad schema JSON from the shim: {e}"))
    }

    /// Number of arguments that can be given positionally.
    pub fn num_positional(&self) -> usize {
        self.arguments.iter().filter(|a| !a.kwarg_only).count()
    }

    /// Parses a schema from its text, as libtorch prints it:
    /// `aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)`.
    /// Covers what tests and tables need; libtorch's own JSON is the source of truth.
    pub fn parse(text: &str) -> Result<Schema, String> {
        let bad = |why: &str| format!("bad schema `{text}`: {why}");
        let open = text.find('(').ok_or_else(|| bad("no `(`"))?;
        let close = text.rfind(") ->").ok_or_else(|| bad("no `) ->`"))?;
        let (qual, overload) = match text[..open].split_once('.') {
            Some((q, o)) => (q.to_string(), o.to_string()),
            None => (text[..open].to_string(), String::new()),
        };
        let mut kwarg_only = false;
        let mut arguments = Vec::new();
        for part in split_top(&text[open + 1..close]) {
            if part == "*" {
                kwarg_only = true;
                continue;
            }
            let mut a = parse_arg(part).map_err(|w| bad(&w))?;
            a.kwarg_only = kwarg_only;
            arguments.push(a);
        }
        let rets = text[close + 4..].trim();
        let rets = rets
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or(rets);
        let returns = split_top(rets)
            .into_iter()
            .filter(|r| !r.is_empty())
            .map(parse_arg)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|w| bad(&w))?;
        Ok(Schema {
            name: qual,
            overload,
            is_mutable: arguments.iter().any(|a| a.is_write),
            is_vararg: false,
            text: text.to_string(),
            arguments,
            returns,
        })
    }

    /// Indices of the arguments written to in place.
    pub fn mutated_arguments(&self) -> Vec<usize> {
        (0..self.arguments.len())
            .filter(|&i| self.arguments[i].is_write)
            .collect()
    }
}

/// Splits at top-level commas (not inside brackets or parentheses).
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !s[start..].trim().is_empty() {
        out.push(s[start..].trim());
    }
    out
}

/// Parses `Tensor(a!) self`, `int[2] stride=[]`, `Tensor(a)[]` (a return) and the like.
fn parse_arg(text: &str) -> Result<Argument, String> {
    let (decl, default) = match text.split_once('=') {
        // libtorch reports string defaults without their quotes.
        Some((d, v)) => (d.trim(), Some(v.trim().trim_matches('"').to_string())),
        None => (text.trim(), None),
    };
    let (ty_part, name) = match decl.rsplit_once(' ') {
        Some((t, n)) => (t.trim(), n.trim().to_string()),
        None => (decl, String::new()),
    };
    // Alias annotation: `Tensor(a!)`, `Tensor(a -> *)`, `Tensor(a)[]`.
    let (mut ty, mut alias, mut is_write, mut contained) =
        (ty_part.to_string(), Vec::new(), false, false);
    if let Some(open) = ty_part.find('(') {
        let close = ty_part[open..]
            .find(')')
            .map(|c| c + open)
            .ok_or("unclosed alias annotation")?;
        let inner = &ty_part[open + 1..close];
        is_write = inner.contains('!');
        let set = inner
            .split("->")
            .next()
            .unwrap_or("")
            .trim()
            .trim_end_matches('!')
            .trim();
        alias.push(set.to_string());
        let rest = &ty_part[close + 1..];
        contained = rest.starts_with("[]");
        ty = format!("{}{rest}", &ty_part[..open]);
    }
    // Fixed list sizes: `int[2]` is type `int[]` with n = 2.
    let mut n = None;
    if let Some(open) = ty.find('[') {
        if let Some(close) = ty[open..].find(']').map(|c| c + open) {
            let inside = &ty[open + 1..close];
            if !inside.is_empty() {
                n = inside.parse().ok();
                ty = format!("{}[]{}", &ty[..open], &ty[close + 1..]);
            }
        }
    }
    let (alias_set, contained_alias_set) = if contained {
        (Vec::new(), alias)
    } else {
        (alias, Vec::new())
    };
    // libtorch expands a scalar default of a fixed-size list: `int[2] padding=0` is `[0, 0]`.
    let default = match (n, default) {
        (Some(k), Some(d)) if !d.starts_with('[') && d.parse::<i64>().is_ok() => {
            Some(format!("[{}]", vec![d.as_str(); k].join(", ")))
        }
        (_, d) => d,
    };
    Ok(Argument {
        name,
        ty,
        n,
        kwarg_only: false,
        default,
        is_write,
        alias_set,
        contained_alias_set,
    })
}

/// The element type of an argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Elem {
    /// `Tensor`
    Tensor,
    /// `int` / `SymInt`
    Int,
    /// `float`
    Float,
    /// `bool`
    Bool,
    /// `Scalar` (int, float or bool)
    Scalar,
    /// `ScalarType` (a dtype)
    ScalarType,
    /// `Layout`
    Layout,
    /// `MemoryFormat`
    MemoryFormat,
    /// `Device`
    Device,
    /// `str`
    Str,
    /// `Generator`
    Generator,
    /// Anything else (Dimname, Storage, ...): not supported.
    Other(String),
}

/// A parsed argument type: element, list-ness and optionality at both levels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgType {
    /// The element type.
    pub elem: Elem,
    /// Elements may be None (`Tensor?[]`), or a non-list value may be None (`int?`).
    pub elem_optional: bool,
    /// A list type (`int[]`).
    pub list: bool,
    /// The list itself may be None (`int[]?`).
    pub list_optional: bool,
}

impl ArgType {
    /// Parses c10's spelling of a type.
    pub fn parse(ty: &str) -> ArgType {
        let (body, list_optional_or_plain) = match ty.strip_suffix('?') {
            Some(b) => (b, true),
            None => (ty, false),
        };
        let (elem_text, list) = match body.strip_suffix("[]") {
            Some(e) => (e, true),
            None => (body, false),
        };
        let (elem_text, elem_opt) = match elem_text.strip_suffix('?') {
            Some(e) => (e, true),
            None => (elem_text, false),
        };
        let elem = match elem_text {
            "Tensor" => Elem::Tensor,
            "int" | "SymInt" => Elem::Int,
            "float" => Elem::Float,
            "bool" => Elem::Bool,
            "Scalar" => Elem::Scalar,
            "ScalarType" => Elem::ScalarType,
            "Layout" => Elem::Layout,
            "MemoryFormat" => Elem::MemoryFormat,
            "Device" => Elem::Device,
            "str" => Elem::Str,
            "Generator" => Elem::Generator,
            other => Elem::Other(other.to_string()),
        };
        if list {
            ArgType {
                elem,
                elem_optional: elem_opt,
                list: true,
                list_optional: list_optional_or_plain,
            }
        } else {
            ArgType {
                elem,
                elem_optional: list_optional_or_plain || elem_opt,
                list: false,
                list_optional: false,
            }
        }
    }

    /// True when `None` is an acceptable value.
    pub fn accepts_none(&self) -> bool {
        if self.list {
            self.list_optional
        } else {
            self.elem_optional
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_types() {
        let t = ArgType::parse("Tensor?[]");
        assert_eq!(t.elem, Elem::Tensor);
        assert!(t.list && t.elem_optional && !t.list_optional);
        let t = ArgType::parse("int[]?");
        assert!(t.list && t.list_optional && !t.elem_optional);
        assert!(t.accepts_none());
        let t = ArgType::parse("SymInt");
        assert_eq!(t.elem, Elem::Int);
        assert!(!t.accepts_none());
        let t = ArgType::parse("ScalarType?");
        assert_eq!(t.elem, Elem::ScalarType);
        assert!(t.accepts_none());
        assert_eq!(
            ArgType::parse("Dimname").elem,
            Elem::Other("Dimname".into())
        );
        let a = Argument {
            ty: "int[]?".into(),
            n: Some(1),
            ..Argument::default()
        };
        assert_eq!(a.declared_type(), "int[1]?");
    }

    #[test]
    fn parses_schema_text() {
        let s = Schema::parse(
            "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
        )
        .unwrap();
        assert_eq!(
            (s.name.as_str(), s.overload.as_str()),
            ("aten::add_", "Tensor")
        );
        assert!(s.is_mutable && s.arguments[0].is_write && s.returns[0].is_write);
        assert_eq!(s.arguments[0].alias_set, ["a"]);
        assert!(s.arguments[2].kwarg_only && s.arguments[2].default.as_deref() == Some("1"));
        let m = Schema::parse("aten::max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[]) -> (Tensor, Tensor)").unwrap();
        assert_eq!(m.arguments[1].ty, "int[]");
        assert_eq!(m.arguments[1].n, Some(2));
        assert_eq!(m.returns.len(), 2);
        let v = Schema::parse(
            "aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
        )
        .unwrap();
        assert_eq!(v.returns[0].contained_alias_set, ["a"]);
        assert_eq!(v.returns[0].ty, "Tensor[]");
        assert_eq!(v.arguments[0].alias_set, ["a"]);
        assert!(!v.is_mutable);
    }
}

//! Operator schemas as libtorch's dispatcher reports them, and the trait through which
//! pure-Rust passes (functionalization, autodiff, partitioning) ask for them.

use std::sync::Arc;

use serde::Deserialize;

use crate::graph::Graph;
use crate::types::OpName;
use crate::value::Value;

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

/// A call's positional and keyword arguments.
pub type CallArgs = (Vec<Value>, Vec<(String, Value)>);

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

    /// The index of the argument named `name`.
    pub fn argument_index(&self, name: &str) -> Option<usize> {
        self.arguments.iter().position(|a| a.name == name)
    }

    /// Binds a call's positional and keyword arguments to this schema's arguments, as
    /// Python and libtorch's dispatcher bind them: per argument, the value the call gives
    /// it, or `None` where the call leaves it out. Fails on more positional arguments than
    /// the schema takes, an unknown keyword, or an argument given twice.
    pub fn bind<'v>(
        &self,
        args: &'v [Value],
        kwargs: &'v [(String, Value)],
    ) -> Result<Vec<Option<&'v Value>>, String> {
        let n_pos = self.num_positional();
        if args.len() > n_pos {
            return Err(format!(
                "takes {n_pos} positional argument{} but {} were given; schema: {}",
                if n_pos == 1 { "" } else { "s" },
                args.len(),
                self.text
            ));
        }
        let mut bound: Vec<Option<&Value>> = vec![None; self.arguments.len()];
        for (slot, v) in bound.iter_mut().zip(args) {
            *slot = Some(v);
        }
        for (key, v) in kwargs {
            let Some(i) = self.argument_index(key) else {
                return Err(format!(
                    "unexpected keyword argument `{key}`; schema: {}",
                    self.text
                ));
            };
            if bound[i].replace(v).is_some() {
                return Err(format!("got multiple values for argument `{key}`"));
            }
        }
        Ok(bound)
    }

    /// Checks that a call binds to this schema ([`Self::bind`]) and gives every argument
    /// that has no default and does not accept None.
    pub fn check_call(&self, args: &[Value], kwargs: &[(String, Value)]) -> Result<(), String> {
        let bound = self.bind(args, kwargs)?;
        for (a, v) in self.arguments.iter().zip(&bound) {
            if v.is_none() && !a.may_be_left_out() {
                return Err(format!(
                    "missing required argument `{}`; schema: {}",
                    a.name, self.text
                ));
            }
        }
        Ok(())
    }

    /// A call of this schema's op rewritten as a call of `target`, an op whose arguments
    /// carry the same names (another overload, the out-of-place form of an in-place op):
    /// each value goes to the argument of the same name, positional where `target` allows
    /// it, and an argument the call leaves out gets an explicit value where `target` would
    /// not fill in the same one (`bernoulli_.float`'s `p=0.5` is required in `bernoulli.p`).
    /// Arguments named in `drop` (the `out=` tensors of an out= overload) are left out.
    /// Fails, saying why, when the rewritten call would not bind to `target`.
    pub fn rebind_call(
        &self,
        target: &Schema,
        args: &[Value],
        kwargs: &[(String, Value)],
        drop: &[String],
    ) -> Result<CallArgs, String> {
        let bound = self.bind(args, kwargs)?;
        let mut positional: Vec<Value> = Vec::with_capacity(args.len());
        let mut keywords: Vec<(String, Value)> = Vec::with_capacity(kwargs.len());
        // Positional while `target` takes it there, else by keyword.
        let place = |name: &str,
                     value: Value,
                     positional: &mut Vec<Value>,
                     keywords: &mut Vec<(String, Value)>| {
            let j = target
                .argument_index(name)
                .ok_or_else(|| format!("`{}` has no argument `{name}`", target.qualified_name()))?;
            if !target.arguments[j].kwarg_only && j == positional.len() {
                positional.push(value);
            } else {
                keywords.push((name.to_string(), value));
            }
            Ok::<(), String>(())
        };
        for (a, v) in self.arguments.iter().zip(args) {
            if !drop.contains(&a.name) {
                place(&a.name, v.clone(), &mut positional, &mut keywords)?;
            }
        }
        for (k, v) in kwargs {
            if drop.contains(k) {
                continue;
            }
            if target.argument_index(k).is_none() {
                return Err(format!(
                    "`{}` has no argument `{k}`",
                    target.qualified_name()
                ));
            }
            keywords.push((k.clone(), v.clone()));
        }
        for (a, v) in self.arguments.iter().zip(&bound) {
            if v.is_some() || drop.contains(&a.name) {
                continue;
            }
            let Some(t) = target.argument_index(&a.name).map(|j| &target.arguments[j]) else {
                continue;
            };
            if a.left_out_as() == t.left_out_as() {
                continue;
            }
            let value = a.left_out_value().ok_or_else(|| {
                format!(
                    "argument `{}` is left out, and its default `{}` cannot be written out for `{}`",
                    a.name,
                    a.default.as_deref().unwrap_or("(none)"),
                    target.qualified_name()
                )
            })?;
            place(&a.name, value, &mut positional, &mut keywords)?;
        }
        target.check_call(&positional, &keywords)?;
        Ok((positional, keywords))
    }

    /// `aten::name.overload` (`aten::name` for the default overload).
    pub fn qualified_name(&self) -> String {
        if self.overload.is_empty() {
            self.name.clone()
        } else {
            format!("{}.{}", self.name, self.overload)
        }
    }
}

impl Argument {
    /// Whether a call may leave this argument out: it has a default, or accepts None.
    pub fn may_be_left_out(&self) -> bool {
        self.default.is_some() || self.arg_type().accepts_none()
    }

    /// What the op takes when a call leaves this argument out, as c10 prints it (`None`
    /// for an optional argument without a default); `None` when it must be given.
    fn left_out_as(&self) -> Option<&str> {
        match &self.default {
            Some(d) => Some(d.trim_matches('"')),
            None if self.arg_type().accepts_none() => Some("None"),
            None => None,
        }
    }

    /// The value the op takes when a call leaves this argument out, as a graph value;
    /// `None` when it must be given or its default has no graph spelling here (a dtype,
    /// layout or memory format c10 prints as a number).
    pub fn left_out_value(&self) -> Option<Value> {
        match &self.default {
            Some(d) => parse_default(d, &self.arg_type(), self.n),
            None if self.arg_type().accepts_none() => Some(Value::None),
            None => None,
        }
    }
}

/// A default as c10 prints it (`0.5`, `1.`, `True`, `None`, `[0, 0]`, `"mean"`, `0` for
/// `int[2]`), as a graph value of type `ty`.
pub fn parse_default(text: &str, ty: &ArgType, n: Option<usize>) -> Option<Value> {
    let text = text.trim();
    if text == "None" {
        return ty.accepts_none().then_some(Value::None);
    }
    if ty.list {
        let elem = ArgType {
            list: false,
            list_optional: false,
            elem_optional: false,
            ..ty.clone()
        };
        return match text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            Some(inner) => split_top(inner)
                .into_iter()
                .map(|item| parse_default(item, &elem, None))
                .collect::<Option<Vec<_>>>()
                .map(Value::List),
            // A scalar default of a fixed-size list stands for that many copies.
            None => {
                let item = parse_default(text, &elem, None)?;
                Some(Value::List(vec![item; n.unwrap_or(1)]))
            }
        };
    }
    match ty.elem {
        Elem::Bool => match text {
            "True" => Some(Value::Bool(true)),
            "False" => Some(Value::Bool(false)),
            _ => None,
        },
        Elem::Int => text.parse().ok().map(Value::Int),
        Elem::Float => text.parse().ok().map(Value::Float),
        Elem::Scalar => match text {
            "True" => Some(Value::Bool(true)),
            "False" => Some(Value::Bool(false)),
            _ => text
                .parse()
                .map(Value::Int)
                .or_else(|_| text.parse().map(Value::Float))
                .ok(),
        },
        Elem::Str => Some(Value::Str(unquote(text))),
        _ => None,
    }
}

/// A string default without its quotes and escapes (libtorch's JSON keeps them; a
/// schema's text as [`Schema::parse`] reads it does not).
fn unquote(text: &str) -> String {
    let Some(inner) = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .or_else(|| text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')))
    else {
        return text.to_string();
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('v') => out.push('\u{b}'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// A call node whose arguments do not bind to its op's schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadCall {
    /// The node.
    pub node: String,
    /// Its op.
    pub op: String,
    /// What is wrong, in the interpreter's words.
    pub message: String,
}

impl std::fmt::Display for BadCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "node `{}` ({}): {}", self.node, self.op, self.message)
    }
}

impl std::error::Error for BadCall {}

/// Checks every call of `graph` against its op's schema ([`Schema::check_call`]): the
/// arguments bind, and none that must be given is missing. Ops `schemas` does not know
/// (Python-level calls, prims libtorch lacks) are skipped; `with_effects` is checked
/// through the op it runs.
pub fn verify_calls(graph: &Graph, schemas: &dyn Schemas) -> Result<(), BadCall> {
    for node in &graph.nodes {
        let crate::graph::NodeKind::Call { op, args, kwargs } = &node.kind else {
            continue;
        };
        let (op, args) = match (op.is_effectful(), args.get(1)) {
            (true, Some(Value::Op(inner))) => (inner, &args[2..]),
            (true, _) => continue,
            (false, _) => (op, &args[..]),
        };
        if op.is_python() {
            continue;
        }
        let Some(schema) = schemas.schema(op) else {
            continue;
        };
        if schema.is_vararg {
            continue;
        }
        schema.check_call(args, kwargs).map_err(|message| BadCall {
            node: node.name.to_string(),
            op: op.to_string(),
            message,
        })?;
    }
    Ok(())
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

    #[test]
    fn parses_defaults_as_c10_prints_them() {
        let ty = ArgType::parse;
        assert_eq!(
            parse_default("0.5", &ty("float"), None),
            Some(Value::Float(0.5))
        );
        assert_eq!(
            parse_default("1.", &ty("float"), None),
            Some(Value::Float(1.0))
        );
        assert_eq!(parse_default("1", &ty("Scalar"), None), Some(Value::Int(1)));
        assert_eq!(
            parse_default("0.01", &ty("Scalar"), None),
            Some(Value::Float(0.01))
        );
        assert_eq!(
            parse_default("False", &ty("bool"), None),
            Some(Value::Bool(false))
        );
        assert_eq!(parse_default("None", &ty("int?"), None), Some(Value::None));
        assert_eq!(parse_default("None", &ty("int"), None), None);
        assert_eq!(
            parse_default("[0, 1]", &ty("int[]"), None),
            Some(Value::List(vec![Value::Int(0), Value::Int(1)]))
        );
        assert_eq!(
            parse_default("1", &ty("int[]"), Some(2)),
            Some(Value::List(vec![Value::Int(1), Value::Int(1)]))
        );
        assert_eq!(
            parse_default("[]", &ty("int[]"), None),
            Some(Value::List(vec![]))
        );
        assert_eq!(
            parse_default(r#""none""#, &ty("str"), None),
            Some(Value::Str("none".into()))
        );
        assert_eq!(
            parse_default(r#"" \n\t""#, &ty("str"), None),
            Some(Value::Str(" \n\t".into()))
        );
        assert_eq!(
            parse_default("none", &ty("str"), None),
            Some(Value::Str("none".into()))
        );
        // c10 prints dtypes and memory formats as numbers, which no graph spells.
        assert_eq!(parse_default("4", &ty("ScalarType?"), None), None);
    }

    #[test]
    fn checks_calls_against_the_schema() {
        let s = Schema::parse(
            "aten::bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor",
        )
        .unwrap();
        let x = Value::Node(crate::graph::NodeId(0));
        assert_eq!(s.check_call(&[x.clone(), Value::Float(0.5)], &[]), Ok(()));
        let err = s.check_call(std::slice::from_ref(&x), &[]).unwrap_err();
        assert!(err.starts_with("missing required argument `p`"), "{err}");
        let err = s
            .check_call(std::slice::from_ref(&x), &[("q".into(), Value::Float(0.5))])
            .unwrap_err();
        assert!(err.starts_with("unexpected keyword argument `q`"), "{err}");
        let err = s
            .check_call(
                &[x.clone(), Value::Float(0.5)],
                &[("p".into(), Value::Float(0.5))],
            )
            .unwrap_err();
        assert_eq!(err, "got multiple values for argument `p`");
        let err = s
            .check_call(&[x.clone(), Value::Float(0.5), Value::None], &[])
            .unwrap_err();
        assert!(
            err.starts_with("takes 2 positional arguments but 3 were given"),
            "{err}"
        );
    }

    #[test]
    fn rebinding_writes_out_defaults_the_target_lacks() {
        let inplace = Schema::parse(
            "aten::bernoulli_.float(Tensor(a!) self, float p=0.5, *, Generator? generator=None) -> Tensor(a!)",
        )
        .unwrap();
        let functional = Schema::parse(
            "aten::bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor",
        )
        .unwrap();
        let x = Value::Node(crate::graph::NodeId(0));
        // `p` left out: the target needs it written out; `generator` defaults alike.
        assert_eq!(
            inplace.rebind_call(&functional, std::slice::from_ref(&x), &[], &[]),
            Ok((vec![x.clone(), Value::Float(0.5)], vec![]))
        );
        // Given values keep their form.
        let kw = vec![("p".to_string(), Value::Float(0.25))];
        assert_eq!(
            inplace.rebind_call(&functional, std::slice::from_ref(&x), &kw, &[]),
            Ok((vec![x.clone()], kw.clone()))
        );
        // An argument the target takes by keyword only moves there.
        let kw_only = Schema::parse("aten::f(Tensor self, *, float p=0.5) -> Tensor").unwrap();
        assert_eq!(
            inplace.rebind_call(&kw_only, &[x.clone(), Value::Float(0.25)], &[], &[]),
            Ok((vec![x.clone()], vec![("p".into(), Value::Float(0.25))]))
        );
        // out= tensors are dropped.
        let out = Schema::parse(
            "aten::bernoulli.float_out(Tensor self, float p=0.5, *, Generator? generator=None, Tensor(a!) out) -> Tensor(a!)",
        )
        .unwrap();
        let o = Value::Node(crate::graph::NodeId(1));
        assert_eq!(
            out.rebind_call(
                &functional,
                std::slice::from_ref(&x),
                &[("out".into(), o)],
                &["out".to_string()]
            ),
            Ok((vec![x.clone(), Value::Float(0.5)], vec![]))
        );
        // A target argument the source lacks, and that must be given, is an error.
        let more = Schema::parse("aten::g(Tensor self, float p, int k) -> Tensor").unwrap();
        let err = inplace
            .rebind_call(&more, std::slice::from_ref(&x), &[], &[])
            .unwrap_err();
        assert!(err.starts_with("missing required argument `k`"), "{err}");
    }
}

//! Operator schemas as libtorch's dispatcher reports them.

use serde::Deserialize;

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

    /// Indices of the arguments written to in place.
    pub fn mutated_arguments(&self) -> Vec<usize> {
        (0..self.arguments.len())
            .filter(|&i| self.arguments[i].is_write)
            .collect()
    }
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
}

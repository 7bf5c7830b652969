//! FX-style node naming: `add`, `add_1`, `add_2`, and `sum_1` where a Python builtin
//! would otherwise be shadowed.

use std::collections::{HashMap, HashSet};

/// Python keywords: never valid node names.
const KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Python builtins and the names FX's generated code binds (`torch`, `inf`, `device`, ...):
/// FX never gives them to nodes, so `sum` becomes `sum_1`.
const RESERVED: [&str; 86] = [
    "abs",
    "aiter",
    "all",
    "anext",
    "any",
    "ascii",
    "bin",
    "bool",
    "breakpoint",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "compile",
    "complex",
    "copyright",
    "credits",
    "delattr",
    "dict",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "exit",
    "filter",
    "float",
    "format",
    "frozenset",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "id",
    "input",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "license",
    "list",
    "locals",
    "map",
    "max",
    "memoryview",
    "min",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "property",
    "quit",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "type",
    "vars",
    "zip",
    "__import__",
    "inf",
    "nan",
    "NoneType",
    "torch",
    "device",
    "fx_pytree",
    "pytree",
    "math",
    "operator",
    "self",
];

/// Names the printed code itself uses: a node by one of these names would break it.
const CODEGEN_NAMES: [&str; 7] = [
    "self",
    "torch",
    "device",
    "inf",
    "nan",
    "fx_pytree",
    "pytree",
];

/// True when `name` can name a node: a Python identifier that is neither a keyword nor a
/// name the printed code relies on (`self`, `torch`, `device`, `inf`, ...).
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_alphabetic() || c == '_' => {}
        _ => return false,
    }
    let rest_ok = if name.is_ascii() {
        name.bytes()
            .skip(1)
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    } else {
        chars.all(|c| c.is_alphanumeric() || c == '_')
    };
    // (Node names such as `add_tensor_12` are longer than any keyword: no lookup.)
    rest_ok
        && (name.len() > LONGEST_FORBIDDEN
            || !(KEYWORDS.contains(&name) || CODEGEN_NAMES.contains(&name)))
}

/// The length of the longest keyword or codegen name.
const LONGEST_FORBIDDEN: usize = {
    let (k, c) = (longest(&KEYWORDS), longest(&CODEGEN_NAMES));
    if k > c {
        k
    } else {
        c
    }
};

/// The length of the longest of `names` (a `const fn`: iterators are not const).
const fn longest(names: &[&str]) -> usize {
    let (mut most, mut i) = (0, 0);
    while i < names.len() {
        if names[i].len() > most {
            most = names[i].len();
        }
        i += 1;
    }
    most
}

/// Hands out unique node names the way FX's `_Namespace.create_name` does.
#[derive(Clone, Debug, Default)]
pub struct Namespace {
    used: HashSet<String>,
    base_count: HashMap<String, u64>,
}

impl Namespace {
    /// An empty namespace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks `name` as taken without going through the numbering.
    pub fn reserve(&mut self, name: &str) {
        self.used.insert(name.to_string());
    }

    /// True when `name` is already taken.
    pub fn contains(&self, name: &str) -> bool {
        self.used.contains(name)
    }

    /// A fresh name from `candidate`: illegal characters become `_`, then `_1`, `_2`, ...
    /// is appended (or an existing numeric suffix bumped) until the name is free.
    pub fn create_name(&mut self, candidate: &str) -> String {
        let mut cleaned: String = candidate
            .chars()
            .map(|c| {
                if c.is_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if cleaned.is_empty() {
            cleaned = "_unnamed".into();
        }
        if cleaned.starts_with(|c: char| c.is_ascii_digit()) {
            cleaned.insert(0, '_');
        }
        let (base, num) = split_numeric_suffix(&cleaned);
        let mut name = match num {
            Some(n) => format!("{base}_{n}"),
            None => base.to_string(),
        };
        let mut n = match num {
            Some(n) if n != 0 => n,
            _ => self.base_count.get(base).copied().unwrap_or(0),
        };
        while self.used.contains(&name) || is_reserved(&name) {
            n += 1;
            name = format!("{base}_{n}");
        }
        self.used.insert(name.clone());
        self.base_count.insert(base.to_string(), n);
        name
    }
}

fn is_reserved(name: &str) -> bool {
    KEYWORDS.contains(&name) || RESERVED.contains(&name)
}

/// Splits `add_12` into (`add`, Some(12)); names without a numeric suffix give None.
fn split_numeric_suffix(name: &str) -> (&str, Option<u64>) {
    if let Some(pos) = name.rfind('_') {
        let digits = &name[pos + 1..];
        if pos > 0 && !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
            if let Ok(n) = digits.parse::<u64>() {
                return (&name[..pos], Some(n));
            }
        }
    }
    (name, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fx_numbering() {
        let mut ns = Namespace::new();
        assert_eq!(ns.create_name("add"), "add");
        assert_eq!(ns.create_name("add"), "add_1");
        assert_eq!(ns.create_name("add"), "add_2");
        assert_eq!(ns.create_name("sum"), "sum_1");
        assert_eq!(ns.create_name("sum"), "sum_2");
        assert_eq!(ns.create_name("slice"), "slice_1");
        assert_eq!(ns.create_name("relu_"), "relu_");
        assert_eq!(ns.create_name("relu_"), "relu__1");
        assert_eq!(ns.create_name("getitem_5"), "getitem_5");
        assert_eq!(ns.create_name("getitem_5"), "getitem_6");
        assert_eq!(ns.create_name("a.b"), "a_b");
        assert_eq!(ns.create_name("1x"), "_1x");
        assert_eq!(ns.create_name(""), "_unnamed");
    }

    #[test]
    fn valid_names() {
        assert!(is_valid_name("primals_1"));
        assert!(is_valid_name("_softmax"));
        assert!(!is_valid_name("1a"));
        assert!(!is_valid_name("a b"));
        assert!(!is_valid_name("None"));
        assert!(!is_valid_name("torch"));
        assert!(!is_valid_name("self"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("fx_pytree"));
        assert!(!is_valid_name("nonlocal"));
        assert!(!is_valid_name("a-b_1"));
        assert!(is_valid_name("nonlocal_1"));
        assert!(is_valid_name("über_1"));
        assert!(!is_valid_name("über-1"));
    }
}

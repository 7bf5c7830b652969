//! The global backend registry: register, look up and list backends by name.
//!
//! Names resolve in order: registered backends, aliases, then factories for parameterised
//! names (`fault:...`, `explain:...`). When `GRAPHBUG_INJECT_FAULT` holds a fault spec,
//! every looked-up backend is wrapped with that fault, as Inductor's
//! `inject_relu_bug_TESTING_ONLY` config applies to whatever compiles.

use std::collections::BTreeMap;
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::RwLock;

use crate::backend::Backend;
use crate::fault::{FaultBackend, FaultSpec};

/// Environment variable holding a fault spec applied to every backend looked up.
pub const INJECT_FAULT_ENV: &str = "GRAPHBUG_INJECT_FAULT";

/// Tags hidden from [`list`] unless all backends are asked for.
pub const HIDDEN_TAGS: [&str; 2] = ["debug", "testing"];

/// Errors of the registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// A backend or alias with this name is already registered.
    #[error("a backend named `{0}` is already registered")]
    Duplicate(String),
    /// No backend has this name.
    #[error("unknown backend `{name}`; known backends: {}", known.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
        /// Every registered name and alias, sorted.
        known: Vec<String>,
    },
    /// A parameterised name (such as a fault spec) that does not parse.
    #[error("bad backend name `{name}`: {message}")]
    BadName {
        /// The name given.
        name: String,
        /// What is wrong, with the expected grammar.
        message: String,
    },
}

/// Builds a backend from the part of a name after its factory's prefix.
pub type Factory = fn(&str) -> Result<Arc<dyn Backend>, String>;

/// A family of parameterised backend names, such as `fault:...`.
pub struct FactoryEntry {
    /// The prefix that selects the family (`fault:`).
    pub prefix: &'static str,
    /// Builds a backend from the rest of the name.
    pub build: Factory,
    /// The name's grammar, for listings.
    pub usage: &'static str,
    /// One line on what the family does.
    pub description: &'static str,
    /// Tags of the family.
    pub tags: &'static [&'static str],
}

/// What `graphbug backends` shows of one backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendInfo {
    /// The registry name.
    pub name: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// One line on what it does.
    pub description: String,
    /// For an alias, the name it stands for.
    pub alias_of: Option<String>,
}

struct Registry {
    backends: BTreeMap<String, Arc<dyn Backend>>,
    aliases: BTreeMap<String, String>,
    factories: Vec<FactoryEntry>,
}

static REGISTRY: Lazy<RwLock<Registry>> = Lazy::new(|| {
    let mut reg = Registry {
        backends: BTreeMap::new(),
        aliases: BTreeMap::new(),
        factories: crate::builtin_factories(),
    };
    for b in crate::builtin_backends() {
        reg.backends.insert(b.name().to_string(), b);
    }
    RwLock::new(reg)
});

/// Registers a backend under its name; a name already taken is an error.
pub fn register(backend: Arc<dyn Backend>) -> Result<(), RegistryError> {
    let mut reg = REGISTRY.write();
    let name = backend.name().to_string();
    if reg.backends.contains_key(&name) || reg.aliases.contains_key(&name) {
        return Err(RegistryError::Duplicate(name));
    }
    reg.backends.insert(name, backend);
    Ok(())
}

/// Registers `alias` as another name for the registered backend `target`.
pub fn register_alias(alias: &str, target: &str) -> Result<(), RegistryError> {
    let mut reg = REGISTRY.write();
    if reg.backends.contains_key(alias) || reg.aliases.contains_key(alias) {
        return Err(RegistryError::Duplicate(alias.to_string()));
    }
    if !reg.backends.contains_key(target) {
        return Err(RegistryError::Unknown {
            name: target.to_string(),
            known: reg.backends.keys().cloned().collect(),
        });
    }
    reg.aliases.insert(alias.to_string(), target.to_string());
    Ok(())
}

/// How deeply parameterised backend names (`fault:...+fault:...`, `explain:...`) may nest.
pub const MAX_NESTING: usize = 16;

/// The backend for `name`, without the environment's fault injection.
pub fn resolve(name: &str) -> Result<Arc<dyn Backend>, RegistryError> {
    let nesting = REGISTRY
        .read()
        .factories
        .iter()
        .map(|f| name.matches(f.prefix).count())
        .sum::<usize>();
    if nesting > MAX_NESTING {
        let shown: String = name.chars().take(80).collect();
        return Err(RegistryError::BadName {
            name: format!("{shown}... ({} bytes)", name.len()),
            message: format!(
                "it nests {nesting} parameterised backends; at most {MAX_NESTING} may nest"
            ),
        });
    }
    let factory = {
        let reg = REGISTRY.read();
        let target = reg.aliases.get(name).map_or(name, String::as_str);
        if let Some(b) = reg.backends.get(target) {
            return Ok(b.clone());
        }
        match reg.factories.iter().find(|f| name.starts_with(f.prefix)) {
            Some(f) => (f.build, &name[f.prefix.len()..]),
            None => {
                let mut known: Vec<String> = reg
                    .backends
                    .keys()
                    .chain(reg.aliases.keys())
                    .cloned()
                    .collect();
                known.sort();
                known.extend(reg.factories.iter().map(|f| f.usage.to_string()));
                return Err(RegistryError::Unknown {
                    name: name.to_string(),
                    known,
                });
            }
        }
    };
    // The lock is released: factories look their inner backends up themselves.
    (factory.0)(factory.1).map_err(|message| RegistryError::BadName {
        name: name.to_string(),
        message,
    })
}

/// The backend for `name`, wrapped with `GRAPHBUG_INJECT_FAULT`'s fault when that is set.
pub fn lookup(name: &str) -> Result<Arc<dyn Backend>, RegistryError> {
    let backend = resolve(name)?;
    match std::env::var(INJECT_FAULT_ENV) {
        Ok(spec) if !spec.trim().is_empty() && !backend.delegates_faults() => {
            let source = format!("{INJECT_FAULT_ENV}={spec}");
            let spec = FaultSpec::parse_env(&spec).map_err(|message| RegistryError::BadName {
                name: source.clone(),
                message,
            })?;
            Ok(Arc::new(
                FaultBackend::new(spec, backend).with_source(source),
            ))
        }
        _ => Ok(backend),
    }
}

/// Registered backends and aliases, sorted by name; those tagged `debug` or `testing` only
/// with `all`, as `torch._dynamo.list_backends()` hides them.
pub fn list(all: bool) -> Vec<BackendInfo> {
    let reg = REGISTRY.read();
    let info = |name: &str, b: &Arc<dyn Backend>, alias_of: Option<String>| BackendInfo {
        name: name.to_string(),
        tags: b.tags().iter().map(|t| t.to_string()).collect(),
        description: b.description().to_string(),
        alias_of,
    };
    let mut out: Vec<BackendInfo> = reg
        .backends
        .iter()
        .map(|(n, b)| info(n, b, None))
        .chain(
            reg.aliases
                .iter()
                .filter_map(|(a, t)| reg.backends.get(t).map(|b| info(a, b, Some(t.clone())))),
        )
        .filter(|i| all || !i.tags.iter().any(|t| HIDDEN_TAGS.contains(&t.as_str())))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The parameterised name families (`fault:...`, `explain:...`), named by their grammar.
pub fn factories() -> Vec<BackendInfo> {
    REGISTRY
        .read()
        .factories
        .iter()
        .map(|f| BackendInfo {
            name: f.usage.to_string(),
            tags: f.tags.iter().map(|t| t.to_string()).collect(),
            description: f.description.to_string(),
            alias_of: None,
        })
        .collect()
}

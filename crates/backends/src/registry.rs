//! The global backend registry: register, look up and list backends by name.

use std::collections::BTreeMap;
use std::sync::Arc;

use once_cell::sync::Lazy;
use parking_lot::RwLock;

use crate::backend::Backend;

/// Errors of the registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// A backend with this name is already registered.
    #[error("a backend named `{0}` is already registered")]
    Duplicate(String),
    /// No backend has this name.
    #[error("unknown backend `{name}`; known backends: {}", known.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
        /// Every registered name, sorted.
        known: Vec<String>,
    },
}

/// Backends by name (sorted, so listings are deterministic).
static REGISTRY: Lazy<RwLock<BTreeMap<String, Arc<dyn Backend>>>> = Lazy::new(|| {
    let mut map: BTreeMap<String, Arc<dyn Backend>> = BTreeMap::new();
    for b in crate::builtin_backends() {
        map.insert(b.name().to_string(), b);
    }
    RwLock::new(map)
});

/// Registers a backend under its name; a name already taken is an error.
pub fn register(backend: Arc<dyn Backend>) -> Result<(), RegistryError> {
    let mut map = REGISTRY.write();
    let name = backend.name().to_string();
    if map.contains_key(&name) {
        return Err(RegistryError::Duplicate(name));
    }
    map.insert(name, backend);
    Ok(())
}

/// The backend registered under `name`.
pub fn lookup(name: &str) -> Result<Arc<dyn Backend>, RegistryError> {
    let map = REGISTRY.read();
    map.get(name)
        .cloned()
        .ok_or_else(|| RegistryError::Unknown {
            name: name.to_string(),
            known: map.keys().cloned().collect(),
        })
}

/// All registered backends, sorted by name.
pub fn list() -> Vec<Arc<dyn Backend>> {
    REGISTRY.read().values().cloned().collect()
}

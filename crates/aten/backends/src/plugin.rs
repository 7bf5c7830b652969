//! Plugin backends: shared libraries that register backends by name.
//!
//! A plugin is a `cdylib` built against the same graphbug and rustc as the host; it exports
//! a [`PluginDeclaration`] named `GRAPHBUG_PLUGIN` (use [`export_plugin!`](crate::export_plugin)).
//! The host checks the declaration's magic and ABI (crate versions, compiler, type layouts)
//! through plain C calls before any Rust value crosses, so a plugin built against another
//! graphbug or toolchain is refused with a message, never undefined behaviour.

use std::ffi::{c_char, c_void, CStr};
use std::path::Path;
use std::sync::Arc;

use crate::backend::Backend;
use crate::registry::{register, RegistryError};

/// Magic bytes opening every plugin declaration.
pub const MAGIC: [u8; 8] = *b"GBPLUGIN";

/// Environment variable naming plugins to load (colon-separated paths).
pub const PLUGINS_ENV: &str = "GRAPHBUG_PLUGINS";

/// The versions and compiler this graphbug was built with; plugins must match it.
pub const ABI_TAG: &str = concat!(
    "graphbug-backends ",
    env!("CARGO_PKG_VERSION"),
    "; ",
    env!("GRAPHBUG_RUSTC_VERSION"),
    "; ",
    env!("GRAPHBUG_TARGET"),
    "\0"
);

/// Sizes and alignments of the types that cross the plugin boundary.
pub fn layout_fingerprint() -> [u64; 8] {
    use std::mem::{align_of, size_of};
    [
        size_of::<Arc<dyn Backend>>() as u64,
        size_of::<graphbug_ir::Graph>() as u64,
        size_of::<graphbug_ir::Node>() as u64,
        size_of::<graphbug_ir::Value>() as u64,
        size_of::<crate::Failure>() as u64,
        size_of::<crate::CompileContext>() as u64,
        size_of::<crate::ExampleInput>() as u64,
        (align_of::<graphbug_ir::Value>() as u64) << 32 | size_of::<tch::Tensor>() as u64,
    ]
}

/// The ABI a plugin reports, through a C function.
#[repr(C)]
pub struct PluginAbi {
    /// NUL-terminated [`ABI_TAG`].
    pub tag: *const c_char,
    /// [`layout_fingerprint`].
    pub layout: [u64; 8],
}

/// What a plugin exports as `GRAPHBUG_PLUGIN`.
#[repr(C)]
pub struct PluginDeclaration {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// Reports the plugin's ABI; called before anything else.
    pub abi: extern "C" fn() -> PluginAbi,
    /// Adds the plugin's backends to the registrar (a `*mut PluginRegistrar`); called only
    /// once the ABI matches.
    pub register: unsafe extern "C" fn(registrar: *mut c_void),
}

/// Collects the backends a plugin offers.
#[derive(Default)]
pub struct PluginRegistrar {
    backends: Vec<Arc<dyn Backend>>,
}

impl PluginRegistrar {
    /// Offers a backend to the host.
    pub fn add(&mut self, backend: Arc<dyn Backend>) {
        self.backends.push(backend);
    }
}

/// The ABI report of this build (what `export_plugin!` makes plugins return).
pub extern "C" fn host_abi() -> PluginAbi {
    PluginAbi {
        tag: ABI_TAG.as_ptr().cast(),
        layout: layout_fingerprint(),
    }
}

/// Declares a plugin: `export_plugin!(|r| r.add(Arc::new(MyBackend)));`
#[macro_export]
macro_rules! export_plugin {
    ($register:expr) => {
        #[no_mangle]
        pub static GRAPHBUG_PLUGIN: $crate::plugin::PluginDeclaration = {
            unsafe extern "C" fn register(registrar: *mut ::std::ffi::c_void) {
                // SAFETY: the host passes its PluginRegistrar after checking the ABI.
                let registrar =
                    unsafe { &mut *registrar.cast::<$crate::plugin::PluginRegistrar>() };
                let f: fn(&mut $crate::plugin::PluginRegistrar) = $register;
                f(registrar);
            }
            $crate::plugin::PluginDeclaration {
                magic: $crate::plugin::MAGIC,
                abi: $crate::plugin::host_abi,
                register,
            }
        };
    };
}

/// Why a plugin could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// The library cannot be opened (missing, corrupt, unresolved symbols).
    #[error("cannot load plugin {path}: {message}")]
    Load {
        /// The library.
        path: String,
        /// The loader's message.
        message: String,
    },
    /// The library is not a graphbug plugin.
    #[error("{path} is not a graphbug plugin: {message}")]
    NotAPlugin {
        /// The library.
        path: String,
        /// What is missing.
        message: String,
    },
    /// The plugin was built against another graphbug or toolchain.
    #[error("plugin {path} was built for `{plugin}`, but this graphbug is `{host}`{detail}; rebuild the plugin against this graphbug")]
    AbiMismatch {
        /// The library.
        path: String,
        /// The plugin's ABI tag.
        plugin: String,
        /// The host's ABI tag.
        host: String,
        /// Extra detail (layout differences).
        detail: String,
    },
    /// A backend name the plugin offers is taken.
    #[error("plugin {path}: {source}")]
    Register {
        /// The library.
        path: String,
        /// The registry's error.
        source: RegistryError,
    },
}

/// Loads the plugin at `path` and registers its backends; returns their names.
pub fn load_plugin(path: &Path) -> Result<Vec<String>, PluginError> {
    let shown = path.display().to_string();
    // SAFETY: loading runs the library's initialisers; the checks below come before any
    // Rust value crosses the boundary.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| PluginError::Load {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    let not_plugin = |message: &str| PluginError::NotAPlugin {
        path: shown.clone(),
        message: message.to_string(),
    };
    // SAFETY: the symbol is read as a pointer to a #[repr(C)] declaration; only its magic
    // (plain bytes) is read before the ABI function confirms the layout.
    let decl: *const PluginDeclaration = unsafe {
        *lib.get::<*const PluginDeclaration>(b"GRAPHBUG_PLUGIN\0")
            .map_err(|_| not_plugin("it exports no GRAPHBUG_PLUGIN symbol"))?
    };
    let magic = unsafe { std::ptr::read_unaligned(decl.cast::<[u8; 8]>()) };
    if magic != MAGIC {
        return Err(not_plugin(
            "GRAPHBUG_PLUGIN does not start with the plugin magic",
        ));
    }
    let decl = unsafe { &*decl };
    check_abi(decl, &shown)?;
    let mut registrar = PluginRegistrar::default();
    // SAFETY: same compiler, crate versions and layouts, checked above.
    unsafe { (decl.register)((&mut registrar as *mut PluginRegistrar).cast()) };
    // The backends' code lives in the library: keep it loaded for the process.
    std::mem::forget(lib);
    let mut names = Vec::new();
    for b in registrar.backends {
        let name = b.name().to_string();
        register(b).map_err(|source| PluginError::Register {
            path: path.display().to_string(),
            source,
        })?;
        names.push(name);
    }
    Ok(names)
}

/// Checks that a declaration's ABI (tag and type layouts) is this build's.
fn check_abi(decl: &PluginDeclaration, path: &str) -> Result<(), PluginError> {
    let abi = (decl.abi)();
    let plugin_tag = if abi.tag.is_null() {
        String::new()
    } else {
        // SAFETY: a NUL-terminated string in the plugin's static data.
        unsafe { CStr::from_ptr(abi.tag) }
            .to_string_lossy()
            .into_owned()
    };
    let host_tag = ABI_TAG.trim_end_matches('\0');
    if plugin_tag == host_tag && abi.layout == layout_fingerprint() {
        return Ok(());
    }
    let detail = if plugin_tag == host_tag {
        format!(
            " (type layouts differ: {:?} vs {:?})",
            abi.layout,
            layout_fingerprint()
        )
    } else {
        String::new()
    };
    Err(PluginError::AbiMismatch {
        path: path.to_string(),
        plugin: plugin_tag,
        host: host_tag.to_string(),
        detail,
    })
}

/// Loads every plugin named in `GRAPHBUG_PLUGINS`; returns the backend names registered.
pub fn load_env_plugins() -> Result<Vec<String>, PluginError> {
    let Ok(list) = std::env::var(PLUGINS_ENV) else {
        return Ok(Vec::new());
    };
    let mut names = Vec::new();
    for p in list.split(':').filter(|p| !p.is_empty()) {
        names.extend(load_plugin(Path::new(p))?);
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn no_register(_: *mut c_void) {}

    extern "C" fn old_abi() -> PluginAbi {
        PluginAbi {
            tag: c"graphbug-backends 0.0.9; rustc 1.80.0 (051478957 2024-07-21); x86_64-unknown-linux-gnu".as_ptr(),
            layout: layout_fingerprint(),
        }
    }

    extern "C" fn other_layout() -> PluginAbi {
        let mut layout = layout_fingerprint();
        layout[1] += 8;
        PluginAbi {
            tag: ABI_TAG.as_ptr().cast(),
            layout,
        }
    }

    #[test]
    fn abi_mismatches_are_refused_with_both_versions() {
        let decl = |abi| PluginDeclaration {
            magic: MAGIC,
            abi,
            register: no_register,
        };
        assert!(check_abi(&decl(host_abi), "p.so").is_ok());
        let err = check_abi(&decl(old_abi), "p.so").unwrap_err().to_string();
        assert!(
            err.starts_with("plugin p.so was built for `graphbug-backends 0.0.9; rustc 1.80.0"),
            "{err}"
        );
        assert!(
            err.contains(&format!(
                "but this graphbug is `{}`",
                ABI_TAG.trim_end_matches('\0')
            )),
            "{err}"
        );
        assert!(
            err.ends_with("rebuild the plugin against this graphbug"),
            "{err}"
        );
        let err = check_abi(&decl(other_layout), "p.so")
            .unwrap_err()
            .to_string();
        assert!(err.contains("type layouts differ"), "{err}");
    }
}

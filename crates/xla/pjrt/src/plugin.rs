//! Loading a plugin, and calling through its function table with the version checks.

use std::ffi::c_char;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::sys::{self, PJRT_Error, PJRT_Event};
use crate::{ApiVersion, Error, ErrorCode, HEADER_VERSION};

/// The function pointer of `$name` from `$api`'s table, or [`Error::MissingCall`] when the
/// plugin's table does not reach it or leaves it null.
macro_rules! function {
    ($api:expr, $name:ident) => {{
        let api: &$crate::plugin::Api = $api;
        let offset = ::std::mem::offset_of!($crate::sys::PJRT_Api, $name);
        if offset + ::std::mem::size_of::<usize>() > api.table_size {
            Err(api.missing(stringify!($name), offset))
        } else {
            // SAFETY: the plugin's table is at least `table_size` bytes long, so it holds
            // this entry; `addr_of!` reads it without making a reference to the whole table.
            match unsafe { ::std::ptr::addr_of!((*api.table).$name).read() } {
                Some(f) => Ok(f),
                None => Err(api.missing(stringify!($name), offset)),
            }
        }
    }};
}

/// Calls `$name` with `$args` (a `&mut` argument struct): `Ok(())`, or the plugin's error
/// (destroyed), or [`Error::MissingCall`].
macro_rules! call {
    ($api:expr, $name:ident, $args:expr) => {{
        let api: &$crate::plugin::Api = $api;
        match $crate::plugin::function!(api, $name) {
            // SAFETY: the argument struct is live for the call and its `struct_size` is set.
            Ok(f) => api.check(stringify!($name), unsafe { f($args) }),
            Err(e) => Err(e),
        }
    }};
}
pub(crate) use {call, function};

/// A loaded plugin's function table, and what is known about it.
pub(crate) struct Api {
    /// The plugin file (canonical path).
    pub(crate) path: PathBuf,
    /// The table `GetPjrtApi` returned; it lives as long as the process (plugins are never
    /// unloaded).
    pub(crate) table: *const sys::PJRT_Api,
    /// How many bytes of the table may be read: the plugin's `struct_size`, at most the
    /// bindings' table.
    pub(crate) table_size: usize,
    /// The plugin's `pjrt_api_version`.
    pub(crate) version: ApiVersion,
}

// SAFETY: the table is immutable, and PJRT requires its calls to be thread-safe.
unsafe impl Send for Api {}
// SAFETY: as above.
unsafe impl Sync for Api {}

impl Api {
    pub(crate) fn missing(&self, call: &'static str, offset: usize) -> Error {
        Error::MissingCall {
            path: self.path.clone(),
            call,
            plugin: self.version,
            bindings: HEADER_VERSION,
            table_size: self.table_size,
            offset,
        }
    }

    /// `Ok(())` for a null error; otherwise the error's message and code, and the error
    /// destroyed.
    pub(crate) fn check(&self, call: &str, error: *mut PJRT_Error) -> Result<(), Error> {
        if error.is_null() {
            return Ok(());
        }
        let mut message = String::from("(no message: the plugin lacks PJRT_Error_Message)");
        if let Ok(f) = function!(self, PJRT_Error_Message) {
            let mut args = sys::PJRT_Error_Message_Args::new();
            args.error = error;
            // SAFETY: `error` is a live error of this plugin.
            unsafe { f(&mut args) };
            // SAFETY: the message lives as long as `error`, which is destroyed below.
            message = unsafe { text(args.message, args.message_size) };
        }
        let mut code = ErrorCode(2); // UNKNOWN
        if let Ok(f) = function!(self, PJRT_Error_GetCode) {
            let mut args = sys::PJRT_Error_GetCode_Args::new();
            args.error = error;
            // SAFETY: as above.
            let failed = unsafe { f(&mut args) };
            if failed.is_null() {
                code = ErrorCode(args.code);
            } else {
                self.destroy_error(failed);
            }
        }
        self.destroy_error(error);
        Err(Error::Pjrt {
            path: self.path.clone(),
            call: call.to_string(),
            code,
            message,
        })
    }

    fn destroy_error(&self, error: *mut PJRT_Error) {
        if let Ok(f) = function!(self, PJRT_Error_Destroy) {
            let mut args = sys::PJRT_Error_Destroy_Args::new();
            args.error = error;
            // SAFETY: `error` is live and destroyed once.
            unsafe { f(&mut args) };
        }
    }

    /// Waits for `event` (null: nothing to wait for), then destroys it. An error names the
    /// call the event came from.
    pub(crate) fn await_event(&self, from: &str, event: *mut PJRT_Event) -> Result<(), Error> {
        if event.is_null() {
            return Ok(());
        }
        let mut args = sys::PJRT_Event_Await_Args::new();
        args.event = event;
        let awaited = match function!(self, PJRT_Event_Await) {
            // SAFETY: `event` is a live event of this plugin.
            Ok(f) => self.check(&format!("{from} (awaiting its event)"), unsafe {
                f(&mut args)
            }),
            Err(e) => Err(e),
        };
        self.destroy_event(event);
        awaited
    }

    /// Destroys `event` (null: nothing), ignoring the plugin's error.
    pub(crate) fn destroy_event(&self, event: *mut PJRT_Event) {
        if !event.is_null() {
            let mut args = sys::PJRT_Event_Destroy_Args::new();
            args.event = event;
            let _ = call!(self, PJRT_Event_Destroy, &mut args);
        }
    }
}

/// A string the plugin owns, copied (lossily, if not UTF-8).
///
/// # Safety
/// `ptr` is null or points at `len` readable bytes.
pub(crate) unsafe fn text(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() || len == 0 {
        return String::new();
    }
    // SAFETY: the caller's promise.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// A named value of PJRT: a plugin attribute, or a `PJRT_Client_Create` option.
#[derive(Clone, Debug, PartialEq)]
pub enum Attribute {
    /// A string, e.g. `xla_version`'s.
    String(String),
    /// An integer.
    Int64(i64),
    /// A list of integers, e.g. `stablehlo_current_version`'s.
    Int64List(Vec<i64>),
    /// A float.
    Float(f32),
    /// A boolean.
    Bool(bool),
}

impl std::fmt::Display for Attribute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Attribute::String(s) => f.write_str(s),
            Attribute::Int64(i) => write!(f, "{i}"),
            Attribute::Int64List(l) => {
                let parts: Vec<String> = l.iter().map(i64::to_string).collect();
                write!(f, "{}", parts.join("."))
            }
            Attribute::Float(x) => write!(f, "{x}"),
            Attribute::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// A loaded PJRT plugin. Loading a file twice gives the same plugin, initialized once; a
/// plugin stays loaded until the process exits (as in JAX: unloading a compiler is unsafe).
#[derive(Clone)]
pub struct Plugin {
    pub(crate) api: Arc<Api>,
}

/// Plugins loaded so far, by canonical path.
static LOADED: Mutex<Vec<Arc<Api>>> = Mutex::new(Vec::new());

impl Plugin {
    /// Loads the plugin at `path`: opens it, calls `GetPjrtApi`, checks the API's major
    /// version, and calls `PJRT_Plugin_Initialize` where the plugin has it.
    pub fn load(path: impl AsRef<Path>) -> Result<Plugin, Error> {
        let given = path.as_ref();
        let path = given.canonicalize().map_err(|e| Error::Load {
            path: given.to_path_buf(),
            message: e.to_string(),
        })?;
        let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(api) = loaded.iter().find(|api| api.path == path) {
            return Ok(Plugin { api: api.clone() });
        }
        let api = Arc::new(open(path)?);
        loaded.push(api.clone());
        Ok(Plugin { api })
    }

    /// The plugin file.
    pub fn path(&self) -> &Path {
        &self.api.path
    }

    /// The PJRT C API version the plugin was built with.
    pub fn api_version(&self) -> ApiVersion {
        self.api.version
    }

    /// The plugin's attributes (`PJRT_Plugin_Attributes`), e.g. `xla_version` and
    /// `stablehlo_current_version`.
    pub fn attributes(&self) -> Result<Vec<(String, Attribute)>, Error> {
        let api = &*self.api;
        let mut args = sys::PJRT_Plugin_Attributes_Args::new();
        call!(api, PJRT_Plugin_Attributes, &mut args)?;
        let mut out = Vec::new();
        if args.attributes.is_null() || args.num_attributes == 0 {
            return Ok(out);
        }
        // The array's stride is the plugin's sizeof(PJRT_NamedValue), which a newer header
        // may have grown: take it from the first element's `struct_size`.
        // SAFETY: the plugin returned `num_attributes` live values at `attributes`.
        let first_size = unsafe { (*args.attributes).struct_size };
        let stride = first_size
            .next_multiple_of(8)
            .max(std::mem::size_of::<sys::PJRT_NamedValue>());
        for i in 0..args.num_attributes {
            // SAFETY: as above; the values live as long as the process.
            let value = unsafe {
                &*args
                    .attributes
                    .cast::<u8>()
                    .add(i * stride)
                    .cast::<sys::PJRT_NamedValue>()
            };
            // SAFETY: the plugin's strings and arrays have the sizes it gives.
            let name = unsafe { text(value.name, value.name_size) };
            let attribute = unsafe {
                match value.type_ {
                    sys::PJRT_NamedValue_kString => {
                        Attribute::String(text(value.value.string_value, value.value_size))
                    }
                    sys::PJRT_NamedValue_kInt64 => Attribute::Int64(value.value.int64_value),
                    sys::PJRT_NamedValue_kInt64List => {
                        let ptr = value.value.int64_array_value;
                        Attribute::Int64List(if ptr.is_null() {
                            Vec::new()
                        } else {
                            std::slice::from_raw_parts(ptr, value.value_size).to_vec()
                        })
                    }
                    sys::PJRT_NamedValue_kFloat => Attribute::Float(value.value.float_value),
                    sys::PJRT_NamedValue_kBool => Attribute::Bool(value.value.bool_value),
                    _ => continue,
                }
            };
            out.push((name, attribute));
        }
        Ok(out)
    }

    /// The same plugin, checked as if its function table were only `table_size` bytes long:
    /// a stand-in for an older plugin, for tests.
    #[cfg(test)]
    pub(crate) fn with_table_size(&self, table_size: usize) -> Plugin {
        Plugin {
            api: Arc::new(Api {
                path: self.api.path.clone(),
                table: self.api.table,
                table_size: table_size.min(self.api.table_size),
                version: self.api.version,
            }),
        }
    }
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.api.path)
            .field("api_version", &self.api.version)
            .finish()
    }
}

fn open(path: PathBuf) -> Result<Api, Error> {
    // SAFETY: loading a library runs its initializers; a PJRT plugin's are expected to be
    // safe to run. The library is never unloaded (leaked below).
    let library = unsafe { libloading::Library::new(&path) }.map_err(|e| Error::Load {
        path: path.clone(),
        message: e.to_string(),
    })?;
    let library: &'static libloading::Library = Box::leak(Box::new(library));
    let not_a_plugin = |message: String| Error::NotAPlugin {
        path: path.clone(),
        message,
    };
    // SAFETY: `GetPjrtApi` has this signature in every PJRT plugin.
    let get_api = unsafe { library.get::<sys::GetPjrtApi>(b"GetPjrtApi\0") }
        .map_err(|e| not_a_plugin(format!("no GetPjrtApi symbol ({e})")))?;
    // SAFETY: as above.
    let table = unsafe { get_api() };
    if table.is_null() {
        return Err(not_a_plugin("GetPjrtApi returned no function table".into()));
    }
    // SAFETY: every table starts with `struct_size`.
    let struct_size = unsafe { std::ptr::addr_of!((*table).struct_size).read() };
    let header = std::mem::offset_of!(sys::PJRT_Api, PJRT_Error_Destroy);
    if struct_size < header {
        return Err(not_a_plugin(format!(
            "its function table is {struct_size} bytes, too short to hold the API version"
        )));
    }
    // SAFETY: the table holds its version (checked above).
    let version = unsafe { std::ptr::addr_of!((*table).pjrt_api_version).read() };
    let version = ApiVersion {
        major: version.major_version,
        minor: version.minor_version,
    };
    if version.major != HEADER_VERSION.major {
        return Err(Error::Version {
            path,
            plugin: version,
            bindings: HEADER_VERSION,
        });
    }
    let api = Api {
        path,
        table,
        table_size: struct_size.min(std::mem::size_of::<sys::PJRT_Api>()),
        version,
    };
    match function!(&api, PJRT_Plugin_Initialize) {
        Ok(f) => {
            let mut args = sys::PJRT_Plugin_Initialize_Args::new();
            // SAFETY: a live argument struct with its size set.
            api.check("PJRT_Plugin_Initialize", unsafe { f(&mut args) })?;
        }
        // Plugins older than the call need no initialization.
        Err(Error::MissingCall { .. }) => {}
        Err(e) => return Err(e),
    }
    Ok(api)
}

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use super::*;
    use crate::{Client, Format};

    #[test]
    fn a_call_missing_from_an_older_plugin_is_an_error() {
        let workspace = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.."));
        let Ok(path) = crate::resolve("cpu", Some(workspace)) else {
            graphbug_run::not_run_here(
                "a_call_missing_from_an_older_plugin_is_an_error",
                "no XLA CPU plugin in .venv",
            );
            return;
        };
        let plugin = Plugin::load(path).unwrap();
        let add = b"module { func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> { %0 = stablehlo.add %a, %a : tensor<2xf32> \n return %0 : tensor<2xf32> } }";

        // A table that ends before the output metadata calls (added after PJRT_Compile):
        // the executable compiles and runs, without output types.
        let older = plugin.with_table_size(offset_of!(sys::PJRT_Api, PJRT_Compile) + 8);
        let exe = Client::new(&older)
            .unwrap()
            .compile(add, Format::Mlir)
            .unwrap();
        assert_eq!(exe.outputs(), None);
        assert_eq!(exe.num_outputs(), 1);
        let x = crate::HostTensor::new(graphbug_ir::Dtype::Float32, vec![2], vec![0; 8]).unwrap();
        assert_eq!(exe.execute(&[x]).unwrap()[0].data, [0; 8]);

        // A table that ends before PJRT_Client_Compile: compiling is a clear error.
        let offset = offset_of!(sys::PJRT_Api, PJRT_Client_Compile);
        let oldest = plugin.with_table_size(offset);
        let err = Client::new(&oldest)
            .unwrap()
            .compile(add, Format::Mlir)
            .err()
            .unwrap();
        assert!(
            matches!(
                err,
                Error::MissingCall {
                    call: "PJRT_Client_Compile",
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        let version = plugin.api_version();
        assert!(
            text.contains(&format!(
                "PJRT_Client_Compile is missing from this plugin (PJRT API {version}, a function table of {offset} bytes; the call is at byte {offset} of the table in graphbug's PJRT API 0.81 bindings)"
            )),
            "{text}"
        );
    }
}

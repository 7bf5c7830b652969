//! XLA programs compiled and executed on PJRT plugins, or by IREE, the way graphbug's
//! backends compile and run aten graphs. A backend for XLA programs is named
//! `pjrt:<plugin>` (a name `graphbug backends --all` lists, or a plugin file),
//! `iree:<target>` (IREE's compiler for one of its target backends, see [`crate::iree`]),
//! or `fault:<spec>+<backend>` for a testing fault (see [`graphbug_ir::fault::GRAMMAR`]).
//! Accuracy, NaN, compile and hang faults rewrite the program ([`crate::rewrite`]), so that the plugin itself computes the
//! wrong value, fails to compile (a custom call no compiler has) or never returns (a loop
//! it cannot drop); runtime and crash faults, which compiled XLA code has no portable way
//! to cause, fire in graphbug's execute call. `GRAPHBUG_INJECT_FAULT` applies a fault to
//! any backend.
//!
//! A plugin that aborts takes the process with it: callers run this in a child process
//! (`graphbug run` does, bounded by `--timeout`).

use std::path::PathBuf;

use graphbug_files::HostTensor;
use graphbug_ir::fault::{flaky_fires, FaultKind, FaultSpec, GRAMMAR};
use graphbug_ir::{Graph, NodeId};
use graphbug_pjrt::{Attribute, Client, CompileOptions, Format, OptionOverride, Plugin};
use graphbug_run::stage::report_stage;
use graphbug_run::{Failure, Stage, Symptom};

use crate::minify::Printer;
use crate::program::Program;

/// The backend XLA programs run on unless told otherwise: XLA's CPU plugin.
pub const DEFAULT_BACKEND: &str = "pjrt:cpu";

/// The variable that injects a fault into whichever backend runs (as for aten graphs).
pub const INJECT_FAULT_VAR: &str = "GRAPHBUG_INJECT_FAULT";

/// The compiler a backend for XLA programs names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Compiler {
    /// A PJRT plugin: a name `pjrt:<name>` resolves, or a path; with the option overrides
    /// it compiles with (`pjrt:<plugin>?key=value&key=value`: XLA's compile options and
    /// debug options by name, as JAX's `compiler_options` gives them), as written.
    Pjrt {
        /// The plugin's name or path.
        plugin: String,
        /// The overrides: (name, value as written).
        options: Vec<(String, String)>,
    },
    /// IREE, for one of its target backends (`llvm-cpu`, `cuda`, `vulkan-spirv`).
    Iree(String),
}

impl Compiler {
    /// Its backend name: `pjrt:cpu`, `iree:llvm-cpu`.
    pub fn name(&self) -> String {
        match self {
            Compiler::Pjrt { plugin, options } if options.is_empty() => format!("pjrt:{plugin}"),
            Compiler::Pjrt { plugin, options } => {
                let pairs: Vec<String> = options.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("pjrt:{plugin}?{}", pairs.join("&"))
            }
            Compiler::Iree(target) => format!("{}{target}", crate::iree::PREFIX),
        }
    }
}

/// A backend for XLA programs: a PJRT plugin or IREE, with a testing fault or without.
#[derive(Clone, Debug, PartialEq)]
pub struct XlaBackend {
    name: String,
    /// The compiler.
    pub compiler: Compiler,
    /// The testing fault injected, if any.
    pub fault: Option<FaultSpec>,
    /// How the user wrote the fault, for messages (`fault:...` or the environment's).
    source: String,
    /// `slow:<ms>+...`: how long each compile waits first (an expensive compiler, for
    /// testing tools).
    pub delay: Option<std::time::Duration>,
}

impl XlaBackend {
    /// Parses a backend name: `pjrt:<plugin>`, `iree:<target>`, `fault:<spec>[+<inner>]` or
    /// `slow:<ms>[+<inner>]` (a compiler that takes `ms` longer, for testing tools); the
    /// inner backend defaults to [`DEFAULT_BACKEND`].
    pub fn parse(name: &str) -> Result<XlaBackend, String> {
        if let Some(rest) = name.strip_prefix("slow:") {
            let (ms, inner) = rest.split_once('+').unwrap_or((rest, DEFAULT_BACKEND));
            let ms: u64 = ms.parse().map_err(|_| {
                format!("`{name}`: slow:<ms>+<backend> takes the milliseconds a compile waits, e.g. slow:1000+{DEFAULT_BACKEND}")
            })?;
            let mut inner = XlaBackend::parse(inner).map_err(|e| format!("inner backend: {e}"))?;
            inner.name = format!("slow:{ms}+{}", inner.name);
            inner.delay = Some(std::time::Duration::from_millis(ms));
            return Ok(inner);
        }
        if let Some(rest) = name.strip_prefix("fault:") {
            let (spec_text, inner) = rest.split_once('+').unwrap_or((rest, DEFAULT_BACKEND));
            let spec = FaultSpec::parse(spec_text)?;
            let inner = XlaBackend::parse(inner).map_err(|e| format!("inner backend: {e}"))?;
            if inner.fault.is_some() {
                return Err(format!(
                    "`{name}`: one fault per backend (the inner backend has one too)"
                ));
            }
            return inner.with_fault(spec, format!("fault:{spec_text}"));
        }
        if let Some(target) = name.strip_prefix(crate::iree::PREFIX) {
            if target.contains('?') {
                return Err(format!(
                    "`{name}`: compile options (`?key=value`) are XLA's, for pjrt:<plugin>; IREE's compiler takes its flags in GRAPHBUG_IREE_FLAGS"
                ));
            }
            if target.is_empty() {
                return Err(format!(
                    "`{name}` names no IREE target backend (e.g. iree:llvm-cpu; `graphbug backends --all` lists IREE's)"
                ));
            }
            return Ok(XlaBackend::plain(Compiler::Iree(target.to_string())));
        }
        let plugin = name.strip_prefix("pjrt:").ok_or_else(|| {
            format!(
                "`{name}` is not a backend for XLA programs: they run on PJRT plugins, as \
                 `pjrt:<plugin>` (e.g. {DEFAULT_BACKEND}; `graphbug backends --all` lists the \
                 plugins found), with IREE as `iree:<target>` (e.g. iree:llvm-cpu), or \
                 `fault:<spec>+<backend>`"
            )
        })?;
        let (plugin, query) = match plugin.split_once('?') {
            Some((plugin, query)) => (plugin, Some(query)),
            None => (plugin, None),
        };
        if plugin.is_empty() {
            return Err(format!(
                "`{name}` names no plugin (e.g. {DEFAULT_BACKEND}, or pjrt:/path/to/plugin.so)"
            ));
        }
        let mut options: Vec<(String, String)> = Vec::new();
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            let Some((key, value)) = pair.split_once('=').filter(|(k, _)| !k.is_empty()) else {
                return Err(format!(
                    "`{name}`: `{pair}` is no compile option: write pjrt:<plugin>?key=value&key=value (XLA's option names, e.g. pjrt:cpu?xla_disable_hlo_passes=algsimp,cse)"
                ));
            };
            if options.iter().any(|(k, _)| k == key) {
                return Err(format!("`{name}`: compile option `{key}` is given twice"));
            }
            options.push((key.to_string(), value.to_string()));
        }
        Ok(XlaBackend::plain(Compiler::Pjrt {
            plugin: plugin.to_string(),
            options,
        }))
    }

    fn plain(compiler: Compiler) -> XlaBackend {
        XlaBackend {
            name: compiler.name(),
            compiler,
            fault: None,
            source: String::new(),
            delay: None,
        }
    }

    fn with_fault(mut self, spec: FaultSpec, source: String) -> Result<XlaBackend, String> {
        if matches!(
            spec.kind,
            FaultKind::Alias | FaultKind::Mutate | FaultKind::Shape
        ) {
            return Err(format!(
                "`{source}`: {} faults break an aten op's schema to test graphbug's checkers; XLA \
                 programs have no schemas to break (use compile, runtime, accuracy, nan, crash \
                 or hang)\nexpected:\n{GRAMMAR}",
                spec.kind.name()
            ));
        }
        self.name = format!("fault:{spec}+{}", self.name);
        self.fault = Some(spec);
        self.source = source;
        Ok(self)
    }

    /// The backend with the fault of [`INJECT_FAULT_VAR`] when it is set (and the backend
    /// has no fault of its own).
    pub fn with_env_fault(self) -> Result<XlaBackend, String> {
        match std::env::var(INJECT_FAULT_VAR) {
            Ok(text) if !text.trim().is_empty() => {
                if self.fault.is_some() {
                    return Err(format!(
                        "{INJECT_FAULT_VAR} and `{}` both inject a fault: use one",
                        self.name
                    ));
                }
                let spec = FaultSpec::parse_env(&text)?;
                self.with_fault(spec, format!("{INJECT_FAULT_VAR}={}", text.trim()))
            }
            _ => Ok(self),
        }
    }

    /// The backend compiling with the compile options `extra` besides its own (each
    /// replacing its own of the same key), named as a user would write it; an error for
    /// IREE, whose compiler takes no XLA options.
    pub fn with_options(&self, extra: &[(String, String)]) -> Result<XlaBackend, String> {
        let Compiler::Pjrt { plugin, options } = &self.compiler else {
            return Err(format!(
                "`{}` is not an XLA plugin: XLA's compile options (its HLO passes, its dumps) are for pjrt:<plugin>",
                self.name
            ));
        };
        let mut options = options.clone();
        for (k, v) in extra {
            match options.iter_mut().find(|(key, _)| key == k) {
                Some(slot) => slot.1 = v.clone(),
                None => options.push((k.clone(), v.clone())),
            }
        }
        let old = self.compiler.name();
        let compiler = Compiler::Pjrt {
            plugin: plugin.clone(),
            options,
        };
        let mut b = self.clone();
        let prefix = self.name.strip_suffix(old.as_str()).unwrap_or_default();
        b.name = format!("{prefix}{}", compiler.name());
        b.compiler = compiler;
        Ok(b)
    }

    /// The value of compile option `key` the backend compiles with, if it sets one.
    pub fn option(&self, key: &str) -> Option<&str> {
        match &self.compiler {
            Compiler::Pjrt { options, .. } => options
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str()),
            Compiler::Iree(_) => None,
        }
    }

    /// The backend with its testing fault taken off: the compiler it wraps, as slow as it
    /// was.
    pub fn unfaulted(&self) -> XlaBackend {
        let mut b = XlaBackend::plain(self.compiler.clone());
        if let Some(d) = self.delay {
            b.name = format!("slow:{}+{}", d.as_millis(), b.name);
            b.delay = Some(d);
        }
        b
    }

    /// The backend with its fault pinned to the node its `<op>#<k>` names in `graph` (so it
    /// stays on that node while the minifier removes others); `None` when the fault names
    /// no node by position.
    pub fn pinned(&self, graph: &Graph) -> Option<XlaBackend> {
        let spec = self.fault.as_ref()?;
        let pinned = spec.pinned(graph)?;
        let mut b = self.clone();
        b.name = self
            .name
            .replacen(&spec.to_string(), &pinned.to_string(), 1);
        b.fault = Some(pinned);
        Some(b)
    }

    /// The backend with its fault bound to `printer`'s program, the one it is to test (see
    /// [`FaultSpec::bound`]): a fault on a node by name fires only while that node calls
    /// the op it calls in `graph`. The name stays as it is.
    pub fn bound(&self, printer: &Printer) -> XlaBackend {
        let mut b = self.clone();
        b.fault = self
            .fault
            .as_ref()
            .map(|spec| spec.bound(&printer.fault_graph(spec)));
        b
    }

    /// The backend's name, e.g. `pjrt:cpu` or `fault:nan@add+pjrt:cpu`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The plugin file: found by name (see [`graphbug_pjrt::resolve`]) in this build's
    /// workspace, or the path given; an error for IREE, which is no plugin.
    pub fn plugin_path(&self) -> Result<PathBuf, String> {
        match &self.compiler {
            Compiler::Pjrt { plugin, .. } => {
                graphbug_pjrt::resolve(plugin, Some(&graphbug_run::workspace_root()))
                    .map_err(|e| e.to_string())
            }
            Compiler::Iree(_) => Err(format!(
                "`{}` is IREE's compiler, no PJRT plugin",
                self.name
            )),
        }
    }

    /// An error unless the compiler is here: the plugin found, or IREE's tools found with
    /// the target backend named.
    pub fn ensure_present(&self) -> Result<(), String> {
        match &self.compiler {
            Compiler::Pjrt { .. } => self.plugin_path().map(|_| ()),
            Compiler::Iree(target) => crate::iree::check_target(target),
        }
    }

    /// Whether IREE compiles for it (it then takes StableHLO: see
    /// [`crate::iree::importable`]).
    pub fn is_iree(&self) -> bool {
        matches!(self.compiler, Compiler::Iree(_))
    }

    /// An error unless the fault (if any) targets a node of `graph` (a program's, see
    /// [`Program::graph`]): the spec, and what the program has instead.
    pub fn validate(&self, graph: &Graph) -> Result<(), String> {
        let Some(spec) = &self.fault else {
            return Ok(());
        };
        match spec.why_no_target(graph, &self.source) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// Compiles `program` on the plugin (`PJRT_Client_Compile`): HLO as a serialized
    /// `HloModuleProto`, StableHLO as MLIR text or bytecode. The plugin loads here, so a
    /// plugin that cannot load is a compile failure that names it. IREE compiles StableHLO
    /// text in a child process (a crash of its compiler is a compile failure too).
    pub fn compile(&self, program: &Program) -> Result<Compiled, Failure> {
        report_stage("compile");
        if let Some(d) = self.delay {
            std::thread::sleep(d);
        }
        let failure =
            |message: String| Failure::new(&self.name, Stage::Compile, Symptom::Error, message);
        let mut program = std::borrow::Cow::Borrowed(program);
        let mut fires = None;
        // Where an injected compile fault is: the compiler's error says it, as a
        // compiler's error names the instruction it failed on.
        let mut compile_fault = None;
        if let Some(spec) = &self.fault {
            let graph = program
                .fault_graph(spec)
                .map_err(|e| failure(e.to_string()))?;
            let targets = spec.targets(&graph);
            if !targets.is_empty() && spec.percent.is_none_or(flaky_fires) {
                let at = Target::of(&graph, targets[0]);
                match spec.kind {
                    FaultKind::Accuracy | FaultKind::Nan | FaultKind::Compile | FaultKind::Hang => {
                        let rewritten = program
                            .inject(spec)
                            .map_err(|e| at.failure(failure(format!("{}: {e}", self.source))))?;
                        program = std::borrow::Cow::Owned(rewritten);
                        if spec.kind == FaultKind::Compile {
                            compile_fault = Some(at);
                        }
                    }
                    FaultKind::Runtime | FaultKind::Crash => {
                        fires = Some((spec.kind, at));
                    }
                    // Refused when the backend was made.
                    FaultKind::Alias | FaultKind::Mutate | FaultKind::Shape => {}
                }
            }
        }
        let compile_failure = |e: String, symptom: Symptom| {
            let f = Failure::new(&self.name, Stage::Compile, symptom, e.clone());
            match &compile_fault {
                Some(at) => at.failure(Failure {
                    message: format!("injected compile fault at `{}` ({}): {e}", at.node, at.op),
                    ..f
                }),
                None => f,
            }
        };
        let partitioning = program.partitioning().map_err(|e| failure(e.to_string()))?;
        // A program over several devices hands back whole arrays: their dimensions are
        // the program's.
        let output_dims = if partitioning.devices() > 1 {
            output_dims(&program).map_err(failure)?
        } else {
            Vec::new()
        };
        let executable = match &self.compiler {
            Compiler::Pjrt { plugin: name, options } => {
                let (code, format) = pjrt_code(&program).map_err(failure)?;
                let path = self.plugin_path().map_err(failure)?;
                let (plugin, client) =
                    client_of(&path, name, partitioning.devices()).map_err(failure)?;
                let options = CompileOptions {
                    partitioning,
                    overrides: options
                        .iter()
                        .map(|(k, v)| (k.clone(), OptionOverride::parse(v)))
                        .collect(),
                };
                let executable = client
                    .compile_with(&code, format, &options)
                    .map_err(|e| compile_failure(e.to_string(), Symptom::Error))?;
                Executable::Pjrt {
                    executable,
                    output_dims,
                    _client: client,
                    _plugin: plugin,
                }
            }
            Compiler::Iree(_) if partitioning.devices() > 1 => {
                return Err(failure(format!(
                    "the program runs on {partitioning}: graphbug runs IREE on one device (iree-run-module), so programs over several devices run on PJRT plugins (e.g. {DEFAULT_BACKEND})"
                )))
            }
            Compiler::Iree(target) => {
                let module = match program.as_ref() {
                    Program::StableHlo(m) => m,
                    _ => return Err(failure(format!(
                        "IREE compiles StableHLO text; this program is {}: graphbug's run, minify and repro convert it first (see graphbug_xla::iree::importable)",
                        program.unit()
                    ))),
                };
                let module = crate::iree::compile(module, target)
                    .map_err(|e| compile_failure(e.message.clone(), e.symptom()))?;
                Executable::Iree(module)
            }
        };
        Ok(Compiled {
            backend: self.name.clone(),
            source: self.source.clone(),
            executable,
            fires,
        })
    }
}

/// The node a fault fires at, for messages.
#[derive(Clone, Debug)]
struct Target {
    node: String,
    op: String,
}

impl Target {
    fn of(graph: &Graph, id: NodeId) -> Target {
        let node = graph.node(id);
        Target {
            node: node.name.to_string(),
            op: node.op().map(ToString::to_string).unwrap_or_default(),
        }
    }

    fn failure(&self, failure: Failure) -> Failure {
        failure.at(&self.node, &self.op)
    }
}

/// The clients made so far, one per plugin file, with the devices each has: a process
/// compiles every program of a plugin with one client (`PJRT_Client_Create` starts a
/// runtime: threads, a GPU context), as JAX does, and makes a new one only for a program
/// over more devices than it has.
static CLIENTS: std::sync::Mutex<Vec<(PathBuf, Plugin, Client, usize)>> =
    std::sync::Mutex::new(Vec::new());

/// The plugin at `path` (named `name` by the backend) and this process's client of it, with
/// at least `devices` devices where the plugin can make them: XLA's CPU plugin takes its
/// device count when the client is made (`cpu_device_count`, as JAX's
/// `jax_num_cpu_devices`); another plugin has the devices it has, and a program needing
/// more is refused when compiled.
fn client_of(
    path: &std::path::Path,
    name: &str,
    devices: usize,
) -> Result<(Plugin, Client), String> {
    let mut clients = CLIENTS.lock().unwrap_or_else(|e| e.into_inner());
    let options = if is_xla_gpu_plugin(name, path) {
        gpu_client_options(|var| std::env::var(var).ok())?
    } else {
        Vec::new()
    };
    let made = |plugin: &Plugin, options: &[(String, Attribute)]| {
        let client = Client::with_options(plugin, options).map_err(|e| e.to_string())?;
        let have = client
            .addressable_devices()
            .map_err(|e| e.to_string())?
            .len();
        Ok::<_, String>((client, have))
    };
    let i = match clients.iter().position(|(p, _, _, _)| p == path) {
        Some(i) => i,
        None => {
            let plugin = Plugin::load(path).map_err(|e| e.to_string())?;
            let (client, have) = made(&plugin, &options)?;
            clients.push((path.to_path_buf(), plugin, client, have));
            clients.len() - 1
        }
    };
    let (_, plugin, client, have) = &mut clients[i];
    if *have < devices && client.platform_name().map_err(|e| e.to_string())? == "cpu" {
        let mut options = options;
        options.push(("cpu_device_count".into(), Attribute::Int64(devices as i64)));
        (*client, *have) = made(plugin, &options)?;
    }
    Ok((plugin.clone(), client.clone()))
}

/// The dimensions of each of `program`'s outputs, for a run that hands back whole arrays.
pub fn output_dims(program: &Program) -> Result<Vec<Vec<usize>>, String> {
    let graph = program.graph().map_err(|e| e.to_string())?;
    graph
        .outputs()
        .iter()
        .map(|v| {
            let graphbug_ir::Value::Node(id) = v else {
                return Err(format!("an output that is no array ({v:?})"));
            };
            let node = graph.node(*id);
            match &node.meta {
                graphbug_ir::Meta::Tensor(t) => t
                    .shape
                    .iter()
                    .map(|&d| {
                        usize::try_from(d)
                            .map_err(|_| format!("output `{}` has a dimension of {d}", node.name))
                    })
                    .collect(),
                _ => Err(format!("output `{}` is no array", node.name)),
            }
        })
        .collect()
}

/// Whether the plugin `name` (at `path`) is XLA's GPU plugin (`pjrt:cuda`, `pjrt:rocm`, JAX's
/// `jax_plugins/xla_cuda13/xla_cuda_plugin.so`, XLA's `pjrt_c_api_gpu_plugin.so`).
pub fn is_xla_gpu_plugin(name: &str, path: &std::path::Path) -> bool {
    let text = format!("{name} {}", path.display()).to_lowercase();
    ["cuda", "rocm", "pjrt_c_api_gpu"]
        .iter()
        .any(|k| text.contains(k))
}

/// The `PJRT_Client_Create` options of XLA's GPU plugin, from JAX's variables
/// (`XLA_PYTHON_CLIENT_PREALLOCATE`, `XLA_PYTHON_CLIENT_MEM_FRACTION`,
/// `XLA_PYTHON_CLIENT_ALLOCATOR`) as JAX's own plugin reads them, except that preallocation is
/// off unless a variable asks for it: graphbug runs several processes on one GPU (its
/// workers), and the plugin's default, each client taking 75% of the GPU's memory, would leave
/// the second none. `var` reads a variable.
pub fn gpu_client_options(
    var: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, Attribute)>, String> {
    let mut options = Vec::new();
    let preallocate = match var("XLA_PYTHON_CLIENT_PREALLOCATE").as_deref() {
        None | Some("") => false,
        Some(v) => match v.to_lowercase().as_str() {
            "1" | "true" => true,
            "0" | "false" => false,
            _ => {
                return Err(format!(
                    "XLA_PYTHON_CLIENT_PREALLOCATE={v}: expected true or false"
                ))
            }
        },
    };
    options.push(("preallocate".to_string(), Attribute::Bool(preallocate)));
    if let Some(v) = var("XLA_PYTHON_CLIENT_MEM_FRACTION").filter(|v| !v.is_empty()) {
        let fraction: f32 = v
            .parse()
            .ok()
            .filter(|f| (0.0..=1.0).contains(f))
            .ok_or_else(|| {
                format!("XLA_PYTHON_CLIENT_MEM_FRACTION={v}: expected a fraction in [0, 1]")
            })?;
        options.push(("memory_fraction".to_string(), Attribute::Float(fraction)));
    }
    if let Some(v) = var("XLA_PYTHON_CLIENT_ALLOCATOR").filter(|v| !v.is_empty()) {
        if !["default", "platform", "bfc", "cuda_async"].contains(&v.as_str()) {
            return Err(format!(
                "XLA_PYTHON_CLIENT_ALLOCATOR={v}: expected default, platform, bfc or cuda_async"
            ));
        }
        options.push(("allocator".to_string(), Attribute::String(v)));
    }
    Ok(options)
}

/// What a PJRT plugin compiles for `program`, and in which format.
pub fn pjrt_code(program: &Program) -> Result<(Vec<u8>, Format), String> {
    match program {
        Program::Hlo { module, .. } => crate::hlo::proto::to_proto(module)
            .map(|bytes| (bytes, Format::Hlo))
            .map_err(|e| e.to_string()),
        Program::StableHlo(m) => Ok((m.text.clone().into_bytes(), Format::Mlir)),
        Program::Bytecode { bytes, .. } => Ok((bytes.clone(), Format::Mlir)),
    }
}

/// A program compiled, ready to run.
pub struct Compiled {
    backend: String,
    source: String,
    executable: Executable,
    fires: Option<(FaultKind, Target)>,
}

/// What a compiler made of a program.
enum Executable {
    /// A PJRT plugin's executable.
    Pjrt {
        executable: graphbug_pjrt::Executable,
        /// The outputs' dimensions, for a program over several devices.
        output_dims: Vec<Vec<usize>>,
        // The executable needs its client and plugin alive.
        _client: Client,
        _plugin: Plugin,
    },
    /// IREE's module.
    Iree(crate::iree::Module),
}

impl Compiled {
    /// Runs the executable on `inputs` (`PJRT_LoadedExecutable_Execute`, or IREE's runtime
    /// in a child process): its outputs, a tuple's elements in order. A runtime fault fails
    /// here, a crash fault aborts the process.
    pub fn execute(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, Failure> {
        report_stage("runtime");
        let failure =
            |message: String| Failure::new(&self.backend, Stage::Runtime, Symptom::Error, message);
        if let Some((kind, at)) = &self.fires {
            let what = format!(
                "injected {} fault at `{}` ({})",
                kind.name(),
                at.node,
                self.source
            );
            match kind {
                FaultKind::Crash => {
                    eprintln!("{what}: aborting");
                    std::process::abort();
                }
                _ => return Err(at.failure(failure(what))),
            }
        }
        match &self.executable {
            Executable::Pjrt {
                executable,
                output_dims,
                ..
            } if executable.partitioning().devices() > 1 => {
                let run = executable
                    .execute_global(inputs, output_dims)
                    .map_err(|e| failure(e.to_string()))?;
                match run.disagreements.first() {
                    None => Ok(run.outputs),
                    Some((k, d)) => Err(Failure::new(
                        &self.backend,
                        Stage::Accuracy,
                        Symptom::WrongResult,
                        format!(
                            "the devices disagree: output {k}'s copies on device {} and device {} differ in {} element{} (the program runs on {}{})",
                            d.first,
                            d.other,
                            d.elements,
                            if d.elements == 1 { "" } else { "s" },
                            executable.partitioning(),
                            if executable.partitioning().num_replicas > 1 {
                                "; every replica takes the same inputs, so the copies of an output must agree"
                            } else {
                                ""
                            }
                        ),
                    )),
                }
            }
            Executable::Pjrt { executable, .. } => executable
                .execute(inputs)
                .map_err(|e| failure(e.to_string())),
            Executable::Iree(module) => module
                .execute(inputs)
                .map_err(|e| Failure::new(&self.backend, Stage::Runtime, e.symptom(), e.message)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn vars<'a>(set: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            set.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn iree_backends_are_named_by_target_and_take_faults() {
        let b = XlaBackend::parse("iree:llvm-cpu").unwrap();
        assert_eq!(b.compiler, Compiler::Iree("llvm-cpu".into()));
        assert!(b.is_iree() && b.name() == "iree:llvm-cpu");
        assert!(b.plugin_path().unwrap_err().contains("no PJRT plugin"));
        let f = XlaBackend::parse("fault:nan@stablehlo.add+iree:vmvx").unwrap();
        assert_eq!(f.name(), "fault:nan@stablehlo.add+iree:vmvx");
        assert_eq!(f.unfaulted(), XlaBackend::parse("iree:vmvx").unwrap());
        assert!(XlaBackend::parse("iree:")
            .unwrap_err()
            .contains("names no IREE target"));
        assert!(!XlaBackend::parse("pjrt:cpu").unwrap().is_iree());
        let err = XlaBackend::parse("tvm:cpu").unwrap_err();
        assert!(err.contains("iree:<target>"), "{err}");
    }

    #[test]
    fn plugins_take_compile_options_in_their_name() {
        let name = "pjrt:cpu?xla_disable_hlo_passes=algsimp,cse&xla_cpu_enable_fast_math=true";
        let b = XlaBackend::parse(name).unwrap();
        assert_eq!(
            b.compiler,
            Compiler::Pjrt {
                plugin: "cpu".into(),
                options: vec![
                    ("xla_disable_hlo_passes".into(), "algsimp,cse".into()),
                    ("xla_cpu_enable_fast_math".into(), "true".into())
                ]
            }
        );
        assert_eq!(b.name(), name);
        // A fault wraps it, and taking the fault off keeps the options.
        let f = XlaBackend::parse(&format!("fault:nan@add+{name}")).unwrap();
        assert_eq!(f.unfaulted(), b);
        // Options added (a bisection's trial) replace the same key and keep the rest, the
        // fault and the name's form; IREE takes none.
        let extra = [
            ("xla_disable_hlo_passes".to_string(), "fusion".to_string()),
            ("xla_dump_to".to_string(), "/d".to_string()),
        ];
        let t = f.with_options(&extra).unwrap();
        assert_eq!(
            t.name(),
            "fault:nan@add+pjrt:cpu?xla_disable_hlo_passes=fusion&xla_cpu_enable_fast_math=true&xla_dump_to=/d"
        );
        assert_eq!(XlaBackend::parse(t.name()).unwrap(), t);
        assert_eq!(t.option("xla_dump_to"), Some("/d"));
        assert_eq!(b.option("xla_dump_to"), None);
        let e = XlaBackend::parse("iree:llvm-cpu")
            .unwrap()
            .with_options(&extra)
            .unwrap_err();
        assert!(e.contains("not an XLA plugin"), "{e}");
        for (bad, says) in [
            ("pjrt:cpu?fast", "`fast` is no compile option"),
            ("pjrt:cpu?=1", "`=1` is no compile option"),
            ("pjrt:cpu?a=1&a=2", "compile option `a` is given twice"),
            ("pjrt:?a=1", "names no plugin"),
            ("iree:llvm-cpu?a=1", "GRAPHBUG_IREE_FLAGS"),
        ] {
            let err = XlaBackend::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn iree_refuses_a_program_over_several_devices_by_name() {
        let text = "HloModule m, num_partitions=4\n\nENTRY e {\n  ROOT p = f32[2] parameter(0), sharding={devices=[4]<=[4]}\n}\n";
        let program = Program::read(text.as_bytes(), crate::program::Kind::HloText).unwrap();
        let iree = XlaBackend::parse("iree:llvm-cpu").unwrap();
        let failure = iree.compile(&program).err().expect("refused");
        assert_eq!(failure.stage, Stage::Compile);
        assert!(
            failure
                .message
                .contains("runs on 4 devices (1 replica x 4 partitions)")
                && failure.message.contains("PJRT plugins"),
            "{failure}"
        );
        assert_eq!(output_dims(&program).unwrap(), [vec![2]]);
    }

    #[test]
    fn xla_gpu_plugins_are_told_apart_from_others() {
        let jax = "/venv/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so";
        assert!(is_xla_gpu_plugin("cuda", Path::new(jax)));
        assert!(is_xla_gpu_plugin(jax, Path::new(jax)));
        assert!(is_xla_gpu_plugin("rocm", Path::new("/opt/rocm_plugin.so")));
        let cpu = "/venv/site-packages/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so";
        assert!(!is_xla_gpu_plugin("cpu", Path::new(cpu)));
    }

    #[test]
    fn gpu_clients_do_not_preallocate_unless_jax_variables_ask() {
        let get = |o: &[(String, Attribute)], k: &str| {
            o.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        };
        let none = gpu_client_options(vars(&[])).unwrap();
        assert_eq!(get(&none, "preallocate"), Some(Attribute::Bool(false)));
        assert_eq!(none.len(), 1);
        let set = gpu_client_options(vars(&[
            ("XLA_PYTHON_CLIENT_PREALLOCATE", "true"),
            ("XLA_PYTHON_CLIENT_MEM_FRACTION", ".2"),
            ("XLA_PYTHON_CLIENT_ALLOCATOR", "platform"),
        ]))
        .unwrap();
        assert_eq!(get(&set, "preallocate"), Some(Attribute::Bool(true)));
        assert_eq!(get(&set, "memory_fraction"), Some(Attribute::Float(0.2)));
        assert_eq!(
            get(&set, "allocator"),
            Some(Attribute::String("platform".into()))
        );
        for (k, v) in [
            ("XLA_PYTHON_CLIENT_PREALLOCATE", "maybe"),
            ("XLA_PYTHON_CLIENT_MEM_FRACTION", "2"),
            ("XLA_PYTHON_CLIENT_ALLOCATOR", "mine"),
        ] {
            let err = gpu_client_options(vars(&[(k, v)])).unwrap_err();
            assert!(err.contains(k), "{err}");
        }
    }
}

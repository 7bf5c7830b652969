//! Repro directories of XLA programs: what a user of the PyTorch/XLA RFC sends instead of
//! their model. The layout is the one `graphbug_capture.jax.dump` writes too:
//!
//! ```text
//! DIR/program.hlo | program.hlo.pb | program.mlir   the program, in the form it came in
//! DIR/program.faulted.<ext>          with a graphbug fault only: what the simulated
//!                                    miscompiling compiler compiled
//! DIR/inputs.safetensors             its arguments: arg0, arg1, ... (`.npz` when one is
//!                                    complex, which safetensors cannot hold)
//! DIR/reference_outputs.safetensors  the reference plugin's outputs: out0, out1, ...
//! DIR/manifest.json                  backend, plugin (path, PJRT and StableHLO versions),
//!                                    check, tolerance, the failure
//! DIR/README.md                      what failed and the commands to go on
//! DIR/repro.py                       JAX runs the program on the same plugin and on XLA
//!                                    CPU and compares them (no graphbug needed)
//! ```

use std::path::{Path, PathBuf};

use graphbug_accuracy::{AccuracyMode, SameOptions};
use graphbug_files::HostTensor;
use graphbug_ir::fault::FaultKind;
use graphbug_minifier::{CheckKind, Signature};
use serde::{Deserialize, Serialize};

use crate::execute::{Compiler, XlaBackend};
use crate::minify::file_name;
use crate::program::{Kind, Program};

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The inputs' file (keys `arg0`, `arg1`...): `inputs.safetensors`, or `inputs.npz` (see
/// [`write_numbered`]).
pub const INPUTS: &str = "inputs";

/// The reference outputs' file (keys `out0`, `out1`...): `reference_outputs.safetensors`
/// or `.npz`.
pub const REFERENCE_OUTPUTS: &str = "reference_outputs";

/// Writes `tensors` as `prefix0`, `prefix1`... into `dir/stem.safetensors`, or
/// `dir/stem.npz` when one is complex (safetensors has no complex type); returns the file.
pub fn write_numbered(
    dir: &Path,
    stem: &str,
    prefix: &str,
    tensors: &[HostTensor],
) -> Result<PathBuf, String> {
    let complex = tensors.iter().any(|t| t.dtype.is_complex());
    let path = dir.join(format!(
        "{stem}.{}",
        if complex { "npz" } else { "safetensors" }
    ));
    let named: Vec<(String, HostTensor)> = tensors
        .iter()
        .enumerate()
        .map(|(k, t)| (format!("{prefix}{k}"), t.clone()))
        .collect();
    graphbug_files::write(&path, &named).map_err(|e| e.to_string())?;
    Ok(path)
}

/// The file [`write_numbered`] wrote for `stem` in `dir`, if any.
pub fn numbered_file(dir: &Path, stem: &str) -> Option<PathBuf> {
    ["safetensors", "npz"]
        .iter()
        .map(|ext| dir.join(format!("{stem}.{ext}")))
        .find(|p| p.exists())
}

/// The script that reproduces a directory with JAX alone (the same file the Python
/// package copies into the directories it writes).
pub const REPRO_PY: &str = include_str!("../../../../python/graphbug_capture/xla_repro.py");

/// The version of the layout, in `graphbug_xla_repro`.
pub const LAYOUT_VERSION: u32 = 1;

/// `allclose` tolerances, as `repro.py` applies them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        let tol = SameOptions::repro().tol;
        Tolerance {
            rtol: tol,
            atol: tol,
        }
    }
}

/// `manifest.json` of an XLA repro directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct XlaManifest {
    /// The layout's version; its presence marks the directory.
    pub graphbug_xla_repro: u32,
    /// The program's file name.
    pub program: String,
    /// Its form: `hlo-text`, `hlo-proto` or `stablehlo-text`.
    pub form: String,
    /// With a graphbug fault: the program as the simulated compiler compiled it.
    #[serde(default)]
    pub faulted_program: Option<String>,
    /// graphbug's name of the backend under test (`pjrt:cpu`, `fault:...+pjrt:cuda`).
    pub backend: String,
    /// The plugin library the backend runs on.
    #[serde(default)]
    pub plugin: Option<String>,
    /// The plugin's PJRT platform (`cpu`, `cuda`), when the backend names it as JAX does.
    #[serde(default)]
    pub platform: Option<String>,
    /// The plugin's PJRT C API version.
    #[serde(default)]
    pub pjrt_api: Option<String>,
    /// The StableHLO version the plugin reads (its `stablehlo_current_version`).
    #[serde(default)]
    pub stablehlo_version: Option<String>,
    /// IREE's compiler (`iree-compile`), for an `iree:` backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iree_compiler: Option<String>,
    /// The version IREE's compiler says it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iree_version: Option<String>,
    /// The reference plugin's backend.
    #[serde(default = "default_reference")]
    pub reference_backend: String,
    /// The reference plugin library.
    #[serde(default)]
    pub reference_plugin: Option<String>,
    /// What counts as failing; `None` (a capture): any failure, wrong results included.
    #[serde(default)]
    pub check: Option<CheckKind>,
    /// How wrong results are judged.
    #[serde(default)]
    pub accuracy: AccuracyMode,
    /// `repro.py`'s tolerances.
    #[serde(default)]
    pub tolerance: Tolerance,
    /// The repro level the failure was found at.
    #[serde(default)]
    pub level: Option<u8>,
    /// The failure, when one was seen.
    #[serde(default)]
    pub failure: Option<Signature>,
    /// Who wrote the directory.
    #[serde(default)]
    pub captured_by: Option<String>,
    /// The option overrides the backend's plugin compiles with (`pjrt:<plugin>?key=value`),
    /// each value typed as the plugin is given it, for `repro.py`.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub compile_options: serde_json::Map<String, serde_json::Value>,
    /// For a program over several devices: how many, and the dimensions of its outputs,
    /// which `repro.py` assembles from the devices' pieces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Devices>,
}

/// The devices a program of a repro directory runs on (see
/// [`graphbug_pjrt::Partitioning`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Devices {
    /// XLA's `num_replicas`.
    pub num_replicas: usize,
    /// XLA's `num_partitions` (SPMD-partitioned when above 1).
    pub num_partitions: usize,
    /// Whether Shardy partitions it (`use_shardy_partitioner`).
    pub shardy: bool,
    /// Each output's dimensions, as the whole array.
    pub output_dims: Vec<Vec<usize>>,
}

impl Devices {
    /// What a manifest says of `program`'s devices: `None` for a program on one device.
    pub fn of(program: &Program) -> Result<Option<Devices>, String> {
        let p = program.partitioning().map_err(|e| e.to_string())?;
        if p.devices() == 1 {
            return Ok(None);
        }
        Ok(Some(Devices {
            num_replicas: p.num_replicas,
            num_partitions: p.num_partitions,
            shardy: p.shardy,
            output_dims: crate::execute::output_dims(program)?,
        }))
    }
}

fn default_reference() -> String {
    crate::execute::DEFAULT_BACKEND.to_string()
}

/// The manifest's name of a form.
pub fn form_name(kind: Kind) -> &'static str {
    match kind {
        Kind::HloText => "hlo-text",
        Kind::HloProto => "hlo-proto",
        Kind::StableHloText | Kind::StableHloBytecode => "stablehlo-text",
    }
}

/// The form a manifest names.
pub fn form_of(name: &str) -> Result<Kind, String> {
    match name {
        "hlo-text" => Ok(Kind::HloText),
        "hlo-proto" => Ok(Kind::HloProto),
        "stablehlo-text" => Ok(Kind::StableHloText),
        other => Err(format!(
            "unknown program form `{other}` (expected hlo-text, hlo-proto or stablehlo-text)"
        )),
    }
}

/// What a plugin says of itself, without starting a client (which compiles nothing, but
/// may abort or hang as a compiler can; this process does not run one): its path, PJRT API
/// and StableHLO versions (each `None` where it cannot say).
fn plugin_facts(backend: &XlaBackend) -> (Option<String>, Option<String>, Option<String>) {
    let Ok(path) = backend.plugin_path() else {
        return (None, None, None);
    };
    let Ok(plugin) = graphbug_pjrt::Plugin::load(&path) else {
        return (Some(path.display().to_string()), None, None);
    };
    let stablehlo = plugin.attributes().ok().and_then(|attrs| {
        attrs
            .into_iter()
            .find(|(k, _)| k == "stablehlo_current_version")
            .map(|(_, v)| v.to_string())
    });
    (
        Some(path.display().to_string()),
        Some(plugin.api_version().to_string()),
        stablehlo,
    )
}

/// The option overrides of `backend`'s plugin, typed (see
/// [`graphbug_pjrt::OptionOverride::parse`]).
fn compile_options(backend: &XlaBackend) -> serde_json::Map<String, serde_json::Value> {
    use graphbug_pjrt::OptionOverride;
    let Compiler::Pjrt { options, .. } = &backend.compiler else {
        return serde_json::Map::new();
    };
    options
        .iter()
        .map(|(k, v)| {
            let value = match OptionOverride::parse(v) {
                OptionOverride::String(s) => serde_json::Value::String(s),
                OptionOverride::Bool(b) => serde_json::Value::Bool(b),
                OptionOverride::Int(i) => serde_json::Value::from(i),
                OptionOverride::Double(d) => serde_json::Value::from(d),
            };
            (k.clone(), value)
        })
        .collect()
}

impl XlaManifest {
    /// The manifest of a program of form `kind` checked against `backend` (with
    /// `reference`), its facts asked of the plugins.
    pub fn new(kind: Kind, backend: &XlaBackend, reference: &XlaBackend) -> XlaManifest {
        let (plugin, pjrt_api, stablehlo_version) = plugin_facts(backend);
        // A plugin named as JAX names platforms (`pjrt:cpu`, `pjrt:cuda`) is that platform.
        let platform = match &backend.compiler {
            Compiler::Pjrt { plugin, .. } => (!plugin.contains('/')).then(|| plugin.clone()),
            Compiler::Iree(_) => None,
        };
        let iree = backend
            .is_iree()
            .then(crate::iree::Tools::find)
            .and_then(Result::ok);
        // Only its path: the facts of a plugin start a client of it.
        let reference_plugin = reference
            .plugin_path()
            .ok()
            .map(|p| p.display().to_string());
        XlaManifest {
            graphbug_xla_repro: LAYOUT_VERSION,
            program: file_name(kind).to_string(),
            form: form_name(kind).to_string(),
            faulted_program: None,
            backend: backend.name().to_string(),
            plugin,
            platform,
            pjrt_api,
            stablehlo_version,
            iree_compiler: iree.as_ref().map(|t| t.compile.display().to_string()),
            iree_version: iree.as_ref().and_then(crate::iree::Tools::version),
            reference_backend: reference.name().to_string(),
            reference_plugin,
            check: None,
            accuracy: AccuracyMode::default(),
            tolerance: Tolerance::default(),
            level: None,
            failure: None,
            captured_by: Some(format!("graphbug {}", env!("CARGO_PKG_VERSION"))),
            compile_options: compile_options(backend),
            devices: None,
        }
    }

    /// The manifest as written (pretty JSON).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("manifests serialize") + "\n"
    }
}

/// An XLA repro directory, read.
#[derive(Debug)]
pub struct XlaCase {
    /// Where it was read from.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: XlaManifest,
    /// The program file's bytes.
    pub bytes: Vec<u8>,
    /// The program.
    pub program: Program,
    /// Its inputs, by parameter.
    pub inputs: Vec<HostTensor>,
    /// The reference outputs, when the directory has them.
    pub reference_outputs: Option<Vec<HostTensor>>,
}

/// Tensors `prefix0`, `prefix1`... of `file`, exactly `n` of them when `n` is given.
fn numbered(file: &Path, prefix: &str, n: Option<usize>) -> Result<Vec<HostTensor>, String> {
    let mut named = graphbug_files::read(file).map_err(|e| e.to_string())?;
    let count = n.unwrap_or(named.len());
    let mut out = Vec::with_capacity(count);
    for k in 0..count {
        let key = format!("{prefix}{k}");
        let j = named
            .iter()
            .position(|(n, _)| *n == key)
            .ok_or_else(|| format!("{}: no `{key}` ({count} expected)", file.display()))?;
        out.push(named.remove(j).1);
    }
    if let Some((extra, _)) = named.first() {
        return Err(format!(
            "{}: `{extra}` is not one of {prefix}0..{prefix}{}",
            file.display(),
            count.saturating_sub(1)
        ));
    }
    Ok(out)
}

/// Reads the XLA repro directory `dir`; errors name the missing or bad file.
pub fn read_dir(dir: &Path) -> Result<XlaCase, String> {
    let mpath = dir.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&mpath).map_err(|e| format!("{}: {e}", mpath.display()))?;
    let manifest: XlaManifest =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", mpath.display()))?;
    let kind = form_of(&manifest.form).map_err(|e| format!("{}: {e}", mpath.display()))?;
    let ppath = dir.join(&manifest.program);
    let bytes = std::fs::read(&ppath).map_err(|e| format!("{}: {e}", ppath.display()))?;
    let program = Program::read(&bytes, kind).map_err(|e| format!("{}: {e}", ppath.display()))?;
    let params = program
        .parameters()
        .map_err(|e| format!("{}: {e}", ppath.display()))?;
    let ipath = numbered_file(dir, INPUTS)
        .ok_or_else(|| format!("{}: no inputs.safetensors (or inputs.npz)", dir.display()))?;
    let inputs = numbered(&ipath, "arg", Some(params.len()))?;
    for (k, ((name, meta), t)) in params.iter().zip(&inputs).enumerate() {
        let dims: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
        if t.dtype != meta.dtype || dims != meta.shape.as_slice() {
            return Err(format!(
                "{}: arg{k} is {}{:?}, parameter {k} `{name}` takes {meta}",
                ipath.display(),
                t.dtype.short_name(),
                t.shape
            ));
        }
    }
    let reference_outputs = numbered_file(dir, REFERENCE_OUTPUTS)
        .map(|p| numbered(&p, "out", None))
        .transpose()?;
    Ok(XlaCase {
        dir: dir.to_path_buf(),
        manifest,
        bytes,
        program,
        inputs,
        reference_outputs,
    })
}

/// The file bytes of `program` in form `kind`: HLO text, an HLO proto, StableHLO text.
pub fn program_bytes(program: &Program, kind: Kind) -> Result<Vec<u8>, String> {
    match (program, kind) {
        (Program::Hlo { module, .. }, Kind::HloProto) => {
            crate::hlo::proto::to_proto(module).map_err(|e| e.to_string())
        }
        _ => program
            .text()
            .map(String::into_bytes)
            .map_err(|e| e.to_string()),
    }
}

/// The program a fault backend's simulated compiler compiles: `program` with the fault
/// written in, for the faults graphbug writes into programs (accuracy, nan, compile,
/// hang); `None` for a backend without such a fault.
pub fn faulted(program: &Program, backend: &XlaBackend) -> Result<Option<Program>, String> {
    match &backend.fault {
        Some(spec)
            if matches!(
                spec.kind,
                FaultKind::Accuracy | FaultKind::Nan | FaultKind::Compile | FaultKind::Hang
            ) =>
        {
            program.inject(spec).map(Some).map_err(|e| e.to_string())
        }
        _ => Ok(None),
    }
}

/// The faulted program's file name: `program.faulted.hlo` for `program.hlo`.
fn faulted_name(program: &str) -> String {
    match program.split_once('.') {
        Some((stem, ext)) => format!("{stem}.faulted.{ext}"),
        None => format!("{program}.faulted"),
    }
}

/// Writes an XLA repro directory's files into `d` (a fresh directory): `bytes` (the program
/// in the manifest's form), the faulted program where `backend` simulates a miscompile,
/// the inputs, the reference outputs, the manifest, the README and `repro.py`. `shown`
/// is the path the README names.
pub fn fill_dir(
    d: &Path,
    manifest: &XlaManifest,
    (bytes, program): (&[u8], &Program),
    backend: &XlaBackend,
    inputs: &[HostTensor],
    reference_outputs: Option<&[HostTensor]>,
    shown: &Path,
) -> Result<(), String> {
    let write = |name: &str, data: &[u8]| {
        let path = d.join(name);
        graphbug_files::write_file_atomically(&path, data)
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    let mut manifest = manifest.clone();
    manifest.devices = Devices::of(program)?;
    write(&manifest.program, bytes)?;
    let kind = form_of(&manifest.form)?;
    manifest.faulted_program = match faulted(program, backend)? {
        Some(f) => {
            let name = faulted_name(&manifest.program);
            write(&name, &program_bytes(&f, kind)?)?;
            Some(name)
        }
        None => None,
    };
    write_numbered(d, INPUTS, "arg", inputs)?;
    if let Some(outs) = reference_outputs {
        write_numbered(d, REFERENCE_OUTPUTS, "out", outs)?;
    }
    write(MANIFEST_FILE, manifest.to_json().as_bytes())?;
    write("README.md", readme(&manifest, shown).as_bytes())?;
    write("repro.py", REPRO_PY.as_bytes())?;
    Ok(())
}

/// The README of a directory at `dir` with `m`.
pub fn readme(m: &XlaManifest, dir: &Path) -> String {
    let dir = dir.display();
    let failure = match &m.failure {
        Some(f) => {
            let mut s = format!("`{}`: {}", f.kind, f.message);
            if let Some(op) = &f.op {
                s.push_str(&format!(" (at `{op}`)"));
            }
            if !f.culprits.is_empty() {
                s.push_str(&format!(
                    "; the divergence starts at {}",
                    f.culprits
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            s
        }
        None => "none recorded (a capture: `minify` looks for any failure of the backend, wrong results included)".into(),
    };
    let fault = match &m.faulted_program {
        Some(f) => format!(
            "\nThe backend is graphbug's simulated miscompiling compiler (`{}`): `{f}` is the program as it compiled it, which `repro.py` runs on the plugin.\n",
            m.backend
        ),
        None => String::new(),
    };
    format!(
        "# XLA repro: `{program}` on `{backend}`\n\n\
         Failure: {failure}.\n\
         Plugin: {plugin} (PJRT API {api}, platform {platform}, StableHLO {shlo}); reference: `{reference}`.\n{fault}\n\
         Files: `{program}` ({form}), `{INPUTS}.safetensors` (arg0...; `.npz` when complex), `{REFERENCE_OUTPUTS}.safetensors` (the reference's out0...), `{MANIFEST_FILE}`, `repro.py`.\n\n\
         ```sh\n\
         graphbug repro {dir} run        # reproduce (exit 1 when the failure reproduces)\n\
         graphbug repro {dir} minify     # shrink it (written to {dir}/minified)\n\
         graphbug repro {dir} analyze    # the first instruction that diverges from float64\n\
         python {dir}/repro.py           # JAX alone: the plugin against XLA CPU\n\
         ```\n",
        program = m.program,
        backend = m.backend,
        plugin = m.plugin.as_deref().unwrap_or("unknown"),
        api = m.pjrt_api.as_deref().unwrap_or("unknown"),
        platform = m.platform.as_deref().unwrap_or("unknown"),
        shlo = m.stablehlo_version.as_deref().unwrap_or("unknown"),
        reference = m.reference_backend,
        form = m.form,
    )
}

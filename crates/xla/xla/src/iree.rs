//! IREE as a compiler of XLA programs: `--backend iree:<target>` compiles StableHLO with
//! IREE's compiler (`iree-compile`, for one of the target backends it lists: `llvm-cpu`,
//! `vmvx`, `cuda`, `vulkan-spirv`, `rocm`, `metal-spirv`) and runs the module with IREE's
//! runtime (`iree-run-module`, whose device is the one the module was compiled for). Both
//! are child processes, started through graphbug-run (they die with graphbug) and waited on
//! under a bound, so that a compiler that crashes or hangs is a verdict: what PJRT plugins
//! do in-process, IREE's tools do beside it.
//!
//! The tools are found as JAX finds plugins: [`COMPILE_VAR`] and [`RUN_MODULE_VAR`] name
//! them, else the `iree-base-compiler` and `iree-base-runtime` wheels of the workspace's
//! `.venv` (where `cargo xtask setup` installs them), else `PATH`. Which targets exist is
//! the compiler's to say (`--iree-hal-list-target-backends`).
//!
//! IREE reads StableHLO (and CHLO), not HLO: [`importable`] converts a program as XLA does
//! (its HLO-to-StableHLO translation, through JAX), and the ops that translation leaves in
//! the MHLO dialect, which IREE does not read, become the CHLO op of the same name where
//! one exists (`mhlo.erf` is `chlo.erf`, `mhlo.topk` `chlo.top_k`); those without one are
//! named.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use graphbug_files::HostTensor;
use graphbug_ir::TensorMeta;
use graphbug_run::process::{describe_status, find_in_path, output_bounded, spawn};
use graphbug_run::scratch::Scratch;

use crate::program::Program;
use crate::stablehlo;

/// The prefix of IREE's backends: `iree:<target backend>`.
pub const PREFIX: &str = "iree:";

/// The variable naming IREE's compiler (`iree-compile`).
pub const COMPILE_VAR: &str = "GRAPHBUG_IREE_COMPILE";

/// The variable naming IREE's runtime tool (`iree-run-module`).
pub const RUN_MODULE_VAR: &str = "GRAPHBUG_IREE_RUN_MODULE";

/// The variable holding more flags for `iree-compile` (split at whitespace), e.g.
/// `--iree-opt-level=O0`.
pub const FLAGS_VAR: &str = "GRAPHBUG_IREE_FLAGS";

/// How long one compile or run may take before it is killed, where no shorter limit
/// (a worker's `--timeout`) ends it first.
pub const LIMIT: Duration = Duration::from_secs(3600);

/// How the tools are installed.
const INSTALL: &str = "pip install iree-base-compiler iree-base-runtime (`cargo xtask setup --for test` installs them in the workspace's .venv)";

/// IREE's tools: the compiler and the runtime's module runner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tools {
    /// `iree-compile`.
    pub compile: PathBuf,
    /// `iree-run-module`.
    pub run_module: PathBuf,
}

impl Tools {
    /// The tools this process uses (found once): see the module's notes.
    pub fn find() -> Result<Tools, String> {
        static FOUND: OnceLock<Result<Tools, String>> = OnceLock::new();
        FOUND
            .get_or_init(|| {
                Tools::find_with(&|v| std::env::var(v).ok(), &graphbug_run::workspace_root())
            })
            .clone()
    }

    /// The tools named by the variables `var` reads, else in `workspace`'s `.venv`, else
    /// on `PATH`.
    fn find_with(var: &dyn Fn(&str) -> Option<String>, workspace: &Path) -> Result<Tools, String> {
        let compile = tool(
            var,
            (COMPILE_VAR, "iree-compile", "compiler/_mlir_libs"),
            workspace,
        )?;
        let run_module = tool(
            var,
            (RUN_MODULE_VAR, "iree-run-module", "_runtime_libs"),
            workspace,
        )?;
        Ok(Tools {
            compile,
            run_module,
        })
    }

    /// The target backends IREE's compiler has, as it lists them (asked once).
    pub fn target_backends(&self) -> Result<Vec<String>, String> {
        static LISTED: OnceLock<Result<Vec<String>, String>> = OnceLock::new();
        LISTED
            .get_or_init(|| {
                let mut cmd = Command::new(&self.compile);
                cmd.arg("--iree-hal-list-target-backends");
                let out = run_tool(cmd, "iree-compile --iree-hal-list-target-backends")?;
                let text = String::from_utf8_lossy(&out.stdout);
                let listed = target_list(&text);
                if listed.is_empty() {
                    return Err(format!(
                        "{} --iree-hal-list-target-backends listed no target backend",
                        self.compile.display()
                    ));
                }
                Ok(listed)
            })
            .clone()
    }

    /// The compiler's version line (`IREE compiler version 3.13.0 @ ...`), where it says one
    /// (asked once).
    pub fn version(&self) -> Option<String> {
        static SAID: OnceLock<Option<String>> = OnceLock::new();
        SAID.get_or_init(|| {
            let mut cmd = Command::new(&self.compile);
            cmd.arg("--version");
            let out = run_tool(cmd, "iree-compile --version").ok()?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.lines()
                .map(str::trim)
                .find(|l| l.contains("version"))
                .map(str::to_string)
        })
        .clone()
    }
}

/// The tool `exe`: named by `name_var`, else under `iree/<under>` in a site-packages of
/// `workspace`'s `.venv`, else on `PATH`.
fn tool(
    var: &dyn Fn(&str) -> Option<String>,
    (name_var, exe, under): (&str, &str, &str),
    workspace: &Path,
) -> Result<PathBuf, String> {
    if let Some(v) = var(name_var).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(&v);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{name_var}={v}: no such file (IREE's `{exe}`)"))
        };
    }
    graphbug_pjrt::site_packages(workspace)
        .into_iter()
        .map(|sp| sp.join("iree").join(under).join(exe))
        .find(|p| p.is_file())
        .or_else(|| find_in_path(exe))
        .ok_or_else(|| format!("IREE's `{exe}` is not found: {INSTALL}, or set {name_var} to it"))
}

/// The target backends in `iree-compile --iree-hal-list-target-backends`'s output: the
/// indented names after its heading.
fn target_list(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.contains("target backends"))
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.contains(' '))
        .map(str::to_string)
        .collect()
}

/// An error unless IREE's compiler has the target backend `target`: the ones it has.
pub fn check_target(target: &str) -> Result<(), String> {
    let tools = Tools::find()?;
    let listed = tools.target_backends()?;
    if listed.iter().any(|t| t == target) {
        return Ok(());
    }
    Err(format!(
        "`{PREFIX}{target}`: IREE's compiler ({}) has no target backend `{target}`; it has {}",
        tools.compile.display(),
        listed
            .iter()
            .map(|t| format!("{PREFIX}{t}"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Why IREE's compiler or runtime gave no result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IreeError {
    /// The tool died of a signal (a crash), rather than reporting an error.
    pub crashed: bool,
    /// The tool's errors, or why it could not run.
    pub message: String,
}

impl IreeError {
    fn of(message: impl Into<String>) -> IreeError {
        IreeError {
            crashed: false,
            message: message.into(),
        }
    }

    /// The symptom of the failure it is: a crash, or an error.
    pub fn symptom(&self) -> graphbug_run::Symptom {
        if self.crashed {
            graphbug_run::Symptom::Crash
        } else {
            graphbug_run::Symptom::Error
        }
    }
}

impl From<String> for IreeError {
    fn from(message: String) -> IreeError {
        IreeError::of(message)
    }
}

/// Runs an IREE tool (`what` for messages) to its end, bounded by [`LIMIT`].
fn run_tool(mut cmd: Command, what: &str) -> Result<std::process::Output, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = spawn(cmd, true).map_err(|e| format!("{what} cannot be started: {e}"))?;
    output_bounded(child, LIMIT, true)
        .map_err(|e| format!("{what}: {e}"))?
        .ok_or_else(|| format!("{what} did not finish within {} s", LIMIT.as_secs()))
}

/// The error of a tool that ended unsuccessfully: its `error:` lines (its whole message
/// where it printed none), each cut at 2,000 characters, with the scratch directory `dir`
/// its files were in taken out of them (`program.mlir:3:10: error: ...`), so that the same
/// failure of two candidates reads the same.
fn tool_error(what: &str, out: &std::process::Output, dir: &Path) -> IreeError {
    use std::os::unix::process::ExitStatusExt;
    let err = String::from_utf8_lossy(&out.stderr).replace(&format!("{}/", dir.display()), "");
    let cut = |l: &str| -> String {
        let l = l.trim();
        match l.char_indices().nth(2000) {
            Some((at, _)) => format!("{}...", &l[..at]),
            None => l.to_string(),
        }
    };
    let errors: Vec<String> = err
        .lines()
        .filter(|l| l.contains("error:"))
        .map(cut)
        .collect();
    let said = if errors.is_empty() {
        err.lines()
            .map(cut)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        errors.join("\n")
    };
    let crashed = out.status.signal().is_some();
    IreeError {
        crashed,
        message: format!(
            "{what} {} ({}){}",
            if crashed { "crashed" } else { "failed" },
            describe_status(&out.status),
            if said.is_empty() {
                String::new()
            } else {
                format!(": {said}")
            }
        ),
    }
}

/// The flags of [`FLAGS_VAR`].
fn user_flags() -> Vec<String> {
    std::env::var(FLAGS_VAR)
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// IREE's flag that computes float64 in float32 (on by default in IREE; graphbug turns it
/// off unless [`FLAGS_VAR`] sets it).
pub const DEMOTE_F64: &str = "--iree-input-demote-f64-to-f32";

/// A program compiled by IREE: its module file, in a scratch directory of its own.
pub struct Module {
    tools: Tools,
    scratch: Scratch,
    vmfb: PathBuf,
    /// The function it runs.
    function: String,
    /// Its results' dtypes and shapes, which the runtime writes as raw bytes.
    results: Vec<TensorMeta>,
}

/// Compiles the StableHLO `module` for IREE's target backend `target`.
pub fn compile(module: &stablehlo::Module, target: &str) -> Result<Module, IreeError> {
    let tools = Tools::find()?;
    let main = module.main().ok_or_else(|| {
        IreeError::of("the module has no `main` function (nor one function alone) for IREE to run")
    })?;
    let results = main
        .results
        .iter()
        .map(stablehlo::Type::meta)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| IreeError::of(format!("a result of `@{}`: {e}", main.name)))?;
    let scratch = Scratch::new("iree").map_err(|e| IreeError::of(e.to_string()))?;
    let input = scratch.path().join("program.mlir");
    std::fs::write(&input, &module.text)
        .map_err(|e| IreeError::of(format!("{}: {e}", input.display())))?;
    let vmfb = scratch.path().join("program.vmfb");
    let mut cmd = Command::new(&tools.compile);
    cmd.arg(&input)
        .args(compile_flags(target))
        .arg("-o")
        .arg(&vmfb);
    let out = run_tool(cmd, "iree-compile")?;
    if !out.status.success() || !vmfb.is_file() {
        return Err(tool_error("iree-compile", &out, scratch.path()));
    }
    Ok(Module {
        tools,
        scratch,
        vmfb,
        function: main.name.clone(),
        results,
    })
}

/// The flags `iree-compile` gets for the target backend `target`: the target, the host's
/// CPU for `llvm-cpu`, float64 kept (see [`DEMOTE_F64`]), then [`FLAGS_VAR`]'s (which
/// replace graphbug's own CPU and float64 flags where they set them).
pub fn compile_flags(target: &str) -> Vec<String> {
    let user = user_flags();
    let mut flags = vec![format!("--iree-hal-target-backends={target}")];
    if target == "llvm-cpu"
        && !user
            .iter()
            .any(|f| f.starts_with("--iree-llvmcpu-target-cpu"))
    {
        // The host's CPU, as XLA's CPU plugin compiles for (IREE warns otherwise).
        flags.push("--iree-llvmcpu-target-cpu=host".into());
    }
    if !user.iter().any(|f| f.starts_with(DEMOTE_F64)) {
        // IREE computes float64 in float32 unless told not to: the program as written is
        // what is compared.
        flags.push(format!("{DEMOTE_F64}=false"));
    }
    flags.extend(user);
    flags
}

/// How IREE's tools write a tensor type: `2x3xf32`, `f32` for a scalar; a complex element
/// by its whole width (`cf64` is `complex<f32>`).
fn iree_type(dtype: graphbug_ir::Dtype, shape: &[usize]) -> String {
    let element = match dtype {
        graphbug_ir::Dtype::Complex64 => "cf64",
        graphbug_ir::Dtype::Complex128 => "cf128",
        d => stablehlo::element_of(d),
    };
    shape
        .iter()
        .map(|d| format!("{d}x"))
        .chain(std::iter::once(element.to_string()))
        .collect()
}

/// Writes `inputs` into `dir` as the raw bytes `iree-run-module` reads (`in0.bin`...); the
/// arguments that give them to it, in order (`--input=2x3xf32=@DIR/in0.bin`).
pub fn write_inputs(dir: &Path, inputs: &[HostTensor]) -> Result<Vec<String>, IreeError> {
    inputs
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let path = dir.join(format!("in{k}.bin"));
            std::fs::write(&path, &t.data)
                .map_err(|e| IreeError::of(format!("{}: {e}", path.display())))?;
            Ok(format!(
                "--input={}=@{}",
                iree_type(t.dtype, &t.shape),
                path.display()
            ))
        })
        .collect()
}

impl Module {
    /// Runs the module's function on `inputs` with `iree-run-module` (its device inferred
    /// from the module), tensors passed as raw bytes: its results.
    pub fn execute(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, IreeError> {
        let run = Scratch::new_in(self.scratch.path(), "run")
            .map_err(|e| IreeError::of(e.to_string()))?;
        let mut cmd = Command::new(&self.tools.run_module);
        cmd.arg(format!("--module={}", self.vmfb.display()))
            .arg(format!("--function={}", self.function));
        cmd.args(write_inputs(run.path(), inputs)?);
        let outputs: Vec<PathBuf> = (0..self.results.len())
            .map(|k| run.path().join(format!("out{k}.bin")))
            .collect();
        for path in &outputs {
            cmd.arg(format!("--output=@{}", path.display()));
        }
        let out = run_tool(cmd, "iree-run-module")?;
        if !out.status.success() {
            return Err(tool_error("iree-run-module", &out, run.path()));
        }
        self.results
            .iter()
            .zip(&outputs)
            .enumerate()
            .map(|(k, (meta, path))| {
                let data = std::fs::read(path).map_err(|e| {
                    IreeError::of(format!("iree-run-module wrote no result {k}: {e}"))
                })?;
                let shape: Vec<usize> = meta.shape.iter().map(|&d| d as usize).collect();
                let what = iree_type(meta.dtype, &shape);
                HostTensor::new(meta.dtype, shape, data).map_err(|e| {
                    IreeError::of(format!("iree-run-module's result {k} is not a {what}: {e}"))
                })
            })
            .collect()
    }
}

/// A program as IREE reads it: StableHLO text, and what was changed to get it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Imported {
    /// The StableHLO text.
    pub text: String,
    /// What it was converted from (`HLO`, `StableHLO bytecode`), if anything.
    pub converted_from: Option<&'static str>,
    /// MHLO ops made CHLO ops: (from, to, how many).
    pub renamed: Vec<(String, String, usize)>,
    /// MHLO ops left, which IREE does not read: (op, how many).
    pub left: Vec<(String, usize)>,
}

impl Imported {
    /// What was done, in a sentence per change, for the user (empty when nothing was).
    pub fn describe(&self) -> Vec<String> {
        let mut said = Vec::new();
        if let Some(from) = self.converted_from {
            said.push(format!("IREE compiles StableHLO: the program ({from}) is converted as XLA converts it (its HLO-to-StableHLO translation, through JAX), and graphbug works on the converted program"));
        }
        for (from, to, n) in &self.renamed {
            said.push(format!(
                "`{from}` ({n}), which IREE does not read, is its CHLO equivalent `{to}`"
            ));
        }
        for (op, n) in &self.left {
            said.push(format!("`{op}` ({n}) has no StableHLO or CHLO equivalent: IREE will refuse the program there"));
        }
        said
    }
}

/// The script that converts a program for IREE, in JAX's MLIR context (where MHLO, CHLO and
/// StableHLO are registered): its first argument says what its input is (`hlo`: an
/// HloModuleProto; `mlir`: MLIR text, bytecode or a StableHLO portable artifact). It prints
/// JSON: the text, the MHLO ops it made CHLO ops, and those it left.
const IMPORT_SCRIPT: &str = r#"
import json, sys
mode = sys.argv[1]
data = sys.stdin.buffer.read()
from jax._src.lib import _jax
from jax._src.lib.mlir import ir
from jax._src.interpreters import mlir

def chlo_of(ctx, name):
    # The CHLO op of an MHLO op's name, underscores aside (mhlo.topk is chlo.top_k).
    rest = name[len("mhlo."):]
    for candidate in [rest] + [rest[:i] + "_" + rest[i:] for i in range(1, len(rest))]:
        if ctx.is_registered_operation("chlo." + candidate):
            return "chlo." + candidate
    return None

def convert(ctx, op, renamed, left):
    for region in op.regions:
        for block in region.blocks:
            for inner in list(block.operations):
                inner = inner.operation
                convert(ctx, inner, renamed, left)
                if not inner.name.startswith("mhlo."):
                    continue
                name, new = inner.name, chlo_of(ctx, inner.name)
                if new is not None:
                    with ir.InsertionPoint(inner), inner.location:
                        made = ir.Operation.create(
                            new, results=[r.type for r in inner.results],
                            operands=list(inner.operands),
                            attributes={k: inner.attributes[k] for k in inner.attributes})
                    try:
                        made.verify()
                    except Exception:
                        made.erase()
                        new = None
                if new is None:
                    left[name] = left.get(name, 0) + 1
                    continue
                for old, result in zip(inner.results, made.results):
                    old.replace_all_uses_with(result)
                inner.erase()
                renamed.setdefault(name, [new, 0])[1] += 1

with mlir.make_ir_context() as ctx:
    if mode == "hlo":
        module = ir.Module.parse(_jax.mlir.hlo_to_stablehlo(data))
    else:
        try:
            module = _jax.mlir.deserialize_portable_artifact(data)
        except Exception:
            module = ir.Module.parse(data)
    renamed, left = {}, {}
    convert(ctx, module.operation, renamed, left)
    json.dump({"text": mlir.module_to_string(module),
               "renamed": sorted([k, v[0], v[1]] for k, v in renamed.items()),
               "left": sorted([k, n] for k, n in left.items())}, sys.stdout)
"#;

/// `program` as IREE reads it (see the module's notes), or `None` where it already is
/// (StableHLO text with no MHLO op).
pub fn importable(program: &Program) -> Result<Option<Imported>, String> {
    let (mode, input, from) = match program {
        Program::Hlo { module, .. } => (
            "hlo",
            crate::hlo::proto::to_proto(module).map_err(|e| e.to_string())?,
            Some("HLO"),
        ),
        Program::StableHlo(m) => {
            let mhlo = m
                .funcs
                .iter()
                .flat_map(|f| &f.body)
                .any(|s| s.op.starts_with("mhlo."));
            if !mhlo {
                return Ok(None);
            }
            ("mlir", m.text.clone().into_bytes(), None)
        }
        Program::Bytecode { bytes, .. } => ("mlir", bytes.clone(), Some("StableHLO bytecode")),
    };
    let out = stablehlo::through_jax(
        IMPORT_SCRIPT,
        &[mode],
        &input,
        "Programs are converted for IREE",
    )?;
    #[derive(serde::Deserialize)]
    struct Said {
        text: String,
        renamed: Vec<(String, String, usize)>,
        left: Vec<(String, usize)>,
    }
    let said: Said = serde_json::from_slice(&out)
        .map_err(|e| format!("the conversion for IREE printed no result: {e}"))?;
    Ok(Some(Imported {
        text: said.text,
        converted_from: from,
        renamed: said.renamed,
        left: said.left,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_files_without_their_scratch_directory() {
        use std::os::unix::process::ExitStatusExt;
        let out = std::process::Output {
            status: std::process::ExitStatus::from_raw(1 << 8),
            stdout: Vec::new(),
            stderr: b"iree-lld: error: undefined symbol: sin\n/tmp/s/iree-1-0/program.mlir:1:1: error: failed to link\n".to_vec(),
        };
        let e = tool_error("iree-compile", &out, Path::new("/tmp/s/iree-1-0"));
        assert!(!e.crashed);
        assert_eq!(
            e.message,
            "iree-compile failed (exit code 1): iree-lld: error: undefined symbol: sin\nprogram.mlir:1:1: error: failed to link"
        );
    }

    #[test]
    fn the_compilers_list_is_read_after_its_heading() {
        let listed = "Registered target backends:\n  cuda\n  llvm-cpu\n  vmvx\n\n";
        assert_eq!(target_list(listed), ["cuda", "llvm-cpu", "vmvx"]);
        assert!(target_list("nothing here\n").is_empty());
    }

    #[test]
    fn tools_are_named_by_variables_first_and_missing_ones_are_named() {
        let none = |_: &str| None;
        let empty = tempfile::tempdir().unwrap();
        // Neither in the (empty) workspace nor, unless installed there, on PATH.
        if find_in_path("iree-compile").is_none() {
            let err = Tools::find_with(&none, empty.path()).unwrap_err();
            assert!(
                err.contains("iree-compile") && err.contains(COMPILE_VAR),
                "{err}"
            );
        }
        let bad = |v: &str| (v == COMPILE_VAR).then(|| "/no/such/iree-compile".to_string());
        let err = Tools::find_with(&bad, empty.path()).unwrap_err();
        assert!(
            err.contains(COMPILE_VAR) && err.contains("/no/such"),
            "{err}"
        );
        let file = empty.path().join("tool");
        std::fs::write(&file, "").unwrap();
        let both = |_: &str| Some(file.display().to_string());
        let tools = Tools::find_with(&both, empty.path()).unwrap();
        assert_eq!(
            (tools.compile.as_path(), tools.run_module.as_path()),
            (file.as_path(), file.as_path())
        );
    }

    #[test]
    fn tensor_types_are_written_as_iree_reads_them() {
        use graphbug_ir::Dtype;
        assert_eq!(iree_type(Dtype::Float32, &[2, 3]), "2x3xf32");
        assert_eq!(iree_type(Dtype::Bool, &[]), "i1");
        assert_eq!(iree_type(Dtype::BFloat16, &[4]), "4xbf16");
        assert_eq!(iree_type(Dtype::Complex64, &[2]), "2xcf64");
    }
}

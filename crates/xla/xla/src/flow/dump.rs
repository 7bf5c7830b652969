//! XLA's dump directories (`XLA_FLAGS=--xla_dump_to=DIR`, written by XLA under JAX,
//! TensorFlow, PyTorch/XLA or any XLA-based compiler) read as a [`Dump`] for the flow's
//! [`graphbug_flow::dump`]: every module XLA compiled, each with its program as the
//! framework built it (`module_NNNN.NAME.before_optimizations.txt`, else its `.hlo.pb`,
//! else JAX's own `module_NNNN.NAME/module.mlir`), and the arguments of its executions
//! where `--xla_dump_hlo_snapshots` recorded them (`module_NNNN.NAME.snapshot.ID.pb`, in
//! the order of their names).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use graphbug_files::HostTensor;
use graphbug_flow::dump::{Dump, DumpModule};
use graphbug_flow::FlowError;

/// What the user is told such a directory is.
const WHAT: &str = "an XLA dump (--xla_dump_to)";

/// The files XLA dumped of one module.
#[derive(Default)]
struct Files {
    text: Option<PathBuf>,
    proto: Option<PathBuf>,
    mlir: Option<PathBuf>,
    optimized: Vec<String>,
    snapshots: Vec<PathBuf>,
}

/// What a file of a dump is to its module.
enum Part {
    Text,
    Proto,
    /// One execution's `xla.HloSnapshot`.
    Snapshot,
    /// A program after XLA's passes (`cpu_after_optimizations`): not what the framework
    /// built.
    Optimized,
    /// Anything else XLA writes of a module (buffer assignments, LLVM IR, options).
    Other,
}

/// The module (`module_0006.jit_step`) a dump's file name belongs to, and what the file is
/// to it; `None` for a name XLA does not give a module's file.
fn module_file(name: &str) -> Option<(String, Part)> {
    let rest = name.strip_prefix("module_")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || rest.as_bytes().get(digits) != Some(&b'.') {
        return None;
    }
    let ends = [
        (".before_optimizations.txt", Part::Text),
        (".before_optimizations.hlo.pb", Part::Proto),
    ];
    for (end, part) in ends {
        if let Some(module) = name.strip_suffix(end) {
            return Some((module.to_string(), part));
        }
    }
    if let Some(stem) = name.strip_suffix(".pb") {
        if let Some((module, id)) = stem.rsplit_once(".snapshot.") {
            if id.parse::<i64>().is_ok() {
                return Some((module.to_string(), Part::Snapshot));
            }
        }
    }
    for end in ["after_optimizations.txt", "after_optimizations.hlo.pb"] {
        if let Some(stem) = name.strip_suffix(end) {
            // `module_0006.jit_step.cpu_` or `module_0006.jit_step.sm_9.0_gpu_`: the
            // platform's words follow the module's name.
            let module = match stem.rfind(".sm_") {
                Some(at) => Some(&stem[..at]),
                None => stem.rsplit_once('.').map(|(m, _)| m),
            };
            if let Some(module) = module {
                return Some((module.to_string(), Part::Optimized));
            }
        }
    }
    Some((String::new(), Part::Other))
}

/// The dump in `dir`, or `None` when no file in it is one XLA writes of a module.
pub fn read_dump(dir: &Path) -> Option<Result<Dump, FlowError>> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut modules: BTreeMap<String, Files> = BTreeMap::new();
    let mut any = false;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if path.is_dir() {
            // JAX writes the StableHLO it handed XLA beside the dump, a folder a module.
            let mlir = path.join("module.mlir");
            if name.starts_with("module_") && mlir.is_file() {
                modules.entry(name).or_default().mlir = Some(mlir);
                any = true;
            }
            continue;
        }
        let Some((module, part)) = module_file(&name) else {
            continue;
        };
        any = true;
        if module.is_empty() {
            continue;
        }
        let files = modules.entry(module).or_default();
        match part {
            Part::Text => files.text = Some(path),
            Part::Proto => files.proto = Some(path),
            Part::Snapshot => files.snapshots.push(path),
            Part::Optimized => files.optimized.push(name),
            Part::Other => {}
        }
    }
    if !any {
        return None;
    }
    let modules = modules
        .into_iter()
        .filter(|(_, f)| {
            f.text.is_some()
                || f.proto.is_some()
                || f.mlir.is_some()
                || !f.snapshots.is_empty()
                || !f.optimized.is_empty()
        })
        .map(|(name, mut f)| {
            f.snapshots.sort();
            let program = f.text.or(f.proto).or(f.mlir).ok_or_else(|| {
                format!(
                    "the dump holds only its program after XLA's passes ({}); dump the program as built with XLA_FLAGS=--xla_dump_hlo_as_text",
                    if f.optimized.is_empty() {
                        "in its HloSnapshots".to_string()
                    } else {
                        f.optimized.join(", ")
                    }
                )
            });
            DumpModule {
                name,
                program,
                recorded: f.snapshots,
            }
        })
        .collect();
    Some(Ok(Dump {
        what: WHAT.to_string(),
        modules,
    }))
}

/// The arguments of a module's execution `file` (an `xla.HloSnapshot`) as host tensors.
pub fn recorded_inputs(file: &Path) -> Result<Vec<HostTensor>, FlowError> {
    let bytes = std::fs::read(file).map_err(|e| FlowError::io(file, e))?;
    crate::hlo::proto::snapshot_arguments(&bytes)
        .map(|(tensors, _)| tensors)
        .map_err(|e| FlowError::bad(file, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xla_dump_file_names_are_told() {
        let told = |n: &str| module_file(n).map(|(m, p)| (m, std::mem::discriminant(&p)));
        let d = |p: Part| std::mem::discriminant(&p);
        assert_eq!(
            told("module_0006.jit_step.before_optimizations.txt"),
            Some(("module_0006.jit_step".into(), d(Part::Text)))
        );
        assert_eq!(
            told("module_0012.SyncTensorsGraph.37.before_optimizations.hlo.pb"),
            Some(("module_0012.SyncTensorsGraph.37".into(), d(Part::Proto)))
        );
        assert_eq!(
            told("module_0000.jit_f.snapshot.-501283989.pb"),
            Some(("module_0000.jit_f".into(), d(Part::Snapshot)))
        );
        assert_eq!(
            told("module_0001.a_inference_f_12__XlaMustCompile_true.14.sm_9.0_gpu_after_optimizations.txt"),
            Some((
                "module_0001.a_inference_f_12__XlaMustCompile_true.14".into(),
                d(Part::Optimized)
            ))
        );
        assert_eq!(
            told("module_0006.jit_step.cpu_after_optimizations-buffer-assignment.txt"),
            Some((String::new(), d(Part::Other)))
        );
        assert!(told("module_x.txt").is_none());
        assert!(told("notes.txt").is_none());
    }

    /// The training loop's dump (`tests/fixtures/xla/dumps/make_dumps.py`): its modules in
    /// order, each program as JAX built it, the step's two executions, whose first holds
    /// its twenty arguments as the step's parameters are typed.
    #[test]
    fn a_jax_dump_reads_as_its_modules_and_their_recorded_arguments() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/xla/dumps");
        let dump = read_dump(&root.join("jax_train")).unwrap().unwrap();
        let names: Vec<&str> = dump.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names.len(), 12, "{names:?}");
        assert_eq!(names[0], "module_0000.jit_stage");
        assert_eq!(names[10], "module_0020.jit_step");
        let step = &dump.modules[10];
        let program = step.program.as_ref().unwrap();
        assert!(program.ends_with("module_0020.jit_step.before_optimizations.txt"));
        assert_eq!(step.recorded.len(), 2);
        let args = recorded_inputs(&step.recorded[0]).unwrap();
        assert_eq!(args.len(), 20);
        let params = crate::program::Program::read(
            &std::fs::read(program).unwrap(),
            crate::program::Kind::HloText,
        )
        .unwrap()
        .parameters()
        .unwrap();
        for ((name, meta), t) in params.iter().zip(&args) {
            assert_eq!(meta.dtype, t.dtype, "{name}");
            let dims: Vec<usize> = meta.shape.iter().map(|d| *d as usize).collect();
            assert_eq!(dims, t.shape, "{name}");
        }
        // A directory of no module's files is no dump; JAX's StableHLO stands in for a
        // program XLA did not write.
        assert!(read_dump(&root).is_none());
        let mlir = read_dump(&root.join("jax_mlir")).unwrap().unwrap();
        assert!(mlir
            .modules
            .iter()
            .all(|m| m.program.as_ref().is_ok_and(|p| p.ends_with("module.mlir"))));
    }
}

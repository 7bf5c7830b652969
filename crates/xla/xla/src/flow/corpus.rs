//! A corpus of XLA programs, for differential testing: `graphbug repro DIR --backend A
//! --reference-backend B` on a directory of programs runs each through both (the flow's
//! [`graphbug_flow::dump`]), classifies every disagreement, minifies it, and writes one
//! summary. A corpus is any directory tree of XLA programs that is no XLA dump itself:
//!
//! - each program file (`.hlo`, `.txt`, `.mlir`, `.mlirbc`, or a `.pb` that reads as an
//!   `HloModuleProto`) is one module, named by its path in the corpus, with the inputs
//!   beside it: `STEM.inputs.safetensors|npz`, else `STEM.io.npz` (the arguments `arg0`...
//!   with the outputs of the run that wrote them), else the folder's
//!   `inputs.safetensors|npz`, else seeded random ones;
//! - a case folder of graphbug's conformance suite (`case.json`) is one module: its
//!   StableHLO (`stablehlo.mlir`), else its HLO (`jax.hlo`, `module.pb`), with its
//!   `inputs.npz`: `graphbug repro target/conformance/cases/xla` tests every case;
//! - an XLA dump in it contributes its modules, each with its recorded arguments;
//! - repro directories (a `manifest.json`) and hidden folders are skipped.

use std::path::{Path, PathBuf};

use graphbug_files::HostTensor;
use graphbug_flow::dump::{Dump, DumpModule};
use graphbug_flow::FlowError;

use super::dump::read_dump;

/// What the user is told such a directory is.
const WHAT: &str = "a corpus of XLA programs";

/// The extensions a corpus's program files have.
const PROGRAM_EXTENSIONS: [&str; 5] = ["hlo", "txt", "mlir", "mlirbc", "pb"];

/// A conformance case's program files, the first present taken.
const CASE_PROGRAMS: [&str; 4] = ["stablehlo.mlir", "jax.hlo", "module.pb", "xla.hlo"];

/// The corpus in `dir`, or `None` when it holds no XLA program.
pub fn read_corpus(dir: &Path) -> Option<Result<Dump, FlowError>> {
    let mut modules = Vec::new();
    if let Err(e) = walk(dir, dir, &mut modules) {
        return Some(Err(e));
    }
    (!modules.is_empty()).then(|| {
        Ok(Dump {
            what: WHAT.to_string(),
            modules,
        })
    })
}

/// The entries of `dir`, sorted by name, hidden ones left out.
fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, FlowError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| FlowError::io(dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    entries.sort();
    Ok(entries)
}

/// The modules of `dir` (under the corpus `root`), in path order.
fn walk(root: &Path, dir: &Path, out: &mut Vec<DumpModule>) -> Result<(), FlowError> {
    let name_of = |p: &Path| {
        p.strip_prefix(root)
            .unwrap_or(p)
            .display()
            .to_string()
            .replace(std::path::MAIN_SEPARATOR, "/")
    };
    if dir != root && dir.join("manifest.json").exists() {
        return Ok(());
    }
    if dir.join("case.json").is_file() {
        if let Some(program) = CASE_PROGRAMS
            .iter()
            .map(|p| dir.join(p))
            .find(|p| p.is_file())
        {
            out.push(DumpModule {
                name: name_of(dir),
                program: Ok(program),
                recorded: existing(&[dir.join("inputs.npz")]),
            });
        }
        return Ok(());
    }
    if dir != root {
        if let Some(dump) = read_dump(dir) {
            for m in dump?.modules {
                out.push(DumpModule {
                    name: format!("{}/{}", name_of(dir), m.name),
                    ..m
                });
            }
            return Ok(());
        }
    }
    for path in sorted_entries(dir)? {
        if path.is_dir() {
            walk(root, &path, out)?;
        } else if is_program(&path) {
            out.push(DumpModule {
                name: name_of(&path),
                recorded: inputs_beside(&path),
                program: Ok(path),
            });
        }
    }
    Ok(())
}

/// Those of `paths` that are files.
fn existing(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths.iter().filter(|p| p.is_file()).cloned().collect()
}

/// Whether `path` is an XLA program file of a corpus.
fn is_program(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let Some(ext) = name.rsplit_once('.').map(|(_, e)| e.to_string()) else {
        return false;
    };
    if !PROGRAM_EXTENSIONS.contains(&ext.as_str()) {
        return false;
    }
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    if ext == "pb" {
        return crate::hlo::proto::from_proto(&bytes).is_ok();
    }
    crate::program::sniff(&bytes, path).is_some()
}

/// The inputs file of the program at `path` (see the module's notes), as a list of one.
fn inputs_beside(path: &Path) -> Vec<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.split_once('.').map_or(name.as_str(), |(s, _)| s);
    let candidates = [
        dir.join(format!("{stem}.inputs.safetensors")),
        dir.join(format!("{stem}.inputs.npz")),
        dir.join(format!("{stem}.io.npz")),
        dir.join("inputs.safetensors"),
        dir.join("inputs.npz"),
    ];
    existing(&candidates).into_iter().take(1).collect()
}

/// The arguments in a tensor file of a corpus (`arg0`, `arg1`... in order; other keys, such
/// as the outputs of an `.io.npz`, left out).
pub fn file_arguments(file: &Path) -> Result<Vec<HostTensor>, FlowError> {
    let mut named = graphbug_files::read(file).map_err(|e| FlowError::bad(file, e))?;
    let mut args = Vec::new();
    while let Some(at) = named
        .iter()
        .position(|(k, _)| *k == format!("arg{}", args.len()))
    {
        args.push(named.swap_remove(at).1);
    }
    if args.is_empty() && !named.is_empty() {
        return Err(FlowError::bad(
            file,
            "holds no arguments `arg0`, `arg1`...: a corpus's inputs are keyed by position",
        ));
    }
    Ok(args)
}

/// Whether a recorded file is a tensor file (a corpus's inputs) rather than an HloSnapshot.
pub fn is_tensor_file(file: &Path) -> bool {
    let name = file.to_string_lossy();
    name.ends_with(".npz") || name.ends_with(".safetensors")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/xla")
    }

    #[test]
    fn a_corpus_is_its_programs_with_the_inputs_beside_them() {
        let dir = tempfile::tempdir().unwrap();
        let hlo = fixtures().join("hlo");
        for f in ["argmax.hlo", "argmax.io.npz", "cumsum.pb", "make_corpus.py"] {
            std::fs::copy(hlo.join(f), dir.path().join(f)).unwrap();
        }
        let case = dir.path().join("cases/one");
        std::fs::create_dir_all(&case).unwrap();
        std::fs::write(case.join("case.json"), "{}").unwrap();
        std::fs::copy(hlo.join("argmax.hlo"), case.join("jax.hlo")).unwrap();
        std::fs::copy(
            fixtures().join("stablehlo/mlp.mlir"),
            case.join("stablehlo.mlir"),
        )
        .unwrap();
        let repro = dir.path().join("old_repro");
        std::fs::create_dir_all(&repro).unwrap();
        std::fs::write(repro.join("manifest.json"), "{}").unwrap();
        std::fs::copy(hlo.join("argmax.hlo"), repro.join("program.hlo")).unwrap();
        let corpus = read_corpus(dir.path()).unwrap().unwrap();
        let got: Vec<(String, String, Vec<String>)> = corpus
            .modules
            .iter()
            .map(|m| {
                let file = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
                (
                    m.name.clone(),
                    file(m.program.as_ref().unwrap()),
                    m.recorded.iter().map(file).collect(),
                )
            })
            .collect();
        let s = |v: &str| v.to_string();
        assert_eq!(
            got,
            [
                (s("argmax.hlo"), s("argmax.hlo"), vec![s("argmax.io.npz")]),
                (s("cases/one"), s("stablehlo.mlir"), vec![]),
                (s("cumsum.pb"), s("cumsum.pb"), vec![]),
            ]
        );
        let args = file_arguments(&dir.path().join("argmax.io.npz")).unwrap();
        assert_eq!(args.len(), 1);
        assert!(read_corpus(&case.join("nothing")).is_none_or(|r| r.is_err()));
        let empty = tempfile::tempdir().unwrap();
        assert!(read_corpus(empty.path()).is_none());
    }
}

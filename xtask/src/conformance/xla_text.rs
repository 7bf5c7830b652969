//! The `xla-text` source: HLO modules as XLA's own developers write them (a folder of
//! `.hlo` files, such as a checkout of XLA's tool inputs and tests; the CI subset is
//! `tests/fixtures/xla/hlo-xla-style`), each read by XLA's parser (the venv's jaxlib) when
//! the cases are made, then by graphbug in two stages:
//!
//! - `text-fmt`: `graphbug fmt` prints a module XLA's parser reads byte for byte;
//! - `text-check`: `graphbug check` agrees with XLA: it passes what XLA's parser reads and
//!   refuses what it refuses; a refusal of a module the parser reads is right only where
//!   XLA's verifier refuses it too. The verifier is asked through XLA's own conversion of
//!   the module to StableHLO, whose op verifiers check what XLA's verifier checks of
//!   operands and results (a module XLA cannot convert leaves the question open, and the
//!   refusal counts as a failure).
//!
//! A file holding several modules split by `// -----` lines (`hlo-opt --split-input-file`)
//! gives one case per module.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};

use super::xla::first_difference;
use super::{first_error_line, os, Outcome, Runner};

/// The folder of the CI subset, under the workspace root.
pub const CI_DIR: &str = "tests/fixtures/xla/hlo-xla-style";

/// Reads each module (a path per argument) with XLA's parser, and, where it reads,
/// converts it to StableHLO and verifies that; prints one JSON line per module.
const ORACLE: &str = r#"
import json, sys
from jaxlib import _hlo as h
try:
    from jax._src.lib import _jax
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir
except Exception as e:
    _jax = None
    why_not = str(e)
for path in sys.argv[1:]:
    out = {"path": path}
    try:
        module = h.hlo_module_from_text(open(path).read())
        out["parser"] = "reads"
    except Exception as e:
        out["parser"] = "refuses"
        out["parser_error"] = " ".join(str(e).split())[:400]
        print(json.dumps(out), flush=True)
        continue
    if _jax is None:
        out["verifier"] = "unknown"
        out["verifier_error"] = "no JAX: " + why_not
    else:
        try:
            code = _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
        except Exception as e:
            out["verifier"] = "unknown"
            out["verifier_error"] = "XLA does not convert it: " + " ".join(str(e).split())[:300]
        else:
            try:
                with mlir.make_ir_context():
                    ok = ir.Module.parse(code).operation.verify()
                out["verifier"] = "verifies" if ok else "refuses"
            except Exception as e:
                out["verifier"] = "refuses"
                out["verifier_error"] = " ".join(str(e).split())[:400]
    print(json.dumps(out), flush=True)
"#;

/// The `.hlo` files under `dir`, sorted, as paths relative to it.
fn hlo_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).with_context(|| format!("cannot list {}", d.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "hlo") {
                out.push(path.strip_prefix(dir).unwrap_or(&path).to_path_buf());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A file's modules: split at `// -----` lines (as `hlo-opt --split-input-file` splits
/// it), each as written; one module for a file without them.
pub fn split_modules(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.trim() == "// -----" {
            out.push(&text[start..at]);
            start = at + line.len();
        }
        at += line.len();
    }
    out.push(&text[start..]);
    out
}

/// Makes the cases of the modules under `dir` in `cases/xla-text/`: a folder per module
/// with `module.hlo` and `case.json`, which holds XLA's answers (see [`ORACLE`]). The
/// number of cases.
pub fn generate(dir: &Path, cases: &Path, python: &Path) -> Result<usize> {
    ensure!(
        dir.is_dir(),
        "--xla-text-dir {} is no folder of .hlo files",
        dir.display()
    );
    let files = hlo_files(dir)?;
    ensure!(!files.is_empty(), "no .hlo file under {}", dir.display());
    let mut made: Vec<(String, PathBuf)> = Vec::new();
    for rel in &files {
        let path = dir.join(rel);
        let text = fs::read_to_string(&path)
            .with_context(|| format!("cannot read {} (HLO text is UTF-8)", path.display()))?;
        let modules = split_modules(&text);
        let rel_name = rel.to_string_lossy().replace('\\', "/");
        for (k, module) in modules.iter().enumerate() {
            let name = if modules.len() == 1 {
                rel_name.clone()
            } else {
                format!("{rel_name}#{k}")
            };
            let case_dir = cases.join("xla-text").join(&name);
            fs::create_dir_all(&case_dir)
                .with_context(|| format!("cannot create {}", case_dir.display()))?;
            fs::write(case_dir.join("module.hlo"), module)
                .with_context(|| format!("cannot write {}", case_dir.display()))?;
            made.push((name, case_dir));
        }
    }
    let answers = ask_xla(python, &made)?;
    for ((name, case_dir), answer) in made.iter().zip(answers) {
        let mut case = json!({
            "id": format!("xla-text/{name}"),
            "source": "xla-text",
            "op": name,
            "status": "ok",
            "module": "module.hlo",
            "from": dir.join(name.split('#').next().unwrap_or(name)).to_string_lossy(),
        });
        for key in ["parser", "parser_error", "verifier", "verifier_error"] {
            if let Some(v) = answer.get(key) {
                case[key] = v.clone();
            }
        }
        let path = case_dir.join("case.json");
        fs::write(&path, serde_json::to_string_pretty(&case)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(made.len())
}

/// XLA's answers for each case's module, in order (see [`ORACLE`]).
fn ask_xla(python: &Path, made: &[(String, PathBuf)]) -> Result<Vec<Value>> {
    let mut answers = Vec::with_capacity(made.len());
    // A few hundred paths per process keeps the command line short.
    for chunk in made.chunks(200) {
        let out = Command::new(python)
            .arg("-c")
            .arg(ORACLE)
            .args(chunk.iter().map(|(_, d)| d.join("module.hlo")))
            .output()
            .with_context(|| format!("cannot run {}", python.display()))?;
        if !out.status.success() {
            bail!(
                "XLA's parser (jaxlib, {}) could not be asked: {}",
                python.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .context("XLA's answers are not JSON lines")?;
        ensure!(
            lines.len() == chunk.len(),
            "XLA answered for {} of {} modules",
            lines.len(),
            chunk.len()
        );
        answers.extend(lines);
    }
    Ok(answers)
}

impl Runner<'_> {
    /// Whether XLA's parser reads the case's module, and its error where it does not.
    fn xla_reads(&self) -> Result<(bool, String)> {
        let reads = match self.case.json["parser"].as_str() {
            Some("reads") => true,
            Some("refuses") => false,
            other => bail!("case.json has no XLA parser answer (`parser`: {other:?})"),
        };
        let error = self.case.json["parser_error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Ok((reads, error))
    }

    /// `graphbug fmt` prints the module XLA's parser reads byte for byte.
    pub(super) fn text_fmt(&self) -> Result<Outcome> {
        if !self.xla_reads()?.0 {
            return Ok(Outcome::NotApplicable("XLA's parser refuses it".into()));
        }
        let path = self.file("module.hlo");
        let want =
            fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let exec = self.graphbug("text-fmt", &[os("fmt"), path.as_os_str()])?;
        if exec.code != Some(0) {
            return Ok(Outcome::Failed(exec.error_line("fmt")));
        }
        if exec.stdout != want {
            return Ok(Outcome::Failed(format!(
                "fmt prints {}",
                first_difference(&want, &exec.stdout, "the module")
            )));
        }
        Ok(Outcome::Passed)
    }

    /// `graphbug check` reads what XLA reads and refuses what XLA refuses (see the module
    /// docs).
    pub(super) fn text_check(&self) -> Result<Outcome> {
        let (reads, parser_error) = self.xla_reads()?;
        let path = self.file("module.hlo");
        let exec = self.graphbug("text-check", &[os("check"), path.as_os_str()])?;
        if exec.timed_out || exec.code.is_none() {
            return Ok(Outcome::Failed(exec.error_line("check")));
        }
        let passed = exec.code == Some(0);
        Ok(match (reads, passed) {
            (true, true) | (false, false) => Outcome::Passed,
            (false, true) => Outcome::Failed(format!(
                "XLA's parser refuses it ({parser_error}); graphbug check passes it"
            )),
            (true, false) => {
                let refusal = first_error_line(&exec.stderr, &exec.stdout);
                match self.case.json["verifier"].as_str() {
                    Some("refuses") => Outcome::Passed,
                    Some("unknown") => Outcome::Failed(format!(
                        "XLA's parser reads it, its verifier could not be asked ({}); graphbug check refuses it: {refusal}",
                        self.case.json["verifier_error"].as_str().unwrap_or("no reason")
                    )),
                    _ => Outcome::Failed(format!(
                        "XLA's parser and verifier read it; graphbug check refuses it: {refusal}"
                    )),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_split_at_dashed_lines_as_hlo_opt_splits_them() {
        let text = "// RUN: x\nHloModule a\n\n// -----\n\nHloModule b\n  // -----  \nc";
        assert_eq!(
            split_modules(text),
            ["// RUN: x\nHloModule a\n\n", "\nHloModule b\n", "c"]
        );
        assert_eq!(split_modules("HloModule a\n"), ["HloModule a\n"]);
    }
}

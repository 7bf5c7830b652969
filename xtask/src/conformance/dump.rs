//! The `xla-dump` source: directories XLA dumped (`XLA_FLAGS=--xla_dump_to`) for the
//! frameworks that drive it, each checked whole by `graphbug repro DIR`, as a user with a
//! dump does it. The cases are the dumps committed as fixtures (`tests/fixtures/xla/dumps`:
//! a JAX training loop, JAX's StableHLO, a TensorFlow `jit_compile` step, a PyTorch/XLA
//! step; made here) and, with PyTorch/XLA's environment, each model of
//! `xtask/conformance/gen_torch_xla_cases.py` as `graphbug_capture.torch_xla` captures its
//! training step and as XLA itself dumps it. Two stages:
//!
//! - `dump-check`: `graphbug repro DIR --backend pjrt:cpu --level 4` passes every module
//!   the dump holds a program of (its recorded arguments, or seeded random ones), against
//!   the float64 reference, and says why of any it cannot check;
//! - `dump-minify`: a runtime fault pinned to an instruction of the largest module (the
//!   middle one of its entry computation that no other module names) fails that module
//!   alone, which is minified to that instruction, and the minified directory reproduces.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::xla::{fault_targets, BACKEND};
use super::{os, Outcome, Runner};

/// The committed dumps, under the workspace root.
pub const FIXTURE_DIR: &str = "tests/fixtures/xla/dumps";

/// The level of `dump-check`: every output against the float64 reference.
const CHECK_LEVEL: &str = "4";

/// The committed dumps of the CI subset (the others are `tests/xla_dump.rs`'s).
pub const CI_FIXTURES: [&str; 2] = ["jax_mlir", "tf_train"];

/// Makes a case `xla-dump/fixture/NAME` for each dump folder under [`FIXTURE_DIR`] (those
/// of [`CI_FIXTURES`] for the `ci` subset; those whose id `filter` matches), its case.json
/// naming the folder, which stays where it is; the number of cases.
pub fn generate_fixtures(
    root: &Path,
    cases: &Path,
    subset: &str,
    filter: Option<&regex::Regex>,
) -> Result<usize> {
    let dir = root.join(FIXTURE_DIR);
    let mut names: Vec<String> = fs::read_dir(&dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut made = 0;
    for name in names {
        let id = format!("xla-dump/fixture/{name}");
        if (subset == "ci" && !CI_FIXTURES.contains(&name.as_str()))
            || filter.is_some_and(|f| !f.is_match(&id))
        {
            continue;
        }
        let case_dir = cases.join(&id);
        fs::create_dir_all(&case_dir)
            .with_context(|| format!("cannot create {}", case_dir.display()))?;
        let case = json!({
            "id": id,
            "source": "xla-dump",
            "kind": "fixture",
            "op": name,
            "name": format!("fixture/{name}"),
            "status": "ok",
            "dump": dir.join(&name).to_string_lossy(),
        });
        let path = case_dir.join("case.json");
        fs::write(&path, serde_json::to_string_pretty(&case)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
        made += 1;
    }
    Ok(made)
}

/// A module's row of a dump's `summary.json`.
struct Row<'a>(&'a Value);

impl Row<'_> {
    fn module(&self) -> &str {
        self.0["module"].as_str().unwrap_or("?")
    }

    fn result(&self) -> &str {
        self.0["result"].as_str().unwrap_or("?")
    }
}

impl Runner<'_> {
    /// The case's dump directory (case.json's `dump`, relative to the case or absolute).
    fn dump_dir(&self) -> Result<PathBuf> {
        let dump = self.case.json["dump"]
            .as_str()
            .context("case.json has no `dump` folder")?;
        Ok(self.file(dump))
    }

    /// `graphbug repro DUMP --backend BACKEND --level LEVEL --out WORK/TAG`: the run and
    /// its summary.json (None where it wrote none).
    fn repro_dump(
        &self,
        tag: &str,
        backend: &str,
        level: &str,
    ) -> Result<(super::Exec, Option<Value>)> {
        let dump = self.dump_dir()?;
        let out = self.work.join(tag);
        let _ = fs::remove_dir_all(&out);
        let exec = self.graphbug(
            tag,
            &[
                os("repro"),
                dump.as_os_str(),
                os("--backend"),
                os(backend),
                os("--level"),
                os(level),
                os("--out"),
                out.as_os_str(),
                os("-j"),
                os("1"),
            ],
        )?;
        let summary = fs::read(out.join("summary.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        Ok((exec, summary))
    }

    /// `dump-check`: every module with a program passes on the plugin at level 4.
    pub(super) fn dump_check(&self) -> Result<Outcome> {
        let (exec, summary) = self.repro_dump("dump-check", BACKEND, CHECK_LEVEL)?;
        // The summary names the module that failed; without one, graphbug's error line.
        let Some(summary) = summary else {
            return Ok(Outcome::Failed(exec.error_line("repro DUMP")));
        };
        let rows = modules(&summary)?;
        let mut passed = 0;
        for row in rows.iter().map(Row) {
            match row.result() {
                "passes" => passed += 1,
                "not_checked" => self.note(format!(
                    "{}: not checked: {}",
                    row.module(),
                    row.0["why"].as_str().unwrap_or("?")
                )),
                other => {
                    return Ok(Outcome::Failed(format!(
                        "{}: {other}: {}",
                        row.module(),
                        row.0["failure"]
                            .as_str()
                            .or(row.0["error"].as_str())
                            .unwrap_or("?")
                    )))
                }
            }
        }
        if passed == 0 {
            return Ok(Outcome::Failed(format!(
                "none of the dump's {} modules was checked",
                rows.len()
            )));
        }
        Ok(exec.outcome("repro DUMP"))
    }

    /// `dump-minify`: a runtime fault at an instruction only the dump's largest HLO module
    /// names fails that module alone; it is minified to one instruction; the minified
    /// directory reproduces the fault.
    pub(super) fn dump_minify(&self) -> Result<Outcome> {
        let dump = self.dump_dir()?;
        // The modules graphbug checks, with their programs, from dump-check's summary.
        let summary_path = self.work.join("dump-check").join("summary.json");
        let summary: Value = serde_json::from_slice(
            &fs::read(&summary_path)
                .with_context(|| format!("cannot read {}", summary_path.display()))?,
        )?;
        let mut texts: Vec<(String, String)> = Vec::new();
        for row in modules(&summary)? {
            let (Some(module), Some(program)) = (row["module"].as_str(), row["program"].as_str())
            else {
                continue;
            };
            let path = dump.join(program);
            let exec = self.graphbug(
                &format!("dump-fmt-{module}"),
                &[os("fmt"), path.as_os_str()],
            )?;
            if exec.code != Some(0) {
                return Ok(Outcome::Failed(format!(
                    "{program}: {}",
                    exec.error_line("fmt")
                )));
            }
            texts.push((module.to_string(), exec.stdout));
        }
        let Some((module, target)) = pick_fault(&texts) else {
            return Ok(Outcome::NotApplicable(
                "no HLO module of the dump has an instruction no other module names (its programs are StableHLO, or computations alike)".into(),
            ));
        };
        let backend = format!("fault:runtime@node:{target}+{BACKEND}");
        let (exec, summary) = self.repro_dump("dump-minify", &backend, "3")?;
        let what = format!("repro DUMP --backend {backend}");
        let Some(summary) = summary else {
            return Ok(Outcome::Failed(exec.error_line(&what)));
        };
        for row in modules(&summary)?.iter().map(Row) {
            let faulted = row.module() == module;
            match (faulted, row.result()) {
                (true, "fails") => {
                    let minified = &row.0["minified"];
                    if minified["result"] != "done" || minified["end"] != 1 {
                        return Ok(Outcome::Failed(format!(
                            "{module} (fault at {target}): minified to {minified}, not to one instruction"
                        )));
                    }
                }
                (true, other) => {
                    return Ok(Outcome::Failed(format!(
                        "{module} (fault at {target}): {other}, not fails"
                    )))
                }
                (false, "passes" | "not_checked") => {}
                (false, other) => {
                    return Ok(Outcome::Failed(format!(
                        "{} {other} under a fault at {target} of {module}",
                        row.module()
                    )))
                }
            }
        }
        if exec.code != Some(0) {
            return Ok(Outcome::Failed(exec.error_line(&what)));
        }
        // The minified directory reproduces the fault (`repro DIR run` exits 1).
        let minified = self.work.join("dump-minify").join(&module).join("minified");
        let again = self.graphbug(
            "dump-minify-reproduce",
            &[os("repro"), minified.as_os_str(), os("run")],
        )?;
        if again.code != Some(1) {
            return Ok(Outcome::Failed(format!(
                "{}: does not reproduce (exit {:?}): {}",
                minified.display(),
                again.code,
                again.error_line("repro DIR run")
            )));
        }
        Ok(Outcome::Passed)
    }
}

/// The `modules` rows of a summary.json.
fn modules(summary: &Value) -> Result<&Vec<Value>> {
    match summary["modules"].as_array() {
        Some(rows) => Ok(rows),
        None => bail!("summary.json has no `modules` list"),
    }
}

/// Every instruction name of HLO text (without XLA's `%`), in every computation.
fn instruction_names(hlo: &str) -> BTreeSet<&str> {
    hlo.lines()
        .filter_map(|line| {
            let t = line.trim_start();
            let t = t.strip_prefix("ROOT ").unwrap_or(t);
            let (name, _) = t.split_once(" = ")?;
            (!name.contains(char::is_whitespace)).then(|| name.trim_start_matches('%'))
        })
        .collect()
}

/// The module (of `(module, HLO text)`) with the most entry instructions a fault may be
/// pinned to, and the middle one of those no other module names.
fn pick_fault(texts: &[(String, String)]) -> Option<(String, String)> {
    let (module, text) = texts.iter().max_by_key(|(module, text)| {
        (fault_targets(text).len(), std::cmp::Reverse(module.clone()))
    })?;
    let others: BTreeSet<&str> = texts
        .iter()
        .filter(|(m, _)| m != module)
        .flat_map(|(_, t)| instruction_names(t))
        .collect();
    let own: Vec<String> = fault_targets(text)
        .into_iter()
        .filter(|t| !others.contains(t.as_str()))
        .collect();
    let target = own.get(own.len() / 2)?.clone();
    Some((module.clone(), target))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fault_goes_to_the_largest_module_at_a_name_only_it_has() {
        let a = "HloModule a\n\nENTRY %main (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n  %neg.1 = f32[2]{0} negate(f32[2]{0} %p)\n  ROOT %exp.2 = f32[2]{0} exponential(f32[2]{0} %neg.1)\n}\n";
        let b = "HloModule b\n\nENTRY %main (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n  %neg.1 = f32[2]{0} negate(f32[2]{0} %p)\n  %abs.3 = f32[2]{0} abs(f32[2]{0} %neg.1)\n  ROOT %sqrt.4 = f32[2]{0} sqrt(f32[2]{0} %abs.3)\n}\n";
        let texts = vec![
            ("m0.a".to_string(), a.to_string()),
            ("m1.b".to_string(), b.to_string()),
        ];
        // b has three targets; neg.1 is a's too: abs.3 and sqrt.4 are left, the middle is sqrt.4.
        assert_eq!(
            pick_fault(&texts),
            Some(("m1.b".to_string(), "sqrt.4".to_string()))
        );
        // A module whose every instruction another names has nothing to fault.
        let same = vec![
            ("x".to_string(), a.to_string()),
            ("y".to_string(), a.to_string()),
        ];
        assert_eq!(pick_fault(&same), None);
        assert!(instruction_names(b).contains("p"));
    }
}

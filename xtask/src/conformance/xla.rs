//! The stages of XLA programs (the `xla` source): the files each stage reads are named in
//! case.json by `xtask/conformance/gen_xla_cases.py`, JAX's answers beside them.

use std::fs;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use super::{first_error_line, os, string_list, Outcome, Runner};

/// The backend the run stages compile and run on: the XLA CPU PJRT plugin in the venv.
pub const BACKEND: &str = "pjrt:cpu";

impl Runner<'_> {
    /// `graphbug repro` of the case's first HLO program under
    /// `fault:runtime@node:T+pjrt:cpu`, T the middle one of [`fault_targets`] (or the
    /// case's `minify_target`): the minification must end at one instruction, the case's
    /// `minify_root` (default T), as the program's ROOT; and the minified directory must
    /// reproduce the failure with the very command the run printed for it (`graphbug repro
    /// DIR/minified run`, exit 1).
    pub(super) fn xla_minify(&self) -> Result<Outcome> {
        let (program, path, inputs) = match self.first_hlo()? {
            Ok(found) => found,
            Err(skipped) => return Ok(skipped),
        };
        let text =
            fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let targets = fault_targets(&text);
        let target = match self.case.json["minify_target"].as_str() {
            Some(t) => t.to_string(),
            None => match targets.get(targets.len() / 2) {
                Some(t) => t.clone(),
                None => {
                    return Ok(Outcome::NotApplicable(
                        "the entry computation computes nothing to fault".into(),
                    ))
                }
            },
        };
        let root = self.case.json["minify_root"]
            .as_str()
            .unwrap_or(&target)
            .to_string();
        let backend = format!("fault:runtime@node:{target}+{BACKEND}");
        let out = self.work.join("minify-hlo.repro");
        let _ = fs::remove_dir_all(&out);
        let exec = self.graphbug(
            "minify-hlo",
            &[
                os("repro"),
                path.as_os_str(),
                os("--inputs"),
                inputs.as_os_str(),
                os("--backend"),
                os(&backend),
                os("--level"),
                os("3"),
                os("--out"),
                out.as_os_str(),
            ],
        )?;
        if exec.code != Some(0) {
            // The plugin's gap, said by the plugin (here through the reference run).
            if let Some(t) = exec.stderr.lines().find_map(missing_ffi_handler) {
                return Ok(Outcome::NotApplicable(format!(
                    "the {BACKEND} plugin has no handler for custom call `{t}`"
                )));
            }
            return Ok(Outcome::Failed(format!(
                "{program}: {}",
                exec.error_line(&format!("repro --backend {backend}"))
            )));
        }
        let printed = format!("{}\n{}", exec.stdout, exec.stderr);
        let ends = |name: &str| {
            printed.lines().any(|l| {
                l.trim_start().starts_with(&format!("ROOT {name} = "))
                    || l.trim_start().starts_with(&format!("ROOT %{name} = "))
            })
        };
        let end = minified_count(&printed);
        if end != Some(1) || !ends(&root) {
            return Ok(Outcome::Failed(format!(
                "{program}: repro under {backend} minified to {}, not `{root}` alone",
                end.map_or("an unknown count of instructions".into(), |n| format!(
                    "{n} instructions"
                ))
            )));
        }
        // The command printed for the minified directory, run as printed.
        let Some(command) = printed_command(&printed, "/minified run") else {
            return Ok(Outcome::Failed(format!(
                "{program}: repro printed no `graphbug repro DIR/minified run` command"
            )));
        };
        let args: Vec<&std::ffi::OsStr> = command.iter().map(String::as_str).map(os).collect();
        let again = self.graphbug("minify-hlo-reproduce", &args)?;
        if again.code != Some(1) {
            return Ok(Outcome::Failed(format!(
                "{program}: the minified directory does not reproduce with `graphbug {}` (exit {:?}): {}",
                command.join(" "),
                again.code,
                again.error_line("repro DIR run")
            )));
        }
        Ok(Outcome::Passed)
    }

    /// `graphbug bisect` of the case's first HLO program on its inputs, for `contains:fusion`:
    /// it must end with a set of passes whose turning off makes the fusions go away, its
    /// workaround checked by one more run, or find them made by passes the program needs
    /// (XLA CPU's `fusion-wrapper` where a scatter must be fused). A program the plugin
    /// fuses nothing in has nothing to bisect.
    pub(super) fn xla_bisect(&self) -> Result<Outcome> {
        let (program, path, inputs) = match self.first_hlo()? {
            Ok(found) => found,
            Err(skipped) => return Ok(skipped),
        };
        let out = self.work.join("bisect-hlo.out");
        let _ = fs::remove_dir_all(&out);
        let limit = (self.opts.timeout.as_secs() / 10).max(1).to_string();
        let exec = self.graphbug(
            "bisect-hlo",
            &[
                os("bisect"),
                path.as_os_str(),
                os("--inputs"),
                inputs.as_os_str(),
                os("--backend"),
                os(BACKEND),
                os("--check"),
                os("contains:fusion"),
                os("--timeout"),
                os(&limit),
                os("--out"),
                out.as_os_str(),
            ],
        )?;
        if exec.code != Some(0) {
            if exec
                .stderr
                .contains("the optimized program does not call what --check lists")
            {
                return Ok(Outcome::NotApplicable(
                    "the plugin fuses nothing in it".into(),
                ));
            }
            if let Some(t) = exec.stderr.lines().find_map(missing_ffi_handler) {
                return Ok(Outcome::NotApplicable(format!(
                    "the {BACKEND} plugin has no handler for custom call `{t}`"
                )));
            }
            return Ok(Outcome::Failed(format!(
                "{program}: {}",
                exec.error_line("bisect --check contains:fusion")
            )));
        }
        let report_file = out.join("bisect.json");
        let report: serde_json::Value = serde_json::from_slice(
            &fs::read(&report_file)
                .with_context(|| format!("cannot read {}", report_file.display()))?,
        )
        .with_context(|| format!("{}", report_file.display()))?;
        Ok(bisect_outcome(&program, &report))
    }

    /// The case's first HLO program (its name and file) and its inputs' file, or the
    /// stage's outcome where the case runs nothing (`run_skip`).
    fn first_hlo(&self) -> Result<Result<(String, PathBuf, PathBuf), Outcome>> {
        if let Some(why) = self.case.json["run_skip"].as_str() {
            return Ok(Err(Outcome::NotApplicable(why.to_string())));
        }
        let program = string_list(&self.case.json["run_hlo"])
            .into_iter()
            .next()
            .context("case.json has no `run_hlo` list")?;
        let path = self.file(&program);
        let inputs = self.file(
            self.case.json["inputs"]
                .as_str()
                .context("case.json has no `inputs` file")?,
        );
        Ok(Ok((program, path, inputs)))
    }

    /// The `(file, expected)` pairs of a case.json list: `{"file": F}` expects F's own bytes,
    /// `{"file": F, "expected": E}` the text of E.
    fn expected_prints(&self, key: &str) -> Result<Vec<(String, String)>> {
        let Some(entries) = self.case.json[key].as_array() else {
            bail!("case.json has no `{key}` list");
        };
        entries
            .iter()
            .map(|e| {
                let file = e["file"]
                    .as_str()
                    .with_context(|| format!("case.json `{key}` entry without a file: {e}"))?;
                let expected = e["expected"].as_str().unwrap_or(file);
                Ok((file.to_string(), expected.to_string()))
            })
            .collect()
    }

    /// `graphbug fmt FILE` prints each file as expected: the first file printed otherwise
    /// fails the stage, naming the file, the line and what differs.
    fn prints_as_expected(&self, key: &str, tag: &str) -> Result<Outcome> {
        for (file, expected) in self.expected_prints(key)? {
            let path = self.file(&file);
            let expected_path = self.file(&expected);
            let want = fs::read_to_string(&expected_path)
                .with_context(|| format!("cannot read {}", expected_path.display()))?;
            let exec = self.graphbug(&format!("{tag}-{file}"), &[os("fmt"), path.as_os_str()])?;
            if exec.code != Some(0) {
                return Ok(Outcome::Failed(format!(
                    "{file}: {}",
                    exec.error_line("fmt")
                )));
            }
            if exec.stdout != want {
                return Ok(Outcome::Failed(format!(
                    "{file}: fmt prints {}",
                    first_difference(&want, &exec.stdout, &expected)
                )));
            }
        }
        Ok(Outcome::Passed)
    }

    /// HLO text in both styles byte for byte, StableHLO text as written, bytecode as JAX
    /// reads it.
    pub(super) fn xla_fmt(&self) -> Result<Outcome> {
        self.prints_as_expected("fmt", "fmt")
    }

    /// Protos printed as XLA prints them.
    pub(super) fn xla_proto(&self) -> Result<Outcome> {
        self.prints_as_expected("proto", "proto")
    }

    /// `graphbug check` of each program: it passes, and counts JAX's flattened arguments as
    /// parameters and JAX's flattened outputs as outputs.
    pub(super) fn xla_check(&self) -> Result<Outcome> {
        let count = |key: &str| {
            self.case.json[key]
                .as_u64()
                .with_context(|| format!("case.json has no `{key}`"))
        };
        let (args, outputs) = (count("num_args")?, count("num_outputs")?);
        let files = string_list(&self.case.json["check"]);
        if files.is_empty() {
            bail!("case.json has no `check` list");
        }
        for file in files {
            let path = self.file(&file);
            let exec = self.graphbug(&format!("check-{file}"), &[os("check"), path.as_os_str()])?;
            if exec.code != Some(0) {
                return Ok(Outcome::Failed(format!(
                    "{file}: {}",
                    exec.error_line("check")
                )));
            }
            let Some((params, outs)) = parse_counts(&exec.stdout) else {
                return Ok(Outcome::Failed(format!(
                    "{file}: check printed no `N instructions, I parameters, O outputs` line: `{}`",
                    exec.stdout.trim()
                )));
            };
            if (params, outs) != (args, outputs) {
                return Ok(Outcome::Failed(format!(
                    "{file}: check counts {params} parameters and {outs} outputs; JAX lowered {args} arguments and {outputs} outputs"
                )));
            }
        }
        Ok(Outcome::Passed)
    }

    /// `graphbug run PROGRAM --backend pjrt:cpu --inputs --compare` of each program the
    /// case.json list `key` names, against JAX's outputs.
    pub(super) fn xla_run(&self, key: &str) -> Result<Outcome> {
        if let Some(why) = self.case.json["run_skip"].as_str() {
            return Ok(Outcome::NotApplicable(why.to_string()));
        }
        let file = |k: &str| -> Result<std::path::PathBuf> {
            let name = self.case.json[k]
                .as_str()
                .with_context(|| format!("case.json has no `{k}` file"))?;
            Ok(self.file(name))
        };
        let (inputs, outputs) = (file("inputs")?, file("outputs")?);
        let programs = string_list(&self.case.json[key]);
        if programs.is_empty() {
            bail!("case.json has no `{key}` list");
        }
        // graphbug's own limit names the stage that ran out of time; the runner's is later.
        let limit = (self.opts.timeout.as_secs() * 9 / 10).max(1).to_string();
        for program in programs {
            let path = self.file(&program);
            let exec = self.graphbug(
                &format!("run-{program}"),
                &[
                    os("run"),
                    path.as_os_str(),
                    os("--backend"),
                    os(BACKEND),
                    os("--inputs"),
                    inputs.as_os_str(),
                    os("--compare"),
                    outputs.as_os_str(),
                    os("--timeout"),
                    os(&limit),
                ],
            )?;
            if exec.code != Some(0) {
                let line = first_error_line(&exec.stderr, &exec.stdout);
                if let Some(target) = missing_ffi_handler(&line) {
                    // The plugin's gap, said by the plugin: not graphbug's, not a pass.
                    return Ok(Outcome::NotApplicable(format!(
                        "the {BACKEND} plugin has no handler for custom call `{target}` (JAX's own CPU client registers jaxlib's LAPACK kernels; the xla-cpu-pjrt plugin has none)"
                    )));
                }
                return Ok(Outcome::Failed(format!(
                    "{program}: {}",
                    exec.error_line(&format!("run --backend {BACKEND} --compare"))
                )));
            }
        }
        Ok(Outcome::Passed)
    }
}

/// The instructions a fault may be pinned to in HLO text: the entry computation's
/// array-valued instructions other than parameters, constants, tuples and
/// get-tuple-elements (names without XLA's `%`), in text order.
pub fn fault_targets(hlo: &str) -> Vec<String> {
    let mut in_entry = false;
    let mut out = Vec::new();
    for line in hlo.lines() {
        let t = line.trim_start();
        if t.starts_with("ENTRY ") {
            in_entry = true;
            continue;
        }
        if !in_entry {
            continue;
        }
        if t.starts_with('}') {
            break;
        }
        let t = t.strip_prefix("ROOT ").unwrap_or(t);
        let Some((name, rest)) = t.split_once(" = ") else {
            continue;
        };
        let rest = rest.trim_start();
        let Some((shape_and_op, _)) = rest.split_once('(') else {
            continue;
        };
        // A tuple shape starts with `(`: nothing before it.
        let op = shape_and_op.trim_end().rsplit(' ').next().unwrap_or("");
        if shape_and_op.trim().is_empty()
            || ["parameter", "constant", "tuple", "get-tuple-element"].contains(&op)
        {
            continue;
        }
        out.push(name.trim_start_matches('%').to_string());
    }
    out
}

/// The custom-call target of a plugin's `No FFI handler registered for TARGET` compile
/// error, where `line` (graphbug run's error) is one.
pub fn missing_ffi_handler(line: &str) -> Option<&str> {
    if !line.contains("compile error in backend") {
        return None;
    }
    let rest = line.split("No FFI handler registered for ").nth(1)?;
    rest.split_whitespace().next()
}

/// `(parameters, outputs)` of `check`'s `N instructions, I parameters, O outputs` line
/// (`N statements, ...` for StableHLO).
pub fn parse_counts(stdout: &str) -> Option<(u64, u64)> {
    stdout.lines().find_map(|line| {
        let parts: Vec<&str> = line.trim().split(", ").collect();
        let [first, params, outs] = parts.as_slice() else {
            return None;
        };
        let number = |text: &str, unit: &[&str]| -> Option<u64> {
            let (n, word) = text.split_once(' ')?;
            unit.contains(&word).then_some(())?;
            n.parse().ok()
        };
        number(
            first,
            &["instructions", "instruction", "statements", "statement"],
        )?;
        Some((
            number(params, &["parameters", "parameter"])?,
            number(outs, &["outputs", "output"])?,
        ))
    })
}

/// Where `got` first differs from `want`: line, column, and each side's text around it
/// (at most 60 characters before and after), `expected` naming what `want` is.
pub fn first_difference(want: &str, got: &str, expected: &str) -> String {
    let w: Vec<&str> = want.split_inclusive('\n').collect();
    let g: Vec<&str> = got.split_inclusive('\n').collect();
    let Some(k) = (0..w.len().max(g.len())).find(|&i| w.get(i) != g.get(i)) else {
        return "the same text".into();
    };
    let (wl, gl) = (w.get(k).copied(), g.get(k).copied());
    let column = match (wl, gl) {
        (Some(a), Some(b)) => a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count(),
        _ => 0,
    };
    let window = |line: Option<&str>| match line {
        None => "<end>".to_string(),
        Some(l) => {
            let chars: Vec<char> = l.trim_end_matches('\n').chars().collect();
            let from = column.saturating_sub(60);
            let to = (column + 60).min(chars.len());
            let mut s: String = chars.get(from..to).unwrap_or(&[]).iter().collect();
            if l.ends_with('\n') && to == chars.len() {
                s.push_str("\\n");
            } else if !l.ends_with('\n') && to == chars.len() {
                s.push_str("<no newline>");
            }
            format!(
                "{}{s}{}",
                if from > 0 { "…" } else { "" },
                if to < chars.len() { "…" } else { "" }
            )
        }
    };
    format!(
        "line {} differently (column {}): {expected} `{}`, graphbug `{}`",
        k + 1,
        column + 1,
        window(wl),
        window(gl)
    )
}

/// The count a repro's `minified N instructions to M ...` line gives (M).
fn minified_count(printed: &str) -> Option<u64> {
    printed.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("minified ")?;
        let (_, after) = rest.split_once(" to ")?;
        after.split_whitespace().next()?.parse().ok()
    })
}

/// The arguments of the `graphbug ...` command (graphbug by name or by its path) a run
/// printed whose text ends with `ending` (before its `#` comment), without graphbug.
fn printed_command(printed: &str, ending: &str) -> Option<Vec<String>> {
    printed.lines().find_map(|l| {
        let command = l.split('#').next()?.trim();
        // `graphbug`, or its full path where no `graphbug` on PATH is the binary.
        let (exe, rest) = command.split_once(' ')?;
        (exe.ends_with("graphbug") && rest.ends_with(ending))
            .then(|| rest.split_whitespace().map(str::to_string).collect())
    })
}

/// The bisect-hlo stage's verdict on a bisection's `bisect.json` of `program`: passed
/// where turning the guilty passes off makes the fusions go away (checked by the
/// bisection's one more run), or where they show with every pass off but passes the
/// program needs.
fn bisect_outcome(program: &str, report: &serde_json::Value) -> Outcome {
    let guilty = report["guilty"].as_array().map_or(0, Vec::len);
    let needed = report["needed"].as_array().map_or(0, Vec::len);
    let checked = report["workaround"]["checked"].as_str().unwrap_or_default();
    match (guilty, needed, report["in_no_searched_pass"].as_bool()) {
        (g, _, _) if g > 0 && checked == "gone" => Outcome::Passed,
        (0, n, Some(true)) if n > 0 => Outcome::Passed,
        (g, _, _) if g > 0 => Outcome::Failed(format!(
            "{program}: turning off {} does not make the fusions go away: {checked}",
            report["guilty"]
        )),
        _ => Outcome::Failed(format!(
            "{program}: the fusions show with every pass off, and no pass is needed"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wrong answers fail the stage: a workaround that does not work, fusions with every
    /// pass off and no pass needed, a report without a verdict.
    #[test]
    fn a_bisection_is_held_to_its_workaround() {
        let j = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
        let passed = [
            r#"{"guilty": ["fusion"], "needed": [], "workaround": {"checked": "gone"}}"#,
            r#"{"guilty": [], "needed": [["fusion-wrapper", "UNIMPLEMENTED"]], "in_no_searched_pass": true}"#,
        ];
        for r in passed {
            assert_eq!(bisect_outcome("p.hlo", &j(r)), Outcome::Passed, "{r}");
        }
        for (r, says) in [
            (
                r#"{"guilty": ["fusion"], "needed": [], "workaround": {"checked": "the failure still shows"}}"#,
                "turning off [\"fusion\"] does not make the fusions go away: the failure still shows",
            ),
            (
                r#"{"guilty": [], "needed": [], "in_no_searched_pass": true}"#,
                "no pass is needed",
            ),
            (r#"{}"#, "no pass is needed"),
        ] {
            match bisect_outcome("p.hlo", &j(r)) {
                Outcome::Failed(line) => assert!(line.contains(says), "{r}: {line}"),
                other => panic!("{r}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_missing_ffi_handler_is_the_plugins_gap_only_at_compile() {
        let line = "compile error in backend `pjrt:cpu`: /x/xla_cpu_pjrt.so: PJRT_Client_Compile failed (NOT_FOUND): No FFI handler registered for lapack_spotrf_ffi on a platform Host (canonical host)";
        assert_eq!(missing_ffi_handler(line), Some("lapack_spotrf_ffi"));
        assert_eq!(
            missing_ffi_handler("output 0 f32[]: FAIL: max diff 3"),
            None
        );
        assert_eq!(
            missing_ffi_handler(
                "runtime error in backend `pjrt:cpu`: No FFI handler registered for x"
            ),
            None
        );
    }

    #[test]
    fn a_repro_run_gives_its_count_and_its_commands() {
        let printed = "minified 410 instructions to 9 in 189 queries (177 cache hits, 1 worker): /t/r/minified\n\
done in 29.4 s. Next:\n  graphbug repro /t/r/minified run        # reproduce the minified failure (exit 1)\n  graphbug repro /t/r/minified analyze    # the first instruction that diverges\n";
        assert_eq!(minified_count(printed), Some(9));
        assert_eq!(
            printed_command(printed, "/minified run"),
            Some(vec!["repro".into(), "/t/r/minified".into(), "run".into()])
        );
        assert_eq!(printed_command(printed, "/minified minify"), None);
        assert_eq!(
            printed_command(
                "  /x/target/debug/graphbug repro /t/r/minified run  # ...",
                "/minified run"
            ),
            Some(vec!["repro".into(), "/t/r/minified".into(), "run".into()])
        );
        assert_eq!(minified_count("done in 1 s\n"), None);
    }

    #[test]
    fn counts_of_check() {
        assert_eq!(
            parse_counts("12 instructions, 3 parameters, 2 outputs\n"),
            Some((3, 2))
        );
        assert_eq!(
            parse_counts("note\n7 statements, 1 parameter, 1 output\n"),
            Some((1, 1))
        );
        assert_eq!(parse_counts("12 instructions, 3 parameters"), None);
        assert_eq!(
            parse_counts("x instructions, 3 parameters, 2 outputs"),
            None
        );
    }

    #[test]
    fn differences_name_line_and_column() {
        let want = "HloModule m\n  a = f32[2] add(x, y)\n";
        let got = "HloModule m\n  a = f32[2] add(y, x)\n";
        assert_eq!(
            first_difference(want, got, "JAX"),
            "line 2 differently (column 18): JAX `  a = f32[2] add(x, y)\\n`, graphbug `  a = f32[2] add(y, x)\\n`"
        );
        assert_eq!(
            first_difference("a\nb\n", "a\n", "XLA"),
            "line 2 differently (column 1): XLA `b\\n`, graphbug `<end>`"
        );
        assert_eq!(
            first_difference("a\n", "a", "XLA"),
            "line 1 differently (column 2): XLA `a\\n`, graphbug `a<no newline>`"
        );
        let long = format!("{}x{}\n", "a".repeat(100), "b".repeat(100));
        let other = format!("{}y{}\n", "a".repeat(100), "b".repeat(100));
        let d = first_difference(&long, &other, "JAX");
        assert!(d.contains("column 101"), "{d}");
        assert!(
            d.contains(&format!("`…{}x{}…`", "a".repeat(60), "b".repeat(59))),
            "{d}"
        );
    }
}

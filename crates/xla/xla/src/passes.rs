//! The HLO passes a plugin runs on a program, read from what it dumps: compiled with
//! `xla_dump_to`, `xla_dump_hlo_pass_re=.+` and `xla_dump_hlo_as_text`, an XLA plugin
//! writes the module after every pass invocation, as
//! `module_NNNN.<module>.<seq>.<pipeline>.after_<pass>.before_<next>.txt`, in the order the
//! passes ran (`.+`, not `.*`: with `.*` XLA dumps only the passes that changed the module).
//! The names are the plugin's own, read from it, never a list kept here. Nothing here
//! needs libtorch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The compile options that make an XLA plugin dump the module after every pass into `dir`.
pub fn dump_options(dir: &Path, every_pass: bool) -> Vec<(String, String)> {
    let mut options = vec![
        ("xla_dump_to".to_string(), dir.display().to_string()),
        ("xla_dump_hlo_as_text".to_string(), "true".to_string()),
    ];
    if every_pass {
        options.push(("xla_dump_hlo_pass_re".to_string(), ".+".to_string()));
    }
    options
}

/// One invocation of a pass, as its dump names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    /// Its place in the run (XLA's dump counter).
    pub seq: u32,
    /// The pipeline it ran in (as the file name writes it: spaces made `_`).
    pub pipeline: String,
    /// The pass's name.
    pub pass: String,
    /// The module after it.
    pub file: PathBuf,
    /// The module before it (the previous dump of the module).
    pub before: PathBuf,
    /// Whether it changed the module.
    pub changed: bool,
    /// Which run of this pass it is (0 for the first), over the whole compile.
    pub occurrence: usize,
}

/// The passes one compile of a module ran, in order.
#[derive(Clone, Debug)]
pub struct PassRuns {
    /// The module's name.
    pub module: String,
    /// Every invocation, in the order they ran.
    pub invocations: Vec<Invocation>,
    /// Pipelines, in the order they started.
    pub pipelines: Vec<String>,
    /// The module the plugin optimized (`*after_optimizations.txt`), when dumped.
    pub optimized: Option<PathBuf>,
}

/// One dump file's name, read.
struct DumpName {
    module_id: String,
    module: String,
    seq: u32,
    pipeline: String,
    after: String,
}

fn read_name(name: &str) -> Option<DumpName> {
    let rest = name.strip_prefix("module_")?.strip_suffix(".txt")?;
    let (module_id, rest) = rest.split_once('.')?;
    // `.after_<pass>.before_<next>` ends it; <seq>.<pipeline> comes before.
    let at = rest.rfind(".before_")?;
    let head = &rest[..at];
    let after_at = head.rfind(".after_")?;
    let after = &head[after_at + ".after_".len()..];
    let head = &head[..after_at];
    let pipe_at = head.rfind('.')?;
    let pipeline = &head[pipe_at + 1..];
    let head = &head[..pipe_at];
    let seq_at = head.rfind('.')?;
    let seq = &head[seq_at + 1..];
    if seq.len() < 4 || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(DumpName {
        module_id: module_id.to_string(),
        module: head[..seq_at].to_string(),
        seq: seq.parse().ok()?,
        pipeline: pipeline.to_string(),
        after: after.to_string(),
    })
}

impl PassRuns {
    /// The passes of the module that ran the most passes in the dump directory `dir`; an
    /// error when the directory holds no per-pass dump (a plugin that is not XLA-based, or
    /// ignores XLA's dump options).
    pub fn read(dir: &Path) -> Result<PassRuns, String> {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut by_module: BTreeMap<String, Vec<(DumpName, PathBuf)>> = BTreeMap::new();
        let mut optimized: BTreeMap<String, PathBuf> = BTreeMap::new();
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(d) = read_name(&name) {
                by_module
                    .entry(d.module_id.clone())
                    .or_default()
                    .push((d, e.path()));
            } else if name.ends_with("after_optimizations.txt") {
                if let Some(id) = name.strip_prefix("module_").and_then(|r| r.split_once('.')) {
                    optimized.insert(id.0.to_string(), e.path());
                }
            }
        }
        let Some((id, mut files)) = by_module.into_iter().max_by_key(|(_, f)| f.len()) else {
            return Err(format!(
                "{}: the plugin dumped no module after its passes (asked with xla_dump_to, xla_dump_hlo_pass_re=.+ and xla_dump_hlo_as_text): it is not XLA-based, or it ignores XLA's debug options",
                dir.display()
            ));
        };
        files.sort_by_key(|(d, _)| d.seq);
        let module = files[0].0.module.clone();
        let mut pipelines: Vec<String> = Vec::new();
        let mut invocations = Vec::new();
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        let mut previous: Option<(PathBuf, Vec<u8>)> = None;
        for (d, path) in files {
            let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if d.after == "pipeline-start" {
                if !pipelines.contains(&d.pipeline) {
                    pipelines.push(d.pipeline.clone());
                }
            } else if let Some((before, was)) = &previous {
                let n = counts.entry(d.after.clone()).or_insert(0);
                invocations.push(Invocation {
                    seq: d.seq,
                    pipeline: d.pipeline.clone(),
                    pass: d.after.clone(),
                    file: path.clone(),
                    before: before.clone(),
                    changed: was != &text,
                    occurrence: *n,
                });
                *n += 1;
            }
            previous = Some((path, text));
        }
        Ok(PassRuns {
            module,
            invocations,
            pipelines,
            optimized: optimized.remove(&id),
        })
    }

    /// The passes that can be turned off by name, in the order each first ran: every
    /// invocation's pass that is not itself a pipeline (a sub-pipeline runs as a pass of
    /// its parent; turning it off turns off all it holds).
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for i in &self.invocations {
            if !self.pipelines.contains(&i.pass) && !names.contains(&i.pass) {
                names.push(i.pass.clone());
            }
        }
        names
    }

    /// The invocations of `pass`, in order.
    pub fn of<'a>(&'a self, pass: &'a str) -> impl Iterator<Item = &'a Invocation> + 'a {
        self.invocations.iter().filter(move |i| i.pass == pass)
    }

    /// Every invocation, a line each: `0012 pipeline/pass (changed the module)`.
    pub fn listing(&self) -> String {
        let mut out = String::new();
        for i in &self.invocations {
            out.push_str(&format!(
                "{:04} {}/{}{}{}\n",
                i.seq,
                i.pipeline,
                i.pass,
                if self.pipelines.contains(&i.pass) {
                    " (pipeline)"
                } else {
                    ""
                },
                if i.changed { " *" } else { "" }
            ));
        }
        out
    }
}

/// The unified diff from the module before an invocation to the module after it, with
/// three lines of context.
pub fn module_diff(before: &str, after: &str, names: (&str, &str)) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(names.0, names.1)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_names_read_from_the_right() {
        let d = read_name(
            "module_0004.jit_f.1.0013.HLO_passes_through_layout_assignment.after_result_caster.before_dot_decomposer.txt",
        )
        .unwrap();
        assert_eq!(
            (d.module_id.as_str(), d.module.as_str(), d.seq),
            ("0004", "jit_f.1", 13)
        );
        assert_eq!(d.pipeline, "HLO_passes_through_layout_assignment");
        assert_eq!(d.after, "result_caster");
        // A pass's own dumps inside it, and other files, are not invocations.
        for other in [
            "module_0000.jit_convnet.0174.copy-insertion.after_removing_unnecessary_copies.txt",
            "module_0000.jit_convnet.cpu_after_optimizations.txt",
            "module_0000.jit_convnet.before_optimizations.txt",
            "module_0000.jit_convnet.debug_options",
        ] {
            assert!(read_name(other).is_none(), "{other}");
        }
    }

    #[test]
    fn invocations_are_read_in_order_with_their_changes() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            ("0000.p.after_pipeline-start.before_a", "m0"),
            ("0001.p.after_a.before_sub", "m0"),
            ("0002.sub.after_pipeline-start.before_b", "m0"),
            ("0003.sub.after_b.before_pipeline-end", "m1"),
            ("0004.p.after_sub.before_a", "m1"),
            ("0005.p.after_a.before_pipeline-end", "m2"),
        ];
        for (name, text) in files {
            std::fs::write(
                dir.path().join(format!("module_0007.jit_g.{name}.txt")),
                text,
            )
            .unwrap();
        }
        std::fs::write(
            dir.path()
                .join("module_0007.jit_g.cpu_after_optimizations.txt"),
            "m2",
        )
        .unwrap();
        let runs = PassRuns::read(dir.path()).unwrap();
        assert_eq!(runs.module, "jit_g");
        let got: Vec<(u32, &str, bool, usize)> = runs
            .invocations
            .iter()
            .map(|i| (i.seq, i.pass.as_str(), i.changed, i.occurrence))
            .collect();
        assert_eq!(
            got,
            [
                (1, "a", false, 0),
                (3, "b", true, 0),
                (4, "sub", false, 0),
                (5, "a", true, 1)
            ]
        );
        assert_eq!(runs.names(), ["a", "b"]);
        assert_eq!(runs.of("a").count(), 2);
        assert!(runs.optimized.is_some());
        assert!(runs
            .listing()
            .contains("0004 p/sub (pipeline)\n0005 p/a *\n"));
        // No per-pass dump: an error that says why.
        let empty = tempfile::tempdir().unwrap();
        let e = PassRuns::read(empty.path()).unwrap_err();
        assert!(e.contains("not XLA-based"), "{e}");
    }

    #[test]
    fn diffs_are_unified() {
        let d = module_diff("a\nb\nc\n", "a\nB\nc\n", ("before", "after"));
        assert!(d.contains("--- before\n+++ after\n"), "{d}");
        assert!(d.contains("-b\n+B\n"), "{d}");
    }
}

//! `report.html` in a repro directory: one self-contained page (no network) with the
//! failure, the original graph or program and the minified one drawn with the culprit
//! marked, the minifier's progress (nodes against queries) as a chart, the divergence of
//! an accuracy failure, and the commands to go on. Written for aten graphs' and XLA
//! programs' directories alike, from what the directory holds (`manifest.json`, the graph
//! or program, `minified/`, `state.json`), so it is rewritten whenever the directory
//! changes and never needs libtorch. A picture Graphviz cannot make leaves its reason in
//! the page, never a missing report.

use std::path::{Path, PathBuf};
use std::time::Duration;

use graphbug_draw::html::{self, Section};
use graphbug_draw::{Mark, Part, Picture, ViewOptions};
use graphbug_files::write_file_atomically;
use graphbug_ir::Graph;
use graphbug_minifier::progress::{MinifyState, Step, STATE_FILE};

use crate::dialect::{next_commands, Dialect};
use crate::dir::{DirManifest, MANIFEST_FILE};
use crate::FlowError;

/// The report's file name in a repro directory.
pub const REPORT_FILE: &str = "report.html";

/// How long Graphviz may take for each picture of a report.
const LAYOUT_LIMIT: Duration = Duration::from_secs(60);

/// What a repro directory holds, read for its report.
struct Directory {
    manifest: DirManifest,
    /// The program or graph file's name (`graph.py`, `program.hlo`).
    file: String,
    original: Graph,
    minified: Option<Graph>,
    history: Vec<Step>,
}

/// Reads the graph or program `file` of `dir` as `dialect` does.
fn read_graph(dir: &Path, file: &str, dialect: &dyn Dialect) -> Result<Graph, FlowError> {
    let path = dir.join(file);
    let bytes = std::fs::read(&path).map_err(|e| FlowError::io(&path, e))?;
    dialect.read_graph(&path, bytes)
}

impl Directory {
    fn read(dir: &Path, dialect: &dyn Dialect) -> Result<Directory, FlowError> {
        let manifest = DirManifest::read(dir)?;
        let file = manifest.file().to_string();
        let original = read_graph(dir, &file, dialect)?;
        let minified_dir = dir.join("minified");
        let minified = minified_dir
            .join(&file)
            .is_file()
            .then(|| read_graph(&minified_dir, &file, dialect))
            .transpose()?;
        let history = std::fs::read(dir.join(STATE_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice::<MinifyState>(&b).ok())
            .map(|s| {
                if s.history.is_empty() {
                    vec![
                        Step {
                            queries: 0,
                            nodes: s.stats.start_nodes,
                        },
                        Step {
                            queries: s.stats.queries,
                            nodes: s.stats.end_nodes,
                        },
                    ]
                } else {
                    s.history
                }
            })
            .unwrap_or_default();
        Ok(Directory {
            manifest,
            file,
            original,
            minified,
            history,
        })
    }

    /// The nodes the failure is pinned to: those the manifest names, and the minified
    /// graph's ops (when it was minified), which the original holds under the same names.
    fn culprits(&self) -> Vec<String> {
        let mut names = self
            .manifest
            .failure
            .as_ref()
            .map(|f| f.nodes())
            .unwrap_or_default();
        if let Some(m) = &self.minified {
            names.extend(kept_ops(m, &self.original));
        }
        let mut seen = std::collections::BTreeSet::new();
        names.retain(|n| self.original.find(n).is_some() && seen.insert(n.clone()));
        names
    }
}

/// The ops of a minified graph that are the original's ops of the same name (not the
/// constants that stand for values the original computes under those names).
fn kept_ops(minified: &Graph, original: &Graph) -> Vec<String> {
    minified
        .ids()
        .filter_map(|id| {
            let node = minified.node(id);
            let op = node.op()?;
            let theirs = original.find(&node.name)?;
            (original.node(theirs).op() == Some(op)).then(|| node.name.to_string())
        })
        .collect()
}

/// A picture of `graph` with `culprits` marked, as HTML, or the reason there is none.
fn picture(title: &str, graph: &Graph, culprits: &[String], id: &str) -> String {
    let mut part = Part::new(title, graph);
    part.caption = format!("{} nodes", graph.nodes.len());
    for c in culprits {
        part.mark(c, Mark::Culprit);
    }
    let picture = Picture {
        title: title.into(),
        parts: vec![part],
        notes: Vec::new(),
    };
    match picture.section(id, &ViewOptions::default(), LAYOUT_LIMIT) {
        Ok(section) => section.html,
        Err(e) => format!(
            "<p class=\"missing\">No picture: {}</p>\n",
            html::escape(&e.to_string())
        ),
    }
}

/// Writes `dir/report.html` from what `dir` holds (its graphs read by `dialect`, which
/// wrote it); returns its path.
pub fn write_report(dir: &Path, dialect: &dyn Dialect) -> Result<PathBuf, FlowError> {
    let d = Directory::read(dir, dialect)?;
    let shown = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let culprits = d.culprits();
    let m = &d.manifest;
    let failure = m.failure.as_ref();
    let kind = failure.map_or_else(|| "failure".to_string(), |f| f.kind());
    let message = failure.map_or("", |f| f.message.as_str());
    let mut sections = Vec::new();
    let mut facts = vec![format!("failure: {kind}")];
    for (key, value) in [
        ("backend", Some(m.backend.clone())),
        ("reference_backend", m.reference_backend.clone()),
        ("check", m.check.map(|c| c.to_string())),
        ("level", m.level.map(|l| l.to_string())),
        ("device", m.device.clone()),
        ("platform", m.platform.clone()),
        ("after", m.after.clone()),
    ] {
        if let Some(v) = value {
            facts.push(format!("{key}: {v}"));
        }
    }
    if !culprits.is_empty() {
        facts.push(format!("culprit: {}", culprits.join(", ")));
    }
    sections.push(Section::new(
        "failure",
        "The failure",
        format!("{}{}", html::list(&facts), html::pre(message)),
    ));
    sections.push(Section::new(
        "original",
        "The original",
        picture(&d.file, &d.original, &culprits, "original"),
    ));
    if let Some(m) = &d.minified {
        let kept = kept_ops(m, &d.original);
        sections.push(Section::new(
            "minified",
            "The minified",
            picture(&format!("minified/{}", d.file), m, &kept, "minified"),
        ));
    }
    if !d.history.is_empty() {
        let points: Vec<(f64, f64)> = d
            .history
            .iter()
            .map(|s| (s.queries as f64, s.nodes as f64))
            .collect();
        let mut rows =
            String::from("<table id=\"progress-table\"><tr><th>queries</th><th>nodes</th></tr>");
        for s in &d.history {
            rows.push_str(&format!(
                "<tr><td>{}</td><td>{}</td></tr>",
                s.queries, s.nodes
            ));
        }
        rows.push_str("</table>\n");
        sections.push(Section::new(
            "progress",
            "The minifier's progress",
            format!(
                "{}{rows}",
                html::line_chart(
                    "progress-chart",
                    "queries",
                    "nodes of the smallest failing graph",
                    &points
                )
            ),
        ));
    }
    if kind.contains("accuracy") {
        let mut lines = Vec::new();
        if let Some(margin) = failure.and_then(|f| f.margin) {
            lines.push(format!(
                "the worst output is {margin:.3e} times beyond its tolerance"
            ));
        }
        if let Some(tol) = &m.tolerance {
            lines.push(format!("tolerance: rtol {}, atol {}", tol.rtol, tol.atol));
        }
        lines.push(format!(
            "the first node that diverges, and where the divergence starts: graphbug repro {} analyze",
            shown.display()
        ));
        sections.push(Section::new(
            "divergence",
            "The divergence",
            format!("{}{}", html::pre(message), html::list(&lines)),
        ));
    }
    // `repro --bisect`: which pass, beside where.
    let summary = dir
        .join(crate::bisect::BISECT_DIR)
        .join(crate::bisect::SUMMARY_FILE);
    if let Ok(text) = std::fs::read_to_string(&summary) {
        sections.push(Section::new(
            "bisect",
            "Which pass",
            format!(
                "{}{}",
                html::list(&[format!(
                    "the bisection of the backend's passes, with the module before and after each guilty pass: {}",
                    shown.join(crate::bisect::BISECT_DIR).display()
                )]),
                html::pre(&text)
            ),
        ));
    }
    sections.push(Section::new(
        "commands",
        "Go on",
        html::pre(&commands(&d, &shown, dialect)),
    ));
    let page = html::page(&format!("graphbug repro: {}", shown.display()), &sections);
    let path = dir.join(REPORT_FILE);
    write_file_atomically(&path, page.as_bytes()).map_err(|e| FlowError::io(&path, e))?;
    Ok(path)
}

/// Writes the report of `dir`, and of `dir/minified` when there is one, and says where;
/// a report that cannot be written is said, never an error of the repro it reports.
pub fn report_to(dir: &Path, dialect: &dyn Dialect) {
    let minified = dir.join("minified");
    for d in [dir, minified.as_path()] {
        if d != dir && !d.join(MANIFEST_FILE).is_file() {
            continue;
        }
        match write_report(d, dialect) {
            Ok(path) => println!(
                "report: {}",
                std::path::absolute(&path).unwrap_or(path).display()
            ),
            Err(e) => println!("no report in {}: {e}", d.display()),
        }
    }
}

/// The commands that go on from a directory: its own, then its minified one's.
fn commands(d: &Directory, dir: &Path, dialect: &dyn Dialect) -> String {
    let dir = dir.display().to_string();
    let mut lines = next_commands(dialect, &dir, "graphbug", "python");
    lines.push(format!(
        "graphbug repro {dir} minify     # shrink it into {dir}/minified"
    ));
    lines.push(format!("graphbug draw {dir}/{} -o picture.html", d.file));
    if d.minified.is_some() {
        lines.extend(next_commands(
            dialect,
            &format!("{dir}/minified"),
            "graphbug",
            "python",
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(name: &str, to: &Path) -> PathBuf {
        let from = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../tests/fixtures/repro-dirs")
            .join(name);
        let dir = to.join(name);
        let copied = std::process::Command::new("cp")
            .arg("-r")
            .arg(&from)
            .arg(&dir)
            .status()
            .unwrap();
        assert!(copied.success());
        dir
    }

    /// The two dialects of the fixtures as far as a report needs them: an XLA program read
    /// by its content, else an aten graph; each dialect's own reproductions. (The dialects'
    /// crates implement the whole trait; this crate's tests cannot name their types.)
    struct Fixtures {
        xla: bool,
    }

    impl Dialect for Fixtures {
        fn plural(&self) -> &'static str {
            "fixtures"
        }
        fn noun(&self) -> &'static str {
            "a fixture"
        }
        fn node_word(&self) -> &'static str {
            "node"
        }
        fn file_noun(&self) -> &'static str {
            "file"
        }
        fn tells(&self, _path: &Path, _bytes: &[u8]) -> bool {
            true
        }
        fn wrote(&self, _manifest: &serde_json::Value) -> bool {
            true
        }
        fn read_graph(&self, path: &Path, bytes: Vec<u8>) -> Result<Graph, FlowError> {
            match graphbug_xla::program::sniff(&bytes, path) {
                Some(kind) => graphbug_xla::program::Program::read(&bytes, kind)
                    .and_then(|p| p.graph())
                    .map_err(|e| FlowError::bad(path, e)),
                None => graphbug_ir::parse_graph(&String::from_utf8(bytes).unwrap())
                    .map_err(|e| FlowError::bad(path, e)),
            }
        }
        fn standalone_commands(&self, dir: &str, python: &str) -> Vec<String> {
            if self.xla {
                vec![format!("{python} {dir}/repro.py # JAX alone")]
            } else {
                vec![format!("(cd {dir} && cargo run)")]
            }
        }
    }

    /// One report for both dialects' directories, from their typed manifests: the
    /// failure's kind, the culprit, what each dialect records, the commands that go on.
    #[test]
    fn reports_of_both_dialects() {
        let tmp = tempfile::tempdir().unwrap();
        for (name, says) in [
            (
                "aten",
                &[
                    "failure: runtime error",
                    "culprit: relu",
                    "after: dynamo",
                    "device: cpu",
                    "(cd ",
                ][..],
            ),
            (
                "hlo",
                &[
                    "failure: accuracy wrong result",
                    "culprit: reduce_max.7",
                    "check: accuracy",
                    "reference_backend: pjrt:cpu",
                    "tolerance: rtol 0.001, atol 0.001",
                    "# JAX alone",
                    "Which pass",
                    "guilty: `algsimp`",
                ][..],
            ),
        ] {
            let dir = copy(name, tmp.path());
            let dialect = Fixtures { xla: name == "hlo" };
            if name == "hlo" {
                // A bisection's summary is shown as it was printed.
                let b = dir.join(crate::bisect::BISECT_DIR);
                std::fs::create_dir_all(&b).unwrap();
                std::fs::write(b.join(crate::bisect::SUMMARY_FILE), "guilty: `algsimp`\n").unwrap();
            }
            let page = std::fs::read_to_string(write_report(&dir, &dialect).unwrap()).unwrap();
            for s in says {
                assert!(page.contains(s), "{name}: no `{s}` in {page:.3000}");
            }
        }
        // A directory whose program is gone: an error naming the file, and no page.
        let dir = copy("stablehlo", tmp.path());
        std::fs::remove_file(dir.join("program.mlir")).unwrap();
        std::fs::remove_file(dir.join(REPORT_FILE)).unwrap();
        let e = write_report(&dir, &Fixtures { xla: true })
            .unwrap_err()
            .to_string();
        assert!(e.contains("stablehlo/program.mlir: "), "{e}");
        assert!(!dir.join(REPORT_FILE).exists());
    }
}

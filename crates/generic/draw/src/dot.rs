//! Graphviz: views as DOT text, laid out by Graphviz's `dot` (a child process with a
//! bounded wait) into one SVG with the parts side by side.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use graphbug_run::process::{find_in_path, spawn, wait_bounded, Ended};
use graphbug_run::scratch::Scratch;

use crate::view::{Vertex, View};
use graphbug_run::memory::human as human_bytes;

use crate::{DrawError, Mark};

/// Fill colours of the marks, also the HTML page's legend.
pub const LEGEND: [(&str, &str, &str); 7] = [
    ("input", "#e7f0fa", "graph input"),
    ("output", "#ffffff", "graph output (thick border)"),
    ("saved", "#ffd8a8", "saved for the backward"),
    ("recomputed", "#c5f6fa", "recomputed in the backward"),
    ("culprit", "#ff6b6b", "culprit"),
    ("diverged", "#ff6b6b", "first divergence"),
    (
        "input-of-divergence",
        "#fff3bf",
        "input of the first divergence",
    ),
];

/// The fill colour of a mark kind.
fn fill(kind: &str) -> &'static str {
    LEGEND
        .iter()
        .find(|(k, _, _)| *k == kind)
        .map(|(_, c, _)| *c)
        .unwrap_or("#ffffff")
}

/// `text` as a DOT double-quoted string's body.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The SVG id of a node's box: `PART:NAME`.
pub fn node_id(part: &str, name: &str) -> String {
    format!("{part}:{name}")
}

/// One view as a DOT digraph. Graph attributes bound Graphviz's work (`nslimit`,
/// `mclimit`): a view is at most a few hundred boxes once repeats are collapsed, and an
/// exact layout of that many costs seconds for nothing a reader sees.
pub fn to_dot(view: &View) -> String {
    let mut out = String::new();
    let title = if view.caption.is_empty() {
        view.name.clone()
    } else {
        format!("{}\n{}", view.name, view.caption)
    };
    let _ = writeln!(
        out,
        "digraph \"{}\" {{\n  graph [label=\"{}\", labelloc=t, fontname=\"Helvetica\", fontsize=16, nslimit=4, nslimit1=4, mclimit=0.5, ranksep=0.3, nodesep=0.2];\n  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", fontname=\"Helvetica\", fontsize=10, margin=\"0.08,0.03\", height=0.3];\n  edge [arrowsize=0.6, color=\"#555555\"];",
        quote(&view.name),
        quote(&title)
    );
    let mut in_cluster: Vec<Vec<usize>> = vec![Vec::new(); view.repeats.len()];
    let mut lines: Vec<String> = Vec::with_capacity(view.vertices.len());
    for (k, v) in view.vertices.iter().enumerate() {
        lines.push(vertex_line(view, k, v));
        if let Vertex::Node {
            repeat: Some(r), ..
        } = v
        {
            in_cluster[*r].push(k);
        }
    }
    for (k, line) in lines.iter().enumerate() {
        let clustered = matches!(
            view.vertices[k],
            Vertex::Node {
                repeat: Some(_),
                ..
            }
        );
        if !clustered {
            let _ = writeln!(out, "  {line}");
        }
    }
    for (r, members) in in_cluster.iter().enumerate() {
        let repeat = &view.repeats[r];
        let _ = writeln!(
            out,
            "  subgraph cluster_{r} {{\n    label=\"layer repeated {} times: copy 1 of {} ({} nodes each)\"; style=\"dashed,rounded\"; color=\"#868e96\"; fontsize=11;",
            repeat.copies, repeat.copies, repeat.length
        );
        for &k in members {
            let _ = writeln!(out, "    {}", lines[k]);
        }
        out.push_str("  }\n");
    }
    for &(from, to) in &view.edges {
        let _ = writeln!(out, "  v{from} -> v{to};");
    }
    out.push_str("}\n");
    out
}

/// The DOT statement of one box.
fn vertex_line(view: &View, k: usize, v: &Vertex) -> String {
    match v {
        Vertex::Node {
            name,
            op,
            ty,
            marks,
            outputs,
            ..
        } => {
            // `addmm_2` is an addmm and `add.79` an add: the op line would say it again.
            let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
            let stem = stem.strip_suffix(['_', '.']).unwrap_or(stem);
            let mut label = if stem == op {
                name.clone()
            } else {
                format!("{name}\n{op}")
            };
            if !ty.is_empty() {
                let _ = write!(label, "\n{ty}");
            }
            let mut tooltip = vec![format!("{name} = {op} : {ty}")];
            for m in marks {
                if let Mark::Saved(bytes) = m {
                    let _ = write!(label, "\nsaved {}", human_bytes(*bytes));
                }
                tooltip.push(m.describe());
            }
            if !outputs.is_empty() {
                let list: Vec<String> = outputs.iter().map(usize::to_string).collect();
                let _ = write!(label, "\n→ output {}", list.join(", "));
            }
            let kind =
                crate::dominant(marks).unwrap_or(if op == "input" || op.starts_with("self.") {
                    "input"
                } else {
                    ""
                });
            let mut attrs = format!(
                "id=\"{}\", label=\"{}\", tooltip=\"{}\", fillcolor=\"{}\"",
                quote(&node_id(&view.name, name)),
                quote(&label),
                quote(&tooltip.join("\n")),
                fill(kind)
            );
            if marks.iter().any(|m| matches!(m, Mark::Recomputed)) {
                attrs.push_str(", style=\"rounded,filled,dashed\"");
            }
            if matches!(kind, "culprit" | "diverged") {
                attrs.push_str(", penwidth=3, color=\"#c92a2a\"");
            } else if !outputs.is_empty() {
                attrs.push_str(", penwidth=2.5");
            }
            format!("v{k} [{attrs}];")
        }
        Vertex::Folded {
            repeat,
            nodes,
            marks,
            saved_bytes,
            outputs,
        } => {
            let r = &view.repeats[*repeat];
            let mut label = format!(
                "{} more copies of the layer\n{} nodes folded ({} … {})",
                r.copies - 1,
                nodes,
                r.span.0,
                r.span.1
            );
            for (kind, count) in marks {
                let _ = write!(label, "\n{count} {kind}");
                if kind == "saved" {
                    let _ = write!(label, " ({})", human_bytes(*saved_bytes));
                }
            }
            if *outputs > 0 {
                let _ = write!(label, "\n→ {outputs} outputs");
            }
            format!(
                "v{k} [id=\"{}\", shape=box3d, style=filled, fillcolor=\"#e9ecef\", label=\"{}\"];",
                quote(&node_id(&view.name, &format!("folded-{repeat}"))),
                quote(&label)
            )
        }
    }
}

/// Lays out each view with Graphviz's `dot` (all at once, each a child process that dies
/// with graphbug, all within `limit`) and returns one SVG with the views side by side.
pub fn render_svg(views: &[View], limit: Duration) -> Result<String, DrawError> {
    let dot = find_in_path("dot").ok_or(DrawError::NoGraphviz)?;
    let scratch = Scratch::new("draw").map_err(|e| DrawError::Io(e.to_string()))?;
    let started = Instant::now();
    let mut children = Vec::new();
    for (k, view) in views.iter().enumerate() {
        let input = scratch.path().join(format!("{k}.dot"));
        let output = scratch.path().join(format!("{k}.svg"));
        std::fs::write(&input, to_dot(view))
            .map_err(|e| DrawError::Io(format!("writing {}: {e}", input.display())))?;
        // Graphviz's warnings go to a file: a pipe nobody reads while it runs could fill.
        let warnings = scratch.path().join(format!("{k}.err"));
        let stderr = std::fs::File::create(&warnings)
            .map_err(|e| DrawError::Io(format!("creating {}: {e}", warnings.display())))?;
        let mut cmd = Command::new(&dot);
        cmd.arg("-Tsvg")
            .arg(&input)
            .arg("-o")
            .arg(&output)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let child = spawn(cmd, true).map_err(|e| {
            DrawError::Graphviz(format!("could not start ({}): {e}", dot.display()))
        })?;
        children.push((child, output, warnings, view));
    }
    let mut svgs = Vec::new();
    let mut failed = None;
    for (mut child, output, warnings, view) in children {
        if failed.is_some() {
            // One layout failed: the others are ended, not waited for.
            graphbug_run::process::kill(&mut child, true);
            let _ = child.wait();
            continue;
        }
        let left = limit.saturating_sub(started.elapsed());
        let ended = match wait_bounded(&mut child, left, true) {
            Ok(ended) => ended,
            Err(e) => {
                failed = Some(DrawError::Graphviz(format!("could not be waited for: {e}")));
                continue;
            }
        };
        match ended {
            Ended::TimedOut => {
                failed = Some(DrawError::Graphviz(format!(
                    "took more than {} s to lay out `{}` ({} boxes, {} edges): draw less of it with --around NODE --depth K, or write --format model-explorer",
                    limit.as_secs(),
                    view.name,
                    view.vertices.len(),
                    view.edges.len()
                )))
            }
            Ended::Exited(status) if !status.success() => {
                let said = std::fs::read_to_string(&warnings).unwrap_or_default();
                failed = Some(DrawError::Graphviz(format!(
                    "failed on `{}` ({}): {}",
                    view.name,
                    graphbug_run::process::describe_status(&status),
                    said.trim()
                )));
            }
            Ended::Exited(_) => match read(&output) {
                Ok(svg) => svgs.push(svg),
                Err(e) => failed = Some(e),
            },
        }
    }
    match failed {
        Some(e) => Err(e),
        None => side_by_side(&svgs),
    }
}

/// Reads a file Graphviz wrote.
fn read(path: &Path) -> Result<String, DrawError> {
    std::fs::read_to_string(path)
        .map_err(|e| DrawError::Graphviz(format!("wrote no picture to {}: {e}", path.display())))
}

/// The points in a Graphviz size attribute (`"123pt"`).
fn points(svg: &str, attribute: &str) -> Option<f64> {
    let start = svg.find(&format!(" {attribute}=\""))? + attribute.len() + 3;
    let rest = &svg[start..];
    let end = rest.find('"')?;
    rest[..end].trim_end_matches("pt").parse().ok()
}

/// Graphviz's SVG documents placed left to right in one document (each keeps its own
/// coordinates inside a nested `<svg>`).
fn side_by_side(svgs: &[String]) -> Result<String, DrawError> {
    const GAP: f64 = 24.0;
    let mut body = String::new();
    let (mut x, mut height) = (0.0f64, 0.0f64);
    for svg in svgs {
        let start = svg
            .find("<svg")
            .ok_or_else(|| DrawError::Graphviz("wrote no <svg> element".into()))?;
        let element = &svg[start..];
        let (w, h) = match (points(element, "width"), points(element, "height")) {
            (Some(w), Some(h)) => (w, h),
            _ => return Err(DrawError::Graphviz("wrote an <svg> without a size".into())),
        };
        // The nested document at its offset, sized in the outer one's units.
        let element = element
            .replacen(
                &format!(" width=\"{}pt\"", fmt_points(w)),
                &format!(" x=\"{x}\" width=\"{w}\""),
                1,
            )
            .replacen(
                &format!(" height=\"{}pt\"", fmt_points(h)),
                &format!(" height=\"{h}\""),
                1,
            );
        body.push_str(element.trim_end());
        body.push('\n');
        x += w + GAP;
        height = height.max(h);
    }
    let width = (x - GAP).max(0.0);
    Ok(format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" width=\"{width}pt\" height=\"{height}pt\" viewBox=\"0 0 {width} {height}\">\n{body}</svg>\n"
    ))
}

/// A size as Graphviz prints it in `width="…pt"` (no trailing `.0`).
fn fmt_points(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::ViewOptions;
    use crate::Part;
    use graphbug_ir::parse_graph;

    fn small() -> graphbug_ir::Graph {
        parse_graph(
            "class M(torch.nn.Module):\n    def forward(self, x: \"f32[4]\"):\n        a: \"f32[4]\" = torch.ops.aten.relu.default(x)\n        b: \"f32[4]\" = torch.ops.aten.neg.default(a)\n        return (b, a)\n",
        )
        .unwrap()
    }

    #[test]
    fn dot_text_marks_outputs_and_culprits() {
        let graph = small();
        let mut part = Part::new("graph", &graph);
        part.mark("b", Mark::Culprit);
        let view = View::new(&part, &ViewOptions::default()).unwrap();
        let text = to_dot(&view);
        assert!(text.contains("id=\"graph:b\""), "{text}");
        assert!(text.contains("→ output 0"), "{text}");
        assert!(text.contains("→ output 1"), "{text}");
        assert!(text.contains("penwidth=3"), "{text}");
        assert!(
            text.contains("v0 -> v1;") && text.contains("v1 -> v2;"),
            "{text}"
        );
        // Same input, same text.
        assert_eq!(
            text,
            to_dot(&View::new(&part, &ViewOptions::default()).unwrap())
        );
    }

    #[test]
    fn quotes_and_newlines_are_escaped() {
        assert_eq!(quote("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn svgs_are_placed_side_by_side() {
        let a = "<?xml version=\"1.0\"?>\n<!DOCTYPE svg>\n<svg width=\"100pt\" height=\"50pt\" viewBox=\"0 0 100 50\"><g/></svg>\n";
        let b = "<svg width=\"40.5pt\" height=\"80pt\" viewBox=\"0 0 40.5 80\"><g/></svg>";
        let both = side_by_side(&[a.into(), b.into()]).unwrap();
        assert!(both.contains("width=\"164.5pt\" height=\"80pt\""), "{both}");
        assert!(
            both.contains("<svg x=\"0\" width=\"100\" height=\"50\""),
            "{both}"
        );
        assert!(
            both.contains("<svg x=\"124\" width=\"40.5\" height=\"80\""),
            "{both}"
        );
        assert!(!both.contains("DOCTYPE"));
        assert!(side_by_side(&["<svg><g/></svg>".into()]).is_err());
    }

    #[test]
    fn graphviz_lays_out_a_graph_when_installed() {
        assert!(
            find_in_path("dot").is_some(),
            "Graphviz is not installed: `cargo xtask setup` installs it"
        );
        let graph = small();
        let part = Part::new("graph", &graph);
        let view = View::new(&part, &ViewOptions::default()).unwrap();
        let svg = render_svg(&[view.clone(), view], Duration::from_secs(60)).unwrap();
        assert_eq!(svg.matches("id=\"graph:a\"").count(), 2, "{svg}");
        assert!(svg.contains("relu"));
    }
}

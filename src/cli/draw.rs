//! `graphbug draw`: a picture of an aten graph or an XLA program, with a partition, a
//! divergence between two traces or culprits marked.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use graphbug::draw::html;
use graphbug::draw::{dot, explorer, Mark, Part, Picture, ViewOptions};
use graphbug::files::write_file_atomically;
use graphbug::ir::Graph;
use graphbug::partition::default::saved_bytes;

use super::read_file;

/// What `graphbug draw` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// An SVG picture, laid out by Graphviz.
    Svg,
    /// A self-contained HTML page: the SVG, a legend, a box to find a node, the notes.
    Html,
    /// Graphviz's DOT text (no layout needed).
    Dot,
    /// Google Model Explorer's graph JSON (no layout needed; Model Explorer lays it out).
    ModelExplorer,
}

/// Arguments of `graphbug draw`.
#[derive(Args)]
pub struct DrawArgs {
    /// An aten graph (`.py`, PyTorch's print_readable() text) or an XLA program (HLO text
    /// or proto, StableHLO text or bytecode).
    file: PathBuf,
    /// Draw the joint graph partitioned: the forward and the backward side by side, saved
    /// values (with their bytes) and recomputed nodes marked: `default` or `min-cut`.
    #[arg(long, value_parser = ["default", "min-cut"])]
    partition: Option<String>,
    /// With `--partition min-cut`: the peak-memory budget the cut must fit (bytes such as
    /// `2MiB`, or a fraction with a dot, 0.0 for the least peak of any cut to 1.0 for the
    /// runtime-optimal cut's), as `graphbug partition --memory-budget` takes it.
    #[arg(long, requires = "partition")]
    memory_budget: Option<String>,
    /// A numeric trace of one run of the graph (`graphbug run --trace`).
    #[arg(long, requires = "against")]
    trace: Option<PathBuf>,
    /// The trace of another run: the first node where the two diverge and its inputs are
    /// marked.
    #[arg(long, requires = "trace")]
    against: Option<PathBuf>,
    /// Mark these nodes as culprits (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    culprit: Vec<String>,
    /// Draw only these nodes (comma-separated names) and their neighbours within --depth
    /// edges.
    #[arg(long, value_delimiter = ',')]
    around: Vec<String>,
    /// How far --around reaches.
    #[arg(long, default_value_t = 2)]
    depth: usize,
    /// Draw every node, even of a large graph (by default runs of repeated layers in
    /// graphs of more than 150 ops are drawn once, the other copies folded).
    #[arg(long, conflicts_with = "collapse")]
    no_collapse: bool,
    /// Fold repeated layers even in a small graph.
    #[arg(long)]
    collapse: bool,
    /// What to write (default: told by the output's extension, .svg, .html, .dot or
    /// .json; SVG without -o).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Where to write it (default: standard output).
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    /// Seconds Graphviz may take to lay the picture out.
    #[arg(long, default_value_t = 60)]
    layout_timeout: u64,
    #[cfg(feature = "torch")]
    #[command(flatten)]
    bound: super::args::Bound,
}

/// `graphbug draw`.
pub fn draw(args: &DrawArgs) -> Result<ExitCode> {
    let format = match (args.format, &args.output) {
        (Some(f), _) => f,
        (None, Some(path)) => format_of(path)?,
        (None, None) => Format::Svg,
    };
    let title = args.file.display().to_string();
    let (graph, dialect) = super::read_any_graph(&args.file, read_file(&args.file)?)?;
    if graph.dialect != graphbug::ir::Dialect::Aten
        && (args.partition.is_some() || args.trace.is_some())
    {
        bail!(
            "--partition and --trace draw aten graphs (joint graphs, `graphbug run --trace` traces); {} is {}",
            args.file.display(),
            dialect.noun()
        );
    }
    if format == Format::ModelExplorer
        && (!args.around.is_empty() || args.collapse || args.no_collapse)
    {
        bail!("--around, --collapse and --no-collapse cut down a picture Graphviz lays out; Model Explorer's JSON holds every node (Model Explorer folds and finds nodes itself)");
    }
    #[cfg(feature = "torch")]
    if args.partition.is_some() {
        if let Some(code) = super::autodiff::supervise_inference(&graph, &args.bound)? {
            return Ok(code);
        }
    }
    let partitioned = match &args.partition {
        Some(name) => Some(partition(&graph, name, args.memory_budget.as_deref())?),
        None => None,
    };
    let mut notes = Vec::new();
    let mut parts = match &partitioned {
        Some((forward, backward, p)) => {
            notes.push(format!(
                "{} partition: saves {} values ({}), recomputes {} ops in the backward; forward {} ops, backward {} ops",
                args.partition.as_deref().unwrap_or_default(),
                p.saved.len(),
                graphbug::run::memory::human(p.saved_bytes),
                p.recomputed.values().sum::<usize>(),
                p.fw_ops,
                p.bw_ops
            ));
            partition_parts(forward, backward, p)
        }
        None => {
            let mut part = Part::new("graph", &graph);
            part.caption = format!("{} nodes", graph.nodes.len());
            vec![part]
        }
    };
    for name in &args.culprit {
        // A saved value is a node of both halves of a partition: marked in each.
        let marked = parts
            .iter_mut()
            .map(|p| p.mark(name, Mark::Culprit))
            .fold(false, |any, m| any | m);
        if !marked {
            bail!("--culprit: no node `{name}` in {}", args.file.display());
        }
    }
    if let (Some(a), Some(b)) = (&args.trace, &args.against) {
        notes.extend(mark_divergence(&mut parts, a, b)?);
    }
    let picture = Picture {
        title,
        parts,
        notes,
    };
    let options = ViewOptions {
        collapse: match (args.collapse, args.no_collapse) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
        around: args.around.clone(),
        depth: args.depth,
    };
    let out = render(
        &picture,
        format,
        &options,
        Duration::from_secs(args.layout_timeout),
    )?;
    match &args.output {
        Some(path) => {
            write_file_atomically(path, out.as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{out}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// The format an output path's extension names.
fn format_of(path: &Path) -> Result<Format> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    Ok(match ext {
        "svg" => Format::Svg,
        "html" | "htm" => Format::Html,
        "dot" | "gv" => Format::Dot,
        "json" => Format::ModelExplorer,
        _ => bail!(
            "cannot tell what to write from the extension of {} (.svg, .html, .dot or .json): give --format",
            path.display()
        ),
    })
}

/// A picture in `format`: views cut down by `options`, laid out within `limit` where the
/// format needs a layout.
pub fn render(
    picture: &Picture<'_>,
    format: Format,
    options: &ViewOptions,
    limit: Duration,
) -> Result<String> {
    if format == Format::ModelExplorer {
        let collection = explorer::graph_collection(&picture.title, &picture.parts);
        return Ok(serde_json::to_string_pretty(&collection)? + "\n");
    }
    Ok(match format {
        Format::Dot => picture
            .views(options)?
            .iter()
            .map(dot::to_dot)
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Svg => dot::render_svg(&picture.views(options)?, limit)?,
        Format::Html => html::page(
            &picture.title,
            &[picture.section("picture", options, limit)?],
        ),
        Format::ModelExplorer => unreachable!("written above"),
    })
}

/// The parts of a partition: the forward with its saved outputs marked, the backward with
/// its saved inputs and recomputed nodes marked.
fn partition_parts<'g>(
    forward: &'g Graph,
    backward: &'g Graph,
    report: &graphbug::partition::PartitionReport,
) -> Vec<Part<'g>> {
    let mut fw = Part::new("forward", forward);
    let mut bw = Part::new("backward", backward);
    fw.caption = format!("{} ops", report.fw_ops);
    bw.caption = format!("{} ops", report.bw_ops);
    for name in &report.saved {
        // As the partition counts them (a saved size 0; symbolic sizes, unhinted here, 0).
        let bytes = forward
            .find(name)
            .and_then(|id| saved_bytes(forward, &[id], &Default::default()).ok())
            .unwrap_or(0);
        fw.mark(name, Mark::Saved(bytes));
        bw.mark(name, Mark::Saved(bytes));
    }
    for id in graphbug::partition::default::recomputed_nodes(forward, backward) {
        let name = backward.node(id).name.to_string();
        bw.mark(&name, Mark::Recomputed);
    }
    vec![fw, bw]
}

#[cfg(feature = "torch")]
/// The joint partitioned as `graphbug partition` would: (forward, backward, report).
fn partition(
    joint: &Graph,
    name: &str,
    memory_budget: Option<&str>,
) -> Result<(Graph, Graph, graphbug::partition::PartitionReport)> {
    let p = graphbug::repro::training::partition_joint(joint, name, memory_budget)?;
    Ok((p.forward, p.backward, p.report))
}

#[cfg(not(feature = "torch"))]
/// Partitioning asks libtorch for missing shapes and aliasing: not in this build.
fn partition(
    _joint: &Graph,
    _name: &str,
    _memory_budget: Option<&str>,
) -> Result<(Graph, Graph, graphbug::partition::PartitionReport)> {
    bail!("--partition runs graphbug's partitioners, which ask libtorch, and this graphbug was built without libtorch (the `torch` feature)")
}

#[cfg(feature = "torch")]
/// Marks the first divergence between traces `a` and `b` and its inputs; the notes say
/// what diverged.
fn mark_divergence(parts: &mut [Part<'_>], a: &Path, b: &Path) -> Result<Vec<String>> {
    use graphbug::aten::trace::{diff, Agreement, Tolerance, Trace};
    let ta = Trace::read(a).with_context(|| format!("{}", a.display()))?;
    let tb = Trace::read(b).with_context(|| format!("{}", b.display()))?;
    let d = diff(&ta, &tb, &Tolerance::default())?;
    let Some(first) = d.diverged.first() else {
        let mut notes = vec![format!(
            "the traces agree: {} values compared, {} identical, {} within tolerance",
            d.compared, d.identical, d.within
        )];
        notes.extend(d.ended_differently.clone());
        return Ok(notes);
    };
    // The part of the trace names the drawn part; a whole graph's trace is `graph`.
    let mut in_part = |node: &str, mark: Mark| -> bool {
        let named = parts
            .iter()
            .position(|p| p.name == first.a.part && p.graph.find(node).is_some());
        let index = named.or_else(|| parts.iter().position(|p| p.graph.find(node).is_some()));
        match index {
            Some(k) => parts[k].mark(node, mark),
            None => false,
        }
    };
    let mut notes = vec![format!(
        "first divergence: {} ({}, in {}): {}",
        first.a.label(),
        first.a.op,
        first.a.part,
        first.why
    )];
    if !in_part(&first.a.node, Mark::Diverged(first.why.clone())) {
        notes.push(format!(
            "{} is not a node of the graph drawn: are the traces of this graph?",
            first.a.node
        ));
    }
    for (input, agreement) in &d.first_inputs {
        let how = match agreement {
            Some(Agreement::Identical) => "identical in both runs".to_string(),
            Some(Agreement::Within) => "within tolerance".to_string(),
            Some(Agreement::Diverged(why)) => format!("diverged: {why}"),
            Some(Agreement::NotComparable(why)) => format!("not comparable: {why}"),
            None => "not compared".to_string(),
        };
        in_part(input, Mark::DivergenceInput(how));
    }
    Ok(notes)
}

#[cfg(not(feature = "torch"))]
/// Traces are read with libtorch's help: not in this build.
fn mark_divergence(_parts: &mut [Part<'_>], _a: &Path, _b: &Path) -> Result<Vec<String>> {
    bail!("--trace compares `graphbug run --trace` traces of aten graphs, and this graphbug was built without libtorch (the `torch` feature)")
}

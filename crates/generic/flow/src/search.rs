//! The search every dialect runs, and how it ends: the minifier over a graph with its
//! checkers, keeping the `--out` directory current and resuming from it, then the result
//! printed with its counts (and a JSON line of them). What is dialect-specific (the
//! checkers, how a candidate prints) comes in as arguments.

use std::path::{Path, PathBuf};
use std::time::Instant;

use graphbug_ir::Graph;
use graphbug_minifier::progress::MinifyDir;
use graphbug_minifier::{minify_parallel, Checker, Contains, Minified, MinifyOptions, NoSink};

use crate::FlowError;

/// How a search runs and ends, whatever the dialect.
#[derive(Clone, Debug, Default)]
pub struct SearchRun {
    /// Where progress is kept (`--out`).
    pub out: Option<PathBuf>,
    /// Continue from the state `out` holds (`--resume`).
    pub resume: bool,
    /// End with a JSON line of the counts (`--json`).
    pub json: bool,
}

/// Runs the search on `graph` with `checkers`, keeping `dir` (`--out`) current and
/// resuming from it with `--resume`; prints the result (`text` prints the minified
/// candidate) and the counts.
pub fn search(
    run: &SearchRun,
    graph: &Graph,
    checkers: &mut [Box<dyn Checker + Send>],
    mut options: MinifyOptions,
    mut dir: Option<MinifyDir<'_>>,
    started: Instant,
    text: &dyn Fn(&Minified) -> String,
) -> Result<Minified, FlowError> {
    if run.resume {
        let (Some(out), Some(d)) = (&run.out, dir.as_ref()) else {
            return Err(FlowError::Search(
                "resuming needs the directory progress was kept in (--out)".into(),
            ));
        };
        let saved = d.saved_state().map_err(|e| FlowError::bad(out, e))?;
        match saved {
            Some(state) => {
                eprintln!(
                    "resuming from {} nodes after {} queries",
                    state.stats.end_nodes, state.stats.queries
                );
                options.resume = Some(state.resume_point());
            }
            None => eprintln!(
                "nothing to resume in {} (no smaller failing graph was saved yet): starting over",
                out.display()
            ),
        }
    }
    let searching = Instant::now();
    let result = match dir.as_mut() {
        Some(d) => minify_parallel(graph, checkers, &options, d),
        None => minify_parallel(graph, checkers, &options, &mut NoSink),
    };
    let m = result.map_err(|e| FlowError::Search(e.to_string()))?;
    let search_seconds = searching.elapsed().as_secs_f64();
    if let Some(d) = dir.as_mut() {
        d.finish(&m).map_err(FlowError::Search)?;
    }
    report(
        run,
        &m,
        (started, search_seconds),
        dir.as_ref().map(|d| d.minified()).as_deref(),
        checkers.len(),
        &text(&m),
    );
    Ok(m)
}

/// Prints the result of a minification: the graph, the counts, and with `--json` a line
/// of them (`search_seconds`: the search alone, from the original's checks on, without
/// start-up).
pub fn report(
    run: &SearchRun,
    m: &Minified,
    (started, search_seconds): (Instant, f64),
    saved: Option<&Path>,
    jobs: usize,
    text: &str,
) {
    let seconds = started.elapsed().as_secs_f64();
    print!("{text}");
    println!(
        "minified {} nodes to {} in {} queries ({} cache hits), {seconds:.2} s; failure: {}: {}",
        m.stats.start_nodes,
        m.stats.end_nodes,
        m.stats.queries,
        m.stats.cache_hits,
        m.signature.kind,
        m.signature.message
    );
    if let Some(r) = m.stats.reliability {
        println!("the original fails in {r}; the result failed at least as often in as many runs");
    }
    if let Some(d) = saved {
        println!("smallest failing graph: {}", d.display());
    }
    if jobs > 1 {
        println!(
            "{jobs} workers; speculation: {} queries run that the search did not need",
            m.speculative
        );
    }
    if run.json {
        println!(
            "{}",
            serde_json::json!({
                "start_nodes": m.stats.start_nodes,
                "end_nodes": m.stats.end_nodes,
                "queries": m.stats.queries,
                "cache_hits": m.stats.cache_hits,
                "jobs": jobs,
                "speculative": m.speculative,
                "original_failures": m.stats.reliability.map(|r| r.failures),
                "original_runs": m.stats.reliability.map(|r| r.runs),
                "seconds": (seconds * 1000.0).round() / 1000.0,
                "search_seconds": (search_seconds * 1000.0).round() / 1000.0,
            })
        );
    }
}

/// The search for a check that reads only the graph (`contains:`): nothing runs (no
/// worker, no inputs, no reference run), `workers` copies of the check side by side.
pub fn search_structurally(
    run: &SearchRun,
    graph: &Graph,
    contains: Contains,
    workers: usize,
    options: &MinifyOptions,
    started: Instant,
    text: &dyn Fn(&Minified) -> String,
) -> Result<Minified, FlowError> {
    let mut checkers = contains.checkers(workers);
    let searching = Instant::now();
    let m = minify_parallel(graph, &mut checkers, options, &mut NoSink)
        .map_err(|e| FlowError::Search(e.to_string()))?;
    let search_seconds = searching.elapsed().as_secs_f64();
    report(
        run,
        &m,
        (started, search_seconds),
        None,
        checkers.len(),
        &text(&m),
    );
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search ends at the op the check looks for, whatever the workers; resuming with
    /// nowhere to resume from is an error, not a fresh start.
    #[test]
    fn searches_end_at_the_op_and_resume_needs_its_directory() {
        let graph = graphbug_ir::models::mlp_forward();
        let contains = Contains::parse("aten.relu.default").unwrap();
        let options = MinifyOptions::default();
        let text = |m: &Minified| graphbug_ir::print_graph(m.graph());
        let mut ends = Vec::new();
        for workers in [1, 3] {
            let m = search_structurally(
                &SearchRun::default(),
                &graph,
                contains.clone(),
                workers,
                &options,
                Instant::now(),
                &text,
            )
            .unwrap();
            let ops: Vec<String> = m
                .graph()
                .nodes
                .iter()
                .filter_map(|n| n.op().map(|o| o.to_string()))
                .collect();
            assert_eq!(ops, ["aten::relu.default"], "{workers} workers");
            ends.push((m.stats.queries, text(&m)));
        }
        assert_eq!(ends[0], ends[1], "the workers changed the search");
        let mut checkers: Vec<Box<dyn Checker + Send>> = vec![Box::new(contains)];
        let resume = SearchRun {
            resume: true,
            ..SearchRun::default()
        };
        let e = search(
            &resume,
            &graph,
            &mut checkers,
            options,
            None,
            Instant::now(),
            &text,
        )
        .unwrap_err();
        assert!(e.to_string().contains("(--out)"), "{e}");
    }
}

//! The minification driver: strategies over kept-node sets, a query cache, logging,
//! progress, and a sink that saves every improvement.

use std::collections::HashMap;
use std::io::IsTerminal;

use graphbug_ir::{Graph, IrError};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::candidate::{Candidate, Original};
use crate::checker::{BugIdentity, Checker, Signature, Verdict};

/// Knobs of a minification run.
#[derive(Clone, Debug, Default)]
pub struct MinifyOptions {
    /// A regex the failure message must match (else: similar to the original's).
    pub check_str: Option<String>,
    /// Resume from a saved point instead of the whole graph.
    pub resume: Option<ResumePoint>,
    /// Print log lines to standard error as they happen.
    pub verbose: bool,
    /// Show a progress display when standard error is a terminal.
    pub progress: bool,
    /// Stop querying after this many queries (the best so far is the result).
    pub max_queries: Option<usize>,
    /// Fingerprints of the reference values (equal means equal values), which enable the
    /// "consolidate inputs" strategy.
    pub value_keys: Option<HashMap<crate::candidate::Origin, u64>>,
}

/// Where a killed minification stood: enough to continue it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResumePoint {
    /// The original node ids the smallest failing candidate keeps.
    pub kept: Vec<u32>,
    /// The original output positions it retains (see [`Candidate::retained`]).
    #[serde(default)]
    pub retained: Vec<usize>,
    /// The original's failure, which candidates must match (when saved).
    #[serde(default)]
    pub signature: Option<Signature>,
}

/// Counts reported with every improvement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Nodes of the original graph (call_function nodes).
    pub start_nodes: usize,
    /// Nodes of the current best candidate.
    pub end_nodes: usize,
    /// Checker queries made.
    pub queries: usize,
    /// Candidates answered from the cache instead of the checker.
    pub cache_hits: usize,
}

/// Receives each smaller failing candidate as it is found (to save it atomically).
pub trait Sink {
    /// Called after every success, with the new best candidate and the original's failure
    /// it reproduces.
    fn improved(
        &mut self,
        best: &Candidate,
        signature: &Signature,
        stats: &Stats,
    ) -> Result<(), String>;
}

/// A sink that keeps nothing.
pub struct NoSink;

impl Sink for NoSink {
    fn improved(&mut self, _: &Candidate, _: &Signature, _: &Stats) -> Result<(), String> {
        Ok(())
    }
}

/// The result of a minification.
#[derive(Clone, Debug)]
pub struct Minified {
    /// The smallest failing candidate found.
    pub candidate: Candidate,
    /// The failure it reproduces (the original's).
    pub signature: Signature,
    /// Query counts and sizes.
    pub stats: Stats,
    /// What each strategy tried, functorch-style.
    pub log: Vec<String>,
}

impl Minified {
    /// The minimized graph.
    pub fn graph(&self) -> &Graph {
        &self.candidate.graph
    }
}

/// Why minification could not start or continue.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MinifyError {
    /// The graph given does not verify.
    #[error("invalid graph: {0}")]
    Graph(#[from] IrError),
    /// The starting graph does not fail.
    #[error("input graph does not fail ({checker}): {verdict}")]
    DoesNotFail {
        /// What was checked.
        checker: String,
        /// What the checker said.
        verdict: String,
    },
    /// The checker could not judge the starting graph (a check command that cannot run,
    /// a worker that cannot start, a reference run that fails).
    #[error("cannot judge the input graph ({checker}): {message}")]
    Unresolved {
        /// What was checked.
        checker: String,
        /// Why it could not.
        message: String,
    },
    /// The checker answered differently for the same graph.
    #[error("the checker is flaky: the same graph first gave `{first}`, then `{second}`")]
    Flaky {
        /// First answer.
        first: String,
        /// Second answer.
        second: String,
    },
    /// `--check-str` is not a valid regex.
    #[error("bad --check-str: {0}")]
    CheckStr(String),
    /// The resume state does not fit the graph.
    #[error("cannot resume: {0}")]
    Resume(String),
    /// The sink could not save an improvement.
    #[error("saving progress: {0}")]
    Sink(String),
}

fn describe(v: &Verdict) -> String {
    match v {
        Verdict::Fails(s) if !s.culprits.is_empty() => format!(
            "{}: {} (diverging from: {})",
            s.kind,
            s.message,
            s.culprits.join(", ")
        ),
        Verdict::Fails(s) => format!("{}: {}", s.kind, s.message),
        Verdict::Passes => "passes".into(),
        Verdict::Unresolved(m) => format!("unresolved: {m}"),
    }
}

struct Session<'a> {
    original: Original,
    checker: &'a mut dyn Checker,
    identity: BugIdentity,
    sink: &'a mut dyn Sink,
    /// Verdicts by (kept set, retained outputs, inputs consolidated).
    cache: HashMap<(Vec<u32>, Vec<usize>, bool), bool>,
    /// Whether inputs with equal values share a placeholder.
    consolidate: bool,
    /// The original output positions every candidate returns (empty unless the bug needs
    /// the original's outputs).
    retained: Vec<usize>,
    stats: Stats,
    log: Vec<String>,
    verbose: bool,
    bar: Option<ProgressBar>,
    max_queries: Option<usize>,
    best_size: usize,
    sink_error: Option<String>,
}

impl Session<'_> {
    fn note(&mut self, line: String) {
        if self.verbose {
            match &self.bar {
                Some(bar) => bar.println(&line),
                None => eprintln!("{line}"),
            }
        }
        self.log.push(line);
    }

    fn out_of_queries(&self) -> bool {
        self.max_queries.is_some_and(|m| self.stats.queries >= m)
    }

    /// The candidate keeping `kept` with the session's retained outputs.
    fn candidate(&self, kept: &[u32]) -> Candidate {
        self.original
            .candidate_retaining(kept, &self.retained, self.consolidate)
    }

    /// Whether the candidate keeping `kept` still shows the bug (cached by kept set).
    fn test(&mut self, kept: &[u32]) -> bool {
        let kept = self.original.normalize(kept);
        if kept.is_empty() && self.retained.is_empty() {
            return false;
        }
        let key = (kept, self.retained.clone(), self.consolidate);
        if let Some(&hit) = self.cache.get(&key) {
            self.stats.cache_hits += 1;
            return hit;
        }
        if self.out_of_queries() {
            return false;
        }
        let candidate = self.candidate(&key.0);
        self.stats.queries += 1;
        let verdict = self.checker.check(&candidate);
        let interesting = matches!(&verdict, Verdict::Fails(sig) if self.identity.matches(sig));
        self.cache.insert(key, interesting);
        if interesting && candidate.size() < self.best_size {
            self.best_size = candidate.size();
            self.stats.end_nodes = self.best_size;
            self.save(&candidate);
        }
        if let Some(bar) = &self.bar {
            bar.set_message(format!(
                "{} nodes, {} queries, {} cache hits",
                self.best_size, self.stats.queries, self.stats.cache_hits
            ));
        }
        interesting
    }

    /// The preprocessing after the original as given failed: the same nodes without
    /// returned inputs, unused inputs or outputs other nodes read (the canonical candidate,
    /// which every strategy starts from) is itself a candidate that must still fail. If it
    /// does not, the original's outputs are retained (and themselves minified later);
    /// if even that does not fail, only the original as given shows the bug: `false`.
    fn preprocess(&mut self, as_given: &Candidate) -> bool {
        let all = self.original.all();
        self.retained.clear();
        let canonical = self.candidate(&all);
        if graphbug_ir::print_graph(&canonical.graph) == graphbug_ir::print_graph(&as_given.graph) {
            self.cache.insert((all, Vec::new(), false), true);
            return true;
        }
        let ok = self.test(&all);
        self.note(format!(
            "Preprocessing: return only the values nothing else reads, drop returned and unused inputs\n{}",
            if ok { "SUCCESS" } else { "FAIL: the failure depends on the original's outputs; keeping them" }
        ));
        if ok {
            return true;
        }
        self.retained = self.original.all_outputs();
        let ok = self.test(&all);
        self.note(format!(
            "Preprocessing: drop unused inputs, keep every output\n{}",
            if ok {
                "SUCCESS"
            } else {
                "FAIL: only the original exactly as given fails"
            }
        ));
        ok
    }

    /// The result: `candidate`, the counts and the log (or the sink's error).
    fn finish(
        mut self,
        candidate: Candidate,
        signature: Signature,
    ) -> Result<Minified, MinifyError> {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if let Some(e) = self.sink_error.take() {
            return Err(MinifyError::Sink(e));
        }
        self.stats.end_nodes = candidate.size();
        self.note(format!(
            "Made {} queries ({} cache hits): {} nodes -> {} nodes",
            self.stats.queries,
            self.stats.cache_hits,
            self.stats.start_nodes,
            candidate.size()
        ));
        Ok(Minified {
            candidate,
            signature,
            stats: self.stats,
            log: self.log,
        })
    }

    /// Hands a new best candidate to the sink (an error is kept for the end).
    fn save(&mut self, candidate: &Candidate) {
        if let Err(e) = self
            .sink
            .improved(candidate, self.identity.original(), &self.stats)
        {
            self.sink_error.get_or_insert(e);
        }
    }

    fn sizes(&self, kept: &[u32]) -> (usize, usize) {
        let c = self.candidate(kept);
        (c.size(), c.inputs.len())
    }

    /// Returns fewer of the original's outputs, if the bug survives it (delta debugging
    /// over the retained positions, as over nodes).
    fn remove_retained_outputs(&mut self, s: &[u32]) {
        let mut g = self.retained.len() / 2;
        while g >= 1 && self.retained.len() > 1 && !self.out_of_queries() {
            let mut progress = false;
            for start in (0..self.retained.len()).step_by(g) {
                let before = std::mem::take(&mut self.retained);
                self.retained = before
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| i < start || i >= start + g)
                    .map(|(_, &r)| r)
                    .collect();
                let ok = self.test(s);
                let mut line = format!(
                    "Strategy: Remove returned outputs (G: {g}) ({} outputs of the original returned)",
                    before.len()
                );
                if ok {
                    line.push_str(&format!(
                        "\nSUCCESS: Went from {} to {} returned outputs",
                        before.len(),
                        self.retained.len()
                    ));
                    self.note(line);
                    progress = true;
                    break;
                }
                line.push_str("\nFAIL: Could not remove anything");
                self.note(line);
                self.retained = before;
            }
            if !progress {
                g /= 2;
            }
        }
    }

    /// Lets inputs that hold equal values share a placeholder, if the bug survives it.
    fn consolidate_inputs(&mut self, s: Vec<u32>) -> Vec<u32> {
        if self.consolidate || !self.original.has_value_keys() {
            return s;
        }
        let before = self
            .original
            .candidate_retaining(&s, &self.retained, false)
            .inputs
            .len();
        let after = self
            .original
            .candidate_retaining(&s, &self.retained, true)
            .inputs
            .len();
        if after >= before {
            return s;
        }
        self.consolidate = true;
        let ok = self.test(&s);
        let (nodes, _) = self.sizes(&s);
        let mut line = format!("Strategy: Consolidate inputs ({nodes} nodes, {before} inputs)");
        if ok {
            line.push_str(&format!("\nSUCCESS: Went from {before} to {after} inputs"));
        } else {
            self.consolidate = false;
            line.push_str("\nFAIL: Could not remove anything");
        }
        self.note(line);
        s
    }

    /// Logs a strategy attempt and its outcome.
    fn attempt(&mut self, name: &str, from: &[u32], to: &[u32], ok: bool) {
        let (nodes, inputs) = self.sizes(from);
        let mut line = format!("Strategy: {name} ({nodes} nodes, {inputs} inputs)");
        if ok {
            let (n2, _) = self.sizes(to);
            line.push_str(&format!("\nSUCCESS: Went from {nodes} to {n2} nodes"));
        } else {
            line.push_str("\nFAIL: Could not remove anything");
        }
        self.note(line);
    }

    /// Drops every node that does not reach the original graph's outputs.
    fn eliminate_dead_code(&mut self, s: Vec<u32>) -> Vec<u32> {
        let live = self.original.live(&s);
        if live.len() == s.len() || live.is_empty() {
            return s;
        }
        let ok = self.test(&live);
        self.attempt("Eliminate dead code", &s, &live, ok);
        if ok {
            live
        } else {
            s
        }
    }

    /// Binary search for the shortest failing prefix.
    fn truncate_suffix(&mut self, s: Vec<u32>) -> Vec<u32> {
        let (mut lo, mut hi) = (0usize, s.len());
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let ok = self.test(&s[..mid]);
            self.attempt(
                &format!("Truncate suffix (G: {})", hi - lo),
                &s[..hi],
                &s[..mid],
                ok,
            );
            if ok {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        s[..hi].to_vec()
    }

    /// Removes outputs and the code only they need, in halving groups.
    fn remove_outputs(&mut self, mut s: Vec<u32>) -> Vec<u32> {
        let mut g = self.original.sinks(&s).len() / 2;
        while g >= 1 {
            let sinks = self.original.sinks(&s);
            if sinks.len() <= 1 {
                break;
            }
            let mut progress = false;
            for chunk in sinks.chunks(g) {
                let mut t = s.clone();
                for &sink in chunk {
                    t = self.original.without_output(&t, sink);
                }
                if t.is_empty() || t.len() == s.len() {
                    continue;
                }
                let ok = self.test(&t);
                self.attempt(&format!("Remove outputs (G: {g})"), &s, &t, ok);
                if ok {
                    s = t;
                    progress = true;
                    break;
                }
            }
            if !progress {
                g /= 2;
            }
        }
        s
    }

    /// Delta debugging (ddmin) with removal meaning "replace by an input": subsets first,
    /// then complements, doubling the granularity when neither fails.
    fn delta_debugging(&mut self, mut s: Vec<u32>) -> Vec<u32> {
        let mut n = 2usize;
        let least = if self.retained.is_empty() { 2 } else { 1 };
        while s.len() >= least && !self.out_of_queries() {
            let chunks = split(&s, n);
            let mut reduced = None;
            for c in &chunks {
                // Only a strict subset is progress (one chunk is all of `s`).
                if c.len() < s.len() && self.test(c) {
                    reduced = Some((c.clone(), 2));
                    break;
                }
            }
            if reduced.is_none() {
                for i in 0..chunks.len() {
                    let rest: Vec<u32> = chunks
                        .iter()
                        .enumerate()
                        .filter(|&(j, _)| j != i)
                        .flat_map(|(_, c)| c.iter().copied())
                        .collect();
                    if self.test(&rest) {
                        reduced = Some((rest, (n - 1).max(2)));
                        break;
                    }
                }
            }
            let g = s.len().div_ceil(n);
            match reduced {
                Some((t, next_n)) => {
                    self.attempt(&format!("Delta Debugging (G: {g})"), &s, &t, true);
                    s = self.original.normalize(&t);
                    n = next_n.min(s.len().max(2));
                }
                None => {
                    self.attempt(&format!("Delta Debugging (G: {g})"), &s, &s, false);
                    if n >= s.len() {
                        break;
                    }
                    n = (2 * n).min(s.len());
                }
            }
        }
        s
    }

    /// Until no single node can be dropped (replaced by an input) without losing the bug.
    fn one_minimal(&mut self, mut s: Vec<u32>) -> Vec<u32> {
        loop {
            let mut changed = false;
            let mut i = 0;
            while i < s.len() && !self.out_of_queries() {
                let t: Vec<u32> = s
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .map(|(_, &k)| k)
                    .collect();
                if self.test(&t) {
                    self.attempt("1-minimality", &s, &t, true);
                    s = self.original.normalize(&t);
                    changed = true;
                } else {
                    i += 1;
                }
            }
            if !changed {
                break;
            }
        }
        s
    }
}

/// `s` cut into `n` contiguous chunks of nearly equal size.
fn split(s: &[u32], n: usize) -> Vec<Vec<u32>> {
    let n = n.clamp(1, s.len().max(1));
    let size = s.len().div_ceil(n);
    s.chunks(size.max(1)).map(<[u32]>::to_vec).collect()
}

/// Shrinks `graph` to a 1-minimal candidate that still fails `checker` the way the whole
/// graph does.
///
/// The original is checked first (and once more, to catch a flaky checker). Strategies
/// then loop until nothing shrinks: eliminate dead code, truncate suffix, remove outputs,
/// consolidate inputs (with value fingerprints), delta debugging; a final pass makes the
/// result 1-minimal. Unused inputs never arise: a candidate's inputs are exactly what its
/// nodes read. No candidate is queried twice.
pub fn minify(
    graph: &Graph,
    checker: &mut dyn Checker,
    options: &MinifyOptions,
    sink: &mut dyn Sink,
) -> Result<Minified, MinifyError> {
    graph.verify()?;
    let original = Original::new(graph.clone())
        .with_value_keys(options.value_keys.clone().unwrap_or_default());
    // The first query: where a killed run stood, or the original exactly as given.
    let first = match &options.resume {
        Some(point) => {
            let n = graph.nodes.len() as u32;
            if let Some(bad) = point.kept.iter().find(|&&k| k >= n) {
                return Err(MinifyError::Resume(format!(
                    "node #{bad} does not exist in a graph of {n} nodes"
                )));
            }
            original.candidate_retaining(&point.kept, &point.retained, false)
        }
        None => original.as_given(),
    };
    let checker_name = checker.describe();
    let v1 = checker.check(&first);
    if let Verdict::Unresolved(message) = v1 {
        return Err(MinifyError::Unresolved {
            checker: checker_name,
            message,
        });
    }
    let Verdict::Fails(found) = v1.clone() else {
        return Err(MinifyError::DoesNotFail {
            checker: checker_name,
            verdict: describe(&v1),
        });
    };
    // A resumed run keeps to the failure the original showed.
    let signature = options
        .resume
        .as_ref()
        .and_then(|p| p.signature.clone())
        .unwrap_or_else(|| found.clone());
    let identity = BugIdentity::new(signature.clone(), options.check_str.as_deref())
        .map_err(|e| MinifyError::CheckStr(e.to_string()))?;
    // The same failure again (a message may differ in numbers, e.g. a time limit).
    let v2 = checker.check(&first);
    let same = match &v2 {
        Verdict::Fails(s2) => {
            s2.kind == found.kind
                && s2.op == found.op
                && crate::checker::similar(&found.message, &s2.message)
        }
        _ => false,
    };
    if !same {
        return Err(MinifyError::Flaky {
            first: describe(&v1),
            second: describe(&v2),
        });
    }
    if !identity.matches(&found) {
        let why = if options.resume.is_some() {
            "not the failure the original showed"
        } else {
            "does not match --check-str"
        };
        return Err(MinifyError::DoesNotFail {
            checker: checker_name,
            verdict: format!("{} ({why})", describe(&v1)),
        });
    }
    let bar = (options.progress && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} minifying: {msg} [{elapsed}]")
                .expect("the progress template is valid"),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        bar
    });
    let start_size = first.size();
    let found_text = describe(&v1);
    let mut session = Session {
        cache: HashMap::new(),
        consolidate: false,
        retained: first.retained.clone(),
        original,
        checker,
        identity,
        sink,
        stats: Stats {
            start_nodes: graph.num_call_function_nodes(),
            end_nodes: start_size,
            queries: 2,
            cache_hits: 0,
        },
        log: Vec::new(),
        verbose: options.verbose,
        bar,
        max_queries: options.max_queries,
        best_size: start_size,
        sink_error: None,
    };
    session.note(format!(
        "Started with {start_size} nodes; checking {checker_name}; it fails: {found_text}"
    ));
    let mut s = first.kept.clone();
    if options.resume.is_some() {
        session
            .cache
            .insert((s.clone(), session.retained.clone(), false), true);
    } else if !session.preprocess(&first) {
        // Only the original exactly as given fails: nothing can be taken away.
        return session.finish(first, signature);
    }
    loop {
        let before = (s.clone(), session.retained.clone());
        s = session.eliminate_dead_code(s);
        s = session.truncate_suffix(s);
        s = session.remove_outputs(s);
        s = session.consolidate_inputs(s);
        s = session.delta_debugging(s);
        if !session.retained.is_empty() {
            session.remove_retained_outputs(&s);
        }
        if (s.clone(), session.retained.clone()) == before || session.out_of_queries() {
            break;
        }
    }
    s = session.one_minimal(s);
    let candidate = session.candidate(&s);
    session.finish(candidate, signature)
}

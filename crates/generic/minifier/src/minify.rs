//! The minification driver: strategies over kept-node sets, a query cache, logging,
//! progress, and a sink that saves every improvement.

use std::cell::Cell;
use std::collections::{BinaryHeap, HashMap};

use rustc_hash::{FxHashMap, FxHashSet};

use graphbug_ir::{Graph, IrError, Meta};
use graphbug_run::progress::Progress;
use serde::{Deserialize, Serialize};

use crate::candidate::{Candidate, Form, Original};
use crate::checker::{
    BugIdentity, Checker, Reliability, Reliably, Signature, Startup, Verdict, CLEAR_MARGIN,
};
use crate::pool::{Key, Peek, Pool};

/// How long the original's check waits for the second checker to start before the first
/// checks it twice.
const SECOND_START_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Knobs of a minification run.
#[derive(Clone, Debug, Default)]
pub struct MinifyOptions {
    /// A regex the failure message must match (else: similar to the original's).
    pub check_str: Option<String>,
    /// Resume from a saved point instead of the whole graph.
    pub resume: Option<ResumePoint>,
    /// Print log lines to standard error as they happen.
    pub verbose: bool,
    /// Show a spinner (the smallest failing candidate's nodes, the queries, the time) once
    /// the search has run 2 s, when standard error is a terminal (see
    /// [`graphbug_run::progress`]); log lines print through it.
    pub progress: bool,
    /// Stop querying after this many queries (the best so far is the result).
    pub max_queries: Option<usize>,
    /// Fingerprints of the reference values (equal means equal values), which enable the
    /// "consolidate inputs" strategy.
    pub value_keys: Option<HashMap<crate::candidate::Origin, u64>>,
    /// Try the 1-minimal candidate with its inputs as constants of their recorded values
    /// (for checkers that print constants into programs: XLA's).
    pub constants: bool,
    /// Run the original this many times, and hold every candidate to the original's
    /// failure rate over as many runs (see [`Reliably`]). Without it, a flaky original
    /// (its first two runs disagree) is run [`AUTO_REPEAT`] times and handled the same way.
    pub repeat: Option<usize>,
}

/// The most elements the inputs of a candidate may hold to become constants printed into
/// its program (a million floats print as about 12 MB of text).
pub const MAX_CONSTANT_ELEMENTS: i64 = 1 << 20;

/// How many times a flaky original is run when `repeat` is not given.
pub const AUTO_REPEAT: usize = 10;

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
    /// How reliably the original failed, when it was flaky or `repeat` was given; every
    /// candidate was then held to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reliability: Option<Reliability>,
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
    /// Queries parallel workers ran that the search never needed (speculation waste; 0
    /// for a serial run). Not part of [`Stats`], which are the same for any number of
    /// workers.
    pub speculative: usize,
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
    let text = describe_failure(v);
    match v {
        Verdict::Fails(Signature {
            margin: Some(m), ..
        }) => format!("{text} ({} its tolerance)", margin_text(*m)),
        _ => text,
    }
}

/// A margin as `3.2x` (`far beyond` for an infinite one).
pub fn margin_text(m: f64) -> String {
    if m.is_finite() {
        format!("{m:.2}x")
    } else {
        "infinitely far beyond".to_string()
    }
}

fn describe_failure(v: &Verdict) -> String {
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

/// A kind of try, for speculation's odds: (strategy, granularity, position in its round).
type Kind = (u8, usize, usize);

/// A search state's next try, and the states after it reproduces (`yes`) or not (`no`).
struct Step<S> {
    kind: Kind,
    kept: Vec<u32>,
    yes: S,
    no: S,
}

impl<S> Step<S> {
    /// The same try with its next states mapped by `f`.
    fn map<T>(self, f: impl Fn(S) -> T) -> Step<T> {
        Step {
            kind: self.kind,
            kept: self.kept,
            yes: f(self.yes),
            no: f(self.no),
        }
    }
}

/// A search state, how likely the search is to reach it, and when it was found (earlier
/// first among equals).
struct Likely<S>(f64, u64, S);

impl<S> PartialEq for Likely<S> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl<S> Eq for Likely<S> {}
impl<S> PartialOrd for Likely<S> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<S> Ord for Likely<S> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .total_cmp(&other.0)
            .then_with(|| other.1.cmp(&self.1))
    }
}

/// Who answers queries: one checker in turn, or a pool of workers.
enum Exec<'a> {
    Serial(&'a mut dyn Checker),
    Pool(&'a Pool),
}

/// The most nodes a failure may name for [`Session::named_nodes_alone`] to try them alone
/// (a message that names more describes the program, not a bug's place).
const NAMED_AT_MOST: usize = 4;

struct Session<'a> {
    original: &'a Original<'a>,
    exec: Exec<'a>,
    /// How many upcoming candidates to hand the pool's workers.
    lookahead: usize,
    /// Per kind of try: how many reproduced, of how many were asked.
    outcomes: FxHashMap<Kind, (u32, u32)>,
    /// The kind of the try the search asks next (set by [`Session::speculate`]).
    next_kind: Cell<Option<Kind>>,
    /// Node and input counts of the candidates queried (see [`Session::sizes`]).
    sizes_of: FxHashMap<Key, (usize, usize)>,
    identity: BugIdentity,
    sink: &'a mut dyn Sink,
    /// Verdicts by (kept set, retained outputs, form of the inputs).
    cache: FxHashMap<Key, bool>,
    /// Whether inputs with equal values share a placeholder.
    form: Form,
    /// The original output positions every candidate returns (empty unless the bug needs
    /// the original's outputs).
    retained: Vec<usize>,
    stats: Stats,
    log: Vec<String>,
    verbose: bool,
    /// The spinner on standard error (hidden unless asked for and on a terminal).
    progress: Progress,
    max_queries: Option<usize>,
    best_size: usize,
    /// How good the best candidate so far is ([`rank`]).
    best_rank: (usize, usize, usize),
    /// What the sink last got: (kept, retained, cut).
    saved: Option<(Vec<u32>, Vec<usize>, crate::candidate::Cut)>,
    sink_error: Option<String>,
    /// Whether the search tries inputs as constants after 1-minimality.
    try_constants: bool,
    /// The kept set whose inputs-as-constants form an idle worker may answer ahead: the
    /// smallest failing one so far, which is often the result.
    constants_next: Option<Vec<u32>>,
    /// The original's second run, judged at the first candidate that does not show the bug.
    recheck: Option<Recheck>,
    /// Where a resumed search started: kept nodes and retained outputs (the candidate a
    /// recheck runs again; `None`: the original as given).
    first: Option<(Vec<u32>, Vec<usize>)>,
    /// The original's two runs, when the recheck found them different: the search stops.
    flaky: Option<(Verdict, Verdict)>,
}

/// How good a failing candidate is, the smaller the better: its nodes, then its
/// parameters, then its outputs (a bug in the outputs shrinks only the last two).
fn rank(candidate: &Candidate) -> (usize, usize, usize) {
    (
        candidate.size(),
        candidate.parameters(),
        candidate.graph.outputs().len(),
    )
}

impl Session<'_> {
    fn note(&mut self, line: String) {
        if self.verbose {
            self.progress.println(&line);
        }
        self.log.push(line);
    }

    /// The spinner's message: the smallest failing candidate's nodes of the original's,
    /// and the queries so far.
    fn show_progress(&self) {
        self.progress.set_message(format!(
            "{} of {} nodes kept, {} queries ({} cache hits)",
            self.best_size, self.stats.start_nodes, self.stats.queries, self.stats.cache_hits
        ));
    }

    fn out_of_queries(&self) -> bool {
        self.flaky.is_some() || self.max_queries.is_some_and(|m| self.stats.queries >= m)
    }

    /// Whether the original still fails as it did, run again now that a candidate did not
    /// show the bug (once a search; see [`Recheck`]). When it does not, the bug is flaky:
    /// the search stops, and starts again held to the original's failure rate.
    fn original_fails_again(&mut self) -> bool {
        let Some(Recheck { first, second }) = self.recheck.take() else {
            return true;
        };
        self.stats.queries += 1;
        let second = match (second, &mut self.exec) {
            (Some(v), _) => v,
            (None, Exec::Serial(checker)) => checker.check(&match &self.first {
                None => self.original.as_given(),
                Some((kept, retained)) => {
                    self.original
                        .candidate_retaining(kept, retained, Form::default())
                }
            }),
            // Workers side by side take it at the start (`eager`): not taken, it is an
            // unknown, and the failure rate is measured as for a flaky bug.
            (None, Exec::Pool(_)) => {
                Verdict::Unresolved("the original's second run was not taken".into())
            }
        };
        if same_failure(&first, &second) {
            return true;
        }
        self.note("The original, run again, did not fail as it did: the bug is flaky".into());
        self.flaky = Some((first, second));
        false
    }

    /// [`Session::finish`], unless the search found the bug flaky.
    fn end(mut self, candidate: Candidate, signature: Signature) -> Result<Searched, MinifyError> {
        match self.flaky.take() {
            Some((first, second)) => Ok(Searched::Flaky {
                first,
                second,
                spent: self.stats.queries,
            }),
            None => self.finish(candidate, signature).map(Searched::Done),
        }
    }

    /// The candidate keeping `kept` with the session's retained outputs.
    fn candidate(&self, kept: &[u32]) -> Candidate {
        self.original
            .candidate_retaining(kept, &self.retained, self.form)
    }

    /// The cache key of the candidate keeping `kept`, unless no candidate keeps nothing.
    fn key(&self, kept: &[u32]) -> Option<Key> {
        let kept = self.original.normalize(kept);
        if kept.is_empty() && self.retained.is_empty() {
            return None;
        }
        Some((kept, self.retained.clone(), self.form))
    }

    /// Hands the pool's workers `upcoming`, the candidates the search may try next, the
    /// most urgent first (at most one per worker; those answered already are left out). A
    /// serial run does nothing here.
    fn prefetch(&self, upcoming: impl IntoIterator<Item = Vec<u32>>) {
        if matches!(self.exec, Exec::Pool(_)) {
            let keys = upcoming.into_iter().filter_map(|kept| self.key(&kept));
            self.prefetch_keys(keys.collect());
        }
    }

    /// [`Session::prefetch`] of candidates named by their keys.
    fn prefetch_keys(&self, upcoming: Vec<Key>) {
        let Exec::Pool(pool) = &self.exec else {
            return;
        };
        let budget = self
            .max_queries
            .map_or(usize::MAX, |m| m.saturating_sub(self.stats.queries));
        let mut seen = FxHashSet::default();
        let mut keys: Vec<Key> = upcoming
            .into_iter()
            .filter(|k| !self.cache.contains_key(k) && seen.insert(k.clone()))
            .take(self.lookahead.min(budget))
            .collect();
        // A worker left idle takes the inputs-as-constants try of the smallest failing
        // candidate, which the search asks at the end if it stays the smallest.
        if let Some(key) = self.constants_key().filter(|k| !seen.contains(k)) {
            if keys.len() < self.lookahead.min(budget) {
                keys.push(key);
            }
        }
        pool.prefetch(keys);
    }

    /// The key of the inputs-as-constants try of the smallest failing candidate so far (see
    /// `constants_next`), unless answered or too big to try.
    fn constants_key(&self) -> Option<Key> {
        let key = self.constants_key_of(self.constants_next.as_ref()?)?;
        (!self.cache.contains_key(&key)).then_some(key)
    }

    /// The key of the candidate keeping `kept` with its inputs as constants, unless it has
    /// none or too many elements to try.
    fn constants_key_of(&self, kept: &[u32]) -> Option<Key> {
        let candidate = self.candidate(kept);
        if candidate.inputs.is_empty() || constant_elements(&candidate) > MAX_CONSTANT_ELEMENTS {
            return None;
        }
        let (k, r, form) = self.key(kept)?;
        Some((
            k,
            r,
            Form {
                constants: true,
                ..form
            },
        ))
    }

    /// Hands the pool the candidates the search may try next, the likeliest to be needed
    /// first: best first over both outcomes of each try, from the state `root` (whose next
    /// try comes first), each outcome as likely as tries of its kind turned out so far in
    /// this run. `step` gives a state's next try and the states after a yes and a no.
    /// Tries already answered are followed, not branched on. A serial run does nothing
    /// here (not even make `root`, which may copy the kept set).
    fn speculate<S>(&self, root: impl FnOnce() -> S, step: impl Fn(&S) -> Option<Step<S>>) {
        let Exec::Pool(pool) = &self.exec else {
            return;
        };
        self.next_kind.set(None);
        let mut open = BinaryHeap::from([Likely(1.0, 0, root())]);
        let mut upcoming = Vec::new();
        // Tries being answered or handed out: as many as there are workers.
        let mut pending = 0;
        let (mut visits, mut order) = (0, 0u64);
        let mut first = true;
        while let Some(Likely(p, _, state)) = open.pop() {
            visits += 1;
            if pending >= self.lookahead || visits > 16 * self.lookahead {
                break;
            }
            let Some(next) = step(&state) else {
                continue;
            };
            order += 1;
            // The truncation point alone is asked with its inputs constants first.
            let key = if next.kind == POINT_ALONE && self.try_constants && !self.form.constants {
                self.constants_key_of(&next.kept)
                    .or_else(|| self.key(&next.kept))
            } else {
                self.key(&next.kept)
            };
            let Some(key) = key else {
                open.push(Likely(p, order, next.no));
                continue;
            };
            if let Some(&yes) = self.cache.get(&key) {
                open.push(Likely(p, order, if yes { next.yes } else { next.no }));
                continue;
            }
            // The try the search asks next: its outcome teaches the odds of its kind.
            if std::mem::take(&mut first) {
                self.next_kind.set(Some(next.kind));
            }
            match pool.peek(&key) {
                // Answered but not yet taken: follow the answer.
                Peek::Answered(verdict) => {
                    let yes = matches!(&verdict, Verdict::Fails(sig) if self.identity.matches(sig));
                    open.push(Likely(p, order, if yes { next.yes } else { next.no }));
                }
                // Running, or to be started: both outcomes may follow.
                peek => {
                    if matches!(peek, Peek::Unknown) {
                        upcoming.push(key);
                    }
                    pending += 1;
                    let q = self.yes_rate(next.kind);
                    open.push(Likely(p * q, order, next.yes));
                    open.push(Likely(p * (1.0 - q), order + 1, next.no));
                    order += 1;
                }
            }
        }
        self.prefetch_keys(upcoming);
    }

    /// How often tries of `kind` reproduced in this run (1/2 before any did or did not;
    /// a Jeffreys prior, so that a few outcomes already tell).
    fn yes_rate(&self, kind: Kind) -> f64 {
        let (yes, all) = self.outcomes.get(&kind).copied().unwrap_or_default();
        (yes as f64 + 0.5) / (all as f64 + 1.0)
    }

    /// ddmin as a state machine for [`Self::speculate`]: (kept, granularity, next try).
    fn ddmin_step(
        &self,
        (s, n, from): &(Vec<u32>, usize, usize),
        least: usize,
    ) -> Option<Step<(Vec<u32>, usize, usize)>> {
        let (mut n, mut from) = (*n, *from);
        while s.len() >= least {
            match ddmin_try(s, n, from) {
                Some((at, t, next_n)) => {
                    let kept = self.original.normalize(&t);
                    let n_yes = next_n.min(kept.len().max(2));
                    return Some(Step {
                        kind: (2, n.min(16), at.min(32)),
                        kept: t,
                        yes: (kept, n_yes, 0),
                        no: (s.clone(), n, at + 1),
                    });
                }
                None if n >= s.len() => return None,
                None => (n, from) = ((2 * n).min(s.len()), 0),
            }
        }
        None
    }

    /// Suffix truncation of `s` as a state machine for [`Self::speculate`], running on
    /// into delta debugging of the prefix found (as it follows when removing outputs and
    /// consolidating inputs find nothing to try).
    fn truncation_step(&self, s: &[u32], state: &Truncation) -> Option<Step<Truncation>> {
        let least = if self.retained.is_empty() { 2 } else { 1 };
        match state {
            Truncation::Halving(lo, hi) => match truncate_step(s, (*lo, *hi)) {
                Some(step) => Some(step.map(|(lo, hi)| Truncation::Halving(lo, hi))),
                None => {
                    let alone = s[..*hi]
                        .last()
                        .map(|&last| self.original.normalize(&[last]))
                        .filter(|a| a.len() < *hi);
                    match alone {
                        Some(kept) => Some(Step {
                            kind: POINT_ALONE,
                            kept,
                            yes: Truncation::Over,
                            no: Truncation::Prefix(*hi),
                        }),
                        None => self.truncation_step(s, &Truncation::Prefix(*hi)),
                    }
                }
            },
            Truncation::Prefix(hi) => {
                let prefix = (self.original.normalize(&s[..*hi]), 2, 0);
                self.ddmin_step(&prefix, least)
                    .map(|step| step.map(Truncation::Ddmin))
            }
            Truncation::Over => None,
            Truncation::Ddmin(st) => self
                .ddmin_step(st, least)
                .map(|step| step.map(Truncation::Ddmin)),
        }
    }

    /// 1-minimality as a state machine for [`Self::speculate`]: (kept, next node, whether
    /// this pass removed one).
    fn one_minimal_step(
        &self,
        (s, i, changed): &(Vec<u32>, usize, bool),
    ) -> Option<Step<(Vec<u32>, usize, bool)>> {
        // A pass that removed a node is followed by another, from the first node.
        let (i, changed) = match (*i < s.len(), *changed) {
            (true, changed) => (*i, changed),
            (false, true) if !s.is_empty() => (0, false),
            _ => return None,
        };
        let t = without(s, i);
        let yes = (self.original.normalize(&t), i, true);
        Some(Step {
            kind: (3, 0, 0),
            kept: t,
            yes,
            no: (s.clone(), i + 1, changed),
        })
    }

    /// Whether the candidate keeping `kept` still shows the bug (cached by kept set).
    fn test(&mut self, kept: &[u32]) -> bool {
        let Some(key) = self.key(kept) else {
            return false;
        };
        if let Some(&hit) = self.cache.get(&key) {
            self.stats.cache_hits += 1;
            return hit;
        }
        if self.out_of_queries() {
            return false;
        }
        self.stats.queries += 1;
        let (candidate, verdict) = match &mut self.exec {
            Exec::Serial(checker) => {
                let candidate = self.original.candidate_retaining(&key.0, &key.1, key.2);
                let verdict = checker.check(&candidate);
                (candidate, verdict)
            }
            Exec::Pool(pool) => pool.resolve(&key),
        };
        self.sizes_of
            .insert(key.clone(), (candidate.size(), candidate.inputs.len()));
        let interesting = matches!(&verdict, Verdict::Fails(sig) if self.identity.matches(sig));
        if !interesting && !self.original_fails_again() {
            return false;
        }
        if let Verdict::Fails(sig) = &verdict {
            if let (Some(need), Some(m)) = (self.identity.short_of_margin(sig), sig.margin) {
                self.note(format!(
                    "A candidate of {} nodes fails only {} its tolerance, short of {}: on the edge, not counted",
                    candidate.size(),
                    margin_text(m),
                    margin_text(need)
                ));
            }
        }
        if let Some(kind) = self.next_kind.take() {
            let (yes, all) = self.outcomes.entry(kind).or_default();
            *yes += u32::from(interesting);
            *all += 1;
        }
        self.cache.insert(key, interesting);
        if interesting && rank(&candidate) < self.best_rank {
            self.best_rank = rank(&candidate);
            self.best_size = candidate.size();
            self.stats.end_nodes = self.best_size;
            self.save(&candidate);
            // An idle worker answers its inputs-as-constants try ahead: the smallest
            // failing candidate is often the result.
            if self.try_constants && !self.form.constants {
                self.constants_next = Some(candidate.kept.clone());
                if let (Exec::Pool(pool), Some(key)) = (&self.exec, self.constants_key()) {
                    pool.prefetch_also(key);
                }
            }
        }
        self.show_progress();
        interesting
    }

    /// The preprocessing after the original as given failed: the same nodes without
    /// returned inputs, unused inputs or outputs other nodes read (the canonical candidate,
    /// which every strategy starts from) is itself a candidate that must still fail. If it
    /// does not, the original's outputs are retained (and themselves minified later); if
    /// that does not fail either, what reaches the original's outputs alone, returned as the
    /// original returns them (values nothing reads, which the other two return, dropped: a
    /// compiler may fail otherwise when given more results, as IREE crashes returning a
    /// loop's unread results). The nodes the search starts from, or `None` when only the
    /// original as given shows the bug.
    fn preprocess(&mut self) -> Option<Vec<u32>> {
        let all = self.original.all();
        self.retained.clear();
        if self.original.canonical_is_given() {
            self.cache
                .insert((all.clone(), Vec::new(), Form::default()), true);
            return Some(all);
        }
        if matches!(self.exec, Exec::Pool(_)) {
            let live = self.original.all_live();
            self.speculate(|| Opening::Preprocess, |st| opening_step(&all, live, st));
        }
        let ok = self.test(&all);
        self.note(format!(
            "Preprocessing: return only the values nothing else reads, drop returned and unused inputs\n{}",
            if ok { "SUCCESS" } else { "FAIL: the failure depends on the original's outputs; keeping them" }
        ));
        if ok {
            return Some(all);
        }
        self.retained = self.original.all_outputs();
        let ok = self.test(&all);
        let live = self.original.all_live().to_vec();
        let dead = live.len() < all.len();
        self.note(format!(
            "Preprocessing: drop unused inputs, keep every output\n{}",
            match (ok, dead) {
                (true, _) => "SUCCESS",
                (false, true) => "FAIL: the failure depends on the values nothing reads",
                (false, false) => "FAIL: only the original exactly as given fails",
            }
        ));
        if ok {
            return Some(all);
        }
        if !dead {
            return None;
        }
        let ok = self.test(&live);
        self.note(format!(
            "Preprocessing: only what reaches the original's outputs, returned as it returns them\n{}",
            if ok {
                "SUCCESS"
            } else {
                "FAIL: only the original exactly as given fails"
            }
        ));
        ok.then_some(live)
    }

    /// The result: `candidate`, the counts and the log (or the sink's error).
    fn finish(
        mut self,
        candidate: Candidate,
        signature: Signature,
    ) -> Result<Minified, MinifyError> {
        self.progress.finish();
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
            speculative: 0,
        })
    }

    /// Hands a new best candidate to the sink (an error is kept for the end).
    fn save(&mut self, candidate: &Candidate) {
        self.saved = Some((
            candidate.kept.clone(),
            candidate.retained.clone(),
            candidate.cut.clone(),
        ));
        if let Err(e) = self
            .sink
            .improved(candidate, self.identity.original(), &self.stats)
        {
            self.sink_error.get_or_insert(e);
        }
    }

    /// The node and input counts of the candidate keeping `kept`, for the log: remembered
    /// from when it was queried (building a candidate again costs as much as the graph).
    fn sizes(&mut self, kept: &[u32]) -> (usize, usize) {
        let Some(key) = self.key(kept) else {
            let c = self.candidate(kept);
            return (c.size(), c.inputs.len());
        };
        if let Some(&known) = self.sizes_of.get(&key) {
            return known;
        }
        let c = self.candidate(kept);
        let counts = (c.size(), c.inputs.len());
        self.sizes_of.insert(key, counts);
        counts
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
        if self.form.consolidate || !self.original.has_value_keys() {
            return s;
        }
        let consolidated = Form {
            consolidate: true,
            ..self.form
        };
        let before = self.candidate(&s).inputs.len();
        let after = self
            .original
            .candidate_retaining(&s, &self.retained, consolidated)
            .inputs
            .len();
        if after >= before {
            return s;
        }
        self.form = consolidated;
        let ok = self.test(&s);
        let (nodes, _) = self.sizes(&s);
        let mut line = format!("Strategy: Consolidate inputs ({nodes} nodes, {before} inputs)");
        if ok {
            line.push_str(&format!("\nSUCCESS: Went from {before} to {after} inputs"));
        } else {
            self.form.consolidate = false;
            line.push_str("\nFAIL: Could not remove anything");
        }
        self.note(line);
        s
    }

    /// Makes the inputs of the 1-minimal candidate keeping `s` constants holding their
    /// recorded values, if the bug survives it (one query; whether it did): a program that
    /// needs no inputs. A bug the constants hide (a compiler folds them, or specializes on
    /// them) keeps the parameters.
    fn inputs_as_constants(&mut self, s: &[u32]) -> bool {
        self.constants_next = None;
        let candidate = self.candidate(s);
        let inputs = candidate.inputs.len();
        if inputs == 0 || self.form.constants || self.out_of_queries() {
            return false;
        }
        let elements = constant_elements(&candidate);
        if elements > MAX_CONSTANT_ELEMENTS {
            self.note(format!(
                "Strategy: Inputs as constants ({inputs} inputs)\nSKIPPED: {} elements, more than {MAX_CONSTANT_ELEMENTS} to print into a program",
                if elements == i64::MAX { "unknown".to_string() } else { elements.to_string() }
            ));
            return false;
        }
        self.form.constants = true;
        let ok = self.test(s);
        let (nodes, _) = self.sizes(s);
        let mut line = format!("Strategy: Inputs as constants ({nodes} nodes, {inputs} inputs)");
        if ok {
            line.push_str(&format!("\nSUCCESS: Its {inputs} inputs are constants"));
        } else {
            self.form.constants = false;
            line.push_str("\nFAIL: The failure needs them as parameters");
        }
        self.note(line);
        ok
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
        // Speculation runs on into the suffix truncation that follows, either way.
        self.speculate(|| Opening::DeadCode, |st| opening_step(&s, &live, st));
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
            self.speculate(
                || Truncation::Halving(lo, hi),
                |st| self.truncation_step(&s, st),
            );
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

    /// The node where the shortest failing prefix ends, alone (everything it reads an
    /// input of recorded value): where a fault in one node is after truncation, as XLA's
    /// `hlo_bisect` finds it by making every other value a constant. One query.
    fn truncation_point_alone(&mut self, s: Vec<u32>) -> Vec<u32> {
        let Some(&last) = s.last() else {
            return s;
        };
        let alone = self.original.normalize(&[last]);
        if alone.len() >= s.len() || self.out_of_queries() {
            return s;
        }
        self.speculate(
            || Truncation::Halving(s.len() - 1, s.len()),
            |st| self.truncation_step(&s, st),
        );
        // As `hlo_bisect` has it, every other value a constant.
        self.try_alone("Truncation point alone", s, alone)
    }

    /// `alone` (a few nodes, everything they read an input) instead of `s`: with its inputs
    /// constants first, where the checker prints them and the search has none yet (where
    /// the bug survives that, one query finds the nodes and their constants, and the
    /// search goes on with constants); else with parameters. `name` names the strategy.
    fn try_alone(&mut self, name: &str, s: Vec<u32>, alone: Vec<u32>) -> Vec<u32> {
        if self.try_constants && !self.form.constants && self.constants_key_of(&alone).is_some() {
            self.form.constants = true;
            if self.test(&alone) {
                self.attempt(&format!("{name}, its inputs constants"), &s, &alone, true);
                return alone;
            }
            self.form.constants = false;
        }
        let ok = self.test(&alone);
        self.attempt(name, &s, &alone, ok);
        if ok {
            alone
        } else {
            s
        }
    }

    /// The nodes the failure names, alone (everything they read an input of recorded
    /// value): a wrong result's culprits (where its divergence starts), else the kept call
    /// nodes whose names the message quotes (graphbug's `at node `gelu_2``, a compiler's
    /// `%fusion.3`), at most [`NAMED_AT_MOST`]. Where a compiler's bug is in one op, its
    /// error or the localization says which, and one query (with constants, then with
    /// parameters where the bug needs them) finds it before any halving.
    fn named_nodes_alone(&mut self, s: Vec<u32>, signature: &Signature) -> Vec<u32> {
        // A flaky failure's verdict on one try is a draw: an unlucky one, remembered, would
        // keep the search from the very nodes it names (a halving search asks them later,
        // when the candidate has shown its rate on the way).
        if self.stats.reliability.is_some() {
            return s;
        }
        let g = self.original.graph();
        let named = |name: &str| {
            s.iter().copied().find(|&i| {
                let n = &g.nodes[i as usize];
                n.op().is_some() && n.name.as_str() == name
            })
        };
        let mut ids: Vec<u32> = if signature.culprits.is_empty() {
            signature
                .message
                .split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '%')))
                .map(|w| w.trim_start_matches('%').trim_end_matches('.'))
                .filter(|w| !w.is_empty())
                .filter_map(named)
                .collect()
        } else {
            signature.culprits.iter().filter_map(|c| named(c)).collect()
        };
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() || ids.len() > NAMED_AT_MOST || self.out_of_queries() {
            return s;
        }
        let alone = self.original.normalize(&ids);
        if alone.len() >= s.len() {
            return s;
        }
        self.try_alone("Named by the failure, alone", s, alone)
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
            let chunks: Vec<&[u32]> = sinks.chunks(g).collect();
            let without = |chunk: &[u32]| {
                let t = self.original.without_outputs(&s, chunk);
                (!t.is_empty() && t.len() != s.len()).then_some(t)
            };
            for (i, chunk) in chunks.iter().enumerate() {
                let Some(t) = without(chunk) else {
                    continue;
                };
                self.prefetch(
                    std::iter::once_with(|| t.clone())
                        .chain(chunks[i + 1..].iter().filter_map(|c| without(c))),
                );
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
            let mut reduced = None;
            let mut from = 0;
            while let Some((at, t, next_n)) = ddmin_try(&s, n, from) {
                self.speculate(|| (s.clone(), n, at), |st| self.ddmin_step(st, least));
                if self.test(&t) {
                    reduced = Some((t, next_n));
                    break;
                }
                from = at + 1;
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
                self.speculate(|| (s.clone(), i, changed), |st| self.one_minimal_step(st));
                let t = without(&s, i);
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

/// The elements `candidate`'s inputs hold, were they constants (`i64::MAX` when one is no
/// tensor of known size).
fn constant_elements(candidate: &Candidate) -> i64 {
    candidate
        .graph
        .nodes
        .iter()
        .filter(|n| n.is_placeholder())
        .map(|n| match &n.meta {
            Meta::Tensor(t) => t.numel(),
            _ => i64::MAX,
        })
        .fold(0i64, i64::saturating_add)
}

/// The kind of the truncation point's try alone.
const POINT_ALONE: Kind = (5, 0, 0);

/// Suffix truncation as a state machine for [`Session::speculate`]: the prefix lengths
/// still possible, `lo` (does not fail) to `hi` (fails).
fn truncate_step(s: &[u32], (lo, hi): (usize, usize)) -> Option<Step<(usize, usize)>> {
    let mid = lo + (hi - lo) / 2;
    (hi - lo > 1).then(|| Step {
        kind: (1, 0, 0),
        kept: s[..mid].to_vec(),
        yes: (lo, mid),
        no: (mid, hi),
    })
}

/// Where suffix truncation stands, for [`Session::speculate`]: the prefix lengths still
/// possible (`lo` does not fail, `hi` fails), then the truncation point alone, then (when
/// that passes) delta debugging of the prefix found.
enum Truncation {
    Halving(usize, usize),
    Prefix(usize),
    Ddmin((Vec<u32>, usize, usize)),
    Over,
}

/// Where the opening of a search stands, for [`Session::speculate`]: the preprocessing
/// try, the dead-code try, or suffix truncation between bounds (after dead code was
/// dropped or not).
enum Opening {
    Preprocess,
    DeadCode,
    Truncate { dead: bool, bounds: (usize, usize) },
    Over,
}

/// The opening as a state machine over `s`, whose live part is `live`: preprocessing
/// (which fails into other strategies: `Over`), dead code (tried only when some is
/// dead), suffix truncation.
fn opening_step(s: &[u32], live: &[u32], state: &Opening) -> Option<Step<Opening>> {
    match *state {
        Opening::Preprocess => Some(Step {
            kind: (4, 0, 0),
            kept: s.to_vec(),
            yes: Opening::DeadCode,
            no: Opening::Over,
        }),
        Opening::DeadCode if live.len() == s.len() || live.is_empty() => {
            let all = Opening::Truncate {
                dead: false,
                bounds: (0, s.len()),
            };
            opening_step(s, live, &all)
        }
        Opening::DeadCode => Some(Step {
            kind: (0, 0, 0),
            kept: live.to_vec(),
            yes: Opening::Truncate {
                dead: true,
                bounds: (0, live.len()),
            },
            no: Opening::Truncate {
                dead: false,
                bounds: (0, s.len()),
            },
        }),
        Opening::Truncate { dead, bounds } => truncate_step(if dead { live } else { s }, bounds)
            .map(|step| step.map(|bounds| Opening::Truncate { dead, bounds })),
        Opening::Over => None,
    }
}

/// `s` without its `i`th node.
fn without(s: &[u32], i: usize) -> Vec<u32> {
    s.iter()
        .enumerate()
        .filter(|&(j, _)| j != i)
        .map(|(_, &k)| k)
        .collect()
}

/// The first try at or after `from` of a ddmin round over `s` in `n` chunks, with its
/// index and the granularity its success leads to. Try `i < chunks` keeps chunk `i` (only
/// a strict subset is progress: one chunk may be all of `s`); try `chunks + i` keeps all
/// but chunk `i`.
fn ddmin_try(s: &[u32], n: usize, from: usize) -> Option<(usize, Vec<u32>, usize)> {
    let size = s.len().div_ceil(n.clamp(1, s.len().max(1))).max(1);
    let chunks = s.len().div_ceil(size);
    let chunk = |j: usize| j * size..((j + 1) * size).min(s.len());
    (from..2 * chunks).find_map(|i| {
        if i < chunks {
            let r = chunk(i);
            (r.len() < s.len()).then(|| (i, s[r].to_vec(), 2))
        } else {
            let r = chunk(i - chunks);
            let rest = s[..r.start].iter().chain(&s[r.end..]).copied().collect();
            Some((i, rest, (n - 1).max(2)))
        }
    })
}

/// Shrinks `graph` to a 1-minimal candidate that still fails `checker` the way the whole
/// graph does.
///
/// The original is checked first (and once more, to catch a flaky checker). Strategies
/// then loop until nothing shrinks: eliminate dead code, truncate suffix, the truncation
/// point alone, remove outputs,
/// consolidate inputs (with value fingerprints), delta debugging; a final pass makes the
/// result 1-minimal. Unused inputs never arise: a candidate's inputs are exactly what its
/// nodes read. No candidate is queried twice.
pub fn minify(
    graph: &Graph,
    checker: &mut dyn Checker,
    options: &MinifyOptions,
    sink: &mut dyn Sink,
) -> Result<Minified, MinifyError> {
    let original = original_of(graph, options)?;
    let start = Start::new(&original, checker, None, options, false)?;
    let searched = match start.reliability {
        Some(r) => {
            let mut held = Reliably::new(checker, r, start.identity.clone());
            return Ok(start
                .search(Exec::Serial(&mut held), 0, options, sink)?
                .measured());
        }
        None => start.search(Exec::Serial(checker), 0, options, sink)?,
    };
    let (first, second, spent) = match searched {
        Searched::Done(m) => return Ok(m),
        Searched::Flaky {
            first,
            second,
            spent,
        } => (first, second, spent),
    };
    // Found flaky at the first candidate that did not show the bug: again from the start,
    // every candidate held to the original's failure rate.
    let start = Start::flaky(&original, checker, options, first, second)?;
    let mut m = match start.reliability {
        Some(r) => {
            let mut held = Reliably::new(checker, r, start.identity.clone());
            start.search(Exec::Serial(&mut held), 0, options, sink)?
        }
        None => start.search(Exec::Serial(checker), 0, options, sink)?,
    }
    .measured();
    m.stats.queries += spent;
    Ok(m)
}

/// [`minify`] with one worker per checker, each answering the candidates the serial
/// search tries next while it waits for the current one.
///
/// The search consumes verdicts in its own order, so the result, the query count, the log
/// and every improvement handed to `sink` are those of [`minify`] with one of these
/// checkers, for any number of them (given checkers that judge a candidate the same way
/// whichever runs it). Verdicts computed but never needed are counted in
/// [`Minified::speculative`]. A checker that panics gives an unresolved verdict; one that
/// hangs holds only its own worker, as long as its own time limit lets it.
pub fn minify_parallel(
    graph: &Graph,
    checkers: &mut [Box<dyn Checker + Send + '_>],
    options: &MinifyOptions,
    sink: &mut dyn Sink,
) -> Result<Minified, MinifyError> {
    let jobs = checkers.len();
    if jobs <= 1 {
        let first = checkers
            .first_mut()
            .ok_or_else(|| MinifyError::Unresolved {
                checker: "no checker".into(),
                message: "minify_parallel needs at least one checker".into(),
            })?;
        return minify(graph, first.as_mut(), options, sink);
    }
    let original = original_of(graph, options)?;
    let pool = Pool::default();
    // The original is checked twice, by the first two checkers; the others answer the
    // opening tries meanwhile (the search follows their verdicts once it gets there).
    let (checking, others) = checkers.split_at_mut(2);
    if options.resume.is_none() {
        pool.prefetch(opening_guess(&original, others.len()));
    }
    /// Closes a pool however the search ends, so the workers' threads end too.
    struct Close<'p>(&'p Pool);
    impl Drop for Close<'_> {
        fn drop(&mut self) {
            self.0.close();
        }
    }
    /// How the search with single runs ended.
    enum Opened<'o, 'g> {
        Done(Minified),
        /// The original's failure rate was measured at the start (with the workers' waste).
        Measured(Box<Start<'o, 'g>>, usize),
        /// The search found the bug flaky: the original's runs, the queries it made, and
        /// the workers' waste.
        Flaky(Verdict, Verdict, usize, usize),
    }
    let opened = std::thread::scope(|scope| -> Result<Opened<'_, '_>, MinifyError> {
        let original = &original;
        for checker in others.iter_mut() {
            let pool = &pool;
            scope.spawn(move || pool.serve(original, checker.as_mut()));
        }
        let _close = Close(&pool);
        let [first, second] = checking else {
            unreachable!("split at two of at least two")
        };
        // The second check of the original goes to the second checker when it has started
        // (workers launched side by side start together); otherwise the first checks twice
        // rather than wait for a worker still in a queue.
        let start = if second.await_start(SECOND_START_WAIT) == Startup::Started {
            Start::new(
                original,
                first.as_mut(),
                Some(second.as_mut()),
                options,
                true,
            )?
        } else {
            Start::new(original, first.as_mut(), None, options, true)?
        };
        if start.reliability.is_some() {
            // A flaky bug: the workers' answers so far are single runs; they go.
            let waste = pool.close();
            return Ok(Opened::Measured(Box::new(start), waste));
        }
        for checker in checking.iter_mut() {
            let pool = &pool;
            scope.spawn(move || pool.serve(original, checker.as_mut()));
        }
        Ok(
            match start.search(Exec::Pool(&pool), jobs, options, sink)? {
                Searched::Done(mut m) => {
                    m.speculative = pool.close();
                    Opened::Done(m)
                }
                Searched::Flaky {
                    first,
                    second,
                    spent,
                } => Opened::Flaky(first, second, spent, pool.close()),
            },
        )
    })?;
    let (start, waste, spent) = match opened {
        Opened::Done(m) => return Ok(m),
        Opened::Measured(start, waste) => (*start, waste, 0),
        Opened::Flaky(first, second, spent, waste) => {
            let checker = checkers[0].as_mut();
            (
                Start::flaky(&original, checker, options, first, second)?,
                waste,
                spent,
            )
        }
    };
    // Every worker now answers a query with up to `runs` runs of its checker.
    let r = start.reliability.expect("only a flaky original gets here");
    let mut held: Vec<Reliably<'_, dyn Checker + Send>> = checkers
        .iter_mut()
        .map(|c| Reliably::new(c.as_mut(), r, start.identity.clone()))
        .collect();
    let pool = Pool::default();
    std::thread::scope(|scope| {
        let original = &original;
        for checker in held.iter_mut() {
            let pool = &pool;
            scope.spawn(move || pool.serve(original, checker));
        }
        let _close = Close(&pool);
        let mut m = start
            .search(Exec::Pool(&pool), jobs, options, sink)?
            .measured();
        m.speculative = pool.close() + waste;
        m.stats.queries += spent;
        Ok(m)
    })
}

/// The original graph to minify, verified, with the reference values' fingerprints.
fn original_of<'g>(graph: &'g Graph, options: &MinifyOptions) -> Result<Original<'g>, MinifyError> {
    graph.verify()?;
    Ok(Original::borrowing(graph).with_value_keys(options.value_keys.clone().unwrap_or_default()))
}

/// The first `n` tries of a fresh search if each reproduces (preprocessing, dead code,
/// the first halvings of suffix truncation), as pool keys: what idle workers answer while
/// the original is being checked.
fn opening_guess(original: &Original<'_>, n: usize) -> Vec<Key> {
    let all = original.all();
    let live = original.all_live();
    let mut state = if original.canonical_is_given() {
        Opening::DeadCode
    } else {
        Opening::Preprocess
    };
    let mut keys = Vec::new();
    while keys.len() < n {
        let Some(step) = opening_step(&all, live, &state) else {
            break;
        };
        keys.push((original.normalize(&step.kept), Vec::new(), Form::default()));
        state = step.yes;
    }
    keys
}

/// A minification that has checked its starting graph: it fails, twice alike, with the
/// failure the search keeps to.
struct Start<'o, 'g> {
    original: &'o Original<'g>,
    /// Where the search starts (the original as given, or where a killed run stood): its
    /// kept nodes, retained outputs and size (the candidate itself is not kept: at a
    /// million nodes it is a copy of the graph).
    first_kept: Vec<u32>,
    first_retained: Vec<usize>,
    first_size: usize,
    signature: Signature,
    identity: BugIdentity,
    checker_name: String,
    found_text: String,
    /// How reliably the original fails, when that had to be measured.
    reliability: Option<Reliability>,
    /// The original's second run, when it is judged at the search's first candidate that
    /// does not show the bug.
    recheck: Option<Recheck>,
}

/// The original's two runs tell a flaky bug; the second is needed only once a candidate
/// does not show the bug (a "no" might be the bug not showing this time). A search that
/// sees only failing candidates never needs it.
#[derive(Clone)]
struct Recheck {
    /// The original's first verdict (its failure).
    first: Verdict,
    /// Its second verdict, when taken already (by a worker beside the first, for free);
    /// otherwise the search's checker takes it when it is needed.
    second: Option<Verdict>,
}

/// Whether two verdicts are the same failure (a message may differ in numbers, e.g. a
/// time limit).
fn same_failure(v1: &Verdict, v2: &Verdict) -> bool {
    match (v1, v2) {
        (Verdict::Fails(s1), Verdict::Fails(s2)) => {
            s2.kind == s1.kind
                && s2.op == s1.op
                && crate::checker::similar(&s1.message, &s2.message)
        }
        _ => false,
    }
}

/// How [`Start::begin`] gets the original's runs.
enum Runs<'c> {
    /// It runs the original (see [`Start::new`]).
    Check {
        second: Option<&'c mut (dyn Checker + Send)>,
        eager: bool,
    },
    /// The original's two runs, already taken.
    Known(Box<(Verdict, Verdict)>),
}

/// How a search ended.
enum Searched {
    /// With its result.
    Done(Minified),
    /// At its first candidate that did not show the bug, because the original's second
    /// run did not fail as its first did: the bug is flaky, and the search starts again
    /// with every candidate held to the original's failure rate.
    Flaky {
        /// The original's two verdicts.
        first: Verdict,
        second: Verdict,
        /// The queries the stopped search made.
        spent: usize,
    },
}

impl Searched {
    /// The result of a search that cannot have found the bug flaky (its original's
    /// failure rate was measured before it started).
    fn measured(self) -> Minified {
        match self {
            Searched::Done(m) => m,
            Searched::Flaky { .. } => {
                unreachable!("a search held to a measured failure rate rechecks nothing")
            }
        }
    }
}

impl<'o, 'g> Start<'o, 'g> {
    /// Checks where the search starts: the original exactly as given, or where a killed
    /// run stood. A failing original's second run, which tells a flaky checker, is judged
    /// at the search's first candidate that does not show the bug ([`Recheck`]); it is
    /// taken now by `second`, at the same time, when there is one, or by `checker` when
    /// `eager` (side by side, workers answer ahead of the search and need the verdict at
    /// hand). An original that does not fail, or one whose failure rate `repeat` asks to
    /// measure, is run again at once.
    fn new(
        original: &'o Original<'g>,
        checker: &mut dyn Checker,
        second: Option<&mut (dyn Checker + Send)>,
        options: &MinifyOptions,
        eager: bool,
    ) -> Result<Start<'o, 'g>, MinifyError> {
        Self::begin(original, checker, options, Runs::Check { second, eager })
    }

    /// [`Start::new`], or (with [`Runs::Known`]) the start after the original's two runs.
    fn begin(
        original: &'o Original<'g>,
        checker: &mut dyn Checker,
        options: &MinifyOptions,
        runs: Runs<'_>,
    ) -> Result<Start<'o, 'g>, MinifyError> {
        let graph = original.graph();
        let first = match &options.resume {
            Some(point) => {
                let n = graph.nodes.len() as u32;
                if let Some(bad) = point.kept.iter().find(|&&k| k >= n) {
                    return Err(MinifyError::Resume(format!(
                        "node #{bad} does not exist in a graph of {n} nodes"
                    )));
                }
                original.candidate_retaining(&point.kept, &point.retained, Form::default())
            }
            None => original.as_given(),
        };
        let checker_name = checker.describe();
        let start = |signature, identity, found_text, reliability| Start {
            original,
            first_kept: first.kept.clone(),
            first_retained: first.retained.clone(),
            first_size: first.size(),
            signature,
            identity,
            checker_name: checker_name.clone(),
            found_text,
            reliability,
            recheck: None,
        };
        // `eager`: `None` when the runs are known (they are judged now, both taken).
        let (v1, v2, eager) = match runs {
            Runs::Known(runs) => {
                let (v1, v2) = *runs;
                (v1, Some(v2), None)
            }
            Runs::Check {
                second: Some(other),
                eager,
            } => std::thread::scope(|scope| {
                let again = scope.spawn(|| other.check(&first));
                let v1 = checker.check(&first);
                let v2 = again.join().unwrap_or_else(|_| {
                    Verdict::Unresolved("the checker panicked on the original".into())
                });
                (v1, Some(v2), Some(eager))
            }),
            Runs::Check {
                second: None,
                eager,
            } => (checker.check(&first), None, Some(eager)),
        };
        if let Verdict::Unresolved(message) = v1 {
            return Err(MinifyError::Unresolved {
                checker: checker_name,
                message,
            });
        }
        if let (Some(eager), Verdict::Fails(found), true) =
            (eager, &v1, options.repeat.is_none_or(|k| k <= 1))
        {
            let second = match v2 {
                Some(v) => Some(v),
                None if eager => Some(checker.check(&first)),
                None => None,
            };
            let (signature, identity) = Self::identity(found, options, &checker_name)?;
            let mut s = start(signature, identity, describe(&v1), None);
            s.recheck = Some(Recheck { first: v1, second });
            return Ok(s);
        }
        let v2 = match v2 {
            Some(v) => v,
            None => checker.check(&first),
        };
        let same = same_failure(&v1, &v2);
        let fails = |v: &Verdict| matches!(v, Verdict::Fails(_));
        // Measure how reliably the original fails when asked to, or when its first two
        // runs disagree and one of them failed (a flaky bug).
        let repeat = match options.repeat {
            Some(k) => (k > 1).then_some(k),
            None => (!same && (fails(&v1) || fails(&v2))).then_some(AUTO_REPEAT),
        };
        if let Some(runs) = repeat {
            let mut verdicts = vec![v1, v2];
            while verdicts.len() < runs {
                verdicts.push(checker.check(&first));
            }
            let found = verdicts.iter().find_map(|v| match v {
                Verdict::Fails(s) => Some(s.clone()),
                _ => None,
            });
            let signature = options
                .resume
                .as_ref()
                .and_then(|p| p.signature.clone())
                .or(found);
            let Some(signature) = signature else {
                return Err(MinifyError::DoesNotFail {
                    checker: checker_name,
                    verdict: format!("passes in all {runs} runs"),
                });
            };
            let identity = BugIdentity::new(signature.clone(), options.check_str.as_deref())
                .map_err(|e| MinifyError::CheckStr(e.to_string()))?;
            let failures = verdicts
                .iter()
                .filter(|v| matches!(v, Verdict::Fails(s) if identity.matches(s)))
                .count();
            let reliability = Reliability { runs, failures };
            if failures == 0 {
                return Err(MinifyError::DoesNotFail {
                    checker: checker_name,
                    verdict: format!(
                        "{} in {runs} runs, never with the bug it must keep (--check-str, or a resumed run's)",
                        describe(&Verdict::Fails(signature))
                    ),
                });
            }
            if failures < 2 {
                let first = describe(&verdicts[0]);
                let second = verdicts
                    .iter()
                    .map(describe)
                    .find(|d| *d != first)
                    .unwrap_or_else(|| first.clone());
                return Err(MinifyError::Flaky {
                    first,
                    second: format!(
                        "{second}; the original fails with its bug in {reliability}, too rarely to tell a candidate that keeps it (try a larger --repeat)"
                    ),
                });
            }
            let found_text = format!(
                "{} in {reliability}; a candidate must fail as often",
                describe(&Verdict::Fails(signature.clone()))
            );
            return Ok(start(signature, identity, found_text, Some(reliability)));
        }
        let Verdict::Fails(found) = v1.clone() else {
            return Err(MinifyError::DoesNotFail {
                checker: checker_name,
                verdict: describe(&v1),
            });
        };
        if !same {
            return Err(MinifyError::Flaky {
                first: describe(&v1),
                second: describe(&v2),
            });
        }
        // A resumed run keeps to the failure the original showed.
        let (signature, identity) = Self::identity(&found, options, &checker_name)?;
        Ok(start(signature, identity, describe(&v1), None))
    }

    /// The original's failure and what a candidate's failure must match: the failure a
    /// resumed run kept to, or `found`; an error when `found` is not that failure.
    fn identity(
        found: &Signature,
        options: &MinifyOptions,
        checker_name: &str,
    ) -> Result<(Signature, BugIdentity), MinifyError> {
        let signature = options
            .resume
            .as_ref()
            .and_then(|p| p.signature.clone())
            .unwrap_or_else(|| found.clone());
        let identity = BugIdentity::new(signature.clone(), options.check_str.as_deref())
            .map_err(|e| MinifyError::CheckStr(e.to_string()))?;
        if !identity.matches(found) {
            let why = if options.resume.is_some() {
                "not the failure the original showed"
            } else {
                "does not match --check-str"
            };
            return Err(MinifyError::DoesNotFail {
                checker: checker_name.to_string(),
                verdict: format!("{} ({why})", describe(&Verdict::Fails(found.clone()))),
            });
        }
        Ok((signature, identity))
    }

    /// Where the search starts again once its first candidate that did not show the bug
    /// found the original flaky (its runs `first` and `second` disagree): the failure
    /// rate measured by `checker`.
    fn flaky(
        original: &'o Original<'g>,
        checker: &mut dyn Checker,
        options: &MinifyOptions,
        first: Verdict,
        second: Verdict,
    ) -> Result<Start<'o, 'g>, MinifyError> {
        Self::begin(
            original,
            checker,
            options,
            Runs::Known(Box::new((first, second))),
        )
    }

    /// Runs the strategies from the starting graph, asking `exec` (with `lookahead`
    /// candidates handed to a pool ahead of the search).
    fn search<'a>(
        &'a self,
        exec: Exec<'a>,
        lookahead: usize,
        options: &MinifyOptions,
        sink: &'a mut dyn Sink,
    ) -> Result<Searched, MinifyError> {
        let progress = if options.progress {
            Progress::spinner("minify")
        } else {
            Progress::hidden()
        };
        let start_size = self.first_size;
        let mut session = Session {
            cache: FxHashMap::default(),
            form: Form::default(),
            retained: self.first_retained.clone(),
            original: self.original,
            exec,
            lookahead,
            outcomes: FxHashMap::default(),
            next_kind: Cell::new(None),
            sizes_of: FxHashMap::default(),
            identity: self.identity.clone(),
            sink,
            stats: Stats {
                start_nodes: self.original.graph().num_call_function_nodes(),
                end_nodes: start_size,
                // The original's runs: one, and the second once a recheck takes it.
                queries: self
                    .reliability
                    .map_or(if self.recheck.is_some() { 1 } else { 2 }, |r| r.runs),
                cache_hits: 0,
                reliability: self.reliability,
            },
            log: Vec::new(),
            verbose: options.verbose,
            progress,
            max_queries: options.max_queries,
            best_size: start_size,
            best_rank: (start_size, usize::MAX, usize::MAX),
            saved: None,
            sink_error: None,
            try_constants: options.constants,
            constants_next: None,
            recheck: self.recheck.clone(),
            first: options
                .resume
                .is_some()
                .then(|| (self.first_kept.clone(), self.first_retained.clone())),
            flaky: None,
        };
        session.show_progress();
        session.note(format!(
            "Started with {start_size} nodes; checking {}; it fails: {}",
            self.checker_name, self.found_text
        ));
        if let Some(m) = self.signature.margin.filter(|&m| m < CLEAR_MARGIN) {
            session.note(format!(
                "The original fails only {} its tolerance, on the edge: a candidate must fail by at least as much",
                margin_text(m)
            ));
        }
        let signature = self.signature.clone();
        let mut s = self.first_kept.clone();
        if options.resume.is_some() {
            session
                .cache
                .insert((s.clone(), session.retained.clone(), Form::default()), true);
        } else {
            match session.preprocess() {
                Some(start) => s = start,
                // Only the original exactly as given fails: nothing can be taken away.
                None => return session.end(self.original.as_given(), signature),
            }
        }
        s = session.named_nodes_alone(s, &signature);
        loop {
            let before = (s.clone(), session.retained.clone());
            s = session.eliminate_dead_code(s);
            s = session.truncate_suffix(s);
            s = session.truncation_point_alone(s);
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
        if options.constants && session.inputs_as_constants(&s) {
            // With constants the bug may need fewer nodes (a folding bug).
            s = session.one_minimal(s);
        }
        let candidate = session.candidate(&s);
        // The sink holds the result, whatever the last improvement it saw was.
        let result = (
            candidate.kept.clone(),
            candidate.retained.clone(),
            candidate.cut.clone(),
        );
        if session.saved.as_ref() != Some(&result) {
            session.save(&candidate);
        }
        session.end(candidate, signature)
    }
}

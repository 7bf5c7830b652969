//! Speculative queries: several checkers answer the candidates the serial search will try
//! next, while the search itself consumes verdicts one at a time in its own order.
//!
//! The search asks [`Pool::prefetch`] for the candidates it would try next if each of them
//! failed to reproduce, then [`Pool::resolve`]s them in order. Only resolved verdicts
//! count, so the search, its query count and everything it saves are those of a serial
//! run, whatever the number of workers (as llvm-reduce and C-Reduce parallelize). A verdict
//! computed but never resolved is speculation waste.

use std::collections::{HashMap, HashSet, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::candidate::{Candidate, Original};
use crate::checker::{Checker, Verdict};

/// A candidate as the search names it: kept nodes, retained outputs, consolidated inputs.
pub(crate) type Key = (Vec<u32>, Vec<usize>, bool);

#[derive(Default)]
struct State {
    /// Candidates to start, the most urgent first.
    queue: VecDeque<Key>,
    /// Candidates a worker is checking.
    running: HashSet<Key>,
    /// Verdicts not yet resolved by the search.
    done: HashMap<Key, (Candidate, Verdict)>,
    /// Set when the search ends: workers stop after their current query.
    closed: bool,
    /// Queries the workers ran (or are running, once closed).
    run: usize,
    /// Verdicts the search resolved.
    resolved: usize,
}

/// What the workers know of a candidate.
pub(crate) enum Peek {
    /// Its verdict, not yet resolved by the search.
    Answered(Verdict),
    /// A worker is checking it.
    Running,
    /// Nothing yet.
    Unknown,
}

/// The queue the search and its workers share.
#[derive(Default)]
pub(crate) struct Pool {
    state: Mutex<State>,
    changed: Condvar,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A worker's panic is caught around the checker, never while the lock is held.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves queries with `checker` until the pool closes (one call per worker thread).
    pub(crate) fn serve(&self, original: &Original<'_>, checker: &mut (dyn Checker + Send)) {
        loop {
            let key = {
                let mut st = self.lock();
                loop {
                    if st.closed {
                        return;
                    }
                    if let Some(k) = st.queue.pop_front() {
                        st.running.insert(k.clone());
                        break k;
                    }
                    st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
                }
            };
            let candidate = original.candidate_retaining(&key.0, &key.1, key.2);
            let verdict = catch_unwind(AssertUnwindSafe(|| checker.check(&candidate)))
                .unwrap_or_else(|panic| {
                    let why = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    Verdict::Unresolved(format!("the checker panicked: {why}"))
                });
            let mut st = self.lock();
            st.running.remove(&key);
            st.run += 1;
            st.done.insert(key, (candidate, verdict));
            self.changed.notify_all();
        }
    }

    /// What the workers know of `key` now, without waiting.
    pub(crate) fn peek(&self, key: &Key) -> Peek {
        let st = self.lock();
        match st.done.get(key) {
            Some((_, verdict)) => Peek::Answered(verdict.clone()),
            None if st.running.contains(key) => Peek::Running,
            None => Peek::Unknown,
        }
    }

    /// Replaces the candidates waiting to start by `keys` (in the order the search would
    /// try them); ones already running or answered are not started again.
    pub(crate) fn prefetch(&self, keys: Vec<Key>) {
        let mut st = self.lock();
        st.queue.clear();
        for k in keys {
            if !st.done.contains_key(&k) && !st.running.contains(&k) {
                st.queue.push_back(k);
            }
        }
        self.changed.notify_all();
    }

    /// The verdict on `key`, waiting for it (and starting it first, if no worker has).
    pub(crate) fn resolve(&self, key: &Key) -> (Candidate, Verdict) {
        let mut st = self.lock();
        loop {
            if let Some(answer) = st.done.remove(key) {
                st.resolved += 1;
                return answer;
            }
            if !st.running.contains(key) && st.queue.front() != Some(key) {
                st.queue.retain(|k| k != key);
                st.queue.push_front(key.clone());
                self.changed.notify_all();
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Stops the workers (after their current query); returns how many queries they ran
    /// that the search never needed (speculation waste).
    pub(crate) fn close(&self) -> usize {
        let mut st = self.lock();
        st.closed = true;
        st.queue.clear();
        self.changed.notify_all();
        (st.run + st.running.len()).saturating_sub(st.resolved)
    }
}

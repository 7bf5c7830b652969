//! Speculative queries: several checkers answer the candidates the serial search will try
//! next, while the search itself consumes verdicts one at a time in its own order.
//!
//! The search asks [`Pool::prefetch`] for the candidates it would try next if each of them
//! failed to reproduce, then [`Pool::resolve`]s them in order. Only resolved verdicts
//! count, so the search, its query count and everything it saves are those of a serial
//! run, whatever the number of workers (as llvm-reduce and C-Reduce parallelize). A verdict
//! computed but never resolved is speculation waste.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::candidate::{Candidate, Original};
use crate::checker::{Checker, Startup, Verdict};

/// How often a worker waiting for its checker to start looks whether the pool closed.
const START_POLL: Duration = Duration::from_millis(200);

/// A candidate as the search names it: kept nodes, retained outputs, the form of its inputs.
pub(crate) type Key = (Vec<u32>, Vec<usize>, crate::candidate::Form);

#[derive(Default)]
struct State {
    /// Candidates to start, the most urgent first.
    queue: VecDeque<Key>,
    /// Candidates a worker is checking, and since when.
    running: FxHashMap<Key, Instant>,
    /// How long queries take, on average (a moving average; `None` before the first).
    typical: Option<Duration>,
    /// The candidate the search is waiting for, if it is.
    awaited: Option<Key>,
    /// When the awaited verdict arrived, until the search says what it tries next: the
    /// queue is meanwhile the plan of a search state that has passed.
    stale: Option<Instant>,
    /// Verdicts not yet resolved by the search.
    done: FxHashMap<Key, (Candidate, Verdict)>,
    /// Set when the search ends: workers stop after their current query.
    closed: bool,
    /// Queries the workers ran (or are running, once closed).
    run: usize,
    /// Verdicts the search resolved.
    resolved: usize,
}

impl State {
    /// How long a free worker should wait before it starts the queue's next candidate:
    /// while the queue is the plan of a passed search state (briefly), or while a query still
    /// running will likely end within a quarter of a query's time (its verdict may change
    /// what is worth starting, and a started query cannot be called back). `None`: start
    /// now. A candidate the search is waiting for starts at once.
    fn hold_back(&self, now: Instant) -> Option<Duration> {
        let front = self.queue.front()?;
        if self.awaited.as_ref() == Some(front) {
            return None;
        }
        let typical = self.typical?;
        let wait = |until: Instant| {
            until
                .checked_duration_since(now)
                .map(|left| left.max(Duration::from_millis(1)))
        };
        if let Some(left) = self.stale.and_then(|since| wait(since + typical / 8)) {
            return Some(left);
        }
        self.running
            .values()
            .filter_map(|since| wait(*since + typical))
            .filter(|left| *left <= typical / 4)
            .min()
    }
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
    /// Set when the pool closes: the checks its workers run are no longer wanted.
    abandon: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A worker's panic is caught around the checker, never while the lock is held.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves queries with `checker` until the pool closes (one call per worker thread),
    /// once the checker has started: one still waiting (its worker queued by an engine)
    /// takes no candidate meanwhile, and one that never starts serves none.
    pub(crate) fn serve(&self, original: &Original<'_>, checker: &mut (dyn Checker + Send)) {
        checker.abandon_when(self.abandon.clone());
        loop {
            if self.lock().closed {
                return;
            }
            match checker.await_start(START_POLL) {
                Startup::Started => break,
                Startup::Waiting => continue,
                Startup::Failed(_) => return,
            }
        }
        loop {
            let key = {
                let mut st = self.lock();
                loop {
                    if st.closed {
                        return;
                    }
                    let hold = st.hold_back(Instant::now());
                    if hold.is_none() {
                        if let Some(k) = st.queue.pop_front() {
                            st.running.insert(k.clone(), Instant::now());
                            break k;
                        }
                    }
                    st = match hold {
                        Some(d) => {
                            self.changed
                                .wait_timeout(st, d)
                                .unwrap_or_else(|e| e.into_inner())
                                .0
                        }
                        None => self.changed.wait(st).unwrap_or_else(|e| e.into_inner()),
                    };
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
            if let Some(since) = st.running.remove(&key) {
                let took = since.elapsed();
                st.typical = Some(st.typical.map_or(took, |t| (t * 3 + took) / 4));
            }
            if st.awaited.as_ref() == Some(&key) {
                st.stale = Some(Instant::now());
            }
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
            None if st.running.contains_key(key) => Peek::Running,
            None => Peek::Unknown,
        }
    }

    /// Replaces the candidates waiting to start by `keys` (in the order the search would
    /// try them); ones already running or answered are not started again.
    pub(crate) fn prefetch(&self, keys: Vec<Key>) {
        let mut st = self.lock();
        st.queue.clear();
        st.stale = None;
        for k in keys {
            if !st.done.contains_key(&k) && !st.running.contains_key(&k) {
                st.queue.push_back(k);
            }
        }
        self.changed.notify_all();
    }

    /// Queues `key` after the candidates queued already, unless it is answered, running or
    /// queued.
    pub(crate) fn prefetch_also(&self, key: Key) {
        let mut st = self.lock();
        if !st.done.contains_key(&key) && !st.running.contains_key(&key) && !st.queue.contains(&key)
        {
            st.queue.push_back(key);
            self.changed.notify_all();
        }
    }

    /// The verdict on `key`, waiting for it (and starting it first, if no worker has).
    pub(crate) fn resolve(&self, key: &Key) -> (Candidate, Verdict) {
        let mut st = self.lock();
        st.stale = None;
        st.awaited = Some(key.clone());
        loop {
            if let Some(answer) = st.done.remove(key) {
                st.awaited = None;
                st.resolved += 1;
                return answer;
            }
            if !st.running.contains_key(key) && st.queue.front() != Some(key) {
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
        self.abandon
            .store(true, std::sync::atomic::Ordering::SeqCst);
        st.queue.clear();
        self.changed.notify_all();
        (st.run + st.running.len()).saturating_sub(st.resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u32) -> Key {
        (vec![n], Vec::new(), crate::candidate::Form::default())
    }

    #[test]
    fn a_free_worker_waits_only_for_a_verdict_due_soon() {
        let now = Instant::now();
        let typical = Duration::from_millis(200);
        let mut st = State {
            typical: Some(typical),
            ..State::default()
        };
        st.queue.push_back(key(1));
        // Nothing running: start at once.
        assert_eq!(st.hold_back(now), None);
        // A query due in 20 ms (within a quarter of a query's time): wait for it.
        st.running.insert(key(2), now - Duration::from_millis(180));
        let hold = st.hold_back(now).expect("holds back");
        assert!(hold <= Duration::from_millis(20), "{hold:?}");
        // ... unless the search waits for the queue's head.
        st.awaited = Some(key(1));
        assert_eq!(st.hold_back(now), None);
        st.awaited = None;
        // A query due in 150 ms, or overdue (it may hang): start at once.
        st.running.clear();
        st.running.insert(key(2), now - Duration::from_millis(50));
        assert_eq!(st.hold_back(now), None);
        st.running.clear();
        st.running.insert(key(2), now - Duration::from_millis(900));
        assert_eq!(st.hold_back(now), None);
        // The awaited verdict just arrived: the plan is stale, briefly.
        st.stale = Some(now);
        let hold = st.hold_back(now).expect("holds back");
        assert!(hold <= typical / 8, "{hold:?}");
        assert_eq!(st.hold_back(now + typical / 4), None);
        // Before any query took its time, nothing is known to wait for.
        st.typical = None;
        assert_eq!(st.hold_back(now), None);
        // An empty queue has nothing to start.
        st.typical = Some(typical);
        st.queue.clear();
        assert_eq!(st.hold_back(now), None);
    }
}

#[cfg(test)]
mod abandon_tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::checker::Checker;

    /// Answers nothing until the pool says its answer is no longer wanted.
    struct Stuck {
        flag: Option<Arc<AtomicBool>>,
        abandoned: bool,
    }

    impl Checker for Stuck {
        fn describe(&self) -> String {
            "stuck".into()
        }
        fn check(&mut self, _: &crate::Candidate) -> Verdict {
            let flag = self.flag.clone().expect("the pool hands its flag first");
            let start = Instant::now();
            while !flag.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(5));
            }
            self.abandoned = flag.load(Ordering::SeqCst);
            Verdict::Unresolved("abandoned".into())
        }
        fn abandon_when(&mut self, flag: Arc<AtomicBool>) {
            self.flag = Some(flag);
        }
    }

    #[test]
    fn closing_the_pool_abandons_the_checks_its_workers_run() {
        let graph = graphbug_ir::models::gpt_forward(&graphbug_ir::models::GptConfig::gpt4());
        let original = Original::borrowing(&graph);
        let pool = Pool::default();
        let mut stuck = Stuck {
            flag: None,
            abandoned: false,
        };
        std::thread::scope(|scope| {
            let (pool, original) = (&pool, &original);
            let stuck = &mut stuck;
            let serving = scope.spawn(move || pool.serve(original, stuck));
            pool.prefetch(vec![(
                vec![5],
                Vec::new(),
                crate::candidate::Form::default(),
            )]);
            while pool.lock().running.is_empty() {
                std::thread::sleep(Duration::from_millis(5));
            }
            // The search ends with the check still running: it stops, the worker ends.
            pool.close();
            serving.join().unwrap();
        });
        assert!(stuck.abandoned);
    }
}

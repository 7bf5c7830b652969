//! The search behind `graphbug bisect`: the least number of applications of a pass (or of
//! passes enabled) at which a failure appears, by binary search, as LLVM's
//! `-opt-bisect-limit` and PyTorch's CompilerBisector search; and the smallest set of
//! passes whose turning off makes a failure go away (XLA's `xla_disable_hlo_passes`), or
//! that alone cause it, by rounds of the same search.

use std::collections::BTreeMap;

/// What a search found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bisected {
    /// The least failing count.
    pub least: usize,
    /// The counts the serial search asks, in its order, and whether each failed.
    pub path: Vec<(usize, bool)>,
    /// Counts asked ahead of the search (with several jobs) that it never needed.
    pub speculative: usize,
}

/// The least `x` in `lo + 1..=hi` at which `fails(x)`, given that `lo` passes and `hi`
/// fails (a failure that, once it appears, stays as more applications are allowed).
///
/// `probe` answers a batch of counts (side by side when it can). With `jobs` above 1 each
/// batch holds up to `jobs` counts the serial search may ask in its next levels (its next
/// two levels with 3 jobs, three with 7; with 2, the next and one of the two after), so
/// the answer and the path are those of the serial search for any `jobs`.
pub fn least_failing(
    lo: usize,
    hi: usize,
    jobs: usize,
    probe: &mut dyn FnMut(&[usize]) -> Vec<bool>,
) -> Bisected {
    let mut known: BTreeMap<usize, bool> = BTreeMap::new();
    let (mut lo, mut hi) = (lo, hi.max(lo + 1));
    let mut path = Vec::new();
    let mut asked = 0;
    while hi - lo > 1 {
        let want = ahead(lo, hi, jobs.max(1), &known);
        if !want.is_empty() {
            asked += want.len();
            let answers = probe(&want);
            for (x, f) in want.into_iter().zip(answers) {
                known.insert(x, f);
            }
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let Some(&fails) = known.get(&mid) else { break };
            path.push((mid, fails));
            if fails {
                hi = mid;
            } else {
                lo = mid;
            }
        }
    }
    Bisected {
        least: hi,
        speculative: asked - path.len(),
        path,
    }
}

/// The unasked midpoints the search of `(lo, hi]` may ask next, level by level (the
/// midpoint, then its two halves' midpoints...), at most `jobs` of them: every level the
/// jobs cover in full, and as much of the next as they can.
fn ahead(lo: usize, hi: usize, jobs: usize, known: &BTreeMap<usize, bool>) -> Vec<usize> {
    let mut out = Vec::new();
    let mut level = std::collections::VecDeque::from([(lo, hi)]);
    while let Some((lo, hi)) = level.pop_front() {
        if out.len() >= jobs {
            break;
        }
        if hi - lo <= 1 {
            continue;
        }
        let mid = lo + (hi - lo) / 2;
        match known.get(&mid) {
            // Answered: the half the search goes on in takes its place in this level.
            Some(true) => level.push_front((lo, mid)),
            Some(false) => level.push_front((mid, hi)),
            None => {
                out.push(mid);
                level.push_back((lo, mid));
                level.push_back((mid, hi));
            }
        }
    }
    out
}

/// What one trial of a set of items (a compiler's passes) turned off showed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The failure shows.
    Shows,
    /// The program compiled and ran without the failure.
    Gone,
    /// Another verdict (a compile error, a crash, a hang, another failure): some item the
    /// trial turned off is needed by the program, as the text says.
    Invalid(String),
}

/// What a search for a set of items found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetFound {
    /// The items found, in their order.
    pub set: Vec<usize>,
    /// Items found needed on the way (turning them off gave [`Outcome::Invalid`]), in the
    /// order found, with the outcome that showed it.
    pub needed: Vec<(usize, String)>,
    /// The outcome of the set alone: turned off alone ([`smallest_off_set`]), or on
    /// alone with the needed items ([`smallest_on_set`]).
    pub alone: Outcome,
    /// The distinct trials the serial search asks (the first runs the caller made excluded).
    pub asked: usize,
    /// Trials run ahead of the search (with several jobs) that it never needed.
    pub speculative: usize,
}

/// Why a set search ended without a set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetSearchError {
    /// With every item off but the needed ones, the failure still shows: no set of the
    /// items is to blame.
    ShowsWithAllOff {
        /// The items found needed.
        needed: Vec<(usize, String)>,
    },
}

/// Answers trials, each the set of items turned off (sorted), side by side where it can,
/// remembering each answer so that no set is asked twice.
struct Trials<'a> {
    probe: &'a mut dyn FnMut(&[Vec<usize>]) -> Vec<Outcome>,
    known: BTreeMap<Vec<usize>, Outcome>,
    asked: usize,
}

impl Trials<'_> {
    fn answer(&mut self, sets: &[Vec<usize>]) -> Vec<Outcome> {
        let mut want: Vec<Vec<usize>> = Vec::new();
        for s in sets {
            if !self.known.contains_key(s) && !want.contains(s) {
                want.push(s.clone());
            }
        }
        if !want.is_empty() {
            self.asked += want.len();
            let got = (self.probe)(&want);
            for (s, o) in want.into_iter().zip(got) {
                self.known.insert(s, o);
            }
        }
        sets.iter().map(|s| self.known[s].clone()).collect()
    }

    fn one(&mut self, set: Vec<usize>) -> Outcome {
        self.answer(&[set]).remove(0)
    }
}

fn sorted(items: impl IntoIterator<Item = usize>) -> Vec<usize> {
    let mut v: Vec<usize> = items.into_iter().collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The smallest set of `0..n` (items in the order a compiler runs them) whose turning off
/// makes a failure go away, by rounds of binary search over prefixes (ddmin over an
/// ordered list): each round finds the last item of the set in about log2(n) trials. The
/// caller has seen the failure with nothing off. `needed` are never turned off; an item
/// whose turning off gives [`Outcome::Invalid`] joins them and the round goes on without it.
///
/// `probe` answers a batch of trials, each the sorted set of items off; with `jobs` above 1
/// a batch holds the trials the serial search may ask next, so the result and the trials
/// that count are the serial search's for any `jobs`.
pub fn smallest_off_set(
    n: usize,
    needed_in: &[usize],
    jobs: usize,
    probe: &mut dyn FnMut(&[Vec<usize>]) -> Vec<Outcome>,
) -> Result<SetFound, SetSearchError> {
    let mut trials = Trials {
        probe,
        known: BTreeMap::new(),
        asked: 0,
    };
    let mut needed: Vec<(usize, String)> = Vec::new();
    let given = sorted(needed_in.iter().copied());
    let mut pool: Vec<usize> = (0..n).filter(|i| !given.contains(i)).collect();
    let mut found: Vec<usize> = Vec::new();
    let mut speculative = 0;
    // Every item off first: where the failure still shows, no search is needed.
    // (Nothing to turn off: nothing off is what the caller saw fail.)
    if pool.is_empty() || trials.one(pool.clone()) == Outcome::Shows {
        return Err(SetSearchError::ShowsWithAllOff { needed });
    }
    // The prefixes below `lo` are known to show the failure.
    let mut lo = 0;
    loop {
        if lo >= pool.len() {
            // Every item off but the needed ones is a prefix known to show the failure.
            return Err(SetSearchError::ShowsWithAllOff { needed });
        }
        let off = |pool: &[usize], found: &[usize], k: usize| {
            sorted(found.iter().chain(&pool[..k]).copied())
        };
        let b = least_failing(lo, pool.len(), jobs, &mut |ks| {
            let sets: Vec<Vec<usize>> = ks.iter().map(|&k| off(&pool, &found, k)).collect();
            trials
                .answer(&sets)
                .iter()
                .map(|o| *o != Outcome::Shows)
                .collect()
        });
        speculative += b.speculative;
        let k = b.least;
        match trials.one(off(&pool, &found, k)) {
            Outcome::Shows => {
                return Err(SetSearchError::ShowsWithAllOff { needed });
            }
            Outcome::Invalid(why) => {
                needed.push((pool.remove(k - 1), why));
                lo = k - 1;
            }
            Outcome::Gone => {
                found.push(pool[k - 1]);
                pool.truncate(k - 1);
                let alone = trials.one(sorted(found.iter().copied()));
                if alone != Outcome::Shows || pool.is_empty() {
                    found.sort_unstable();
                    return Ok(SetFound {
                        set: found,
                        needed,
                        alone,
                        asked: trials.asked,
                        speculative,
                    });
                }
                lo = 0;
            }
        }
    }
}

/// The smallest set of `0..n` (items in the order a compiler runs them) that, on with
/// `always_on` and every other item off, still shows a failure (the items that only
/// together cause it), by the rounds of [`smallest_off_set`]; an [`Outcome::Invalid`]
/// trial counts as not showing it. The caller has seen the failure with nothing off;
/// `probe` is as there.
pub fn smallest_on_set(
    n: usize,
    always_on: &[usize],
    jobs: usize,
    probe: &mut dyn FnMut(&[Vec<usize>]) -> Vec<Outcome>,
) -> SetFound {
    let mut trials = Trials {
        probe,
        known: BTreeMap::new(),
        asked: 0,
    };
    let on = sorted(always_on.iter().copied());
    let mut pool: Vec<usize> = (0..n).filter(|i| !on.contains(i)).collect();
    // Items after a round's last found item: off in every later trial.
    let mut kept_off: Vec<usize> = Vec::new();
    let mut cause: Vec<usize> = Vec::new();
    let mut speculative = 0;
    loop {
        let off = |pool: &[usize], kept_off: &[usize], k: usize| {
            sorted(kept_off.iter().chain(&pool[k..]).copied())
        };
        let alone = trials.one(off(&pool, &kept_off, 0));
        if alone == Outcome::Shows || pool.is_empty() {
            cause.sort_unstable();
            return SetFound {
                set: cause,
                needed: Vec::new(),
                alone,
                asked: trials.asked,
                speculative,
            };
        }
        let b = least_failing(0, pool.len(), jobs, &mut |ks| {
            let sets: Vec<Vec<usize>> = ks.iter().map(|&k| off(&pool, &kept_off, k)).collect();
            trials
                .answer(&sets)
                .iter()
                .map(|o| *o == Outcome::Shows)
                .collect()
        });
        speculative += b.speculative;
        let k = b.least;
        cause.push(pool[k - 1]);
        kept_off.extend_from_slice(&pool[k..]);
        pool.truncate(k - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy compiler of `n` passes: the failure shows when every pass of some `causes`
    /// set is on (an OR of ANDs); turning off a pass of `needed` breaks compilation.
    fn toy<'a>(
        causes: &'a [&'a [usize]],
        needed: &'a [usize],
    ) -> impl FnMut(&[Vec<usize>]) -> Vec<Outcome> + 'a {
        move |sets| {
            sets.iter()
                .map(|off| {
                    if let Some(p) = needed.iter().find(|p| off.contains(p)) {
                        Outcome::Invalid(format!("pass {p} is needed"))
                    } else if causes.iter().any(|c| c.iter().all(|p| !off.contains(p))) {
                        Outcome::Shows
                    } else {
                        Outcome::Gone
                    }
                })
                .collect()
        }
    }

    #[test]
    fn one_culprit_is_found_in_about_log2_trials_for_any_jobs() {
        let n = 86;
        for culprit in [0, 1, 40, 84, 85] {
            let serial = smallest_off_set(n, &[], 1, &mut toy(&[&[culprit]], &[])).unwrap();
            assert_eq!(serial.set, [culprit]);
            assert_eq!(serial.alone, Outcome::Gone);
            // ceil(log2(86)) = 7 for the search, one for every item off (asked first) and
            // one for the set alone.
            assert!(serial.asked <= 9, "{culprit}: {} trials", serial.asked);
            for jobs in [2, 3, 7] {
                let par = smallest_off_set(n, &[], jobs, &mut toy(&[&[culprit]], &[])).unwrap();
                assert_eq!(par.set, serial.set, "{jobs} jobs");
                assert_eq!(par.asked - par.speculative, serial.asked, "{jobs} jobs");
            }
            // On alone, the culprit shows the failure.
            let on = smallest_on_set(n, &serial.set, 1, &mut toy(&[&[culprit]], &[]));
            assert_eq!(
                (on.set.len(), on.alone.clone(), on.asked),
                (0, Outcome::Shows, 1)
            );
        }
    }

    #[test]
    fn passes_that_each_cause_it_are_all_turned_off() {
        // Two passes each show the failure (fusion and a wrapper that fuses too).
        let found = smallest_off_set(20, &[], 1, &mut toy(&[&[5], &[12]], &[])).unwrap();
        assert_eq!((found.set, found.alone), (vec![5, 12], Outcome::Gone));
    }

    #[test]
    fn passes_that_only_together_cause_it() {
        // The failure needs 3, 9 and 15 on: turning off one is enough, and on alone with the
        // other two missing it is gone, so the passes on with it are searched.
        let mut probe = toy(&[&[3, 9, 15]], &[]);
        let off = smallest_off_set(30, &[], 1, &mut probe).unwrap();
        assert_eq!(off.set.len(), 1);
        let on = smallest_on_set(30, &off.set, 1, &mut probe);
        let mut all = on.set.clone();
        all.extend(&off.set);
        all.sort_unstable();
        assert_eq!((all, on.alone), (vec![3, 9, 15], Outcome::Shows));
        for jobs in [2, 5] {
            let par = smallest_on_set(30, &off.set, jobs, &mut toy(&[&[3, 9, 15]], &[]));
            assert_eq!(par.set, on.set);
            assert_eq!(par.asked - par.speculative, on.asked);
        }
    }

    #[test]
    fn a_needed_pass_is_kept_on_before_or_after_the_culprit() {
        for (culprit, needed) in [(10, 50), (50, 10), (10, 11), (11, 10)] {
            let found = smallest_off_set(60, &[], 1, &mut toy(&[&[culprit]], &[needed])).unwrap();
            assert_eq!(found.set, [culprit], "culprit {culprit}, needed {needed}");
            assert_eq!(found.alone, Outcome::Gone);
            let kept: Vec<usize> = found.needed.iter().map(|(p, _)| *p).collect();
            assert!(kept.is_empty() || kept == [needed], "{kept:?}");
            // Known needed passes are never turned off.
            let given =
                smallest_off_set(60, &[needed], 1, &mut toy(&[&[culprit]], &[needed])).unwrap();
            assert_eq!((given.set, given.needed.len()), (vec![culprit], 0));
        }
    }

    #[test]
    fn a_failure_no_pass_causes_is_said_so() {
        // It shows with every pass off: no pass is to blame, whatever the needed ones.
        let mut asked = 0;
        let e = smallest_off_set(10, &[], 1, &mut |s| {
            asked += s.len();
            vec![Outcome::Shows; s.len()]
        })
        .unwrap_err();
        assert_eq!(e, SetSearchError::ShowsWithAllOff { needed: vec![] });
        // One trial says so: every pass off.
        assert_eq!(asked, 1);
        let e = smallest_off_set(10, &[], 1, &mut toy(&[&[]], &[7])).unwrap_err();
        let SetSearchError::ShowsWithAllOff { needed } = e;
        assert_eq!(needed.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [7]);
        // Nothing to search.
        assert!(smallest_off_set(0, &[], 1, &mut |_| panic!("no trial")).is_err());
    }

    #[test]
    fn finds_the_least_failing_count_for_any_number_of_jobs() {
        for first_bad in 1..=40 {
            let serial = least_failing(0, 40, 1, &mut |xs| {
                xs.iter().map(|&x| x >= first_bad).collect()
            });
            assert_eq!(serial.least, first_bad);
            assert_eq!(serial.speculative, 0);
            assert!(serial.path.len() <= 6);
            for jobs in [2, 3, 4, 7, 16] {
                let mut batches = 0;
                let mut first = None;
                let par = least_failing(0, 40, jobs, &mut |xs| {
                    batches += 1;
                    first.get_or_insert(xs.len());
                    assert!(xs.len() <= jobs.max(1), "{xs:?} for {jobs} jobs");
                    xs.iter().map(|&x| x >= first_bad).collect()
                });
                assert_eq!(
                    (par.least, &par.path),
                    (serial.least, &serial.path),
                    "{jobs} jobs"
                );
                // Every job has a count to answer at the start (2 jobs too: the midpoint and
                // one of the next level's).
                assert_eq!(first, Some(jobs), "{jobs} jobs");
                // Each batch covers two levels or more of the serial search.
                if jobs >= 3 {
                    assert!(batches <= serial.path.len().div_ceil(2), "{jobs} jobs");
                }
            }
        }
        // Nothing between: the answer is `hi` without a probe.
        let b = least_failing(4, 5, 1, &mut |_| panic!("no probe needed"));
        assert_eq!((b.least, b.path.len()), (5, 0));
    }

    #[test]
    fn a_search_that_never_sees_the_failure_ends_at_hi() {
        // A wrong answer (a failure that comes and goes) cannot move the result past hi.
        let b = least_failing(0, 10, 1, &mut |xs| vec![false; xs.len()]);
        assert_eq!(b.least, 10);
    }
}

//! The search behind `graphbug bisect`: the least number of applications of a pass (or of
//! passes enabled) at which a failure appears, by binary search, as LLVM's
//! `-opt-bisect-limit` and PyTorch's CompilerBisector search.

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
/// batch holds the counts the serial search may ask in its next levels (3 with 3 jobs, 7
/// with 7), so the answer and the path are those of the serial search for any `jobs`.
pub fn least_failing(
    lo: usize,
    hi: usize,
    jobs: usize,
    probe: &mut dyn FnMut(&[usize]) -> Vec<bool>,
) -> Bisected {
    let depth = (usize::BITS - (jobs.max(1) + 1).leading_zeros() - 1).max(1) as usize;
    let mut known: BTreeMap<usize, bool> = BTreeMap::new();
    let (mut lo, mut hi) = (lo, hi.max(lo + 1));
    let mut path = Vec::new();
    let mut asked = 0;
    while hi - lo > 1 {
        let mut want = Vec::new();
        ahead(lo, hi, depth, &known, &mut want);
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

/// The unasked midpoints of the next `depth` levels of a search of `(lo, hi]`.
fn ahead(lo: usize, hi: usize, depth: usize, known: &BTreeMap<usize, bool>, out: &mut Vec<usize>) {
    if depth == 0 || hi - lo <= 1 {
        return;
    }
    let mid = lo + (hi - lo) / 2;
    match known.get(&mid) {
        Some(true) => ahead(lo, mid, depth, known, out),
        Some(false) => ahead(mid, hi, depth, known, out),
        None => {
            out.push(mid);
            ahead(lo, mid, depth - 1, known, out);
            ahead(mid, hi, depth - 1, known, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                let par = least_failing(0, 40, jobs, &mut |xs| {
                    batches += 1;
                    assert!(xs.len() <= jobs.max(1), "{xs:?} for {jobs} jobs");
                    xs.iter().map(|&x| x >= first_bad).collect()
                });
                assert_eq!(
                    (par.least, &par.path),
                    (serial.least, &serial.path),
                    "{jobs} jobs"
                );
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

//! 0/1 knapsack solvers for the memory budget: which recomputable candidates to *save*
//! under a memory limit so that the runtime of what must be recomputed is smallest
//! (equivalently, so that the runtime saved is largest).
//!
//! All solvers share the same conventions, so their answers are comparable:
//!
//! - An item with zero memory is always saved (it is free). An item with zero runtime and
//!   positive memory is always recomputed (saving it buys nothing). An item larger than
//!   the limit is recomputed. When the remaining ("contested") items fit together, all are
//!   saved. Only the contested items reach the solver proper.
//! - Runtimes must be finite and non-negative; anything else is an error naming the item.
//! - Memory sums are computed in `u128`, so values near `u64::MAX` never overflow.
//! - Output indices are sorted ascending; ties are broken deterministically (by index).
//!
//! The solvers:
//!
//! - [`KnapsackSolver::Greedy`]: by runtime per byte, descending (ties by index),
//!   skipping what does not fit. Fast, no optimality guarantee (as PyTorch's greedy).
//! - [`KnapsackSolver::DynamicProgramming`]: a DP over memory in units of
//!   `Q = dp_quantum(..)` bytes, at most `buckets` units of capacity. Memories are first
//!   divided by their greatest common divisor `g`; if `limit / g <= buckets` then `Q = g`
//!   and the DP is exact. Otherwise item weights are rounded *up* to whole units and the
//!   capacity *down*, so the limit is never exceeded, and the runtime saved is at least the
//!   optimum under the tighter limit `limit - n·(Q - 1)` (`n` = number of items). Proof: a
//!   set `S` with `Σ m ≤ limit - |S|·(Q-1)` has `Σ ⌈m/Q⌉ ≤ (Σ m + |S|·(Q-1))/Q ≤ limit/Q`,
//!   and the left side is an integer, so `S` fits the quantized capacity `⌊limit/Q⌋`.
//!   Time `O(n·buckets)`, a decision table of `n·(buckets+1)` bits. Among the sets it
//!   finds optimal it prefers the lightest (in units). Because rounding can drop an item
//!   that only just fits, the answer is replaced by the greedy one or by the single most
//!   valuable item when either saves strictly more runtime; so the DP also always saves at
//!   least half the optimum, and never less than the greedy solver.
//! - [`KnapsackSolver::Exact`]: optimal, by meet-in-the-middle (both halves' subsets,
//!   a Pareto frontier of one half, a binary search per subset of the other): time and
//!   memory `O(2^(k/2))` for `k` contested items. It refuses more than
//!   [`EXACT_MAX_ITEMS`] (40) contested items with [`KnapsackError::TooManyItems`], so
//!   callers can fall back to the DP; at the limit it takes well under a second and about
//!   60 MB in an optimized build. Among optimal sets it prefers the one using least memory.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Capacity buckets [`solve`] gives the DP solver.
pub const DEFAULT_DP_BUCKETS: usize = 10_000;

/// Largest number of buckets the DP solver accepts.
pub const MAX_DP_BUCKETS: usize = 1 << 24;

/// Largest DP decision table, in bits (items × (capacity units + 1)): 256 MiB.
pub const MAX_DP_TABLE_BITS: u64 = 1 << 31;

/// Most contested items the exact solver accepts (its cost is about `2^(items/2)`).
pub const EXACT_MAX_ITEMS: usize = 40;

/// One candidate: the bytes it takes when saved and the runtime its recomputation costs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct KnapsackItem {
    /// Bytes kept alive when the value is saved.
    pub memory: u64,
    /// Estimated runtime to recompute the value (any consistent unit), finite and >= 0.
    pub runtime: f64,
}

/// Which knapsack algorithm to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KnapsackSolver {
    /// Runtime per byte, descending; `greedy`.
    #[serde(rename = "greedy")]
    Greedy,
    /// Quantized dynamic programming over memory; `dp` (the default, as in PyTorch).
    #[default]
    #[serde(rename = "dp")]
    DynamicProgramming,
    /// Optimal meet-in-the-middle for up to [`EXACT_MAX_ITEMS`] contested items; `exact`.
    #[serde(rename = "exact")]
    Exact,
}

impl KnapsackSolver {
    /// Every solver, in a fixed order.
    pub const ALL: [KnapsackSolver; 3] = [
        KnapsackSolver::Greedy,
        KnapsackSolver::DynamicProgramming,
        KnapsackSolver::Exact,
    ];

    /// The solver's name: `greedy`, `dp` or `exact`.
    pub fn name(self) -> &'static str {
        match self {
            KnapsackSolver::Greedy => "greedy",
            KnapsackSolver::DynamicProgramming => "dp",
            KnapsackSolver::Exact => "exact",
        }
    }
}

impl fmt::Display for KnapsackSolver {
    /// Writes the solver's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KnapsackSolver {
    type Err = KnapsackError;

    /// Parses `greedy`, `dp` or `exact`.
    fn from_str(s: &str) -> Result<Self, KnapsackError> {
        KnapsackSolver::ALL
            .into_iter()
            .find(|solver| solver.name() == s)
            .ok_or_else(|| KnapsackError::UnknownSolver {
                name: s.to_string(),
            })
    }
}

/// The chosen split of the items.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KnapsackSolution {
    /// Indices of the items to save, ascending.
    pub saved: Vec<usize>,
    /// Indices of the items to recompute, ascending.
    pub recomputed: Vec<usize>,
    /// Total memory of the saved items (never above the limit).
    pub saved_memory: u64,
    /// Total runtime of the recomputed items (summed in index order).
    pub recomputed_runtime: f64,
}

/// Why a knapsack could not be solved.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum KnapsackError {
    /// An item's runtime is NaN, infinite or negative.
    #[error(
        "knapsack item {index} has runtime {runtime}; runtimes must be finite and non-negative"
    )]
    InvalidRuntime {
        /// The item's index.
        index: usize,
        /// Its runtime.
        runtime: f64,
    },
    /// Too many contested items for the exact solver.
    #[error(
        "the exact knapsack solver takes at most {limit} contested items (positive memory and \
         runtime, each fitting the limit alone), got {items}; use the dp or greedy solver"
    )]
    TooManyItems {
        /// Contested items in the instance.
        items: usize,
        /// [`EXACT_MAX_ITEMS`].
        limit: usize,
    },
    /// A bucket count of 0 or above [`MAX_DP_BUCKETS`].
    #[error("the dp knapsack solver takes 1..={max} buckets, got {buckets}")]
    InvalidBuckets {
        /// The requested bucket count.
        buckets: usize,
        /// [`MAX_DP_BUCKETS`].
        max: usize,
    },
    /// The DP decision table would exceed [`MAX_DP_TABLE_BITS`].
    #[error(
        "the dp knapsack table would hold {items} items x {columns} capacity units, more than \
         {limit} entries; use fewer buckets or the greedy solver"
    )]
    TableTooLarge {
        /// Contested items.
        items: usize,
        /// Capacity units + 1.
        columns: usize,
        /// [`MAX_DP_TABLE_BITS`].
        limit: u64,
    },
    /// A solver name that is not `greedy`, `dp` or `exact`.
    #[error("unknown knapsack solver `{name}` (known: greedy, dp, exact)")]
    UnknownSolver {
        /// The name given.
        name: String,
    },
}

/// Chooses the items to save with `solver` (the DP with [`DEFAULT_DP_BUCKETS`]).
pub fn solve(
    solver: KnapsackSolver,
    items: &[KnapsackItem],
    max_memory: u64,
) -> Result<KnapsackSolution, KnapsackError> {
    match solver {
        KnapsackSolver::Greedy => solve_greedy(items, max_memory),
        KnapsackSolver::DynamicProgramming => solve_dp(items, max_memory, DEFAULT_DP_BUCKETS),
        KnapsackSolver::Exact => solve_exact(items, max_memory),
    }
}

/// Greedy by runtime per byte, descending (ties by index), skipping items that do not fit.
pub fn solve_greedy(
    items: &[KnapsackItem],
    max_memory: u64,
) -> Result<KnapsackSolution, KnapsackError> {
    let Prepared {
        mut saved,
        contested,
    } = prepare(items, max_memory)?;
    saved.extend(greedy_pick(items, &contested, max_memory));
    Ok(finish(items, saved))
}

/// The greedy choice among the contested items.
fn greedy_pick(items: &[KnapsackItem], contested: &[usize], max_memory: u64) -> Vec<usize> {
    let density = |i: usize| items[i].runtime / items[i].memory as f64;
    let mut order = contested.to_vec();
    order.sort_by(|&a, &b| density(b).total_cmp(&density(a)).then(a.cmp(&b)));
    let mut used: u128 = 0;
    let mut picked = Vec::new();
    for i in order {
        let memory = u128::from(items[i].memory);
        if used + memory <= u128::from(max_memory) {
            used += memory;
            picked.push(i);
        }
    }
    picked
}

/// Total runtime of a set of items, summed in index order.
fn runtime_of(items: &[KnapsackItem], set: &[usize]) -> f64 {
    let mut sorted = set.to_vec();
    sorted.sort_unstable();
    sorted.iter().map(|&i| items[i].runtime).sum()
}

/// Bytes per capacity unit the DP uses for this instance (1 when no DP is needed).
///
/// With `Q` this value and `n = items.len()`, [`solve_dp`] saves at least as much runtime
/// as the optimum under the limit `max_memory - n·(Q - 1)`; it is exact when `Q` divides
/// every contested item's memory (in particular when `Q == 1`).
pub fn dp_quantum(items: &[KnapsackItem], max_memory: u64, buckets: usize) -> u64 {
    match prepare(items, max_memory) {
        Ok(p) if !p.contested.is_empty() => {
            quantization(items, &p.contested, max_memory, buckets.max(1)).0
        }
        _ => 1,
    }
}

/// Memory unit and capacity in units: `g·⌈(limit/g)/buckets⌉` where `g` is the gcd of
/// the contested memories, and `⌊limit/unit⌋ <= buckets`.
fn quantization(
    items: &[KnapsackItem],
    contested: &[usize],
    max_memory: u64,
    buckets: usize,
) -> (u64, u64) {
    let g = contested
        .iter()
        .fold(0u64, |acc, &i| gcd(acc, items[i].memory))
        .max(1);
    let scaled = max_memory / g;
    let buckets = buckets as u64;
    let per_unit = if scaled <= buckets {
        1
    } else {
        scaled.div_ceil(buckets)
    };
    // g·per_unit <= g·scaled <= max_memory (per_unit <= scaled as buckets >= 1).
    let unit = g.saturating_mul(per_unit);
    (unit, max_memory / unit)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Dynamic programming over memory quantized to at most `buckets` units; never exceeds
/// `max_memory`, exact when unquantized (see the module docs for the bound).
pub fn solve_dp(
    items: &[KnapsackItem],
    max_memory: u64,
    buckets: usize,
) -> Result<KnapsackSolution, KnapsackError> {
    if buckets == 0 || buckets > MAX_DP_BUCKETS {
        return Err(KnapsackError::InvalidBuckets {
            buckets,
            max: MAX_DP_BUCKETS,
        });
    }
    let Prepared {
        mut saved,
        contested,
    } = prepare(items, max_memory)?;
    if contested.is_empty() {
        return Ok(finish(items, saved));
    }
    let (unit, capacity) = quantization(items, &contested, max_memory, buckets);
    // capacity <= buckets <= MAX_DP_BUCKETS, so it fits a usize.
    let capacity = usize::try_from(capacity).unwrap_or(buckets).min(buckets);
    let columns = capacity + 1;
    let cells = (contested.len() as u64).saturating_mul(columns as u64);
    if cells > MAX_DP_TABLE_BITS {
        return Err(KnapsackError::TableTooLarge {
            items: contested.len(),
            columns,
            limit: MAX_DP_TABLE_BITS,
        });
    }
    // Weights rounded up; an item heavier than the capacity can never be taken.
    let weights: Vec<usize> = contested
        .iter()
        .map(|&i| {
            usize::try_from(items[i].memory.div_ceil(unit))
                .unwrap_or(usize::MAX)
                .min(columns)
        })
        .collect();
    let words = columns.div_ceil(64);
    let mut taken = vec![0u64; contested.len() * words];
    let mut best = vec![0f64; columns];
    for (j, (&i, &w)) in contested.iter().zip(&weights).enumerate() {
        if w > capacity {
            continue;
        }
        let runtime = items[i].runtime;
        let row = &mut taken[j * words..(j + 1) * words];
        for c in (w..columns).rev() {
            let candidate = best[c - w] + runtime;
            if candidate > best[c] {
                best[c] = candidate;
                row[c / 64] |= 1 << (c % 64);
            }
        }
    }
    // The least capacity reaching the best runtime: among optimal sets, the lightest.
    let mut c = capacity;
    while c > 0 && best[c - 1] == best[capacity] {
        c -= 1;
    }
    let mut picked = Vec::new();
    for j in (0..contested.len()).rev() {
        if taken[j * words + c / 64] & (1 << (c % 64)) != 0 {
            picked.push(contested[j]);
            c -= weights[j];
        }
    }
    // Rounding can lose items that only just fit; the greedy choice and the best single
    // item cover that (and together guarantee half the optimum). Kept only if strictly
    // better, so an unquantized DP answer always stands.
    let mut picked_runtime = runtime_of(items, &picked);
    let single = contested.iter().copied().reduce(|a, b| {
        if items[b].runtime > items[a].runtime {
            b
        } else {
            a
        }
    });
    for alternative in [
        greedy_pick(items, &contested, max_memory),
        single.into_iter().collect(),
    ] {
        let runtime = runtime_of(items, &alternative);
        if runtime > picked_runtime {
            (picked, picked_runtime) = (alternative, runtime);
        }
    }
    saved.append(&mut picked);
    Ok(finish(items, saved))
}

/// Optimal solution by meet-in-the-middle; refuses more than [`EXACT_MAX_ITEMS`] contested
/// items with [`KnapsackError::TooManyItems`].
pub fn solve_exact(
    items: &[KnapsackItem],
    max_memory: u64,
) -> Result<KnapsackSolution, KnapsackError> {
    let Prepared {
        mut saved,
        contested,
    } = prepare(items, max_memory)?;
    if contested.len() > EXACT_MAX_ITEMS {
        return Err(KnapsackError::TooManyItems {
            items: contested.len(),
            limit: EXACT_MAX_ITEMS,
        });
    }
    if contested.is_empty() {
        return Ok(finish(items, saved));
    }
    let limit = u128::from(max_memory);
    let (left, right) = contested.split_at(contested.len() / 2);
    let (left_memory, left_runtime) = subset_sums(items, left);
    let (right_memory, right_runtime) = subset_sums(items, right);

    // Right subsets on the Pareto frontier: memory ascending, runtime strictly ascending,
    // each the least memory reaching its runtime.
    let mut order: Vec<u32> = (0..right_memory.len() as u32)
        .filter(|&m| right_memory[m as usize] <= limit)
        .collect();
    order.sort_unstable_by(|&a, &b| {
        let (a, b) = (a as usize, b as usize);
        right_memory[a]
            .cmp(&right_memory[b])
            .then(right_runtime[b].total_cmp(&right_runtime[a]))
            .then(a.cmp(&b))
    });
    let mut frontier: Vec<u32> = Vec::new();
    for m in order {
        let better = frontier
            .last()
            .is_none_or(|&f| right_runtime[m as usize] > right_runtime[f as usize]);
        if better {
            frontier.push(m);
        }
    }

    // The empty right subset (memory 0) is always on the frontier, so every feasible left
    // subset has a partner.
    let mut best: Option<(f64, u128, usize, usize)> = None;
    for (l, &memory) in left_memory.iter().enumerate() {
        if memory > limit {
            continue;
        }
        let room = limit - memory;
        let reachable = frontier.partition_point(|&f| right_memory[f as usize] <= room);
        let Some(&r) = reachable.checked_sub(1).and_then(|k| frontier.get(k)) else {
            continue;
        };
        let r = r as usize;
        let runtime = left_runtime[l] + right_runtime[r];
        let total = memory + right_memory[r];
        let improves = best.is_none_or(|(best_runtime, best_memory, _, _)| {
            runtime > best_runtime || (runtime == best_runtime && total < best_memory)
        });
        if improves {
            best = Some((runtime, total, l, r));
        }
    }
    if let Some((_, _, l, r)) = best {
        saved.extend(members(left, l));
        saved.extend(members(right, r));
    }
    Ok(finish(items, saved))
}

/// Memory and runtime of every subset of `part`, indexed by bit mask.
fn subset_sums(items: &[KnapsackItem], part: &[usize]) -> (Vec<u128>, Vec<f64>) {
    let count = 1usize << part.len();
    let mut memory = vec![0u128; count];
    let mut runtime = vec![0f64; count];
    for mask in 1..count {
        let low = mask.trailing_zeros() as usize;
        let rest = mask & (mask - 1);
        let item = &items[part[low]];
        memory[mask] = memory[rest] + u128::from(item.memory);
        runtime[mask] = runtime[rest] + item.runtime;
    }
    (memory, runtime)
}

fn members(part: &[usize], mask: usize) -> impl Iterator<Item = usize> + '_ {
    part.iter()
        .enumerate()
        .filter(move |(bit, _)| mask & (1 << bit) != 0)
        .map(|(_, &i)| i)
}

/// Items decided before any solver runs, and the contested rest.
struct Prepared {
    /// Saved for free: zero memory, or all contested items fit together.
    saved: Vec<usize>,
    /// Positive memory and runtime, each fitting alone, not all fitting together.
    contested: Vec<usize>,
}

fn prepare(items: &[KnapsackItem], max_memory: u64) -> Result<Prepared, KnapsackError> {
    let mut saved = Vec::new();
    let mut contested = Vec::new();
    let mut contested_memory: u128 = 0;
    for (index, item) in items.iter().enumerate() {
        if !(item.runtime.is_finite() && item.runtime >= 0.0) {
            return Err(KnapsackError::InvalidRuntime {
                index,
                runtime: item.runtime,
            });
        }
        if item.memory == 0 {
            saved.push(index);
        } else if item.runtime > 0.0 && item.memory <= max_memory {
            contested.push(index);
            contested_memory += u128::from(item.memory);
        }
    }
    if contested_memory <= u128::from(max_memory) {
        saved.append(&mut contested);
    }
    Ok(Prepared { saved, contested })
}

fn finish(items: &[KnapsackItem], saved: Vec<usize>) -> KnapsackSolution {
    let mut is_saved = vec![false; items.len()];
    for i in saved {
        is_saved[i] = true;
    }
    let mut solution = KnapsackSolution::default();
    let mut saved_memory: u128 = 0;
    for (i, item) in items.iter().enumerate() {
        if is_saved[i] {
            solution.saved.push(i);
            saved_memory += u128::from(item.memory);
        } else {
            solution.recomputed.push(i);
            solution.recomputed_runtime += item.runtime;
        }
    }
    // Every solver keeps the saved memory within the (u64) limit.
    solution.saved_memory = u64::try_from(saved_memory).unwrap_or(u64::MAX);
    solution
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(list: &[(u64, f64)]) -> Vec<KnapsackItem> {
        list.iter()
            .map(|&(memory, runtime)| KnapsackItem { memory, runtime })
            .collect()
    }

    fn all(items: &[KnapsackItem], limit: u64) -> Vec<KnapsackSolution> {
        KnapsackSolver::ALL
            .iter()
            .map(|&s| solve(s, items, limit).unwrap())
            .collect()
    }

    #[test]
    fn names_round_trip() {
        for s in KnapsackSolver::ALL {
            assert_eq!(s.to_string().parse::<KnapsackSolver>().unwrap(), s);
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.name()));
            assert_eq!(serde_json::from_str::<KnapsackSolver>(&json).unwrap(), s);
        }
        assert_eq!(
            KnapsackSolver::default(),
            KnapsackSolver::DynamicProgramming
        );
        let err = "ilp".parse::<KnapsackSolver>().unwrap_err();
        assert!(
            err.to_string().contains("unknown knapsack solver `ilp`"),
            "{err}"
        );
    }

    #[test]
    fn empty_and_zero_limit() {
        for s in all(&[], 100) {
            assert_eq!(s, KnapsackSolution::default());
        }
        let list = items(&[(10, 1.0), (0, 2.0), (5, 3.0), (0, 0.0)]);
        for s in all(&list, 0) {
            assert_eq!(s.saved, vec![1, 3]);
            assert_eq!(s.recomputed, vec![0, 2]);
            assert_eq!(s.saved_memory, 0);
            assert_eq!(s.recomputed_runtime, 4.0);
        }
    }

    #[test]
    fn everything_fits() {
        let list = items(&[(10, 1.0), (20, 2.0), (30, 0.5)]);
        for s in all(&list, 60) {
            assert_eq!(s.saved, vec![0, 1, 2]);
            assert!(s.recomputed.is_empty());
            assert_eq!(s.saved_memory, 60);
            assert_eq!(s.recomputed_runtime, 0.0);
        }
    }

    #[test]
    fn zero_runtime_and_oversized_items_are_recomputed() {
        let list = items(&[(10, 0.0), (1000, 50.0), (10, 1.0), (0, 0.0)]);
        for s in all(&list, 100) {
            assert_eq!(s.saved, vec![2, 3]);
            assert_eq!(s.recomputed, vec![0, 1]);
        }
    }

    #[test]
    fn greedy_is_suboptimal_where_dp_and_exact_are_not() {
        // Greedy takes the dense small item first and then the big one no longer fits.
        let list = items(&[(1, 2.0), (10, 10.0)]);
        let greedy = solve_greedy(&list, 10).unwrap();
        assert_eq!(greedy.saved, vec![0]);
        for s in [
            solve_dp(&list, 10, 100).unwrap(),
            solve_exact(&list, 10).unwrap(),
        ] {
            assert_eq!(s.saved, vec![1]);
            assert_eq!(s.recomputed_runtime, 2.0);
        }
    }

    #[test]
    fn ties_are_deterministic_and_prefer_less_memory() {
        let list = items(&[(5, 1.0), (5, 1.0), (5, 1.0), (3, 1.0)]);
        let greedy = solve_greedy(&list, 10).unwrap();
        // Densities 0.2, 0.2, 0.2, 0.33: item 3 first, then item 0.
        assert_eq!(greedy.saved, vec![0, 3]);
        let exact = solve_exact(&list, 10).unwrap();
        assert_eq!(exact.saved_memory, 8);
        assert_eq!(exact.recomputed_runtime, 2.0);
        let dp = solve_dp(&list, 10, 100).unwrap();
        assert_eq!(dp.saved_memory, 8);
        for _ in 0..3 {
            assert_eq!(solve_exact(&list, 10).unwrap(), exact);
            assert_eq!(solve_dp(&list, 10, 100).unwrap(), dp);
        }
    }

    #[test]
    fn invalid_runtimes_are_rejected_with_the_item() {
        for bad in [f64::NAN, -1.0, f64::INFINITY, f64::NEG_INFINITY] {
            let list = items(&[(1, 1.0), (2, bad)]);
            for solver in KnapsackSolver::ALL {
                let err = solve(solver, &list, 10).unwrap_err();
                assert!(
                    matches!(err, KnapsackError::InvalidRuntime { index: 1, .. }),
                    "{solver}: {err:?}"
                );
                assert!(err.to_string().contains("item 1"), "{err}");
            }
        }
        // -0.0 is zero.
        assert!(solve_exact(&items(&[(1, -0.0)]), 10).is_ok());
    }

    #[test]
    fn bad_buckets_and_too_many_items() {
        let list = items(&[(3, 1.0), (4, 1.0)]);
        assert!(matches!(
            solve_dp(&list, 5, 0),
            Err(KnapsackError::InvalidBuckets { buckets: 0, .. })
        ));
        assert!(solve_dp(&list, 5, MAX_DP_BUCKETS + 1).is_err());
        let many: Vec<KnapsackItem> = (0..41)
            .map(|i| KnapsackItem {
                memory: 10 + i,
                runtime: 1.0,
            })
            .collect();
        let err = solve_exact(&many, 100).unwrap_err();
        assert_eq!(
            err,
            KnapsackError::TooManyItems {
                items: 41,
                limit: EXACT_MAX_ITEMS
            }
        );
        assert!(err.to_string().contains("at most 40"), "{err}");
        // Trivial items do not count against the limit.
        let mut trivial = many.clone();
        trivial.iter_mut().for_each(|i| i.runtime = 0.0);
        assert!(solve_exact(&trivial, 100).is_ok());
        assert!(solve_exact(&many, u64::MAX).is_ok());
    }

    #[test]
    fn huge_values_do_not_overflow() {
        let big = u64::MAX - 1;
        let list = items(&[(big, 3.0), (big, 2.0), (u64::MAX, 1.0), (1, 1.0), (2, 0.5)]);
        for limit in [u64::MAX, big, big / 2, 3] {
            for s in all(&list, limit) {
                let used: u128 = s.saved.iter().map(|&i| u128::from(list[i].memory)).sum();
                assert!(used <= u128::from(limit), "{s:?}");
                assert_eq!(u128::from(s.saved_memory), used);
            }
        }
        // (u64::MAX - 1) + 1 fills the limit exactly.
        let exact = solve_exact(&list, u64::MAX).unwrap();
        assert_eq!(exact.saved, vec![0, 3]);
        assert_eq!(exact.saved_memory, u64::MAX);
        // The DP's unit is about u64::MAX / 10_000 bytes here, too coarse for item 0
        // (10_000 units against a capacity of 9_999); the single-item check keeps it.
        assert!(dp_quantum(&list, u64::MAX, DEFAULT_DP_BUCKETS) > u64::MAX / 10_001);
        let dp = solve_dp(&list, u64::MAX, DEFAULT_DP_BUCKETS).unwrap();
        assert_eq!(dp.saved, vec![0]);
        // Both huge items together overflow u64, with room to spare in u128.
        let pair = items(&[(u64::MAX, 1.0), (u64::MAX, 1.0)]);
        for s in all(&pair, u64::MAX) {
            assert_eq!(s.saved.len(), 1);
            assert_eq!(s.saved_memory, u64::MAX);
        }
    }

    #[test]
    fn dp_uses_the_gcd_to_stay_exact() {
        // Memories in multiples of 4096 bytes: the DP counts in pages, so it stays exact
        // while the limit is at most 10_000 pages. A 1 GiB limit is 262144 pages, so the
        // unit grows to ceil(262144 / 10_000) = 27 pages.
        let list = items(&[(4096 * 3, 3.0), (4096 * 5, 4.0), (4096 * 4, 3.5)]);
        assert_eq!(dp_quantum(&list, 4096 * 8, 10_000), 4096);
        let dp = solve_dp(&list, 4096 * 8, 10_000).unwrap();
        assert_eq!(dp, solve_exact(&list, 4096 * 8).unwrap());
        assert_eq!(dp.saved, vec![0, 1]);
        assert_eq!(dp_quantum(&list, 1 << 30, 10_000), 1);
        let q = dp_quantum(&items(&[(4096, 1.0), (1 << 30, 1.0)]), 1 << 30, 10_000);
        assert_eq!(q, 4096 * 27);
    }

    #[test]
    fn dp_never_exceeds_the_limit_when_rounding() {
        // Capacity 10 with 3 buckets: unit 4, capacity floor(10/4) = 2 units; items of
        // 5 bytes weigh 2 units, so only one fits although two would (10 bytes).
        let list = items(&[(5, 1.0), (5, 1.0), (7, 1.5)]);
        assert_eq!(dp_quantum(&list, 10, 3), 4);
        let dp = solve_dp(&list, 10, 3).unwrap();
        assert!(dp.saved_memory <= 10);
        assert_eq!(dp.saved.len(), 1);
        let exact = solve_exact(&list, 10).unwrap();
        assert_eq!(exact.saved, vec![0, 1]);
    }

    #[test]
    #[cfg_attr(debug_assertions, ignore = "timing check for optimized builds")]
    fn exact_at_forty_items() {
        let list: Vec<KnapsackItem> = (0..EXACT_MAX_ITEMS as u64)
            .map(|i| KnapsackItem {
                memory: 1_000_000 + (i * 7_919_993) % 9_999_991,
                runtime: ((i * 104_729) % 8_999) as f64 + 1.0,
            })
            .collect();
        let limit = list.iter().map(|i| i.memory).sum::<u64>() / 2;
        let start = std::time::Instant::now();
        let exact = solve_exact(&list, limit).unwrap();
        let elapsed = start.elapsed();
        assert!(exact.saved_memory <= limit);
        let dp = solve_dp(&list, limit, DEFAULT_DP_BUCKETS).unwrap();
        assert!(dp.recomputed_runtime >= exact.recomputed_runtime - 1e-9);
        eprintln!("exact solver, {EXACT_MAX_ITEMS} items: {elapsed:?}");
    }

    #[test]
    fn exact_at_the_limit_is_fast_enough() {
        // 30 contested items (2^15 subsets per half) stay quick even in debug builds.
        let list: Vec<KnapsackItem> = (0..30u64)
            .map(|i| KnapsackItem {
                memory: 1 + (i * 7919) % 97,
                runtime: ((i * 104_729) % 89) as f64 + 1.0,
            })
            .collect();
        let exact = solve_exact(&list, 700).unwrap();
        let dp = solve_dp(&list, 700, 10_000).unwrap();
        assert!(exact.saved_memory <= 700);
        assert!((exact.recomputed_runtime - dp.recomputed_runtime).abs() < 1e-9);
        let greedy = solve_greedy(&list, 700).unwrap();
        assert!(greedy.recomputed_runtime >= exact.recomputed_runtime - 1e-9);
    }
}

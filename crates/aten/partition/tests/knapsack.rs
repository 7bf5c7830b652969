//! Property tests of the knapsack solvers against brute force.

use graphbug_partition::knapsack::{
    dp_quantum, solve, solve_dp, solve_exact, solve_greedy, KnapsackItem, KnapsackSolution,
    KnapsackSolver,
};
use proptest::prelude::*;

/// The best runtime that can be saved within `limit`, over all subsets.
fn brute_force(items: &[KnapsackItem], limit: u64) -> f64 {
    let mut best = 0.0f64;
    for mask in 0u32..(1 << items.len()) {
        let (mut memory, mut runtime) = (0u128, 0.0);
        for (i, item) in items.iter().enumerate() {
            if mask & (1 << i) != 0 {
                memory += u128::from(item.memory);
                runtime += item.runtime;
            }
        }
        if memory <= u128::from(limit) {
            best = best.max(runtime);
        }
    }
    best
}

fn saved_runtime(items: &[KnapsackItem], s: &KnapsackSolution) -> f64 {
    s.saved.iter().map(|&i| items[i].runtime).sum()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The solution is a well-formed split of the items within the limit.
fn check_valid(items: &[KnapsackItem], limit: u64, s: &KnapsackSolution) {
    let mut all: Vec<usize> = s.saved.iter().chain(&s.recomputed).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..items.len()).collect::<Vec<_>>(), "{s:?}");
    assert!(s.saved.windows(2).all(|w| w[0] < w[1]), "{s:?}");
    assert!(s.recomputed.windows(2).all(|w| w[0] < w[1]), "{s:?}");
    let used: u128 = s.saved.iter().map(|&i| u128::from(items[i].memory)).sum();
    assert!(used <= u128::from(limit), "{used} > {limit}: {s:?}");
    assert_eq!(u128::from(s.saved_memory), used);
    let recomputed: f64 = s.recomputed.iter().map(|&i| items[i].runtime).sum();
    assert!(close(recomputed, s.recomputed_runtime), "{s:?}");
    // Zero-memory items are always saved.
    for (i, item) in items.iter().enumerate() {
        if item.memory == 0 {
            assert!(s.saved.contains(&i), "free item {i} not saved: {s:?}");
        }
    }
}

fn item(max_memory: u64) -> impl Strategy<Value = KnapsackItem> {
    (
        prop_oneof![1 => Just(0u64), 9 => 1..=max_memory],
        prop_oneof![1 => Just(0.0f64), 9 => 0.0f64..100.0],
    )
        .prop_map(|(memory, runtime)| KnapsackItem { memory, runtime })
}

fn instance(max_memory: u64, max_items: usize) -> impl Strategy<Value = (Vec<KnapsackItem>, u64)> {
    (
        prop::collection::vec(item(max_memory), 0..=max_items),
        0..=max_memory * 4,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn exact_matches_brute_force((items, limit) in instance(1000, 12)) {
        let s = solve_exact(&items, limit).unwrap();
        check_valid(&items, limit, &s);
        let best = brute_force(&items, limit);
        prop_assert!(close(saved_runtime(&items, &s), best), "{} vs {best}: {s:?}", saved_runtime(&items, &s));
    }

    #[test]
    fn greedy_and_dp_stay_within_the_limit((items, limit) in instance(1_000_000, 16), buckets in 1usize..200) {
        for s in [
            solve_greedy(&items, limit).unwrap(),
            solve_dp(&items, limit, buckets).unwrap(),
            solve(KnapsackSolver::DynamicProgramming, &items, limit).unwrap(),
        ] {
            check_valid(&items, limit, &s);
        }
    }

    #[test]
    fn dp_equals_exact_when_unquantized((items, limit) in instance(60, 12)) {
        // limit <= 240 <= buckets: one unit per byte (or per gcd).
        prop_assert!(dp_quantum(&items, limit, 10_000) <= limit.max(1));
        let dp = solve_dp(&items, limit, 10_000).unwrap();
        let exact = solve_exact(&items, limit).unwrap();
        check_valid(&items, limit, &dp);
        prop_assert!(close(dp.recomputed_runtime, exact.recomputed_runtime), "{dp:?} vs {exact:?}");
        // Also in pages: the gcd keeps large aligned memories exact.
        let pages: Vec<KnapsackItem> = items
            .iter()
            .map(|i| KnapsackItem { memory: i.memory * 4096, runtime: i.runtime })
            .collect();
        let dp_pages = solve_dp(&pages, limit * 4096, 10_000).unwrap();
        prop_assert!(close(dp_pages.recomputed_runtime, exact.recomputed_runtime), "{dp_pages:?} vs {exact:?}");
    }

    #[test]
    fn dp_quantization_loss_is_bounded((items, limit) in instance(10_000, 10), buckets in 1usize..50) {
        // Documented bound: the DP saves at least the optimum for limit - n·(Q - 1).
        let dp = solve_dp(&items, limit, buckets).unwrap();
        check_valid(&items, limit, &dp);
        let q = dp_quantum(&items, limit, buckets);
        prop_assert!(q >= 1);
        let slack = (items.len() as u64).saturating_mul(q - 1);
        let tighter = limit.saturating_sub(slack);
        let floor = brute_force(&items, tighter);
        let got = saved_runtime(&items, &dp);
        prop_assert!(got >= floor - 1e-9 * floor.max(1.0), "dp {got} < optimum {floor} at {tighter} (q={q})");
        prop_assert!(got <= brute_force(&items, limit) + 1e-9 * got.max(1.0));
    }

    #[test]
    fn greedy_and_dp_never_beat_exact((items, limit) in instance(1000, 12)) {
        let exact = solve_exact(&items, limit).unwrap();
        for solver in [KnapsackSolver::Greedy, KnapsackSolver::DynamicProgramming] {
            let s = solve(solver, &items, limit).unwrap();
            prop_assert!(s.recomputed_runtime >= exact.recomputed_runtime - 1e-9 * exact.recomputed_runtime.max(1.0));
        }
    }

    #[test]
    fn dp_saves_at_least_greedy_and_half_the_optimum((items, limit) in instance(100_000, 12), buckets in 1usize..20) {
        let dp = solve_dp(&items, limit, buckets).unwrap();
        let greedy = solve_greedy(&items, limit).unwrap();
        let best = brute_force(&items, limit);
        let got = saved_runtime(&items, &dp);
        prop_assert!(got >= saved_runtime(&items, &greedy) - 1e-9 * got.max(1.0));
        prop_assert!(got >= best / 2.0 - 1e-9 * best.max(1.0), "{got} < {best} / 2");
    }

    #[test]
    fn huge_memories_never_overflow(
        memories in prop::collection::vec(prop_oneof![Just(u64::MAX), Just(u64::MAX - 1), Just(u64::MAX / 2), Just(u64::MAX / 3 + 7), 1u64..=u64::MAX], 0..8),
        runtimes in prop::collection::vec(0.0f64..1e6, 8),
        limit in prop_oneof![Just(u64::MAX), Just(u64::MAX - 1), Just(u64::MAX / 2), any::<u64>()],
    ) {
        let items: Vec<KnapsackItem> = memories
            .iter()
            .zip(&runtimes)
            .map(|(&memory, &runtime)| KnapsackItem { memory, runtime })
            .collect();
        let best = brute_force(&items, limit);
        for solver in KnapsackSolver::ALL {
            let s = solve(solver, &items, limit).unwrap();
            check_valid(&items, limit, &s);
            if solver == KnapsackSolver::Exact {
                prop_assert!(close(saved_runtime(&items, &s), best));
            }
        }
    }

    #[test]
    fn deterministic((items, limit) in instance(1000, 14)) {
        for solver in KnapsackSolver::ALL {
            let a = solve(solver, &items, limit).unwrap();
            let b = solve(solver, &items, limit).unwrap();
            prop_assert_eq!(a, b);
        }
    }
}

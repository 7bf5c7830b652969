//! Benchmark figures against their targets: each is printed as it is measured, and every
//! benchmark runs to the end before [`Targets::finish`] says whether any target was missed
//! (`cargo xtask bench` gathers the `target:` lines of all benchmarks into one summary).

/// The prefix of the line each figure is printed with, for `cargo xtask bench`.
pub const LINE_PREFIX: &str = "target: ";

/// The figures one benchmark measured against its targets.
#[derive(Debug)]
pub struct Targets {
    bench: &'static str,
    missed: Vec<String>,
}

impl Targets {
    /// No figures yet for benchmark `bench`.
    pub fn new(bench: &'static str) -> Targets {
        Targets {
            bench,
            missed: Vec::new(),
        }
    }

    /// Records `value` (in `unit`) against a target it must not exceed; prints the line.
    pub fn at_most(&mut self, what: &str, value: f64, target: f64, unit: &str) -> bool {
        let met = value <= target;
        let line = format!(
            "{LINE_PREFIX}{}: {what}: {value:.3}{unit} (target <= {target}{unit}): {}",
            self.bench,
            if met { "met" } else { "MISSED" }
        );
        println!("{line}");
        if !met {
            self.missed.push(line);
        }
        met
    }

    /// Records a ratio measured in interleaved rounds (see [`Ratio`]) against a target its
    /// median must not exceed; the line carries the spread. Prints the line.
    pub fn ratio_at_most(&mut self, what: &str, ratio: &Ratio, target: f64) -> bool {
        self.at_most(
            &format!(
                "{what} [median of {} interleaved rounds; from {:.3}x to {:.3}x]",
                ratio.rounds, ratio.lo, ratio.hi
            ),
            ratio.median,
            target,
            "x",
        )
    }

    /// The missed targets' lines.
    pub fn missed(&self) -> &[String] {
        &self.missed
    }

    /// Ends the benchmark: exit code 1 when a target was missed (named on stderr).
    pub fn finish(self) {
        if self.missed.is_empty() {
            return;
        }
        for line in &self.missed {
            eprintln!("{line}");
        }
        std::process::exit(1);
    }
}

/// The median wall time of `f` over `runs` runs, after `warm_up` runs that are not timed.
pub fn median_time(runs: usize, warm_up: usize, mut f: impl FnMut()) -> std::time::Duration {
    for _ in 0..warm_up {
        f();
    }
    let mut times: Vec<std::time::Duration> = (0..runs.max(1))
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// A ratio of two timings measured in interleaved rounds: each round times both sides,
/// alternating which goes first, so both meet the same machine (a busy core, a cold cache
/// hits both rounds alike); the median of the rounds' ratios and the least and greatest.
/// One side timed in one stretch and the other later can move by 1.5x between runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ratio {
    /// The median of the rounds' ratios.
    pub median: f64,
    /// The least round's ratio.
    pub lo: f64,
    /// The greatest round's ratio.
    pub hi: f64,
    /// How many rounds.
    pub rounds: usize,
}

impl Ratio {
    /// `a() / b()` over `rounds` rounds (each timing returns seconds, or any positive
    /// measure); odd rounds time `a` first, even ones `b`.
    pub fn measure(rounds: usize, mut a: impl FnMut() -> f64, mut b: impl FnMut() -> f64) -> Ratio {
        let mut ratios: Vec<f64> = (0..rounds.max(1))
            .map(|k| {
                let (x, y) = if k % 2 == 0 {
                    let x = a();
                    (x, b())
                } else {
                    let y = b();
                    (a(), y)
                };
                x / y
            })
            .collect();
        Ratio::of(&mut ratios)
    }

    /// The median and spread of ratios already measured (sorted in place).
    pub fn of(ratios: &mut [f64]) -> Ratio {
        ratios.sort_by(f64::total_cmp);
        Ratio {
            median: ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN),
            lo: ratios.first().copied().unwrap_or(f64::NAN),
            hi: ratios.last().copied().unwrap_or(f64::NAN),
            rounds: ratios.len(),
        }
    }
}

impl std::fmt::Display for Ratio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.3}x (from {:.3}x to {:.3}x over {} interleaved rounds)",
            self.median, self.lo, self.hi, self.rounds
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_alternate_their_sides_and_report_the_median_and_spread() {
        let order = std::cell::RefCell::new(String::new());
        let mut a_times = [2.0, 4.0, 3.0].into_iter();
        let r = Ratio::measure(
            3,
            || {
                order.borrow_mut().push('a');
                a_times.next().unwrap()
            },
            || {
                order.borrow_mut().push('b');
                2.0
            },
        );
        assert_eq!(*order.borrow(), "abbaab");
        assert_eq!((r.median, r.lo, r.hi, r.rounds), (1.5, 1.0, 2.0, 3));
        let mut t = Targets::new("demo");
        assert!(t.ratio_at_most("r", &r, 1.5));
        assert!(!t.ratio_at_most("r", &r, 1.4));
        assert_eq!(
            t.missed(),
            ["target: demo: r [median of 3 interleaved rounds; from 1.000x to 2.000x]: 1.500x (target <= 1.4x): MISSED"]
        );
    }

    #[test]
    fn a_missed_target_is_kept_and_a_met_one_is_not() {
        let mut t = Targets::new("demo");
        assert!(t.at_most("ratio", 0.4, 0.5, "x"));
        assert!(!t.at_most("time", 12.0, 10.0, " ms"));
        assert_eq!(
            t.missed(),
            ["target: demo: time: 12.000 ms (target <= 10 ms): MISSED"]
        );
    }
}

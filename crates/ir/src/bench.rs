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

#[cfg(test)]
mod tests {
    use super::*;

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

//! Time limits: every wait on a backend is bounded, by the user's `--timeout` or by a
//! default derived from how long the original graph takes.

use std::time::Duration;

/// The longest `--timeout` accepted (a week): beyond it a "limit" is a typo.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);
/// The original's first backend run gets at least this long by default...
pub const FIRST_FLOOR: Duration = Duration::from_secs(30);
/// ...or this many times the eager run, if more.
pub const FIRST_FACTOR: u32 = 50;
/// Later runs (candidates) get at least this long by default...
pub const LATER_FLOOR: Duration = Duration::from_secs(10);
/// ...or this many times the original's own backend run, if more.
pub const LATER_FACTOR: u32 = 10;
/// A command with no original run to derive from (`run`, `explain`) gets this long.
pub const RUN_DEFAULT: Duration = Duration::from_secs(300);

/// Parses a `--timeout` value in seconds: finite, positive and at most a week.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!(
            "`{text}`: a timeout must be a positive, finite number of seconds"
        ));
    }
    if secs > MAX_TIMEOUT.as_secs_f64() {
        return Err(format!(
            "`{text}` seconds is more than a week ({} s); give a real limit",
            MAX_TIMEOUT.as_secs()
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// How long a backend may take: the user's fixed limit, or one derived from the eager
/// run of the original graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeLimit {
    /// `--timeout`: the same for every run.
    Fixed(Duration),
    /// The default: [`TimeLimit::first`] for the original's first run, then
    /// [`TimeLimit::later`] from what that run took.
    Derived {
        /// How long graphbug's eager run of the original graph took.
        eager: Duration,
    },
}

impl TimeLimit {
    /// The user's limit if given, else one derived from `eager`.
    pub fn new(user: Option<Duration>, eager: Duration) -> TimeLimit {
        match user {
            Some(d) => TimeLimit::Fixed(d),
            None => TimeLimit::Derived { eager },
        }
    }

    /// The limit for the first run of the original graph.
    pub fn first(&self) -> Duration {
        match *self {
            TimeLimit::Fixed(d) => d,
            TimeLimit::Derived { eager } => FIRST_FLOOR.max(eager.saturating_mul(FIRST_FACTOR)),
        }
    }

    /// The limit for later runs, given what the original's first run took (`None` when it
    /// hit its limit: it hangs, and runs are bounded as if it had taken the eager time).
    pub fn later(&self, first_took: Option<Duration>) -> Duration {
        match *self {
            TimeLimit::Fixed(d) => d,
            TimeLimit::Derived { eager } => {
                LATER_FLOOR.max(first_took.unwrap_or(eager).saturating_mul(LATER_FACTOR))
            }
        }
    }

    /// A line for logs: where the limit comes from.
    pub fn describe(&self) -> String {
        self.describe_from("the eager run")
    }

    /// [`TimeLimit::describe`], the limit derived from `run` (`the eager run`, or for XLA
    /// programs the reference run).
    pub fn describe_from(&self, run: &str) -> String {
        match *self {
            TimeLimit::Fixed(d) => format!("each run may take {:.3} s (--timeout)", d.as_secs_f64()),
            TimeLimit::Derived { eager } => format!(
                "the original's run may take {:.0} s ({FIRST_FACTOR}x {run} of {:.3} s, at least {} s), later runs {LATER_FACTOR}x what it took (at least {} s); --timeout S sets one limit",
                self.first().as_secs_f64(),
                eager.as_secs_f64(),
                FIRST_FLOOR.as_secs(),
                LATER_FLOOR.as_secs()
            ),
        }
    }
}

/// What the original's first run took, which sets the limits of the runs after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FirstTook(Option<Option<Duration>>);

impl FirstTook {
    /// The limit the next run gets: [`TimeLimit::first`] until a run has ended, then
    /// [`TimeLimit::later`] of what that first run took.
    pub fn next_limit(&self, limit: &TimeLimit) -> Duration {
        match self.0 {
            None => limit.first(),
            Some(took) => limit.later(took),
        }
    }

    /// Records a run that took `took` (`None`: it hit its limit); only the first counts.
    pub fn record(&mut self, took: Option<Duration>) {
        self.0.get_or_insert(took);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_or_say_why_not() {
        assert_eq!(parse_timeout("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_timeout("0.25").unwrap(), Duration::from_millis(250));
        for bad in ["0", "-1", "nan", "inf", "1e300", "x", ""] {
            let e = parse_timeout(bad).unwrap_err();
            assert!(e.contains(&format!("`{bad}`")), "{bad}: {e}");
        }
    }

    #[test]
    fn derived_limits() {
        let fast = TimeLimit::new(None, Duration::from_millis(2));
        assert_eq!(fast.first(), FIRST_FLOOR);
        assert_eq!(fast.later(Some(Duration::from_millis(5))), LATER_FLOOR);
        assert_eq!(fast.later(None), LATER_FLOOR);
        let slow = TimeLimit::new(None, Duration::from_secs(2));
        assert_eq!(slow.first(), Duration::from_secs(100));
        assert_eq!(
            slow.later(Some(Duration::from_secs(3))),
            Duration::from_secs(30)
        );
        let fixed = TimeLimit::new(Some(Duration::from_secs(1)), Duration::from_secs(9));
        assert_eq!(
            (fixed.first(), fixed.later(None)),
            (Duration::from_secs(1), Duration::from_secs(1))
        );
        assert!(fast.describe().contains("--timeout"));
        // The first run gets the first limit; later ones follow what it took.
        let mut took = FirstTook::default();
        assert_eq!(took.next_limit(&slow), Duration::from_secs(100));
        took.record(Some(Duration::from_secs(3)));
        took.record(None);
        assert_eq!(took.next_limit(&slow), Duration::from_secs(30));
        let mut hung = FirstTook::default();
        hung.record(None);
        assert_eq!(hung.next_limit(&slow), Duration::from_secs(20));
    }
}

//! Progress displays of long work (`graphbug minify` and `bisect`, `cargo xtask
//! conformance` and `bench`): an indicatif spinner or bar on standard error that appears
//! only once the work has run for [`DELAY`] (quick runs print nothing more) and only when
//! standard error is a terminal; piped or redirected, it writes nothing at all, no escape
//! codes either. Lines printed while it shows go through it ([`Progress::println`],
//! [`eprint_line`]), so they do not tear it.
//!
//! `GRAPHBUG_PROGRESS_DELAY` (seconds) changes the delay: `0` shows a display at once (on
//! a terminal), `off` never shows one.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long work runs before its display appears.
pub const DELAY: Duration = Duration::from_secs(2);

/// The variable that overrides [`DELAY`] (seconds, or `off`).
pub const DELAY_ENV: &str = "GRAPHBUG_PROGRESS_DELAY";

/// How often a shown display redraws by itself (its spinner and elapsed time move on while
/// nothing else changes).
const TICK: Duration = Duration::from_millis(120);

/// A spinner: `⠋ minify [12s] <message>` (the message cut to the terminal's width).
const SPINNER: &str = "{spinner} {prefix} [{elapsed}] {wide_msg}";

/// A bar: `conformance [#####-----] 12/40 [12s, eta 30s] <message>`.
const BAR: &str = "{prefix} [{bar:25}] {pos}/{len} [{elapsed}, eta {eta}] {wide_msg}";

/// Whether and when a display appears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    /// Never: standard error is no terminal, or the displays are off.
    Never,
    /// Once the work has run this long.
    After(Duration),
}

/// When a display appears, given whether standard error is a `terminal` (one that draws:
/// not `TERM=dumb`) and the value of [`DELAY_ENV`] (`delay`): never without a terminal or
/// with `off`; else after `delay` seconds, [`DELAY`] when it is unset or no number.
pub fn when_shown(terminal: bool, delay: Option<&str>) -> Shown {
    if !terminal {
        return Shown::Never;
    }
    match delay.map(str::trim) {
        Some("off") => Shown::Never,
        Some(secs) => match secs.parse::<f64>() {
            Ok(s) if s.is_finite() && s >= 0.0 => Shown::After(Duration::from_secs_f64(s)),
            _ => Shown::After(DELAY),
        },
        None => Shown::After(DELAY),
    }
}

/// When this process's displays appear: from standard error and [`DELAY_ENV`].
fn shown_here() -> Shown {
    let terminal =
        std::io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb");
    when_shown(terminal, std::env::var(DELAY_ENV).ok().as_deref())
}

/// Whether a display has appeared, and whether its work is done.
#[derive(Default)]
struct State {
    shown: bool,
    done: bool,
}

/// What a display and the thread that shows it share.
struct Inner {
    bar: ProgressBar,
    state: Mutex<State>,
    changed: Condvar,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Prints `line` on standard error, above the display while it shows.
    fn println(&self, line: &str) {
        let state = self.state();
        if state.shown {
            self.bar.println(line);
        } else {
            eprintln!("{line}");
        }
    }
}

/// The displays of this process that may show, newest last ([`eprint_line`] prints
/// through the newest that shows).
static LIVE: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

fn live() -> MutexGuard<'static, Vec<Weak<Inner>>> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Prints `line` on standard error, through the display that shows, if one does (so it
/// does not tear it), for code that has no [`Progress`] at hand.
pub fn eprint_line(line: impl AsRef<str>) {
    let line = line.as_ref();
    let newest = live().iter().rev().find_map(Weak::upgrade);
    match newest {
        Some(inner) => inner.println(line),
        None => eprintln!("{line}"),
    }
}

/// A progress display (see the module's documentation). Its updates cost next to nothing
/// while it is hidden; it clears itself when finished or dropped.
pub struct Progress {
    inner: Arc<Inner>,
    /// The thread that shows the display after the delay, until it is finished.
    waiter: Mutex<Option<JoinHandle<()>>>,
}

impl Progress {
    /// A spinner, `<prefix> [elapsed] <message>`, for work of unknown length.
    pub fn spinner(prefix: &str) -> Progress {
        Progress::start(
            SPINNER,
            None,
            prefix,
            shown_here(),
            ProgressDrawTarget::stderr,
        )
    }

    /// A bar of `len` steps, `<prefix> [bar] <done>/<len> [elapsed, eta] <message>`.
    pub fn bar(prefix: &str, len: u64) -> Progress {
        Progress::start(
            BAR,
            Some(len),
            prefix,
            shown_here(),
            ProgressDrawTarget::stderr,
        )
    }

    /// A display that never shows (its lines go straight to standard error).
    pub fn hidden() -> Progress {
        Progress::start(SPINNER, None, "", Shown::Never, ProgressDrawTarget::hidden)
    }

    /// A display of `template` that draws on `target` once `shown` says so.
    fn start(
        template: &'static str,
        len: Option<u64>,
        prefix: &str,
        shown: Shown,
        target: fn() -> ProgressDrawTarget,
    ) -> Progress {
        let style = ProgressStyle::with_template(template)
            .expect("invariant: the progress templates are valid");
        let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::hidden())
            .with_style(style)
            .with_prefix(prefix.to_string());
        let inner = Arc::new(Inner {
            bar,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let Shown::After(delay) = shown else {
            return Progress {
                inner,
                waiter: Mutex::new(None),
            };
        };
        live().push(Arc::downgrade(&inner));
        let shared = inner.clone();
        let waiter = std::thread::spawn(move || {
            let state = shared.state();
            let (mut state, _) = shared
                .changed
                .wait_timeout_while(state, delay, |s| !s.done)
                .unwrap_or_else(PoisonError::into_inner);
            if !state.done {
                shared.bar.set_draw_target(target());
                shared.bar.enable_steady_tick(TICK);
                state.shown = true;
            }
        });
        Progress {
            inner,
            waiter: Mutex::new(Some(waiter)),
        }
    }

    /// Whether the display is drawn now.
    pub fn is_shown(&self) -> bool {
        self.inner.state().shown
    }

    /// Whether the display will show (standard error is a terminal and displays are on):
    /// where it will, lines it says better need not be printed too.
    pub fn on_terminal(&self) -> bool {
        self.waiter().is_some() || self.is_shown()
    }

    /// Sets the message.
    pub fn set_message(&self, message: impl Into<Cow<'static, str>>) {
        self.inner.bar.set_message(message);
    }

    /// Moves a bar on by `delta` steps.
    pub fn inc(&self, delta: u64) {
        self.inner.bar.inc(delta);
    }

    /// Sets a bar's steps done.
    pub fn set_position(&self, position: u64) {
        self.inner.bar.set_position(position);
    }

    /// Sets a bar's length.
    pub fn set_length(&self, len: u64) {
        self.inner.bar.set_length(len);
    }

    /// A bar's steps done.
    pub fn position(&self) -> u64 {
        self.inner.bar.position()
    }

    /// Prints `line` on standard error, above the display while it shows.
    pub fn println(&self, line: impl AsRef<str>) {
        self.inner.println(line.as_ref());
    }

    /// Runs `f` (which prints, say to standard output) with the display cleared while it
    /// shows. `f` must not print through this display.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        if self.is_shown() {
            self.inner.bar.suspend(f)
        } else {
            f()
        }
    }

    fn waiter(&self) -> MutexGuard<'_, Option<JoinHandle<()>>> {
        self.waiter.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the display: it never shows from now on, and is cleared if it did.
    pub fn finish(&self) {
        {
            let mut state = self.inner.state();
            state.done = true;
            self.inner.changed.notify_all();
        }
        let waiter = self.waiter().take();
        if let Some(waiter) = waiter {
            let _ = waiter.join();
            live().retain(|w| w.upgrade().is_some_and(|i| !Arc::ptr_eq(&i, &self.inner)));
        }
        let mut state = self.inner.state();
        if !self.inner.bar.is_finished() {
            self.inner.bar.finish_and_clear();
        }
        state.shown = false;
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn shown_only_on_a_terminal_after_the_delay() {
        assert_eq!(when_shown(false, None), Shown::Never);
        assert_eq!(when_shown(false, Some("0")), Shown::Never);
        assert_eq!(when_shown(true, None), Shown::After(DELAY));
        assert_eq!(when_shown(true, Some("0")), Shown::After(Duration::ZERO));
        assert_eq!(
            when_shown(true, Some(" 0.5 ")),
            Shown::After(Duration::from_millis(500))
        );
        assert_eq!(when_shown(true, Some("off")), Shown::Never);
        for bad in ["", "soon", "-1", "nan", "inf"] {
            assert_eq!(when_shown(true, Some(bad)), Shown::After(DELAY), "{bad}");
        }
    }

    fn test_display(shown: Shown) -> Progress {
        Progress::start(SPINNER, None, "test", shown, ProgressDrawTarget::hidden)
    }

    /// Waits (at most 10 s) until `p` shows.
    fn until_shown(p: &Progress) -> bool {
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until {
            if p.is_shown() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn a_display_appears_after_its_delay_and_not_before() {
        let created = Instant::now();
        let p = test_display(Shown::After(Duration::from_millis(300)));
        assert!(p.on_terminal());
        // Shown already only where the delay has passed (a loaded machine may stall).
        assert!(
            !p.is_shown() || created.elapsed() >= Duration::from_millis(300),
            "shown before the delay"
        );
        assert!(until_shown(&p), "never shown");
        assert!(created.elapsed() >= Duration::from_millis(300));
        assert!(p.on_terminal());
    }

    #[test]
    fn a_display_never_shows_without_a_terminal_or_once_finished() {
        let p = test_display(Shown::Never);
        std::thread::sleep(Duration::from_millis(50));
        assert!(!p.is_shown());
        assert!(!p.on_terminal());
        // Finished before its delay: never shown, and finishing does not wait the delay.
        let p = test_display(Shown::After(Duration::from_secs(60)));
        let started = Instant::now();
        p.finish();
        assert!(started.elapsed() < Duration::from_secs(30));
        assert!(!p.is_shown());
        // A shown display's lines go through it; a finished one's straight to stderr.
        let p = test_display(Shown::After(Duration::ZERO));
        assert!(until_shown(&p));
        p.println("a line through the display");
        eprint_line("a line through the newest display");
        p.finish();
        assert!(!live()
            .iter()
            .any(|w| w.upgrade().is_some_and(|i| Arc::ptr_eq(&i, &p.inner))));
        p.println("a line after it");
    }

    #[test]
    fn a_bar_counts_its_steps() {
        let p = Progress::start(
            BAR,
            Some(4),
            "test",
            Shown::Never,
            ProgressDrawTarget::hidden,
        );
        p.inc(1);
        p.inc(2);
        assert_eq!(p.position(), 3);
        p.set_length(10);
        p.set_position(7);
        assert_eq!(p.position(), 7);
        assert_eq!(p.suspend(|| 5), 5);
    }
}

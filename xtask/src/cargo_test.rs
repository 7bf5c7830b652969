//! What `cargo xtask test` reads of `cargo test`: its output passes through unchanged, as
//! it comes, while [`Log`] collects the failing tests and the failing targets, so that the
//! end of a long run can list every failure.
//!
//! `cargo test --no-fail-fast` runs one test binary after another. Each binary's results
//! are on standard output (`running N tests`, `test NAME ... FAILED`, the `failures:` list
//! of names, `test result: FAILED. ...`); cargo's own lines are on standard error: `Running
//! tests/x.rs (target/debug/deps/x-HASH)` before a binary, `error: test failed, to rerun
//! pass `-p graphbug --test x`` after one that failed (with `Caused by:` / `process didn't
//! exit successfully: ... (signal: 6, SIGABRT: ...)` when it did not end as a test failure
//! does, with exit status 101), and at the end `error: N targets failed:` with one line per
//! target.
//!
//! A failing test is given to the target of the next `error: test failed` line: a binary's
//! results are all written before it exits, and cargo names the target only after that.
//! One thread reads both streams, in causal order (see [`tee_to`]); should standard output
//! still run ahead, the binaries' failing tests wait in order (each closed by its `test
//! result: FAILED` line) for the targets cargo names. A passing binary's `test result: ok`
//! drops any `... FAILED` line its tests printed themselves.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

/// A target that failed, as cargo names it for a rerun (`-p graphbug --test minify_cli`),
/// with its failing tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FailedTarget {
    /// What to pass `cargo test` to run it again.
    pub target: String,
    /// The binary, as cargo's `Running` line named it (`tests/minify_cli.rs`,
    /// `unittests src/lib.rs`, `Doc-tests graphbug_ir`), when seen.
    pub binary: Option<String>,
    /// Why the binary did not exit as a failing test does (`signal: 6, SIGABRT: ...`):
    /// cargo's `process didn't exit successfully` line, when it gave one.
    pub crashed: Option<String>,
    /// Its tests that failed.
    pub tests: Vec<String>,
}

/// The failures of one `cargo test` run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Failures {
    /// The failing targets, in the order they ran.
    pub targets: Vec<FailedTarget>,
    /// Failing tests no target line followed (the output ended first).
    pub unattributed: Vec<String>,
}

impl Failures {
    /// Whether nothing failed.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty() && self.unattributed.is_empty()
    }

    /// How many tests failed.
    pub fn test_count(&self) -> usize {
        self.targets.iter().map(|t| t.tests.len()).sum::<usize>() + self.unattributed.len()
    }

    /// One line per failing test, and one per target that failed with no test named (a
    /// crashed binary): `-p graphbug --test minify_cli: name`.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for t in &self.targets {
            for test in &t.tests {
                lines.push(format!("{}: {test}", t.target));
            }
            match (&t.crashed, t.tests.is_empty()) {
                (Some(why), _) => lines.push(format!(
                    "{}: the test binary{} crashed ({why})",
                    t.target,
                    t.binary
                        .as_ref()
                        .map(|b| format!(" ({b})"))
                        .unwrap_or_default()
                )),
                (None, true) => lines.push(format!("{}: failed, no test named", t.target)),
                (None, false) => {}
            }
        }
        for test in &self.unattributed {
            lines.push(format!("(target unknown): {test}"));
        }
        lines
    }
}

/// Reads `cargo test`'s output, line by line from either stream, in the order they come.
#[derive(Debug, Default)]
pub struct Log {
    /// The latest `Running` / `Doc-tests` line's binary.
    binary: Option<String>,
    /// Failing tests of the binary that runs, not yet given to a target.
    open: Vec<String>,
    /// Failing tests of binaries whose results ended (`test result: FAILED`, or a next
    /// binary's `running` line), oldest first, not yet given to a target.
    closed: VecDeque<Vec<String>>,
    /// The previous standard-output line was `failures:`.
    after_failures_heading: bool,
    /// Within the `failures:` list of names (4-space indented lines).
    in_failure_names: bool,
    /// Within `error: N targets failed:`'s list.
    in_target_list: bool,
    /// Failing targets so far.
    targets: Vec<FailedTarget>,
    /// Tests passed and failed, by the `test result:` lines.
    passed: usize,
    failed: usize,
    /// Each binary's own time, by its `test result: ... finished in 1.23s`, in order.
    times: Vec<(String, Duration)>,
}

/// `line` without ANSI colour sequences (cargo colours its lines on a terminal) and without
/// a trailing carriage return.
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    if out.ends_with('\r') {
        out.pop();
    }
    out
}

impl Log {
    /// A new log.
    pub fn new() -> Log {
        Log::default()
    }

    /// Adds a failing test of the binary that runs, once.
    fn failed_test(&mut self, name: &str) {
        let name = name.trim();
        if !name.is_empty() && !self.open.iter().any(|p| p == name) {
            self.open.push(name.to_string());
        }
    }

    /// Reads one line of `cargo test`'s standard output (the test binaries').
    pub fn stdout_line(&mut self, line: &str) {
        let line = plain(line);
        let after_heading = std::mem::take(&mut self.after_failures_heading);
        if self.in_failure_names {
            if let Some(name) = line.strip_prefix("    ") {
                self.failed_test(name);
                return;
            }
            self.in_failure_names = false;
        }
        if after_heading && line.starts_with("    ") {
            // `failures:` then the names; the other `failures:` (of the tests' output) is
            // followed by an empty line.
            self.in_failure_names = true;
            self.failed_test(&line);
            return;
        }
        if line == "failures:" {
            self.after_failures_heading = true;
        } else if is_running_line(&line) {
            // A binary starts: what the last one left without a result line (it crashed)
            // is its.
            if !self.open.is_empty() {
                let group = std::mem::take(&mut self.open);
                self.closed.push_back(group);
            }
        } else if line.starts_with("test result: ") {
            self.count(&line);
            if let Some(time) = finished_in(&line) {
                let binary = self.binary.clone().unwrap_or_else(|| "?".to_string());
                self.times.push((binary, time));
            }
            if line.starts_with("test result: FAILED") {
                let group = std::mem::take(&mut self.open);
                self.closed.push_back(group);
            } else {
                // A passing binary: a `... FAILED` line in it was its tests' own output.
                self.open.clear();
            }
        } else if let Some(name) = line
            .strip_prefix("test ")
            .and_then(|rest| rest.strip_suffix(" ... FAILED"))
        {
            self.failed_test(name);
        }
    }

    /// Adds the counts of `test result: ok. 3 passed; 1 failed; ...`.
    fn count(&mut self, line: &str) {
        for part in line.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(what), Some(n)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(n) = n.parse::<usize>() else {
                continue;
            };
            match what {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                _ => {}
            }
        }
    }

    /// Tests passed and failed, as the binaries' `test result:` lines counted them.
    pub fn counts(&self) -> (usize, usize) {
        (self.passed, self.failed)
    }

    /// Each test binary's own time, in the order they ran, by the name cargo's `Running`
    /// line gave it (`tests/cli.rs`, `unittests src/lib.rs`, `Doc-tests graphbug_ir`).
    pub fn times(&self) -> &[(String, Duration)] {
        &self.times
    }

    /// Reads one line of `cargo test`'s standard error (cargo's).
    pub fn stderr_line(&mut self, line: &str) {
        let line = plain(line);
        if self.in_target_list {
            if let Some(target) = line
                .trim()
                .strip_prefix('`')
                .and_then(|t| t.strip_suffix('`'))
            {
                if !self.targets.iter().any(|t| t.target == target) {
                    self.targets.push(FailedTarget {
                        target: target.to_string(),
                        ..FailedTarget::default()
                    });
                }
                return;
            }
            self.in_target_list = false;
        }
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("Running ") {
            // `Running tests/x.rs (target/debug/deps/x-HASH)`: the source names it.
            let name = match rest.rfind(" (") {
                Some(at) if rest.ends_with(')') => &rest[..at],
                _ => rest,
            };
            self.binary = Some(name.to_string());
        } else if trimmed.starts_with("Doc-tests ") {
            self.binary = Some(trimmed.to_string());
        } else if let Some(target) = rerun_target(&line) {
            // The oldest binary whose results ended is the one cargo names; without one,
            // the binary that runs (it crashed before its result line).
            let tests = self
                .closed
                .pop_front()
                .unwrap_or_else(|| std::mem::take(&mut self.open));
            match self.targets.iter_mut().find(|t| t.target == target) {
                Some(known) => known.tests.extend(tests),
                None => self.targets.push(FailedTarget {
                    target: target.to_string(),
                    binary: self.binary.clone(),
                    crashed: None,
                    tests,
                }),
            }
        } else if let Some(rest) = trimmed.strip_prefix("process didn't exit successfully: ") {
            // `` `/path/x-HASH` (signal: 6, SIGABRT: process abort signal) ``
            let why = match rest.rfind("` (") {
                Some(at) => rest[at + 3..].trim_end_matches(')').to_string(),
                None => rest.to_string(),
            };
            if let Some(last) = self.targets.last_mut() {
                last.crashed = Some(why);
            }
        } else if is_target_list_heading(&line) {
            self.in_target_list = true;
        }
    }

    /// The failures read so far.
    pub fn failures(&self) -> Failures {
        Failures {
            targets: self.targets.clone(),
            unattributed: self
                .closed
                .iter()
                .flatten()
                .chain(&self.open)
                .cloned()
                .collect(),
        }
    }
}

/// Whether `line` is libtest's `running N tests` (or `running 1 test`).
fn is_running_line(line: &str) -> bool {
    line.strip_prefix("running ")
        .and_then(|rest| {
            rest.strip_suffix(" tests")
                .or_else(|| rest.strip_suffix(" test"))
        })
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The time of `test result: ok. 3 passed; ...; finished in 1.23s`.
fn finished_in(line: &str) -> Option<Duration> {
    let secs = line
        .rsplit_once("finished in ")?
        .1
        .trim()
        .strip_suffix('s')?;
    Duration::try_from_secs_f64(secs.parse().ok()?).ok()
}

/// The target of `error: test failed, to rerun pass `-p x --lib`` (or `doctest failed`).
fn rerun_target(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("error: test failed, to rerun pass `")
        .or_else(|| line.strip_prefix("error: doctest failed, to rerun pass `"))?;
    rest.strip_suffix('`')
}

/// Whether `line` is `error: N targets failed:` (or `1 target failed:`).
fn is_target_list_heading(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("error: ") else {
        return false;
    };
    let Some((count, rest)) = rest.split_once(' ') else {
        return false;
    };
    !count.is_empty()
        && count.bytes().all(|b| b.is_ascii_digit())
        && (rest == "targets failed:" || rest == "target failed:")
}

/// One of the child's two streams, as [`tee_to`] reads it.
struct Stream<R, W> {
    from: Option<R>,
    to: W,
    /// Writing `to` failed (a closed pipe): the rest is read, not written.
    broken: bool,
    /// The line read so far.
    line: Vec<u8>,
}

impl<R: Read + std::os::fd::AsRawFd, W: Write> Stream<R, W> {
    fn new(from: R, to: W) -> Self {
        Stream {
            from: Some(from),
            to,
            broken: false,
            line: Vec::new(),
        }
    }

    /// The pollable descriptor, or -1 (ignored by poll) once the stream ended.
    fn fd(&self) -> i32 {
        self.from.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    /// Everything readable now, without waiting (the descriptor is non-blocking); at the
    /// end of the stream it is closed.
    fn read_available(&mut self) -> Vec<u8> {
        let mut got = Vec::new();
        let Some(from) = self.from.as_mut() else {
            return got;
        };
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) => {
                    self.from = None;
                    break;
                }
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.from = None;
                    break;
                }
            }
        }
        got
    }

    /// Passes `chunk` through and gives each line it completes to `on_line` (and the last,
    /// unfinished one, once the stream ended).
    fn pass(&mut self, chunk: &[u8], mut on_line: impl FnMut(&str)) {
        if !chunk.is_empty() && !self.broken {
            self.broken = self
                .to
                .write_all(chunk)
                .and_then(|()| self.to.flush())
                .is_err();
        }
        for &b in chunk {
            if b == b'\n' {
                on_line(&String::from_utf8_lossy(&self.line));
                self.line.clear();
            } else {
                self.line.push(b);
            }
        }
        if self.from.is_none() && !self.line.is_empty() {
            on_line(&String::from_utf8_lossy(&self.line));
            self.line.clear();
        }
    }
}

/// Makes `fd` non-blocking.
fn set_nonblocking(fd: i32) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor this process owns (a child's pipe), no pointers.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `cmd` (a `cargo test`), its standard output and error passed through to this
/// process's as they come, unchanged, while `log` reads their lines; its exit status.
/// The child dies with xtask ([`crate::process::die_with_parent`]).
pub fn tee(cmd: &mut Command, log: &mut Log) -> io::Result<ExitStatus> {
    tee_to(cmd, log, io::stdout(), io::stderr())
}

/// [`tee`], passing the child's standard output to `out` and its standard error to `err`.
///
/// One thread reads both streams in causal order: whenever something is readable, it takes
/// what standard error holds first, then what standard output holds, and reads the output
/// first. Whatever a test binary wrote before cargo wrote a line about it (`error: test
/// failed` is written after the binary exited) is thus read before that line, however the
/// threads of this machine are scheduled.
pub fn tee_to(
    cmd: &mut Command,
    log: &mut Log,
    out: impl Write,
    err: impl Write,
) -> io::Result<ExitStatus> {
    let mut child = crate::process::die_with_parent(cmd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stdout = Stream::new(child.stdout.take().expect("stdout is piped"), out);
    let mut stderr = Stream::new(child.stderr.take().expect("stderr is piped"), err);
    let nonblocking = set_nonblocking(stdout.fd()).and_then(|()| set_nonblocking(stderr.fd()));
    if let Err(e) = nonblocking {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    while stdout.from.is_some() || stderr.from.is_some() {
        let mut fds = [stdout.fd(), stderr.fd()].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if ready < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        // Standard error first, then standard output: all the output written before the
        // error lines just taken is in the second read.
        let err_chunk = stderr.read_available();
        let out_chunk = stdout.read_available();
        stdout.pass(&out_chunk, |l| log.stdout_line(l));
        stderr.pass(&err_chunk, |l| log.stderr_line(l));
    }
    child.wait()
}

/// How one stage of `cargo xtask test` ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stage {
    /// What ran (`cargo test --workspace --no-fail-fast`, `examples`, ...).
    pub name: String,
    /// Whether it passed.
    pub ok: bool,
    /// A few words on how it ended (`exit status: 101`, `7 examples`), or empty.
    pub note: String,
    /// One line per failure (see [`Failures::lines`]).
    pub failures: Vec<String>,
    /// How long it ran, building included.
    pub time: Duration,
    /// Its test binaries' own times (see [`Log::times`]).
    pub binaries: Vec<(String, Duration)>,
}

/// How many of the slowest test binaries the summary names.
const SLOWEST: usize = 10;

/// The block `cargo xtask test` ends with: each stage ok or FAILED with its time and its
/// failures, the slowest test binaries, what tests said could not run here (`not_run`: a
/// missing plugin, engine or device), then a last line with the verdict and the total
/// time. No line looks like libtest's `test result:` lines, which pass through above it
/// unchanged.
pub fn summary(stages: &[Stage], not_run: &[String]) -> String {
    let mut out = String::from("\n== cargo xtask test: summary ==\n");
    for s in stages {
        let verdict = if s.ok { "ok    " } else { "FAILED" };
        let note = if s.note.is_empty() {
            String::new()
        } else {
            format!(" ({})", s.note)
        };
        out.push_str(&format!(
            "{verdict}  {}{note}, {} s\n",
            s.name,
            s.time.as_secs()
        ));
        for f in &s.failures {
            out.push_str(&format!("          {f}\n"));
        }
    }
    let mut binaries: Vec<(usize, &str, Duration)> = stages
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.binaries.iter().map(move |(b, t)| (i + 1, b.as_str(), *t)))
        .collect();
    if !binaries.is_empty() {
        let all: Duration = binaries.iter().map(|b| b.2).sum();
        binaries.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(b.1)));
        out.push_str(&format!(
            "slowest test binaries (of {}, {} s in all; stage number first):\n",
            binaries.len(),
            all.as_secs()
        ));
        for (stage, binary, time) in binaries.iter().take(SLOWEST) {
            out.push_str(&format!(
                "          {:>5} s  {stage}: {binary}\n",
                time.as_secs()
            ));
        }
    }
    if !not_run.is_empty() {
        out.push_str(&format!(
            "not run here ({}; they passed without it):\n",
            not_run.len()
        ));
        for n in not_run {
            out.push_str(&format!("          {n}\n"));
        }
    }
    let failed: Vec<&str> = stages
        .iter()
        .filter(|s| !s.ok)
        .map(|s| s.name.as_str())
        .collect();
    let not_run_note = match not_run.len() {
        0 => String::new(),
        n => format!("; {n} not run here (listed above)"),
    };
    let total = stages.iter().map(|s| s.time).sum::<Duration>().as_secs();
    if failed.is_empty() {
        out.push_str(&format!(
            "xtask test: all {} stages ok{not_run_note}; {total} s\n",
            stages.len()
        ));
    } else {
        let failures: usize = stages.iter().map(|s| s.failures.len()).sum();
        out.push_str(&format!(
            "xtask test: FAILED: {} of {} stages ({}), {failures} failure(s) listed above; {total} s\n",
            failed.len(),
            stages.len(),
            failed.join("; ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds a transcript whose lines start with `1|` (standard output) or `2|` (standard
    /// error), in the order they came.
    fn read(transcript: &str) -> Failures {
        log_of(transcript).failures()
    }

    /// The log of [`read`]'s transcript.
    fn log_of(transcript: &str) -> Log {
        let mut log = Log::new();
        for line in transcript.lines() {
            let line = line.trim_start();
            if let Some(l) = line.strip_prefix("1|") {
                log.stdout_line(l);
            } else if let Some(l) = line.strip_prefix("2|") {
                log.stderr_line(l);
            } else {
                assert!(line.is_empty(), "unlabelled line `{line}`");
            }
        }
        log
    }

    /// `cargo test --workspace --no-fail-fast` of two packages, as cargo 1.95 printed it:
    /// a failing unit test, a test binary that aborts after one test passed, a passing
    /// binary whose test prints `FAILED`, another package's failing test, a failing
    /// doctest.
    const FAILING: &str = "
        2|   Compiling alpha v0.1.0 (/tmp/ct/alpha)
        2|    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.49s
        2|     Running unittests src/lib.rs (target/debug/deps/alpha-e62994b938fd5803)
        1|
        1|running 3 tests
        1|test tests::passes ... ok
        1|test tests::slow ... ignored
        1|test tests::fails ... FAILED
        1|
        1|failures:
        1|
        1|---- tests::fails stdout ----
        1|
        1|thread 'tests::fails' (7774) panicked at alpha/src/lib.rs:10:26:
        1|assertion `left == right` failed: one is not two
        1|  left: 1
        1| right: 2
        1|stack backtrace:
        1|   0: __rustc::rust_begin_unwind
        1|             at /rustc/59807616e1fa/library/std/src/panicking.rs:689:5
        1|    4: alpha::tests::not_a_test_name
        1|note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.
        1|
        1|
        1|failures:
        1|    tests::fails
        1|
        1|test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.08s
        1|
        2|error: test failed, to rerun pass `-p alpha --lib`
        2|     Running tests/abort.rs (target/debug/deps/abort-d95e04fd005395c6)
        1|
        1|running 2 tests
        1|test first_ok ... ok
        2|error: test failed, to rerun pass `-p alpha --test abort`
        2|
        2|Caused by:
        2|  process didn't exit successfully: `/tmp/ct/target/debug/deps/abort-d95e04fd005395c6` (signal: 6, SIGABRT: process abort signal)
        2|     Running tests/fine.rs (target/debug/deps/fine-2dee4c3bce00d937)
        1|
        1|running 2 tests
        1|test x ... FAILED
        1|test failed_lines_are_found ... ok
        1|test fine ... ok
        1|
        1|test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
        1|
        2|     Running unittests src/lib.rs (target/debug/deps/beta-04b5d311d386c8df)
        1|
        1|running 2 tests
        1|test tests::ok ... ok
        1|test tests::beta_fails ... FAILED
        1|
        1|failures:
        1|
        1|---- tests::beta_fails stdout ----
        1|
        1|thread 'tests::beta_fails' (7795) panicked at beta/src/lib.rs:2:39:
        1|boom
        1|    indented
        1|
        1|failures:
        1|    tests::beta_fails
        1|
        1|test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.09s
        1|
        2|error: test failed, to rerun pass `-p beta --lib`
        2|   Doc-tests alpha
        1|
        1|running 1 test
        1|test alpha/src/lib.rs - add (line 3) ... FAILED
        1|
        1|failures:
        1|
        1|---- alpha/src/lib.rs - add (line 3) stdout ----
        1|Test executable failed (exit status: 101).
        1|
        1|failures:
        1|    alpha/src/lib.rs - add (line 3)
        1|
        1|test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.15s
        1|
        2|error: doctest failed, to rerun pass `-p alpha --doc`
        2|   Doc-tests beta
        1|
        1|running 0 tests
        1|
        1|test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
        1|
        2|error: 4 targets failed:
        2|    `-p alpha --lib`
        2|    `-p alpha --test abort`
        2|    `-p beta --lib`
        2|    `-p alpha --doc`
    ";

    #[test]
    fn every_failing_test_and_target_is_found() {
        let f = read(FAILING);
        let target =
            |target: &str, binary: &str, crashed: Option<&str>, tests: &[&str]| FailedTarget {
                target: target.to_string(),
                binary: Some(binary.to_string()),
                crashed: crashed.map(str::to_string),
                tests: tests.iter().map(|t| t.to_string()).collect(),
            };
        assert_eq!(
            f.targets,
            vec![
                target(
                    "-p alpha --lib",
                    "unittests src/lib.rs",
                    None,
                    &["tests::fails"]
                ),
                target(
                    "-p alpha --test abort",
                    "tests/abort.rs",
                    Some("signal: 6, SIGABRT: process abort signal"),
                    &[]
                ),
                target(
                    "-p beta --lib",
                    "unittests src/lib.rs",
                    None,
                    &["tests::beta_fails"]
                ),
                target(
                    "-p alpha --doc",
                    "Doc-tests alpha",
                    None,
                    &["alpha/src/lib.rs - add (line 3)"]
                ),
            ]
        );
        // The passing binary's `test x ... FAILED` (its tests' own output) went with its
        // `test result: ok`.
        assert!(f.unattributed.is_empty(), "{:?}", f.unattributed);
        assert_eq!(f.test_count(), 3);
        let mut log = Log::new();
        for line in FAILING.lines().map(str::trim_start) {
            if let Some(l) = line.strip_prefix("1|") {
                log.stdout_line(l);
            }
        }
        assert_eq!(log.counts(), (4, 3));
        let lines = f.lines();
        assert!(lines.contains(&"-p alpha --lib: tests::fails".to_string()));
        assert!(lines.iter().any(|l| l.starts_with(
            "-p alpha --test abort: the test binary (tests/abort.rs) crashed (signal: 6"
        )));
    }

    #[test]
    fn a_passing_run_has_no_failure() {
        // Test names and output that mention failures, and `0 failed`, are no failure.
        let passing = "
            2|     Running unittests src/lib.rs (target/debug/deps/alpha-e62994b938fd5803)
            1|
            1|running 4 tests
            1|test tests::failed_lines_are_found ... ok
            1|test tests::error_test_failed_to_rerun_pass ... ok
            1|test tests::prints_failures ... ok
            1|test tests::slow ... ignored
            1|
            1|test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s
            1|
            2|   Doc-tests alpha
            1|
            1|running 1 test
            1|test alpha/src/lib.rs - add (line 3) ... ok
            1|
            1|test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.15s
        ";
        let f = read(passing);
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(f.test_count(), 0);
        assert!(f.lines().is_empty());
        // The wrong answer the other way: the failing transcript is never read as clean.
        let f = read(FAILING);
        assert!(!f.is_empty());
        assert_ne!(f.test_count(), 0);
        assert_eq!(f.targets.len(), 4);
    }

    #[test]
    fn the_target_list_alone_names_what_failed() {
        // Only the closing block (the error lines were lost): the targets are still there.
        let f = read(
            "
            2|error: 1 target failed:
            2|    `-p graphbug --test minify_cli`
            2|warning: something else
            2|    `not a target`
        ",
        );
        assert_eq!(f.targets.len(), 1);
        assert_eq!(f.targets[0].target, "-p graphbug --test minify_cli");
        assert_eq!(
            f.lines(),
            vec!["-p graphbug --test minify_cli: failed, no test named"]
        );
    }

    #[test]
    fn coloured_lines_and_a_binary_that_died_before_its_results() {
        // Cargo on a terminal colours its lines; a binary that cannot start (libtorch not
        // found) prints no `running` line at all.
        let f = read(
            "
            2|\u{1b}[1m\u{1b}[92m     Running\u{1b}[0m tests/cli.rs (target/debug/deps/cli-0a)
            2|target/debug/deps/cli-0a: error while loading shared libraries: libtorch_cpu.so
            2|\u{1b}[1m\u{1b}[91merror\u{1b}[0m\u{1b}[1m:\u{1b}[0m test failed, to rerun pass `-p graphbug --test cli`
            2|
            2|Caused by:
            2|  process didn't exit successfully: `/w/target/debug/deps/cli-0a` (exit status: 127)
            1|test leftover ... FAILED
        ",
        );
        assert_eq!(f.targets.len(), 1);
        let t = &f.targets[0];
        assert_eq!(t.target, "-p graphbug --test cli");
        assert_eq!(t.binary.as_deref(), Some("tests/cli.rs"));
        assert_eq!(t.crashed.as_deref(), Some("exit status: 127"));
        assert!(t.tests.is_empty());
        // A failing test after the last target line is kept, target unknown.
        assert_eq!(f.unattributed, vec!["leftover"]);
        assert_eq!(f.test_count(), 1);
    }

    #[test]
    fn the_summary_lists_every_stage_and_failure() {
        let log = log_of(FAILING);
        let f = log.failures();
        let stages = vec![
            Stage {
                name: "cargo test --workspace --no-fail-fast".into(),
                ok: false,
                note: "exit status: 101".into(),
                failures: f.lines(),
                time: Duration::from_secs(75),
                binaries: log.times().to_vec(),
            },
            Stage {
                name: "examples".into(),
                ok: true,
                note: "3 examples".into(),
                time: Duration::from_millis(2500),
                ..Stage::default()
            },
        ];
        let text = summary(&stages, &[]);
        assert!(
            text.contains("FAILED  cargo test --workspace --no-fail-fast (exit status: 101), 75 s"),
            "{text}"
        );
        assert!(text.contains("ok      examples (3 examples), 2 s"));
        assert!(text.contains("          -p beta --lib: tests::beta_fails"));
        assert!(text.contains("          -p alpha --doc: alpha/src/lib.rs - add (line 3)"));
        // Each binary's own time, by its result line, slowest first, with its stage.
        let slowest = "slowest test binaries (of 5, 0 s in all; stage number first):\n";
        let first = text.find(slowest).expect("the slowest binaries are listed") + slowest.len();
        assert!(
            text[first..].starts_with("              0 s  1: Doc-tests alpha\n"),
            "{text}"
        );
        let last = text.lines().last().unwrap();
        assert!(
            last.starts_with("xtask test: FAILED: 1 of 2 stages"),
            "{last}"
        );
        assert!(last.ends_with("; 77 s"), "{last}");
        assert!(!text.lines().any(|l| l.starts_with("test result:")));
        let ok = summary(&stages[1..], &[]);
        assert_eq!(ok.lines().last(), Some("xtask test: all 1 stages ok; 2 s"));
        assert!(!ok.contains("slowest"), "{ok}");
        // What did not run here is listed, and counted in the verdict.
        let not_run = ["pjrt: no XLA CPU plugin".to_string()];
        let ok = summary(&stages[1..], &not_run);
        assert!(
            ok.contains(
                "not run here (1; they passed without it):\n          pjrt: no XLA CPU plugin\n"
            ),
            "{ok}"
        );
        assert_eq!(
            ok.lines().last(),
            Some("xtask test: all 1 stages ok; 1 not run here (listed above); 2 s")
        );
    }

    #[test]
    fn each_binary_s_time_is_read_from_its_result_line() {
        let mut log = Log::new();
        log.stderr_line("     Running tests/cli.rs (target/debug/deps/cli-0123)");
        log.stdout_line("running 2 tests");
        log.stdout_line("test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 191.52s");
        log.stderr_line("   Doc-tests graphbug_ir");
        log.stdout_line("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.25s");
        assert_eq!(
            log.times(),
            [
                ("tests/cli.rs".to_string(), Duration::from_millis(191_520)),
                (
                    "Doc-tests graphbug_ir".to_string(),
                    Duration::from_millis(250)
                ),
            ]
        );
        assert_eq!(finished_in("test result: ok. 1 passed"), None);
    }

    #[test]
    fn tee_passes_output_through_and_reads_it_in_order() {
        // The error line is written right after the test's line: it is always read after
        // it (the other order would leave the target without its test).
        for _ in 0..20 {
            let mut log = Log::new();
            let mut cmd = Command::new("sh");
            cmd.args([
                "-c",
                "printf 'test a::b ... FAILED\\nhalf '; \
                 printf 'error: test failed, to rerun pass `--lib`\\n' >&2; printf 'line'; exit 3",
            ]);
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let status = tee_to(&mut cmd, &mut log, &mut out, &mut err).unwrap();
            assert_eq!(status.code(), Some(3));
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "test a::b ... FAILED\nhalf line"
            );
            assert_eq!(
                String::from_utf8(err).unwrap(),
                "error: test failed, to rerun pass `--lib`\n"
            );
            let f = log.failures();
            assert_eq!(f.targets.len(), 1, "{f:?}");
            assert_eq!(f.targets[0].target, "--lib");
            assert_eq!(f.targets[0].tests, vec!["a::b"]);
        }
    }
}

//! `--check-command CMD`: an external interestingness test, as C-Reduce uses. The command
//! gets the candidate as a repro directory and exits non-zero when it is interesting.
//!
//! A command that cannot be started (the shell's exit 126 or 127) judges nothing: that is
//! an unresolved verdict naming the shell's complaint, never "interesting". Each run is
//! bounded by a [`TimeLimit`] and runs in its own process group, so a timeout kills
//! whatever the command started.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use std::path::Path;

use graphbug_run::limits::{FirstTook, TimeLimit};
use graphbug_run::process::{self, Ended};

use crate::candidate::Candidate;
use crate::checker::{Checker, Signature, Verdict};

/// Writes a candidate, as its family's files (an aten repro directory; an XLA program in
/// the input's format and its inputs), into a directory for the command to read.
pub type WriteCandidate = Box<dyn Fn(&Candidate, &Path) -> Result<(), String> + Send>;

/// The shell's exit codes for "found but not executable" and "not found".
const CANNOT_RUN: [i32; 2] = [126, 127];

/// Runs a shell command on each candidate, written to a scratch repro directory.
pub struct CommandChecker {
    command: String,
    write: WriteCandidate,
    scratch: PathBuf,
    limit: TimeLimit,
    /// What the first run took.
    first_took: FirstTook,
}

impl CommandChecker {
    /// Runs `command DIR` through `sh -c`, with candidates written under `scratch`.
    pub fn new(command: &str, write: WriteCandidate, scratch: PathBuf, limit: TimeLimit) -> Self {
        CommandChecker {
            command: command.to_string(),
            write,
            scratch,
            limit,
            first_took: FirstTook::default(),
        }
    }
}

impl Checker for CommandChecker {
    fn describe(&self) -> String {
        format!("command `{}` exits non-zero", self.command)
    }

    fn check(&mut self, candidate: &Candidate) -> Verdict {
        let dir = self.scratch.join("candidate");
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return Verdict::Unresolved(format!("{}: {e}", dir.display()));
        }
        if let Err(e) = (self.write)(candidate, &dir) {
            return Verdict::Unresolved(e);
        }
        let stderr_path = self.scratch.join("stderr");
        let stderr = match std::fs::File::create(&stderr_path) {
            Ok(f) => f,
            Err(e) => return Verdict::Unresolved(format!("{}: {e}", stderr_path.display())),
        };
        let script = format!("{} \"$1\"", self.command);
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script, "graphbug-check"])
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let mut child = match process::spawn(cmd, true) {
            Ok(c) => c,
            Err(e) => return Verdict::Unresolved(format!("cannot run `{}`: {e}", self.command)),
        };
        let limit = self.first_took.next_limit(&self.limit);
        let started = Instant::now();
        let ended = process::wait_bounded(&mut child, limit, true);
        let status = match ended {
            Ok(Ended::Exited(s)) => s,
            Ok(Ended::TimedOut) => {
                self.first_took.record(None);
                return Verdict::Unresolved(format!(
                    "`{}` did not finish within {:.3} s",
                    self.command,
                    limit.as_secs_f64()
                ));
            }
            Err(e) => return Verdict::Unresolved(format!("waiting for `{}`: {e}", self.command)),
        };
        self.first_took.record(Some(started.elapsed()));
        if let Some(code) = status.code().filter(|c| CANNOT_RUN.contains(c)) {
            let said = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            let said = said
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            return Verdict::Unresolved(format!(
                "the check command `{}` cannot be run (exit {code}: {})",
                self.command,
                if said.is_empty() { "no message" } else { said }
            ));
        }
        if status.success() {
            Verdict::Passes
        } else {
            Verdict::Fails(Signature {
                kind: "command".into(),
                op: None,
                message: "the check command found the candidate interesting".into(),
                ..Signature::default()
            })
        }
    }
}

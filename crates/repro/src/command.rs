//! `--check-command CMD`: an external interestingness test, as C-Reduce uses. The command
//! gets the candidate as a repro directory and exits non-zero when it is interesting.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use graphbug_minifier::{Candidate, Checker, Signature, Verdict};

use crate::save::write_graph_and_inputs;
use crate::values::ReferenceValues;

/// Runs a shell command on each candidate, written to a scratch repro directory.
pub struct CommandChecker {
    command: String,
    values: ReferenceValues,
    scratch: PathBuf,
    timeout: Option<Duration>,
}

impl CommandChecker {
    /// Runs `command DIR` through `sh -c`, with candidates written under `scratch`.
    pub fn new(
        command: &str,
        values: ReferenceValues,
        scratch: PathBuf,
        timeout: Option<Duration>,
    ) -> Self {
        CommandChecker {
            command: command.to_string(),
            values,
            scratch,
            timeout,
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
        let written = self
            .values
            .candidate_inputs(candidate)
            .and_then(|(inputs, _)| write_graph_and_inputs(&dir, &candidate.graph, &inputs));
        if let Err(e) = written {
            return Verdict::Unresolved(e.to_string());
        }
        let script = format!("{} \"$1\"", self.command);
        let mut child = match Command::new("sh")
            .args(["-c", &script, "graphbug-check"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => return Verdict::Unresolved(format!("cannot run `{}`: {e}", self.command)),
        };
        let start = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if self.timeout.is_some_and(|t| start.elapsed() > t) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Verdict::Unresolved(format!("`{}` timed out", self.command));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Verdict::Unresolved(e.to_string()),
            }
        };
        if status.success() {
            Verdict::Passes
        } else {
            Verdict::Fails(Signature {
                kind: "command".into(),
                op: None,
                message: "the check command found the candidate interesting".into(),
            })
        }
    }
}

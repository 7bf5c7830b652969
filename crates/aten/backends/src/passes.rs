//! Pass limits: how many times each of a backend's passes may apply, so that a miscompile
//! can be bisected to one application of one pass (`graphbug bisect`), as PyTorch's
//! CompilerBisector and LLVM's `-opt-bisect-limit` do.
//!
//! A backend declares its passes ([`Backend::passes`]) and asks
//! [`PassLimits::allow`] (through [`CompileContext::passes`]) before each application;
//! `limit:<pass>=<n>,...+<inner>` compiles `<inner>` with such limits. Every application
//! asked about is appended to the file `GRAPHBUG_PASS_LOG` names, and the graph each pass
//! leaves is written to the directory `GRAPHBUG_PASS_GRAPHS` names, so a process bounded in
//! time (or one that crashes) still tells which applications it made.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use graphbug_ir::{print_graph, Graph};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::backend::{Backend, CompileContext, CompiledFn, ExampleInput};
use crate::failure::Failure;

/// Environment variable naming the file every pass application is appended to (JSON lines).
pub const PASS_LOG_ENV: &str = "GRAPHBUG_PASS_LOG";

/// Environment variable naming a directory for the graph each pass leaves (`<pass>.py`).
pub const PASS_GRAPHS_ENV: &str = "GRAPHBUG_PASS_GRAPHS";

/// One application of a pass, as asked about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Application {
    /// The pass.
    pub pass: String,
    /// Which application of the pass (from 1, in the order the backend asked).
    pub index: usize,
    /// The node it touches, by name.
    pub node: String,
    /// Whether the limit let it apply.
    pub applied: bool,
}

/// Limits on the applications of passes, and their record.
pub struct PassLimits {
    limits: BTreeMap<String, usize>,
    counts: Mutex<BTreeMap<String, usize>>,
    /// Graph files written so far, by name (a second `fault` graph is `fault_2.py`).
    dumped: Mutex<BTreeMap<String, usize>>,
    log: Mutex<Option<File>>,
    graphs: Option<PathBuf>,
}

impl std::fmt::Debug for PassLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassLimits")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl PassLimits {
    /// At most `limits[pass]` applications of each pass named (the others unlimited),
    /// recorded where `GRAPHBUG_PASS_LOG` and `GRAPHBUG_PASS_GRAPHS` say.
    pub fn new(limits: BTreeMap<String, usize>) -> PassLimits {
        let log = std::env::var_os(PASS_LOG_ENV).and_then(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .ok()
        });
        PassLimits {
            limits,
            counts: Mutex::new(BTreeMap::new()),
            dumped: Mutex::new(BTreeMap::new()),
            log: Mutex::new(log),
            graphs: std::env::var_os(PASS_GRAPHS_ENV).map(PathBuf::from),
        }
    }

    /// Counts one application of `pass` to `node`; true when it may apply.
    pub fn allow(&self, pass: &str, node: &str) -> bool {
        let index = {
            let mut counts = self.counts.lock();
            let n = counts.entry(pass.to_string()).or_insert(0);
            *n += 1;
            *n
        };
        let applied = self.limits.get(pass).is_none_or(|&limit| index <= limit);
        if let Some(file) = self.log.lock().as_mut() {
            let line = serde_json::to_string(&Application {
                pass: pass.to_string(),
                index,
                node: node.to_string(),
                applied,
            })
            .expect("applications serialize");
            // A log that cannot be written leaves the bisector without counts, which it
            // reports; the compile itself goes on.
            let _ = writeln!(file, "{line}").and_then(|()| file.flush());
        }
        applied
    }

    /// Writes a graph a pass left (as `<name>.py`, then `<name>_2.py`, ...) when
    /// `GRAPHBUG_PASS_GRAPHS` is set.
    pub fn dump_graph(&self, name: &str, graph: &Graph) {
        if let Some(dir) = &self.graphs {
            let n = {
                let mut dumped = self.dumped.lock();
                let n = dumped.entry(name.to_string()).or_insert(0);
                *n += 1;
                *n
            };
            let file = if n == 1 {
                format!("{name}.py")
            } else {
                format!("{name}_{n}.py")
            };
            let _ = std::fs::create_dir_all(dir);
            let _ = std::fs::write(dir.join(file), print_graph(graph));
        }
    }

    /// Parses `pass=n,pass=n` (empty: no limits).
    pub fn parse(text: &str) -> Result<BTreeMap<String, usize>, String> {
        let mut limits = BTreeMap::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (pass, n) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}` is not <pass>=<n>"))?;
            let n = n
                .trim()
                .parse::<usize>()
                .map_err(|_| format!("`{n}` is not a number of applications"))?;
            if limits.insert(pass.trim().to_string(), n).is_some() {
                return Err(format!("pass `{}` is limited twice", pass.trim()));
            }
        }
        Ok(limits)
    }

    /// Prints limits as [`Self::parse`] reads them.
    pub fn format(limits: &BTreeMap<String, usize>) -> String {
        limits
            .iter()
            .map(|(p, n)| format!("{p}={n}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Reads a pass log; a line that is not an application is an error naming it.
    pub fn read_log(path: &Path) -> Result<Vec<Application>, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(k, l)| {
                serde_json::from_str(l).map_err(|e| {
                    format!("{}:{}: not a pass application: {e}", path.display(), k + 1)
                })
            })
            .collect()
    }
}

/// `own` passes, then those of the `inner` backends not named yet, in order.
pub fn with_passes(own: &[&str], inner: &[&dyn Backend]) -> Vec<String> {
    let mut passes: Vec<String> = own.iter().map(|p| p.to_string()).collect();
    for b in inner {
        for p in b.passes() {
            if !passes.contains(&p) {
                passes.push(p);
            }
        }
    }
    passes
}

/// `limit:<pass>=<n>,...+<inner>`: compiles with `<inner>`, each pass named applied at most
/// `<n>` times (the bisector's probe; `limit:+<inner>` only records).
pub struct Limit {
    name: String,
    limits: BTreeMap<String, usize>,
    inner: Arc<dyn Backend>,
}

impl Limit {
    /// Builds the backend from the text after `limit:`.
    pub fn from_name(rest: &str) -> Result<Arc<dyn Backend>, String> {
        let (limits, inner) = rest.split_once('+').ok_or_else(|| {
            format!("`limit:{rest}` has no `+<inner>`: limit:<pass>=<n>,...+<inner>")
        })?;
        let limits = PassLimits::parse(limits)?;
        let inner = crate::registry::lookup(inner).map_err(|e| format!("inner backend: {e}"))?;
        let known = inner.passes();
        if let Some(unknown) = limits.keys().find(|p| !known.contains(p)) {
            return Err(format!(
                "`{}` has no pass `{unknown}`; its passes: {}",
                inner.name(),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ));
        }
        Ok(Arc::new(Limit {
            name: format!("limit:{rest}"),
            limits,
            inner,
        }))
    }
}

impl Backend for Limit {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        "compiles with an inner backend whose passes apply at most a given number of times"
    }

    fn tags(&self) -> &[&str] {
        &["debug"]
    }

    fn inner(&self) -> Option<&dyn Backend> {
        Some(self.inner.as_ref())
    }

    fn compile(
        &self,
        graph: &Graph,
        example_inputs: &[ExampleInput],
        ctx: &CompileContext,
    ) -> Result<Box<dyn CompiledFn>, Failure> {
        let limits = Arc::new(PassLimits::new(self.limits.clone()));
        let ctx = CompileContext {
            passes: Some(limits),
            ..ctx.share()
        };
        self.inner.compile(graph, example_inputs, &ctx)
    }
}

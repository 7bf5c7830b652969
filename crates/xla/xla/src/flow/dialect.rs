//! The XLA dialect as graphbug's commands see it ([`XLA`]): HLO text or proto and
//! StableHLO text or bytecode, told by content; its one option of its own, the plugin of
//! the reference run. Its commands are handed programs it told ([`Dialect::tells`]), and
//! take their form without decoding a proto a second time.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use clap::{Arg, ArgMatches};
use graphbug_files::HostTensor;
use graphbug_flow::bisect::BisectRequest;
use graphbug_flow::dialect::{options_heading, Dialect, DialectCommands};
use graphbug_flow::dump::Dump;
use graphbug_flow::minify::MinifyRequest;
use graphbug_flow::repro::Reproducible;
use graphbug_flow::run::RunRequest;
use graphbug_flow::FlowError;
use graphbug_ir::Graph;

use crate::program::{form_of_told, sniff, Program};

/// XLA programs: HLO (text or proto) and StableHLO (text or bytecode), run on PJRT plugins.
pub struct Xla;

/// The XLA dialect.
pub static XLA: Xla = Xla;

/// The id of `--reference-backend`, this dialect's option.
const REFERENCE_BACKEND: &str = "reference_backend";

impl Xla {
    /// `--reference-backend`, as `given`.
    fn reference_backend(given: &ArgMatches) -> Option<String> {
        given.get_one::<String>(REFERENCE_BACKEND).cloned()
    }
}

impl Dialect for Xla {
    fn plural(&self) -> &'static str {
        "XLA programs"
    }

    fn noun(&self) -> &'static str {
        "an XLA program"
    }

    fn node_word(&self) -> &'static str {
        "instruction"
    }

    fn file_noun(&self) -> &'static str {
        "program"
    }

    fn tells(&self, path: &Path, bytes: &[u8]) -> bool {
        sniff(bytes, path).is_some()
    }

    fn wrote(&self, manifest: &serde_json::Value) -> bool {
        manifest.get("graphbug_xla_repro").is_some()
    }

    fn read_graph(&self, path: &Path, bytes: Vec<u8>) -> Result<Graph, FlowError> {
        Program::read(&bytes, form_of_told(&bytes))
            .and_then(|p| p.graph())
            .map_err(|e| FlowError::bad(path, e))
    }

    fn standalone_commands(&self, dir: &str, python: &str) -> Vec<String> {
        vec![format!(
            "{python} {dir}/repro.py           # JAX alone: the plugin against XLA CPU"
        )]
    }

    fn dump(&self, dir: &Path) -> Option<Result<Dump, FlowError>> {
        super::dump::read_dump(dir).or_else(|| super::corpus::read_corpus(dir))
    }

    fn recorded_inputs(&self, file: &Path) -> Result<Vec<HostTensor>, FlowError> {
        if super::corpus::is_tensor_file(file) {
            return super::corpus::file_arguments(file);
        }
        super::dump::recorded_inputs(file)
    }
}

impl DialectCommands for Xla {
    fn options(&self, command: &str) -> Vec<Arg> {
        let help = match command {
            "run" => "XLA programs: the plugin of --compare's float64 reference run, which runs the program raised to float64 (default pjrt:cpu)",
            "minify" => "XLA programs: the PJRT plugin whose run of the original records the values candidates run on and are compared with (default pjrt:cpu)",
            "repro" => "XLA programs: the PJRT plugin whose run records the reference values (default pjrt:cpu; a repro directory's manifest names its own)",
            "bisect" => "XLA programs: the PJRT plugin whose run records the reference values of --check accuracy (default pjrt:cpu, the program raised to float64; where a pass is wrong in float64 too, the plugin with its passes off tells it: pjrt:cpu?xla_enable_hlo_passes_only=layout-assignment)",
            _ => return Vec::new(),
        };
        vec![Arg::new(REFERENCE_BACKEND)
            .long("reference-backend")
            .value_name("BACKEND")
            .help(help)
            .help_heading(options_heading(self))]
    }

    fn fmt(&self, file: &Path, bytes: Vec<u8>) -> Result<ExitCode> {
        super::run::fmt(file, &bytes, form_of_told(&bytes))
    }

    fn check(
        &self,
        file: &Path,
        bytes: Vec<u8>,
        _bound: (Option<std::time::Duration>, bool),
        _given: &ArgMatches,
    ) -> Result<ExitCode> {
        super::run::check(file, &bytes, form_of_told(&bytes))
    }

    fn run(&self, req: &RunRequest, bytes: Vec<u8>, given: &ArgMatches) -> Result<ExitCode> {
        let kind = form_of_told(&bytes);
        let (bytes, kind) =
            super::as_backend_reads(req.backend.as_deref(), &req.file, bytes, kind)?;
        super::run::run(req, Xla::reference_backend(given).as_deref(), &bytes, kind)
    }

    fn minify(&self, req: &MinifyRequest, bytes: Vec<u8>, given: &ArgMatches) -> Result<()> {
        let kind = form_of_told(&bytes);
        let (bytes, kind) =
            super::as_backend_reads(req.backend.as_deref(), &req.file, bytes, kind)?;
        super::minify(req, bytes, kind, Xla::reference_backend(given))?;
        Ok(())
    }

    fn bisect(&self, req: &BisectRequest, given: &ArgMatches) -> Result<ExitCode> {
        let mut req = req.clone();
        if let Some(reference) = Xla::reference_backend(given) {
            if req.file.is_dir() {
                anyhow::bail!("--reference-backend: {} records its own reference (its manifest's reference_backend); bisect the program to take another", req.file.display());
            }
            req.case_args.push("--reference-backend".into());
            req.case_args.push(reference.into());
        }
        super::bisect::bisect(&req)
    }

    fn reproducer(&self, given: &ArgMatches) -> Result<Box<dyn Reproducible>> {
        Ok(Box::new(super::repro::XlaRepro::new(
            Xla::reference_backend(given),
        )))
    }

    fn worker(&self, text: &str, bundled: bool) -> Option<Result<()>> {
        crate::minify::is_worker_spec(text)
            .then(|| crate::minify::worker_main(text, bundled).map_err(|e| anyhow!(e)))
    }

    fn list_backends(&self, _all: bool) -> Result<()> {
        super::run::list_plugins();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphbug_flow::dialect::next_commands;

    /// An XLA directory goes on with JAX alone; its manifest says it is XLA's.
    #[test]
    fn xla_directories_go_on_with_jax() {
        let strip = |v: Vec<String>| -> Vec<String> {
            v.iter()
                .map(|l| l.split('#').next().unwrap().trim().to_string())
                .collect()
        };
        assert_eq!(
            strip(next_commands(&XLA, "d", "/bin/g", "py")),
            [
                "/bin/g repro d run",
                "/bin/g repro d analyze",
                "py d/repro.py"
            ]
        );
        assert!(XLA.wrote(&serde_json::json!({"graphbug_xla_repro": 1})));
        assert!(!XLA.wrote(&serde_json::json!({"backend": "eager"})));
        assert!(XLA.tells(Path::new("p.hlo"), b"HloModule m\n"));
        assert!(!XLA.tells(Path::new("g.py"), b"class GraphModule"));
    }
}

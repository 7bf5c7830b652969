//! `graphbug fmt|check|run` of XLA programs: HLO text, HLO protos, StableHLO text and
//! bytecode, told by content (see [`crate::program::sniff`]), run on a PJRT plugin; and
//! the plugins `graphbug backends` lists. Nothing here needs libtorch.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use graphbug_accuracy::to_fp64;
use graphbug_files::HostTensor;
use graphbug_flow::run::{finish_run, supervise_run, RunRequest};
use graphbug_pjrt::{discover, Origin, Plugin, PLUGINS_VAR};
use graphbug_run::process::is_supervised;

use super::{program_inputs, read};
use crate::execute::{pjrt_code, XlaBackend, DEFAULT_BACKEND};
use crate::program::{Kind, Program};

/// `graphbug fmt`: HLO text byte for byte as written, an HLO proto as XLA prints it,
/// StableHLO as written (bytecode through JAX's MLIR).
pub fn fmt(file: &Path, bytes: &[u8], kind: Kind) -> Result<ExitCode> {
    let program = read(file, bytes, kind)?;
    print!(
        "{}",
        program
            .text()
            .with_context(|| format!("{}", file.display()))?
    );
    Ok(ExitCode::SUCCESS)
}

/// `graphbug check`: `<N> instructions, <I> parameters, <O> outputs` (statements of the
/// main function for StableHLO), or the first problem with its line and column.
pub fn check(file: &Path, bytes: &[u8], kind: Kind) -> Result<ExitCode> {
    let program = read(file, bytes, kind)?;
    let (n, inputs, outputs) = program
        .check()
        .with_context(|| format!("{}", file.display()))?;
    println!(
        "{n} {}, {inputs} parameters, {outputs} outputs",
        program.unit()
    );
    Ok(ExitCode::SUCCESS)
}

/// The float64 reference of a run: `program` raised to float64 (see
/// [`Program::raise_to_f64`]) run on `reference` (a plain plugin, by
/// default XLA's CPU plugin) with the inputs raised too.
pub fn fp64_reference(
    program: &Program,
    inputs: &[HostTensor],
    reference: &XlaBackend,
) -> Result<Vec<HostTensor>> {
    let raised = program.raise_to_f64()?;
    let inputs: Vec<HostTensor> = inputs.iter().map(to_fp64).collect();
    let compiled = reference.compile(&raised).map_err(|f| anyhow!("{f}"))?;
    compiled.execute(&inputs).map_err(|f| anyhow!("{f}"))
}

/// `graphbug run` of an XLA program: compiled and run on a PJRT plugin in a bounded child
/// process; outputs printed, saved (`out0..`) and compared by TorchDynamo's accuracy
/// rules with a float64 reference run of the program raised to float64.
pub fn run(
    args: &RunRequest,
    reference_backend: Option<&str>,
    bytes: &[u8],
    kind: Kind,
) -> Result<ExitCode> {
    let program = read(&args.file, bytes, kind)?;
    let backend = XlaBackend::parse(args.backend.as_deref().unwrap_or(DEFAULT_BACKEND))
        .and_then(XlaBackend::with_env_fault)
        .map_err(|e| anyhow!(e))?;
    // Before the child (which the same checks would pass): a plugin that is not found, or
    // a fault that targets nothing, is the user's error, not the compiler's; what XLA's
    // parser would refuse, and what the plugin cannot be given (HLO's proto), are the
    // file's problems.
    if !is_supervised() {
        backend.ensure_present().map_err(|e| anyhow!(e))?;
        // A fault may name an instruction of a computation the entry calls, as for minify.
        let graph = match &backend.fault {
            Some(spec) => program.fault_graph(spec),
            None => program.graph(),
        }
        .with_context(|| format!("{}", args.file.display()))?;
        backend.validate(&graph).map_err(|e| anyhow!(e))?;
        program
            .check()
            .with_context(|| format!("{}", args.file.display()))?;
        if !backend.is_iree() {
            pjrt_code(&program)
                .map_err(|e| anyhow!(e))
                .with_context(|| format!("{}", args.file.display()))?;
        }
        let partitioning = program
            .partitioning()
            .with_context(|| format!("{}", args.file.display()))?;
        if partitioning.devices() > 1 {
            eprintln!(
                "the program runs on {partitioning}{}; inputs and outputs are whole arrays",
                if partitioning.shardy {
                    ", partitioned by Shardy"
                } else {
                    ""
                }
            );
        }
    }
    let reference = XlaBackend::parse(reference_backend.unwrap_or(DEFAULT_BACKEND))
        .map_err(|e| anyhow!("--reference-backend: {e}"))?;
    if reference.fault.is_some() {
        bail!(
            "--reference-backend: the reference runs without faults; name a plugin (pjrt:<plugin>)"
        );
    }
    if let Some(code) = supervise_run(args, backend.name())? {
        return Ok(code);
    }
    let inputs = program_inputs(&program, args.inputs.as_deref(), args.seed)?;
    // The reference runs first, so that a fault that crashes the run leaves it done.
    let fp64 = match &args.compare {
        Some(_) => match fp64_reference(&program, &inputs, &reference) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("note: the float64 reference run failed ({e:#}); outputs are compared with the file by allclose only");
                None
            }
        },
        None => None,
    };
    let outputs = match backend
        .compile(&program)
        .and_then(|compiled| compiled.execute(&inputs))
    {
        Ok(outputs) => outputs,
        Err(failure) => {
            eprintln!("{failure}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let named = outputs
        .into_iter()
        .enumerate()
        .map(|(i, o)| (format!("out{i}"), Some(o)))
        .collect();
    let fp64 = fp64.map(|f| f.into_iter().map(Some).collect());
    finish_run(args, "program", named, fp64)
}

/// `graphbug backends --all`: the PJRT plugins found, each with its PJRT API version,
/// where it was found, and the backend name that selects it; then IREE's target backends,
/// as its compiler lists them.
pub fn list_plugins() {
    list_pjrt_plugins();
    println!("\nIREE (XLA programs: --backend iree:<target>; IREE compiles StableHLO, and HLO is converted):");
    match crate::iree::Tools::find().and_then(|t| Ok((t.target_backends()?, t))) {
        Ok((targets, tools)) => {
            let version = tools.version().unwrap_or_else(|| "version unknown".into());
            println!("  {version}; {}", tools.compile.display());
            for t in targets {
                println!("  {}{t}", crate::iree::PREFIX);
            }
        }
        Err(e) => println!("  none: {e}"),
    }
}

/// The PJRT plugins found, for `graphbug backends --all`.
fn list_pjrt_plugins() {
    let found = discover(Some(&graphbug_run::workspace_root()));
    println!("\nPJRT plugins (XLA programs: --backend pjrt:<name>, or pjrt:/path/to/plugin.so; {PLUGINS_VAR}=name:path adds more):");
    if found.is_empty() {
        println!("  none found");
    }
    for f in found {
        let version = match Plugin::load(&f.path) {
            Ok(p) => format!("PJRT API {}", p.api_version()),
            Err(e) => format!("cannot load: {e}"),
        };
        let origin = match f.origin {
            Origin::EnvVar => PLUGINS_VAR,
            Origin::Venv => "virtualenv",
        };
        println!(
            "  pjrt:{:<12} {version}; {} ({origin})",
            f.name,
            f.path.display()
        );
    }
}

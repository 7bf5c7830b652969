//! Repro directories: a failing graph with its inputs, manifest, standalone Rust program,
//! PyTorch script and README, written atomically and read back with clear errors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use graphbug_aten::dtype::tch_device;
use graphbug_aten::dynamic;
use graphbug_aten::io::{order_tensors, random_tensors, read_tensors, write_tensors};
use graphbug_aten::Interpreter;
use graphbug_ir::{parse_graph, Bindings, Device, Graph, Meta, NodeKind};
use tch::Tensor;

use crate::codegen;
use crate::error::{ReproError, Result};
use crate::manifest::{InputsRecord, Manifest, MANIFEST_FILE};
use crate::save::{replace_dir_atomically, write_file_atomically, GRAPH_FILE, INPUTS_FILE};

/// Constants (`self.<attr>` tensors) of the graph, when it has any.
pub const CONSTANTS_FILE: &str = "constants.safetensors";
/// graphbug's eager outputs on the inputs, for repro.py to compare with.
pub const EAGER_OUTPUTS_FILE: &str = "eager_outputs.safetensors";

/// A failing graph with everything needed to run it again.
pub struct ReproCase {
    /// The graph that runs: static, in aten.
    pub graph: Graph,
    /// The graph as written, when it has symbolic sizes or dynamo-level calls (then
    /// `graph` is its runnable form, see [`graphbug_aten::dynamic::runnable`]): what
    /// graph.py holds and what the minifier cuts.
    pub source: Option<Graph>,
    /// Its inputs, in placeholder order.
    pub inputs: Vec<Tensor>,
    /// Its constants by attribute name.
    pub constants: HashMap<String, Tensor>,
    /// Backend, failure, versions.
    pub manifest: Manifest,
}

impl ReproCase {
    /// The case of `written` (as graph.py holds it) with symbols bound by `bindings`:
    /// a graph with symbolic sizes or dynamo-level calls runs in its runnable form, and
    /// the manifest records the bindings it mentions.
    pub fn new(
        written: Graph,
        bindings: &Bindings,
        inputs: Vec<Tensor>,
        constants: HashMap<String, Tensor>,
        mut manifest: Manifest,
    ) -> Result<Self> {
        let (graph, source) = if dynamic::needs_runnable_form(&written) {
            manifest.bindings = dynamic::bindings_used(&written, bindings);
            let graph = dynamic::runnable(&written, bindings).map_err(ReproError::Other)?;
            (graph, Some(written))
        } else {
            manifest.bindings.clear();
            (written, None)
        };
        Ok(ReproCase {
            graph,
            source,
            inputs,
            constants,
            manifest,
        })
    }

    /// The graph as written (see [`ReproCase::source`]).
    pub fn written(&self) -> &Graph {
        self.source.as_ref().unwrap_or(&self.graph)
    }

    /// The device the case runs on.
    pub fn device(&self) -> Result<Device> {
        self.manifest.device.parse().map_err(ReproError::Other)
    }

    /// Which inputs require grad (see [`requires_grad`]).
    pub fn requires_grad(&self) -> Vec<bool> {
        requires_grad(&self.inputs, self.manifest.training)
    }

    /// Fresh copies of the inputs (backends may change them in place).
    pub fn input_copies(&self) -> Vec<Tensor> {
        self.inputs.iter().map(Tensor::copy).collect()
    }
}

/// `tensors` named after the graph's placeholders, in order.
pub(crate) fn named(graph: &Graph, tensors: &[Tensor]) -> Vec<(String, Tensor)> {
    graph
        .placeholder_names()
        .into_iter()
        .zip(tensors.iter().map(Tensor::shallow_clone))
        .collect()
}

/// Writes `constants` to `file`, sorted by name (so the file is deterministic).
pub(crate) fn write_constants(file: &Path, constants: &HashMap<String, Tensor>) -> Result<()> {
    let mut sorted: Vec<(String, Tensor)> = constants
        .iter()
        .map(|(k, t)| (k.clone(), t.shallow_clone()))
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(write_tensors(file, &sorted)?)
}

fn write_text(dir: &Path, name: &str, text: &str) -> Result<()> {
    write_file_atomically(&dir.join(name), text.as_bytes())
}

/// Writes `case` as a repro directory at `link` (a symlink swapped atomically).
pub fn write_repro_dir(link: &Path, case: &ReproCase) -> Result<()> {
    replace_dir_atomically(link, |d| fill_repro_dir(d, case, link))
}

/// Writes the files of `case`'s repro directory into `d`, the new version of `link` (which
/// its README and launcher name).
pub fn fill_repro_dir(d: &Path, case: &ReproCase, link: &Path) -> Result<()> {
    let shown = std::path::absolute(link).unwrap_or_else(|_| link.to_path_buf());
    {
        let m = &case.manifest;
        let written = case.written();
        write_text(d, GRAPH_FILE, &crate::save::repro_text(written))?;
        if m.inputs == InputsRecord::Real {
            write_tensors(&d.join(INPUTS_FILE), &named(written, &case.inputs))?;
        }
        if !case.constants.is_empty() {
            write_constants(&d.join(CONSTANTS_FILE), &case.constants)?;
        }
        write_text(d, MANIFEST_FILE, &m.to_json())?;
        write_text(d, "repro.rs", &codegen::repro_rs(written, m))?;
        write_text(d, "Cargo.toml", &codegen::cargo_toml())?;
        std::fs::create_dir_all(d.join(".cargo")).map_err(|e| ReproError::io(d, e))?;
        write_text(d, ".cargo/config.toml", &codegen::cargo_config())?;
        let lock = codegen::workspace_root().join("Cargo.lock");
        if let Ok(bytes) = std::fs::read(&lock) {
            write_file_atomically(&d.join("Cargo.lock"), &bytes)?;
        }
        write_text(d, "repro.py", &codegen::repro_py(written, m))?;
        write_text(d, "README.md", &codegen::readme(m, &shown))?;
        if let Ok(outputs) = eager_outputs(case) {
            let present: Vec<(String, Tensor)> = outputs
                .into_iter()
                .enumerate()
                .filter_map(|(i, o)| o.map(|t| (format!("out{i}"), t)))
                .collect();
            write_tensors(&d.join(EAGER_OUTPUTS_FILE), &present)?;
        }
        if m.level >= 2 {
            let launcher = d.join("minifier_launcher.sh");
            write_text(
                d,
                "minifier_launcher.sh",
                &codegen::minifier_launcher(&shown),
            )?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| ReproError::io(&launcher, e))?;
        }
        Ok(())
    }
}

/// Writes a repro directory's standalone build files (`Cargo.toml`, `.cargo/config.toml`)
/// again for this graphbug where they name a repro crate that is not there: they name it,
/// and graphbug's target directory, by absolute path, so a directory copied from another
/// checkout, or written before the crate moved to `crates/aten/repro`, would not build.
/// Says so on stderr; a directory without them, or whose crate is there, is left as it is.
pub fn refresh_standalone_build(dir: &Path) -> Result<()> {
    let toml = dir.join("Cargo.toml");
    let Ok(text) = std::fs::read_to_string(&toml) else {
        return Ok(());
    };
    let Some(named) = text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("graphbug-repro = { path = \"")?
            .split('"')
            .next()
    }) else {
        return Ok(());
    };
    if Path::new(named).join("Cargo.toml").is_file() {
        return Ok(());
    }
    write_text(dir, "Cargo.toml", &codegen::cargo_toml())?;
    std::fs::create_dir_all(dir.join(".cargo")).map_err(|e| ReproError::io(dir, e))?;
    write_text(dir, ".cargo/config.toml", &codegen::cargo_config())?;
    eprintln!(
        "note: {} named the repro crate at {named}, which is not there; its standalone build files now name this graphbug's ({})",
        toml.display(),
        codegen::workspace_root().display()
    );
    Ok(())
}

/// graphbug's eager outputs of the case.
pub fn eager_outputs(case: &ReproCase) -> Result<Vec<Option<Tensor>>> {
    let device = case.device()?;
    seed_random_ops();
    Ok(Interpreter::new(&case.graph, &device, &case.constants)?.run(&case.input_copies())?)
}

/// Reads a repro directory; each problem names the file at fault.
pub fn read_repro_dir(dir: &Path) -> Result<ReproCase> {
    read_repro_dir_with_graph(dir, None)
}

/// The seed libtorch's generator is set to before every run that is compared with another
/// (eager against the backend): graphs with dropout then draw the same masks in both, as
/// repro.py does with `torch.manual_seed`.
pub const RUN_SEED: i64 = 0;

/// Seeds libtorch's default generator with [`RUN_SEED`] (see there).
pub fn seed_random_ops() {
    tch::manual_seed(RUN_SEED);
}

/// Which of `inputs` require grad: in a training step (see [`Manifest::training`]) every
/// floating one, as `repro GRAPH` differentiates them; otherwise none.
pub fn requires_grad(inputs: &[Tensor], training: bool) -> Vec<bool> {
    inputs
        .iter()
        .map(|t| training && t.is_floating_point())
        .collect()
}

/// The example inputs a backend compiles `inputs` for, those marked in `requires_grad`
/// requiring grad.
pub fn examples_for(
    inputs: &[Tensor],
    requires_grad: &[bool],
) -> Vec<graphbug_backends::ExampleInput> {
    inputs
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            graphbug_aten::dtype::meta_of(t).map(|m| graphbug_backends::ExampleInput {
                requires_grad: requires_grad.get(i).copied().unwrap_or(false),
                ..graphbug_backends::ExampleInput::new(m)
            })
        })
        .collect()
}

/// Runs a compiled graph on `inputs`; in a training step, then its backward with ones as
/// every output's gradient (as `out.sum().backward()` seeds it). Returns the outputs.
pub fn run_step(
    compiled: &mut dyn graphbug_backends::CompiledFn,
    inputs: &[Tensor],
    training: bool,
) -> std::result::Result<Vec<Option<Tensor>>, graphbug_backends::Failure> {
    let outputs = compiled.run(inputs)?;
    if training {
        compiled.backward(&ones_like_outputs(&outputs))?;
    }
    Ok(outputs)
}

/// Ones as the gradient of every output, the way `out.sum().backward()` seeds a backward.
pub fn ones_like_outputs(outputs: &[Option<Tensor>]) -> Vec<Option<Tensor>> {
    outputs
        .iter()
        .map(|o| o.as_ref().map(Tensor::ones_like))
        .collect()
}

/// Reads a repro directory, taking the graph from `graph_text` instead of graph.py when
/// given (the standalone program embeds its graph).
pub fn read_repro_dir_with_graph(dir: &Path, graph_text: Option<&str>) -> Result<ReproCase> {
    if !dir.is_dir() {
        return Err(ReproError::io(dir, "not a directory"));
    }
    let mpath = dir.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&mpath).map_err(|e| {
        ReproError::io(
            &mpath,
            format!("{e} (is {} a graphbug repro directory?)", dir.display()),
        )
    })?;
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| ReproError::io(&mpath, format!("corrupt manifest: {e}")))?;
    let gpath = dir.join(GRAPH_FILE);
    let written = match graph_text {
        Some(t) => parse_graph(t).map_err(|e| ReproError::Other(format!("embedded graph: {e}")))?,
        None => {
            let t = std::fs::read_to_string(&gpath).map_err(|e| ReproError::io(&gpath, e))?;
            parse_graph(&t).map_err(|e| ReproError::io(&gpath, e))?
        }
    };
    let device: Device = manifest.device.parse().map_err(ReproError::Other)?;
    let tdev = tch_device(&device)?;
    let (inputs, bindings) = match &manifest.inputs {
        InputsRecord::Real => {
            let ipath = dir.join(INPUTS_FILE);
            let mut named = read_tensors(&ipath)?;
            // A dynamic-shape graph (as graphbug_capture writes them) binds its symbols
            // from the recorded inputs' sizes.
            let bound = dynamic::bind_inputs(&written, Some(&mut named), &[])
                .map_err(|e| ReproError::io(&ipath, e))?;
            let inputs = order_tensors(named, &written.placeholder_names(), "inputs")
                .map_err(|e| ReproError::io(&ipath, e))?;
            (inputs, bound.bindings)
        }
        InputsRecord::Random { seed } => {
            // Sizes come from the annotations, symbols from the manifest's bindings.
            let run = dynamic::runnable(&written, &manifest.bindings)
                .map_err(|e| ReproError::io(&mpath, format!("bindings: {e}")))?;
            let metas = run
                .placeholders()
                .iter()
                .map(|&i| match &run.node(i).meta {
                    Meta::Tensor(m) => Ok(m.clone()),
                    _ => Err(ReproError::io(
                        &gpath,
                        format!(
                            "input `{}` has no annotation to draw random values from",
                            run.node(i).name
                        ),
                    )),
                })
                .collect::<Result<Vec<_>>>()?;
            let mut inputs = random_tensors(&metas, *seed, tch::Device::Cpu)?;
            // `Sym` inputs hold their symbols' values, not random numbers.
            for (t, id) in inputs.iter_mut().zip(written.placeholders()) {
                if let Meta::Sym(e) = &written.node(id).meta {
                    let value = e
                        .eval(&manifest.bindings)
                        .map_err(|e| ReproError::io(&mpath, format!("bindings: {e}")))?;
                    *t = Tensor::from(value);
                }
            }
            (inputs, manifest.bindings.clone())
        }
    };
    let cpath = dir.join(CONSTANTS_FILE);
    let constants: HashMap<String, Tensor> = if cpath.exists() {
        read_tensors(&cpath)?.into_iter().collect()
    } else {
        HashMap::new()
    };
    for node in &written.nodes {
        if let NodeKind::GetAttr { target } = &node.kind {
            if !constants.contains_key(target) {
                return Err(ReproError::io(
                    &cpath,
                    format!("no tensor for constant `self.{target}`"),
                ));
            }
        }
    }
    ReproCase::new(
        written,
        &bindings,
        inputs.into_iter().map(|t| t.to_device(tdev)).collect(),
        constants
            .into_iter()
            .map(|(k, t)| (k, t.to_device(tdev)))
            .collect(),
        manifest,
    )
}

/// The absolute form of `path` (for messages and generated files).
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

//! An XLA program as a file holds it, told by its content: HLO text, an HLO proto,
//! StableHLO text or StableHLO bytecode.

use std::collections::BTreeSet;
use std::path::Path;

use graphbug_files::HostTensor;
use graphbug_ir::fault::FaultSpec;
use graphbug_ir::{Graph, Meta, TensorMeta};
use graphbug_pjrt::Partitioning;

use crate::hlo;
use crate::hlo::graph::HloGraph;
use crate::rewrite::{self, Rewrite};
use crate::stablehlo::{self, StableHloGraph};

/// The forms an XLA program comes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// HLO text (`HloModule ...`).
    HloText,
    /// A serialized `HloModuleProto` (`*.hlo.pb`, `--xla_dump_hlo_as_proto`).
    HloProto,
    /// StableHLO (MLIR) text.
    StableHloText,
    /// StableHLO (MLIR) bytecode.
    StableHloBytecode,
}

impl Kind {
    /// The form's name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Kind::HloText => "HLO text",
            Kind::HloProto => "an HLO proto",
            Kind::StableHloText => "StableHLO text",
            Kind::StableHloBytecode => "StableHLO bytecode",
        }
    }
}

/// What kind of XLA program `bytes` (read from `path`) hold, if they hold one: by content
/// (an `HloModule` header, an MLIR `module`, bytecode's magic); a proto, which has no
/// magic, by its extension (`.pb`) or by reading as an `HloModuleProto`. `None` for
/// anything else (an aten graph).
pub fn sniff(bytes: &[u8], path: &Path) -> Option<Kind> {
    if let Some(kind) = by_content(bytes) {
        return Some(kind);
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let named_proto = name.ends_with(".pb") || name.ends_with(".proto") || name.ends_with(".binpb");
    // A proto has no magic: its name says so, or it reads as an HloModuleProto (torch_xla's
    // _get_xla_tensors_hlo_proto bytes saved under any name).
    (named_proto || (!bytes.is_empty() && hlo::proto::from_proto(bytes).is_ok()))
        .then_some(Kind::HloProto)
}

/// The form of `bytes` that [`sniff`] told are an XLA program: StableHLO bytecode or
/// text, or HLO text, by their content; else the HLO proto `sniff` found (not decoded
/// again).
pub fn form_of_told(bytes: &[u8]) -> Kind {
    by_content(bytes).unwrap_or(Kind::HloProto)
}

/// StableHLO bytecode, HLO text or StableHLO text, told by their content.
fn by_content(bytes: &[u8]) -> Option<Kind> {
    if stablehlo::is_bytecode(bytes) {
        return Some(Kind::StableHloBytecode);
    }
    let text = std::str::from_utf8(bytes).ok()?;
    if hlo::text::looks_like_hlo(text) {
        Some(Kind::HloText)
    } else if stablehlo::looks_like_mlir(text) {
        Some(Kind::StableHloText)
    } else {
        None
    }
}

/// An XLA program, read.
#[derive(Clone, Debug)]
pub enum Program {
    /// HLO, from text or a proto.
    Hlo {
        /// The module (as text reads it; a proto's as its text).
        module: hlo::text::Module,
        /// Where it came from.
        kind: Kind,
    },
    /// StableHLO text.
    StableHlo(stablehlo::Module),
    /// StableHLO bytecode, which graphbug runs as is but cannot read without MLIR.
    Bytecode {
        /// The bytes, as the plugin is given them.
        bytes: Vec<u8>,
        /// The module MLIR reads from them, read once when first asked for (each read is a
        /// Python process: see [`stablehlo::mlir_to_text`]).
        read: std::sync::OnceLock<Result<stablehlo::Module, ProgramError>>,
    },
}

/// The StableHLO module MLIR reads from `bytes` (bytecode, or text graphbug does not read
/// itself), printed pretty and read by graphbug.
fn read_through_mlir(bytes: &[u8]) -> Result<stablehlo::Module, ProgramError> {
    let pretty = stablehlo::mlir_to_text(bytes).map_err(ProgramError)?;
    stablehlo::parse_module(&pretty).map_err(|e| ProgramError(e.to_string()))
}

/// An XLA program that cannot be read: the form, and why (with `line:column` for text).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProgramError(pub String);

/// A computation a program calls (an HLO computation, a StableHLO function), as a program
/// of its own: the called computation alone.
#[derive(Clone, Debug)]
pub struct Outlined {
    /// The program's text, in the dialect of the program it came from.
    pub text: String,
    /// For each parameter of its entry, which array of the computation's parameters it
    /// holds: the parameter's number, and the index path into a tuple (`(k, [i, j])`:
    /// element `j` of element `i` of parameter `k`; empty for an array parameter).
    pub parameters: Vec<(usize, Vec<usize>)>,
    /// Where the outline itself knows what each parameter receives: the names of the
    /// caller's values, in parameter order (a `stablehlo.while`'s region: the values that
    /// start the loop, then the values of main it reads). Empty otherwise: the caller's
    /// operands say (see `graphbug_xla::minify::called_values`).
    pub sources: Vec<String>,
}

/// `names` and every computation they call in turn: `calls` gives the computations one
/// (by name) calls. For HLO computations and StableHLO functions alike.
pub(crate) fn with_callees<I: IntoIterator<Item = String>>(
    mut names: BTreeSet<String>,
    calls: impl Fn(&str) -> I,
) -> BTreeSet<String> {
    let mut todo: Vec<String> = names.iter().cloned().collect();
    while let Some(name) = todo.pop() {
        for callee in calls(&name) {
            if names.insert(callee.clone()) {
                todo.push(callee);
            }
        }
    }
    names
}

/// How many devices an HLO sharding (`{devices=[2,1,2]<=[4] last_tile_dim_replicate}`,
/// `{maximal device=3}`, a tuple's `{{...}, {...}}`) names: the largest tile grid's cells,
/// or the highest device number named alone, plus one; 1 for `{replicated}`.
fn sharding_devices(text: &str) -> usize {
    let grids = lists_after(text, "devices=[").map(|grid| {
        grid.split(',')
            .map(|d| d.trim().parse::<usize>().unwrap_or(1))
            .product::<usize>()
    });
    let maximal = text.match_indices("device=").filter_map(|(at, _)| {
        let digits: String = text[at + "device=".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse::<usize>().ok().map(|d| d + 1)
    });
    grids.chain(maximal).fold(1, usize::max)
}

/// How many devices the largest Shardy mesh in `text` has (`#sdy.mesh<["data"=2,
/// "model"=2]>`, as JAX's HLO names its meshes in the module's `xla.sdy.meshes`): the
/// product of its axes' sizes; 1 where there is none.
fn mesh_devices(text: &str) -> usize {
    lists_after(text, "#sdy.mesh<[")
        .map(|axes| {
            axes.split(',')
                .filter_map(|axis| axis.rsplit_once('=')?.1.trim().parse::<usize>().ok())
                .product::<usize>()
        })
        .fold(1, usize::max)
}

/// The text between each `prefix` (which ends in `[`) in `text` and the `]` after it.
fn lists_after<'a>(text: &'a str, prefix: &'a str) -> impl Iterator<Item = &'a str> {
    text.match_indices(prefix).map(move |(at, _)| {
        let rest = &text[at + prefix.len()..];
        &rest[..rest.find(']').unwrap_or(rest.len())]
    })
}

/// Values printed into a program cut from another as constants, by the name of the
/// parameter each replaces (see `graphbug_minifier::Form::constants`).
pub type Constants = std::collections::HashMap<String, HostTensor>;

impl Program {
    /// Reads `bytes` as a program of `kind`.
    pub fn read(bytes: &[u8], kind: Kind) -> Result<Program, ProgramError> {
        let text = || {
            std::str::from_utf8(bytes)
                .map_err(|e| ProgramError(format!("{} is not UTF-8: {e}", kind.name())))
        };
        Ok(match kind {
            Kind::HloText => Program::Hlo {
                module: hlo::text::parse_module(text()?)
                    .map_err(|e| ProgramError(e.to_string()))?,
                kind,
            },
            Kind::HloProto => Program::Hlo {
                module: hlo::proto::from_proto(bytes)
                    .map_err(|e| ProgramError(format!("not an HLO module proto: {e}")))?,
                kind,
            },
            // Generic form, or a bare function: MLIR prints it pretty, in a module.
            Kind::StableHloText if stablehlo::needs_mlir(text()?) => {
                Program::StableHlo(read_through_mlir(bytes)?)
            }
            Kind::StableHloText => Program::StableHlo(
                stablehlo::parse_module(text()?).map_err(|e| ProgramError(e.to_string()))?,
            ),
            Kind::StableHloBytecode => Program::Bytecode {
                bytes: bytes.to_vec(),
                read: std::sync::OnceLock::new(),
            },
        })
    }

    /// The program as text: HLO exactly as it was read (a proto's as XLA prints it),
    /// StableHLO as written (generic form and bare functions as MLIR prints them: pretty,
    /// in a module); bytecode only through MLIR (see
    /// [`stablehlo::mlir_to_text`]).
    pub fn text(&self) -> Result<String, ProgramError> {
        match self {
            Program::Hlo { module, .. } => Ok(hlo::text::print_module(module)),
            Program::StableHlo(m) => Ok(m.text.clone()),
            Program::Bytecode { .. } => self.as_text()?.text(),
        }
    }

    /// Checks the program (see [`hlo::check`] and [`stablehlo::check`]): its instructions
    /// (or the main function's statements), parameters and outputs.
    pub fn check(&self) -> Result<(usize, usize, usize), ProgramError> {
        match self {
            Program::Hlo { module, .. } => {
                let c = hlo::check::check(module).map_err(|e| ProgramError(e.to_string()))?;
                // What a plugin is given is the proto: an opcode or attribute it cannot
                // hold is the program's problem, found here rather than at compile time.
                hlo::proto::to_proto(module).map_err(|e| ProgramError(e.to_string()))?;
                Ok((c.instructions, c.parameters, c.outputs))
            }
            Program::StableHlo(m) => stablehlo::check(m).map_err(|e| ProgramError(e.to_string())),
            Program::Bytecode { .. } => self.as_text()?.check(),
        }
    }

    /// What counts are called for this program's form: `instructions` or `statements`.
    pub fn unit(&self) -> &'static str {
        match self {
            Program::Hlo { .. } => "instructions",
            _ => "statements",
        }
    }

    /// The graph the targets of `spec` are found in: [`Program::graph`], with, for an HLO
    /// program and a fault on an instruction the entry lacks, the instructions of every
    /// other computation (see [`HloGraph::fault_graph`]).
    pub fn fault_graph(&self, spec: &FaultSpec) -> Result<Graph, ProgramError> {
        match self {
            Program::Hlo { module, .. } => HloGraph::new(module)
                .map(|g| g.fault_graph(spec).into_owned())
                .map_err(|e| ProgramError(e.to_string())),
            _ => self.graph(),
        }
    }

    /// The program's graph: HLO's entry computation or StableHLO's main function (see
    /// [`HloGraph`] and [`StableHloGraph`]); bytecode through MLIR's text.
    pub fn graph(&self) -> Result<Graph, ProgramError> {
        match self {
            Program::Hlo { module, .. } => HloGraph::new(module)
                .map(|g| g.graph)
                .map_err(|e| ProgramError(e.to_string())),
            Program::StableHlo(m) => StableHloGraph::new(m)
                .map(|g| g.graph)
                .map_err(|e| ProgramError(e.to_string())),
            Program::Bytecode { .. } => self.as_text()?.graph(),
        }
    }

    /// The program with bytecode read as StableHLO text (through MLIR: see
    /// [`stablehlo::mlir_to_text`]); text programs as they are.
    pub fn as_text(&self) -> Result<Program, ProgramError> {
        match self {
            Program::Bytecode { bytes, read } => read
                .get_or_init(|| read_through_mlir(bytes))
                .clone()
                .map(Program::StableHlo),
            other => Ok(other.clone()),
        }
    }

    /// The program's parameters in order: their names (HLO's parameter instructions,
    /// StableHLO's `%argN` without the `%`) and metas. A tuple-shaped parameter, or an
    /// element type graphbug cannot hold, is an error naming the parameter.
    pub fn parameters(&self) -> Result<Vec<(String, TensorMeta)>, ProgramError> {
        let graph = self.graph()?;
        graph
            .placeholders()
            .into_iter()
            .map(|id| {
                let node = graph.node(id);
                match &node.meta {
                    Meta::Tensor(t) => Ok((node.name.to_string(), t.clone())),
                    Meta::Multi(_) => Err(ProgramError(format!(
                        "parameter `{}` is a tuple: graphbug passes arrays only (lower the \
                         program with one parameter per array)",
                        node.name
                    ))),
                    _ => Err(ProgramError(format!(
                        "parameter `{}` has no array type graphbug can hold",
                        node.name
                    ))),
                }
            })
            .collect()
    }

    /// The devices the program runs on: XLA's replicas and partitions as the program says
    /// them (an HLO module header's `replica_count` and `num_partitions`, a StableHLO
    /// module's `mhlo.num_replicas` and `mhlo.num_partitions`); for HLO that says neither
    /// (as JAX lowers it), as many partitions as its shardings name devices; partitioned by
    /// Shardy when it was lowered for Shardy (`sdy` shardings, `xla.sdy` attributes and
    /// custom calls). A count that is no positive number is an error naming it.
    pub fn partitioning(&self) -> Result<Partitioning, ProgramError> {
        let count = |key: &str, value: &str| {
            value
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| ProgramError(format!("`{key}={value}` is no count of devices")))
        };
        match self {
            Program::Hlo { module, .. } => {
                let mut p = Partitioning::ONE;
                let mut said = false;
                for a in &module.attrs {
                    match a.key.as_str() {
                        "replica_count" => p.num_replicas = count(&a.key, &a.value)?,
                        "num_partitions" => p.num_partitions = count(&a.key, &a.value)?,
                        _ => continue,
                    }
                    said = true;
                }
                p.shardy = module.header_line.contains("xla.sdy.")
                    || module
                        .computations
                        .iter()
                        .flat_map(|c| &c.instructions)
                        .any(|i| i.text.contains("xla.sdy."));
                if !said {
                    let shardings = module
                        .computations
                        .iter()
                        .flat_map(|c| &c.instructions)
                        .flat_map(|i| &i.attrs)
                        .filter(|a| a.key == "sharding")
                        .map(|a| sharding_devices(&a.value));
                    p.num_partitions = shardings
                        .chain(std::iter::once(mesh_devices(&module.header_line)))
                        .max()
                        .unwrap_or(1);
                }
                Ok(p)
            }
            Program::StableHlo(m) => {
                let header = &m.text[m.header.clone()];
                let mut p = Partitioning {
                    shardy: m.text.contains("sdy.mesh") || m.text.contains("sdy.sharding"),
                    ..Partitioning::ONE
                };
                for (key, slot) in [
                    ("mhlo.num_replicas", &mut p.num_replicas),
                    ("mhlo.num_partitions", &mut p.num_partitions),
                ] {
                    if let Some(at) = header.find(&format!("{key} =")) {
                        let value: String = header[at + key.len() + 2..]
                            .trim_start()
                            .chars()
                            .take_while(char::is_ascii_alphanumeric)
                            .collect();
                        *slot = count(key, &value)?;
                    }
                }
                Ok(p)
            }
            Program::Bytecode { .. } => self.as_text()?.partitioning(),
        }
    }

    /// The program raised to float64 (see [`rewrite`]): HLO stays HLO (a proto's as its
    /// text), StableHLO text (bytecode through MLIR).
    pub fn raise_to_f64(&self) -> Result<Program, ProgramError> {
        self.rewrite(
            |m| m.raise_to_f64().map(|r| r.module),
            |m| m.raise_to_f64().map(|r| r.module),
        )
    }

    /// The program with `spec`'s fault written into it (see [`rewrite`]).
    pub fn inject(&self, spec: &FaultSpec) -> Result<Program, ProgramError> {
        self.rewrite(
            |m| m.inject(spec).map(|r| r.module),
            |m| m.inject(spec).map(|r| r.module),
        )
    }

    fn rewrite(
        &self,
        hlo: impl FnOnce(&hlo::text::Module) -> Result<hlo::text::Module, rewrite::RewriteError>,
        mlir: impl FnOnce(&stablehlo::Module) -> Result<stablehlo::Module, rewrite::RewriteError>,
    ) -> Result<Program, ProgramError> {
        let error = |e: rewrite::RewriteError| ProgramError(e.to_string());
        match self.as_text()? {
            Program::Hlo { module, kind } => Ok(Program::Hlo {
                module: hlo(&module).map_err(error)?,
                kind,
            }),
            Program::StableHlo(m) => Ok(Program::StableHlo(mlir(&m).map_err(error)?)),
            Program::Bytecode { .. } => unreachable!("as_text reads bytecode as text"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hlo(text: &str) -> Program {
        Program::read(text.as_bytes(), Kind::HloText).unwrap()
    }

    #[test]
    fn partitionings_are_read_from_the_program() {
        let header = hlo("HloModule m, replica_count=2, num_partitions=4\n\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n");
        assert_eq!(
            header.partitioning().unwrap(),
            Partitioning {
                num_replicas: 2,
                num_partitions: 4,
                shardy: false
            }
        );
        // JAX's HLO says no counts: its shardings name the devices.
        let jax = hlo("HloModule m\n\nENTRY e {\n  p = f32[8,2] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n  q = f32[8,2] parameter(1), sharding={maximal device=1}\n  ROOT a = f32[8,2] add(p, q)\n}\n");
        assert_eq!(jax.partitioning().unwrap().num_partitions, 4);
        // JAX's shard_map: no sharding but the mesh's.
        let mesh = hlo("HloModule m, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"data\"=2, \"model\"=3]>}}\n\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n");
        let p = mesh.partitioning().unwrap();
        assert!(p.num_partitions == 6 && p.shardy, "{p:?}");
        let plain = hlo(
            "HloModule m\n\nENTRY e {\n  ROOT p = f32[2] parameter(0), sharding={replicated}\n}\n",
        );
        assert_eq!(plain.partitioning().unwrap(), Partitioning::ONE);
        let mlir = "module @m attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {\n  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n    return %arg0 : tensor<2xf32>\n  }\n}\n";
        let p = Program::read(mlir.as_bytes(), Kind::StableHloText).unwrap();
        assert_eq!(p.partitioning().unwrap().num_partitions, 4);
        assert!(!p.partitioning().unwrap().shardy);
        let sdy = mlir.replace("{\n  func", "{\n  sdy.mesh @mesh = <[\"x\"=4]>\n  func");
        let p = Program::read(sdy.as_bytes(), Kind::StableHloText).unwrap();
        assert!(p.partitioning().unwrap().shardy);
        let bad =
            hlo("HloModule m, num_partitions=0\n\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n");
        let err = bad.partitioning().unwrap_err().0;
        assert!(err.contains("num_partitions=0"), "{err}");
    }
}

//! An HLO program made safe to send to a compiler's vendor ([`Scrubbed`]): nothing of its
//! author's but the computation itself. Through its `xla.HloModuleProto`, where every
//! reference is an id, so names can go without breaking one:
//! - removed: every instruction's metadata (op names, source files and lines), the stack
//!   frame table, frontend attributes, original values and profile fingerprints;
//! - renamed: the module (`shared`), its computations (`main`, `computation.N`), and every
//!   instruction (`<opcode>.N`, numbered in the module's order);
//! - replaceable: each `constant`'s literal, by seeded random values of its shape
//!   ([`Scrubbed::text`]); which may be replaced is the caller's to find out.
//!
//! What remains is listed ([`Scrubbed::remains`]): the opcodes, shapes and attributes the
//! computation is made of, and the strings a compiler reads (custom-call targets, backend
//! configs).

use std::collections::BTreeMap;

use graphbug_files::HostTensor;
use graphbug_ir::TensorMeta;

use crate::hlo::proto::schema::xla::{HloModuleProto, ShapeProto};
use crate::hlo::proto::{literal_of_row_major, message_to_text, to_proto_message};
use crate::hlo::text::Module;

/// The module a shared repro's program is renamed to.
pub const SHARED_MODULE: &str = "shared";

/// An HLO module scrubbed of its author's names and metadata; its constants replaceable.
pub struct Scrubbed {
    proto: HloModuleProto,
    /// Each instruction's new name, by its old one.
    pub renamed: BTreeMap<String, String>,
    /// What was removed, as the user is told (`metadata of 412 instructions`).
    pub removed: Vec<String>,
    /// What of the original remains beside the computation's structure.
    pub remains: Vec<String>,
    /// The constants, by new name: where (computation, instruction), and their meta
    /// (`None` for one graphbug cannot make random values of: a tuple, a token).
    constants: Vec<(String, (usize, usize), Option<TensorMeta>)>,
}

impl Scrubbed {
    /// Scrubs `module` (see the module's doc).
    pub fn of(module: &Module) -> Result<Scrubbed, String> {
        let mut proto = to_proto_message(module).map_err(|e| e.to_string())?;
        let mut removed = Vec::new();
        let mut remains = Vec::new();
        let count = |what: &str, n: usize, into: &mut Vec<String>| {
            if n > 0 {
                into.push(format!("{what} ({n})"));
            }
        };
        let instructions = || proto.computations.iter().flat_map(|c| &c.instructions);
        let metadata = instructions().filter(|i| i.metadata.is_some()).count();
        let frontend = instructions()
            .filter(|i| i.frontend_attributes.is_some())
            .count()
            + usize::from(proto.frontend_attributes.is_some());
        let original = instructions()
            .filter(|i| i.original_value.is_some())
            .count();
        let configs: Vec<String> = instructions()
            .filter(|i| !i.backend_config.is_empty())
            .map(|i| i.opcode.clone())
            .collect();
        let targets: Vec<String> = instructions()
            .filter(|i| !i.custom_call_target.is_empty())
            .map(|i| i.custom_call_target.clone())
            .collect();
        count(
            "instructions' metadata: op names, source files and lines",
            metadata,
            &mut removed,
        );
        count(
            "stack frame table",
            usize::from(proto.stack_frame_index.is_some()),
            &mut removed,
        );
        count("frontend attributes", frontend, &mut removed);
        count("original values", original, &mut removed);
        count(
            "profile fingerprints",
            proto.profile_info.len(),
            &mut removed,
        );
        proto.stack_frame_index = None;
        proto.frontend_attributes = None;
        proto.profile_info.clear();
        proto.original_value_recovery_table = None;
        proto.name = SHARED_MODULE.into();
        let mut renamed = BTreeMap::new();
        let mut per_opcode: BTreeMap<String, usize> = BTreeMap::new();
        let mut constants = Vec::new();
        let entry_id = proto.entry_computation_id;
        let mut computations = 0;
        for (c, comp) in proto.computations.iter_mut().enumerate() {
            comp.name = if comp.id == entry_id {
                "main".into()
            } else {
                computations += 1;
                format!("computation.{computations}")
            };
            let mut params: Vec<(i64, String)> = Vec::new();
            for (k, inst) in comp.instructions.iter_mut().enumerate() {
                let n = per_opcode.entry(inst.opcode.clone()).or_default();
                *n += 1;
                let new = format!("{}.{n}", inst.opcode);
                renamed.insert(std::mem::replace(&mut inst.name, new.clone()), new.clone());
                inst.metadata = None;
                inst.frontend_attributes = None;
                inst.original_value = None;
                if inst.opcode == "parameter" {
                    params.push((inst.parameter_number, new.clone()));
                }
                if inst.opcode == "constant" {
                    let meta = inst.shape.as_ref().and_then(meta_of);
                    constants.push((new, (c, k), meta));
                }
            }
            params.sort();
            if let Some(shape) = comp.program_shape.as_mut() {
                shape.parameter_names = params.iter().map(|(_, n)| n.clone()).collect();
            }
            if comp.id == entry_id {
                proto.entry_computation_name = comp.name.clone();
                if let Some(shape) = proto.host_program_shape.as_mut() {
                    shape.parameter_names = params.iter().map(|(_, n)| n.clone()).collect();
                }
            }
        }
        removed.push(format!(
            "the names of the module, its {} computations and {} instructions (renamed)",
            proto.computations.len(),
            renamed.len()
        ));
        count(
            "backend configs, read by the compiler",
            configs.len(),
            &mut remains,
        );
        if !targets.is_empty() {
            let mut targets = targets;
            targets.sort();
            targets.dedup();
            remains.push(format!("custom-call targets: {}", targets.join(", ")));
        }
        Ok(Scrubbed {
            proto,
            renamed,
            removed,
            remains,
            constants,
        })
    }

    /// The constants' new names and metas, in the module's order (`None`: not replaceable).
    pub fn constants(&self) -> Vec<(String, Option<TensorMeta>)> {
        self.constants
            .iter()
            .map(|(n, _, m)| (n.clone(), m.clone()))
            .collect()
    }

    /// The scrubbed module's text (as XLA prints it), the constants `replaced` (by new
    /// name) holding the values given, row-major.
    pub fn text(&self, replaced: &BTreeMap<String, HostTensor>) -> Result<String, String> {
        let mut proto = self.proto.clone();
        for (name, (c, k), _) in &self.constants {
            let Some(values) = replaced.get(name) else {
                continue;
            };
            let inst = &mut proto.computations[*c].instructions[*k];
            let shape = inst
                .shape
                .clone()
                .ok_or_else(|| format!("constant `{name}` has no shape"))?;
            inst.literal = Some(
                literal_of_row_major(&shape, &values.data)
                    .map_err(|e| format!("constant `{name}`: {e}"))?,
            );
        }
        message_to_text(&proto).map_err(|e| e.to_string())
    }
}

/// The meta of an array shape graphbug holds; `None` for a tuple, a token, a dynamic size.
fn meta_of(shape: &ShapeProto) -> Option<TensorMeta> {
    let ty = crate::hlo::proto::element_name_of(shape.element_type)?;
    let dtype = crate::hlo::shape::dtype_of(&ty)?;
    if shape.is_dynamic_dimension.iter().any(|d| *d) {
        return None;
    }
    Some(TensorMeta::new(dtype, &shape.dimensions))
}

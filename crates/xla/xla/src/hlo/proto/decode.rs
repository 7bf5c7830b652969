//! An `xla.HloModuleProto` → HLO text in XLA's current style (JAX's: no `%`, no operand
//! shapes, no computation signatures), as XLA prints it. A field no text carries is an error
//! naming it.

use std::collections::HashMap;
use std::fmt::Write;

use prost::Message;

use super::attrs::{self, print_frontend, Ctx, OPCODES};
use super::literal::print_literal;
use super::schema::xla::{
    HloComputationProto, HloInstructionProto, HloModuleProto, ProgramShapeProto, ShapeProto,
    StackFrameIndexProto,
};
use super::shapes::print_shape;
use super::syntax::{print_ints, print_string};
use super::wire::first_set_field;
use crate::hlo::text::HloError;

fn err(message: String, instruction: Option<&str>) -> HloError {
    HloError {
        line: 0,
        column: 0,
        message,
        instruction: instruction.map(str::to_string),
    }
}

/// The text XLA prints for a module proto.
pub(crate) fn proto_to_text(proto: &HloModuleProto) -> Result<String, HloError> {
    let mut rest = proto.clone();
    // XLA reads computations and their instructions in the order of their ids.
    let mut comps = std::mem::take(&mut rest.computations);
    comps.sort_by_key(|c| c.id);
    for c in &mut comps {
        c.instructions.sort_by_key(|i| i.id);
    }
    let name = std::mem::take(&mut rest.name);
    let entry_name = std::mem::take(&mut rest.entry_computation_name);
    let entry_id = std::mem::take(&mut rest.entry_computation_id);
    let host = rest.host_program_shape.take();
    let schedule = rest.schedule.take().unwrap_or_default().sequences;
    let aliases = rest.input_output_alias.take().unwrap_or_default().entries;
    let donors = rest.buffer_donor.take().unwrap_or_default().entries;
    let frontend = rest.frontend_attributes.take().unwrap_or_default().map;
    let frames = rest.stack_frame_index.take();
    rest.id = 0; // The module's id is not printed (XLA numbers modules itself).
    if let Some(field) = first_set_field(&rest.encode_to_vec(), "xla.HloModuleProto") {
        return Err(err(
            format!("field xla.HloModuleProto.{field} is not mapped to text"),
            None,
        ));
    }
    let mut comp_names: HashMap<i64, String> = HashMap::new();
    for c in &comps {
        if comp_names.insert(c.id, c.name.clone()).is_some() {
            return Err(err(format!("two computations have id {}", c.id), None));
        }
    }
    let entry = comps
        .iter()
        .position(|c| c.id == entry_id && (entry_name.is_empty() || c.name == entry_name))
        .ok_or_else(|| {
            err(
                format!("no entry computation `{entry_name}` of id {entry_id}"),
                None,
            )
        })?;
    let mut out = format!("HloModule {name}");
    if !schedule.is_empty() {
        out.push_str(", is_scheduled=true");
    }
    if !aliases.is_empty() {
        let parts: Vec<String> = aliases
            .iter()
            .map(|a| {
                let kind = match a.kind {
                    2 => "must-alias",
                    _ => "may-alias",
                };
                format!(
                    "{}: ({}, {}, {kind})",
                    print_ints(&a.output_shape_index),
                    a.parameter_number,
                    print_ints(&a.parameter_shape_index)
                )
            })
            .collect();
        let _ = write!(out, ", input_output_alias={{ {} }}", parts.join(", "));
    }
    if !donors.is_empty() {
        let parts: Vec<String> = donors
            .iter()
            .map(|d| {
                format!(
                    "({}, {})",
                    d.parameter_number,
                    print_ints(&d.parameter_shape_index)
                )
            })
            .collect();
        let _ = write!(out, ", buffer_donor={{ {} }}", parts.join(", "));
    }
    if let Some(host) = &host {
        let layout =
            program_shape(host).map_err(|e| err(format!("host_program_shape: {e}"), None))?;
        let _ = write!(out, ", entry_computation_layout={{{layout}}}");
    }
    if !frontend.is_empty() {
        let _ = write!(out, ", frontend_attributes={}", print_frontend(&frontend));
    }
    out.push_str("\n\n");
    // An empty index (PyTorch/XLA writes one into every module) prints no tables, as XLA's.
    if let Some(frames) = frames.as_ref().filter(|f| {
        !(f.file_names.is_empty()
            && f.function_names.is_empty()
            && f.file_locations.is_empty()
            && f.stack_frames.is_empty())
    }) {
        stack_frames(frames, &mut out);
    }
    for k in print_order(&comps)? {
        let c = &comps[k];
        let order = schedule.get(&c.id).map(|s| s.instruction_ids.as_slice());
        computation(c, k == entry, order, &comp_names, &mut out)?;
        out.push_str("\n\n");
    }
    Ok(out)
}

/// XLA's stack-frame tables, as it prints them (a frame's `parent_frame_id` one more than
/// the proto's).
fn stack_frames(f: &StackFrameIndexProto, out: &mut String) {
    out.push_str("FileNames\n");
    for (k, name) in f.file_names.iter().enumerate() {
        let _ = writeln!(out, "{} {}", k + 1, print_string(name));
    }
    out.push_str("\nFunctionNames\n");
    for (k, name) in f.function_names.iter().enumerate() {
        let _ = writeln!(out, "{} {}", k + 1, print_string(name));
    }
    out.push_str("\nFileLocations\n");
    for (k, l) in f.file_locations.iter().enumerate() {
        let _ = writeln!(
            out,
            "{} {{file_name_id={} function_name_id={} line={} end_line={} column={} end_column={}}}",
            k + 1,
            l.file_name_id,
            l.function_name_id,
            l.line,
            l.end_line,
            l.column,
            l.end_column
        );
    }
    out.push_str("\nStackFrames\n");
    for (k, s) in f.stack_frames.iter().enumerate() {
        let _ = writeln!(
            out,
            "{} {{file_location_id={} parent_frame_id={}}}",
            k + 1,
            s.file_location_id,
            s.parent_frame_id + 1
        );
    }
    out.push_str("\n\n");
}

/// The order XLA prints computations in (`HloModule::MakeComputationPostOrder`): for each
/// computation no instruction calls, in order, the computations it calls depth first
/// (`MakeEmbeddedComputationsList`), then itself.
fn print_order(comps: &[HloComputationProto]) -> Result<Vec<usize>, HloError> {
    let index: HashMap<i64, usize> = comps.iter().enumerate().map(|(k, c)| (c.id, k)).collect();
    let calls = |k: usize| -> Vec<usize> {
        comps[k]
            .instructions
            .iter()
            .flat_map(|i| i.called_computation_ids.iter())
            .filter_map(|id| index.get(id).copied())
            .collect()
    };
    let mut called = vec![false; comps.len()];
    for k in 0..comps.len() {
        for c in calls(k) {
            called[c] = true;
        }
    }
    let mut added = vec![false; comps.len()];
    let mut order = Vec::with_capacity(comps.len());
    for root in (0..comps.len()).filter(|k| !called[*k]) {
        // An explicit stack of (computation, next instruction), callees pushed last first.
        let mut visited = vec![false; comps.len()];
        let mut embedded = Vec::new();
        let mut stack: Vec<(usize, usize)> = Vec::new();
        let push_callees =
            |ids: &[i64], stack: &mut Vec<(usize, usize)>, visited: &mut Vec<bool>| {
                for id in ids.iter().rev() {
                    if let Some(&c) = index.get(id) {
                        if !visited[c] {
                            visited[c] = true;
                            stack.push((c, 0));
                        }
                    }
                }
            };
        for inst in &comps[root].instructions {
            push_callees(&inst.called_computation_ids, &mut stack, &mut visited);
            while let Some(top) = stack.last_mut() {
                let (c, next) = *top;
                if next == comps[c].instructions.len() {
                    stack.pop();
                    embedded.push(c);
                } else {
                    top.1 += 1;
                    let ids = &comps[c].instructions[next].called_computation_ids;
                    push_callees(ids, &mut stack, &mut visited);
                }
            }
        }
        for c in embedded {
            if !added[c] {
                added[c] = true;
                order.push(c);
            }
        }
        added[root] = true;
        order.push(root);
    }
    if order.len() != comps.len() {
        return Err(err(
            "the computations call each other in a cycle".into(),
            None,
        ));
    }
    Ok(order)
}

/// `(p0, p1)->result`, with XLA's `/*index=N*/` every fifth parameter.
fn program_shape(p: &ProgramShapeProto) -> Result<String, String> {
    let params: Vec<String> = p
        .parameters
        .iter()
        .map(print_shape)
        .collect::<Result<_, _>>()?;
    let result = print_shape(p.result.as_ref().ok_or("no result shape")?)?;
    Ok(format!("({})->{result}", annotated(&params)))
}

/// Items joined by `, `, with `/*index=N*/` before every fifth.
pub(crate) fn annotated(items: &[String]) -> String {
    let mut out = String::new();
    for (k, item) in items.iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
            if k % 5 == 0 {
                let _ = write!(out, "/*index={k}*/");
            }
        }
        out.push_str(item);
    }
    out
}

fn computation(
    c: &HloComputationProto,
    is_entry: bool,
    order: Option<&[i64]>,
    comp_names: &HashMap<i64, String>,
    out: &mut String,
) -> Result<(), HloError> {
    let cerr = |m: String, i: Option<&str>| err(format!("computation `{}`: {m}", c.name), i);
    let mut rest = c.clone();
    let instructions = std::mem::take(&mut rest.instructions);
    rest.name.clear();
    rest.program_shape = None;
    rest.id = 0;
    rest.root_id = 0;
    rest.is_fusion_computation = false;
    let thread = std::mem::take(&mut rest.execution_thread);
    if let Some(field) = first_set_field(&rest.encode_to_vec(), "xla.HloComputationProto") {
        return Err(cerr(
            format!("field xla.HloComputationProto.{field} is not mapped to text"),
            None,
        ));
    }
    let mut inst_names: HashMap<i64, String> = HashMap::new();
    let mut shapes: HashMap<i64, ShapeProto> = HashMap::new();
    for i in &instructions {
        if inst_names.insert(i.id, i.name.clone()).is_some() {
            return Err(cerr(
                format!("two instructions have id {}", i.id),
                Some(&i.name),
            ));
        }
        shapes.insert(i.id, i.shape.clone().unwrap_or_default());
    }
    let by_id: HashMap<i64, &HloInstructionProto> =
        instructions.iter().map(|i| (i.id, i)).collect();
    let ordered: Vec<&HloInstructionProto> = match order {
        Some(ids) => {
            if ids.len() != instructions.len() {
                return Err(cerr(
                    "its schedule does not hold every instruction".into(),
                    None,
                ));
            }
            ids.iter()
                .map(|id| {
                    by_id.get(id).copied().ok_or_else(|| {
                        cerr(format!("its schedule names unknown instruction {id}"), None)
                    })
                })
                .collect::<Result<_, _>>()?
        }
        None => super::encode::post_order(&instructions)
            .into_iter()
            .map(|k| &instructions[k])
            .collect(),
    };
    if !by_id.contains_key(&c.root_id) {
        return Err(cerr(
            format!("no root instruction of id {}", c.root_id),
            None,
        ));
    }
    if is_entry {
        out.push_str("ENTRY ");
    }
    out.push_str(&c.name);
    out.push_str(" {\n");
    for i in ordered {
        let line = instruction(i, i.id == c.root_id, &inst_names, &shapes, comp_names)
            .map_err(|m| cerr(m, Some(&i.name)))?;
        out.push_str(&line);
        out.push('\n');
    }
    out.push('}');
    // XLA prints a computation's thread after it, where it is not the main one.
    if !thread.is_empty() && thread != "main" {
        let _ = write!(
            out,
            ", execution_thread={}",
            super::syntax::print_string(&thread)
        );
    }
    Ok(())
}

fn instruction(
    i: &HloInstructionProto,
    is_root: bool,
    inst_names: &HashMap<i64, String>,
    shapes: &HashMap<i64, ShapeProto>,
    comp_names: &HashMap<i64, String>,
) -> Result<String, String> {
    let mut p = i.clone();
    let name = std::mem::take(&mut p.name);
    let opcode = std::mem::take(&mut p.opcode);
    if !OPCODES.contains(&opcode.as_str()) {
        return Err(format!(
            "unknown opcode `{opcode}` (not one of XLA's HLO opcodes)"
        ));
    }
    let shape = print_shape(&p.shape.take().ok_or("no shape")?)?;
    p.id = 0;
    let operand_ids = std::mem::take(&mut p.operand_ids);
    let mut operands = Vec::new();
    let mut operand_shapes = Vec::new();
    for id in &operand_ids {
        operands.push(
            inst_names
                .get(id)
                .cloned()
                .ok_or_else(|| format!("operand id {id} is not in this computation"))?,
        );
        operand_shapes.push(shapes[id].clone());
    }
    let inside = match opcode.as_str() {
        "parameter" => std::mem::take(&mut p.parameter_number).to_string(),
        "constant" => print_literal(&p.literal.take().ok_or("a constant without a literal")?)?,
        _ => annotated(&operands),
    };
    if !operands.is_empty() && matches!(opcode.as_str(), "parameter" | "constant") {
        return Err(format!("a {opcode} with operands"));
    }
    let no_ids = HashMap::new();
    let mut ctx = Ctx {
        inst: &mut p,
        comp_ids: &no_ids,
        comp_names,
        inst_ids: &no_ids,
        inst_names,
        operand_shapes: &operand_shapes,
        called: Vec::new(),
    };
    ctx.called = std::mem::take(&mut ctx.inst.called_computation_ids)
        .into_iter()
        .map(Some)
        .collect();
    let attrs = attrs::decode(&opcode, &mut ctx)?;
    if let Some(id) = ctx.called.iter().flatten().next() {
        return Err(format!(
            "called computation {} is not printed for opcode `{opcode}`",
            comp_names
                .get(id)
                .map_or_else(|| id.to_string(), |n| format!("`{n}`"))
        ));
    }
    if let Some(field) = first_set_field(&p.encode_to_vec(), "xla.HloInstructionProto") {
        return Err(format!(
            "field xla.HloInstructionProto.{field} is not mapped to text for opcode `{opcode}`"
        ));
    }
    let mut line = String::from("  ");
    if is_root {
        line.push_str("ROOT ");
    }
    let _ = write!(line, "{name} = {shape} {opcode}({inside})");
    for (k, v) in attrs {
        let _ = write!(line, ", {k}={v}");
    }
    Ok(line)
}

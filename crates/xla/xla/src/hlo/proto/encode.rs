//! A module read from text → the `xla.HloModuleProto` XLA's parser makes of the same text:
//! ids as XLA numbers them (a computation's index in the text; an instruction's
//! `computation << 32 | index`), instructions in XLA's post order, layouts filled, program
//! shapes, `host_program_shape` (which PJRT needs) and the entry.

use std::collections::HashMap;

use super::attrs::{self, parse_frontend, Ctx, OPCODES};
use super::literal::parse_literal;
use super::schema::xla::stack_frame_index_proto::{FileLocation, StackFrame};
use super::schema::xla::StackFrameIndexProto;
use super::schema::xla::{
    hlo_buffer_donor_proto::BufferDonorEntryProto, hlo_input_output_alias_proto::AliasEntryProto,
    hlo_schedule_proto::InstructionSequence, FrontendAttributes, HloBufferDonorProto,
    HloComputationProto, HloInputOutputAliasProto, HloInstructionProto, HloModuleProto,
    HloScheduleProto, ProgramShapeProto, ShapeProto,
};
use super::shapes::shape_to_proto;
use super::syntax::{braced, parse_bool, parse_int, parse_ints, parse_string, split_top, words};
use crate::hlo::shape::{parse_shape, skip_spaces_and_comments, Shape};
use crate::hlo::text::{Computation, HloError, Instruction, Module, Operands, STACK_FRAME_TABLES};

/// An error at `needle` in instruction `i`'s text (its start if absent; the line it is
/// written on, for an instruction written inside another's operands).
fn at(i: &Instruction, needle: &str, message: String) -> HloError {
    let (line, column) = match i.own_text().find(needle) {
        Some(p) => i.locate(i.start + p),
        None => (i.line, 1),
    };
    HloError {
        line,
        column,
        message,
        instruction: Some(i.name.clone()),
    }
}

fn at_line(line: usize, text: &str, needle: &str, message: String) -> HloError {
    HloError {
        line,
        column: text.find(needle).map_or(1, |c| c + 1),
        message,
        instruction: None,
    }
}

/// XLA's `NameUniquer`: the first instruction of a name keeps it, later ones (in any
/// computation) get the next free `.N` of its root.
#[derive(Default)]
struct Uniquer {
    roots: HashMap<String, (std::collections::HashSet<i64>, i64)>,
}

impl Uniquer {
    fn unique(&mut self, name: &str) -> String {
        let (mut root, mut suffix, mut numbered) = (name.to_string(), 0i64, false);
        if let Some(dot) = name.rfind('.') {
            if dot > 0 && dot < name.len() - 1 {
                if let Ok(n) = name[dot + 1..].parse::<i64>() {
                    root = name[..dot].to_string();
                    suffix = n;
                    numbered = true;
                }
            }
        }
        let (used, next) = self.roots.entry(root.clone()).or_default();
        if !used.insert(suffix) {
            while !used.insert(*next) {
                *next += 1;
            }
            suffix = *next;
            *next += 1;
        }
        if suffix == 0 && !numbered {
            root
        } else {
            format!("{root}.{suffix}")
        }
    }
}

/// The module as the proto XLA's parser makes of its text.
pub(crate) fn module_to_proto(m: &Module) -> Result<HloModuleProto, HloError> {
    let header_line = m.leading.matches('\n').count() + 1;
    let comp_ids: HashMap<String, i64> = m
        .computations
        .iter()
        .enumerate()
        .map(|(k, c)| (c.name.clone(), k as i64))
        .collect();
    if comp_ids.len() != m.computations.len() {
        let dup = m
            .computations
            .iter()
            .enumerate()
            .find(|(k, c)| comp_ids[&c.name] != *k as i64)
            .map(|(_, c)| c)
            .expect("a duplicate exists");
        return Err(at_line(
            dup.line,
            &dup.header_line,
            &dup.name,
            format!("computation `{}` is defined twice", dup.name),
        ));
    }
    let mut fused = Vec::new();
    let mut uniquer = Uniquer::default();
    let mut comps = Vec::with_capacity(m.computations.len());
    let mut wrapped = Wrapped {
        next_id: m.computations.len() as i64,
        names: comp_ids.keys().cloned().collect(),
        made: Vec::new(),
    };
    for (k, c) in m.computations.iter().enumerate() {
        comps.push(computation_to_proto(
            c,
            k as i64,
            &comp_ids,
            &mut fused,
            &mut uniquer,
            &mut wrapped,
        )?);
    }
    // The computations XLA's parser makes for async shorthands (`abs-start`), after the
    // text's: a computation's id is its index.
    for c in wrapped.made {
        let order = c.instructions.iter().map(|i| i.id).collect();
        comps.push((c, order));
    }
    for (c, _) in &mut comps {
        c.is_fusion_computation = fused.contains(&c.id);
    }
    let entry_index = m.entry().ok_or_else(|| HloError {
        line: header_line,
        column: 1,
        message: format!("module `{}` has no ENTRY computation", m.name),
        instruction: None,
    })?;
    let entry = &comps[entry_index].0;
    let mut proto = HloModuleProto {
        name: m.name.clone(),
        entry_computation_name: entry.name.clone(),
        entry_computation_id: entry.id,
        ..HloModuleProto::default()
    };
    let mut host = entry.program_shape.clone().unwrap_or_default();
    host.parameter_names = (0..host.parameters.len())
        .map(|k| format!("p{k}"))
        .collect();
    let err = |key: &str, message: String| {
        at_line(
            header_line,
            &m.header_line,
            key,
            format!("attribute `{key}`: {message}"),
        )
    };
    for a in &m.attrs {
        let v = a.value.as_str();
        match a.key.as_str() {
            "entry_computation_layout" => {
                host = parse_program_shape(v).map_err(|e| err(&a.key, e))?;
            }
            "is_scheduled" => {
                if parse_bool(v).map_err(|e| err(&a.key, e))? {
                    proto.schedule = Some(schedule(&comps));
                }
            }
            "input_output_alias" => {
                proto.input_output_alias = Some(parse_aliases(v).map_err(|e| err(&a.key, e))?);
            }
            "buffer_donor" => {
                proto.buffer_donor = Some(parse_donors(v).map_err(|e| err(&a.key, e))?);
            }
            "frontend_attributes" => {
                proto.frontend_attributes = Some(FrontendAttributes {
                    map: parse_frontend(v).map_err(|e| err(&a.key, e))?,
                });
            }
            // The module's configuration, which XLA keeps beside the proto (its
            // `HloModuleConfig`; PJRT takes it as compile options), not in it.
            "replica_count" | "num_partitions" => {
                if parse_int(v).map_err(|e| err(&a.key, e))? < 1 {
                    return Err(err(&a.key, format!("`{v}` is no count")));
                }
            }
            "alias_passthrough_params" => {
                parse_bool(v).map_err(|e| err(&a.key, e))?;
            }
            "allow_spmd_sharding_propagation_to_output"
            | "allow_spmd_sharding_propagation_to_parameters" => {
                let inner = braced(v, "booleans").map_err(|e| err(&a.key, e))?;
                for b in split_top(inner, b',') {
                    parse_bool(b).map_err(|e| err(&a.key, e))?;
                }
            }
            key => {
                return Err(err(
                    key,
                    "module attribute is not mapped to the proto".to_string(),
                ))
            }
        }
    }
    if let Some(first) = m.computations.first() {
        proto.stack_frame_index = parse_stack_frames(&first.leading).map_err(|e| HloError {
            line: header_line,
            column: 1,
            message: format!("the stack frame tables: {e}"),
            instruction: None,
        })?;
    }
    proto.host_program_shape = Some(host);
    proto.computations = callees_first(comps, m)?;
    Ok(proto)
}

/// XLA's stack-frame tables (`FileNames`, `FunctionNames`, `FileLocations`, `StackFrames`,
/// each `N value` lines); `None` when the text has none. A printed `parent_frame_id` is one
/// more than the proto's, as XLA prints and reads it.
fn parse_stack_frames(text: &str) -> Result<Option<StackFrameIndexProto>, String> {
    let mut index = StackFrameIndexProto::default();
    let mut table = None;
    let mut any = false;
    for line in text.lines().map(str::trim) {
        if STACK_FRAME_TABLES.contains(&line) {
            table = Some(line);
            any = true;
            continue;
        }
        if line.is_empty() || line.starts_with("//") {
            table = None;
            continue;
        }
        let Some(table) = table else { continue };
        let (n, value) = line
            .split_once(' ')
            .ok_or_else(|| format!("expected `N value` in {table}, found `{line}`"))?;
        let n = parse_int(n)?;
        let fields = |v: &str| -> Result<HashMap<String, i32>, String> {
            words(braced(v, "fields")?)?
                .into_iter()
                .map(|(k, v)| {
                    let v =
                        i32::try_from(parse_int(v)?).map_err(|_| format!("`{v}` is too large"))?;
                    Ok((k.to_string(), v))
                })
                .collect()
        };
        let get = |f: &HashMap<String, i32>, k: &str| -> Result<i32, String> {
            f.get(k)
                .copied()
                .ok_or_else(|| format!("{table} entry {n} has no `{k}`"))
        };
        let count = match table {
            "FileNames" => {
                index.file_names.push(parse_string(value)?);
                index.file_names.len()
            }
            "FunctionNames" => {
                index.function_names.push(parse_string(value)?);
                index.function_names.len()
            }
            "FileLocations" => {
                let f = fields(value)?;
                index.file_locations.push(FileLocation {
                    file_name_id: get(&f, "file_name_id")?,
                    function_name_id: get(&f, "function_name_id")?,
                    line: get(&f, "line")?,
                    end_line: get(&f, "end_line")?,
                    column: get(&f, "column")?,
                    end_column: get(&f, "end_column")?,
                });
                index.file_locations.len()
            }
            _ => {
                let f = fields(value)?;
                index.stack_frames.push(StackFrame {
                    file_location_id: get(&f, "file_location_id")?,
                    parent_frame_id: (get(&f, "parent_frame_id")? - 1).max(0),
                });
                index.stack_frames.len()
            }
        };
        if n != count as i64 {
            return Err(format!("{table} entry {n} is not number {count}"));
        }
    }
    Ok(any.then_some(index))
}

/// `{(p0, p1)->result}`.
fn parse_program_shape(v: &str) -> Result<ProgramShapeProto, String> {
    let inner = braced(v, "a program shape")?.trim();
    let (params, n) = parse_shape(inner)?;
    let params = params
        .tuple()
        .ok_or_else(|| format!("expected `(parameters)->result`, found `{inner}`"))?
        .to_vec();
    let rest = &inner[n..];
    let rest = rest[skip_spaces_and_comments(rest)..]
        .strip_prefix("->")
        .ok_or_else(|| format!("expected `->` in `{inner}`"))?;
    let result = rest.trim();
    let (result_shape, m) = parse_shape(result)?;
    if m != result.len() {
        return Err(format!("unexpected `{}` after the result", &result[m..]));
    }
    Ok(ProgramShapeProto {
        parameter_names: (0..params.len()).map(|k| format!("p{k}")).collect(),
        parameters: params
            .iter()
            .map(shape_to_proto)
            .collect::<Result<_, _>>()?,
        result: Some(shape_to_proto(&result_shape)?),
    })
}

/// `{ {0}: (0, {}, may-alias), ... }`.
fn parse_aliases(v: &str) -> Result<HloInputOutputAliasProto, String> {
    let mut out = HloInputOutputAliasProto::default();
    for e in split_top(braced(v, "aliases")?, b',') {
        let e = e.trim();
        if e.is_empty() {
            continue;
        }
        let bad = || format!("an alias is `{{output}}: (parameter, {{index}}, kind)`, found `{e}`");
        let (output, rest) = e.split_once(':').ok_or_else(bad)?;
        let inner = rest
            .trim()
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(bad)?;
        let parts = split_top(inner, b',');
        let kind = match parts.get(2).map(|k| k.trim()) {
            None | Some("may-alias") => 1,
            Some("must-alias") => 2,
            Some(k) => return Err(format!("unknown alias kind `{k}`")),
        };
        out.entries.push(AliasEntryProto {
            output_shape_index: parse_ints(output)?,
            parameter_number: parse_int(parts[0])?,
            parameter_shape_index: parse_ints(parts.get(1).ok_or_else(bad)?)?,
            kind,
        });
    }
    Ok(out)
}

/// `{ (0, {}), (1, {0}) }`.
fn parse_donors(v: &str) -> Result<HloBufferDonorProto, String> {
    let mut out = HloBufferDonorProto::default();
    for e in split_top(braced(v, "buffer donors")?, b',') {
        let e = e.trim();
        if e.is_empty() {
            continue;
        }
        let inner = e
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(|| format!("a donor is `(parameter, {{index}})`, found `{e}`"))?;
        let parts = split_top(inner, b',');
        let [number, index] = parts[..] else {
            return Err(format!("a donor is `(parameter, {{index}})`, found `{e}`"));
        };
        out.entries.push(BufferDonorEntryProto {
            parameter_number: parse_int(number)?,
            parameter_shape_index: parse_ints(index)?,
        });
    }
    Ok(out)
}

/// Every computation but the fused ones, in text order (the order a scheduled module's
/// text gives).
fn schedule(comps: &[(HloComputationProto, Vec<i64>)]) -> HloScheduleProto {
    HloScheduleProto {
        sequences: comps
            .iter()
            .filter(|(c, _)| !c.is_fusion_computation)
            .map(|(c, text_order)| {
                (
                    c.id,
                    InstructionSequence {
                        instruction_ids: text_order.clone(),
                    },
                )
            })
            .collect(),
    }
}

/// Computations with their callees first (XLA reads them in that order), keeping the text's
/// order where it already is so.
fn callees_first(
    comps: Vec<(HloComputationProto, Vec<i64>)>,
    m: &Module,
) -> Result<Vec<HloComputationProto>, HloError> {
    let callees: Vec<Vec<i64>> = comps
        .iter()
        .map(|(c, _)| {
            c.instructions
                .iter()
                .flat_map(|i| i.called_computation_ids.iter().copied())
                .collect()
        })
        .collect();
    let mut done = vec![false; comps.len()];
    let mut order = Vec::with_capacity(comps.len());
    while order.len() < comps.len() {
        let next = (0..comps.len()).find(|&k| {
            !done[k]
                && callees[k]
                    .iter()
                    .all(|&c| done[c as usize] || c == k as i64)
        });
        let Some(k) = next else {
            let c = &m.computations[(0..comps.len()).find(|&k| !done[k]).expect("one is left")];
            return Err(at_line(
                c.line,
                &c.header_line,
                &c.name,
                format!("computation `{}` is in a cycle of calls", c.name),
            ));
        };
        done[k] = true;
        order.push(k);
    }
    let mut slots: Vec<Option<HloComputationProto>> =
        comps.into_iter().map(|(c, _)| Some(c)).collect();
    Ok(order
        .into_iter()
        .map(|k| slots[k].take().expect("each once"))
        .collect())
}

/// One computation, and its instruction ids in text order.
/// The computations made for async shorthands: the next id, the names taken, those made.
struct Wrapped {
    next_id: i64,
    names: std::collections::HashSet<String>,
    made: Vec<HloComputationProto>,
}

/// `X-start`, `X-update`, `X-done` (`abs-start`, `custom-call-start`): XLA's shorthand for
/// an async op wrapping a computation of one `X`. The op `X` and the async op it stands for.
fn async_shorthand(opcode: &str) -> Option<(&str, &'static str)> {
    [
        ("-start", "async-start"),
        ("-update", "async-update"),
        ("-done", "async-done"),
    ]
    .into_iter()
    .find_map(|(suffix, full)| {
        let op = opcode.strip_suffix(suffix)?;
        (!OPCODES.contains(&opcode) && OPCODES.contains(&op)).then_some((op, full))
    })
}

/// The attributes every opcode takes (which an async shorthand's `start` carries too).
const COMMON_ATTRS: [&str; 6] = [
    "sharding",
    "frontend_attributes",
    "control-predecessors",
    "statistics",
    "metadata",
    "backend_config",
];

/// An async shorthand's instruction `i` (opcode `X-start`, `-update`, `-done`) as XLA's
/// parser reads it: an `async-start` of a computation it makes (`async_wrapped`: a
/// parameter `async_param` per operand, `X` of them with the instruction's attributes, on
/// the instruction's thread), or an `async-update` / `async-done`.
#[allow(clippy::too_many_arguments)]
fn shorthand_to_proto(
    i: &Instruction,
    (op, full): (&str, &'static str),
    inst_ids: &HashMap<String, i64>,
    shapes: &HashMap<String, ShapeProto>,
    comp_ids: &HashMap<String, i64>,
    fused: &mut Vec<i64>,
    uniquer: &mut Uniquer,
    wrapped: &mut Wrapped,
) -> Result<HloInstructionProto, HloError> {
    let mut long = i.clone();
    long.opcode = full.to_string();
    if full != "async-start" {
        return instruction_to_proto(&long, inst_ids, shapes, comp_ids, &HashMap::new(), fused);
    }
    let thread = i.attr("async_execution_thread");
    long.attrs
        .retain(|a| COMMON_ATTRS.contains(&a.key.as_str()) || a.key == "async_execution_thread");
    // The start's shape: ((operands), result, context).
    let (operand_shapes, result) = match &i.shape {
        Shape::Tuple(e) if e.len() >= 2 && e[0].tuple().is_some() => {
            (e[0].tuple().expect("just matched").to_vec(), e[1].clone())
        }
        _ => {
            return Err(at(
                i,
                &i.opcode,
                format!(
                    "`{}` is {}; an async start is `((operands), result, context)`",
                    i.opcode, i.shape
                ),
            ))
        }
    };
    let id = wrapped.next_id;
    wrapped.next_id += 1;
    let mut name = "async_wrapped".to_string();
    let mut k = 0;
    while !wrapped.names.insert(name.clone()) {
        k += 1;
        name = format!("async_wrapped.{k}");
    }
    // The computation: parameters, then `X` of them.
    let mut w_ids = HashMap::new();
    let mut w_shapes = HashMap::new();
    let mut params = Vec::new();
    let mut operands = Vec::new();
    for (k, shape) in operand_shapes.iter().enumerate() {
        let pname = format!("async_param.{k}");
        let shape = shape_to_proto(shape).map_err(|e| at(i, "=", e))?;
        w_ids.insert(pname.clone(), (id << 32) | k as i64);
        w_shapes.insert(pname.clone(), shape.clone());
        params.push(HloInstructionProto {
            name: uniquer.unique("async_param"),
            opcode: "parameter".into(),
            shape: Some(shape),
            id: (id << 32) | k as i64,
            parameter_number: k as i64,
            ..HloInstructionProto::default()
        });
        operands.push(crate::hlo::text::Operand {
            name: pname,
            shape: None,
            line: i.line,
            column: 1,
        });
    }
    let mut inner = i.clone();
    inner.name = format!("{op}.graphbug-async");
    inner.opcode = op.to_string();
    inner.shape = result.clone();
    inner.operands = Operands::Values(operands);
    inner
        .attrs
        .retain(|a| a.key != "async_execution_thread" && a.key != "control-predecessors");
    let root_id = (id << 32) | operand_shapes.len() as i64;
    w_ids.insert(inner.name.clone(), root_id);
    w_shapes.insert(
        inner.name.clone(),
        shape_to_proto(&result).map_err(|e| at(i, "=", e))?,
    );
    let mut root =
        instruction_to_proto(&inner, &w_ids, &w_shapes, comp_ids, &HashMap::new(), fused)?;
    root.name = uniquer.unique(op);
    let program_shape = ProgramShapeProto {
        parameters: params
            .iter()
            .map(|p| p.shape.clone().unwrap_or_default())
            .collect(),
        result: root.shape.clone(),
        parameter_names: params.iter().map(|p| p.name.clone()).collect(),
    };
    let mut instructions = params;
    instructions.push(root);
    wrapped.made.push(HloComputationProto {
        name,
        instructions,
        program_shape: Some(program_shape),
        id,
        root_id,
        is_fusion_computation: false,
        execution_thread: thread
            .map(parse_string)
            .transpose()
            .map_err(|e| at(i, "async_execution_thread=", e))?
            .unwrap_or_default(),
    });
    let mut ids = comp_ids.clone();
    ids.insert("graphbug-async-wrapped".into(), id);
    long.attrs.push(crate::hlo::text::Attr {
        key: "calls".into(),
        value: "graphbug-async-wrapped".into(),
    });
    instruction_to_proto(&long, inst_ids, shapes, &ids, &HashMap::new(), fused)
}

fn computation_to_proto(
    c: &Computation,
    id: i64,
    comp_ids: &HashMap<String, i64>,
    fused: &mut Vec<i64>,
    uniquer: &mut Uniquer,
    wrapped: &mut Wrapped,
) -> Result<(HloComputationProto, Vec<i64>), HloError> {
    let mut inst_ids: HashMap<String, i64> = HashMap::new();
    let mut shapes: HashMap<String, ShapeProto> = HashMap::new();
    for (k, i) in c.instructions.iter().enumerate() {
        if inst_ids
            .insert(i.name.clone(), (id << 32) | k as i64)
            .is_some()
        {
            return Err(at(
                i,
                &i.name,
                format!("instruction `{}` is defined twice", i.name),
            ));
        }
        let shape = shape_to_proto(&i.shape).map_err(|e| at(i, "=", e))?;
        shapes.insert(i.name.clone(), shape);
    }
    let empty = HashMap::new();
    let mut protos: Vec<HloInstructionProto> = Vec::with_capacity(c.instructions.len());
    // Each async op's chain: the computation its start wraps, and its thread.
    let mut chains: HashMap<i64, (Vec<i64>, String)> = HashMap::new();
    for i in &c.instructions {
        let mut p = match async_shorthand(&i.opcode) {
            Some(ops) => shorthand_to_proto(
                i, ops, &inst_ids, &shapes, comp_ids, fused, uniquer, wrapped,
            )?,
            None => instruction_to_proto(i, &inst_ids, &shapes, comp_ids, &empty, fused)?,
        };
        p.name = uniquer.unique(&i.name);
        if p.opcode == "async-start" {
            chains.insert(
                p.id,
                (
                    p.called_computation_ids.clone(),
                    p.async_execution_thread.clone(),
                ),
            );
        }
        if matches!(p.opcode.as_str(), "async-update" | "async-done") {
            // XLA's proto holds the computation an async op wraps, and its thread, on the
            // `async-start` only; what the text repeats must be the start's.
            let chain = p.operand_ids.first().and_then(|id| chains.get(id)).cloned();
            if let Some((called, thread)) = &chain {
                if !p.called_computation_ids.is_empty() && p.called_computation_ids != *called {
                    return Err(at(
                        i,
                        "calls=",
                        format!(
                            "`{}` calls another computation than the `async-start` it continues",
                            i.opcode
                        ),
                    ));
                }
                if i.attr("async_execution_thread").is_some() && p.async_execution_thread != *thread
                {
                    return Err(at(
                        i,
                        "async_execution_thread=",
                        format!(
                            "`{}` names another thread than the `async-start` it continues",
                            i.opcode
                        ),
                    ));
                }
                chains.insert(p.id, (called.clone(), thread.clone()));
            }
            p.called_computation_ids.clear();
            p.async_execution_thread.clear();
        }
        protos.push(p);
    }
    let mut params: Vec<&HloInstructionProto> =
        protos.iter().filter(|p| p.opcode == "parameter").collect();
    params.sort_by_key(|p| p.parameter_number);
    let root = c
        .instructions
        .iter()
        .position(|i| i.is_root)
        .unwrap_or(c.instructions.len().saturating_sub(1));
    let root_id = protos.get(root).map_or(0, |p| p.id);
    let program_shape = ProgramShapeProto {
        parameters: params
            .iter()
            .map(|p| p.shape.clone().unwrap_or_default())
            .collect(),
        result: protos.get(root).and_then(|p| p.shape.clone()),
        parameter_names: params.iter().map(|p| p.name.clone()).collect(),
    };
    let mut execution_thread = String::new();
    for a in &c.attrs {
        match a.key.as_str() {
            "execution_thread" => {
                execution_thread = parse_string(&a.value).map_err(|e| {
                    at_line(
                        c.line,
                        &c.header_line,
                        &a.key,
                        format!("computation attribute `{}`: {e}", a.key),
                    )
                })?;
            }
            key => {
                return Err(at_line(
                    c.line,
                    &c.header_line,
                    key,
                    format!("computation attribute `{key}` is not mapped to the proto"),
                ))
            }
        }
    }
    let text_order: Vec<i64> = protos.iter().map(|p| p.id).collect();
    let order = post_order(&protos);
    let mut slots: Vec<Option<HloInstructionProto>> = protos.into_iter().map(Some).collect();
    let instructions = order
        .into_iter()
        .map(|k| slots[k].take().expect("each once"))
        .collect();
    Ok((
        HloComputationProto {
            name: c.name.clone(),
            instructions,
            program_shape: Some(program_shape),
            id,
            root_id,
            is_fusion_computation: false,
            execution_thread,
        },
        text_order,
    ))
}

/// XLA's `MakeInstructionPostOrder`: from each instruction without users, in order, a
/// depth-first walk that visits control predecessors (the last first), then operands (the
/// first first), and emits an instruction after them.
pub(crate) fn post_order(protos: &[HloInstructionProto]) -> Vec<usize> {
    let index: HashMap<i64, usize> = protos.iter().enumerate().map(|(k, p)| (p.id, k)).collect();
    let mut used = vec![false; protos.len()];
    for p in protos {
        for o in &p.operand_ids {
            used[index[o]] = true;
        }
    }
    let mut state = vec![0u8; protos.len()];
    let mut order = Vec::with_capacity(protos.len());
    let mut stack = Vec::new();
    for start in 0..protos.len() {
        if used[start] {
            continue;
        }
        if state[start] != 2 {
            stack.push(start);
        }
        while let Some(&top) = stack.last() {
            match state[top] {
                2 => {
                    stack.pop();
                }
                1 => {
                    stack.pop();
                    state[top] = 2;
                    order.push(top);
                }
                _ => {
                    state[top] = 1;
                    let p = &protos[top];
                    for o in p.operand_ids.iter().rev() {
                        if state[index[o]] != 2 {
                            stack.push(index[o]);
                        }
                    }
                    for o in &p.control_predecessor_ids {
                        if state[index[o]] != 2 {
                            stack.push(index[o]);
                        }
                    }
                }
            }
        }
    }
    // Whatever a cycle kept out, in text order.
    for (k, s) in state.iter().enumerate() {
        if *s != 2 {
            order.push(k);
        }
    }
    order
}

fn instruction_to_proto(
    i: &Instruction,
    inst_ids: &HashMap<String, i64>,
    shapes: &HashMap<String, ShapeProto>,
    comp_ids: &HashMap<String, i64>,
    no_names: &HashMap<i64, String>,
    fused: &mut Vec<i64>,
) -> Result<HloInstructionProto, HloError> {
    if !OPCODES.contains(&i.opcode.as_str()) {
        return Err(at(
            i,
            &format!(" {}(", i.opcode),
            format!(
                "unknown opcode `{}` (not one of XLA's HLO opcodes)",
                i.opcode
            ),
        ));
    }
    let mut p = HloInstructionProto {
        name: i.name.clone(),
        opcode: i.opcode.clone(),
        shape: Some(shapes[&i.name].clone()),
        id: inst_ids[&i.name],
        ..HloInstructionProto::default()
    };
    let mut operand_shapes = Vec::new();
    match &i.operands {
        Operands::Values(values) => {
            for o in values {
                let id = inst_ids.get(&o.name).ok_or_else(|| HloError {
                    line: i.line,
                    column: o.column,
                    message: format!("operand `{}` is not defined in this computation", o.name),
                    instruction: Some(i.name.clone()),
                })?;
                p.operand_ids.push(*id);
                operand_shapes.push(shapes[&o.name].clone());
            }
        }
        Operands::Literal(text) => {
            let shape = p.shape.clone().unwrap_or_default();
            p.literal = Some(parse_literal(text, &shape).map_err(|e| at(i, "constant(", e))?);
        }
        Operands::Parameter(k) => {
            p.parameter_number = i64::try_from(*k)
                .map_err(|_| at(i, "parameter(", "parameter number too large".into()))?;
        }
    }
    let no_ids = HashMap::new();
    let mut ctx = Ctx {
        inst: &mut p,
        comp_ids,
        comp_names: no_names,
        inst_ids,
        inst_names: &no_ids,
        operand_shapes: &operand_shapes,
        called: Vec::new(),
    };
    let mut seen: Vec<&str> = Vec::new();
    for a in &i.attrs {
        let needle = format!("{}=", a.key);
        if seen.contains(&a.key.as_str()) {
            return Err(at(
                i,
                &needle,
                format!("attribute `{}` is written twice", a.key),
            ));
        }
        seen.push(&a.key);
        attrs::encode(&a.key, &a.value, &i.opcode, &mut ctx).map_err(|e| at(i, &needle, e))?;
    }
    attrs::fill_defaults(&i.opcode, &mut ctx);
    let called = std::mem::take(&mut ctx.called);
    let needs = match i.opcode.as_str() {
        "while" => Some("`condition=` and `body=`"),
        "select-and-scatter" => Some("`select=` and `scatter=`"),
        "conditional" => {
            Some("`branch_computations=` or `true_computation=` and `false_computation=`")
        }
        "fusion" | "async-start" => Some("`calls=`"),
        "call" | "map" | "reduce" | "reduce-window" | "all-reduce" | "reduce-scatter"
        | "scatter" | "sort" | "scan" => Some("`to_apply=`"),
        _ => None,
    };
    let complete = called.iter().all(Option::is_some);
    if !complete || (called.is_empty() && needs.is_some()) {
        let what = needs.unwrap_or("its called computations");
        return Err(at(i, &i.opcode, format!("`{}` needs {what}", i.opcode)));
    }
    p.called_computation_ids = called.into_iter().flatten().collect();
    if i.opcode == "fusion" {
        fused.extend(&p.called_computation_ids);
    }
    Ok(p)
}

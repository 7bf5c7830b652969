//! An HLO module's entry computation as a graphbug graph, and graphs cut from it printed
//! back as HLO: what lets the minifier, the checks and the repro layout serve HLO as they
//! serve aten graphs.
//!
//! Each instruction is a node named as XLA names it (`add.13`): parameters are the graph's
//! inputs, in parameter order; `get-tuple-element` of a tuple is a getitem of its source;
//! every other instruction is a call of `hlo.<opcode>` on its operands, its result's dtype
//! and sizes as the node's meta. A `tuple` at the root gives the graph's outputs (its
//! operands); any other root is the one output. Printing a graph cut from the original
//! keeps every kept instruction's line as written (attributes, metadata, called
//! computations), writes a `parameter(k)` line for each input (an original parameter or a
//! value the cut leaves out, with that value's shape), marks the new root (a `tuple` of
//! several outputs), keeps the computations kept instructions call, and writes the header's
//! `entry_computation_layout` for the new parameters and result.

use std::collections::{BTreeSet, HashMap};

use graphbug_ir::fault::FaultSpec;
use graphbug_ir::{Dialect, Graph, Meta, Node, NodeId, NodeKind, OpName, TensorMeta, Value};

use super::shape::{dtype_of, Shape};
use super::text::{HloError, Instruction, Module, Operands};
use crate::program::{Constants, Outlined};

/// The entry computation of `module` as a graph, with what printing its cuts needs.
#[derive(Clone, Debug)]
pub struct HloGraph {
    /// The graph.
    pub graph: Graph,
    module: Module,
    entry: usize,
    /// The instruction (index in the entry computation) of each node, by name.
    instruction: HashMap<String, usize>,
}

/// The op of an HLO instruction's node: `hlo.<opcode>`.
pub fn op_of(opcode: &str) -> OpName {
    OpName::new("hlo", opcode, "default")
}

/// The meta of a value of `shape`: a tensor for an array graphbug can hold, several for a
/// tuple (an element graphbug cannot hold, or a nested tuple, has none).
pub fn meta_of(shape: &Shape) -> Result<Meta, String> {
    let tensor = |s: &Shape| -> Result<TensorMeta, String> {
        match s {
            Shape::Array {
                ty, dims, dynamic, ..
            } => {
                if dynamic.iter().any(|d| *d) {
                    return Err(format!("dynamic sizes ({s}) are not supported yet"));
                }
                let dtype = dtype_of(ty)
                    .ok_or_else(|| format!("element type `{ty}` ({s}) is not supported yet"))?;
                Ok(TensorMeta::new(dtype, dims.clone()))
            }
            Shape::Tuple(_) => Err(format!("a nested tuple ({s}) is not supported yet")),
        }
    };
    match shape {
        Shape::Array { .. } => tensor(shape).map(Meta::Tensor),
        Shape::Tuple(elements) => Ok(Meta::Multi(
            elements.iter().map(|e| tensor(e).ok()).collect(),
        )),
    }
}

impl HloGraph {
    /// The entry computation of `module` (which should check: see [`super::check`]).
    pub fn new(module: &Module) -> Result<HloGraph, HloError> {
        let entry = module.entry().ok_or_else(|| HloError {
            line: 1,
            column: 1,
            message: format!("module `{}` has no ENTRY computation", module.name),
            instruction: None,
        })?;
        // A cut prints kept instructions' texts; one written inside another's operands has
        // none of its own.
        if let Some(i) = module
            .computations
            .iter()
            .flat_map(|c| &c.instructions)
            .find(|i| i.nested)
        {
            return Err(HloError {
                line: i.line,
                column: 1,
                message: format!(
                    "`{}` ({}) is written inside another instruction's operands: minify, faults and repros need each instruction written on its own, as XLA prints them",
                    i.name, i.opcode
                ),
                instruction: Some(i.name.clone()),
            });
        }
        let comp = &module.computations[entry];
        let by_name: HashMap<&str, usize> = comp
            .instructions
            .iter()
            .enumerate()
            .map(|(k, i)| (i.name.as_str(), k))
            .collect();
        let err = |i: &Instruction, message: String| HloError {
            line: i.line,
            column: 1,
            message,
            instruction: Some(i.name.clone()),
        };
        // Parameters first, by number; then the rest in an order where operands come
        // first (text order where the text already has it).
        let mut order: Vec<usize> = comp
            .parameters()
            .iter()
            .map(|p| by_name[p.name.as_str()])
            .collect();
        let mut placed = vec![false; comp.instructions.len()];
        for &k in &order {
            placed[k] = true;
        }
        for start in 0..comp.instructions.len() {
            let mut stack = vec![(start, false)];
            while let Some((k, expanded)) = stack.pop() {
                if placed[k] {
                    continue;
                }
                if expanded {
                    placed[k] = true;
                    order.push(k);
                    continue;
                }
                stack.push((k, true));
                for name in comp.instructions[k].operand_names().into_iter().rev() {
                    let Some(&j) = by_name.get(name) else {
                        return Err(err(
                            &comp.instructions[k],
                            format!("operand `{name}` is not defined"),
                        ));
                    };
                    if !placed[j] {
                        stack.push((j, false));
                    }
                }
            }
        }
        let root = comp.root().expect("a computation has instructions");
        let root_k = by_name[root.name.as_str()];
        let tuple_root = root.opcode == "tuple";
        // A tuple root nothing else reads is only the graph's outputs.
        let root_read = comp
            .instructions
            .iter()
            .any(|i| i.operand_names().contains(&root.name.as_str()));
        let skip_root = tuple_root && !root_read;
        let mut graph = Graph::new_in(&comp.name, Dialect::Hlo);
        let mut id_of: HashMap<&str, NodeId> = HashMap::new();
        let mut instruction = HashMap::new();
        for &k in &order {
            let i = &comp.instructions[k];
            if skip_root && k == root_k {
                continue;
            }
            let meta = meta_of(&i.shape).map_err(|m| err(i, m))?;
            let args: Vec<Value> = i
                .operand_names()
                .iter()
                .map(|n| Value::Node(id_of[n]))
                .collect();
            let kind = match (&i.operands, i.opcode.as_str()) {
                (Operands::Parameter(_), _) => {
                    if !matches!(meta, Meta::Tensor(_)) {
                        return Err(err(
                            i,
                            format!(
                                "a parameter of tuple shape ({}) is not supported yet",
                                i.shape
                            ),
                        ));
                    }
                    NodeKind::Placeholder
                }
                (_, "get-tuple-element")
                    if matches!(
                        args.first().map(|a| graph.node(node_of(a)).meta.clone()),
                        Some(Meta::Multi(_))
                    ) =>
                {
                    let index = i
                        .attr("index")
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| err(i, "get-tuple-element has no `index=N`".into()))?;
                    NodeKind::GetItem {
                        source: node_of(&args[0]),
                        index,
                    }
                }
                _ => NodeKind::Call {
                    op: op_of(&i.opcode),
                    args,
                    kwargs: Vec::new(),
                },
            };
            id_of.insert(&i.name, NodeId(graph.nodes.len() as u32));
            instruction.insert(i.name.clone(), k);
            graph.nodes.push(Node {
                name: i.name.as_str().into(),
                kind,
                meta,
            });
        }
        graph.output = Some(if skip_root {
            root.operand_names()
                .iter()
                .map(|n| Value::Node(id_of[n]))
                .collect()
        } else {
            vec![Value::Node(id_of[root.name.as_str()])]
        });
        graph.verify().map_err(|e| HloError {
            line: comp.line,
            column: 1,
            message: format!("the entry computation as a graph: {e}"),
            instruction: None,
        })?;
        Ok(HloGraph {
            graph,
            module: module.clone(),
            entry,
            instruction,
        })
    }

    /// The module the graph was read from.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The graph a fault's targets are found in: the entry's; and where the spec names
    /// (`node:NAME`) an instruction the entry lacks, the entry's with every instruction of
    /// the computations the entry calls (in turn) appended, each a call of its opcode on no
    /// operands, named and typed as written. So a fault can name a while body's or condition's
    /// instruction, a reducer's or combiner's, a called function's, a branch's (HLO names
    /// are unique in a module); a fault on an op (`@add`) counts the entry's nodes alone.
    pub fn fault_graph(&self, spec: &FaultSpec) -> std::borrow::Cow<'_, Graph> {
        let inner = spec
            .node
            .as_deref()
            .is_some_and(|name| self.graph.find(name).is_none());
        if !inner {
            return std::borrow::Cow::Borrowed(&self.graph);
        }
        // The computations the entry calls, in turn: an instruction of one no longer
        // called (its caller cut away) is no target.
        let mut called: Vec<usize> = Vec::new();
        let mut next: Vec<usize> = vec![self.entry];
        while let Some(k) = next.pop() {
            for i in &self.module.computations[k].instructions {
                for name in self.calls_of(i) {
                    let c = self.module.computations.iter().position(|c| c.name == name);
                    if let Some(c) = c.filter(|c| *c != self.entry && !called.contains(c)) {
                        called.push(c);
                        next.push(c);
                    }
                }
            }
        }
        called.sort_unstable();
        let mut graph = self.graph.clone();
        for comp in called.iter().map(|&k| &self.module.computations[k]) {
            for i in &comp.instructions {
                graph.nodes.push(Node {
                    name: i.name.as_str().into(),
                    kind: NodeKind::Call {
                        op: op_of(&i.opcode),
                        args: Vec::new(),
                        kwargs: Vec::new(),
                    },
                    meta: meta_of(&i.shape).unwrap_or_default(),
                });
            }
        }
        std::borrow::Cow::Owned(graph)
    }

    /// The instruction a node of this graph (or of a graph cut from it) stands for.
    pub fn instruction_of(&self, name: &str) -> Option<&Instruction> {
        let k = self.instruction.get(name)?;
        self.module.computations[self.entry].instructions.get(*k)
    }

    /// The computations `i` calls: every attribute value naming one of the module's
    /// computations (`to_apply=`, `calls=`, `body=`, `select=`, `scatter=`,
    /// `called_computations={...}`, and whatever else an opcode names them in), asked of
    /// the module rather than of a list of attribute keys.
    fn calls_of(&self, i: &Instruction) -> Vec<String> {
        let is_name_char = |c: char| c.is_alphanumeric() || matches!(c, '.' | '_' | '-');
        let mut out: Vec<String> = Vec::new();
        for a in &i.attrs {
            for word in a.value.split(|c: char| !is_name_char(c) && c != '%') {
                let word = word.trim_start_matches('%');
                if !word.is_empty()
                    && !out.iter().any(|w| w == word)
                    && self.module.computation(word).is_some()
                {
                    out.push(word.to_string());
                }
            }
        }
        out
    }

    /// The computations the instruction `name` of the entry calls, in the order its
    /// attributes name them.
    pub fn called_by(&self, name: &str) -> Vec<String> {
        self.instruction_of(name)
            .map(|i| self.calls_of(i))
            .unwrap_or_default()
    }

    /// The module whose entry is the computation `name` (with the computations it calls):
    /// the called computation alone, as a program. A parameter of tuple shape becomes one
    /// parameter per array in it, tupled back under its name (PJRT passes arrays).
    pub fn outline(&self, name: &str) -> Result<Outlined, String> {
        let k = self
            .module
            .computations
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| format!("the module has no computation `{name}`"))?;
        if k == self.entry {
            return Err(format!("`{name}` is the entry computation already"));
        }
        let comp = &self.module.computations[k];
        let style = style_of(comp);
        let root = comp
            .root()
            .ok_or_else(|| format!("computation `{name}` is empty"))?;
        if matches!(root.operands, Operands::Parameter(_)) {
            return Err(format!(
                "computation `{name}` returns its parameter: nothing to run"
            ));
        }
        /// What flattening the parameters makes: the new parameters (name, shape, path),
        /// their lines, and the lines of the tuples that rebuild tuple parameters.
        #[derive(Default)]
        struct Flat {
            params: Vec<(String, Shape, (usize, Vec<usize>))>,
            param_lines: String,
            tuple_lines: String,
        }
        fn flatten(
            name: &str,
            shape: &Shape,
            path: (usize, Vec<usize>),
            style: &Style,
            f: &mut Flat,
        ) {
            match shape {
                Shape::Tuple(elements) => {
                    let mut names = Vec::new();
                    for (j, e) in elements.iter().enumerate() {
                        let element = format!("{name}.graphbug.{j}");
                        let mut p = path.clone();
                        p.1.push(j);
                        flatten(&element, e, p, style, f);
                        names.push(format!("{}{element}", style.sigil()));
                    }
                    f.tuple_lines.push_str(&format!(
                        "{}{}{name} = {shape} tuple({}){}",
                        style.indent,
                        style.sigil(),
                        names.join(", "),
                        style.newline
                    ));
                }
                array => {
                    let k = f.params.len();
                    f.param_lines
                        .push_str(&style.parameter_line(name, array, k));
                    f.params.push((name.to_string(), array.clone(), path));
                }
            }
        }
        let mut flat = Flat::default();
        for p in comp.parameters() {
            if let Operands::Parameter(n) = p.operands {
                flatten(
                    &p.name,
                    &p.shape,
                    (n as usize, Vec::new()),
                    &style,
                    &mut flat,
                );
            }
        }
        let params: Vec<(String, Shape)> = flat
            .params
            .iter()
            .map(|(n, s, _)| (n.clone(), s.clone()))
            .collect();
        let mut body = flat.param_lines.clone();
        body.push_str(&flat.tuple_lines);
        for i in &comp.instructions {
            if !matches!(i.operands, Operands::Parameter(_)) {
                body.push_str(&i.text);
            }
        }
        let needed = self.with_callees(
            comp.instructions
                .iter()
                .flat_map(|i| self.calls_of(i))
                .collect(),
        );
        let entry = format!(
            "{}ENTRY {}{} {{{}{body}{}",
            comp.leading,
            style.sigil(),
            comp.name,
            style.newline,
            comp.closing_line
        );
        let out = self.assemble(
            &self.header(&params, &root.shape, false),
            (k, &entry),
            &needed,
        );
        Ok(Outlined {
            text: out,
            parameters: flat.params.into_iter().map(|(_, _, p)| p).collect(),
            sources: Vec::new(),
        })
    }

    /// The computations `called` names, and those they call in turn.
    fn with_callees(&self, called: BTreeSet<String>) -> BTreeSet<String> {
        crate::program::with_callees(called, |name| {
            self.module
                .computation(name)
                .map(|c| {
                    c.instructions
                        .iter()
                        .flat_map(|i| self.calls_of(i))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
    }

    /// `cut` (a graph cut from [`HloGraph::graph`]: its nodes named as the original's)
    /// printed as an HLO module (see the module docs).
    pub fn print(&self, cut: &Graph) -> Result<String, String> {
        self.print_with(cut, &Constants::new())
    }

    /// [`HloGraph::print`], the inputs named in `constants` printed as `constant`
    /// instructions holding their values rather than as parameters.
    pub fn print_with(&self, cut: &Graph, constants: &Constants) -> Result<String, String> {
        let comp = &self.module.computations[self.entry];
        let style = style_of(comp);
        let instr = |n: &Node| -> Result<&Instruction, String> {
            self.instruction_of(&n.name)
                .ok_or_else(|| format!("node `{}` is no instruction of the original", n.name))
        };
        let shape_of = |v: &Value| -> Result<Shape, String> {
            match v {
                Value::Node(id) => Ok(instr(cut.node(*id))?.shape.clone()),
                other => Err(format!("an output that is no value ({other:?})")),
            }
        };
        let outputs = cut.outputs();
        // The root: the one kept instruction returned, or a tuple of the outputs.
        let single_root = match outputs {
            [Value::Node(id)] if !cut.node(*id).is_placeholder() => Some(*id),
            _ => None,
        };
        let root_shapes: Vec<Shape> = outputs.iter().map(shape_of).collect::<Result<_, _>>()?;
        let result = match single_root {
            Some(id) => instr(cut.node(id))?.shape.clone(),
            None => Shape::Tuple(root_shapes.clone()),
        };
        let mut body = String::new();
        let mut params = Vec::new();
        let mut called = BTreeSet::new();
        for (id, node) in cut.ids().zip(&cut.nodes) {
            let i = instr(node)?;
            if node.is_placeholder() {
                if let Some(value) = constants.get(node.name.as_str()) {
                    let literal = super::proto::literal_text(&i.shape, &value.data)
                        .map_err(|e| format!("`{}` as a constant: {e}", node.name))?;
                    body.push_str(&style.constant_line(&node.name, &i.shape, &literal));
                    continue;
                }
                let k = params.len();
                params.push((node.name.to_string(), i.shape.clone()));
                body.push_str(&style.parameter_line(&node.name, &i.shape, k));
                continue;
            }
            called.extend(self.calls_of(i));
            body.push_str(&with_root(i, single_root == Some(id)));
        }
        if single_root.is_none() {
            let names: Vec<String> = outputs
                .iter()
                .map(|v| match v {
                    Value::Node(id) => cut.node(*id).name.to_string(),
                    _ => String::new(),
                })
                .collect();
            let root_name = match comp.root() {
                Some(r) if r.opcode == "tuple" => r.name.clone(),
                _ => "tuple.graphbug".into(),
            };
            body.push_str(&style.tuple_line(&root_name, &names, &root_shapes));
        }
        // The computations kept instructions call, and those they call in turn.
        let needed = self.with_callees(called);
        let entry = format!(
            "{}{}{body}{}",
            comp.leading,
            style.entry_header(&comp.header_line, &comp.name, &params, &result),
            comp.closing_line
        );
        // The original's signature (its parameters, its outputs in order) keeps its
        // aliasing of outputs to parameters.
        let names = |g: &Graph| -> Vec<String> {
            g.outputs()
                .iter()
                .map(|v| match v {
                    Value::Node(id) => g.node(*id).name.to_string(),
                    _ => String::new(),
                })
                .collect()
        };
        let same_signature = params
            .iter()
            .map(|(n, _)| n.clone())
            .eq(self.graph.placeholder_names())
            && names(cut) == names(&self.graph);
        Ok(self.assemble(
            &self.header(&params, &result, same_signature),
            (self.entry, &entry),
            &needed,
        ))
    }

    /// The module's text with `header` as its header line, computation `k` written as
    /// `text`, and of the others those in `needed`, as written.
    fn assemble(
        &self,
        header: &str,
        (k, text): (usize, &str),
        needed: &BTreeSet<String>,
    ) -> String {
        let mut out = String::new();
        out.push_str(&self.module.leading);
        out.push_str(header);
        for (j, c) in self.module.computations.iter().enumerate() {
            if j == k {
                out.push_str(text);
            } else if needed.contains(&c.name) {
                out.push_str(&c.leading);
                out.push_str(&c.header_line);
                for i in &c.instructions {
                    out.push_str(&i.text);
                }
                out.push_str(&c.closing_line);
            }
        }
        out.push_str(&self.module.trailing);
        out
    }

    /// The module's header line for a cut with `params` and `result`: the layout of the new
    /// entry, the other attributes as written, but `is_scheduled` (a cut has no schedule)
    /// and, unless the cut has the original's signature (`same_signature`),
    /// `input_output_alias` and `buffer_donor` (they name the original's parameters and
    /// outputs by number: on another signature, XLA refuses them or aliases the wrong
    /// buffers).
    fn header(&self, params: &[(String, Shape)], result: &Shape, same_signature: bool) -> String {
        let args: Vec<String> = params
            .iter()
            .map(|(_, s)| s.with_default_layout().to_string())
            .collect();
        let mut line = format!(
            "HloModule {}, entry_computation_layout={{({})->{}}}",
            self.module.name,
            args.join(", "),
            result.with_default_layout()
        );
        for a in &self.module.attrs {
            let aliasing = a.key == "input_output_alias" || a.key == "buffer_donor";
            if a.key != "entry_computation_layout"
                && a.key != "is_scheduled"
                && (same_signature || !aliasing)
            {
                line.push_str(&format!(", {}={}", a.key, a.value));
            }
        }
        let newline = if self.module.header_line.ends_with("\r\n") {
            "\r\n"
        } else {
            "\n"
        };
        line + newline
    }
}

/// The value's node.
fn node_of(v: &Value) -> NodeId {
    match v {
        Value::Node(id) => *id,
        _ => unreachable!("operands are node references"),
    }
}

/// Instruction `i`'s text with its `ROOT ` marker added or removed.
fn with_root(i: &Instruction, root: bool) -> String {
    let (lead, rest) = i.text.split_at(i.start);
    let rest = match rest.strip_prefix("ROOT") {
        Some(r) if r.starts_with([' ', '\t']) => r.trim_start_matches([' ', '\t']),
        _ => rest,
    };
    if root {
        format!("{lead}ROOT {rest}")
    } else {
        format!("{lead}{rest}")
    }
}

/// How a computation writes its lines: indentation, `%` sigils, operand shapes, signatures.
struct Style {
    indent: String,
    percent: bool,
    operand_shapes: bool,
    newline: &'static str,
}

/// The style of `comp`'s text.
fn style_of(comp: &super::text::Computation) -> Style {
    let first = comp.instructions.first();
    Style {
        indent: first
            .map(|i| {
                let line_start = i.text[..i.start].rfind('\n').map_or(0, |p| p + 1);
                i.text[line_start..i.start].to_string()
            })
            .unwrap_or_else(|| "  ".into()),
        percent: first.is_some_and(|i| i.percent),
        operand_shapes: comp.instructions.iter().any(|i| match &i.operands {
            Operands::Values(v) => v.iter().any(|o| o.shape.is_some()),
            _ => false,
        }),
        newline: if comp.header_line.ends_with("\r\n") {
            "\r\n"
        } else {
            "\n"
        },
    }
}

impl Style {
    fn sigil(&self) -> &'static str {
        if self.percent {
            "%"
        } else {
            ""
        }
    }

    /// `name = shape parameter(k)`.
    fn parameter_line(&self, name: &str, shape: &Shape, k: usize) -> String {
        format!(
            "{}{}{name} = {shape} parameter({k}){}",
            self.indent,
            self.sigil(),
            self.newline
        )
    }

    /// `name = shape constant(literal)`.
    fn constant_line(&self, name: &str, shape: &Shape, literal: &str) -> String {
        format!(
            "{}{}{name} = {shape} constant({literal}){}",
            self.indent,
            self.sigil(),
            self.newline
        )
    }

    /// `ROOT name = (shapes) tuple(values)`.
    fn tuple_line(&self, name: &str, values: &[String], shapes: &[Shape]) -> String {
        let operands: Vec<String> = values
            .iter()
            .zip(shapes)
            .map(|(v, s)| {
                if self.operand_shapes {
                    format!("{s} {}{v}", self.sigil())
                } else {
                    format!("{}{v}", self.sigil())
                }
            })
            .collect();
        format!(
            "{}ROOT {}{name} = {} tuple({}){}",
            self.indent,
            self.sigil(),
            Shape::Tuple(shapes.to_vec()),
            operands.join(", "),
            self.newline
        )
    }

    /// The entry's header line: as written, with its signature (if it had one) written anew.
    fn entry_header(
        &self,
        written: &str,
        name: &str,
        params: &[(String, Shape)],
        result: &Shape,
    ) -> String {
        if !written.contains('(') {
            return written.to_string();
        }
        let sig: Vec<String> = params
            .iter()
            .map(|(n, s)| format!("{n}: {}", s.without_layout()))
            .collect();
        format!(
            "ENTRY {}{name} ({}) -> {} {{{}",
            self.sigil(),
            sig.join(", "),
            result.without_layout(),
            self.newline
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::check::check;
    use crate::hlo::text::parse_module;

    const JAX: &str =
        "HloModule jit_f, entry_computation_layout={(f32[3]{0}, f32[3]{0})->(f32[3]{0}, f32[])}

add.0 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main.1 {
  y = f32[3]{0} parameter(1)
  x = f32[3]{0} parameter(0)
  z = f32[3]{0} multiply(x, y)
  e = f32[3]{0} exponential(z)
  c = f32[] constant(0)
  r = f32[] reduce(e, c), dimensions={0}, to_apply=add.0, metadata={op_name=\"sum\"}
  ROOT t = (f32[3]{0}, f32[]) tuple(z, r)
}
";

    #[test]
    fn the_entry_is_a_graph_of_its_instructions() {
        let m = parse_module(JAX).unwrap();
        let g = HloGraph::new(&m).unwrap();
        let names: Vec<&str> = g.graph.nodes.iter().map(|n| n.name.as_str()).collect();
        // Parameters first, by number; the root tuple is the outputs.
        assert_eq!(names, ["x", "y", "z", "e", "c", "r"]);
        assert_eq!(g.graph.placeholder_names(), ["x", "y"]);
        assert_eq!(g.graph.outputs().len(), 2);
        assert_eq!(g.graph.node(NodeId(5)).op(), Some(&op_of("reduce")));
        // The whole graph prints back as a module that checks, keeping each line.
        let text = g.print(&g.graph).unwrap();
        let again = parse_module(&text).unwrap();
        check(&again).unwrap();
        assert!(text.contains("  r = f32[] reduce(e, c), dimensions={0}, to_apply=add.0, metadata={op_name=\"sum\"}\n"), "{text}");
        assert!(
            text.contains("  x = f32[3]{0} parameter(0)\n  y = f32[3]{0} parameter(1)\n"),
            "{text}"
        );
    }

    #[test]
    fn a_cut_prints_as_a_module_of_its_own() {
        let m = parse_module(JAX).unwrap();
        let g = HloGraph::new(&m).unwrap();
        // Keep `e` and `r`: `z` becomes a parameter, `r` the root; add.0 stays.
        let mut cut = Graph::new_in("main.1", Dialect::Hlo);
        let z = g.graph.node(NodeId(2)).clone();
        cut.nodes.push(Node {
            kind: NodeKind::Placeholder,
            ..z
        });
        let mut e = g.graph.node(NodeId(3)).clone();
        e.kind = NodeKind::Call {
            op: op_of("exponential"),
            args: vec![Value::Node(NodeId(0))],
            kwargs: vec![],
        };
        cut.nodes.push(e);
        let mut c = g.graph.node(NodeId(4)).clone();
        c.kind = NodeKind::Call {
            op: op_of("constant"),
            args: vec![],
            kwargs: vec![],
        };
        cut.nodes.push(c);
        let mut r = g.graph.node(NodeId(5)).clone();
        r.kind = NodeKind::Call {
            op: op_of("reduce"),
            args: vec![Value::Node(NodeId(1)), Value::Node(NodeId(2))],
            kwargs: vec![],
        };
        cut.nodes.push(r);
        cut.output = Some(vec![Value::Node(NodeId(3))]);
        cut.verify().unwrap();
        let text = g.print(&cut).unwrap();
        let m2 = parse_module(&text).unwrap();
        assert_eq!(
            check(&m2).unwrap(),
            crate::hlo::check::Counts {
                instructions: 7,
                parameters: 1,
                outputs: 1
            }
        );
        assert!(
            text.starts_with("HloModule jit_f, entry_computation_layout={(f32[3]{0})->f32[]}\n"),
            "{text}"
        );
        assert!(text.contains("  z = f32[3]{0} parameter(0)\n"), "{text}");
        assert!(text.contains("  ROOT r = f32[] reduce(e, c)"), "{text}");
        // Two outputs: a tuple root, named as the original's.
        cut.output = Some(vec![Value::Node(NodeId(1)), Value::Node(NodeId(3))]);
        let text = g.print(&cut).unwrap();
        check(&parse_module(&text).unwrap()).unwrap();
        assert!(
            text.contains("  ROOT t = (f32[3]{0}, f32[]) tuple(e, r)\n"),
            "{text}"
        );
    }

    /// A module whose parameter 0 is donated to its output 0 (TensorFlow's resource
    /// variables, JAX's `donate_argnums`): the whole keeps its aliasing; a cut whose
    /// outputs are others drops it, since it names the original's outputs.
    #[test]
    fn a_cut_drops_the_originals_aliasing() {
        let text = "HloModule m, input_output_alias={ {0}: (0, {}, may-alias) }, buffer_donor={ (1, {}) }, entry_computation_layout={(f32[3]{0}, f32[3]{0})->(f32[3]{0}, f32[])}\n\nadd.0 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY main.1 {\n  x = f32[3]{0} parameter(0)\n  y = f32[3]{0} parameter(1)\n  z = f32[3]{0} multiply(x, y)\n  c = f32[] constant(0)\n  r = f32[] reduce(z, c), dimensions={0}, to_apply=add.0\n  ROOT t = (f32[3]{0}, f32[]) tuple(z, r)\n}\n";
        let m = parse_module(text).unwrap();
        let g = HloGraph::new(&m).unwrap();
        let whole = g.print(&g.graph).unwrap();
        assert!(
            whole.lines().next().unwrap().ends_with(
                ", input_output_alias={ {0}: (0, {}, may-alias) }, buffer_donor={ (1, {}) }"
            ),
            "{whole}"
        );
        let mut cut = g.graph.clone();
        cut.output = Some(vec![Value::Node(NodeId(4)), Value::Node(NodeId(2))]);
        let printed = g.print(&cut).unwrap();
        let header = printed.lines().next().unwrap();
        assert_eq!(
            header,
            "HloModule m, entry_computation_layout={(f32[3]{0}, f32[3]{0})->(f32[], f32[3]{0})}"
        );
        check(&parse_module(&printed).unwrap()).unwrap();
    }

    #[test]
    fn the_older_style_stays_in_its_style() {
        let old = "HloModule m\n\nENTRY %e (x: f32[3], y: f32[3]) -> f32[3] {\n  %x = f32[3]{0} parameter(0)\n  %y = f32[3]{0} parameter(1)\n  %n = f32[3]{0} negate(f32[3]{0} %x)\n  ROOT %a = f32[3]{0} add(f32[3]{0} %n, f32[3]{0} %y)\n}\n";
        let m = parse_module(old).unwrap();
        let g = HloGraph::new(&m).unwrap();
        let mut cut = g.graph.clone();
        cut.output = Some(vec![Value::Node(NodeId(2)), Value::Node(NodeId(3))]);
        let text = g.print(&cut).unwrap();
        check(&parse_module(&text).unwrap()).unwrap();
        assert!(
            text.contains("ENTRY %e (x: f32[3], y: f32[3]) -> (f32[3], f32[3]) {\n"),
            "{text}"
        );
        assert!(text.contains("  ROOT %tuple.graphbug = (f32[3]{0}, f32[3]{0}) tuple(f32[3]{0} %n, f32[3]{0} %a)\n"), "{text}");
        assert!(text.contains("  %a = f32[3]{0} add("), "{text}");
    }
}

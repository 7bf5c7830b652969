//! Minifying XLA programs with graphbug's one minifier: an HLO entry computation or a
//! StableHLO main function is a graph ([`Printer::graph`]), every candidate the minifier
//! cuts from it prints back as a program in the input's form ([`Printer::program`]), and
//! [`XlaChecker`] compiles and runs candidates through a PJRT plugin on the values one run
//! of the original on the reference plugin recorded ([`Recorded`]). Workers that isolate
//! the plugin ([`worker_main`]) speak the minifier's protocol
//! ([`graphbug_minifier::isolate`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use graphbug_accuracy::{same, to_fp64, AccuracyMode, AccuracyReport, SameOptions};
use graphbug_files::HostTensor;
use graphbug_ir::fault::FaultSpec;
use graphbug_ir::{Graph, Meta, NodeId, Value};
use graphbug_minifier::checker::{describe_check, signature_of, StageHook};
use graphbug_minifier::isolate::{end_with_input, serve, Stages};
use graphbug_minifier::localize::{culprits, widen};
use graphbug_minifier::{Candidate, CheckKind, Checker, Origin, Original, Signature, Verdict};
use serde::{Deserialize, Serialize};

use crate::execute::XlaBackend;
use crate::hlo::graph::HloGraph;
use crate::program::{Constants, Kind, Outlined, Program, ProgramError};
use crate::stablehlo::{self, StableHloGraph};

/// The message of every accuracy failure of an XLA program, so candidates of one bug match.
pub const ACCURACY_MESSAGE: &str =
    "outputs differ from the reference plugin's beyond the same() tolerance";

/// What the reference run is called in messages.
pub const REFERENCE_RUN: &str = "the reference run of the program";

/// A program's graph, and how graphs cut from it print as programs of the input's form.
#[derive(Clone, Debug)]
pub enum Printer {
    /// HLO (text or a proto: `kind` says which).
    Hlo(Box<HloGraph>, Kind),
    /// StableHLO (text, or bytecode read through MLIR: `kind` says which).
    StableHlo(Box<StableHloGraph>, Kind),
}

impl Printer {
    /// The printer of `program` (bytecode is read through MLIR).
    pub fn new(program: &Program) -> Result<Printer, ProgramError> {
        let kind = match program {
            Program::Hlo { kind, .. } => *kind,
            Program::StableHlo(_) => Kind::StableHloText,
            Program::Bytecode { .. } => Kind::StableHloBytecode,
        };
        match program.as_text()? {
            Program::Hlo { module, .. } => HloGraph::new(&module)
                .map(|g| Printer::Hlo(Box::new(g), kind))
                .map_err(|e| ProgramError(e.to_string())),
            Program::StableHlo(m) => StableHloGraph::new(&m)
                .map(|g| Printer::StableHlo(Box::new(g), kind))
                .map_err(|e| ProgramError(e.to_string())),
            Program::Bytecode { .. } => unreachable!("as_text reads bytecode as text"),
        }
    }

    /// The nodes of the graph whose values differ from device to device: what a shard_map
    /// (a manual computation) computes between taking each device's piece of its operands
    /// (Shardy's `xla.sdy.GlobalToLocalShape`, GSPMD's `SPMDFullToShardShape`) and putting
    /// the pieces back together (`xla.sdy.LocalToGlobalShape`, `SPMDShardToFullShape`). No
    /// whole array holds such a value, so none is recorded for it. (StableHLO keeps a
    /// manual computation's body in its `sdy.manual_computation`, one node.)
    pub fn per_device_values(&self) -> std::collections::HashSet<NodeId> {
        let mut local = std::collections::HashSet::new();
        let Printer::Hlo(g, _) = self else {
            return local;
        };
        let target = |id: NodeId| {
            g.instruction_of(&g.graph.node(id).name)
                .and_then(|i| i.attr("custom_call_target"))
                .map(|t| t.trim_matches('"').to_string())
                .unwrap_or_default()
        };
        for id in g.graph.ids() {
            let t = target(id);
            if matches!(
                t.as_str(),
                "xla.sdy.LocalToGlobalShape" | "SPMDShardToFullShape"
            ) {
                continue;
            }
            let from_local = g.graph.node(id).inputs().iter().any(|i| local.contains(i));
            if from_local
                || matches!(
                    t.as_str(),
                    "xla.sdy.GlobalToLocalShape" | "SPMDFullToShardShape"
                )
            {
                local.insert(id);
            }
        }
        local
    }

    /// The program's graph.
    pub fn graph(&self) -> &Graph {
        match self {
            Printer::Hlo(g, _) => &g.graph,
            Printer::StableHlo(g, _) => &g.graph,
        }
    }

    /// The graph a fault's targets are found in (see [`Program::fault_graph`]).
    pub fn fault_graph(&self, spec: &FaultSpec) -> std::borrow::Cow<'_, Graph> {
        match self {
            Printer::Hlo(g, _) => g.fault_graph(spec),
            Printer::StableHlo(g, _) => std::borrow::Cow::Borrowed(&g.graph),
        }
    }

    /// The form the program was read in.
    pub fn kind(&self) -> Kind {
        match self {
            Printer::Hlo(_, k) | Printer::StableHlo(_, k) => *k,
        }
    }

    /// `cut` (a graph cut from [`Printer::graph`]) as text: HLO or StableHLO, the inputs
    /// named in `constants` printed as constants holding their values.
    pub fn text(&self, cut: &Graph, constants: &Constants) -> Result<String, String> {
        match self {
            Printer::Hlo(g, _) => g.print_with(cut, constants),
            Printer::StableHlo(g, _) => g.print_with(cut, constants),
        }
    }

    /// `cut` as a program to run.
    pub fn program(&self, cut: &Graph, constants: &Constants) -> Result<Program, String> {
        let text = self.text(cut, constants)?;
        let bug = |e: String| format!("graphbug printed a program it cannot read back: {e}");
        match self {
            Printer::Hlo(..) => Ok(Program::Hlo {
                module: crate::hlo::text::parse_module(&text).map_err(|e| bug(e.to_string()))?,
                kind: Kind::HloText,
            }),
            Printer::StableHlo(..) => Ok(Program::StableHlo(
                stablehlo::parse_module(&text).map_err(|e| bug(e.to_string()))?,
            )),
        }
    }

    /// `cut` as a file of the input's form: HLO text, an HLO proto, StableHLO text
    /// (bytecode input too: writing bytecode takes MLIR, and StableHLO text is what every
    /// tool that reads bytecode also reads).
    pub fn file_bytes(&self, cut: &Graph, constants: &Constants) -> Result<Vec<u8>, String> {
        let text = self.text(cut, constants)?;
        match self.kind() {
            Kind::HloProto => {
                let module = crate::hlo::text::parse_module(&text).map_err(|e| e.to_string())?;
                crate::hlo::proto::to_proto(&module).map_err(|e| e.to_string())
            }
            _ => Ok(text.into_bytes()),
        }
    }

    /// The file name a program of the input's form is written under.
    pub fn file_name(&self) -> &'static str {
        file_name(self.kind())
    }

    /// The computations the node `name` of the graph calls (an HLO instruction's called
    /// computations, a StableHLO `func.call`'s function), in order.
    pub fn called_by(&self, name: &str) -> Vec<String> {
        match self {
            Printer::Hlo(g, _) => g.called_by(name),
            Printer::StableHlo(g, _) => g.called_by(name),
        }
    }

    /// The condition of the loop `caller` runs when `body` is its body: an HLO `while`'s
    /// `condition=`, a `stablehlo.while`'s `cond` region.
    pub fn loop_condition(&self, caller: &str, body: &str) -> Option<String> {
        match self {
            Printer::Hlo(g, _) => {
                let i = g.instruction_of(caller)?;
                let named = |key: &str| i.attr(key).map(|v| v.trim_start_matches('%').to_string());
                (i.opcode == "while" && named("body").as_deref() == Some(body))
                    .then(|| named("condition"))
                    .flatten()
            }
            Printer::StableHlo(..) => {
                let base = body.strip_suffix(".body")?;
                (base == caller.split('#').next().unwrap_or(caller)).then(|| format!("{base}.cond"))
            }
        }
    }

    /// The called computation `name` alone, as a program of the input's dialect (text).
    pub fn outline(&self, name: &str) -> Result<Outlined, String> {
        match self {
            Printer::Hlo(g, _) => g.outline(name),
            Printer::StableHlo(g, _) => g.outline(name),
        }
    }

    /// The form an outlined program's text is read in.
    pub fn text_kind(&self) -> Kind {
        match self {
            Printer::Hlo(..) => Kind::HloText,
            Printer::StableHlo(..) => Kind::StableHloText,
        }
    }
}

/// `text` (a program graphbug printed) for a terminal: each line longer than `max`
/// characters that holds a constant's values shows them elided, as XLA's dumps do
/// (`constant({...})`, `dense<...>`); the files written hold them all.
pub fn elide_constants(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(1 << 16));
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let elided = (body.len() > max)
            .then(|| {
                if let (Some(a), Some(b)) = (body.find(" constant("), body.rfind(')')) {
                    let a = a + " constant(".len();
                    (a <= b).then(|| format!("{}{{...}}{}", &body[..a], &body[b..]))
                } else if let (Some(a), Some(b)) = (body.find("dense<"), body.rfind("> :")) {
                    let a = a + "dense<".len();
                    (a <= b).then(|| format!("{}...{}", &body[..a], &body[b..]))
                } else {
                    None
                }
            })
            .flatten();
        match elided {
            Some(e) => {
                out.push_str(&e);
                out.push_str(&line[body.len()..]);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// The file name a program of form `kind` is written under in graphbug's directories.
pub fn file_name(kind: Kind) -> &'static str {
    match kind {
        Kind::HloText => "program.hlo",
        Kind::HloProto => "program.hlo.pb",
        Kind::StableHloText | Kind::StableHloBytecode => "program.mlir",
    }
}

/// The node ids of `graph`, by node name.
fn ids_by_name(graph: &Graph) -> HashMap<String, u32> {
    graph
        .ids()
        .map(|id| (graph.node(id).name.to_string(), id.0))
        .collect()
}

/// The value of every array the original program computes, from one run on the reference
/// plugin, and (when the program raises to float64 and runs) the same values in float64.
#[derive(Debug, Default)]
pub struct Recorded {
    /// The original's inputs, by parameter.
    pub inputs: Vec<HostTensor>,
    /// The values of the original's nodes, by node id.
    values: HashMap<u32, HostTensor>,
    /// The float64 values of the original's nodes, when the float64 run worked.
    fp64: Option<HashMap<u32, HostTensor>>,
    /// Node ids by name.
    ids: HashMap<String, u32>,
}

impl Recorded {
    /// Records the values of `printer`'s program on `inputs`, run on `reference` (and, with
    /// `fp64`, in float64 there: what judging wrong results needs). The program is run once
    /// with every array it computes as an output.
    pub fn record(
        printer: &Printer,
        inputs: Vec<HostTensor>,
        reference: &XlaBackend,
        fp64: bool,
    ) -> Result<Recorded, String> {
        let graph = printer.graph();
        let per_device = printer.per_device_values();
        let arrays: Vec<u32> = graph
            .ids()
            .filter(|&id| {
                let n = graph.node(id);
                !n.is_placeholder()
                    && matches!(n.meta, Meta::Tensor(_))
                    && !per_device.contains(&id)
            })
            .map(|id| id.0)
            .collect();
        let ids = ids_by_name(graph);
        let placeholders = graph.placeholders();
        let mut recorded = Recorded {
            values: HashMap::new(),
            fp64: None,
            ids,
            inputs: Vec::new(),
        };
        for (k, id) in placeholders.iter().enumerate() {
            if let Some(t) = inputs.get(k) {
                recorded.values.insert(id.0, t.clone());
            }
        }
        if !arrays.is_empty() {
            let mut wide = graph.clone();
            wide.output = Some(
                arrays
                    .iter()
                    .map(|&i| Value::Node(graphbug_ir::NodeId(i)))
                    .collect(),
            );
            let program = printer.program(&wide, &Constants::new())?;
            let run = |program: &Program, inputs: &[HostTensor]| {
                reference
                    .compile(program)
                    .and_then(|c| c.execute(inputs))
                    .map_err(|f| f.to_string())
            };
            let outputs = run(&program, &inputs)?;
            if outputs.len() != arrays.len() {
                return Err(format!(
                    "the reference run returned {} values for {} arrays",
                    outputs.len(),
                    arrays.len()
                ));
            }
            recorded.values.extend(arrays.iter().copied().zip(outputs));
            // Float64 values judge whether a result is further from the truth than the
            // reference's: without them accuracy falls back to allclose.
            let fp64_inputs: Vec<HostTensor> = inputs.iter().map(to_fp64).collect();
            let raised = || program.raise_to_f64().map_err(|e| e.to_string());
            recorded.fp64 = (if fp64 { raised() } else { Err(String::new()) })
                .and_then(|p| run(&p, &fp64_inputs))
                .ok()
                .filter(|o| o.len() == arrays.len())
                .map(|o| {
                    let mut fp64: HashMap<u32, HostTensor> =
                        arrays.iter().copied().zip(o).collect();
                    for (k, id) in placeholders.iter().enumerate() {
                        if let Some(t) = fp64_inputs.get(k) {
                            fp64.insert(id.0, t.clone());
                        }
                    }
                    fp64
                });
        }
        recorded.inputs = inputs;
        Ok(recorded)
    }

    /// Saves the recorded values (not the inputs) to a tensors file (`.npz` holds every
    /// dtype): `v<id>` and, in float64, `f<id>`; atomically, so a reader sees all or none.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let mut named: Vec<(String, HostTensor)> = self
            .values
            .iter()
            .map(|(id, t)| (format!("v{id}"), t.clone()))
            .collect();
        if let Some(fp64) = &self.fp64 {
            named.extend(fp64.iter().map(|(id, t)| (format!("f{id}"), t.clone())));
        }
        graphbug_files::write(path, &named).map_err(|e| e.to_string())
    }

    /// The values [`Recorded::save`] saved for `graph`'s program, with its `inputs`.
    pub fn load(graph: &Graph, inputs: Vec<HostTensor>, path: &Path) -> Result<Recorded, String> {
        let named = graphbug_files::read(path).map_err(|e| e.to_string())?;
        let mut values = HashMap::new();
        let mut fp64 = HashMap::new();
        for (name, t) in named {
            let bad = || format!("{}: `{name}` is no recorded value", path.display());
            let (kind, id) = name.split_at(1);
            let id: u32 = id.parse().map_err(|_| bad())?;
            if id as usize >= graph.nodes.len() {
                return Err(bad());
            }
            match kind {
                "v" => values.insert(id, t),
                "f" => fp64.insert(id, t),
                _ => return Err(bad()),
            };
        }
        Ok(Recorded {
            inputs,
            values,
            fp64: (!fp64.is_empty()).then_some(fp64),
            ids: ids_by_name(graph),
        })
    }

    /// The value of `origin`.
    pub fn get(&self, origin: Origin) -> Result<&HostTensor, String> {
        match origin {
            Origin::Input(k) => self
                .inputs
                .get(k)
                .ok_or_else(|| format!("the program has no parameter {k}")),
            Origin::Node(id) => self
                .values
                .get(&id)
                .ok_or_else(|| format!("no value was recorded for node {id}")),
        }
    }

    /// The values of a candidate's parameters (none when its inputs are constants).
    pub fn candidate_inputs(&self, candidate: &Candidate) -> Result<Vec<HostTensor>, String> {
        if candidate.constants() {
            return Ok(Vec::new());
        }
        candidate
            .inputs
            .iter()
            .map(|&o| self.get(o).cloned())
            .collect()
    }

    /// The constants a candidate's program holds: the value of each input, by the name of
    /// its placeholder, when its inputs are constants (see [`Candidate::constants`]).
    pub fn constants(&self, candidate: &Candidate) -> Result<Constants, String> {
        if !candidate.constants() {
            return Ok(Constants::new());
        }
        candidate
            .graph
            .placeholders()
            .iter()
            .zip(&candidate.inputs)
            .map(|(id, &o)| {
                Ok((
                    candidate.graph.node(*id).name.to_string(),
                    self.get(o)?.clone(),
                ))
            })
            .collect()
    }

    /// The recorded values of the original's outputs (the reference run's outputs).
    pub fn outputs(&self, graph: &Graph) -> Result<Vec<HostTensor>, String> {
        let all = Original::borrowing(graph).as_given();
        let (values, _) = self.of(graph, &all, graph.outputs())?;
        Ok(values.into_iter().flatten().collect())
    }

    /// The value the reference run recorded for the original's instruction `name`.
    pub fn by_name(&self, name: &str) -> Option<&HostTensor> {
        self.values.get(self.ids.get(name)?)
    }

    /// Whether float64 values were recorded.
    pub fn has_fp64(&self) -> bool {
        self.fp64.is_some()
    }

    /// Fingerprints of every value (dtype, shape and bytes): equal values, equal keys.
    pub fn value_keys(&self, graph: &Graph) -> HashMap<Origin, u64> {
        use std::hash::{Hash, Hasher};
        let key = |t: &HostTensor| {
            let mut h = std::hash::DefaultHasher::new();
            t.dtype.short_name().hash(&mut h);
            t.shape.hash(&mut h);
            t.data.hash(&mut h);
            h.finish()
        };
        let mut keys: HashMap<Origin, u64> = self
            .inputs
            .iter()
            .enumerate()
            .map(|(k, t)| (Origin::Input(k), key(t)))
            .collect();
        let placeholders: Vec<u32> = graph.placeholders().iter().map(|id| id.0).collect();
        for (&id, t) in &self.values {
            if !placeholders.contains(&id) {
                keys.insert(Origin::Node(id), key(t));
            }
        }
        keys
    }

    /// The recorded (and float64) values of `values`, nodes of a candidate graph `g` named
    /// as the original's (a candidate's parameters by its inputs' origins).
    fn of(
        &self,
        g: &Graph,
        candidate: &Candidate,
        values: &[Value],
    ) -> Result<(Outputs, Option<Outputs>), String> {
        let placeholders = g.placeholders();
        let mut reference = Vec::with_capacity(values.len());
        let mut fp64 = Vec::with_capacity(values.len());
        for v in values {
            let Value::Node(id) = v else {
                return Err(format!("an output that is no value ({v:?})"));
            };
            let node = g.node(*id);
            let original = match placeholders.iter().position(|p| p == id) {
                Some(k) => candidate.inputs.get(k).copied(),
                None => self.ids.get(node.name.as_str()).map(|&i| Origin::Node(i)),
            }
            .ok_or_else(|| format!("`{}` is no value of the original", node.name))?;
            reference.push(Some(self.get(original)?.clone()));
            let wide = match original {
                Origin::Input(k) => self.inputs.get(k).map(to_fp64),
                Origin::Node(i) => self.fp64.as_ref().and_then(|f| f.get(&i).cloned()),
            };
            fp64.push(wide);
        }
        let fp64 = (self.fp64.is_some() && fp64.iter().all(Option::is_some)).then_some(fp64);
        Ok((reference, fp64))
    }
}

/// The values the computation `computation`, called by the node `caller` of the
/// program's graph, receives in the reference run, for each parameter of its outlined
/// program (see [`Printer::outline`]): a `call`'s or `fusion`'s operands (a StableHLO
/// `func.call`'s), a `while`'s state for its body and condition, a `conditional`'s operand
/// for each branch, taken apart where a `tuple` instruction built them; `None` where the
/// run recorded no such value (a reducer's scalars, a loop state that is no `tuple`
/// instruction).
pub fn called_values(
    printer: &Printer,
    recorded: &Recorded,
    caller: &str,
    computation: &str,
    outlined: &Outlined,
) -> Vec<Option<HostTensor>> {
    let hlo = match printer {
        Printer::Hlo(g, _) => g,
        Printer::StableHlo(g, _) => {
            let operands = if outlined.sources.is_empty() {
                g.call_operands(caller)
            } else {
                outlined.sources.clone()
            };
            return outlined
                .parameters
                .iter()
                .map(|(k, _)| recorded.by_name(operands.get(*k)?).cloned())
                .collect();
        }
    };
    let none = vec![None; outlined.parameters.len()];
    let Some(i) = hlo.instruction_of(caller) else {
        return none;
    };
    let operands = i.operand_names();
    let operand_of = |k: usize| -> Option<&str> {
        match i.opcode.as_str() {
            "call" | "fusion" => operands.get(k).copied(),
            "while" => (k == 0).then(|| operands.first().copied()).flatten(),
            "conditional" if k == 0 => {
                let branch = if let Some(list) = i.attr("branch_computations") {
                    list.trim_matches(['{', '}'])
                        .split(',')
                        .position(|b| b.trim().trim_start_matches('%') == computation)?
                } else if i
                    .attr("true_computation")
                    .map(|c| c.trim_start_matches('%'))
                    == Some(computation)
                {
                    0
                } else {
                    1
                };
                operands.get(branch + 1).copied()
            }
            _ => None,
        }
    };
    outlined
        .parameters
        .iter()
        .map(|(k, path)| {
            let mut name = operand_of(*k)?.to_string();
            for &j in path {
                let t = hlo.instruction_of(&name)?;
                if t.opcode != "tuple" {
                    return None;
                }
                name = t.operand_names().get(j)?.to_string();
            }
            recorded.by_name(&name).cloned()
        })
        .collect()
}

/// Values of a graph's outputs, each where known.
type Outputs = Vec<Option<HostTensor>>;

/// Compiles and runs candidates of an XLA program with a PJRT backend, on the values the
/// reference plugin recorded: a compile or runtime failure is the plugin's error; a wrong
/// result is an output beyond TorchDynamo's `same()` tolerance of the recorded value
/// (judged against float64 where recorded), localized to the instructions where the
/// divergence starts.
pub struct XlaChecker {
    backend: XlaBackend,
    kind: CheckKind,
    printer: Arc<Printer>,
    recorded: Arc<Recorded>,
    same: SameOptions,
    on_stage: Option<StageHook>,
    plugin_time: std::time::Duration,
}

impl XlaChecker {
    /// A checker of `kind` failures of `backend` on candidates cut from `printer`'s
    /// program: a fault on a node by name is bound to the op that node calls there
    /// ([`XlaBackend::bound`]), so it never fires on a parameter or constant that took
    /// the node's place in a candidate.
    pub fn new(
        backend: XlaBackend,
        kind: CheckKind,
        printer: Arc<Printer>,
        recorded: Arc<Recorded>,
        accuracy: AccuracyMode,
    ) -> Self {
        XlaChecker {
            backend: backend.bound(&printer),
            kind,
            printer,
            recorded,
            same: accuracy.options(),
            on_stage: None,
            plugin_time: std::time::Duration::ZERO,
        }
    }

    /// The time spent in the plugin so far: compiling and executing candidates (what a
    /// query cannot do without; the rest is graphbug's overhead).
    pub fn plugin_time(&self) -> std::time::Duration {
        self.plugin_time
    }

    /// Calls `f("compile")` before compiling and `f("runtime")` before running.
    pub fn on_stage(&mut self, f: StageHook) {
        self.on_stage = Some(f);
    }

    fn stage(&mut self, name: &str) {
        if let Some(f) = &mut self.on_stage {
            f(name);
        }
    }

    /// Compiles and runs `graph` (a cut of the original, holding `constants`) on
    /// `inputs`: its outputs, `None` when only compiling.
    fn run(
        &mut self,
        graph: &Graph,
        constants: &Constants,
        inputs: &[HostTensor],
    ) -> Result<Result<Option<Vec<HostTensor>>, graphbug_run::Failure>, String> {
        let program = self.printer.program(graph, constants)?;
        self.stage("compile");
        let started = Instant::now();
        let compiled = self.backend.compile(&program);
        self.plugin_time += started.elapsed();
        let compiled = match compiled {
            Ok(c) => c,
            Err(f) => return Ok(Err(f)),
        };
        if self.kind == CheckKind::Compile {
            return Ok(Ok(None));
        }
        self.stage("runtime");
        let started = Instant::now();
        let outputs = compiled.execute(inputs).map(Some);
        self.plugin_time += started.elapsed();
        Ok(outputs)
    }

    /// Runs `candidate` on the backend with every array it computes as an output (see
    /// [`widen`]) and judges each against its recorded value and float64 (TorchDynamo's
    /// `same()` rules): how many were judged, and the report of each node that diverges,
    /// by node index.
    fn divergences(
        &mut self,
        candidate: &Candidate,
        inputs: &[HostTensor],
    ) -> Result<(usize, Vec<Option<AccuracyReport>>), String> {
        let g = &candidate.graph;
        let (wide, extras) = widen(g);
        let extra_values: Vec<Value> = extras
            .iter()
            .map(|&i| Value::Node(graphbug_ir::NodeId(i as u32)))
            .collect();
        let (reference, fp64) = self.recorded.of(g, candidate, &extra_values)?;
        let constants = self.recorded.constants(candidate)?;
        let got = match self.run(&wide, &constants, inputs)? {
            Ok(Some(got)) => got,
            Ok(None) => return Err("a compile check runs nothing to compare".into()),
            Err(f) => {
                return Err(format!(
                    "the backend fails before anything can be compared: {f}"
                ))
            }
        };
        let n = g.outputs().len();
        let mut reports = vec![None; g.nodes.len()];
        for (k, &node) in extras.iter().enumerate() {
            if let (Some(res), Some(Some(r))) = (got.get(n + k), reference.get(k)) {
                let f = fp64.as_ref().map(|f| vec![f[k].clone()]);
                let report = same(
                    &[Some(r.clone())],
                    &[Some(res.clone())],
                    f.as_deref(),
                    &self.same,
                );
                if !report.passed() {
                    reports[node] = Some(report);
                }
            }
        }
        Ok((extras.len(), reports))
    }

    /// Where a wrong result of `candidate` starts (see [`culprits`]); empty when the
    /// candidate with every array as an output does not run.
    fn culprits(&mut self, candidate: &Candidate, inputs: &[HostTensor]) -> Vec<String> {
        match self.divergences(candidate, inputs) {
            Ok((_, reports)) => culprits(
                &candidate.graph,
                reports.iter().map(Option::is_some).collect(),
            ),
            Err(_) => Vec::new(),
        }
    }

    /// Where a wrong result of the whole program starts (`graphbug repro DIR analyze`):
    /// the first instruction that diverges, and the culprits (see [`culprits`]).
    pub fn analyze(&mut self) -> Result<Analysis, String> {
        let printer = self.printer.clone();
        let g = printer.graph();
        let inputs = self.recorded.inputs.clone();
        let (checked, reports) = self.divergences(&Original::borrowing(g).as_given(), &inputs)?;
        let first = reports.iter().enumerate().find_map(|(node, r)| {
            r.as_ref().map(|r| {
                (
                    g.nodes[node].name.to_string(),
                    r.to_string().trim().to_string(),
                )
            })
        });
        Ok(Analysis {
            checked,
            diverging: reports.iter().filter(|r| r.is_some()).count(),
            first,
            culprits: culprits(g, reports.iter().map(Option::is_some).collect()),
        })
    }
}

impl Checker for XlaChecker {
    fn describe(&self) -> String {
        describe_check(self.kind, self.backend.name())
    }

    fn check(&mut self, candidate: &Candidate) -> Verdict {
        let (inputs, constants) = match self
            .recorded
            .candidate_inputs(candidate)
            .and_then(|i| Ok((i, self.recorded.constants(candidate)?)))
        {
            Ok(split) => split,
            Err(e) => return Verdict::Unresolved(e),
        };
        let outputs = match self.run(&candidate.graph, &constants, &inputs) {
            Err(e) => return Verdict::Unresolved(e),
            Ok(Err(f)) => return Verdict::Fails(signature_of(&f)),
            Ok(Ok(None)) => return Verdict::Passes,
            Ok(Ok(Some(o))) => o,
        };
        if self.kind != CheckKind::Accuracy {
            return Verdict::Passes;
        }
        let g = &candidate.graph;
        let (reference, fp64) = match self.recorded.of(g, candidate, g.outputs()) {
            Ok(r) => r,
            Err(e) => return Verdict::Unresolved(e),
        };
        let result: Vec<Option<HostTensor>> = outputs.into_iter().map(Some).collect();
        let report = same(&reference, &result, fp64.as_deref(), &self.same);
        if report.passed() {
            return Verdict::Passes;
        }
        Verdict::Fails(Signature {
            kind: "accuracy wrong result".into(),
            op: None,
            message: ACCURACY_MESSAGE.into(),
            culprits: self.culprits(candidate, &inputs),
            margin: report.failure_margin(),
        })
    }
}

/// What an XLA worker needs to answer queries (JSON). Launched workers get it with the
/// inputs' bytes in it (`inputs_data`), as the first line of their input.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// Always `xla`: tells this spec from an aten graph's.
    pub family: String,
    /// The program as text (HLO, or StableHLO; bytecode as MLIR printed it).
    pub program: String,
    /// The inputs file (safetensors, `arg0`...).
    pub inputs: Option<PathBuf>,
    /// The inputs file's bytes, base64 (in a bundle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs_data: Option<String>,
    /// The backend checked (its fault, if any, written into its name).
    pub backend: String,
    /// The reference plugin's backend.
    pub reference: String,
    /// Which failure to look for.
    pub check: CheckKind,
    /// How accuracy is compared.
    pub accuracy: AccuracyMode,
    /// Where the worker saves the values it records (for this process and the workers
    /// after it, which then need no reference run of their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save_values: Option<PathBuf>,
    /// Values recorded by an earlier worker (see `save_values`), read instead of a
    /// reference run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<PathBuf>,
}

/// The spec's `family`.
const FAMILY: &str = "xla";

/// Whether `text` (a worker spec or bundle) is an XLA program's.
pub fn is_worker_spec(text: &str) -> bool {
    #[derive(Deserialize)]
    struct Family {
        family: Option<String>,
    }
    serde_json::from_str::<Family>(text).is_ok_and(|f| f.family.as_deref() == Some(FAMILY))
}

impl WorkerSpec {
    /// A spec checking `kind` failures of `backend` on `program` (text) and its `inputs`.
    pub fn new(
        program: String,
        inputs: PathBuf,
        backend: &XlaBackend,
        reference: &XlaBackend,
        check: CheckKind,
        accuracy: AccuracyMode,
    ) -> WorkerSpec {
        WorkerSpec {
            family: FAMILY.into(),
            program,
            inputs: Some(inputs),
            inputs_data: None,
            backend: backend.name().to_string(),
            reference: reference.name().to_string(),
            check,
            accuracy,
            save_values: None,
            values: None,
        }
    }

    /// Writes the spec into `dir` as `name`; returns the file to start workers with.
    pub fn write(&self, dir: &Path, name: &str) -> Result<PathBuf, String> {
        let path = dir.join(name);
        let text = serde_json::to_string(self).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }

    /// The spec with its inputs' bytes in it: the first line of a launched worker.
    pub fn bundle(&self) -> Result<String, String> {
        use base64::Engine;
        let mut spec = self.clone();
        if let Some(p) = spec.inputs.take() {
            let bytes = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            spec.inputs_data = Some(base64::engine::general_purpose::STANDARD.encode(bytes));
        }
        serde_json::to_string(&spec).map_err(|e| e.to_string())
    }

    /// The spec of a bundle, its inputs written into `dir`.
    fn unpack(mut self, dir: &Path) -> Result<WorkerSpec, String> {
        use base64::Engine;
        let data = self
            .inputs_data
            .take()
            .ok_or("the XLA worker bundle carries no inputs")?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| format!("bad inputs in the worker bundle: {e}"))?;
        // An npz file is a zip archive; anything else graphbug wrote is safetensors.
        let ext = if bytes.starts_with(b"PK") {
            "npz"
        } else {
            "safetensors"
        };
        let path = dir.join(format!("inputs.{ext}"));
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        self.inputs = Some(path);
        Ok(self)
    }

    /// The inputs, by parameter.
    fn read_inputs(&self, program: &Program) -> Result<Vec<HostTensor>, String> {
        let path = self
            .inputs
            .as_ref()
            .ok_or("the worker spec names no inputs")?;
        let named = graphbug_files::read(path).map_err(|e| e.to_string())?;
        let params = program.parameters().map_err(|e| e.to_string())?;
        let mut by_name: HashMap<String, HostTensor> = named.into_iter().collect();
        (0..params.len())
            .map(|k| {
                by_name
                    .remove(&format!("arg{k}"))
                    .ok_or_else(|| format!("the worker's inputs have no `arg{k}`"))
            })
            .collect()
    }
}

/// Reads a program's text (HLO or StableHLO) as a program.
pub fn program_of_text(text: &str) -> Result<Program, ProgramError> {
    let kind = if crate::hlo::text::looks_like_hlo(text) {
        Kind::HloText
    } else {
        Kind::StableHloText
    };
    Program::read(text.as_bytes(), kind)
}

/// The worker of an XLA program (see [`graphbug_minifier::isolate`]): `text` is its spec
/// (with `bundled`, its bundle, inputs included). Its start-up is the reference run that
/// records the values candidates run on.
pub fn worker_main(text: &str, bundled: bool) -> Result<(), String> {
    let mut spec: WorkerSpec =
        serde_json::from_str(text).map_err(|e| format!("bad XLA worker spec: {e}"))?;
    // Files a bundle brought live as long as the worker.
    let mut unpacked = None;
    if bundled {
        let scratch = graphbug_run::scratch::Scratch::new("worker").map_err(|e| e.to_string())?;
        spec = spec.unpack(scratch.path())?;
        unpacked = Some(scratch);
    }
    let queries = end_with_input(unpacked.as_ref().map(|s| s.path().to_path_buf()))?;
    let program = program_of_text(&spec.program).map_err(|e| e.to_string())?;
    let printer = Arc::new(Printer::new(&program).map_err(|e| e.to_string())?);
    let inputs = spec.read_inputs(&program)?;
    let reference = XlaBackend::parse(&spec.reference)?;
    let backend = XlaBackend::parse(&spec.backend)?;
    let started = Instant::now();
    let fp64 = spec.check == CheckKind::Accuracy;
    let recorded = match &spec.values {
        Some(path) => Recorded::load(printer.graph(), inputs, path)?,
        None => {
            let r = Recorded::record(&printer, inputs, &reference, fp64)?;
            if let Some(path) = &spec.save_values {
                // Those after this worker record the values themselves if this fails.
                if let Err(e) = r.save(path) {
                    eprintln!("the recorded values are not saved: {e}");
                }
            }
            r
        }
    };
    let recorded = Arc::new(recorded);
    let original = Original::borrowing(printer.graph());
    let mut checker = XlaChecker::new(
        backend,
        spec.check,
        printer.clone(),
        recorded,
        spec.accuracy,
    );
    let stages = Stages::start();
    checker.on_stage(stages.hook());
    serve(
        queries,
        &original,
        &|g| Ok(g),
        &mut checker,
        &stages,
        started.elapsed(),
    )
}

/// Where a wrong result of the whole program starts (`graphbug repro DIR analyze`).
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    /// Arrays compared.
    pub checked: usize,
    /// The first instruction (in the program's order) whose value diverges, with what
    /// its comparison said.
    pub first: Option<(String, String)>,
    /// The instructions where the divergence that reaches the outputs starts.
    pub culprits: Vec<String>,
    /// How many diverge.
    pub diverging: usize,
}

//! Numeric traces: per node, a hash and summary statistics of every value a run produced,
//! and the first node where two runs (two backends, CPU and CUDA, two libtorch versions,
//! two machines) diverge.
//!
//! A trace is a JSON Lines file: a header, one line per recorded value in the order the run
//! produced them, and an end line saying how the run ended. Lines are written as the run
//! goes, so a run that crashes or is killed still leaves every value before the crash; a
//! trace without its end line is reported as cut short.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use graphbug_ir::{Graph, Node, NodeId, NodeKind};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tch::{Device, Kind, Tensor};

use crate::dtype::meta_of;
use crate::error::{AtenError, Result};
use crate::interp::RtValue;

/// The format tag in a trace's header line.
pub const TRACE_FORMAT: &str = "graphbug-trace/1";

/// How many values a summary samples, at evenly spaced positions.
const SAMPLES: usize = 8;

/// How many random projections a summary keeps.
const PROJECTIONS: usize = 4;

/// How many standard deviations of round-off within tolerance a projection may move before
/// the move counts as a divergence (a false alarm about once in 10^9 projections).
const SIGMAS: f64 = 6.0;

/// The weight of row-major position `i` in projection `p`: a fixed pseudo-random number in
/// [-1, 1) (splitmix64 of the position), the same in every trace.
fn weight(i: usize, p: usize) -> f64 {
    let mut z = (i as u64)
        .wrapping_mul(PROJECTIONS as u64)
        .wrapping_add(p as u64)
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

/// A float that survives JSON: finite values are numbers, the rest `"nan"`, `"inf"`,
/// `"-inf"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct F64(pub f64);

impl Serialize for F64 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self.0 {
            x if x.is_finite() => s.serialize_f64(x),
            x if x.is_nan() => s.serialize_str("nan"),
            x if x > 0.0 => s.serialize_str("inf"),
            _ => s.serialize_str("-inf"),
        }
    }
}

impl<'de> Deserialize<'de> for F64 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<F64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Num(f64),
            Text(String),
        }
        match Repr::deserialize(d)? {
            Repr::Num(x) => Ok(F64(x)),
            Repr::Text(t) => match t.as_str() {
                "nan" => Ok(F64(f64::NAN)),
                "inf" => Ok(F64(f64::INFINITY)),
                "-inf" => Ok(F64(f64::NEG_INFINITY)),
                other => Err(serde::de::Error::custom(format!(
                    "`{other}` is not a number, nan, inf or -inf"
                ))),
            },
        }
    }
}

/// What a trace records of one tensor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorSummary {
    /// Element type (`f32`, `i64`, ...).
    pub dtype: String,
    /// Sizes.
    pub shape: Vec<i64>,
    /// The first 16 hex digits of the SHA-256 of the values, row-major in their own dtype
    /// (equal hashes: bitwise-equal values, whatever the device or strides).
    pub hash: String,
    /// Least finite value (complex tensors: over real and imaginary parts).
    pub min: Option<F64>,
    /// Greatest finite value.
    pub max: Option<F64>,
    /// Mean of the finite values.
    pub mean: Option<F64>,
    /// Mean of the finite values' magnitudes (the scale the mean is compared at).
    pub mean_abs: Option<F64>,
    /// Random projections of the finite values: `sum(w_i * x_i)` for fixed pseudo-random
    /// weights `w_i` in [-1, 1) of each position; a change of any single element moves
    /// them, where the other statistics may not move.
    pub proj: Vec<F64>,
    /// For each projection, `sum(w_i^2)`, `sum(w_i^2 |x_i|)` and `sum(w_i^2 x_i^2)` over
    /// the finite values: how far round-off within a tolerance can move it.
    pub proj_moments: Vec<[F64; 3]>,
    /// How many values are NaN.
    pub nan: u64,
    /// How many values are infinite.
    pub inf: u64,
    /// Values at up to eight evenly spaced row-major positions, first and last included.
    pub sample: Vec<F64>,
}

impl TensorSummary {
    /// Summarizes `t` (copied to the CPU; statistics are summed in order, in float64, so
    /// they do not depend on libtorch's threads).
    pub fn of(t: &Tensor) -> Result<TensorSummary> {
        let meta = meta_of(t).ok_or_else(|| {
            AtenError::Trace(format!("cannot trace a tensor of dtype {:?}", t.kind()))
        })?;
        let mut cpu = t.to_device(Device::Cpu);
        if cpu.is_sparse() {
            cpu = cpu.to_dense(None, false);
        }
        let cpu = cpu.contiguous();
        let numel = cpu.numel();
        let mut bytes = vec![0u8; numel * cpu.kind().elt_size_in_bytes()];
        cpu.f_copy_data_u8(&mut bytes, numel)?;
        let digest = Sha256::digest(&bytes);
        drop(bytes);
        let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        let real = if cpu.is_complex() {
            cpu.view_as_real()
        } else {
            cpu
        };
        let values = Vec::<f64>::try_from(real.to_kind(Kind::Double).reshape([-1]))?;
        let (mut min, mut max, mut sum, mut sum_abs) = (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0.0);
        let (mut finite, mut nan, mut inf) = (0u64, 0u64, 0u64);
        let mut proj = [0.0; PROJECTIONS];
        let mut moments = [[0.0; 3]; PROJECTIONS];
        for (i, &v) in values.iter().enumerate() {
            if v.is_nan() {
                nan += 1;
            } else if v.is_infinite() {
                inf += 1;
            } else {
                min = min.min(v);
                max = max.max(v);
                sum += v;
                sum_abs += v.abs();
                finite += 1;
                for (p, (sum, m)) in proj.iter_mut().zip(&mut moments).enumerate() {
                    let w = weight(i, p);
                    let w2 = w * w;
                    *sum += w * v;
                    m[0] += w2;
                    m[1] += w2 * v.abs();
                    m[2] += w2 * v * v;
                }
            }
        }
        let n = values.len();
        let sample = if n <= SAMPLES {
            values.iter().map(|&v| F64(v)).collect()
        } else {
            (0..SAMPLES)
                .map(|k| F64(values[k * (n - 1) / (SAMPLES - 1)]))
                .collect()
        };
        let some = |x: f64| (finite > 0).then_some(F64(x));
        Ok(TensorSummary {
            dtype: meta.dtype.to_string(),
            shape: meta.shape.to_vec(),
            hash,
            min: some(min),
            max: some(max),
            mean: some(sum / finite.max(1) as f64),
            mean_abs: some(sum_abs / finite.max(1) as f64),
            proj: proj.into_iter().map(F64).collect(),
            proj_moments: moments.iter().map(|m| m.map(F64)).collect(),
            nan,
            inf,
            sample,
        })
    }
}

/// A recorded value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceValue {
    /// A tensor's summary.
    Tensor(TensorSummary),
    /// `None` or an undefined tensor.
    None,
    /// An int.
    Int(i64),
    /// A float.
    Float(F64),
    /// A bool.
    Bool(bool),
    /// A value that could not be summarized, and why.
    Unreadable(String),
}

/// One recorded value: of which node, in which graph of the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceEntry {
    /// Which graph of the run: `inputs` and `outputs` (recorded around the backend),
    /// `graph` (the graph as given), `forward` or `backward` (an AOT pipeline's halves).
    pub part: String,
    /// The node's name.
    pub node: String,
    /// What the node is: its op, or `placeholder`, `getitem`, `get_attr`.
    pub op: String,
    /// The position inside a node's several results (a tuple or a tensor list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<usize>,
    /// The nodes it reads, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    /// What it produced.
    pub value: TraceValue,
}

impl TraceEntry {
    /// The node and item, as `node` or `node[i]`.
    pub fn label(&self) -> String {
        match self.item {
            Some(i) => format!("{}[{i}]", self.node),
            None => self.node.clone(),
        }
    }
}

/// The first line of a trace: what ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// Always [`TRACE_FORMAT`].
    pub format: String,
    /// The graph file.
    pub graph: String,
    /// The backend.
    pub backend: String,
    /// The device.
    pub device: String,
    /// The graphbug version that wrote it.
    pub graphbug: String,
    /// The libtorch version it ran on.
    #[serde(default)]
    pub libtorch: String,
}

/// One line of a trace file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    Header(TraceHeader),
    Node(Box<TraceEntry>),
    End { outcome: String },
}

/// Where a run's values go: a trace file, written line by line. Clones share the file; each
/// names the graph (`part`) its values belong to, and may record some nodes under other
/// names (a fault wrapper records its inserted node as the node it stands for).
#[derive(Clone)]
pub struct TraceSink {
    file: Arc<Mutex<SinkFile>>,
    part: Arc<str>,
    aliases: Arc<HashMap<String, TraceAlias>>,
}

/// The node a sink records another node's value as: its name, op and inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceAlias {
    /// The node's name.
    pub node: String,
    /// Its op (as [`TraceEntry::op`]).
    pub op: String,
    /// The nodes it reads.
    pub inputs: Vec<String>,
}

struct SinkFile {
    path: PathBuf,
    out: BufWriter<File>,
    error: Option<String>,
    ended: bool,
    /// Values recorded by graphs' nodes (not by [`TraceSink::record_tensor`]).
    nodes: u64,
}

impl fmt::Debug for TraceSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceSink")
            .field("path", &self.file.lock().path)
            .field("part", &self.part)
            .finish_non_exhaustive()
    }
}

impl TraceSink {
    /// Creates (or truncates) the trace file at `path` and writes its header; values
    /// recorded through the sink belong to the `graph` part.
    pub fn create(path: &Path, mut header: TraceHeader) -> Result<TraceSink> {
        let file = File::create(path).map_err(|e| {
            AtenError::Trace(format!("cannot create trace {}: {e}", path.display()))
        })?;
        header.format = TRACE_FORMAT.to_string();
        header.libtorch = crate::shim::torch_version();
        let sink = TraceSink {
            file: Arc::new(Mutex::new(SinkFile {
                path: path.to_path_buf(),
                out: BufWriter::new(file),
                error: None,
                ended: false,
                nodes: 0,
            })),
            part: Arc::from("graph"),
            aliases: Arc::default(),
        };
        sink.write(&Line::Header(header));
        sink.error()?;
        Ok(sink)
    }

    /// The same file, recording into graph `part`, without aliases.
    pub fn part(&self, part: &str) -> TraceSink {
        TraceSink {
            file: self.file.clone(),
            part: Arc::from(part),
            aliases: Arc::default(),
        }
    }

    /// The same file and part, recording node `from` as node `to` for each pair (a value
    /// recorded twice under one name counts by its last record).
    pub fn with_aliases(&self, pairs: impl IntoIterator<Item = (String, TraceAlias)>) -> TraceSink {
        let mut aliases = (*self.aliases).clone();
        aliases.extend(pairs);
        TraceSink {
            file: self.file.clone(),
            part: self.part.clone(),
            aliases: Arc::new(aliases),
        }
    }

    /// How many node values graphs have recorded so far (a backend that does not run
    /// graphs node by node records none).
    pub fn recorded_nodes(&self) -> u64 {
        self.file.lock().nodes
    }

    /// The graph part this sink records into.
    pub fn part_name(&self) -> &str {
        &self.part
    }

    /// Records what node `node` (op `op`, reading `inputs`) produced: one line, or one per
    /// item of several results.
    pub fn record(&self, node: &str, op: &str, inputs: &[&str], value: &RtValue) {
        let (node, op, inputs): (&str, &str, Vec<String>) = match self.aliases.get(node) {
            Some(a) => (&a.node, &a.op, a.inputs.clone()),
            None => (node, op, inputs.iter().map(|s| s.to_string()).collect()),
        };
        let entry = |item: Option<usize>, value: TraceValue| {
            Line::Node(Box::new(TraceEntry {
                part: self.part.to_string(),
                node: node.to_string(),
                op: op.to_string(),
                item,
                inputs: inputs.clone(),
                value,
            }))
        };
        self.file.lock().nodes += 1;
        match value {
            RtValue::Tuple(items) => {
                for (i, v) in items.iter().enumerate() {
                    self.write(&entry(Some(i), summarize(v)));
                }
            }
            RtValue::List(items) => {
                for (i, t) in items.iter().enumerate() {
                    self.write(&entry(Some(i), summarize_tensor(t)));
                }
            }
            other => self.write(&entry(None, summarize(other))),
        }
    }

    /// Records a tensor (or its absence) the run saw outside any graph: an input or an
    /// output, named `name`.
    pub fn record_tensor(&self, name: &str, t: Option<&Tensor>) {
        let value = t.map_or(TraceValue::None, summarize_tensor);
        self.write(&Line::Node(Box::new(TraceEntry {
            part: self.part.to_string(),
            node: name.to_string(),
            op: self.part.to_string(),
            item: None,
            inputs: Vec::new(),
            value,
        })));
    }

    /// Writes the end line with how the run ended (`completed`, or `failed: ...`) and
    /// flushes; fails if any line could not be written.
    pub fn finish(&self, outcome: &str) -> Result<()> {
        self.write(&Line::End {
            outcome: outcome.to_string(),
        });
        self.file.lock().ended = true;
        self.error()
    }

    /// The first write error, if any.
    fn error(&self) -> Result<()> {
        let f = self.file.lock();
        match &f.error {
            Some(e) => Err(AtenError::Trace(format!(
                "cannot write trace {}: {e}",
                f.path.display()
            ))),
            None => Ok(()),
        }
    }

    /// Writes and flushes one line (flushed so that a crash loses nothing before it); the
    /// first error is kept for [`Self::finish`], and nothing is written after it.
    fn write(&self, line: &Line) {
        let mut f = self.file.lock();
        if f.error.is_some() || f.ended {
            return;
        }
        let text = serde_json::to_string(line).expect("trace lines serialize");
        let result = writeln!(f.out, "{text}").and_then(|()| f.out.flush());
        if let Err(e) = result {
            f.error = Some(e.to_string());
        }
    }
}

/// What a trace calls a node's op: the op, or `placeholder`, `getitem`, `get_attr`.
pub fn op_label(node: &Node) -> String {
    match &node.kind {
        NodeKind::Call { op, .. } => op.to_string(),
        NodeKind::Placeholder => "placeholder".to_string(),
        NodeKind::GetItem { .. } => "getitem".to_string(),
        NodeKind::GetAttr { .. } => "get_attr".to_string(),
    }
}

/// How `graph` records the value of its node `id`: name, op and inputs.
pub fn alias_of(graph: &Graph, id: NodeId) -> TraceAlias {
    let node = graph.node(id);
    let mut inputs = Vec::new();
    node.for_each_input(|s| inputs.push(graph.node(s).name.to_string()));
    TraceAlias {
        node: node.name.to_string(),
        op: op_label(node),
        inputs,
    }
}

fn summarize_tensor(t: &Tensor) -> TraceValue {
    if !t.defined() {
        return TraceValue::None;
    }
    match TensorSummary::of(t) {
        Ok(s) => TraceValue::Tensor(s),
        Err(e) => TraceValue::Unreadable(e.to_string()),
    }
}

fn summarize(v: &RtValue) -> TraceValue {
    match v {
        RtValue::None => TraceValue::None,
        RtValue::Tensor(t) => summarize_tensor(t),
        RtValue::Int(i) => TraceValue::Int(*i),
        RtValue::Float(x) => TraceValue::Float(F64(*x)),
        RtValue::Bool(b) => TraceValue::Bool(*b),
        RtValue::List(_) | RtValue::Tuple(_) => {
            TraceValue::Unreadable("a nested list of results".to_string())
        }
    }
}

/// A trace read back from its file.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// What ran.
    pub header: TraceHeader,
    /// The recorded values, in the order the run produced them.
    pub entries: Vec<TraceEntry>,
    /// How the run ended; `None` when the trace has no end line (the run crashed or was
    /// killed, or is still running).
    pub outcome: Option<String>,
}

impl Trace {
    /// Reads a trace file; a malformed line is an error naming the file and line.
    pub fn read(path: &Path) -> Result<Trace> {
        let file = File::open(path)
            .map_err(|e| AtenError::Trace(format!("cannot read trace {}: {e}", path.display())))?;
        let at = |n: usize, why: String| AtenError::Trace(format!("{}:{n}: {why}", path.display()));
        let mut header = None;
        let mut entries = Vec::new();
        let mut outcome = None;
        for (k, line) in BufReader::new(file).lines().enumerate() {
            let n = k + 1;
            let line = line.map_err(|e| at(n, e.to_string()))?;
            if line.trim().is_empty() {
                continue;
            }
            let parsed: Line =
                serde_json::from_str(&line).map_err(|e| at(n, format!("not a trace line: {e}")))?;
            match (parsed, header.is_some(), outcome.is_some()) {
                (Line::Header(h), false, _) => {
                    if h.format != TRACE_FORMAT {
                        return Err(at(
                            n,
                            format!("format `{}`, expected `{TRACE_FORMAT}`", h.format),
                        ));
                    }
                    header = Some(h);
                }
                (_, false, _) => {
                    return Err(at(
                        n,
                        "a trace starts with its header line (is this a graphbug trace?)".into(),
                    ))
                }
                (_, true, true) => return Err(at(n, "a line after the end line".into())),
                (Line::Header(_), true, _) => return Err(at(n, "a second header".into())),
                (Line::Node(e), true, false) => entries.push(*e),
                (Line::End { outcome: o }, true, false) => outcome = Some(o),
            }
        }
        let header = header.ok_or_else(|| {
            AtenError::Trace(format!("{}: empty, not a graphbug trace", path.display()))
        })?;
        Ok(Trace {
            header,
            entries,
            outcome,
        })
    }
}

/// How far apart two traced values may be and still agree: `|a - b| <= atol + rtol *
/// max(|a|, |b|)` for each statistic and sampled value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Absolute tolerance.
    pub atol: f64,
    /// Relative tolerance.
    pub rtol: f64,
}

impl Default for Tolerance {
    /// TorchDynamo's `same()` default for float32: 1e-4 absolute and relative.
    fn default() -> Self {
        Tolerance {
            atol: 1e-4,
            rtol: 1e-4,
        }
    }
}

impl Tolerance {
    fn close(&self, a: f64, b: f64) -> bool {
        if a.is_nan() || b.is_nan() {
            return a.is_nan() && b.is_nan();
        }
        if a.is_infinite() || b.is_infinite() {
            return a == b;
        }
        (a - b).abs() <= self.atol + self.rtol * a.abs().max(b.abs())
    }
}

/// How two records of one value compare.
#[derive(Clone, Debug, PartialEq)]
pub enum Agreement {
    /// Bitwise equal.
    Identical,
    /// Different bits, every statistic within tolerance.
    Within,
    /// Out of tolerance, and how.
    Diverged(String),
    /// Cannot be compared (a value could not be read, or the ops differ), and why.
    NotComparable(String),
}

/// Compares two records of one value.
pub fn compare_values(a: &TraceValue, b: &TraceValue, tol: &Tolerance) -> Agreement {
    use TraceValue as V;
    match (a, b) {
        (V::Unreadable(why), _) | (_, V::Unreadable(why)) => {
            Agreement::NotComparable(format!("a value could not be read: {why}"))
        }
        (V::Tensor(x), V::Tensor(y)) => compare_tensors(x, y, tol),
        (V::None, V::None) => Agreement::Identical,
        (V::Int(x), V::Int(y)) if x == y => Agreement::Identical,
        (V::Bool(x), V::Bool(y)) if x == y => Agreement::Identical,
        (V::Float(x), V::Float(y)) if x.0.to_bits() == y.0.to_bits() => Agreement::Identical,
        (V::Float(x), V::Float(y)) if tol.close(x.0, y.0) => Agreement::Within,
        _ => Agreement::Diverged(format!("{} vs {}", describe_value(a), describe_value(b))),
    }
}

fn compare_tensors(a: &TensorSummary, b: &TensorSummary, tol: &Tolerance) -> Agreement {
    let diverged = |what: String| Agreement::Diverged(what);
    if a.dtype != b.dtype || a.shape != b.shape {
        return diverged(format!(
            "{} vs {}",
            shape_text(&a.dtype, &a.shape),
            shape_text(&b.dtype, &b.shape)
        ));
    }
    if a.hash == b.hash {
        return Agreement::Identical;
    }
    if a.nan != b.nan {
        return diverged(format!("{} NaN vs {} NaN", a.nan, b.nan));
    }
    if a.inf != b.inf {
        return diverged(format!("{} infinite vs {} infinite", a.inf, b.inf));
    }
    for (what, x, y) in [("min", a.min, b.min), ("max", a.max, b.max)] {
        let same = match (x, y) {
            (Some(x), Some(y)) => tol.close(x.0, y.0),
            (None, None) => true,
            _ => false,
        };
        if !same {
            return diverged(format!("{what} {} vs {}", stat(x), stat(y)));
        }
    }
    // The mean moves at most atol + rtol mean(|a|) when every element is within
    // tolerance (|a_i - b_i| <= atol + rtol |a_i|); beyond that, some element is not.
    let big = |x: Option<F64>, y: Option<F64>| x.map_or(0.0, |v| v.0).max(y.map_or(0.0, |v| v.0));
    let mean_bound = tol.atol + tol.rtol * big(a.mean_abs, b.mean_abs);
    match (a.mean, b.mean) {
        (Some(x), Some(y)) if (x.0 - y.0).abs() <= mean_bound * (1.0 + 1e-9) => {}
        (None, None) => {}
        (x, y) => return diverged(format!("mean {} vs {}", stat(x), stat(y))),
    }
    // A projection sums the elements' differences with random signs, so round-off within
    // tolerance moves it by about sqrt(sum w_i^2 (atol + rtol |a_i|)^2); one element far
    // out of tolerance moves it by far more.
    if a.proj.len() != b.proj.len() || a.proj_moments.len() != a.proj.len() {
        return Agreement::NotComparable("the traces kept different projections".into());
    }
    for p in 0..a.proj.len() {
        let m = |k: usize| a.proj_moments[p][k].0.max(b.proj_moments[p][k].0);
        let spread = (tol.atol * tol.atol * m(0)
            + 2.0 * tol.atol * tol.rtol * m(1)
            + tol.rtol * tol.rtol * m(2))
        .sqrt();
        let (x, y) = (a.proj[p].0, b.proj[p].0);
        let moved = (x - y).abs();
        if moved > SIGMAS * spread + 1e-12 * m(2).sqrt() {
            return diverged(format!(
                "random projection {p}: {} vs {}, {} times what round-off within tolerance \
                 explains (some element is out of tolerance)",
                num(x),
                num(y),
                if spread > 0.0 {
                    format!("{:.0}", moved / spread)
                } else {
                    "infinitely many".to_string()
                }
            ));
        }
    }
    let numel: i64 = a.shape.iter().product();
    let n = a.sample.len();
    for (k, (x, y)) in a.sample.iter().zip(&b.sample).enumerate() {
        if !tol.close(x.0, y.0) {
            let at = if numel as usize > n && n > 1 {
                k * (numel as usize - 1) / (n - 1)
            } else {
                k
            };
            return diverged(format!("element {at}: {} vs {}", num(x.0), num(y.0)));
        }
    }
    if a.sample.len() != b.sample.len() {
        return Agreement::NotComparable("the traces sampled different numbers of values".into());
    }
    Agreement::Within
}

fn shape_text(dtype: &str, shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("{dtype}[{}]", dims.join(", "))
}

fn num(x: f64) -> String {
    format!("{x:.6e}")
}

fn stat(x: Option<F64>) -> String {
    x.map_or("none (no finite value)".to_string(), |v| num(v.0))
}

/// A value in one line: a tensor's dtype, shape, statistics and hash.
pub fn describe_value(v: &TraceValue) -> String {
    match v {
        TraceValue::Tensor(t) => format!(
            "{} min {} max {} mean {} NaN {} inf {} hash {}",
            shape_text(&t.dtype, &t.shape),
            stat(t.min),
            stat(t.max),
            stat(t.mean),
            t.nan,
            t.inf,
            t.hash
        ),
        TraceValue::None => "None".to_string(),
        TraceValue::Int(i) => format!("int {i}"),
        TraceValue::Float(x) => format!("float {}", num(x.0)),
        TraceValue::Bool(b) => format!("bool {b}"),
        TraceValue::Unreadable(why) => format!("unreadable ({why})"),
    }
}

/// A value two traces disagree on.
#[derive(Clone, Debug, PartialEq)]
pub struct Divergence {
    /// The first trace's record.
    pub a: TraceEntry,
    /// The second trace's record.
    pub b: TraceEntry,
    /// How they differ.
    pub why: String,
}

/// Where two traces agree and where they first diverge.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceDiff {
    /// The tolerance used.
    pub tolerance: Tolerance,
    /// Values both traces hold, with the same op.
    pub compared: usize,
    /// Of those, bitwise equal.
    pub identical: usize,
    /// Of those, within tolerance.
    pub within: usize,
    /// Of those, out of tolerance, in the first trace's order.
    pub diverged: Vec<Divergence>,
    /// Values that could not be compared (`part node`: why), in the first trace's order.
    pub not_comparable: Vec<(String, String)>,
    /// Values only the first trace holds (`part node`).
    pub only_in_a: Vec<String>,
    /// Values only the second trace holds (`part node`).
    pub only_in_b: Vec<String>,
    /// For the first divergence: each input's name and how it compared (`None`: not
    /// compared, so the divergence may start there).
    pub first_inputs: Vec<(String, Option<Agreement>)>,
    /// How the runs end, when they end differently (one completed, the other failed or
    /// was cut short): a divergence too, whatever the values say.
    pub ended_differently: Option<String>,
    /// Things to know: parts only one trace has.
    pub notes: Vec<String>,
}

type Key<'a> = (&'a str, &'a str, Option<usize>);

fn key(e: &TraceEntry) -> Key<'_> {
    (&e.part, &e.node, e.item)
}

/// The graph parts of a trace, in the order they first appear.
fn parts_of(t: &Trace) -> Vec<String> {
    let mut p: Vec<String> = Vec::new();
    for e in &t.entries {
        if !p.contains(&e.part) {
            p.push(e.part.clone());
        }
    }
    p
}

/// Trace `b` with its parts and placeholders named as in `a` where the two are runs of
/// different kinds: the graph as given (`graph`, traced by eager and most backends) is an AOT
/// pipeline's `forward` under other placeholder names (`primals_K` for `argK_1`); every other
/// node keeps its name through functionalization, decomposition and partitioning, so values
/// match by name, op and inputs. Entries stay in `b`'s order, one for one. Also returns a
/// note saying how the parts were matched, when they were.
fn aligned_with(a: &Trace, b: &Trace) -> (Vec<TraceEntry>, Option<String>) {
    let (pa, pb) = (parts_of(a), parts_of(b));
    let has = |p: &[String], name: &str| p.iter().any(|x| x == name);
    let (from, to) = if has(&pa, "graph")
        && !has(&pa, "forward")
        && has(&pb, "forward")
        && !has(&pb, "graph")
    {
        ("forward", "graph")
    } else if has(&pb, "graph") && !has(&pb, "forward") && has(&pa, "forward") && !has(&pa, "graph")
    {
        ("graph", "forward")
    } else {
        return (b.entries.clone(), None);
    };
    let placeholders = |t: &'_ Trace, part: &str| -> Vec<String> {
        t.entries
            .iter()
            .filter(|e| e.part == part && e.op == "placeholder" && e.item.is_none())
            .map(|e| e.node.clone())
            .collect()
    };
    let (ours, theirs) = (placeholders(b, from), placeholders(a, to));
    let renamed: HashMap<String, String> = if ours.len() == theirs.len() {
        ours.into_iter().zip(theirs).collect()
    } else {
        HashMap::new()
    };
    let entries = b
        .entries
        .iter()
        .map(|e| {
            let mut e = e.clone();
            if e.part == from {
                e.part = to.to_string();
                let rename = |n: &mut String| {
                    if let Some(m) = renamed.get(n.as_str()) {
                        *n = m.clone();
                    }
                };
                rename(&mut e.node);
                e.inputs.iter_mut().for_each(rename);
            }
            e
        })
        .collect();
    let (ka, kb) = if from == "forward" {
        ("A", "B")
    } else {
        ("B", "A")
    };
    let mut note = format!(
        "trace {ka}'s `graph` is compared with trace {kb}'s `forward` (the AOT pipeline's forward graph): values match by node name, op and inputs"
    );
    if renamed.is_empty() {
        note.push_str(", but the two graphs have different numbers of placeholders, so values read straight from them are not compared");
    } else {
        note.push_str(", placeholders by position");
    }
    (entries, Some(note))
}

/// Compares two traces value by value, matching values by graph part, node name and item;
/// a node recorded twice counts by its last record; a value whose op or inputs differ is
/// not comparable. The graph an eager-like backend traces is matched with an AOT
/// pipeline's forward graph ([`aligned_with`]). Fails when they share no value.
pub fn diff(a: &Trace, b: &Trace, tol: &Tolerance) -> Result<TraceDiff> {
    let (b_entries, matched_note) = aligned_with(a, b);
    let b_aligned = Trace {
        header: b.header.clone(),
        entries: b_entries,
        outcome: b.outcome.clone(),
    };
    let last = |t: &'_ Trace| -> HashMap<(String, String, Option<usize>), usize> {
        t.entries
            .iter()
            .enumerate()
            .map(|(i, e)| ((e.part.clone(), e.node.clone(), e.item), i))
            .collect()
    };
    let (last_a, last_b) = (last(a), last(&b_aligned));
    let owned = |k: Key<'_>| (k.0.to_string(), k.1.to_string(), k.2);
    let mut out = TraceDiff {
        tolerance: *tol,
        compared: 0,
        identical: 0,
        within: 0,
        diverged: Vec::new(),
        not_comparable: Vec::new(),
        only_in_a: Vec::new(),
        only_in_b: Vec::new(),
        first_inputs: Vec::new(),
        ended_differently: None,
        notes: Vec::new(),
    };
    // How each node compared (the worst of its items), by part and name.
    let mut status: HashMap<(&str, &str), Agreement> = HashMap::new();
    let rank = |g: &Agreement| match g {
        Agreement::Identical => 0,
        Agreement::Within => 1,
        Agreement::NotComparable(_) => 2,
        Agreement::Diverged(_) => 3,
    };
    for (i, ea) in a.entries.iter().enumerate() {
        if last_a[&owned(key(ea))] != i {
            continue;
        }
        let label = format!("{} `{}`", ea.part, ea.label());
        let Some(&j) = last_b.get(&owned(key(ea))) else {
            out.only_in_a.push(label);
            continue;
        };
        let eb = &b_aligned.entries[j];
        let agreement = if ea.op != eb.op {
            Agreement::NotComparable(format!("op {} vs {}", ea.op, eb.op))
        } else if ea.inputs != eb.inputs {
            Agreement::NotComparable(format!(
                "inputs ({}) vs ({})",
                ea.inputs.join(", "),
                b.entries[j].inputs.join(", ")
            ))
        } else {
            compare_values(&ea.value, &eb.value, tol)
        };
        match &agreement {
            Agreement::Identical => out.identical += 1,
            Agreement::Within => out.within += 1,
            Agreement::Diverged(why) => {
                if out.diverged.is_empty() {
                    out.first_inputs = ea
                        .inputs
                        .iter()
                        .map(|n| {
                            (
                                n.clone(),
                                status.get(&(ea.part.as_str(), n.as_str())).cloned(),
                            )
                        })
                        .collect();
                }
                out.diverged.push(Divergence {
                    a: ea.clone(),
                    b: b.entries[j].clone(),
                    why: why.clone(),
                });
            }
            Agreement::NotComparable(why) => out.not_comparable.push((label, why.clone())),
        }
        if !matches!(agreement, Agreement::NotComparable(_)) {
            out.compared += 1;
        }
        let slot = status
            .entry((ea.part.as_str(), ea.node.as_str()))
            .or_insert(Agreement::Identical);
        if rank(&agreement) > rank(slot) {
            *slot = agreement;
        }
    }
    for (j, eb) in b_aligned.entries.iter().enumerate() {
        if last_b[&owned(key(eb))] == j && !last_a.contains_key(&owned(key(eb))) {
            let original = &b.entries[j];
            out.only_in_b
                .push(format!("{} `{}`", original.part, original.label()));
        }
    }
    out.notes.extend(matched_note);
    let (pa, pb) = (parts_of(a), parts_of(&b_aligned));
    let only = |x: &[String], y: &[String]| -> Vec<String> {
        x.iter().filter(|p| !y.contains(p)).cloned().collect()
    };
    if a.header.libtorch != b.header.libtorch {
        out.notes.push(format!(
            "the runs used different libtorch versions: A {}, B {}",
            a.header.libtorch, b.header.libtorch
        ));
    }
    if a.header.graph != b.header.graph {
        out.notes.push(format!(
            "the traces are of different graph files: A {}, B {}",
            a.header.graph, b.header.graph
        ));
    }
    if a.outcome != b.outcome {
        let ending = |who: &str, t: &Trace| {
            let after = t.entries.last().map_or("(nothing)".to_string(), |e| {
                format!("{} `{}`", e.part, e.label())
            });
            match &t.outcome {
                Some(o) if o == "completed" => {
                    format!("run {who} ({}) completed", t.header.backend)
                }
                Some(o) => format!("run {who} ({}) {o} (after {after})", t.header.backend),
                None => format!(
                    "run {who} ({}) has no end line: it crashed or was killed after {after}",
                    t.header.backend
                ),
            }
        };
        out.ended_differently = Some(format!("{}; {}", ending("A", a), ending("B", b)));
    }
    let graph_parts = |p: Vec<String>| -> Vec<String> {
        p.into_iter()
            .filter(|p| p != "inputs" && p != "outputs")
            .collect()
    };
    for (who, t, theirs) in [
        ("A", a, graph_parts(only(&pa, &pb))),
        ("B", b, graph_parts(only(&pb, &pa))),
    ] {
        if !theirs.is_empty() {
            out.notes.push(format!(
                "only trace {who} ({}) has the parts {}: an AOT pipeline traces its forward \
                 and backward graphs, other backends the graph as given; compare runs of \
                 the same kind to compare those nodes",
                t.header.backend,
                theirs.join(", ")
            ));
        }
    }
    if out.compared == 0 {
        return Err(AtenError::Trace(format!(
            "the traces share no value to compare (A has the parts {}, B has {}){}",
            if pa.is_empty() {
                "none".into()
            } else {
                pa.join(", ")
            },
            if pb.is_empty() {
                "none".into()
            } else {
                pb.join(", ")
            },
            if out.not_comparable.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} values match by name but not by op, e.g. {}: {}",
                    out.not_comparable.len(),
                    out.not_comparable[0].0,
                    out.not_comparable[0].1
                )
            }
        )));
    }
    Ok(out)
}

impl TraceDiff {
    /// True when some value diverged or the runs ended differently.
    pub fn diverges(&self) -> bool {
        !self.diverged.is_empty() || self.ended_differently.is_some()
    }
}

impl fmt::Display for TraceDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.tolerance;
        writeln!(
            f,
            "compared {} values: {} identical, {} within tolerance by every statistic (atol {:e}, rtol {:e}), {} diverged",
            self.compared,
            self.identical,
            self.within,
            t.atol,
            t.rtol,
            self.diverged.len()
        )?;
        match (self.diverged.first(), &self.ended_differently) {
            (None, None) => writeln!(f, "no divergence")?,
            (None, Some(ends)) => {
                writeln!(f, "no value diverges, but the runs end differently: {ends}")?
            }
            (Some(d), ends) => {
                writeln!(
                    f,
                    "first divergence: {} node `{}` ({}): {}",
                    d.a.part,
                    d.a.label(),
                    d.a.op,
                    d.why
                )?;
                writeln!(f, "  A: {}", describe_value(&d.a.value))?;
                writeln!(f, "  B: {}", describe_value(&d.b.value))?;
                for (name, how) in &self.first_inputs {
                    let said = match how {
                        Some(Agreement::Identical) => "identical".to_string(),
                        Some(Agreement::Within) => "within tolerance".to_string(),
                        Some(Agreement::Diverged(why)) => format!("diverged ({why})"),
                        Some(Agreement::NotComparable(why)) => {
                            format!("not compared ({why}): the divergence may start there")
                        }
                        None => "not compared (in one trace only): the divergence may start there"
                            .to_string(),
                    };
                    writeln!(f, "  input `{name}`: {said}")?;
                }
                if self.diverged.len() > 1 {
                    let later: Vec<String> = self.diverged[1..]
                        .iter()
                        .take(10)
                        .map(|d| format!("{} `{}`", d.a.part, d.a.label()))
                        .collect();
                    writeln!(
                        f,
                        "then {} more diverge: {}{}",
                        self.diverged.len() - 1,
                        later.join(", "),
                        if self.diverged.len() > 11 {
                            ", ..."
                        } else {
                            ""
                        }
                    )?;
                }
                if let Some(ends) = ends {
                    writeln!(f, "the runs also end differently: {ends}")?;
                }
            }
        }
        for (what, list) in [
            ("only in A", &self.only_in_a),
            ("only in B", &self.only_in_b),
        ] {
            if !list.is_empty() {
                let shown: Vec<&str> = list.iter().take(5).map(String::as_str).collect();
                writeln!(
                    f,
                    "{what}: {} values ({}{})",
                    list.len(),
                    shown.join(", "),
                    if list.len() > 5 { ", ..." } else { "" }
                )?;
            }
        }
        if !self.not_comparable.is_empty() {
            let (label, why) = &self.not_comparable[0];
            writeln!(
                f,
                "not comparable: {} values (first: {label}: {why})",
                self.not_comparable.len()
            )?;
        }
        for note in &self.notes {
            writeln!(f, "note: {note}")?;
        }
        Ok(())
    }
}

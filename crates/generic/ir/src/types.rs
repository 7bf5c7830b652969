//! Scalar types, devices, layouts, memory formats, op names and tensor metadata.

use std::fmt::{self, Write as _};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::sym::{Bindings, SymExpr};

/// A tensor element type, named as `torch.<name>` and abbreviated as in FX annotations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// `torch.float32`, `f32`
    Float32,
    /// `torch.float64`, `f64`
    Float64,
    /// `torch.float16`, `f16`
    Float16,
    /// `torch.bfloat16`, `bf16`
    BFloat16,
    /// `torch.int64`, `i64`
    Int64,
    /// `torch.int32`, `i32`
    Int32,
    /// `torch.int16`, `i16`
    Int16,
    /// `torch.int8`, `i8`
    Int8,
    /// `torch.uint8`, `u8`
    UInt8,
    /// `torch.bool`, `b8`
    Bool,
    /// `torch.complex64`, `c64`
    Complex64,
    /// `torch.complex128`, `c128`
    Complex128,
    /// `torch.uint16`, `u16` (PyTorch's limited-support unsigned type)
    UInt16,
    /// `torch.uint32`, `u32` (PyTorch's limited-support unsigned type)
    UInt32,
    /// `torch.uint64`, `u64` (PyTorch's limited-support unsigned type, e.g. `hash_tensor`)
    UInt64,
}

/// (dtype, FX annotation abbreviation, canonical torch name)
const DTYPES: [(Dtype, &str, &str); 15] = [
    (Dtype::Float32, "f32", "float32"),
    (Dtype::Float64, "f64", "float64"),
    (Dtype::Float16, "f16", "float16"),
    (Dtype::BFloat16, "bf16", "bfloat16"),
    (Dtype::Int64, "i64", "int64"),
    (Dtype::Int32, "i32", "int32"),
    (Dtype::Int16, "i16", "int16"),
    (Dtype::Int8, "i8", "int8"),
    (Dtype::UInt8, "u8", "uint8"),
    (Dtype::Bool, "b8", "bool"),
    (Dtype::Complex64, "c64", "complex64"),
    (Dtype::Complex128, "c128", "complex128"),
    (Dtype::UInt16, "u16", "uint16"),
    (Dtype::UInt32, "u32", "uint32"),
    (Dtype::UInt64, "u64", "uint64"),
];

impl Dtype {
    /// Every supported dtype, in a fixed order.
    pub const ALL: [Dtype; 15] = [
        Dtype::Float32,
        Dtype::Float64,
        Dtype::Float16,
        Dtype::BFloat16,
        Dtype::Int64,
        Dtype::Int32,
        Dtype::Int16,
        Dtype::Int8,
        Dtype::UInt8,
        Dtype::Bool,
        Dtype::Complex64,
        Dtype::Complex128,
        Dtype::UInt16,
        Dtype::UInt32,
        Dtype::UInt64,
    ];

    fn entry(self) -> (Dtype, &'static str, &'static str) {
        DTYPES[self as usize]
    }

    /// The FX annotation abbreviation, e.g. `f32`.
    pub fn short_name(self) -> &'static str {
        self.entry().1
    }

    /// The canonical torch attribute name, e.g. `float32` for `torch.float32`.
    pub fn torch_name(self) -> &'static str {
        self.entry().2
    }

    /// Looks a dtype up by its FX annotation abbreviation (`f32`, `b8`, ...).
    pub fn from_short_name(s: &str) -> Option<Dtype> {
        DTYPES.iter().find(|e| e.1 == s).map(|e| e.0)
    }

    /// Looks a dtype up by its torch attribute name, aliases included (`float`, `long`, ...).
    pub fn from_torch_name(s: &str) -> Option<Dtype> {
        let canonical = match s {
            "float" => "float32",
            "double" => "float64",
            "half" => "float16",
            "long" => "int64",
            "int" => "int32",
            "short" => "int16",
            "cfloat" => "complex64",
            "cdouble" => "complex128",
            other => other,
        };
        DTYPES.iter().find(|e| e.2 == canonical).map(|e| e.0)
    }

    /// Size of one element in bytes.
    pub fn itemsize(self) -> usize {
        match self {
            Dtype::Float64 | Dtype::Int64 | Dtype::UInt64 | Dtype::Complex64 => 8,
            Dtype::Float32 | Dtype::Int32 | Dtype::UInt32 => 4,
            Dtype::Float16 | Dtype::BFloat16 | Dtype::Int16 | Dtype::UInt16 => 2,
            Dtype::Int8 | Dtype::UInt8 | Dtype::Bool => 1,
            Dtype::Complex128 => 16,
        }
    }

    /// True for real floating-point dtypes (the ones autograd differentiates).
    pub fn is_floating_point(self) -> bool {
        matches!(
            self,
            Dtype::Float32 | Dtype::Float64 | Dtype::Float16 | Dtype::BFloat16
        )
    }

    /// True for complex dtypes.
    pub fn is_complex(self) -> bool {
        matches!(self, Dtype::Complex64 | Dtype::Complex128)
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "torch.{}", self.torch_name())
    }
}

/// The sizes of a tensor: up to four kept inline, so most metas allocate nothing.
pub type Shape = smallvec::SmallVec<[i64; 4]>;

/// Shape and dtype of one tensor value (static shapes only).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorMeta {
    /// Element type.
    pub dtype: Dtype,
    /// Sizes of each dimension; empty for a 0-d tensor.
    pub shape: Shape,
}

impl TensorMeta {
    /// A meta from a dtype and a shape.
    pub fn new(dtype: Dtype, shape: impl AsRef<[i64]>) -> Self {
        TensorMeta {
            dtype,
            shape: Shape::from_slice(shape.as_ref()),
        }
    }

    /// Number of elements (1 for a 0-d tensor), saturating at `i64::MAX`.
    pub fn numel(&self) -> i64 {
        self.checked_numel().unwrap_or(i64::MAX)
    }

    /// Number of elements, or `None` when it does not fit in an `i64` (or a size is
    /// negative).
    pub fn checked_numel(&self) -> Option<i64> {
        self.shape.iter().try_fold(
            1i64,
            |acc, &d| {
                if d < 0 {
                    None
                } else {
                    acc.checked_mul(d)
                }
            },
        )
    }

    /// Bytes of a contiguous tensor with this meta, saturating at `u64::MAX`.
    pub fn nbytes(&self) -> u64 {
        self.checked_nbytes().unwrap_or(u64::MAX)
    }

    /// Bytes of a contiguous tensor with this meta, or `None` when they do not fit in a
    /// `u64`.
    pub fn checked_nbytes(&self) -> Option<u64> {
        (self.checked_numel()? as u64).checked_mul(self.dtype.itemsize() as u64)
    }

    /// Parses an FX annotation body such as `f32[2, 8]` (the text inside the quotes).
    ///
    /// PyTorch's `include_stride` / `include_device` suffixes (`f32[2, 8][8, 1]cpu`) are
    /// accepted and dropped: the IR keeps dtype and shape only. Symbolic sizes are an
    /// error here; [`Meta::parse_annotation`] accepts them.
    pub fn parse_annotation(text: &str) -> Result<TensorMeta, String> {
        match Meta::parse_annotation(text)? {
            Meta::Tensor(t) => Ok(t),
            Meta::Sym(e) => Err(format!(
                "symbolic value `{e}` in annotation \"{}\" is not supported here (static shapes only)",
                text.trim()
            )),
            _ => Err(format!(
                "symbolic sizes in annotation \"{}\" are not supported here (static shapes only)",
                text.trim()
            )),
        }
    }
}

/// The dtype and sizes of a tensor annotation, sizes as written (`s0`, `8`, `2*s1`).
fn parse_tensor_annotation(t: &str) -> Result<(Dtype, Sizes), String> {
    let open = t
        .find('[')
        .ok_or_else(|| format!("annotation \"{t}\" is not of the form \"<dtype>[<sizes>]\""))?;
    let dtype_text = &t[..open];
    let dtype = Dtype::from_short_name(dtype_text).ok_or_else(|| {
        let known: Vec<&str> = DTYPES.iter().map(|e| e.1).collect();
        format!(
            "unknown dtype `{dtype_text}` in annotation \"{t}\" (known: {})",
            known.join(" ")
        )
    })?;
    let rest = &t[open + 1..];
    let close = rest
        .find(']')
        .ok_or_else(|| format!("annotation \"{t}\" has no closing `]`"))?;
    let sizes = parse_dims(&rest[..close], t)?;
    let negative = match &sizes {
        Sizes::Static(dims) => dims.iter().find(|&&d| d < 0).map(i64::to_string),
        Sizes::Symbolic(dims) => dims
            .iter()
            .find(|d| d.as_int().is_some_and(|v| v < 0))
            .map(ToString::to_string),
    };
    if let Some(d) = negative {
        return Err(format!("negative size `{d}` in annotation \"{t}\""));
    }
    let tail = &rest[close + 1..];
    // Optional stride list and device, as printed with include_stride/include_device.
    let tail = match tail.strip_prefix('[') {
        Some(strides) => {
            let end = strides
                .find(']')
                .ok_or_else(|| format!("annotation \"{t}\" has an unclosed stride list"))?;
            parse_dims(&strides[..end], t)?;
            &strides[end + 1..]
        }
        None => tail,
    };
    if !tail.is_empty() && tail.parse::<Device>().is_err() {
        return Err(format!(
            "unexpected `{tail}` after the sizes in annotation \"{t}\""
        ));
    }
    Ok((dtype, sizes))
}

/// Splits `body` at the commas outside parentheses (`Max(1, s0), 8` is two sizes).
fn split_top_level(body: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in body.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&body[start..]);
    parts
}

/// The sizes of an annotation: all integers (the common, fast case), or some symbolic.
enum Sizes {
    Static(Vec<i64>),
    Symbolic(Vec<SymExpr>),
}

fn parse_dims(body: &str, whole: &str) -> Result<Sizes, String> {
    let body = body.trim();
    if body.is_empty() {
        return Ok(Sizes::Static(Vec::new()));
    }
    if let Ok(dims) = body.split(',').map(|d| d.trim().parse::<i64>()).collect() {
        return Ok(Sizes::Static(dims));
    }
    split_top_level(body)
        .into_iter()
        .map(|d| {
            let d = d.trim();
            match d.parse::<i64>() {
                Ok(v) => Ok(SymExpr::int(v)),
                Err(_) => SymExpr::parse(d)
                    .map_err(|e| format!("bad size `{d}` in annotation \"{whole}\": {e}")),
            }
        })
        .collect::<Result<Vec<_>, String>>()
        .map(Sizes::Symbolic)
}

/// A tensor annotation with symbolic sizes (`f32[s0, 8]`), as dynamic-shape graphs carry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SymTensorMeta {
    /// Element type.
    pub dtype: Dtype,
    /// Sizes as written: integers, symbols and expressions.
    pub sizes: Vec<SymExpr>,
}

impl SymTensorMeta {
    /// The static meta under `bindings`; an unbound symbol or a negative size is an error.
    pub fn bind(&self, bindings: &Bindings) -> Result<TensorMeta, String> {
        let shape = self
            .sizes
            .iter()
            .map(|e| match e.eval(bindings)? {
                v if v < 0 => Err(format!("size `{e}` is {v}, which is negative")),
                v => Ok(v),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TensorMeta::new(self.dtype, shape))
    }
}

impl fmt::Display for SymTensorMeta {
    /// Formats as the FX annotation body, e.g. `f32[s0, 8]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype.short_name())?;
        for (i, d) in self.sizes.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Display for TensorMeta {
    /// Formats as the FX annotation body, e.g. `f32[2, 8]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype.short_name())?;
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// What is known about the value(s) a node produces.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Meta {
    /// Nothing is known.
    #[default]
    Unknown,
    /// A single tensor.
    Tensor(TensorMeta),
    /// Several outputs (a tuple or list), read through getitem; `None` where unknown.
    Multi(Vec<Option<TensorMeta>>),
    /// A tensor whose sizes are symbolic (`f32[s0, 8]`).
    SymTensor(SymTensorMeta),
    /// A symbolic integer (`Sym(s0)`, `Sym(2*s0)`): a dynamic size or a value computed from
    /// sizes.
    Sym(SymExpr),
}

impl Meta {
    /// Parses an FX annotation body: `f32[2, 8]`, `f32[s0, 8]` or `Sym(s0)`.
    pub fn parse_annotation(text: &str) -> Result<Meta, String> {
        let t = text.trim();
        if let Some(inner) = t.strip_prefix("Sym(").and_then(|r| r.strip_suffix(')')) {
            return SymExpr::parse(inner)
                .map(Meta::Sym)
                .map_err(|e| format!("bad annotation \"{t}\": {e}"));
        }
        let meta = match parse_tensor_annotation(t)? {
            (dtype, Sizes::Symbolic(sizes)) => {
                return Ok(Meta::SymTensor(SymTensorMeta { dtype, sizes }))
            }
            (dtype, Sizes::Static(shape)) => TensorMeta::new(dtype, shape),
        };
        if meta.checked_nbytes().is_none() {
            return Err(format!(
                "annotation \"{t}\" describes more bytes than a 64-bit size can count"
            ));
        }
        Ok(Meta::Tensor(meta))
    }

    /// The annotation text FX prints for this meta, if it prints one.
    pub fn annotation(&self) -> Option<String> {
        match self {
            Meta::Tensor(t) => Some(t.to_string()),
            Meta::SymTensor(t) => Some(t.to_string()),
            Meta::Sym(e) => Some(format!("Sym({e})")),
            Meta::Unknown | Meta::Multi(_) => None,
        }
    }

    /// True when the meta mentions size symbols.
    pub fn is_symbolic(&self) -> bool {
        matches!(self, Meta::SymTensor(_) | Meta::Sym(_))
    }

    /// The symbolic expressions the meta holds: a `SymTensor`'s sizes, a `Sym`'s value.
    pub fn sym_exprs(&self) -> &[SymExpr] {
        match self {
            Meta::SymTensor(t) => &t.sizes,
            Meta::Sym(e) => std::slice::from_ref(e),
            _ => &[],
        }
    }

    /// The size symbols the meta mentions (with repeats).
    pub fn symbols(&self) -> impl Iterator<Item = &str> {
        self.sym_exprs().iter().flat_map(SymExpr::symbols)
    }

    /// The symbols an input with this meta binds by itself: sizes (or a `Sym` value) that
    /// are a bare symbol.
    pub fn bound_symbols(&self) -> impl Iterator<Item = &str> {
        self.sym_exprs().iter().filter_map(SymExpr::as_symbol)
    }

    /// The tensor meta of a single-tensor value.
    pub fn tensor(&self) -> Option<&TensorMeta> {
        match self {
            Meta::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The meta of output `index` of a multi-output value.
    pub fn item(&self, index: usize) -> Option<&TensorMeta> {
        match self {
            Meta::Multi(items) => items.get(index).and_then(Option::as_ref),
            _ => None,
        }
    }
}

/// A device such as `cpu` or `cuda:0`, printed as FX prints `torch.device`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Device {
    /// Device type: `cpu`, `cuda`, `meta`, ...
    pub kind: String,
    /// Device index, if one was given.
    pub index: Option<u32>,
}

const DEVICE_KINDS: [&str; 7] = ["cpu", "cuda", "meta", "mps", "xpu", "hip", "privateuseone"];

impl Device {
    /// The CPU device.
    pub fn cpu() -> Self {
        Device {
            kind: "cpu".into(),
            index: None,
        }
    }

    /// The CUDA device with the given index.
    pub fn cuda(index: u32) -> Self {
        Device {
            kind: "cuda".into(),
            index: Some(index),
        }
    }

    /// True for CUDA devices.
    pub fn is_cuda(&self) -> bool {
        self.kind == "cuda"
    }

    /// A device from its type name and optional index, checking the type name.
    pub fn new(kind: &str, index: Option<u32>) -> Result<Self, String> {
        if !DEVICE_KINDS.contains(&kind) {
            return Err(format!(
                "unknown device type `{kind}` (known: {})",
                DEVICE_KINDS.join(", ")
            ));
        }
        Ok(Device {
            kind: kind.to_string(),
            index,
        })
    }
}

impl Default for Device {
    /// The CPU.
    fn default() -> Self {
        Device::cpu()
    }
}

impl FromStr for Device {
    type Err = String;

    /// Parses `cpu`, `cuda`, `cuda:1`, ...
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            Some((kind, idx)) => {
                let index = idx
                    .parse::<u32>()
                    .map_err(|_| format!("bad device index `{idx}` in `{s}`"))?;
                Device::new(kind, Some(index))
            }
            None => Device::new(s, None),
        }
    }
}

impl fmt::Display for Device {
    /// Formats as torch's device string, e.g. `cuda:0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "{}:{}", self.kind, i),
            None => f.write_str(&self.kind),
        }
    }
}

/// `torch.memory_format` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryFormat {
    /// `torch.contiguous_format`
    ContiguousFormat,
    /// `torch.channels_last`
    ChannelsLast,
    /// `torch.channels_last_3d`
    ChannelsLast3d,
    /// `torch.preserve_format`
    PreserveFormat,
}

impl MemoryFormat {
    /// Every memory format.
    pub const ALL: [MemoryFormat; 4] = [
        MemoryFormat::ContiguousFormat,
        MemoryFormat::ChannelsLast,
        MemoryFormat::ChannelsLast3d,
        MemoryFormat::PreserveFormat,
    ];

    /// The torch attribute name.
    pub fn torch_name(self) -> &'static str {
        match self {
            MemoryFormat::ContiguousFormat => "contiguous_format",
            MemoryFormat::ChannelsLast => "channels_last",
            MemoryFormat::ChannelsLast3d => "channels_last_3d",
            MemoryFormat::PreserveFormat => "preserve_format",
        }
    }

    /// Looks a memory format up by its torch attribute name.
    pub fn from_torch_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.torch_name() == s)
    }
}

/// `torch.layout` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// `torch.strided`
    Strided,
    /// `torch.sparse_coo`
    SparseCoo,
    /// `torch.sparse_csr`
    SparseCsr,
    /// `torch.sparse_csc`
    SparseCsc,
    /// `torch.sparse_bsr`
    SparseBsr,
    /// `torch.sparse_bsc`
    SparseBsc,
    /// `torch._mkldnn`
    Mkldnn,
}

impl Layout {
    /// Every layout.
    pub const ALL: [Layout; 7] = [
        Layout::Strided,
        Layout::SparseCoo,
        Layout::SparseCsr,
        Layout::SparseCsc,
        Layout::SparseBsr,
        Layout::SparseBsc,
        Layout::Mkldnn,
    ];

    /// The torch attribute name.
    pub fn torch_name(self) -> &'static str {
        match self {
            Layout::Strided => "strided",
            Layout::SparseCoo => "sparse_coo",
            Layout::SparseCsr => "sparse_csr",
            Layout::SparseCsc => "sparse_csc",
            Layout::SparseBsr => "sparse_bsr",
            Layout::SparseBsc => "sparse_bsc",
            Layout::Mkldnn => "_mkldnn",
        }
    }

    /// Looks a layout up by its torch attribute name.
    pub fn from_torch_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.torch_name() == s)
    }
}

/// The namespace of PyTorch's higher-order ops (`torch.ops.higher_order`).
pub const HIGHER_ORDER: &str = "higher_order";

/// The namespace of Tensor methods called as `x.view(...)` in dynamo-level graphs.
pub const METHOD: &str = "Tensor";

/// Python's binary operators: the `operator` function, its spelling, and its precedence
/// (0 binds loosest; `**`, at 7, binds tighter than unary minus). The parser reads by this
/// table, the printer writes by it, and every operator of precedence 1 and up also has an
/// augmented assignment (`+=` calls `operator.iadd`).
pub const BINARY_OPERATORS: [(&str, &str, u8); 19] = [
    ("eq", "==", 0),
    ("ne", "!=", 0),
    ("le", "<=", 0),
    ("ge", ">=", 0),
    ("lt", "<", 0),
    ("gt", ">", 0),
    ("or_", "|", 1),
    ("xor", "^", 2),
    ("and_", "&", 3),
    ("lshift", "<<", 4),
    ("rshift", ">>", 4),
    ("add", "+", 5),
    ("sub", "-", 5),
    ("floordiv", "//", 6),
    ("mul", "*", 6),
    ("matmul", "@", 6),
    ("truediv", "/", 6),
    ("mod", "%", 6),
    ("pow", "**", 7),
];

/// An operator overload: `aten::add.Tensor` is namespace `aten`, name `add`, overload `Tensor`.
///
/// The overload is spelled as in Python: the schema's unnamed overload is `default`.
///
/// Op names are interned: every `OpName` of the same op shares one [`OpNameParts`], so a
/// copy allocates nothing and equality compares addresses. A graph of a million nodes holds
/// a few hundred distinct ops.
#[derive(Clone)]
pub struct OpName(&'static OpNameParts);

/// The parts of an [`OpName`], reached through it (`op.name`).
#[derive(Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpNameParts {
    /// Operator namespace, e.g. `aten`, `prims`.
    pub namespace: String,
    /// Operator name (the overload packet), e.g. `add`, `relu_`.
    pub name: String,
    /// Overload name, e.g. `Tensor`, `default`.
    pub overload: String,
}

/// Every op name interned so far, keyed by `3:aten3:addTensor` (lengths, then parts).
static INTERNED: std::sync::LazyLock<
    std::sync::Mutex<rustc_hash::FxHashMap<Box<str>, &'static OpNameParts>>,
> = std::sync::LazyLock::new(Default::default);

impl std::ops::Deref for OpName {
    type Target = OpNameParts;

    fn deref(&self) -> &OpNameParts {
        self.0
    }
}

impl PartialEq for OpName {
    /// Interned: the same op is the same address.
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for OpName {}

impl std::hash::Hash for OpName {
    /// Hashes the parts, so hashes do not depend on where the parts live.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}

impl PartialOrd for OpName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OpName {
    /// By namespace, then name, then overload.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if self == other {
            std::cmp::Ordering::Equal
        } else {
            self.0.cmp(other.0)
        }
    }
}

impl fmt::Debug for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpName")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("overload", &self.overload)
            .finish()
    }
}

impl Serialize for OpName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for OpName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let parts = OpNameParts::deserialize(deserializer)?;
        Ok(OpName::new(&parts.namespace, &parts.name, &parts.overload))
    }
}

thread_local! {
    /// The key buffer of [`OpName::new`], reused so that a lookup allocates nothing.
    static KEY: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

impl OpName {
    /// An op in any namespace.
    pub fn new(namespace: &str, name: &str, overload: &str) -> Self {
        KEY.with_borrow_mut(|key| {
            key.clear();
            // Length-prefixed, so that no two ops share a key.
            for part in [namespace, name] {
                write!(key, "{}:{part}", part.len()).expect("writing to a String");
            }
            key.push_str(overload);
            // (A panic elsewhere while the lock was held cannot leave the table half-changed:
            // an insert is one step.)
            let mut table = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(&parts) = table.get(key.as_str()) {
                return OpName(parts);
            }
            let parts: &'static OpNameParts = Box::leak(Box::new(OpNameParts {
                namespace: namespace.into(),
                name: name.into(),
                overload: overload.into(),
            }));
            table.insert(key.as_str().into(), parts);
            OpName(parts)
        })
    }

    /// An `aten` op.
    pub fn aten(name: &str, overload: &str) -> Self {
        OpName::new("aten", name, overload)
    }

    /// Parses `aten::add.Tensor`, `aten.add.Tensor` or `torch.ops.aten.add.Tensor`.
    /// A schema-style name without an overload (`aten::relu`) means `default`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let err = || {
            format!(
                "bad op name `{text}`: expected `ns::name.overload`, `ns.name.overload` or `torch.ops.ns.name.overload`"
            )
        };
        let ident = |s: &str| {
            !s.is_empty()
                && s.chars().all(|c| c.is_alphanumeric() || c == '_')
                && !s.starts_with(|c: char| c.is_ascii_digit())
        };
        let (ns, rest, overload_required) = if let Some((ns, rest)) = text.split_once("::") {
            (ns, rest, false)
        } else {
            let body = text.strip_prefix("torch.ops.").unwrap_or(text);
            let (ns, rest) = body.split_once('.').ok_or_else(err)?;
            (ns, rest, true)
        };
        let (name, overload) = match rest.split_once('.') {
            Some((n, o)) => (n, o),
            None if !overload_required => (rest, "default"),
            None => return Err(err()),
        };
        let overload = if overload.is_empty() && !overload_required {
            "default"
        } else {
            overload
        };
        if !(ident(ns) && ident(name) && ident(overload)) {
            return Err(err());
        }
        Ok(OpName::new(ns, name, overload))
    }

    /// A higher-order op (`torch.ops.higher_order.with_effects`): a Python-level op that
    /// takes ops and graphs as arguments, has no overloads and no libtorch schema.
    pub fn higher_order(name: &str) -> Self {
        OpName::new(HIGHER_ORDER, name, "")
    }

    /// True for a higher-order op.
    pub fn is_higher_order(&self) -> bool {
        self.namespace == HIGHER_ORDER
    }

    /// A Python function that is not a dispatcher op: `operator.mul` (printed infix, `a * b`)
    /// or a `torch.sym_*` function, as dynamic-shape graphs compute sizes with them.
    pub fn python(module: &str, name: &str) -> Self {
        OpName::new(module, name, "")
    }

    /// True for a Python function made by [`OpName::python`]: `operator.*`, `torch.*` and
    /// its submodules (`torch.nn.functional.relu`, `torch._C._nn.linear`), and Tensor
    /// methods (namespace [`METHOD`]).
    pub fn is_python(&self) -> bool {
        let ns = self.namespace.as_str();
        ns == "operator" || ns == "torch" || ns.starts_with("torch.") || ns == METHOD
    }

    /// True for a Tensor method, printed `self.name(args)`.
    pub fn is_method(&self) -> bool {
        self.namespace == METHOD
    }

    /// The infix operator FX prints for an `operator` function (`mul` -> `*`), if any.
    pub fn infix(&self) -> Option<&'static str> {
        if self.namespace != "operator" {
            return None;
        }
        BINARY_OPERATORS
            .iter()
            .find(|(n, _, _)| *n == self.name)
            .map(|(_, s, _)| *s)
    }

    /// For an in-place `operator` function, the operator of the augmented assignment FX
    /// prints for it (`iadd` -> `+`, printed `a += b`).
    pub fn augmented(&self) -> Option<&'static str> {
        if self.namespace != "operator" {
            return None;
        }
        let base = self.name.strip_prefix('i')?;
        BINARY_OPERATORS
            .iter()
            .find(|(n, _, p)| *n == base && *p >= 1)
            .map(|(_, s, _)| *s)
    }

    /// The prefix operator FX prints for a unary `operator` function (`neg` -> `-`), if any.
    pub fn prefix(&self) -> Option<&'static str> {
        match (self.namespace.as_str(), self.name.as_str()) {
            ("operator", "neg") => Some("-"),
            ("operator", "invert") => Some("~"),
            _ => None,
        }
    }

    /// The Python spelling, e.g. `torch.ops.aten.add.Tensor` (no overload for a higher-order
    /// op: `torch.ops.higher_order.with_effects`; `operator.mul` for a Python function).
    pub fn torch_path(&self) -> String {
        if self.is_python() {
            return self.qualified();
        }
        format!("torch.ops.{}", self.qualified())
    }

    /// The short Python spelling, e.g. `aten.add.Tensor`.
    pub fn qualified(&self) -> String {
        if self.is_higher_order() || self.is_python() {
            format!("{}.{}", self.namespace, self.name)
        } else {
            format!("{}.{}.{}", self.namespace, self.name, self.overload)
        }
    }

    /// True when the name follows the in-place convention (`add_`, `__iand__`).
    ///
    /// A naming heuristic for pure-IR passes; libtorch schemas are authoritative.
    pub fn is_inplace_by_name(&self) -> bool {
        let n = self.name.as_str();
        if let Some(inner) = n.strip_prefix("__").and_then(|r| r.strip_suffix("__")) {
            return inner.starts_with('i') && !matches!(inner, "index" | "int" | "invert");
        }
        n.ends_with('_') || self.overload == "out" || self.overload.ends_with("_out")
    }

    /// True for ops that draw random numbers (never merged by CSE, never dropped as dead):
    /// libtorch's `nondeterministic_seeded` tag ([`crate::op_tags`]).
    pub fn is_random(&self) -> bool {
        self.has_tag(Tag::NondeterministicSeeded)
    }

    /// True for elementwise ops: libtorch's `pointwise` tag ([`crate::op_tags`]).
    pub fn is_pointwise(&self) -> bool {
        self.has_tag(Tag::Pointwise)
    }

    /// Whether libtorch tags this op's overload packet with `tag`.
    pub fn has_tag(&self, tag: Tag) -> bool {
        tag.ops()
            .get(self.namespace.as_str())
            .is_some_and(|names| names.contains(self.name.as_str()))
    }

    /// True when the op must neither be merged (CSE) nor dropped (DCE) by pure-IR passes:
    /// mutating ops by naming convention, and random ops.
    pub fn has_side_effects_by_name(&self) -> bool {
        self.is_inplace_by_name() || self.is_random() || self.is_effectful()
    }

    /// True for `with_effects`, which orders an effectful op by a token: it is never
    /// duplicated, dropped or moved.
    pub fn is_effectful(&self) -> bool {
        self.is_higher_order() && self.name == "with_effects"
    }
}

impl fmt::Display for OpName {
    /// Formats as `aten::add.Tensor` (`higher_order::with_effects`, `operator.mul`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_python() {
            write!(f, "{}.{}", self.namespace, self.name)
        } else if self.is_higher_order() {
            write!(f, "{}::{}", self.namespace, self.name)
        } else {
            write!(f, "{}::{}.{}", self.namespace, self.name, self.overload)
        }
    }
}

impl FromStr for OpName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        OpName::parse(s)
    }
}

/// libtorch's op tags the pure crates know ([`crate::op_tags`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    /// `nondeterministic_seeded`: the op draws random numbers.
    NondeterministicSeeded,
    /// `pointwise`: the op is elementwise.
    Pointwise,
}

impl Tag {
    /// The ops with this tag, by namespace then name.
    fn ops(
        self,
    ) -> &'static rustc_hash::FxHashMap<&'static str, rustc_hash::FxHashSet<&'static str>> {
        type ByNamespace = rustc_hash::FxHashMap<&'static str, rustc_hash::FxHashSet<&'static str>>;
        fn index(list: &'static [&'static str]) -> ByNamespace {
            let mut out = ByNamespace::default();
            for op in list {
                let (ns, name) = op.split_once('.').expect("op tags list `namespace.name`");
                out.entry(ns).or_default().insert(name);
            }
            out
        }
        static SEEDED: std::sync::OnceLock<ByNamespace> = std::sync::OnceLock::new();
        static POINTWISE: std::sync::OnceLock<ByNamespace> = std::sync::OnceLock::new();
        match self {
            Tag::NondeterministicSeeded => {
                SEEDED.get_or_init(|| index(crate::op_tags::NONDETERMINISTIC_SEEDED))
            }
            Tag::Pointwise => POINTWISE.get_or_init(|| index(crate::op_tags::POINTWISE)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_are_interned_and_compare_by_content() {
        let a = OpName::aten("add", "Tensor");
        let b = OpName::parse("torch.ops.aten.add.Tensor").unwrap();
        assert_eq!(a, b);
        assert!(std::ptr::eq(&*a, &*b), "one op, one allocation");
        // Parts that would run together if they were simply joined stay distinct.
        assert_ne!(OpName::new("a1:b", "c", "d"), OpName::new("a", "1:bc", "d"));
        assert_ne!(OpName::aten("add", "Tensor"), OpName::aten("add", "Scalar"));
        // Ordered by namespace, name, overload, whatever order they were interned in.
        let mut ops = [
            OpName::new("prims", "add", "default"),
            OpName::aten("sub", "Tensor"),
            OpName::aten("add", "Tensor"),
            OpName::aten("add", "Scalar"),
        ];
        ops.sort();
        let shown: Vec<String> = ops.iter().map(|o| o.to_string()).collect();
        assert_eq!(
            shown,
            [
                "aten::add.Scalar",
                "aten::add.Tensor",
                "aten::sub.Tensor",
                "prims::add.default"
            ]
        );
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(
            json,
            r#"{"namespace":"aten","name":"add","overload":"Tensor"}"#
        );
        assert_eq!(serde_json::from_str::<OpName>(&json).unwrap(), a);
        assert_eq!(
            format!("{a:?}"),
            r#"OpName { namespace: "aten", name: "add", overload: "Tensor" }"#
        );
    }

    #[test]
    fn dtype_names_round_trip() {
        for d in Dtype::ALL {
            assert_eq!(Dtype::from_short_name(d.short_name()), Some(d));
            assert_eq!(Dtype::from_torch_name(d.torch_name()), Some(d));
        }
        assert_eq!(Dtype::from_torch_name("long"), Some(Dtype::Int64));
        assert_eq!(Dtype::from_short_name("q8"), None);
    }

    #[test]
    fn symbolic_annotations_parse_print_and_bind() {
        for text in [
            "f32[s0, 8]",
            "f32[2*s97, (s98//2)]",
            "f32[Max(1, s0), s1 + 1]",
            "Sym(s33)",
            "Sym(2*s97)",
            "f32[2, 8]",
        ] {
            let m = Meta::parse_annotation(text).unwrap();
            assert_eq!(m.annotation().as_deref(), Some(text));
            assert_eq!(m.is_symbolic(), text != "f32[2, 8]", "{text}");
        }
        let Meta::SymTensor(t) = Meta::parse_annotation("f32[2*s0, Max(1, s1)][s1, 1]cpu").unwrap()
        else {
            panic!("a symbolic tensor");
        };
        let b: Bindings = [("s0".to_string(), 3), ("s1".to_string(), 0)].into();
        assert_eq!(
            t.bind(&b).unwrap(),
            TensorMeta::new(Dtype::Float32, vec![6, 1])
        );
        let e = t.bind(&Bindings::new()).unwrap_err();
        assert_eq!(e, "symbol `s0` has no value in `2*s0`");
        let neg = Meta::parse_annotation("f32[s0 - 4]").unwrap();
        let Meta::SymTensor(neg) = neg else { panic!() };
        let b: Bindings = [("s0".to_string(), 3)].into();
        assert_eq!(
            neg.bind(&b).unwrap_err(),
            "size `s0 - 4` is -1, which is negative"
        );
        assert!(Meta::parse_annotation("f32[s0 +]")
            .unwrap_err()
            .contains("bad size `s0 +`"));
        assert!(Meta::parse_annotation("f32[8x]")
            .unwrap_err()
            .contains("bad size `8x`"));
    }

    #[test]
    fn annotations() {
        let m = TensorMeta::parse_annotation("f32[2, 8]").unwrap();
        assert_eq!(m, TensorMeta::new(Dtype::Float32, vec![2, 8]));
        assert_eq!(m.to_string(), "f32[2, 8]");
        assert_eq!(m.nbytes(), 64);
        let s = TensorMeta::parse_annotation("i64[]").unwrap();
        assert!(s.shape.is_empty());
        assert_eq!(s.numel(), 1);
        assert_eq!(
            TensorMeta::parse_annotation("f32[8, 64][64, 1]cpu").unwrap(),
            TensorMeta::new(Dtype::Float32, vec![8, 64])
        );
        let e = TensorMeta::parse_annotation("f32[s0, 8]").unwrap_err();
        assert!(
            e.contains("symbolic sizes in annotation \"f32[s0, 8]\""),
            "{e}"
        );
        let e = TensorMeta::parse_annotation("Sym(s1)").unwrap_err();
        assert!(e.contains("symbolic value `s1`"), "{e}");
        assert!(TensorMeta::parse_annotation("x32[2]")
            .unwrap_err()
            .contains("unknown dtype"));
        assert!(TensorMeta::parse_annotation("f32[2").is_err());
        assert!(TensorMeta::parse_annotation("f32[2]junk").is_err());
        let e = TensorMeta::parse_annotation("f32[-8, 32]").unwrap_err();
        assert_eq!(e, "negative size `-8` in annotation \"f32[-8, 32]\"");
        // Huge but countable sizes parse (they are checked against memory before use);
        // sizes whose byte count overflows do not.
        let big = TensorMeta::parse_annotation("f32[1000000000000]").unwrap();
        assert_eq!(big.checked_nbytes(), Some(4_000_000_000_000));
        let e = TensorMeta::parse_annotation("f32[4294967296, 4294967296]").unwrap_err();
        assert!(e.contains("more bytes than a 64-bit size can count"), "{e}");
        let over = TensorMeta::new(Dtype::Float64, vec![1 << 40, 1 << 40]);
        assert_eq!((over.checked_numel(), over.numel()), (None, i64::MAX));
        assert_eq!(over.nbytes(), u64::MAX);
    }

    #[test]
    fn op_names() {
        let a = OpName::parse("torch.ops.aten.add.Tensor").unwrap();
        assert_eq!(a, OpName::aten("add", "Tensor"));
        assert_eq!(OpName::parse("aten::add.Tensor").unwrap(), a);
        assert_eq!(OpName::parse("aten.add.Tensor").unwrap(), a);
        assert_eq!(
            OpName::parse("aten::relu").unwrap(),
            OpName::aten("relu", "default")
        );
        assert!(OpName::parse("aten.relu").is_err());
        assert!(OpName::parse("torch.ops.aten").is_err());
        assert!(OpName::parse("aten::a b.default").is_err());
        assert_eq!(a.to_string(), "aten::add.Tensor");
        assert_eq!(a.torch_path(), "torch.ops.aten.add.Tensor");
        assert!(OpName::aten("relu_", "default").is_inplace_by_name());
        assert!(OpName::aten("__iand__", "Tensor").is_inplace_by_name());
        assert!(!OpName::aten("__and__", "Tensor").is_inplace_by_name());
        assert!(!OpName::aten("_softmax", "default").is_inplace_by_name());
        assert!(OpName::aten("native_dropout", "default").is_random());
        assert!(OpName::aten("uniform_", "default").has_side_effects_by_name());
    }

    #[test]
    fn devices() {
        assert_eq!("cuda:1".parse::<Device>().unwrap(), Device::cuda(1));
        assert_eq!("cpu".parse::<Device>().unwrap(), Device::cpu());
        assert!("gpu".parse::<Device>().is_err());
        assert!("cuda:x".parse::<Device>().is_err());
        assert_eq!(Device::cuda(0).to_string(), "cuda:0");
    }
}

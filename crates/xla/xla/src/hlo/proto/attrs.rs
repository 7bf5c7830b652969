//! Instruction attributes ⇄ `xla.HloInstructionProto` fields: one table, one codec per
//! attribute kind serving both directions, in the order XLA's printer writes them.
//!
//! Encoding sets the fields an attribute names; decoding *takes* them (leaving defaults), so
//! that whatever a proto still holds afterwards is a field no attribute prints: an error
//! naming it, never a silent drop.

use std::collections::{BTreeMap, HashMap};

use super::literal::{fmt_g, parse_literal, print_literal};
use super::schema::xla::{
    self as x, hlo_instruction_proto::SliceDimensions, op_sharding,
    padding_config::PaddingConfigDimension, precision_config, HloInstructionProto as Inst,
    OpMetadata, OpSharding, ShapeProto,
};
use super::shapes::{parse_shape_proto, print_shape, proto_element_type};
use super::syntax::{
    braced, is_dict, parse_bool, parse_int, parse_ints, parse_names, parse_string, print_ints,
    print_string, split_top, words,
};
use crate::hlo::shape::parse_shape;

/// What a codec reads and writes besides the instruction.
pub(crate) struct Ctx<'a> {
    /// The instruction.
    pub(crate) inst: &'a mut Inst,
    /// Computation ids by name (encoding).
    pub(crate) comp_ids: &'a HashMap<String, i64>,
    /// Computation names by id (decoding).
    pub(crate) comp_names: &'a HashMap<i64, String>,
    /// The computation's instruction ids by name (encoding).
    pub(crate) inst_ids: &'a HashMap<String, i64>,
    /// The computation's instruction names by id (decoding).
    pub(crate) inst_names: &'a HashMap<i64, String>,
    /// The operands' shapes.
    pub(crate) operand_shapes: &'a [ShapeProto],
    /// Called computations by slot (a while's body is 0, its condition 1): set when
    /// encoding; when decoding, those not printed yet.
    pub(crate) called: Vec<Option<i64>>,
}

impl Ctx<'_> {
    fn comp_id(&self, name: &str) -> Result<i64, String> {
        self.comp_ids
            .get(name)
            .copied()
            .ok_or_else(|| format!("no computation `{name}`"))
    }

    fn comp_name(&self, id: i64) -> Result<String, String> {
        self.comp_names
            .get(&id)
            .cloned()
            .ok_or_else(|| format!("no computation of id {id}"))
    }

    fn set_slot(&mut self, slot: usize, name: &str) -> Result<(), String> {
        let id = self.comp_id(name)?;
        if self.called.len() <= slot {
            self.called.resize(slot + 1, None);
        }
        self.called[slot] = Some(id);
        Ok(())
    }

    fn take_slot(&mut self, slot: usize) -> Result<Option<String>, String> {
        match self.called.get_mut(slot).and_then(Option::take) {
            Some(id) => self.comp_name(id).map(Some),
            None => Ok(None),
        }
    }

    fn take_all(&mut self) -> Result<Vec<String>, String> {
        let ids: Vec<i64> = self.called.iter_mut().filter_map(Option::take).collect();
        ids.into_iter().map(|id| self.comp_name(id)).collect()
    }
}

/// A field of the instruction (in a sub-message, created on first use).
type Field<T> = fn(&mut Inst) -> &mut T;
/// Encodes one attribute's value text.
type Encode = fn(&str, &mut Ctx<'_>) -> Result<(), String>;
/// Decodes one attribute: its value text, or `None` when XLA prints nothing.
type Decode = fn(&mut Ctx<'_>) -> Result<Option<String>, String>;

/// When a value is printed.
#[derive(Clone, Copy)]
enum Show {
    /// Always.
    Always,
    /// When not 0 (empty, false).
    NonZero,
    /// When above 1 (group counts).
    AboveOne,
}

/// How an attribute's value is written, and where it goes.
enum Codec {
    /// `{1,2}`.
    Ints(Field<Vec<i64>>, Show),
    /// `5`.
    Int(Field<i64>, Show),
    /// `5` in an int32 field.
    Int32(Field<i32>, Show),
    /// `true` (printed when true).
    Bool(Field<bool>),
    /// `"text"`.
    Str(Field<String>, Show),
    /// A bare word of a fixed set; printed unless its value is among those omitted.
    Enum(Field<i32>, &'static [(&'static str, i32)], &'static [i32]),
    /// Its own codec.
    Custom(Encode, Decode),
}

/// One attribute: its key, the opcodes it belongs to (none: every opcode), its codec.
struct Spec {
    key: &'static str,
    ops: &'static [&'static str],
    codec: Codec,
}

impl Codec {
    fn encode(&self, value: &str, ctx: &mut Ctx<'_>) -> Result<(), String> {
        match self {
            Codec::Ints(f, _) => *f(ctx.inst) = parse_ints(value)?,
            Codec::Int(f, _) => *f(ctx.inst) = parse_int(value)?,
            Codec::Int32(f, _) => {
                *f(ctx.inst) = i32::try_from(parse_int(value)?)
                    .map_err(|_| format!("`{value}` does not fit 32 bits"))?;
            }
            Codec::Bool(f) => *f(ctx.inst) = parse_bool(value)?,
            Codec::Str(f, _) => *f(ctx.inst) = parse_string(value)?,
            Codec::Enum(f, names, _) => {
                let v = value.trim();
                *f(ctx.inst) = names
                    .iter()
                    .find(|(n, _)| *n == v)
                    .map(|(_, i)| *i)
                    .ok_or_else(|| {
                        let all: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
                        format!("`{v}` is none of {}", all.join(", "))
                    })?;
            }
            Codec::Custom(encode, _) => encode(value, ctx)?,
        }
        Ok(())
    }

    fn decode(&self, ctx: &mut Ctx<'_>) -> Result<Option<String>, String> {
        let show = |show: Show, v: i64| match show {
            Show::Always => true,
            Show::NonZero => v != 0,
            Show::AboveOne => v > 1,
        };
        Ok(match self {
            Codec::Ints(f, s) => {
                let v = std::mem::take(f(ctx.inst));
                (matches!(s, Show::Always) || !v.is_empty()).then(|| print_ints(&v))
            }
            Codec::Int(f, s) => {
                let v = std::mem::take(f(ctx.inst));
                show(*s, v).then(|| v.to_string())
            }
            Codec::Int32(f, s) => {
                let v = std::mem::take(f(ctx.inst));
                show(*s, i64::from(v)).then(|| v.to_string())
            }
            Codec::Bool(f) => std::mem::take(f(ctx.inst)).then(|| "true".to_string()),
            Codec::Str(f, s) => {
                let v = std::mem::take(f(ctx.inst));
                (matches!(s, Show::Always) || !v.is_empty()).then(|| print_string(&v))
            }
            Codec::Enum(f, names, omit) => {
                let v = std::mem::take(f(ctx.inst));
                let name = names
                    .iter()
                    .find(|(_, i)| *i == v)
                    .map(|(n, _)| *n)
                    .ok_or_else(|| format!("unknown enum value {v}"))?;
                (!omit.contains(&v)).then(|| name.to_string())
            }
            Codec::Custom(_, decode) => decode(ctx)?,
        })
    }
}

// Opcode groups.
const ALL: &[&str] = &[];
const COLLECTIVES: &[&str] = &[
    "all-gather",
    "all-gather-start",
    "all-reduce",
    "all-reduce-start",
    "all-to-all",
    "ragged-all-to-all",
    "reduce-scatter",
    "collective-broadcast",
];
const CHANNELS: &[&str] = &[
    "ragged-all-to-all",
    "all-gather",
    "all-gather-start",
    "all-reduce",
    "all-reduce-start",
    "all-to-all",
    "reduce-scatter",
    "collective-broadcast",
    "collective-permute",
    "collective-permute-start",
    "send",
    "send-done",
    "recv",
    "recv-done",
];
const LAYOUT_CONSTRAINED: &[&str] = &[
    "all-gather",
    "all-gather-start",
    "all-reduce",
    "all-reduce-start",
    "all-to-all",
    "reduce-scatter",
];
const GLOBAL_IDS: &[&str] = &[
    "all-gather",
    "all-gather-start",
    "all-reduce",
    "all-reduce-start",
    "reduce-scatter",
];
const DIMENSIONS: &[&str] = &[
    "broadcast",
    "concatenate",
    "reverse",
    "transpose",
    "reduce",
    "map",
    "sort",
    "all-gather",
    "all-gather-start",
    "reduce-scatter",
    "get-dimension-size",
    "set-dimension-size",
    "scan",
];
const TO_APPLY: &[&str] = &[
    "call",
    "map",
    "reduce",
    "reduce-window",
    "all-reduce",
    "all-reduce-start",
    "reduce-scatter",
    "scatter",
    "sort",
    "scan",
];
const ASYNC: &[&str] = &["async-start", "async-update", "async-done"];
const BATCH_NORM: &[&str] = &[
    "batch-norm-training",
    "batch-norm-inference",
    "batch-norm-grad",
];
const CONV_LIKE: &[&str] = &["convolution", "custom-call"];
const PRECISION: &[&str] = &["convolution", "dot", "custom-call"];

fn dot(i: &mut Inst) -> &mut x::DotDimensionNumbers {
    i.dot_dimension_numbers.get_or_insert_with(Default::default)
}
fn gather(i: &mut Inst) -> &mut x::GatherDimensionNumbers {
    i.gather_dimension_numbers
        .get_or_insert_with(Default::default)
}
fn scatter(i: &mut Inst) -> &mut x::ScatterDimensionNumbers {
    i.scatter_dimension_numbers
        .get_or_insert_with(Default::default)
}
fn solve(i: &mut Inst) -> &mut x::TriangularSolveOptions {
    i.triangular_solve_options
        .get_or_insert_with(Default::default)
}

/// Every attribute graphbug maps, in the order XLA prints them (opcode-specific ones first,
/// then called computations, sharding, frontend attributes, control predecessors, metadata
/// and backend config).
#[rustfmt::skip]
static SPECS: &[Spec] = &[
    Spec { key: "parameter_replication", ops: &["parameter"], codec: Codec::Custom(enc_replication, dec_replication) },
    Spec { key: "index", ops: &["get-tuple-element"], codec: Codec::Int(|i| &mut i.tuple_index, Show::Always) },
    Spec { key: "iota_dimension", ops: &["iota"], codec: Codec::Custom(enc_one_dim, dec_one_dim) },
    Spec { key: "inferred_dimension", ops: &["reshape"], codec: Codec::Custom(enc_one_dim, dec_inferred) },
    Spec { key: "channel_id", ops: CHANNELS, codec: Codec::Int(|i| &mut i.channel_id, Show::NonZero) },
    Spec { key: "replica_groups", ops: COLLECTIVES, codec: Codec::Custom(enc_replica_groups, dec_replica_groups) },
    Spec { key: "constrain_layout", ops: LAYOUT_CONSTRAINED, codec: Codec::Bool(|i| &mut i.constrain_layout) },
    Spec { key: "source_target_pairs", ops: &["collective-permute", "collective-permute-start"], codec: Codec::Custom(enc_pairs, dec_pairs) },
    Spec { key: "is_host_transfer", ops: &["send", "send-done", "recv", "recv-done"], codec: Codec::Bool(|i| &mut i.is_host_transfer) },
    Spec { key: "dimensions", ops: DIMENSIONS, codec: Codec::Ints(|i| &mut i.dimensions, Show::Always) },
    Spec { key: "dimensions", ops: &["all-to-all"], codec: Codec::Ints(|i| &mut i.dimensions, Show::NonZero) },
    Spec { key: "is_stable", ops: &["sort"], codec: Codec::Bool(|i| &mut i.is_stable) },
    Spec { key: "use_global_device_ids", ops: GLOBAL_IDS, codec: Codec::Bool(|i| &mut i.use_global_device_ids) },
    Spec { key: "slice", ops: &["slice"], codec: Codec::Custom(enc_slice, dec_slice) },
    Spec { key: "dynamic_slice_sizes", ops: &["dynamic-slice"], codec: Codec::Ints(|i| &mut i.dynamic_slice_sizes, Show::Always) },
    Spec { key: "padding", ops: &["pad"], codec: Codec::Custom(enc_padding, dec_padding) },
    Spec { key: "window", ops: &["convolution", "reduce-window", "select-and-scatter", "custom-call"], codec: Codec::Custom(enc_window, dec_window) },
    Spec { key: "dim_labels", ops: CONV_LIKE, codec: Codec::Custom(enc_dim_labels, dec_dim_labels) },
    Spec { key: "feature_group_count", ops: CONV_LIKE, codec: Codec::Int(|i| &mut i.feature_group_count, Show::AboveOne) },
    Spec { key: "batch_group_count", ops: CONV_LIKE, codec: Codec::Int(|i| &mut i.batch_group_count, Show::AboveOne) },
    Spec { key: "lhs_batch_dims", ops: &["dot"], codec: Codec::Ints(|i| &mut dot(i).lhs_batch_dimensions, Show::NonZero) },
    Spec { key: "lhs_contracting_dims", ops: &["dot"], codec: Codec::Ints(|i| &mut dot(i).lhs_contracting_dimensions, Show::Always) },
    Spec { key: "rhs_batch_dims", ops: &["dot"], codec: Codec::Ints(|i| &mut dot(i).rhs_batch_dimensions, Show::NonZero) },
    Spec { key: "rhs_contracting_dims", ops: &["dot"], codec: Codec::Ints(|i| &mut dot(i).rhs_contracting_dimensions, Show::Always) },
    Spec { key: "operand_precision", ops: PRECISION, codec: Codec::Custom(enc_precision, dec_precision) },
    Spec { key: "algorithm", ops: &["dot"], codec: Codec::Custom(enc_dot_algorithm, dec_dot_algorithm) },
    Spec { key: "padding_type", ops: &["custom-call"], codec: Codec::Enum(|i| &mut i.padding_type, &[("PADDING_INVALID", 0), ("PADDING_VALID", 1), ("PADDING_SAME", 2)], &[0]) },
    Spec { key: "custom_call_target", ops: &["custom-call"], codec: Codec::Str(|i| &mut i.custom_call_target, Show::Always) },
    Spec { key: "operand_layout_constraints", ops: &["custom-call"], codec: Codec::Custom(enc_layout_constraints, dec_layout_constraints) },
    Spec { key: "custom_call_has_side_effect", ops: &["custom-call"], codec: Codec::Bool(|i| &mut i.custom_call_has_side_effect) },
    Spec { key: "literal", ops: &["custom-call"], codec: Codec::Custom(enc_literal, dec_literal) },
    Spec { key: "kind", ops: &["fusion"], codec: Codec::Custom(enc_fusion_kind, dec_fusion_kind) },
    Spec { key: "output_to_operand_aliasing", ops: &["custom-call", "fusion"], codec: Codec::Custom(enc_aliasing, dec_aliasing) },
    Spec { key: "schedule", ops: &["custom-call"], codec: Codec::Enum(|i| &mut i.custom_call_schedule, &[("SCHEDULE_NONE", 0), ("SCHEDULE_LATEST", 1), ("SCHEDULE_EARLIEST", 2)], &[0]) },
    Spec { key: "api_version", ops: &["custom-call"], codec: Codec::Enum(|i| &mut i.custom_call_api_version, &[("API_VERSION_UNSPECIFIED", 0), ("API_VERSION_ORIGINAL", 1), ("API_VERSION_STATUS_RETURNING", 2), ("API_VERSION_STATUS_RETURNING_UNIFIED", 3), ("API_VERSION_TYPED_FFI", 4)], &[0, 1]) },
    Spec { key: "direction", ops: &["compare"], codec: Codec::Custom(enc_direction, dec_direction) },
    Spec { key: "type", ops: &["compare"], codec: Codec::Custom(enc_compare_type, dec_compare_type) },
    Spec { key: "offset_dims", ops: &["gather"], codec: Codec::Ints(|i| &mut gather(i).offset_dims, Show::Always) },
    Spec { key: "collapsed_slice_dims", ops: &["gather"], codec: Codec::Ints(|i| &mut gather(i).collapsed_slice_dims, Show::Always) },
    Spec { key: "start_index_map", ops: &["gather"], codec: Codec::Ints(|i| &mut gather(i).start_index_map, Show::Always) },
    Spec { key: "operand_batching_dims", ops: &["gather"], codec: Codec::Ints(|i| &mut gather(i).operand_batching_dims, Show::NonZero) },
    Spec { key: "start_indices_batching_dims", ops: &["gather"], codec: Codec::Ints(|i| &mut gather(i).start_indices_batching_dims, Show::NonZero) },
    Spec { key: "index_vector_dim", ops: &["gather"], codec: Codec::Int(|i| &mut gather(i).index_vector_dim, Show::Always) },
    Spec { key: "slice_sizes", ops: &["gather"], codec: Codec::Ints(|i| &mut i.gather_slice_sizes, Show::Always) },
    Spec { key: "update_window_dims", ops: &["scatter"], codec: Codec::Ints(|i| &mut scatter(i).update_window_dims, Show::Always) },
    Spec { key: "inserted_window_dims", ops: &["scatter"], codec: Codec::Ints(|i| &mut scatter(i).inserted_window_dims, Show::Always) },
    Spec { key: "scatter_dims_to_operand_dims", ops: &["scatter"], codec: Codec::Ints(|i| &mut scatter(i).scatter_dims_to_operand_dims, Show::Always) },
    Spec { key: "input_batching_dims", ops: &["scatter"], codec: Codec::Ints(|i| &mut scatter(i).input_batching_dims, Show::NonZero) },
    Spec { key: "scatter_indices_batching_dims", ops: &["scatter"], codec: Codec::Ints(|i| &mut scatter(i).scatter_indices_batching_dims, Show::NonZero) },
    Spec { key: "index_vector_dim", ops: &["scatter"], codec: Codec::Int(|i| &mut scatter(i).index_vector_dim, Show::Always) },
    Spec { key: "indices_are_sorted", ops: &["gather", "scatter"], codec: Codec::Bool(|i| &mut i.indices_are_sorted) },
    Spec { key: "unique_indices", ops: &["scatter"], codec: Codec::Bool(|i| &mut i.unique_indices) },
    Spec { key: "k", ops: &["topk"], codec: Codec::Int(|i| &mut i.k, Show::Always) },
    Spec { key: "largest", ops: &["topk"], codec: Codec::Custom(enc_largest, dec_largest) },
    Spec { key: "fft_type", ops: &["fft"], codec: Codec::Enum(|i| &mut i.fft_type, &[("FFT", 0), ("IFFT", 1), ("RFFT", 2), ("IRFFT", 3)], &[]) },
    Spec { key: "fft_length", ops: &["fft"], codec: Codec::Ints(|i| &mut i.fft_length, Show::Always) },
    Spec { key: "exponent_bits", ops: &["reduce-precision"], codec: Codec::Int32(|i| &mut i.exponent_bits, Show::Always) },
    Spec { key: "mantissa_bits", ops: &["reduce-precision"], codec: Codec::Int32(|i| &mut i.mantissa_bits, Show::Always) },
    Spec { key: "distribution", ops: &["rng"], codec: Codec::Enum(|i| &mut i.distribution, &[("rng_invalid", 0), ("rng_uniform", 1), ("rng_normal", 2)], &[]) },
    Spec { key: "algorithm", ops: &["rng-bit-generator"], codec: Codec::Enum(|i| &mut i.rng_algorithm, &[("rng_default", 0), ("rng_three_fry", 1), ("rng_philox", 2)], &[]) },
    Spec { key: "delta", ops: &["rng-get-and-update-state"], codec: Codec::Int(|i| &mut i.delta, Show::Always) },
    Spec { key: "epsilon", ops: BATCH_NORM, codec: Codec::Custom(enc_epsilon, dec_epsilon) },
    Spec { key: "feature_index", ops: BATCH_NORM, codec: Codec::Int(|i| &mut i.feature_index, Show::Always) },
    Spec { key: "lower", ops: &["cholesky"], codec: Codec::Bool(|i| &mut i.cholesky_options.get_or_insert_with(Default::default).lower) },
    Spec { key: "left_side", ops: &["triangular-solve"], codec: Codec::Bool(|i| &mut solve(i).left_side) },
    Spec { key: "lower", ops: &["triangular-solve"], codec: Codec::Bool(|i| &mut solve(i).lower) },
    Spec { key: "unit_diagonal", ops: &["triangular-solve"], codec: Codec::Bool(|i| &mut solve(i).unit_diagonal) },
    Spec { key: "transpose_a", ops: &["triangular-solve"], codec: Codec::Enum(|i| &mut solve(i).transpose_a, &[("TRANSPOSE_INVALID", 0), ("NO_TRANSPOSE", 1), ("TRANSPOSE", 2), ("ADJOINT", 3)], &[]) },
    Spec { key: "infeed_config", ops: &["infeed"], codec: Codec::Custom(enc_infeed, dec_infeed) },
    Spec { key: "num_carries", ops: &["scan"], codec: Codec::Int(|i| &mut i.num_carries, Show::Always) },
    Spec { key: "is_reverse", ops: &["scan"], codec: Codec::Bool(|i| &mut i.is_reverse) },
    Spec { key: "is_associative", ops: &["scan"], codec: Codec::Enum(|i| &mut i.is_associative, &[("true", 1), ("false", 2)], &[0]) },
    Spec { key: "slice_sizes", ops: &["collective-permute", "collective-permute-start"], codec: Codec::Custom(enc_permute_slices, dec_permute_slices) },
    Spec { key: "cross_program_prefetch_index", ops: &["copy-start"], codec: Codec::Custom(enc_prefetch, dec_prefetch) },
    Spec { key: "domain", ops: &["domain"], codec: Codec::Custom(enc_domain, dec_domain) },
    Spec { key: "async_execution_thread", ops: ASYNC, codec: Codec::Custom(enc_thread, dec_thread) },
    Spec { key: "outfeed_shape", ops: &["outfeed"], codec: Codec::Custom(enc_outfeed_shape, dec_outfeed_shape) },
    Spec { key: "outfeed_config", ops: &["outfeed"], codec: Codec::Custom(enc_outfeed, dec_outfeed) },
    // Called computations.
    Spec { key: "condition", ops: &["while"], codec: Codec::Custom(|v, c| c.set_slot(1, name1(v)?), |c| c.take_slot(1)) },
    Spec { key: "body", ops: &["while"], codec: Codec::Custom(|v, c| c.set_slot(0, name1(v)?), |c| c.take_slot(0)) },
    Spec { key: "select", ops: &["select-and-scatter"], codec: Codec::Custom(|v, c| c.set_slot(0, name1(v)?), |c| c.take_slot(0)) },
    Spec { key: "scatter", ops: &["select-and-scatter"], codec: Codec::Custom(|v, c| c.set_slot(1, name1(v)?), |c| c.take_slot(1)) },
    Spec { key: "true_computation", ops: &["conditional"], codec: Codec::Custom(|v, c| c.set_slot(0, name1(v)?), dec_true) },
    Spec { key: "false_computation", ops: &["conditional"], codec: Codec::Custom(|v, c| c.set_slot(1, name1(v)?), dec_false) },
    Spec { key: "branch_computations", ops: &["conditional"], codec: Codec::Custom(enc_list, dec_branches) },
    Spec { key: "to_apply", ops: TO_APPLY, codec: Codec::Custom(|v, c| c.set_slot(0, name1(v)?), |c| c.take_slot(0)) },
    Spec { key: "to_apply", ops: &["custom-call"], codec: Codec::Custom(|v, c| c.set_slot(0, name1(v)?), |_| Ok(None)) },
    Spec { key: "is_composite", ops: &["call"], codec: Codec::Bool(|i| &mut i.is_composite) },
    Spec { key: "calls", ops: &["fusion"], codec: Codec::Custom(|v, c| c.set_slot(0, name1(v)?), |c| c.take_slot(0)) },
    Spec { key: "calls", ops: ASYNC, codec: Codec::Custom(|v, c| c.set_slot(0, name1(v)?), |c| c.take_slot(0)) },
    Spec { key: "called_computations", ops: &["custom-call"], codec: Codec::Custom(enc_list, dec_called_list) },
    // Every opcode.
    Spec { key: "sharding", ops: ALL, codec: Codec::Custom(enc_sharding, dec_sharding) },
    Spec { key: "frontend_attributes", ops: ALL, codec: Codec::Custom(enc_frontend, dec_frontend) },
    Spec { key: "control-predecessors", ops: ALL, codec: Codec::Custom(enc_control, dec_control) },
    Spec { key: "statistics", ops: ALL, codec: Codec::Custom(enc_statistics, dec_statistics) },
    Spec { key: "metadata", ops: ALL, codec: Codec::Custom(enc_metadata, dec_metadata) },
    Spec { key: "backend_config", ops: ALL, codec: Codec::Custom(enc_backend_config, dec_backend_config) },
];

/// The opcodes graphbug maps (XLA's, less the ragged dot and the scaled ops, and the async
/// shorthands such as `custom-call-start`, which XLA's parser expands into an `async-start`
/// and a computation it wraps).
pub(crate) const OPCODES: &[&str] = &[
    "abs",
    "acos",
    "acosh",
    "add",
    "add-dependency",
    "after-all",
    "all-gather",
    "all-gather-done",
    "all-gather-start",
    "all-reduce",
    "all-reduce-done",
    "all-reduce-start",
    "all-to-all",
    "and",
    "async-done",
    "async-start",
    "async-update",
    "asin",
    "asinh",
    "atan2",
    "atanh",
    "batch-norm-grad",
    "batch-norm-inference",
    "batch-norm-training",
    "bitcast",
    "bitcast-convert",
    "broadcast",
    "call",
    "cbrt",
    "ceil",
    "cholesky",
    "clamp",
    "count-leading-zeros",
    "collective-broadcast",
    "collective-permute",
    "collective-permute-done",
    "collective-permute-start",
    "compare",
    "complex",
    "concatenate",
    "conditional",
    "constant",
    "convert",
    "convolution",
    "copy",
    "copy-done",
    "copy-start",
    "cosine",
    "cosh",
    "custom-call",
    "divide",
    "domain",
    "dot",
    "dynamic-reshape",
    "dynamic-slice",
    "dynamic-update-slice",
    "erf",
    "exponential",
    "exponential-minus-one",
    "fft",
    "floor",
    "fusion",
    "gather",
    "get-dimension-size",
    "get-tuple-element",
    "imag",
    "infeed",
    "iota",
    "is-finite",
    "log",
    "log-plus-one",
    "logistic",
    "map",
    "maximum",
    "minimum",
    "multiply",
    "negate",
    "not",
    "opt-barrier",
    "or",
    "outfeed",
    "pad",
    "parameter",
    "partition-id",
    "popcnt",
    "power",
    "ragged-all-to-all",
    "real",
    "recv",
    "recv-done",
    "reduce",
    "reduce-precision",
    "reduce-scatter",
    "reduce-window",
    "remainder",
    "replica-id",
    "reshape",
    "reverse",
    "rng",
    "rng-bit-generator",
    "rng-get-and-update-state",
    "round-nearest-afz",
    "round-nearest-even",
    "rsqrt",
    "scan",
    "scatter",
    "select",
    "select-and-scatter",
    "send",
    "send-done",
    "set-dimension-size",
    "shift-left",
    "shift-right-arithmetic",
    "shift-right-logical",
    "sign",
    "sine",
    "sinh",
    "slice",
    "sort",
    "sqrt",
    "stochastic-convert",
    "subtract",
    "tan",
    "tanh",
    "topk",
    "transpose",
    "triangular-solve",
    "tuple",
    "while",
    "xor",
];

fn applies(spec: &Spec, opcode: &str) -> bool {
    spec.ops.is_empty() || spec.ops.contains(&opcode)
}

/// Sets the fields of attribute `key` of an instruction of `opcode`.
pub(crate) fn encode(
    key: &str,
    value: &str,
    opcode: &str,
    ctx: &mut Ctx<'_>,
) -> Result<(), String> {
    let spec = SPECS
        .iter()
        .find(|s| s.key == key && applies(s, opcode))
        .ok_or_else(|| {
            if SPECS.iter().any(|s| s.key == key) {
                format!("attribute `{key}` does not belong to opcode `{opcode}`")
            } else {
                format!("attribute `{key}` is not mapped to the proto")
            }
        })?;
    spec.codec
        .encode(value, ctx)
        .map_err(|e| format!("attribute `{key}`: {e}"))
}

/// The attributes of an instruction of `opcode`, in XLA's order, taking their fields.
pub(crate) fn decode(opcode: &str, ctx: &mut Ctx<'_>) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for spec in SPECS.iter().filter(|s| applies(s, opcode)) {
        let value = spec
            .codec
            .decode(ctx)
            .map_err(|e| format!("attribute `{}`: {e}", spec.key))?;
        if let Some(v) = value {
            out.push((spec.key.to_string(), v));
        }
    }
    Ok(out)
}

/// The fields XLA's parser sets on an instruction whatever its text says.
pub(crate) fn fill_defaults(opcode: &str, ctx: &mut Ctx<'_>) {
    let n = ctx.operand_shapes.len();
    let inst = &mut *ctx.inst;
    if PRECISION.contains(&opcode) {
        let pc = inst.precision_config.get_or_insert_with(Default::default);
        if pc.operand_precision.is_empty() {
            pc.operand_precision = vec![0; n];
        }
    }
    if CONV_LIKE.contains(&opcode) {
        for count in [&mut inst.feature_group_count, &mut inst.batch_group_count] {
            if *count == 0 {
                *count = 1;
            }
        }
    }
    if opcode == "custom-call" && inst.custom_call_api_version == 0 {
        inst.custom_call_api_version = 1;
    }
    if opcode == "compare" && inst.comparison_type.is_empty() {
        if let Some(t) = ctx.operand_shapes.first().and_then(default_compare_type) {
            inst.comparison_type = t.to_string();
        }
    }
}

fn name1(v: &str) -> Result<&str, String> {
    let n = v.trim().trim_start_matches('%');
    if n.is_empty() || n.contains([',', '{', ' ']) {
        return Err(format!("expected one computation's name, found `{v}`"));
    }
    Ok(n)
}

fn enc_list(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    for (k, name) in parse_names(v).iter().enumerate() {
        c.set_slot(k, name)?;
    }
    Ok(())
}

fn names_text(names: &[String]) -> String {
    format!("{{{}}}", names.join(", "))
}

/// A conditional on a `pred` prints `true_computation=`/`false_computation=`, otherwise
/// `branch_computations={...}`.
fn pred_conditional(c: &Ctx<'_>) -> bool {
    c.operand_shapes
        .first()
        .is_some_and(|s| s.element_type == x::PrimitiveType::Pred as i32)
        && c.called.len() == 2
}

fn dec_true(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    if pred_conditional(c) {
        c.take_slot(0)
    } else {
        Ok(None)
    }
}

fn dec_false(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    if pred_conditional(c) {
        c.take_slot(1)
    } else {
        Ok(None)
    }
}

fn dec_branches(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let names = c.take_all()?;
    Ok((!names.is_empty()).then(|| names_text(&names)))
}

fn dec_called_list(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let names = c.take_all()?;
    Ok((!names.is_empty()).then(|| names_text(&names)))
}

fn enc_replication(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    let flags = braced(v, "booleans")?
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_bool)
        .collect::<Result<_, _>>()?;
    c.inst.parameter_replication = Some(x::ParameterReplication {
        replicated_at_leaf_buffers: flags,
    });
    Ok(())
}

fn dec_replication(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    Ok(c.inst.parameter_replication.take().map(|r| {
        let flags: Vec<&str> = r
            .replicated_at_leaf_buffers
            .iter()
            .map(|b| if *b { "true" } else { "false" })
            .collect();
        format!("{{{}}}", flags.join(","))
    }))
}

fn enc_one_dim(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.dimensions = vec![parse_int(v)?];
    Ok(())
}

fn dec_one_dim(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    match std::mem::take(&mut c.inst.dimensions).as_slice() {
        [d] => Ok(Some(d.to_string())),
        [] => Ok(Some("0".into())),
        more => Err(format!("{} dimensions where one is printed", more.len())),
    }
}

fn dec_inferred(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    match std::mem::take(&mut c.inst.dimensions).as_slice() {
        [d] if *d >= 0 => Ok(Some(d.to_string())),
        [] | [_] => Ok(None),
        more => Err(format!("{} dimensions where one is printed", more.len())),
    }
}

/// `{{0,1},{2,3}}`.
fn parse_groups(v: &str) -> Result<Vec<Vec<i64>>, String> {
    let inner = braced(v, "groups")?;
    split_top(inner, b',')
        .into_iter()
        .filter(|g| !g.trim().is_empty())
        .map(parse_ints)
        .collect()
}

fn print_groups(groups: &[Vec<i64>]) -> String {
    let parts: Vec<String> = groups.iter().map(|g| print_ints(g)).collect();
    format!("{{{}}}", parts.join(","))
}

/// An iota device list: its sizes, the reshape and the transpose of `iota(n)`.
type Iota = (Vec<i64>, Vec<i64>, Vec<i32>);

/// `[a,b]<=[dims]` with `T(perm)` when the permutation is not the identity.
fn parse_iota(v: &str) -> Result<Iota, String> {
    let bad = || format!("malformed iota list `{v}`");
    let (dims, rest) = v.trim().split_once("<=").ok_or_else(bad)?;
    let dims = super::shapes::parse_ints(
        dims.trim()
            .strip_prefix('[')
            .and_then(|d| d.strip_suffix(']'))
            .ok_or_else(bad)?,
        ',',
    )?;
    let rest = rest.trim().strip_prefix('[').ok_or_else(bad)?;
    let (reshape, rest) = rest.split_once(']').ok_or_else(bad)?;
    let reshape = super::shapes::parse_ints(reshape, ',')?;
    let perm = match rest.trim() {
        "" => (0..reshape.len() as i32).collect(),
        t => {
            let p = t
                .strip_prefix("T(")
                .and_then(|p| p.strip_suffix(')'))
                .ok_or_else(bad)?;
            super::shapes::parse_ints(p, ',')?
                .into_iter()
                .map(|d| d as i32)
                .collect()
        }
    };
    Ok((dims, reshape, perm))
}

fn print_iota(dims: &[i64], reshape: &[i64], perm: &[i32]) -> String {
    let mut s = format!(
        "[{}]<=[{}]",
        join(dims.iter(), ","),
        join(reshape.iter(), ",")
    );
    if perm.iter().enumerate().any(|(k, p)| *p as usize != k) {
        s.push_str(&format!("T({})", join(perm.iter(), ",")));
    }
    s
}

fn join<T: ToString>(items: impl Iterator<Item = T>, sep: &str) -> String {
    items.map(|i| i.to_string()).collect::<Vec<_>>().join(sep)
}

fn enc_replica_groups(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    if v.trim_start().starts_with('[') {
        let (dims, reshape, perm) = parse_iota(v)?;
        let [groups, per_group] = dims[..] else {
            return Err(format!(
                "an iota replica group list has 2 sizes, found `{v}`"
            ));
        };
        c.inst.replica_group_list = Some(
            x::hlo_instruction_proto::ReplicaGroupList::IotaCollectiveDeviceList(
                x::IotaReplicaGroupListProto {
                    num_replica_groups: groups,
                    num_devices_per_group: per_group,
                    iota_reshape_dims: reshape,
                    iota_transpose_perm: perm,
                },
            ),
        );
    } else {
        let groups = parse_groups(v)?;
        c.inst.replica_group_list = Some(
            x::hlo_instruction_proto::ReplicaGroupList::CollectiveDeviceList(
                x::CollectiveDeviceListProto {
                    replica_groups: groups
                        .into_iter()
                        .map(|replica_ids| x::ReplicaGroup { replica_ids })
                        .collect(),
                },
            ),
        );
    }
    Ok(())
}

#[allow(deprecated)] // Older producers write these fields.
fn dec_replica_groups(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    use x::hlo_instruction_proto::ReplicaGroupList as L;
    let old = std::mem::take(&mut c.inst.replica_groups);
    Ok(Some(match c.inst.replica_group_list.take() {
        Some(L::IotaCollectiveDeviceList(l)) => print_iota(
            &[l.num_replica_groups, l.num_devices_per_group],
            &l.iota_reshape_dims,
            &l.iota_transpose_perm,
        ),
        Some(L::CollectiveDeviceList(l)) => {
            let groups: Vec<Vec<i64>> = l
                .replica_groups
                .into_iter()
                .map(|g| g.replica_ids)
                .collect();
            print_groups(&groups)
        }
        Some(L::MeshAxesReplicaGroupList(_)) => {
            return Err("mesh-axes replica groups are not mapped to text".into())
        }
        None => {
            let groups: Vec<Vec<i64>> = old.into_iter().map(|g| g.replica_ids).collect();
            print_groups(&groups)
        }
    }))
}

fn enc_pairs(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    for pair in parse_groups(v)? {
        let [source, target] = pair[..] else {
            return Err(format!(
                "a source-target pair has 2 numbers, found {pair:?}"
            ));
        };
        c.inst
            .source_target_pairs
            .push(x::SourceTarget { source, target });
    }
    Ok(())
}

fn dec_pairs(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let pairs: Vec<Vec<i64>> = std::mem::take(&mut c.inst.source_target_pairs)
        .into_iter()
        .map(|p| vec![p.source, p.target])
        .collect();
    Ok(Some(print_groups(&pairs)))
}

fn enc_slice(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    for part in braced(v, "slice bounds")?.split(',') {
        let p = part.trim();
        if p.is_empty() {
            continue;
        }
        let inner = p
            .strip_prefix('[')
            .and_then(|p| p.strip_suffix(']'))
            .ok_or_else(|| format!("a slice bound is `[start:limit:stride]`, found `{p}`"))?;
        let n = super::shapes::parse_ints(inner, ':')?;
        let (start, limit, stride) = match n[..] {
            [a, b] => (a, b, 1),
            [a, b, s] => (a, b, s),
            _ => {
                return Err(format!(
                    "a slice bound is `[start:limit:stride]`, found `{p}`"
                ))
            }
        };
        c.inst.slice_dimensions.push(SliceDimensions {
            start,
            limit,
            stride,
        });
    }
    Ok(())
}

fn dec_slice(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let dims = std::mem::take(&mut c.inst.slice_dimensions);
    let strides = dims.iter().any(|d| d.stride != 1);
    let parts: Vec<String> = dims
        .iter()
        .map(|d| {
            if strides {
                format!("[{}:{}:{}]", d.start, d.limit, d.stride)
            } else {
                format!("[{}:{}]", d.start, d.limit)
            }
        })
        .collect();
    Ok(Some(format!("{{{}}}", parts.join(", "))))
}

fn enc_padding(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    let mut config = x::PaddingConfig::default();
    for dim in v.trim().split('x').filter(|d| !d.is_empty()) {
        let n = super::shapes::parse_ints(dim, '_')?;
        let (lo, hi, interior) = match n[..] {
            [a, b] => (a, b, 0),
            [a, b, i] => (a, b, i),
            _ => {
                return Err(format!(
                    "padding is `low_high[_interior]` a dimension, found `{dim}`"
                ))
            }
        };
        config.dimensions.push(PaddingConfigDimension {
            edge_padding_low: lo,
            edge_padding_high: hi,
            interior_padding: interior,
        });
    }
    c.inst.padding_config = Some(config);
    Ok(())
}

fn dec_padding(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let dims = c.inst.padding_config.take().unwrap_or_default().dimensions;
    let interior = dims.iter().any(|d| d.interior_padding != 0);
    let parts: Vec<String> = dims
        .iter()
        .map(|d| {
            if interior {
                format!(
                    "{}_{}_{}",
                    d.edge_padding_low, d.edge_padding_high, d.interior_padding
                )
            } else {
                format!("{}_{}", d.edge_padding_low, d.edge_padding_high)
            }
        })
        .collect();
    Ok(Some(parts.join("x")))
}

/// Parses a window: `{size=3x3 stride=2x2 pad=1_1x0_0 lhs_dilate=.. rhs_dilate=..
/// rhs_reversal=0x1}`.
pub(crate) fn parse_window(v: &str) -> Result<x::Window, String> {
    let inner = braced(v, "a window")?;
    let mut dims: Vec<x::WindowDimension> = Vec::new();
    let mut seen = Vec::new();
    for (key, value) in words(inner)? {
        if seen.contains(&key) {
            return Err(format!("window `{v}` sets `{key}` twice"));
        }
        seen.push(key);
        let items: Vec<&str> = value.split('x').collect();
        if dims.is_empty() {
            dims = vec![
                x::WindowDimension {
                    stride: 1,
                    window_dilation: 1,
                    base_dilation: 1,
                    ..Default::default()
                };
                items.len()
            ];
        }
        if items.len() != dims.len() {
            return Err(format!(
                "malformed window `{v}`: `{key}` has {} dimensions, not {}",
                items.len(),
                dims.len()
            ));
        }
        for (d, item) in dims.iter_mut().zip(&items) {
            let int = || {
                item.parse::<i64>()
                    .map_err(|_| format!("malformed window `{v}`: bad `{key}` item `{item}`"))
            };
            match key {
                "size" => d.size = int()?,
                "stride" => d.stride = int()?,
                "lhs_dilate" => d.base_dilation = int()?,
                "rhs_dilate" => d.window_dilation = int()?,
                "rhs_reversal" => d.window_reversal = int()? != 0,
                "pad" => {
                    let lh = super::shapes::parse_ints(item, '_')
                        .map_err(|e| format!("malformed window `{v}`: {e}"))?;
                    let [lo, hi] = lh[..] else {
                        return Err(format!("malformed window `{v}`: a pad is `low_high`"));
                    };
                    d.padding_low = lo;
                    d.padding_high = hi;
                }
                _ => return Err(format!("malformed window `{v}`: unknown field `{key}`")),
            }
        }
    }
    if !dims.is_empty() && !seen.contains(&"size") {
        return Err(format!("malformed window `{v}`: no `size`"));
    }
    Ok(x::Window { dimensions: dims })
}

/// A window as XLA prints it (`window_util::ToString`).
pub(crate) fn print_window(w: &x::Window) -> String {
    let d = &w.dimensions;
    let mut fields = Vec::new();
    let field = |name: &str, f: &dyn Fn(&x::WindowDimension) -> String| {
        format!("{name}={}", d.iter().map(f).collect::<Vec<_>>().join("x"))
    };
    if !d.is_empty() {
        fields.push(field("size", &|w| w.size.to_string()));
    }
    if d.iter().any(|w| w.stride != 1) {
        fields.push(field("stride", &|w| w.stride.to_string()));
    }
    if d.iter().any(|w| w.padding_low != 0 || w.padding_high != 0) {
        fields.push(field("pad", &|w| {
            format!("{}_{}", w.padding_low, w.padding_high)
        }));
    }
    if d.iter().any(|w| w.base_dilation != 1) {
        fields.push(field("lhs_dilate", &|w| w.base_dilation.to_string()));
    }
    if d.iter().any(|w| w.window_dilation != 1) {
        fields.push(field("rhs_dilate", &|w| w.window_dilation.to_string()));
    }
    if d.iter().any(|w| w.window_reversal) {
        fields.push(field("rhs_reversal", &|w| {
            u8::from(w.window_reversal).to_string()
        }));
    }
    format!("{{{}}}", fields.join(" "))
}

fn enc_window(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.window = Some(parse_window(v)?);
    Ok(())
}

fn dec_window(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    Ok(c.inst.window.take().map(|w| print_window(&w)))
}

/// `bf01_oi01->bf01`.
pub(crate) fn parse_dim_labels(v: &str) -> Result<x::ConvolutionDimensionNumbers, String> {
    let bad = |why: &str| format!("malformed dim_labels `{v}`: {why}");
    let (lhs, rest) = v.trim().split_once('_').ok_or_else(|| bad("no `_`"))?;
    let (rhs, out) = rest.split_once("->").ok_or_else(|| bad("no `->`"))?;
    let spatial = |s: &str, a: char, b: char| -> Result<(i64, i64, Vec<i64>), String> {
        let (mut first, mut second) = (None, None);
        let mut sp = vec![None; s.len()];
        // `?` marks a dimension the numbers leave out (a custom call's).
        let unknown = s.matches('?').count();
        for (k, ch) in s.chars().enumerate() {
            match ch {
                _ if ch == a => first = Some(k as i64),
                _ if ch == b => second = Some(k as i64),
                '?' => {}
                '0'..='9' => {
                    let i = ch as usize - '0' as usize;
                    *sp.get_mut(i)
                        .ok_or_else(|| bad("spatial dimension out of range"))? = Some(k as i64);
                }
                _ => return Err(bad(&format!("unexpected `{ch}` in `{s}`"))),
            }
        }
        let n = s
            .len()
            .checked_sub(2 + unknown)
            .ok_or_else(|| bad("too short"))?;
        let sp: Option<Vec<i64>> = sp[..n].iter().copied().collect();
        match (first, second, sp) {
            (Some(f), Some(g), Some(sp)) => Ok((f, g, sp)),
            _ => Err(bad(&format!(
                "`{s}` needs `{a}`, `{b}` and spatial dimensions 0..{n}"
            ))),
        }
    };
    let (ib, if_, isp) = spatial(lhs, 'b', 'f')?;
    let (ki, ko, ksp) = spatial(rhs, 'i', 'o')?;
    let (ob, of, osp) = spatial(out, 'b', 'f')?;
    if isp.len() != ksp.len() || isp.len() != osp.len() {
        return Err(bad(
            "the three parts have different numbers of spatial dimensions",
        ));
    }
    Ok(x::ConvolutionDimensionNumbers {
        input_batch_dimension: ib,
        input_feature_dimension: if_,
        input_spatial_dimensions: isp,
        kernel_input_feature_dimension: ki,
        kernel_output_feature_dimension: ko,
        kernel_spatial_dimensions: ksp,
        output_batch_dimension: ob,
        output_feature_dimension: of,
        output_spatial_dimensions: osp,
    })
}

/// Convolution dimension numbers as XLA prints them.
pub(crate) fn print_dim_labels(d: &x::ConvolutionDimensionNumbers) -> Result<String, String> {
    let part = |a: (i64, char), b: (i64, char), sp: &[i64]| -> Result<String, String> {
        let rank = sp.iter().copied().chain([a.0, b.0]).max().unwrap_or(0) + 1;
        let mut labels = vec![String::new(); usize::try_from(rank).unwrap_or(0).max(2 + sp.len())];
        let mut put = |at: i64, what: String| -> Result<(), String> {
            let slot = usize::try_from(at)
                .ok()
                .and_then(|i| labels.get_mut(i))
                .ok_or_else(|| format!("convolution dimension {at} out of range"))?;
            *slot = what;
            Ok(())
        };
        put(a.0, a.1.to_string())?;
        put(b.0, b.1.to_string())?;
        for (k, s) in sp.iter().enumerate() {
            put(*s, k.to_string())?;
        }
        // A dimension the numbers leave out prints as `?` (a custom call's).
        for l in &mut labels {
            if l.is_empty() {
                *l = "?".into();
            }
        }
        Ok(labels.concat())
    };
    Ok(format!(
        "{}_{}->{}",
        part(
            (d.input_batch_dimension, 'b'),
            (d.input_feature_dimension, 'f'),
            &d.input_spatial_dimensions
        )?,
        part(
            (d.kernel_input_feature_dimension, 'i'),
            (d.kernel_output_feature_dimension, 'o'),
            &d.kernel_spatial_dimensions
        )?,
        part(
            (d.output_batch_dimension, 'b'),
            (d.output_feature_dimension, 'f'),
            &d.output_spatial_dimensions
        )?
    ))
}

fn enc_dim_labels(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.convolution_dimension_numbers = Some(parse_dim_labels(v)?);
    Ok(())
}

fn dec_dim_labels(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    c.inst
        .convolution_dimension_numbers
        .take()
        .map(|d| print_dim_labels(&d))
        .transpose()
}

const PRECISIONS: [(&str, i32); 3] = [("default", 0), ("high", 1), ("highest", 2)];

fn enc_precision(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    let mut out = Vec::new();
    for p in braced(v, "precisions")?.split(',') {
        let p = p.trim();
        out.push(
            PRECISIONS
                .iter()
                .find(|(n, _)| *n == p)
                .map(|(_, i)| *i)
                .ok_or_else(|| format!("unknown precision `{p}`"))?,
        );
    }
    c.inst
        .precision_config
        .get_or_insert_with(Default::default)
        .operand_precision = out;
    Ok(())
}

fn dec_precision(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let Some(pc) = c.inst.precision_config.as_mut() else {
        return Ok(None);
    };
    let v = std::mem::take(&mut pc.operand_precision);
    if v.iter().all(|p| *p == 0) {
        return Ok(None);
    }
    let names: Vec<&str> = v
        .iter()
        .map(|p| {
            PRECISIONS
                .iter()
                .find(|(_, i)| i == p)
                .map(|(n, _)| *n)
                .ok_or_else(|| format!("unknown precision value {p}"))
        })
        .collect::<Result<_, _>>()?;
    Ok(Some(format!("{{{}}}", names.join(","))))
}

fn enc_dot_algorithm(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    let name = format!("ALG_{}", v.trim().to_ascii_uppercase());
    let alg = precision_config::Algorithm::from_str_name(&name)
        .ok_or_else(|| format!("unknown dot algorithm `{}`", v.trim()))?;
    c.inst
        .precision_config
        .get_or_insert_with(Default::default)
        .algorithm = alg as i32;
    Ok(())
}

fn dec_dot_algorithm(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let Some(pc) = c.inst.precision_config.as_mut() else {
        return Ok(None);
    };
    let v = std::mem::take(&mut pc.algorithm);
    if v == 0 {
        return Ok(None);
    }
    let alg = precision_config::Algorithm::try_from(v)
        .map_err(|_| format!("unknown dot algorithm value {v}"))?;
    Ok(Some(
        alg.as_str_name()
            .trim_start_matches("ALG_")
            .to_ascii_lowercase(),
    ))
}

fn enc_layout_constraints(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.constrain_layout = true;
    for s in split_top(braced(v, "shapes")?, b',') {
        if !s.trim().is_empty() {
            c.inst
                .operand_shapes_with_layout
                .push(parse_shape_proto(s)?);
        }
    }
    Ok(())
}

fn dec_layout_constraints(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    if !std::mem::take(&mut c.inst.constrain_layout) {
        return Ok(None);
    }
    let shapes: Vec<String> = std::mem::take(&mut c.inst.operand_shapes_with_layout)
        .iter()
        .map(print_shape)
        .collect::<Result<_, _>>()?;
    Ok(Some(format!("{{{}}}", shapes.join(", "))))
}

/// `shape literal`, or a tuple of them: `( s32[2]{0} {1, 2}, pred[] 0 )`.
fn parse_shaped_literal(v: &str) -> Result<x::LiteralProto, String> {
    let t = v.trim();
    if let Some(inner) = t.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
        let elements = split_top(inner, b',')
            .into_iter()
            .filter(|e| !e.trim().is_empty())
            .map(parse_shaped_literal)
            .collect::<Result<Vec<_>, _>>()?;
        let shape = ShapeProto {
            element_type: x::PrimitiveType::Tuple as i32,
            tuple_shapes: elements
                .iter()
                .map(|e| e.shape.clone().unwrap_or_default())
                .collect(),
            ..ShapeProto::default()
        };
        return Ok(x::LiteralProto {
            shape: Some(shape),
            tuple_literals: elements,
            ..x::LiteralProto::default()
        });
    }
    let (shape, n) = parse_shape(t)?;
    let shape = super::shapes::shape_to_proto(&shape)?;
    parse_literal(&t[n..], &shape)
}

fn print_shaped_literal(lit: &x::LiteralProto) -> Result<String, String> {
    let shape = lit
        .shape
        .as_ref()
        .ok_or_else(|| "a literal without a shape".to_string())?;
    if shape.element_type == x::PrimitiveType::Tuple as i32 {
        let parts: Vec<String> = lit
            .tuple_literals
            .iter()
            .map(print_shaped_literal)
            .collect::<Result<_, _>>()?;
        return Ok(format!("( {} )", parts.join(", ")));
    }
    Ok(format!("{} {}", print_shape(shape)?, print_literal(lit)?))
}

fn enc_literal(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.literal = Some(parse_shaped_literal(v)?);
    Ok(())
}

fn dec_literal(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    c.inst
        .literal
        .take()
        .map(|lit| print_shaped_literal(&lit))
        .transpose()
}

const FUSION_KINDS: [&str; 4] = ["kLoop", "kInput", "kOutput", "kCustom"];

fn enc_fusion_kind(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    let k = v.trim();
    if !FUSION_KINDS.contains(&k) {
        return Err(format!("unknown fusion kind `{k}`"));
    }
    c.inst.fusion_kind = k.to_string();
    Ok(())
}

fn dec_fusion_kind(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let k = std::mem::take(&mut c.inst.fusion_kind);
    if !FUSION_KINDS.contains(&k.as_str()) {
        return Err(format!("unknown fusion kind `{k}`"));
    }
    Ok(Some(k))
}

/// `{{0}: (0, {}), {1}: (1, {2})}`.
fn enc_aliasing(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    for entry in split_top(braced(v, "aliasing")?, b',') {
        let e = entry.trim();
        if e.is_empty() {
            continue;
        }
        let bad = || format!("an aliasing is `{{output}}: (operand, {{index}})`, found `{e}`");
        let (out, rest) = e.split_once(':').ok_or_else(bad)?;
        let inner = rest
            .trim()
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(bad)?;
        let (operand, index) = inner.split_once(',').ok_or_else(bad)?;
        c.inst
            .output_operand_aliasing
            .push(x::OutputOperandAliasing {
                output_shape_index: parse_ints(out)?,
                operand_index: parse_int(operand)?,
                operand_shape_index: parse_ints(index)?,
            });
    }
    Ok(())
}

fn dec_aliasing(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let entries = std::mem::take(&mut c.inst.output_operand_aliasing);
    if entries.is_empty() {
        return Ok(None);
    }
    let parts: Vec<String> = entries
        .iter()
        .map(|a| {
            format!(
                "{}: ({}, {})",
                print_ints(&a.output_shape_index),
                a.operand_index,
                print_ints(&a.operand_shape_index)
            )
        })
        .collect();
    Ok(Some(format!("{{{}}}", parts.join(", "))))
}

const DIRECTIONS: [&str; 6] = ["EQ", "NE", "GE", "GT", "LE", "LT"];
const COMPARE_TYPES: [&str; 5] = ["FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED", "PARTIALORDER"];

fn enc_direction(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    let d = v.trim();
    if !DIRECTIONS.contains(&d) {
        return Err(format!("unknown comparison direction `{d}`"));
    }
    c.inst.comparison_direction = d.to_string();
    Ok(())
}

fn dec_direction(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let d = std::mem::take(&mut c.inst.comparison_direction);
    if !DIRECTIONS.contains(&d.as_str()) {
        return Err(format!("unknown comparison direction `{d}`"));
    }
    Ok(Some(d))
}

/// XLA's comparison type for operands of this shape when the text names none.
fn default_compare_type(shape: &ShapeProto) -> Option<&'static str> {
    use x::PrimitiveType as P;
    let ty = proto_element_type(shape.element_type).ok()?;
    Some(match ty {
        P::Pred | P::U1 | P::U2 | P::U4 | P::U8 | P::U16 | P::U32 | P::U64 => "UNSIGNED",
        P::S1 | P::S2 | P::S4 | P::S8 | P::S16 | P::S32 | P::S64 => "SIGNED",
        P::Tuple | P::Token | P::OpaqueType | P::Invalid | P::Buffer => return None,
        _ => "FLOAT",
    })
}

fn enc_compare_type(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    let t = v.trim();
    if !COMPARE_TYPES.contains(&t) {
        return Err(format!("unknown comparison type `{t}`"));
    }
    c.inst.comparison_type = t.to_string();
    Ok(())
}

fn dec_compare_type(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let t = std::mem::take(&mut c.inst.comparison_type);
    if t.is_empty() {
        return Ok(None);
    }
    if !COMPARE_TYPES.contains(&t.as_str()) {
        return Err(format!("unknown comparison type `{t}`"));
    }
    let default = c.operand_shapes.first().and_then(default_compare_type);
    Ok((default != Some(t.as_str())).then_some(t))
}

fn enc_largest(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.largest = parse_bool(v)?;
    Ok(())
}

fn dec_largest(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    Ok(Some(std::mem::take(&mut c.inst.largest).to_string()))
}

fn enc_epsilon(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.epsilon = v
        .trim()
        .parse()
        .map_err(|_| format!("expected a number, found `{v}`"))?;
    Ok(())
}

fn dec_epsilon(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    Ok(Some(fmt_g(
        f64::from(std::mem::take(&mut c.inst.epsilon)),
        6,
    )))
}

fn enc_infeed(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.infeed_config = parse_string(v)?.into_bytes();
    Ok(())
}

fn dec_infeed(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    bytes_text(std::mem::take(&mut c.inst.infeed_config), "infeed_config")
        .map(|s| (!s.is_empty()).then(|| print_string(&s)))
}

fn enc_outfeed(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.outfeed_config = parse_string(v)?.into_bytes();
    Ok(())
}

fn dec_outfeed(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    bytes_text(std::mem::take(&mut c.inst.outfeed_config), "outfeed_config")
        .map(|s| (!s.is_empty()).then(|| print_string(&s)))
}

fn enc_outfeed_shape(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.outfeed_shape = Some(parse_shape_proto(v)?);
    Ok(())
}

fn dec_outfeed_shape(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    c.inst
        .outfeed_shape
        .take()
        .map(|s| print_shape(&s))
        .transpose()
}

fn bytes_text(b: Vec<u8>, what: &str) -> Result<String, String> {
    String::from_utf8(b).map_err(|_| format!("{what} is not UTF-8 text"))
}

fn enc_backend_config(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    let t = v.trim();
    c.inst.backend_config = if t.starts_with('"') {
        parse_string(t)?.into_bytes()
    } else if is_dict(t) {
        t.as_bytes().to_vec()
    } else {
        return Err(format!("expected a string or `{{...}}`, found `{t}`"));
    };
    Ok(())
}

fn dec_backend_config(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let s = bytes_text(std::mem::take(&mut c.inst.backend_config), "backend_config")?;
    Ok((!s.is_empty()).then(|| if is_dict(&s) { s } else { print_string(&s) }))
}

/// `{key="value",key2={...}}` (also a module's).
pub(crate) fn parse_frontend(v: &str) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for part in split_top(braced(v, "attributes")?, b',') {
        let p = part.trim();
        if p.is_empty() {
            continue;
        }
        let (k, val) = p
            .split_once('=')
            .ok_or_else(|| format!("expected `key=value`, found `{p}`"))?;
        let val = val.trim();
        let val = if val.starts_with('"') {
            parse_string(val)?
        } else if is_dict(val) {
            val.to_string()
        } else {
            return Err(format!(
                "a frontend attribute is a string or `{{...}}`, found `{val}`"
            ));
        };
        map.insert(k.trim().to_string(), val);
    }
    Ok(map)
}

/// Frontend attributes as XLA prints them: sorted, `{...}` values bare.
pub(crate) fn print_frontend(map: &BTreeMap<String, String>) -> String {
    let parts: Vec<String> = map
        .iter()
        .map(|(k, v)| {
            if is_dict(v) {
                format!("{k}={v}")
            } else {
                format!("{k}={}", print_string(v))
            }
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

fn enc_frontend(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.frontend_attributes = Some(x::FrontendAttributes {
        map: parse_frontend(v)?,
    });
    Ok(())
}

fn dec_frontend(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let map = c.inst.frontend_attributes.take().unwrap_or_default().map;
    Ok((!map.is_empty()).then(|| print_frontend(&map)))
}

fn enc_control(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    for name in parse_names(v) {
        let id = c
            .inst_ids
            .get(&name)
            .copied()
            .ok_or_else(|| format!("no instruction `{name}` in this computation"))?;
        c.inst.control_predecessor_ids.push(id);
    }
    Ok(())
}

fn dec_control(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let ids = std::mem::take(&mut c.inst.control_predecessor_ids);
    if ids.is_empty() {
        return Ok(None);
    }
    let names: Vec<String> = ids
        .iter()
        .map(|id| {
            c.inst_names
                .get(id)
                .cloned()
                .ok_or_else(|| format!("no instruction of id {id} in this computation"))
        })
        .collect::<Result<_, _>>()?;
    Ok(Some(names_text(&names)))
}

/// `{op_type="..." op_name="..." source_file="..." source_line=3 ...}`.
#[allow(deprecated)] // Older producers write these fields.
pub(crate) fn parse_metadata(v: &str) -> Result<OpMetadata, String> {
    let mut m = OpMetadata::default();
    for (key, value) in words(braced(v, "metadata")?)? {
        let int = || -> Result<i32, String> {
            i32::try_from(parse_int(value)?).map_err(|_| format!("`{value}` does not fit 32 bits"))
        };
        match key {
            "op_type" => m.op_type = parse_string(value)?,
            "op_name" => m.op_name = parse_string(value)?,
            "source_file" => m.source_file = parse_string(value)?,
            "source_line" => m.source_line = int()?,
            "source_end_line" => m.source_end_line = int()?,
            "source_column" => m.source_column = int()?,
            "source_end_column" => m.source_end_column = int()?,
            "profile_type" => {
                m.profile_type = parse_ints(value)?.into_iter().map(|p| p as i32).collect();
            }
            "deduplicated_name" => m.deduplicated_name = parse_string(value)?,
            "scheduling_name" => m.scheduling_name = parse_string(value)?,
            "stack_frame_id" => m.stack_frame_id = int()?,
            _ => return Err(format!("metadata field `{key}` is not mapped to the proto")),
        }
    }
    Ok(m)
}

/// Metadata as XLA prints it (`OpMetadataToString`); `None` when it holds nothing.
#[allow(deprecated)] // Older producers write these fields.
pub(crate) fn print_metadata(m: &OpMetadata) -> Result<Option<String>, String> {
    let unmapped = [
        (
            m.size_of_generated_code_in_bytes != 0,
            "size_of_generated_code_in_bytes",
        ),
        (
            m.size_of_memory_working_set_in_bytes != 0,
            "size_of_memory_working_set_in_bytes",
        ),
        (m.profile_info.is_some(), "profile_info"),
        (m.metadata_payload.is_some(), "metadata_payload"),
    ];
    if let Some((_, f)) = unmapped.iter().find(|(set, _)| *set) {
        return Err(format!("field xla.OpMetadata.{f} is not mapped to text"));
    }
    let mut parts = Vec::new();
    for (key, s) in [
        ("op_type", &m.op_type),
        ("op_name", &m.op_name),
        ("source_file", &m.source_file),
    ] {
        if !s.is_empty() {
            parts.push(format!("{key}={}", print_string(s)));
        }
    }
    for (key, n) in [
        ("source_line", m.source_line),
        ("source_end_line", m.source_end_line),
        ("source_column", m.source_column),
        ("source_end_column", m.source_end_column),
    ] {
        if n != 0 {
            parts.push(format!("{key}={n}"));
        }
    }
    if !m.profile_type.is_empty() {
        let p: Vec<i64> = m.profile_type.iter().map(|p| i64::from(*p)).collect();
        parts.push(format!("profile_type={}", print_ints(&p)));
    }
    for (key, s) in [
        ("deduplicated_name", &m.deduplicated_name),
        ("scheduling_name", &m.scheduling_name),
    ] {
        if !s.is_empty() {
            parts.push(format!("{key}={}", print_string(s)));
        }
    }
    if m.stack_frame_id != 0 {
        parts.push(format!("stack_frame_id={}", m.stack_frame_id));
    }
    Ok((!parts.is_empty()).then(|| format!("{{{}}}", parts.join(" "))))
}

fn enc_metadata(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.metadata = Some(parse_metadata(v)?);
    Ok(())
}

fn dec_metadata(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    match c.inst.metadata.take() {
        Some(m) => print_metadata(&m),
        None => Ok(None),
    }
}

const SHARDING_TYPES: [(&str, i32); 7] = [
    ("replicated", 0),
    ("maximal", 1),
    ("tuple", 2),
    ("other", 3),
    ("manual", 4),
    ("unknown", 5),
    ("unreduced", 6),
];

/// A sharding: `{replicated}`, `{maximal device=1}`, `{devices=[2,1]0,1}`,
/// `{devices=[2,2]<=[4] last_tile_dim_replicate}`, `{{...}, {...}}` (a tuple's).
pub(crate) fn parse_sharding(v: &str) -> Result<OpSharding, String> {
    let inner = braced(v, "a sharding")?.trim();
    if inner.is_empty() || inner.starts_with('{') {
        let elements = split_top(inner, b',')
            .into_iter()
            .filter(|e| !e.trim().is_empty())
            .map(parse_sharding)
            .collect::<Result<_, _>>()?;
        return Ok(OpSharding {
            r#type: op_sharding::Type::Tuple as i32,
            tuple_shardings: elements,
            ..OpSharding::default()
        });
    }
    let mut s = OpSharding::default();
    let items: Vec<&str> = split_top(inner, b' ')
        .into_iter()
        .filter(|w| !w.is_empty())
        .collect();
    let mut k = 0;
    while k < items.len() {
        let item = items[k];
        k += 1;
        let (key, value) = item.split_once('=').unwrap_or((item, ""));
        match key {
            "replicated" => s.r#type = op_sharding::Type::Replicated as i32,
            "manual" => s.r#type = op_sharding::Type::Manual as i32,
            "unknown" => s.r#type = op_sharding::Type::Unknown as i32,
            "maximal" => s.r#type = op_sharding::Type::Maximal as i32,
            "device" => s.tile_assignment_devices = vec![parse_int(value)?],
            "devices" => {
                s.r#type = op_sharding::Type::Other as i32;
                let rest = value
                    .strip_prefix('[')
                    .ok_or_else(|| format!("malformed sharding devices `{value}`"))?;
                let (dims, rest) = rest
                    .split_once(']')
                    .ok_or_else(|| format!("malformed sharding devices `{value}`"))?;
                s.tile_assignment_dimensions = super::shapes::parse_ints(dims, ',')?;
                if rest.starts_with("<=") {
                    let (_, reshape, perm) = parse_iota(&format!("[]{rest}"))?;
                    s.iota_reshape_dims = reshape;
                    s.iota_transpose_perm = perm;
                } else {
                    s.tile_assignment_devices = super::shapes::parse_ints(rest, ',')?;
                }
            }
            "last_tile_dim_replicate" => s.replicate_on_last_tile_dim = true,
            "last_tile_dims" => {
                for t in braced(value, "types")?.split(',') {
                    let t = t.trim();
                    s.last_tile_dims.push(
                        SHARDING_TYPES
                            .iter()
                            .find(|(n, _)| *n == t)
                            .map(|(_, i)| *i)
                            .ok_or_else(|| format!("unknown sharding type `{t}`"))?,
                    );
                }
            }
            "shard_as" | "shard_like" => {
                s.is_shard_group = true;
                s.shard_group_type = i32::from(key == "shard_like");
                let id = items
                    .get(k)
                    .ok_or_else(|| format!("`{key}` needs a group number"))?;
                s.shard_group_id = parse_int(id)?;
                k += 1;
            }
            "metadata" => {
                let b = braced(value, "metadata")?.trim();
                if b.starts_with('{') {
                    for m in split_top(b, b',') {
                        s.metadata.push(parse_metadata(m)?);
                    }
                } else {
                    s.metadata.push(parse_metadata(value)?);
                }
            }
            _ => return Err(format!("unknown sharding item `{item}`")),
        }
    }
    Ok(s)
}

/// A sharding as XLA prints it.
pub(crate) fn print_sharding(s: &OpSharding) -> Result<String, String> {
    if s.tile_shape.is_some() {
        return Err("field xla.OpSharding.tile_shape is not mapped to text".into());
    }
    if s.named_sharding.is_some() {
        return Err("field xla.OpSharding.named_sharding is not mapped to text".into());
    }
    let ty = op_sharding::Type::try_from(s.r#type)
        .map_err(|_| format!("unknown xla.OpSharding.Type value {}", s.r#type))?;
    if ty == op_sharding::Type::Tuple {
        let parts: Vec<String> = s
            .tuple_shardings
            .iter()
            .map(print_sharding)
            .collect::<Result<_, _>>()?;
        return Ok(format!("{{{}}}", parts.join(", ")));
    }
    let mut out = String::from("{");
    match ty {
        op_sharding::Type::Replicated => out.push_str("replicated"),
        op_sharding::Type::Manual => out.push_str("manual"),
        op_sharding::Type::Unknown => out.push_str("unknown"),
        op_sharding::Type::Unreduced => out.push_str("unreduced"),
        op_sharding::Type::Maximal => {
            let [d] = s.tile_assignment_devices[..] else {
                return Err("a maximal sharding names one device".into());
            };
            out.push_str(&format!("maximal device={d}"));
        }
        op_sharding::Type::Other => {
            out.push_str(&format!(
                "devices=[{}]",
                join(s.tile_assignment_dimensions.iter(), ",")
            ));
            if s.iota_reshape_dims.is_empty() {
                out.push_str(&join(s.tile_assignment_devices.iter(), ","));
            } else {
                let iota = print_iota(&[], &s.iota_reshape_dims, &s.iota_transpose_perm);
                out.push_str(iota.trim_start_matches("[]"));
            }
            if s.replicate_on_last_tile_dim {
                out.push_str(" last_tile_dim_replicate");
            }
            if !s.last_tile_dims.is_empty() {
                let names: Vec<&str> = s
                    .last_tile_dims
                    .iter()
                    .map(|t| {
                        SHARDING_TYPES
                            .iter()
                            .find(|(_, i)| i == t)
                            .map(|(n, _)| *n)
                            .ok_or_else(|| format!("unknown sharding type {t}"))
                    })
                    .collect::<Result<_, _>>()?;
                out.push_str(&format!(" last_tile_dims={{{}}}", names.join(", ")));
            }
        }
        op_sharding::Type::Tuple => unreachable!("handled above"),
    }
    if s.is_shard_group {
        let kind = if s.shard_group_type == 1 {
            "shard_like"
        } else {
            "shard_as"
        };
        out.push_str(&format!(" {kind} {}", s.shard_group_id));
    }
    let metadata: Vec<String> = s
        .metadata
        .iter()
        .map(|m| print_metadata(m).map(Option::unwrap_or_default))
        .collect::<Result<_, _>>()?;
    match metadata.as_slice() {
        [] => {}
        [one] => out.push_str(&format!(" metadata={one}")),
        many => out.push_str(&format!(" metadata={{{}}}", many.join(", "))),
    }
    out.push('}');
    Ok(out)
}

/// `{{1,8,128},{1,8,128}}`: a collective-permute's slice sizes, one list per update,
/// held flat.
fn enc_permute_slices(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.dynamic_slice_sizes = parse_groups(v)?.into_iter().flatten().collect();
    Ok(())
}

fn dec_permute_slices(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let flat = std::mem::take(&mut c.inst.dynamic_slice_sizes);
    if flat.is_empty() {
        return Ok(None);
    }
    // Each update has the rank of the operand (of its first element, for a tuple).
    let first = c.operand_shapes.first();
    let rank = first
        .map(|s| s.tuple_shapes.first().unwrap_or(s).dimensions.len())
        .filter(|r| *r > 0)
        .ok_or_else(|| "slice sizes of a collective-permute of no array".to_string())?;
    if !flat.len().is_multiple_of(rank) {
        return Err(format!("{} slice sizes for rank {rank}", flat.len()));
    }
    let groups: Vec<Vec<i64>> = flat.chunks(rank).map(<[i64]>::to_vec).collect();
    Ok(Some(print_groups(&groups)))
}

fn enc_prefetch(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    let k = i32::try_from(parse_int(v)?).map_err(|_| format!("`{v}` does not fit 32 bits"))?;
    c.inst.optional_cross_program_prefetch_index = Some(
        x::hlo_instruction_proto::OptionalCrossProgramPrefetchIndex::CrossProgramPrefetchIndex(k),
    );
    Ok(())
}

fn dec_prefetch(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    Ok(c.inst.optional_cross_program_prefetch_index.take().map(
        |x::hlo_instruction_proto::OptionalCrossProgramPrefetchIndex::CrossProgramPrefetchIndex(
            k,
        )| k.to_string(),
    ))
}

/// `{kind="sharding", entry={...}, exit={...}}`.
fn enc_domain(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    let mut kind = None;
    for part in split_top(braced(v, "a domain")?, b',') {
        let p = part.trim();
        if p.is_empty() {
            continue;
        }
        let (key, value) = p
            .split_once('=')
            .ok_or_else(|| format!("expected `key=value` in the domain, found `{p}`"))?;
        match key.trim() {
            "kind" => kind = Some(parse_string(value)?),
            // XLA's proto holds the text's `entry` as its exit sharding and `exit` as its
            // entry sharding (its parser and printer swap them).
            "entry" => c.inst.domain_exit_sharding = Some(parse_sharding(value)?),
            "exit" => c.inst.domain_entry_sharding = Some(parse_sharding(value)?),
            k => return Err(format!("unknown domain field `{k}`")),
        }
    }
    match kind.as_deref() {
        Some("sharding") => Ok(()),
        Some(k) => Err(format!(
            "domain kind `{k}` (XLA's parser reads `sharding` only)"
        )),
        None => Err("a domain without `kind=`".into()),
    }
}

fn dec_domain(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let (Some(entry), Some(exit)) = (
        c.inst.domain_exit_sharding.take(),
        c.inst.domain_entry_sharding.take(),
    ) else {
        return Ok(None);
    };
    Ok(Some(format!(
        "{{kind=\"sharding\", entry={}, exit={}}}",
        print_sharding(&entry)?,
        print_sharding(&exit)?
    )))
}

/// XLA's name of the main execution thread, which it does not print.
const MAIN_THREAD: &str = "main";

fn enc_thread(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.async_execution_thread = parse_string(v)?;
    Ok(())
}

fn dec_thread(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    let t = std::mem::take(&mut c.inst.async_execution_thread);
    Ok((!t.is_empty() && t != MAIN_THREAD).then(|| print_string(&t)))
}

/// `{visualizing_index=1,stat-1=33,stat-2=44}`.
fn enc_statistics(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    let mut viz = x::StatisticsViz::default();
    for part in split_top(braced(v, "statistics")?, b',') {
        let p = part.trim();
        if p.is_empty() {
            continue;
        }
        let (key, value) = p
            .split_once('=')
            .ok_or_else(|| format!("expected `name=value` in the statistics, found `{p}`"))?;
        if key.trim() == "visualizing_index" {
            viz.stat_index_to_visualize = parse_int(value)?;
            continue;
        }
        let stat_val = value
            .trim()
            .parse()
            .map_err(|_| format!("expected a number, found `{}`", value.trim()))?;
        viz.statistics.push(x::Statistic {
            stat_name: key.trim().to_string(),
            stat_val,
        });
    }
    c.inst.statistics_viz = Some(viz);
    Ok(())
}

fn dec_statistics(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    // XLA's protos hold an empty one on every instruction, which it does not print.
    let Some(viz) = c
        .inst
        .statistics_viz
        .take()
        .filter(|v| !v.statistics.is_empty())
    else {
        return Ok(None);
    };
    let mut parts = vec![format!("visualizing_index={}", viz.stat_index_to_visualize)];
    parts.extend(
        viz.statistics
            .iter()
            .map(|s| format!("{}={}", s.stat_name, fmt_g(s.stat_val, 6))),
    );
    Ok(Some(format!("{{{}}}", parts.join(","))))
}

fn enc_sharding(v: &str, c: &mut Ctx<'_>) -> Result<(), String> {
    c.inst.sharding = Some(parse_sharding(v)?);
    Ok(())
}

fn dec_sharding(c: &mut Ctx<'_>) -> Result<Option<String>, String> {
    c.inst
        .sharding
        .take()
        .map(|s| print_sharding(&s))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx_run<R>(opcode: &str, operands: &[&str], f: impl FnOnce(&mut Ctx<'_>) -> R) -> R {
        let comp_ids: HashMap<String, i64> =
            [("add".to_string(), 0), ("mul".to_string(), 1)].into();
        let comp_names: HashMap<i64, String> =
            comp_ids.iter().map(|(k, v)| (*v, k.clone())).collect();
        let inst_ids: HashMap<String, i64> = [("a".to_string(), 5)].into();
        let inst_names: HashMap<i64, String> = [(5, "a".to_string())].into();
        let shapes: Vec<ShapeProto> = operands
            .iter()
            .map(|s| parse_shape_proto(s).unwrap())
            .collect();
        let mut inst = Inst {
            opcode: opcode.into(),
            ..Inst::default()
        };
        let mut ctx = Ctx {
            inst: &mut inst,
            comp_ids: &comp_ids,
            comp_names: &comp_names,
            inst_ids: &inst_ids,
            inst_names: &inst_names,
            operand_shapes: &shapes,
            called: Vec::new(),
        };
        f(&mut ctx)
    }

    /// Encodes `attrs` on an instruction, decodes it back, and returns what is printed.
    fn round(opcode: &str, operands: &[&str], attrs: &[(&str, &str)]) -> Vec<(String, String)> {
        ctx_run(opcode, operands, |ctx| {
            for (k, v) in attrs {
                encode(k, v, opcode, ctx).unwrap();
            }
            fill_defaults(opcode, ctx);
            let out = decode(opcode, ctx).unwrap();
            assert!(
                ctx.called.iter().all(Option::is_none),
                "{opcode}: callees left"
            );
            out
        })
    }

    fn same(opcode: &str, operands: &[&str], attrs: &[(&str, &str)]) {
        let out = round(opcode, operands, attrs);
        let want: Vec<(String, String)> = attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(out, want, "{opcode}");
    }

    #[test]
    fn every_codec_round_trips_in_xla_order() {
        let f = &["f32[2,2]", "f32[2,2]"];
        same("convolution", f, &[("window", "{size=3x3 stride=2x1 pad=1_1x0_-1 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=1x0}"), ("dim_labels", "bf01_oi01->bf01"), ("feature_group_count", "2"), ("batch_group_count", "3"), ("operand_precision", "{highest,default}")]);
        same(
            "dot",
            f,
            &[
                ("lhs_batch_dims", "{0}"),
                ("lhs_contracting_dims", "{1}"),
                ("rhs_batch_dims", "{0}"),
                ("rhs_contracting_dims", "{2}"),
                ("operand_precision", "{high,high}"),
                ("algorithm", "dot_bf16_bf16_f32"),
            ],
        );
        // An outer product contracts nothing, and XLA prints (and needs) its dimension
        // numbers all the same (PyTorch/XLA's bilinear interpolation writes one).
        same(
            "dot",
            f,
            &[
                ("lhs_contracting_dims", "{}"),
                ("rhs_contracting_dims", "{}"),
            ],
        );
        same(
            "gather",
            f,
            &[
                ("offset_dims", "{1}"),
                ("collapsed_slice_dims", "{}"),
                ("start_index_map", "{2}"),
                ("operand_batching_dims", "{0}"),
                ("start_indices_batching_dims", "{0}"),
                ("index_vector_dim", "2"),
                ("slice_sizes", "{1,2,1}"),
                ("indices_are_sorted", "true"),
            ],
        );
        same(
            "scatter",
            &["f32[2]", "s32[1]", "f32[1]"],
            &[
                ("update_window_dims", "{}"),
                ("inserted_window_dims", "{0}"),
                ("scatter_dims_to_operand_dims", "{0}"),
                ("input_batching_dims", "{1}"),
                ("scatter_indices_batching_dims", "{0}"),
                ("index_vector_dim", "1"),
                ("indices_are_sorted", "true"),
                ("unique_indices", "true"),
                ("to_apply", "add"),
            ],
        );
        same(
            "custom-call",
            &["f32[2]"],
            &[
                ("window", "{size=1x1}"),
                ("dim_labels", "bf_io->bf"),
                ("feature_group_count", "2"),
                ("operand_precision", "{high}"),
                ("padding_type", "PADDING_SAME"),
                ("custom_call_target", "\"conv\""),
                (
                    "operand_layout_constraints",
                    "{f32[2,2]{1,0}, f32[2,2]{0,1}}",
                ),
                ("custom_call_has_side_effect", "true"),
                ("literal", "f32[2]{0} {1, 2}"),
                ("output_to_operand_aliasing", "{{}: (1, {}), {1}: (0, {2})}"),
                ("schedule", "SCHEDULE_EARLIEST"),
                ("api_version", "API_VERSION_TYPED_FFI"),
                ("called_computations", "{add, mul}"),
                ("backend_config", "{x = 1}"),
            ],
        );
        same(
            "all-gather",
            &["f32[2]"],
            &[
                ("channel_id", "1"),
                ("replica_groups", "{{0,1},{2,3}}"),
                ("constrain_layout", "true"),
                ("dimensions", "{0}"),
                ("use_global_device_ids", "true"),
            ],
        );
        same(
            "all-reduce",
            &["f32[2]"],
            &[
                ("replica_groups", "[2,2]<=[2,2]T(1,0)"),
                ("to_apply", "add"),
            ],
        );
        same(
            "all-reduce",
            &["f32[2]"],
            &[("replica_groups", "{}"), ("to_apply", "add")],
        );
        same(
            "collective-permute",
            &["f32[2]"],
            &[
                ("channel_id", "2"),
                ("source_target_pairs", "{{0,1},{1,0}}"),
            ],
        );
        same(
            "compare",
            &["f32[]", "f32[]"],
            &[("direction", "LT"), ("type", "TOTALORDER")],
        );
        same("compare", &["s32[]", "s32[]"], &[("direction", "EQ")]);
        same(
            "compare",
            &["pred[]", "pred[]"],
            &[("direction", "NE"), ("type", "SIGNED")],
        );
        same("slice", f, &[("slice", "{[0:3:1], [1:4:2]}")]);
        same("slice", f, &[("slice", "{[0:3], [1:4]}")]);
        same("pad", f, &[("padding", "0_0_0x1_-1_2")]);
        same("pad", f, &[("padding", "1_2x0_0")]);
        same("fft", f, &[("fft_type", "FFT"), ("fft_length", "{4}")]);
        same("rng", f, &[("distribution", "rng_normal")]);
        same("rng-bit-generator", f, &[("algorithm", "rng_philox")]);
        same("topk", f, &[("k", "3"), ("largest", "false")]);
        same(
            "sort",
            f,
            &[
                ("dimensions", "{0}"),
                ("is_stable", "true"),
                ("to_apply", "add"),
            ],
        );
        same(
            "triangular-solve",
            f,
            &[
                ("left_side", "true"),
                ("lower", "true"),
                ("unit_diagonal", "true"),
                ("transpose_a", "ADJOINT"),
            ],
        );
        same("cholesky", f, &[("lower", "true")]);
        same(
            "batch-norm-training",
            f,
            &[("epsilon", "0.001"), ("feature_index", "1")],
        );
        same(
            "reduce-precision",
            f,
            &[("exponent_bits", "5"), ("mantissa_bits", "10")],
        );
        same("fusion", f, &[("kind", "kLoop"), ("calls", "mul")]);
        same("while", f, &[("condition", "mul"), ("body", "add")]);
        same(
            "select-and-scatter",
            f,
            &[
                ("window", "{size=2 stride=2}"),
                ("select", "add"),
                ("scatter", "mul"),
            ],
        );
        same(
            "conditional",
            &["pred[]"],
            &[("true_computation", "add"), ("false_computation", "mul")],
        );
        same(
            "conditional",
            &["s32[]"],
            &[("branch_computations", "{add, mul}")],
        );
        same("call", f, &[("to_apply", "add"), ("is_composite", "true")]);
        same("iota", &[], &[("iota_dimension", "1")]);
        same("reshape", f, &[("inferred_dimension", "0")]);
        same("get-tuple-element", f, &[("index", "0")]);
        same(
            "parameter",
            &[],
            &[
                ("parameter_replication", "{true,false}"),
                (
                    "sharding",
                    "{{maximal device=0}, {devices=[2,1]0,1 metadata={op_name=\"x\"}}}",
                ),
            ],
        );
        same(
            "copy",
            f,
            &[(
                "sharding",
                "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
            )],
        );
        same(
            "copy",
            f,
            &[(
                "sharding",
                "{devices=[1,1,2,2]<=[4] last_tile_dims={manual, replicated}}",
            )],
        );
        same("copy", f, &[("sharding", "{replicated}")]);
        same(
            "copy",
            f,
            &[(
                "sharding",
                "{manual metadata={{op_name=\"a\"}, {op_name=\"b\"}}}",
            )],
        );
        same("copy", f, &[("sharding", "{devices=[2]0,1 shard_like 3}")]);
        same("negate", f, &[("sharding", "{replicated}"), ("frontend_attributes", "{_xla_x=\"1\",b={x = #y<\"d\">}}"), ("control-predecessors", "{a}"), ("metadata", "{op_type=\"Neg\" op_name=\"n\\\"q\" source_file=\"x.py\" source_line=3 source_end_line=4 source_column=5 source_end_column=6 profile_type={1,2} deduplicated_name=\"d\" scheduling_name=\"s\" stack_frame_id=7}"), ("backend_config", "\"opaque \\\"q\\\"\"")]);
    }

    #[test]
    fn defaults_are_those_xla_sets_and_are_not_printed() {
        ctx_run("dot", &["f32[2]", "f32[2]"], |ctx| {
            fill_defaults("dot", ctx);
            assert_eq!(
                ctx.inst
                    .precision_config
                    .as_ref()
                    .unwrap()
                    .operand_precision,
                [0, 0]
            );
        });
        ctx_run("custom-call", &["f32[2]"], |ctx| {
            fill_defaults("custom-call", ctx);
            assert_eq!(
                (
                    ctx.inst.feature_group_count,
                    ctx.inst.batch_group_count,
                    ctx.inst.custom_call_api_version
                ),
                (1, 1, 1)
            );
            assert_eq!(
                decode("custom-call", ctx).unwrap(),
                [("custom_call_target".to_string(), "\"\"".to_string())]
            );
        });
        ctx_run("compare", &["u8[2]", "u8[2]"], |ctx| {
            encode("direction", "GE", "compare", ctx).unwrap();
            fill_defaults("compare", ctx);
            assert_eq!(ctx.inst.comparison_type, "UNSIGNED");
        });
    }

    #[test]
    fn bad_attributes_say_what_and_why() {
        let f = &["f32[2,2]", "f32[2,2]"];
        for (opcode, key, value, want) in [
            ("add", "bogus", "1", "attribute `bogus` is not mapped"),
            (
                "add",
                "dimensions",
                "{0}",
                "does not belong to opcode `add`",
            ),
            (
                "convolution",
                "window",
                "{size=3x3 stride=2}",
                "malformed window `{size=3x3 stride=2}`: `stride` has 1 dimensions, not 2",
            ),
            (
                "convolution",
                "window",
                "{size=3 pad=1}",
                "a pad is `low_high`",
            ),
            (
                "convolution",
                "window",
                "{size=3 foo=1}",
                "unknown field `foo`",
            ),
            ("convolution", "window", "{stride=2}", "no `size`"),
            (
                "convolution",
                "dim_labels",
                "bf01_oi01bf01",
                "malformed dim_labels",
            ),
            (
                "convolution",
                "dim_labels",
                "bf0_oi01->bf01",
                "different numbers of spatial",
            ),
            ("compare", "direction", "XX", "unknown comparison direction"),
            (
                "fft",
                "fft_type",
                "FOO",
                "`FOO` is none of FFT, IFFT, RFFT, IRFFT",
            ),
            ("call", "to_apply", "nope", "no computation `nope`"),
            (
                "negate",
                "control-predecessors",
                "{zz}",
                "no instruction `zz`",
            ),
            (
                "negate",
                "metadata",
                "{op_nme=\"x\"}",
                "metadata field `op_nme`",
            ),
            (
                "negate",
                "sharding",
                "{bogus}",
                "unknown sharding item `bogus`",
            ),
            (
                "pad",
                "padding",
                "1_2_3_4",
                "padding is `low_high[_interior]`",
            ),
        ] {
            let e = ctx_run(opcode, f, |ctx| encode(key, value, opcode, ctx)).unwrap_err();
            assert!(e.contains(want), "{key}={value}: {e}");
        }
    }

    #[test]
    fn unknown_enum_values_are_named() {
        ctx_run("fft", &[], |ctx| {
            ctx.inst.fft_type = 9;
            let e = decode("fft", ctx).unwrap_err();
            assert!(
                e.contains("fft_type") && e.contains("unknown enum value 9"),
                "{e}"
            );
        });
    }
}

//! Operator classes for the min-cut partitioner: which ops are cheap to recompute in the
//! backward, which are views, which draw random numbers, which are compute-intensive.
//!
//! The lists are written out by op name (`namespace.name`, the overload packet) after
//! functorch's `get_default_op_list`. As functorch does, every op libtorch tags `pointwise`
//! is recomputable and fusible, and every op it tags `nondeterministic_seeded` is random
//! (never recomputed): those come from libtorch's tags ([`graphbug_ir::op_tags`]), not a
//! list here. Every op of the reference joints in `tests/fixtures` is in a class
//! ([`OTHER`] holds those deliberately left out of the recomputable set).

use std::collections::HashSet;

use rustc_hash::FxHashMap;

use graphbug_ir::{Node, NodeKind, OpName};

/// Which family of op classes to use, as functorch's `compiler=` argument chooses them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OpClasses {
    /// functorch's base ("nvfuser") sets: pointwise ops, a few reductions and casts, and
    /// `squeeze` / `unsqueeze` / `alias` / `detach` as views.
    Base,
    /// The sets for a decomposing, fusing backend (functorch's `compiler="inductor"`, its
    /// default): also views and reshapes, factories, clones, indexing, variance; the
    /// `max_dist_from_bw` ban applies.
    #[default]
    Inductor,
}

/// functorch's base recomputable ops (besides the pointwise ones and the views).
pub const BASE_RECOMPUTABLE: &[&str] = &[
    "aten.add",
    "aten.sub",
    "aten.div",
    "aten.atan2",
    "aten.mul",
    "aten.max",
    "aten.min",
    "aten.pow",
    "aten.remainder",
    "aten.fmod",
    "aten.__and__",
    "aten.__or__",
    "aten.__xor__",
    "aten.__lshift__",
    "aten.__rshift__",
    "aten.eq",
    "aten.ne",
    "aten.ge",
    "aten.gt",
    "aten.le",
    "aten.lt",
    "aten.abs",
    "aten.bitwise_not",
    "aten.ceil",
    "aten.floor",
    "aten.frac",
    "aten.neg",
    "aten.relu",
    "aten.round",
    "aten.silu",
    "aten.trunc",
    "aten.log",
    "aten.log10",
    "aten.log1p",
    "aten.log2",
    "aten.lgamma",
    "aten.exp",
    "aten.expm1",
    "aten.erf",
    "aten.erfc",
    "aten.cos",
    "aten.acos",
    "aten.cosh",
    "aten.sin",
    "aten.asin",
    "aten.sinh",
    "aten.tan",
    "aten.atan",
    "aten.tanh",
    "aten.atanh",
    "aten.sqrt",
    "aten.rsqrt",
    "aten.reciprocal",
    "aten.sigmoid",
    "aten.softplus",
    "aten.threshold",
    "aten.threshold_backward",
    "aten.clamp",
    "aten.where",
    "aten.lerp",
    "aten.addcmul",
    "aten.gelu",
    "aten.gelu_backward",
    "aten.sum",
    "aten.mean",
    "aten._grad_sum_to_size",
    "aten.sum_to_size",
    "aten.amax",
    "aten.to",
    "aten.type_as",
    "aten.rsub",
    "aten._to_copy",
    "aten.zeros_like",
];

/// Views in the base sets: free to recompute, never banned.
///
/// functorch lists `squeeze`, `unsqueeze` and `alias`; `detach` and `lift_fresh` are aliases
/// too (AOTAutograd's joints put a `detach` after every value a backward formula reads).
pub const BASE_VIEWS: &[&str] = &[
    "aten.squeeze",
    "aten.unsqueeze",
    "aten.alias",
    "aten.detach",
    "aten.lift_fresh",
];

/// Views added by [`OpClasses::Inductor`]. functorch's list plus `transpose`,
/// `split_with_sizes` and `unbind`, which are views of the same kind.
pub const INDUCTOR_VIEWS: &[&str] = &[
    "aten.view",
    "aten.slice",
    "aten.t",
    "prims.broadcast_in_dim",
    "aten.expand",
    "aten.as_strided",
    "aten.permute",
    "aten.select",
    "aten.split",
    "aten.transpose",
    "aten.split_with_sizes",
    "aten.unbind",
];

/// Recomputable ops added by [`OpClasses::Inductor`] (functorch's list, plus `tril` and
/// `ones_like` beside `triu` and `zeros_like`).
pub const INDUCTOR_RECOMPUTABLE: &[&str] = &[
    "prims.div",
    "prims.convert_element_type",
    "aten.clone",
    "aten._to_copy",
    "aten.full_like",
    "prims.var",
    "prims.sum",
    "aten.var",
    "aten.std",
    "prims.broadcast_in_dim",
    "aten.select",
    "aten._unsafe_view",
    "aten.view",
    "aten.expand",
    "aten.slice",
    "aten.reshape",
    "aten.broadcast_tensors",
    "aten.scalar_tensor",
    "aten.ones",
    "aten.new_zeros",
    "aten.lift_fresh_copy",
    "aten.arange",
    "aten.triu",
    "aten.tril",
    "aten.var_mean",
    "aten.isinf",
    "aten.any",
    "aten.full",
    "aten.as_strided",
    "aten.zeros",
    "aten.empty",
    "aten.empty_like",
    "aten.ones_like",
    "aten.argmax",
    "aten.maximum",
    "prims.iota",
    "prims._low_memory_max_pool_offsets_to_indices",
    "aten.index",
    "aten.gather",
];

/// Ops too expensive to recompute: matrix products, convolutions, attention, normalizations,
/// softmax, upsampling.
pub const COMPUTE_INTENSIVE: &[&str] = &[
    "aten.mm",
    "aten.bmm",
    "aten.addmm",
    "aten.baddbmm",
    "aten.addbmm",
    "aten.matmul",
    "aten._scaled_mm",
    "aten.convolution",
    "aten.convolution_backward",
    "aten._convolution",
    "aten._scaled_dot_product_flash_attention",
    "aten._scaled_dot_product_flash_attention_backward",
    "aten._scaled_dot_product_flash_attention_for_cpu",
    "aten._scaled_dot_product_flash_attention_for_cpu_backward",
    "aten._scaled_dot_product_efficient_attention",
    "aten._scaled_dot_product_efficient_attention_backward",
    "aten._scaled_dot_product_cudnn_attention",
    "aten._scaled_dot_product_cudnn_attention_backward",
    "aten._flash_attention_forward",
    "aten._efficient_attention_forward",
    "aten.native_layer_norm",
    "aten.native_layer_norm_backward",
    "aten.native_batch_norm",
    "aten.native_batch_norm_backward",
    "aten._native_batch_norm_legit",
    "aten._native_batch_norm_legit_functional",
    "aten._native_batch_norm_legit_no_training",
    "aten._softmax",
    "aten._softmax_backward_data",
    "aten._log_softmax",
    "aten._log_softmax_backward_data",
    "aten.upsample_bilinear2d",
    "aten.upsample_bilinear2d_backward",
    "aten.upsample_nearest2d",
    "aten.upsample_nearest2d_backward",
];

/// Known ops deliberately in no class above: not cheap enough to recompute for free, not
/// expensive enough to ban outright when the allowlist is off (pooling, embedding, scatters
/// and other backward kernels, concatenation, sorting, scans).
pub const OTHER: &[&str] = &[
    "aten.max_pool2d_with_indices",
    "aten.max_pool2d_with_indices_backward",
    "aten.avg_pool2d",
    "aten.avg_pool2d_backward",
    "aten.embedding",
    "aten.embedding_dense_backward",
    "aten.slice_backward",
    "aten.select_backward",
    "aten.slice_scatter",
    "aten.select_scatter",
    "aten.index_put",
    "aten.scatter",
    "aten.scatter_add",
    "aten.cat",
    "aten.stack",
    "aten.sort",
    "aten.topk",
    "aten.cumsum",
    "aten.copy",
];

/// `cat` can absorb its producers ("memory fusion") though it cannot feed a fusion itself.
const CAT: &str = "aten.cat";

/// `lift_fresh` / `lift_fresh_copy` are never banned from recomputation.
const LIFT_FRESH: &[&str] = &["aten.lift_fresh", "aten.lift_fresh_copy"];

/// Class bits of one op.
pub mod class {
    /// Cheap to recompute.
    pub const RECOMPUTABLE: u8 = 1;
    /// Draws random numbers.
    pub const RANDOM: u8 = 2;
    /// Too expensive to recompute.
    pub const COMPUTE_INTENSIVE: u8 = 4;
    /// A view (or alias) of its input.
    pub const VIEW: u8 = 8;
    /// Explicitly banned from recomputation by the caller.
    pub const BANNED: u8 = 16;
    /// `cat`: fusible as a consumer.
    pub const CAT: u8 = 32;
    /// `lift_fresh(_copy)`: never banned.
    pub const LIFT_FRESH: u8 = 64;
    /// Recomputable or random: can take part in a fusion.
    pub const FUSIBLE: u8 = 128;
}

/// `aten.gelu`, `gelu`, `aten::gelu`, `aten.gelu.default`, `torch.ops.aten.gelu.default`
/// → `aten.gelu` (namespace and overload packet; `aten` when no namespace is given).
pub fn normalize_op_name(text: &str) -> String {
    let t = text.trim();
    let t = t.strip_prefix("torch.ops.").unwrap_or(t);
    let (ns, rest) = match t.split_once("::") {
        Some((ns, rest)) => (ns, rest),
        None => match t.split_once('.') {
            Some((ns, rest)) if matches!(ns, "aten" | "prims" | "_c10d_functional") => (ns, rest),
            _ => ("aten", t),
        },
    };
    let name = rest.split_once('.').map_or(rest, |(name, _)| name);
    format!("{ns}.{name}")
}

/// The op classes of a partitioning run, looked up by namespace and op name.
#[derive(Clone, Debug, Default)]
pub struct OpTypes {
    by_namespace: FxHashMap<String, FxHashMap<String, u8>>,
}

impl OpTypes {
    /// The classes of `family`, with the recomputable set replaced by `recomputable` when
    /// given and `banned` ops banned (names as [`normalize_op_name`] accepts them).
    pub fn new(family: OpClasses, recomputable: Option<&[String]>, banned: &[String]) -> Self {
        let mut t = OpTypes::default();
        let mut views: Vec<&str> = BASE_VIEWS.to_vec();
        let mut recomp: Vec<&str> = BASE_RECOMPUTABLE.to_vec();
        recomp.extend(graphbug_ir::op_tags::POINTWISE);
        if family == OpClasses::Inductor {
            views.extend(INDUCTOR_VIEWS);
            recomp.extend(INDUCTOR_RECOMPUTABLE);
        }
        recomp.extend(&views);
        for v in &views {
            t.add(v, class::VIEW);
        }
        match recomputable {
            Some(list) => {
                for op in list {
                    t.add(&normalize_op_name(op), class::RECOMPUTABLE | class::FUSIBLE);
                }
            }
            None => {
                for op in &recomp {
                    t.add(op, class::RECOMPUTABLE | class::FUSIBLE);
                }
            }
        }
        for op in graphbug_ir::op_tags::NONDETERMINISTIC_SEEDED {
            t.add(op, class::RANDOM | class::FUSIBLE);
        }
        for op in COMPUTE_INTENSIVE {
            t.add(op, class::COMPUTE_INTENSIVE);
        }
        t.add(CAT, class::CAT);
        for op in LIFT_FRESH {
            t.add(op, class::LIFT_FRESH);
        }
        for op in banned {
            t.add(&normalize_op_name(op), class::BANNED);
        }
        t
    }

    fn add(&mut self, qualified: &str, bits: u8) {
        let (ns, name) = qualified.split_once('.').unwrap_or(("aten", qualified));
        *self
            .by_namespace
            .entry(ns.to_string())
            .or_default()
            .entry(name.to_string())
            .or_default() |= bits;
    }

    /// The class bits of an op (see [`class`]).
    pub fn of_op(&self, op: &OpName) -> u8 {
        self.by_namespace
            .get(op.namespace.as_str())
            .and_then(|m| m.get(op.name.as_str()))
            .copied()
            .unwrap_or(0)
    }

    /// The class bits of a node: its op's, recomputable and fusible for getitems, none for
    /// placeholders and constants.
    pub fn of_node(&self, node: &Node) -> u8 {
        match &node.kind {
            NodeKind::Call { op, .. } => self.of_op(op),
            NodeKind::GetItem { .. } => class::RECOMPUTABLE | class::FUSIBLE,
            NodeKind::Placeholder | NodeKind::GetAttr { .. } => 0,
        }
    }

    /// True when `op` (any spelling [`normalize_op_name`] accepts) is in a class.
    pub fn has(&self, op: &str, bits: u8) -> bool {
        let q = normalize_op_name(op);
        let (ns, name) = q.split_once('.').unwrap_or(("aten", &q));
        self.by_namespace
            .get(ns)
            .and_then(|m| m.get(name))
            .is_some_and(|b| b & bits != 0)
    }
}

/// Every op name the lists of this module know, for checks that a graph's ops are covered.
pub fn known_ops() -> HashSet<&'static str> {
    [
        BASE_RECOMPUTABLE,
        graphbug_ir::op_tags::POINTWISE,
        BASE_VIEWS,
        INDUCTOR_VIEWS,
        INDUCTOR_RECOMPUTABLE,
        graphbug_ir::op_tags::NONDETERMINISTIC_SEEDED,
        COMPUTE_INTENSIVE,
        OTHER,
        LIFT_FRESH,
    ]
    .concat()
    .into_iter()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalize() {
        for s in [
            "gelu",
            "aten.gelu",
            "aten::gelu",
            "aten.gelu.default",
            "torch.ops.aten.gelu.default",
        ] {
            assert_eq!(normalize_op_name(s), "aten.gelu", "{s}");
        }
        assert_eq!(normalize_op_name("prims.iota.default"), "prims.iota");
        assert_eq!(normalize_op_name("add.Tensor"), "aten.add");
    }

    #[test]
    fn classes() {
        let d = OpTypes::new(OpClasses::Base, None, &[]);
        let i = OpTypes::new(OpClasses::Inductor, None, &[]);
        let op = |s: &str| OpName::parse(s).unwrap();
        assert!(d.of_op(&op("aten.relu.default")) & class::RECOMPUTABLE != 0);
        assert!(d.of_op(&op("aten.view.default")) & class::RECOMPUTABLE == 0);
        assert!(i.of_op(&op("aten.view.default")) & class::VIEW != 0);
        assert!(i.of_op(&op("aten.mm.default")) & class::COMPUTE_INTENSIVE != 0);
        assert!(i.of_op(&op("aten.mm.default")) & class::FUSIBLE == 0);
        let r = i.of_op(&op("aten.native_dropout.default"));
        assert!(r & class::RANDOM != 0 && r & class::FUSIBLE != 0 && r & class::RECOMPUTABLE == 0);
        let custom = OpTypes::new(OpClasses::Base, Some(&["exp".into()]), &["relu".into()]);
        assert!(custom.has("aten.exp", class::RECOMPUTABLE));
        assert!(!custom.has("aten.relu", class::RECOMPUTABLE));
        assert!(custom.has("relu", class::BANNED));
    }
}

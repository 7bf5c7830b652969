//! A static cost model for the nodes of an aten graph: FLOPs, bytes moved and a roofline
//! runtime estimate, from the shapes in the node metas alone (no libtorch, no profiling).
//!
//! This plays the part of `estimate_runtime` in AOTAutograd's memory-budget partitioner:
//! the knapsack that decides which activations to save needs a price for recomputing
//! each candidate. The counting rules:
//!
//! - Matrix products (`mm`, `addmm`, `bmm`, `baddbmm`, `addbmm`, `matmul`, `mv`, `addmv`,
//!   `dot`, `linear`) count `2·m·n·k` per (broadcast) batch; bias additions are not
//!   counted. Convolutions count `2·N·prod(weight)·prod(spatial)`, where `spatial` is the
//!   output's spatial size (the input's for transposed convolutions); groups are accounted
//!   for by the weight shape `[C_out, C_in/groups, k…]`. `convolution_backward` counts one
//!   such product for each of grad_input and grad_weight its `output_mask` asks for, plus
//!   `numel(grad_output)` for grad_bias. Attention (`scaled_dot_product_attention`,
//!   `_scaled_dot_product_*_attention`) counts its two batched products,
//!   `2·B·Sq·Sk·(Dqk + Dv)`, and its backward twice that. These follow
//!   `torch.utils.flop_counter`, so numbers are comparable with PyTorch's.
//! - Normalizations and softmax count operations per element `N` of the input: layer/group
//!   norm `6N` (+`N` for a weight, +`N` for a bias), batch norm the same in training and `2N`
//!   in eval; their backwards `9N` (+`N` with a weight) for grad_input, `2N` for grad_weight
//!   and `N` for grad_bias, as the output mask asks; `_softmax` / `_log_softmax` `5N`, their
//!   backwards `4N`; `embedding_dense_backward` one add per element of grad_output; max and
//!   average pooling one operation per output element per kernel element.
//! - Views, getitems, placeholders and constants cost nothing. Pure data movement (`clone`,
//!   `cat`, `embedding`, `index`, `_to_copy`, …) and factories (`zeros`, `full`, …) have no
//!   FLOPs but do move bytes.
//! - Every other call (pointwise ops, reductions) counts one operation per element: the
//!   larger of its largest tensor input and its outputs.
//!
//! Unknown metas count as 0; sizes saturate instead of overflowing; nothing here panics.

use graphbug_ir::{Graph, Meta, Node, NodeId, NodeKind, OpName, TensorMeta, Value};
use serde::{Deserialize, Serialize};

/// FLOPs of node `id` (0 for views, getitems, placeholders, constants and unknown metas).
pub fn node_flops(graph: &Graph, id: NodeId) -> u64 {
    match Call::new(graph, id) {
        Some(call) if !is_view(call.op) && !is_data_movement(call.op) => call.flops(),
        _ => 0,
    }
}

/// Bytes read plus bytes written by node `id`: its distinct tensor inputs and its outputs.
pub fn node_bytes_moved(graph: &Graph, id: NodeId) -> u64 {
    let Some(call) = Call::new(graph, id) else {
        return 0;
    };
    if is_view(call.op) {
        return 0;
    }
    let read = call
        .node
        .inputs()
        .into_iter()
        .filter_map(|input| graph.nodes.get(input.index()))
        .fold(0u64, |acc, n| acc.saturating_add(meta_bytes(&n.meta)));
    read.saturating_add(meta_bytes(&call.node.meta))
}

/// A roofline machine model turning FLOPs and bytes into seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    /// Peak arithmetic throughput, FLOP/s.
    pub peak_flops: f64,
    /// Memory bandwidth, bytes/s.
    pub bandwidth: f64,
    /// Fixed cost of launching one (non-view) kernel, seconds.
    pub launch_overhead: f64,
}

impl Default for CostModel {
    /// A nominal datacenter GPU: 100 TFLOP/s, 2 TB/s, 5 µs per kernel launch.
    fn default() -> Self {
        CostModel {
            peak_flops: 100e12,
            bandwidth: 2e12,
            launch_overhead: 5e-6,
        }
    }
}

impl CostModel {
    /// Estimated seconds for node `id`: `max(flops/peak, bytes/bandwidth) + launch_overhead`
    /// for a non-view call, 0 for views and non-call nodes. A rate that is not a positive
    /// finite number drops its term, so the result is always finite for finite fields.
    pub fn estimate_runtime(&self, graph: &Graph, id: NodeId) -> f64 {
        match Call::new(graph, id) {
            Some(call) if !is_view(call.op) => {
                let compute = ratio(node_flops(graph, id), self.peak_flops);
                let memory = ratio(node_bytes_moved(graph, id), self.bandwidth);
                let overhead = if self.launch_overhead.is_finite() {
                    self.launch_overhead.max(0.0)
                } else {
                    0.0
                };
                compute.max(memory) + overhead
            }
            _ => 0.0,
        }
    }
}

fn ratio(amount: u64, rate: f64) -> f64 {
    if rate.is_finite() && rate > 0.0 {
        amount as f64 / rate
    } else {
        0.0
    }
}

/// Number of elements of a shape, saturating; a negative size counts as 0.
fn numel(shape: &[i64]) -> u64 {
    shape.iter().fold(1u64, |acc, &d| {
        acc.saturating_mul(u64::try_from(d).unwrap_or(0))
    })
}

fn tensor_bytes(t: &TensorMeta) -> u64 {
    numel(&t.shape).saturating_mul(t.dtype.itemsize() as u64)
}

fn meta_bytes(meta: &Meta) -> u64 {
    match meta {
        Meta::Tensor(t) => tensor_bytes(t),
        Meta::Multi(items) => items
            .iter()
            .flatten()
            .fold(0u64, |acc, t| acc.saturating_add(tensor_bytes(t))),
        // The min-cut runs on a copy of a dynamic joint sized at its hints; only the
        // recompute figures of a dynamic default partition see symbolic sizes here, and
        // count them as nothing. A size is no tensor.
        Meta::Unknown | Meta::SymTensor(_) | Meta::Sym(_) => 0,
    }
}

fn meta_numel(meta: &Meta) -> u64 {
    match meta {
        Meta::Tensor(t) => numel(&t.shape),
        Meta::Multi(items) => items
            .iter()
            .flatten()
            .fold(0u64, |acc, t| acc.saturating_add(numel(&t.shape))),
        // The min-cut runs on a copy of a dynamic joint sized at its hints; only the
        // recompute figures of a dynamic default partition see symbolic sizes here, and
        // count them as nothing. A size is no tensor.
        Meta::Unknown | Meta::SymTensor(_) | Meta::Sym(_) => 0,
    }
}

/// Saturating product of counts.
fn mul(factors: &[u64]) -> u64 {
    factors.iter().fold(1u64, |acc, &f| acc.saturating_mul(f))
}

fn dim(d: i64) -> u64 {
    u64::try_from(d).unwrap_or(0)
}

/// The op name without an in-place `_` suffix, for classification.
fn base_name(op: &OpName) -> &str {
    let n = op.name.as_str();
    if n.starts_with("__") {
        n
    } else {
        n.strip_suffix('_').unwrap_or(n)
    }
}

/// Ops whose output aliases their input: no kernel, no FLOPs, no bytes.
fn is_view(op: &OpName) -> bool {
    matches!(
        base_name(op),
        "view"
            | "_unsafe_view"
            | "reshape"
            | "_reshape_alias"
            | "view_as"
            | "t"
            | "transpose"
            | "permute"
            | "expand"
            | "expand_as"
            | "slice"
            | "select"
            | "squeeze"
            | "unsqueeze"
            | "split"
            | "split_with_sizes"
            | "unsafe_split"
            | "unsafe_split_with_sizes"
            | "unbind"
            | "chunk"
            | "tensor_split"
            | "narrow"
            | "alias"
            | "detach"
            | "lift_fresh"
            | "as_strided"
            | "diagonal"
            | "unfold"
            | "movedim"
            | "moveaxis"
            | "swapaxes"
            | "swapdims"
            | "numpy_T"
            | "mT"
            | "real"
            | "imag"
            | "view_as_real"
            | "view_as_complex"
            | "flatten"
            | "unflatten"
    )
}

/// Ops that copy or create data without arithmetic: bytes, but no FLOPs.
fn is_data_movement(op: &OpName) -> bool {
    matches!(
        base_name(op),
        "clone"
            | "copy"
            | "_to_copy"
            | "to"
            | "contiguous"
            | "lift_fresh_copy"
            | "cat"
            | "stack"
            | "index"
            | "_unsafe_index"
            | "index_select"
            | "gather"
            | "embedding"
            | "constant_pad_nd"
            | "slice_backward"
            | "select_backward"
            | "diagonal_backward"
            | "slice_scatter"
            | "select_scatter"
            | "diagonal_scatter"
            | "as_strided_scatter"
            | "repeat"
            | "roll"
            | "flip"
            | "empty"
            | "empty_like"
            | "empty_strided"
            | "new_empty"
            | "new_empty_strided"
            | "zeros"
            | "zeros_like"
            | "new_zeros"
            | "ones"
            | "ones_like"
            | "new_ones"
            | "full"
            | "full_like"
            | "new_full"
            | "fill"
            | "zero"
            | "scalar_tensor"
            | "arange"
            | "eye"
    )
}

/// A call node with helpers reading its arguments by aten schema position or name.
struct Call<'a> {
    graph: &'a Graph,
    node: &'a Node,
    op: &'a OpName,
    args: &'a [Value],
    kwargs: &'a [(String, Value)],
}

impl<'a> Call<'a> {
    fn new(graph: &'a Graph, id: NodeId) -> Option<Call<'a>> {
        let node = graph.nodes.get(id.index())?;
        match &node.kind {
            NodeKind::Call { op, args, kwargs } => Some(Call {
                graph,
                node,
                op,
                args,
                kwargs,
            }),
            _ => None,
        }
    }

    fn arg(&self, pos: usize, name: &str) -> Option<&'a Value> {
        self.args
            .get(pos)
            .or_else(|| self.kwargs.iter().find(|(k, _)| k == name).map(|(_, v)| v))
    }

    fn tensor(&self, pos: usize, name: &str) -> Option<&'a TensorMeta> {
        match self.arg(pos, name)? {
            Value::Node(id) => self.graph.nodes.get(id.index())?.meta.tensor(),
            _ => None,
        }
    }

    fn shape(&self, pos: usize, name: &str) -> Option<&'a [i64]> {
        self.tensor(pos, name).map(|t| t.shape.as_slice())
    }

    /// Numel of a tensor argument, 0 when unknown.
    fn numel_of(&self, pos: usize, name: &str) -> u64 {
        self.shape(pos, name).map(numel).unwrap_or(0)
    }

    /// True when the argument is given and is not `None`.
    fn present(&self, pos: usize, name: &str) -> bool {
        !matches!(self.arg(pos, name), None | Some(Value::None))
    }

    fn bool_arg(&self, pos: usize, name: &str, default: bool) -> bool {
        match self.arg(pos, name) {
            Some(Value::Bool(b)) => *b,
            Some(Value::Int(i)) => *i != 0,
            _ => default,
        }
    }

    fn int_list(&self, pos: usize, name: &str) -> Option<Vec<i64>> {
        match self.arg(pos, name)? {
            Value::List(items) | Value::Tuple(items) => items
                .iter()
                .map(|v| match v {
                    Value::Int(i) => Some(*i),
                    _ => None,
                })
                .collect(),
            Value::Int(i) => Some(vec![*i]),
            _ => None,
        }
    }

    /// An `output_mask: bool[3]` argument; all true when absent or malformed.
    fn mask(&self, pos: usize, name: &str) -> [bool; 3] {
        let mut out = [true; 3];
        if let Some(Value::List(items) | Value::Tuple(items)) = self.arg(pos, name) {
            for (slot, v) in out.iter_mut().zip(items) {
                if let Value::Bool(b) = v {
                    *slot = *b;
                }
            }
        }
        out
    }

    /// Shape of the (first) output.
    fn out_shape(&self) -> Option<&'a [i64]> {
        let meta = &self.node.meta;
        meta.tensor()
            .or_else(|| meta.item(0))
            .map(|t| t.shape.as_slice())
    }

    fn flops(&self) -> u64 {
        let name = self.op.name.as_str();
        match name {
            "mm" | "bmm" | "matmul" | "dot" | "vdot" | "mv" => {
                self.matmul(0, "self", 1, if name == "mv" { "vec" } else { "mat2" })
            }
            "addmm" | "baddbmm" | "addbmm" => self.matmul(1, "mat1", 2, "mat2"),
            "addmv" => self.matmul(1, "mat", 2, "vec"),
            "linear" => self.linear(),
            "convolution" | "_convolution" | "cudnn_convolution" | "mkldnn_convolution" => {
                let transposed = matches!(name, "convolution" | "_convolution")
                    && self.bool_arg(6, "transposed", false);
                self.convolution(transposed)
            }
            "conv1d" | "conv2d" | "conv3d" => self.convolution(false),
            "conv_transpose1d" | "conv_transpose2d" | "conv_transpose3d" => self.convolution(true),
            "convolution_backward" => self.convolution_backward(),
            "native_layer_norm" => self.norm_forward(true, 2, 3),
            "native_group_norm" => self.norm_forward(true, 1, 2),
            "native_layer_norm_backward" => self.norm_backward(5, 7),
            "native_group_norm_backward" => self.norm_backward(4, 9),
            "native_batch_norm"
            | "_native_batch_norm_legit"
            | "_native_batch_norm_legit_functional"
            | "_native_batch_norm_legit_no_training"
            | "batch_norm"
            | "cudnn_batch_norm"
            | "miopen_batch_norm"
            | "_batch_norm_with_update"
            | "_batch_norm_with_update_functional"
            | "_batch_norm_no_update" => {
                let training = match name {
                    "_native_batch_norm_legit_no_training" | "_batch_norm_no_update" => false,
                    "_batch_norm_with_update" | "_batch_norm_with_update_functional" => true,
                    _ if self.op.overload == "no_stats" => self.bool_arg(3, "training", true),
                    _ => self.bool_arg(5, "training", true),
                };
                self.norm_forward(training, 1, 2)
            }
            "native_batch_norm_backward" | "batch_norm_backward" => self.norm_backward(2, 9),
            "_softmax" | "_log_softmax" | "softmax" | "log_softmax" => {
                5u64.saturating_mul(self.numel_of(0, "self"))
            }
            "_softmax_backward_data" | "_log_softmax_backward_data" => {
                4u64.saturating_mul(self.numel_of(0, "grad_output"))
            }
            "embedding_dense_backward" | "embedding_backward" => self.numel_of(0, "grad_output"),
            _ if is_attention(name) => self.attention(name.ends_with("_backward")),
            _ if is_pool(name) => self.pool(),
            _ => self.elementwise(),
        }
    }

    fn matmul(&self, a: usize, a_name: &str, b: usize, b_name: &str) -> u64 {
        match (self.shape(a, a_name), self.shape(b, b_name)) {
            (Some(a), Some(b)) => matmul_flops(a, b),
            _ => 0,
        }
    }

    /// `linear(input, weight[out, in], bias)` is `input @ weight.T`.
    fn linear(&self) -> u64 {
        match (self.shape(0, "input"), self.shape(1, "weight")) {
            (Some(x), Some(w)) if w.len() == 2 => matmul_flops(x, &[w[1], w[0]]),
            (Some(x), Some(w)) if w.len() == 1 => matmul_flops(x, w),
            _ => 0,
        }
    }

    fn convolution(&self, transposed: bool) -> u64 {
        let (Some(x), Some(w)) = (self.shape(0, "input"), self.shape(1, "weight")) else {
            return 0;
        };
        let Some((batch, in_spatial)) = split_conv_input(x, w) else {
            return 0;
        };
        if transposed {
            return conv_flops(batch, w, in_spatial);
        }
        let out_spatial = match self.out_shape() {
            Some(out) if out.len() >= in_spatial.len() => {
                out[out.len() - in_spatial.len()..].to_vec()
            }
            _ => match self.computed_out_spatial(in_spatial, &w[2..]) {
                Some(s) => s,
                None => return 0,
            },
        };
        conv_flops(batch, w, &out_spatial)
    }

    /// Output spatial sizes of a non-transposed convolution from stride, padding, dilation.
    fn computed_out_spatial(&self, input: &[i64], kernel: &[i64]) -> Option<Vec<i64>> {
        let stride = self.int_list(3, "stride").unwrap_or_default();
        let padding = self.int_list(4, "padding").unwrap_or_default();
        let dilation = self.int_list(5, "dilation").unwrap_or_default();
        let pick = |list: &[i64], i: usize, default: i64| {
            list.get(i).or(list.first()).copied().unwrap_or(default)
        };
        input
            .iter()
            .zip(kernel)
            .enumerate()
            .map(|(i, (&size, &k))| {
                let (s, p, d) = (
                    pick(&stride, i, 1),
                    pick(&padding, i, 0),
                    pick(&dilation, i, 1),
                );
                if s <= 0 {
                    return None;
                }
                let span = size
                    .checked_add(p.checked_mul(2)?)?
                    .checked_sub(d.checked_mul(k.checked_sub(1)?)?)?
                    .checked_sub(1)?;
                Some(if span < 0 { 0 } else { span / s + 1 })
            })
            .collect()
    }

    /// `convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
    /// dilation, transposed, output_padding, groups, output_mask)`.
    fn convolution_backward(&self) -> u64 {
        let (Some(grad), Some(x), Some(w)) = (
            self.shape(0, "grad_output"),
            self.shape(1, "input"),
            self.shape(2, "weight"),
        ) else {
            return 0;
        };
        let transposed = self.bool_arg(7, "transposed", false);
        let mask = self.mask(10, "output_mask");
        let Some((batch, in_spatial)) = split_conv_input(x, w) else {
            return 0;
        };
        let spatial = if transposed {
            in_spatial
        } else {
            &grad[grad.len().saturating_sub(in_spatial.len())..]
        };
        let product = conv_flops(batch, w, spatial);
        let mut total = 0u64;
        if mask[0] {
            total = total.saturating_add(product);
        }
        if mask[1] {
            total = total.saturating_add(product);
        }
        if mask[2] {
            total = total.saturating_add(numel(grad));
        }
        total
    }

    /// Layer, group and batch norm forward; `weight`/`bias` are argument positions.
    fn norm_forward(&self, training: bool, weight: usize, bias: usize) -> u64 {
        let n = self.numel_of(0, "input");
        let per_element = if training { 6 } else { 2 }
            + u64::from(self.present(weight, "weight"))
            + u64::from(self.present(bias, "bias"));
        n.saturating_mul(per_element)
    }

    /// Norm backwards: `grad_out` at 0, `input` at 1, the weight and output mask at the
    /// given positions.
    fn norm_backward(&self, weight: usize, mask: usize) -> u64 {
        let n = self.numel_of(1, "input");
        let mask = self.mask(mask, "output_mask");
        let mut per_element = 0u64;
        if mask[0] {
            per_element += 9 + u64::from(self.present(weight, "weight"));
        }
        if mask[1] {
            per_element += 2;
        }
        if mask[2] {
            per_element += 1;
        }
        n.saturating_mul(per_element)
    }

    /// Scaled dot product attention: `query, key, value` first (after `grad_out` in the
    /// backward), `[..., S, D]` each.
    fn attention(&self, backward: bool) -> u64 {
        let first = usize::from(backward);
        let (Some(q), Some(k), Some(v)) = (
            self.shape(first, "query"),
            self.shape(first + 1, "key"),
            self.shape(first + 2, "value"),
        ) else {
            return 0;
        };
        if q.len() < 2 || k.len() < 2 || v.is_empty() {
            return 0;
        }
        let batch = numel(&q[..q.len() - 2]);
        let (sq, dqk) = (dim(q[q.len() - 2]), dim(q[q.len() - 1]));
        let sk = dim(k[k.len() - 2]);
        let dv = dim(v[v.len() - 1]);
        let forward = mul(&[2, batch, sq, sk, dqk.saturating_add(dv)]);
        if backward {
            forward.saturating_mul(2)
        } else {
            forward
        }
    }

    /// Pooling: one operation per output element and kernel element; backwards one per
    /// element of grad_output (max) or per grad_output element and kernel element (avg).
    fn pool(&self) -> u64 {
        let name = self.op.name.as_str();
        if name.starts_with("max_pool") && name.ends_with("_backward") {
            return self.numel_of(0, "grad_output");
        }
        let kernel_pos = if name.ends_with("_backward") { 2 } else { 1 };
        let kernel = self.int_list(kernel_pos, "kernel_size").unwrap_or_default();
        let spatial_dims = name
            .chars()
            .find(|c| c.is_ascii_digit())
            .and_then(|c| c.to_digit(10))
            .unwrap_or(2) as usize;
        let kernel_elems = if kernel.len() == 1 {
            numel(&vec![kernel[0]; spatial_dims])
        } else {
            numel(&kernel)
        };
        let elements = if name.ends_with("_backward") {
            self.numel_of(0, "grad_output")
        } else {
            self.out_shape().map(numel).unwrap_or(0)
        };
        elements.saturating_mul(kernel_elems)
    }

    /// One operation per element: the larger of the largest input and the outputs.
    fn elementwise(&self) -> u64 {
        let mut largest_input = 0u64;
        self.node.for_each_input(|id| {
            if let Some(n) = self.graph.nodes.get(id.index()) {
                largest_input = largest_input.max(meta_numel(&n.meta));
            }
        });
        largest_input.max(meta_numel(&self.node.meta))
    }
}

fn is_attention(name: &str) -> bool {
    let base = name.strip_suffix("_backward").unwrap_or(name);
    base == "scaled_dot_product_attention"
        || (base.starts_with("_scaled_dot_product_") && base.contains("attention"))
}

fn is_pool(name: &str) -> bool {
    name.starts_with("max_pool") || name.starts_with("avg_pool")
}

/// `2·batch·m·n·k` for `a @ b` with matmul's 1-d promotion and batch broadcasting.
fn matmul_flops(a: &[i64], b: &[i64]) -> u64 {
    if a.is_empty() || b.is_empty() {
        return 0;
    }
    let (a_batch, m, k) = match a.len() {
        1 => (&a[..0], 1, a[0]),
        len => (&a[..len - 2], a[len - 2], a[len - 1]),
    };
    let (b_batch, n) = match b.len() {
        1 => (&b[..0], 1),
        len => (&b[..len - 2], b[len - 1]),
    };
    let rank = a_batch.len().max(b_batch.len());
    let batch = (0..rank).fold(1u64, |acc, i| {
        let from_end = |s: &[i64]| {
            s.len()
                .checked_sub(rank - i)
                .map_or(1, |j| s.get(j).copied().unwrap_or(1))
        };
        acc.saturating_mul(dim(from_end(a_batch).max(from_end(b_batch))))
    });
    mul(&[2, batch, dim(m), dim(n), dim(k)])
}

/// Splits a convolution input into (batch, spatial sizes), accepting unbatched inputs
/// (one dimension fewer than the weight); the weight needs at least one spatial dim.
fn split_conv_input<'s>(x: &'s [i64], w: &[i64]) -> Option<(u64, &'s [i64])> {
    if w.len() < 3 {
        return None;
    }
    if x.len() + 1 == w.len() {
        Some((1, &x[1..]))
    } else if x.len() == w.len() {
        Some((dim(x[0]), &x[2..]))
    } else {
        None
    }
}

/// `2·N·prod(weight)·prod(spatial)`.
fn conv_flops(batch: u64, weight: &[i64], spatial: &[i64]) -> u64 {
    mul(&[2, batch, numel(weight), numel(spatial)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphbug_ir::{parse_graph, Dtype};

    fn graph(params: &str, body: &str, ret: &str) -> Graph {
        let text = format!(
            "class G(torch.nn.Module):\n    def forward(self, {params}):\n{}        return [{ret}]\n",
            body.lines()
                .map(|l| format!("        {}\n", l.trim()))
                .collect::<String>()
        );
        parse_graph(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    fn flops_of(g: &Graph, name: &str) -> u64 {
        node_flops(g, g.find(name).unwrap())
    }

    fn bytes_of(g: &Graph, name: &str) -> u64 {
        node_bytes_moved(g, g.find(name).unwrap())
    }

    #[test]
    fn mm_addmm_bmm() {
        let g = graph(
            r#"a: "f32[8, 16]", b: "f32[16, 32]", bias: "f32[32]", x: "f32[4, 8, 16]", y: "f32[4, 16, 32]""#,
            r#"mm: "f32[8, 32]" = torch.ops.aten.mm.default(a, b)
               addmm: "f32[8, 32]" = torch.ops.aten.addmm.default(bias, a, b)
               bmm: "f32[4, 8, 32]" = torch.ops.aten.bmm.default(x, y)
               baddbmm: "f32[4, 8, 32]" = torch.ops.aten.baddbmm.default(bmm, x, y)
               matmul: "f32[4, 8, 32]" = torch.ops.aten.matmul.default(a, y)"#,
            "mm, addmm, bmm, baddbmm, matmul",
        );
        assert_eq!(flops_of(&g, "mm"), 2 * 8 * 16 * 32);
        assert_eq!(flops_of(&g, "addmm"), 2 * 8 * 16 * 32);
        assert_eq!(flops_of(&g, "bmm"), 2 * 4 * 8 * 16 * 32);
        assert_eq!(flops_of(&g, "baddbmm"), 2 * 4 * 8 * 16 * 32);
        // [8, 16] @ [4, 16, 32] broadcasts to a batch of 4.
        assert_eq!(flops_of(&g, "matmul"), 2 * 4 * 8 * 16 * 32);
        // mm reads a and b and writes the result.
        assert_eq!(bytes_of(&g, "mm"), 4 * (8 * 16 + 16 * 32 + 8 * 32));
        assert_eq!(bytes_of(&g, "addmm"), 4 * (32 + 8 * 16 + 16 * 32 + 8 * 32));
    }

    #[test]
    fn matmul_promotion() {
        assert_eq!(matmul_flops(&[5], &[5]), 10);
        assert_eq!(matmul_flops(&[3, 5], &[5]), 30);
        assert_eq!(matmul_flops(&[5], &[5, 7]), 70);
        assert_eq!(
            matmul_flops(&[2, 1, 3, 5], &[4, 5, 7]),
            2 * 2 * 4 * 3 * 5 * 7
        );
        assert_eq!(matmul_flops(&[], &[5]), 0);
        assert_eq!(matmul_flops(&[-1, 5], &[5, 7]), 0);
    }

    #[test]
    fn convolution_with_groups_and_stride() {
        // Input [2, 4, 8, 8], weight [6, 4/2, 3, 3], groups 2, stride 2, padding 1:
        // output [2, 6, 4, 4]; each output element is 2·3·3 multiply-adds.
        let g = graph(
            r#"x: "f32[2, 4, 8, 8]", w: "f32[6, 2, 3, 3]", b: "f32[6]""#,
            r#"convolution: "f32[2, 6, 4, 4]" = torch.ops.aten.convolution.default(x, w, b, [2, 2], [1, 1], [1, 1], False, [0, 0], 2)
               conv_nometa = torch.ops.aten.convolution.default(x, w, b, [2, 2], [1, 1], [1, 1], False, [0, 0], 2)
               convolution_backward = torch.ops.aten.convolution_backward.default(convolution, x, w, [6], [2, 2], [1, 1], [1, 1], False, [0, 0], 2, [True, True, True])
               getitem: "f32[2, 4, 8, 8]" = convolution_backward[0]
               convolution_backward_1 = torch.ops.aten.convolution_backward.default(convolution, x, w, [6], [2, 2], [1, 1], [1, 1], False, [0, 0], 2, [False, True, False])
               getitem_1: "f32[6, 2, 3, 3]" = convolution_backward_1[1]
               convolution_1: "f32[2, 4, 8, 8]" = torch.ops.aten.convolution.default(convolution, w, None, [1, 1], [1, 1], [1, 1], True, [0, 0], 2)"#,
            "getitem, getitem_1, conv_nometa, convolution_1",
        );
        let fwd = 2 * 6 * 4 * 4 * (2 * 3 * 3) * 2;
        assert_eq!(fwd, 6912);
        assert_eq!(flops_of(&g, "convolution"), fwd);
        // Without an output annotation the output size comes from stride/padding/dilation.
        assert_eq!(flops_of(&g, "conv_nometa"), fwd);
        // grad_input + grad_weight + grad_bias (numel of grad_output).
        assert_eq!(
            flops_of(&g, "convolution_backward"),
            2 * fwd + 2 * 6 * 4 * 4
        );
        assert_eq!(flops_of(&g, "convolution_backward_1"), fwd);
        // Transposed: the input's spatial size, weight [C_in, C_out/groups, k, k].
        assert_eq!(
            flops_of(&g, "convolution_1"),
            2 * 2 * (6 * 2 * 3 * 3) * (4 * 4)
        );
    }

    #[test]
    fn layer_norm_softmax_pointwise_views() {
        let g = graph(
            r#"x: "f32[8, 16]", w: "f32[16]", b: "f32[16]", y: "f32[16]""#,
            r#"native_layer_norm = torch.ops.aten.native_layer_norm.default(x, [16], w, b, 1e-05)
               getitem: "f32[8, 16]" = native_layer_norm[0]
               getitem_1: "f32[8, 1]" = native_layer_norm[1]
               getitem_2: "f32[8, 1]" = native_layer_norm[2]
               native_layer_norm_1 = torch.ops.aten.native_layer_norm.default(x, [16], None, None, 1e-05)
               getitem_3: "f32[8, 16]" = native_layer_norm_1[0]
               native_layer_norm_backward = torch.ops.aten.native_layer_norm_backward.default(getitem, x, [16], getitem_1, getitem_2, w, b, [True, True, True])
               getitem_4: "f32[8, 16]" = native_layer_norm_backward[0]
               add: "f32[8, 16]" = torch.ops.aten.add.Tensor(x, y)
               sum_1: "f32[8]" = torch.ops.aten.sum.dim_IntList(x, [1])
               _softmax: "f32[8, 16]" = torch.ops.aten._softmax.default(x, -1, False)
               view: "f32[128]" = torch.ops.aten.view.default(add, [128])
               t: "f32[16, 8]" = torch.ops.aten.t.default(x)
               clone: "f32[8, 16]" = torch.ops.aten.clone.default(x)"#,
            "getitem_3, getitem_4, sum_1, _softmax, view, t, clone",
        );
        assert_eq!(flops_of(&g, "native_layer_norm"), 128 * (6 + 2));
        assert_eq!(flops_of(&g, "native_layer_norm_1"), 128 * 6);
        assert_eq!(
            flops_of(&g, "native_layer_norm_backward"),
            128 * (10 + 2 + 1)
        );
        assert_eq!(flops_of(&g, "add"), 128);
        assert_eq!(flops_of(&g, "sum_1"), 128);
        assert_eq!(flops_of(&g, "_softmax"), 5 * 128);
        for zero in ["view", "t", "getitem", "x", "clone"] {
            assert_eq!(flops_of(&g, zero), 0, "{zero}");
        }
        for no_bytes in ["view", "t", "getitem", "x"] {
            assert_eq!(bytes_of(&g, no_bytes), 0, "{no_bytes}");
        }
        // add: reads x (512 B) and y (64 B), writes 512 B.
        assert_eq!(bytes_of(&g, "add"), 512 + 64 + 512);
        assert_eq!(bytes_of(&g, "clone"), 1024);
        // The layer norm writes its three outputs: [8, 16] + 2 x [8, 1].
        assert_eq!(
            bytes_of(&g, "native_layer_norm"),
            512 + 64 + 64 + 4 * (8 + 8 + 8 * 16)
        );
        let model = CostModel::default();
        assert_eq!(model.estimate_runtime(&g, g.find("view").unwrap()), 0.0);
        assert_eq!(model.estimate_runtime(&g, g.find("x").unwrap()), 0.0);
        let add = model.estimate_runtime(&g, g.find("add").unwrap());
        assert!((add - (1088.0 / 2e12 + 5e-6)).abs() < 1e-15, "{add}");
    }

    #[test]
    fn attention_and_batch_norm() {
        let g = graph(
            r#"q: "f32[2, 4, 16, 8]", k: "f32[2, 4, 32, 8]", v: "f32[2, 4, 32, 8]", x: "f32[4, 3, 5, 5]", w: "f32[3]", rm: "f32[3]", rv: "f32[3]""#,
            r#"_scaled_dot_product_flash_attention = torch.ops.aten._scaled_dot_product_flash_attention.default(q, k, v, 0.0, True)
               getitem: "f32[2, 4, 16, 8]" = _scaled_dot_product_flash_attention[0]
               _scaled_dot_product_flash_attention_backward = torch.ops.aten._scaled_dot_product_flash_attention_backward.default(getitem, q, k, v, getitem, getitem, None, None, 16, 32, 0.0, True, getitem, getitem)
               getitem_1: "f32[2, 4, 16, 8]" = _scaled_dot_product_flash_attention_backward[0]
               _native_batch_norm_legit_functional = torch.ops.aten._native_batch_norm_legit_functional.default(x, w, w, rm, rv, True, 0.1, 1e-05)
               getitem_2: "f32[4, 3, 5, 5]" = _native_batch_norm_legit_functional[0]
               _native_batch_norm_legit_no_training = torch.ops.aten._native_batch_norm_legit_no_training.default(x, None, None, rm, rv, 0.1, 1e-05)
               getitem_3: "f32[4, 3, 5, 5]" = _native_batch_norm_legit_no_training[0]
               native_batch_norm_backward = torch.ops.aten.native_batch_norm_backward.default(getitem_2, x, w, rm, rv, rm, rv, True, 1e-05, [True, False, False])
               getitem_4: "f32[4, 3, 5, 5]" = native_batch_norm_backward[0]"#,
            "getitem_1, getitem_3, getitem_4",
        );
        let fwd = 2 * 2 * 4 * 16 * 32 * (8 + 8);
        assert_eq!(flops_of(&g, "_scaled_dot_product_flash_attention"), fwd);
        assert_eq!(
            flops_of(&g, "_scaled_dot_product_flash_attention_backward"),
            2 * fwd
        );
        let n = 4 * 3 * 5 * 5;
        assert_eq!(flops_of(&g, "_native_batch_norm_legit_functional"), 8 * n);
        assert_eq!(flops_of(&g, "_native_batch_norm_legit_no_training"), 2 * n);
        assert_eq!(flops_of(&g, "native_batch_norm_backward"), 10 * n);
    }

    #[test]
    fn unknown_metas_and_odd_arguments_give_zero() {
        let g = graph(
            r#"a: "f32[8, 16]", b: "f32[16, 32]""#,
            r#"mm = torch.ops.aten.mm.default(a, 3)
               mm_1 = torch.ops.aten.mm.default(a)
               convolution = torch.ops.aten.convolution.default(a, b, None, [0], [1], [1], False, [0], 1)
               convolution_backward = torch.ops.aten.convolution_backward.default(a, a)
               native_layer_norm = torch.ops.aten.native_layer_norm.default(3, [16], None, None, 1e-05)
               relu = torch.ops.aten.relu.default(mm)"#,
            "mm, mm_1, convolution, convolution_backward, native_layer_norm, relu",
        );
        let model = CostModel::default();
        for id in g.ids() {
            let name = &g.node(id).name;
            if matches!(name.as_str(), "a" | "b") {
                continue;
            }
            assert_eq!(node_flops(&g, id), 0, "{name}");
            let r = model.estimate_runtime(&g, id);
            assert!(r.is_finite(), "{name}");
        }
        // An id past the end is not a panic.
        assert_eq!(node_flops(&g, NodeId(999)), 0);
        assert_eq!(node_bytes_moved(&g, NodeId(999)), 0);
        assert_eq!(model.estimate_runtime(&g, NodeId(999)), 0.0);
    }

    #[test]
    fn huge_shapes_saturate() {
        // The text format refuses sizes whose byte count overflows; graphs built in Rust
        // can still carry them.
        let mut g = graph(
            r#"a: "f32[2, 2]", b: "f32[2, 2]""#,
            r#"mm: "f32[2, 2]" = torch.ops.aten.mm.default(a, b)
               add: "f32[2, 2]" = torch.ops.aten.add.Tensor(a, b)"#,
            "mm, add",
        );
        let huge = 4_611_686_018_427_387_904;
        for node in &mut g.nodes {
            node.meta = Meta::Tensor(TensorMeta::new(Dtype::Float32, vec![huge, huge]));
        }
        let model = CostModel::default();
        for name in ["mm", "add"] {
            assert_eq!(flops_of(&g, name), u64::MAX, "{name}");
            assert_eq!(bytes_of(&g, name), u64::MAX, "{name}");
            assert!(model
                .estimate_runtime(&g, g.find(name).unwrap())
                .is_finite());
        }
    }

    #[test]
    fn runtime_is_monotone_in_size() {
        let model = CostModel::default();
        let mut last = (0.0, 0.0);
        for n in [1, 2, 8, 64, 256, 1024, 4096] {
            let g = graph(
                &format!(r#"a: "f32[{n}, {n}]", b: "f32[{n}, {n}]""#),
                &format!(
                    r#"mm: "f32[{n}, {n}]" = torch.ops.aten.mm.default(a, b)
                       mul: "f32[{n}, {n}]" = torch.ops.aten.mul.Tensor(a, b)"#
                ),
                "mm, mul",
            );
            let mm = model.estimate_runtime(&g, g.find("mm").unwrap());
            let mul = model.estimate_runtime(&g, g.find("mul").unwrap());
            assert!(
                mm >= last.0 && mul >= last.1,
                "n={n}: {mm} {mul} after {last:?}"
            );
            assert!(mm >= mul, "n={n}: mm {mm} is cheaper than mul {mul}");
            last = (mm, mul);
        }
        // Big matmuls are compute bound: 2·4096³ / 100e12 s.
        let expected = 2.0 * 4096f64.powi(3) / 100e12 + 5e-6;
        assert!((last.0 - expected).abs() / expected < 1e-12);
    }

    #[test]
    fn degenerate_models_stay_finite() {
        let g = graph(
            r#"a: "f32[8, 16]", b: "f32[16, 32]""#,
            r#"mm: "f32[8, 32]" = torch.ops.aten.mm.default(a, b)"#,
            "mm",
        );
        let id = g.find("mm").unwrap();
        let zero = CostModel {
            peak_flops: 0.0,
            bandwidth: f64::NAN,
            launch_overhead: f64::INFINITY,
        };
        assert_eq!(zero.estimate_runtime(&g, id), 0.0);
    }

    fn fixture(model: &str) -> Graph {
        let path = format!(
            "{}/../../../tests/fixtures/{model}/joint.py",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        parse_graph(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn reference_joints_get_finite_costs() {
        let model = CostModel::default();
        for name in ["mlp", "cnn", "gpt4"] {
            let g = fixture(name);
            let mut total_flops = 0u64;
            for id in g.ids() {
                let node = g.node(id);
                let flops = node_flops(&g, id);
                let bytes = node_bytes_moved(&g, id);
                let runtime = model.estimate_runtime(&g, id);
                assert!(
                    runtime.is_finite() && runtime >= 0.0,
                    "{name}: {}",
                    node.name
                );
                total_flops = total_flops.saturating_add(flops);
                let op = node.op().map(|op| op.name.as_str());
                match op {
                    None => assert_eq!((flops, bytes, runtime), (0, 0, 0.0), "{}", node.name),
                    Some(op) if is_view(node.op().unwrap()) => {
                        assert_eq!((flops, bytes), (0, 0), "{name}: {} ({op})", node.name)
                    }
                    Some(
                        "mm"
                        | "addmm"
                        | "bmm"
                        | "convolution"
                        | "convolution_backward"
                        | "native_layer_norm"
                        | "native_layer_norm_backward"
                        | "_softmax"
                        | "_softmax_backward_data"
                        | "relu"
                        | "gelu"
                        | "add",
                    ) => {
                        assert!(flops > 0, "{name}: {} has no flops", node.name);
                        assert!(bytes > 0, "{name}: {} moves no bytes", node.name);
                        assert!(runtime > 0.0, "{name}: {}", node.name);
                    }
                    Some(_) => assert!(runtime > 0.0, "{name}: {}", node.name),
                }
            }
            assert!(total_flops > 0 && total_flops < u64::MAX, "{name}");
        }
    }
}

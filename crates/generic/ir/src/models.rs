//! Reference model graphs built with [`GraphBuilder`], op for op as PyTorch's `make_fx` traces them.
//!
//! Each builder reproduces one of the PyTorch 2.13 reference graphs in `tests/fixtures`
//! (`gpt4`, `mlp`, `cnn` `forward.py`): same node names, ops, arguments and annotations,
//! placeholders `arg0_1 ...` (parameters, then buffers, then the model input). They serve
//! benchmarks (a 48-layer GPT forward has 2,987 call_function nodes) and tests.

use crate::builder::{GraphBuilder, TensorRef};
use crate::graph::Graph;
use crate::types::{Device, Dtype, Layout, MemoryFormat, OpName, TensorMeta};
use crate::value::Value;

/// Sizes of the small GPT of `tests/fixtures/gpt4` (pre-LayerNorm blocks, fused QKV).
#[derive(Clone, Debug, PartialEq)]
pub struct GptConfig {
    /// Number of transformer blocks.
    pub layers: usize,
    /// Batch size of the token-id input.
    pub batch: i64,
    /// Sequence length of the token-id input.
    pub seq: i64,
    /// Vocabulary size (token embedding rows and output projection width).
    pub vocab: i64,
    /// Embedding width.
    pub embed: i64,
    /// Number of attention heads; `embed / heads` is the head width.
    pub heads: i64,
    /// Hidden width of each block's MLP.
    pub mlp_hidden: i64,
    /// Rows of the learned position table (sliced to `seq`).
    pub max_positions: i64,
    /// LayerNorm epsilon.
    pub eps: f64,
}

impl GptConfig {
    /// The configuration of `tests/fixtures/gpt4/forward.py` (4 layers).
    pub fn gpt4() -> Self {
        GptConfig {
            layers: 4,
            batch: 2,
            seq: 16,
            vocab: 128,
            embed: 64,
            heads: 4,
            mlp_hidden: 256,
            max_positions: 16,
            eps: 1e-05,
        }
    }

    /// The `gpt4` configuration with `layers` transformer blocks.
    pub fn gpt4_layers(layers: usize) -> Self {
        GptConfig {
            layers,
            ..GptConfig::gpt4()
        }
    }
}

fn f32(shape: &[i64]) -> TensorMeta {
    TensorMeta::new(Dtype::Float32, shape)
}

/// `"view"` is `aten.view.default`, `"transpose.int"` is `aten.transpose.int`.
fn aten(op: &str) -> OpName {
    let (name, overload) = op.split_once('.').unwrap_or((op, "default"));
    OpName::aten(name, overload)
}

fn v(t: TensorRef) -> Value {
    t.into()
}

/// A linear layer's placeholders: weight `[out, inp]` and bias `[out]`.
#[derive(Clone, Copy)]
struct Linear {
    w: TensorRef,
    b: TensorRef,
    inp: i64,
    out: i64,
}

/// A LayerNorm's placeholders: weight and bias.
#[derive(Clone, Copy)]
struct Norm {
    w: TensorRef,
    b: TensorRef,
}

/// A [`GraphBuilder`] whose calls always carry their output metas.
struct Model {
    b: GraphBuilder,
    next_arg: usize,
    eps: f64,
}

impl Model {
    fn new(name: &str, eps: f64) -> Self {
        Model {
            b: GraphBuilder::new(name),
            next_arg: 0,
            eps,
        }
    }

    /// The next placeholder, `arg{i}_1` as `make_fx` names them.
    fn arg(&mut self, meta: TensorMeta) -> TensorRef {
        let t = self.b.input(&format!("arg{}_1", self.next_arg), meta);
        self.next_arg += 1;
        t
    }

    fn linear_params(&mut self, inp: i64, out: i64) -> Linear {
        let w = self.arg(f32(&[out, inp]));
        let b = self.arg(f32(&[out]));
        Linear { w, b, inp, out }
    }

    fn norm_params(&mut self, dim: i64) -> Norm {
        let w = self.arg(f32(&[dim]));
        let b = self.arg(f32(&[dim]));
        Norm { w, b }
    }

    fn op(&mut self, op: &str, args: impl IntoIterator<Item = Value>, shape: &[i64]) -> TensorRef {
        self.op_kw(op, args, [], f32(shape))
    }

    fn op_kw<'k>(
        &mut self,
        op: &str,
        args: impl IntoIterator<Item = Value>,
        kwargs: impl IntoIterator<Item = (&'k str, Value)>,
        meta: TensorMeta,
    ) -> TensorRef {
        let t = self.b.call_kw(aten(op), args, kwargs);
        self.b.set_meta(t, meta);
        t
    }

    /// A multi-output call followed by a getitem for every output, as FX traces them.
    fn multi(
        &mut self,
        op: &str,
        args: impl IntoIterator<Item = Value>,
        metas: Vec<TensorMeta>,
    ) -> Vec<TensorRef> {
        let m = self.b.call_multi(aten(op), args, []);
        self.b
            .set_multi_meta(m, metas.iter().cloned().map(Some).collect());
        metas
            .into_iter()
            .enumerate()
            .map(|(i, meta)| {
                let t = self.b.getitem(m, i);
                self.b.set_meta(t, meta);
                t
            })
            .collect()
    }

    /// `native_layer_norm` over the last dimension of `x` (of shape `shape`); its output.
    fn layer_norm(&mut self, x: TensorRef, p: Norm, shape: &[i64]) -> TensorRef {
        let dim = shape.last().copied().unwrap_or(1);
        let mut stat = shape.to_vec();
        if let Some(last) = stat.last_mut() {
            *last = 1;
        }
        let args = [v(x), [dim].into(), v(p.w), v(p.b), self.eps.into()];
        let outs = self.multi(
            "native_layer_norm",
            args,
            vec![f32(shape), f32(&stat), f32(&stat)],
        );
        outs[0]
    }

    /// `x @ w.t() + b` for a 2-d `x` of `rows` rows: `t` then `addmm`.
    fn linear(&mut self, x: TensorRef, p: Linear, rows: i64) -> TensorRef {
        let t = self.op("t", [v(p.w)], &[p.inp, p.out]);
        self.op("addmm", [v(p.b), v(x), v(t)], &[rows, p.out])
    }

    /// [`Model::linear`] on a `[batch, seq, inp]` input, flattened by `view`s around it.
    fn linear3d(&mut self, x: TensorRef, p: Linear, [batch, seq]: [i64; 2]) -> TensorRef {
        let rows = batch.saturating_mul(seq);
        let flat = self.op("view", [v(x), [rows, p.inp].into()], &[rows, p.inp]);
        let y = self.linear(flat, p, rows);
        let shape = [batch, seq, p.out];
        self.op("view", [v(y), shape.into()], &shape)
    }

    /// `clone(x, memory_format=torch.contiguous_format)`.
    fn contiguous(&mut self, x: TensorRef, shape: &[i64]) -> TensorRef {
        let kw = [("memory_format", MemoryFormat::ContiguousFormat.into())];
        self.op_kw("clone", [v(x)], kw, f32(shape))
    }

    fn finish(mut self, outputs: &[TensorRef]) -> Graph {
        self.b.output(outputs.iter().map(Value::from));
        self.b
            .finish()
            .expect("models: every handle comes from this builder and precedes its users")
    }
}

/// The placeholders of one transformer block, in the order the fixture lists them.
struct Block {
    ln1: Norm,
    qkv: Linear,
    proj: Linear,
    ln2: Norm,
    fc1: Linear,
    fc2: Linear,
}

/// The forward graph of the GPT of `tests/fixtures/gpt4/forward.py` with sizes from `cfg`.
///
/// Placeholders: position table, token embedding, 12 per block, final LayerNorm, output
/// projection (weight and bias), then the `i64[batch, seq]` token ids; `arg{i}_1` each.
pub fn gpt_forward(cfg: &GptConfig) -> Graph {
    let (bsz, seq, embed) = (cfg.batch, cfg.seq, cfg.embed);
    let mut m = Model::new("GptForward", cfg.eps);
    let pos = m.arg(f32(&[cfg.max_positions, embed]));
    let wte = m.arg(f32(&[cfg.vocab, embed]));
    let blocks: Vec<Block> = (0..cfg.layers)
        .map(|_| Block {
            ln1: m.norm_params(embed),
            qkv: m.linear_params(embed, embed.saturating_mul(3)),
            proj: m.linear_params(embed, embed),
            ln2: m.norm_params(embed),
            fc1: m.linear_params(embed, cfg.mlp_hidden),
            fc2: m.linear_params(cfg.mlp_hidden, embed),
        })
        .collect();
    let ln_f = m.norm_params(embed);
    let head = m.linear_params(embed, cfg.vocab);
    let tokens = m.arg(TensorMeta::new(Dtype::Int64, vec![bsz, seq]));

    let x3 = [bsz, seq, embed];
    let tok = m.op("embedding", [v(wte), v(tokens)], &x3);
    let pos = m.op(
        "slice.Tensor",
        [v(pos), 0.into(), 0.into(), seq.into()],
        &[seq, embed],
    );
    let mut x = m.op("add.Tensor", [v(tok), v(pos)], &x3);
    for blk in &blocks {
        let h = m.layer_norm(x, blk.ln1, &x3);
        let a = attention(&mut m, h, blk, cfg);
        x = m.op("add.Tensor", [v(x), v(a)], &x3);
        let h = m.layer_norm(x, blk.ln2, &x3);
        let h = m.linear3d(h, blk.fc1, [bsz, seq]);
        let h = m.op("gelu", [v(h)], &[bsz, seq, cfg.mlp_hidden]);
        let h = m.linear3d(h, blk.fc2, [bsz, seq]);
        x = m.op("add.Tensor", [v(x), v(h)], &x3);
    }
    let h = m.layer_norm(x, ln_f, &x3);
    let logits = m.linear3d(h, head, [bsz, seq]);
    m.finish(&[logits])
}

/// Causal self-attention of one block on the normalised input `h`, output projection included.
fn attention(m: &mut Model, h: TensorRef, blk: &Block, cfg: &GptConfig) -> TensorRef {
    let (bsz, seq, embed, heads) = (cfg.batch, cfg.seq, cfg.embed, cfg.heads);
    let hd = embed.checked_div(heads).unwrap_or(0);
    let bh = bsz.saturating_mul(heads);
    let qkv = m.linear3d(h, blk.qkv, [bsz, seq]);
    let x3 = [bsz, seq, embed];
    let parts = m.multi(
        "split.Tensor",
        [v(qkv), embed.into(), 2.into()],
        vec![f32(&x3), f32(&x3), f32(&x3)],
    );
    let split4 = [bsz, seq, heads, hd];
    let bhsd = [bsz, heads, seq, hd];
    let [q, k, vv] = [0, 1, 2].map(|i| {
        let t = m.op("view", [v(parts[i]), split4.into()], &split4);
        m.op("transpose.int", [v(t), 1.into(), 2.into()], &bhsd)
    });
    let bhds = [bsz, heads, hd, seq];
    let kt = m.op("transpose.int", [v(k), (-2).into(), (-1).into()], &bhds);
    // matmul of non-contiguous operands: expand, contiguous clone, _unsafe_view to 3-d.
    let batched = |m: &mut Model, t: TensorRef, shape4: [i64; 4]| {
        let e = m.op("expand", [v(t), shape4.into()], &shape4);
        let c = m.contiguous(e, &shape4);
        let shape3 = [bh, shape4[2], shape4[3]];
        m.op("_unsafe_view", [v(c), shape3.into()], &shape3)
    };
    let q3 = batched(m, q, bhsd);
    let k3 = batched(m, kt, bhds);
    let bss = [bh, seq, seq];
    let s = m.op("bmm", [v(q3), v(k3)], &bss);
    let bhss = [bsz, heads, seq, seq];
    let s = m.op("_unsafe_view", [v(s), bhss.into()], &bhss);
    let scale = 1.0 / (hd as f64).sqrt();
    let s = m.op("mul.Tensor", [v(s), scale.into()], &bhss);
    let mask_meta = TensorMeta::new(Dtype::Bool, vec![seq, seq]);
    let ones = m.op_kw(
        "ones",
        [[seq, seq].into()],
        [
            ("dtype", Dtype::Bool.into()),
            ("device", Device::cpu().into()),
            ("pin_memory", false.into()),
        ],
        mask_meta.clone(),
    );
    let tril = m.op_kw("tril", [v(ones)], [], mask_meta.clone());
    let mask = m.op_kw("bitwise_not", [v(tril)], [], mask_meta);
    let s = m.op(
        "masked_fill.Scalar",
        [v(s), v(mask), f64::NEG_INFINITY.into()],
        &bhss,
    );
    let p = m.op("_softmax", [v(s), (-1).into(), false.into()], &bhss);
    let p = m.op("expand", [v(p), bhss.into()], &bhss);
    let p3 = m.op("view", [v(p), bss.into()], &bss);
    let v3 = batched(m, vv, bhsd);
    let bsd = [bh, seq, hd];
    let o = m.op("bmm", [v(p3), v(v3)], &bsd);
    let o = m.op("_unsafe_view", [v(o), bhsd.into()], &bhsd);
    let o = m.op("transpose.int", [v(o), 1.into(), 2.into()], &split4);
    let o = m.contiguous(o, &split4);
    let o = m.op("view", [v(o), x3.into()], &x3);
    m.linear3d(o, blk.proj, [bsz, seq])
}

/// The forward graph of `tests/fixtures/mlp/forward.py`: Linear(32, 64), GELU, LayerNorm,
/// Linear(64, 64), ReLU, Linear(64, 10) on an `f32[8, 32]` input.
pub fn mlp_forward() -> Graph {
    let mut m = Model::new("MlpForward", 1e-05);
    let fc1 = m.linear_params(32, 64);
    let ln = m.norm_params(64);
    let fc2 = m.linear_params(64, 64);
    let fc3 = m.linear_params(64, 10);
    let x = m.arg(f32(&[8, 32]));
    let h = m.linear(x, fc1, 8);
    let h = m.op("gelu", [v(h)], &[8, 64]);
    let h = m.layer_norm(h, ln, &[8, 64]);
    let h = m.linear(h, fc2, 8);
    let h = m.op("relu", [v(h)], &[8, 64]);
    let out = m.linear(h, fc3, 8);
    m.finish(&[out])
}

/// The forward graph of `tests/fixtures/cnn/forward.py` (batch norm in training mode):
/// conv(3→16)-batchnorm-relu-maxpool, conv(16→32)-relu-maxpool, Linear(2048, 10) on
/// `f32[4, 3, 32, 32]`, with the in-place `add_` on `num_batches_tracked` and the unused
/// `empty` that batch norm's decomposition leaves.
pub fn cnn_forward() -> Graph {
    let mut m = Model::new("CnnForward", 1e-05);
    let conv1_w = m.arg(f32(&[16, 3, 3, 3]));
    let conv1_b = m.arg(f32(&[16]));
    let bn = m.norm_params(16);
    let conv2_w = m.arg(f32(&[32, 16, 3, 3]));
    let conv2_b = m.arg(f32(&[32]));
    let fc = m.linear_params(2048, 10);
    let running_mean = m.arg(f32(&[16]));
    let running_var = m.arg(f32(&[16]));
    let tracked = m.arg(TensorMeta::new(Dtype::Int64, vec![]));
    let x = m.arg(f32(&[4, 3, 32, 32]));

    let conv = |m: &mut Model, x: TensorRef, w: TensorRef, b: TensorRef, shape: &[i64]| {
        let s: Value = [1, 1].into(); // stride, padding, dilation
        let args = [v(x), v(w), v(b), s.clone(), s.clone(), s];
        let rest = [false.into(), [0, 0].into(), 1.into()];
        m.op("convolution", args.into_iter().chain(rest), shape)
    };
    let pool = |m: &mut Model, x: TensorRef, shape: [i64; 4]| {
        let indices = TensorMeta::new(Dtype::Int64, shape);
        let outs = m.multi(
            "max_pool2d_with_indices",
            [v(x), [2, 2].into()],
            vec![f32(&shape), indices],
        );
        outs[0]
    };
    let h = conv(&mut m, x, conv1_w, conv1_b, &[4, 16, 32, 32]);
    let scalar = TensorMeta::new(Dtype::Int64, vec![]);
    m.op_kw("add_.Tensor", [v(tracked), 1.into()], [], scalar);
    m.op_kw(
        "empty.memory_format",
        [[0].into()],
        [
            ("dtype", Dtype::UInt8.into()),
            ("layout", Layout::Strided.into()),
            ("device", Device::cpu().into()),
        ],
        TensorMeta::new(Dtype::UInt8, vec![0]),
    );
    let args = [v(h), v(bn.w), v(bn.b), v(running_mean), v(running_var)];
    let rest = [true.into(), 0.1.into(), m.eps.into()];
    let outs = m.multi(
        "native_batch_norm",
        args.into_iter().chain(rest),
        vec![f32(&[4, 16, 32, 32]), f32(&[16]), f32(&[16])],
    );
    let h = m.op("relu", [v(outs[0])], &[4, 16, 32, 32]);
    let h = pool(&mut m, h, [4, 16, 16, 16]);
    let h = conv(&mut m, h, conv2_w, conv2_b, &[4, 32, 16, 16]);
    let h = m.op("relu", [v(h)], &[4, 32, 16, 16]);
    let h = pool(&mut m, h, [4, 32, 8, 8]);
    let h = m.op("view", [v(h), [4, 2048].into()], &[4, 2048]);
    let out = m.linear(h, fc, 4);
    m.finish(&[out])
}

/// One step of [`random_forward`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RandomStep {
    /// relu, gelu, sigmoid, tanh, exp or neg (index modulo 6).
    Unary(usize),
    /// add (false) or mul (true) with a value of the same or a broadcast shape.
    Binary(bool),
    /// mm with a new weight.
    Mm,
    /// t.
    T,
    /// view to the transposed shape (neg when not contiguous).
    View,
    /// sum over dim 1, keepdim.
    Sum,
    /// mean over dim 1, keepdim.
    Mean,
}

/// A random forward graph for property tests: input `x: f32[4, 6]`, then one value per
/// step (reading earlier values picked by the step's two indices; weights become new
/// inputs `w1..`), returning the last value and a middle one. Every op has a derivative
/// rule, so the graph differentiates.
pub fn random_forward(steps: &[(RandomStep, usize, usize)]) -> Graph {
    let meta = |s: [i64; 2]| TensorMeta::new(Dtype::Float32, s);
    let mut b = GraphBuilder::new("Random");
    // (value, shape, contiguous)
    let mut vals: Vec<(TensorRef, [i64; 2], bool)> = Vec::new();
    let x = b.input("x", meta([4, 6]));
    vals.push((x, [4, 6], true));
    let mut params = 0;
    let mut param = |b: &mut GraphBuilder, s: [i64; 2]| {
        params += 1;
        b.input(&format!("w{params}"), meta(s))
    };
    for &(st, ai, bi) in steps {
        let (a, sa, ca) = vals[ai % vals.len()];
        let (out, shape, contiguous) = match st {
            RandomStep::Unary(k) => {
                let name = ["relu", "gelu", "sigmoid", "tanh", "exp", "neg"][k % 6];
                (b.call(OpName::aten(name, "default"), [a.into()]), sa, ca)
            }
            RandomStep::Binary(mul) => {
                // Another value of the same shape, or one that broadcasts ([r, 1]).
                let fits = |s: [i64; 2]| s == sa || (s[0] == sa[0] && (s[1] == 1 || sa[1] == 1));
                let pick = (0..vals.len())
                    .map(|k| (bi + k) % vals.len())
                    .find(|&k| fits(vals[k].1) && k != ai % vals.len());
                let (other, so, co) = match pick {
                    Some(k) => vals[k],
                    None => (param(&mut b, sa), sa, true),
                };
                let shape = [sa[0], sa[1].max(so[1])];
                let op = OpName::aten(if mul { "mul" } else { "add" }, "Tensor");
                (b.call(op, [a.into(), other.into()]), shape, ca && co)
            }
            RandomStep::Mm => {
                let w = param(&mut b, [sa[1], 1 + (bi % 5) as i64]);
                let shape = [sa[0], 1 + (bi % 5) as i64];
                (
                    b.call(OpName::aten("mm", "default"), [a.into(), w.into()]),
                    shape,
                    true,
                )
            }
            RandomStep::T => (
                b.call(OpName::aten("t", "default"), [a.into()]),
                [sa[1], sa[0]],
                false,
            ),
            RandomStep::View if ca => {
                let shape = [sa[1], sa[0]];
                let op = OpName::aten("view", "default");
                (
                    b.call(op, [a.into(), vec![sa[1], sa[0]].into()]),
                    shape,
                    true,
                )
            }
            RandomStep::View => (b.call(OpName::aten("neg", "default"), [a.into()]), sa, ca),
            RandomStep::Sum | RandomStep::Mean => {
                let op = if matches!(st, RandomStep::Sum) {
                    OpName::aten("sum", "dim_IntList")
                } else {
                    OpName::aten("mean", "dim")
                };
                let args = [a.into(), vec![1i64].into(), true.into()];
                (b.call(op, args), [sa[0], 1], true)
            }
        };
        b.set_meta(out, meta(shape));
        vals.push((out, shape, contiguous));
    }
    // The last value, and a middle one so that more of the graph stays alive.
    let last = vals.len() - 1;
    let mid = 1 + (last - 1) / 2;
    let mut outs: Vec<Value> = vec![vals[last].0.into()];
    if mid < last {
        outs.push(vals[mid].0.into());
    }
    b.output(outs);
    b.finish()
        .expect("every step reads earlier values and sets its meta")
}

/// A proptest strategy for one [`RandomStep`] with its two indices (feature `proptest`).
#[cfg(feature = "proptest")]
pub fn random_step() -> impl proptest::strategy::Strategy<Value = (RandomStep, usize, usize)> {
    use proptest::prelude::*;
    let op = prop_oneof![
        4 => (0..6usize).prop_map(RandomStep::Unary),
        4 => any::<bool>().prop_map(RandomStep::Binary),
        2 => Just(RandomStep::Mm),
        1 => Just(RandomStep::T),
        1 => Just(RandomStep::View),
        1 => Just(RandomStep::Sum),
        1 => Just(RandomStep::Mean),
    ];
    (op, 0..64usize, 0..64usize)
}

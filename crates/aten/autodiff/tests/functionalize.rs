//! Functionalization without libtorch: schemas parsed from libtorch's own schema texts.

use std::collections::HashMap;
use std::sync::Arc;

use graphbug_autodiff::{functionalize, AutodiffError, Functionalized};
use graphbug_ir::schema::{Schema, Schemas};
use graphbug_ir::{parse_graph, print_graph, Graph, NodeId, NodeKind, OpName};

/// The schemas the tests use, exactly as libtorch 2.13 prints them.
const SCHEMAS: &[&str] = &[
    "aten::_foreach_add.Scalar(Tensor[] self, Scalar scalar) -> Tensor[]",
    "aten::_foreach_add_.Scalar(Tensor(a!)[] self, Scalar scalar) -> ()",
    "aten::_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor, Tensor running_mean_out, Tensor running_var_out)",
    "aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor",
    "aten::_unsafe_view(Tensor self, SymInt[] size) -> Tensor",
    "aten::alias(Tensor(a) self) -> Tensor(a)",
    "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    "aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
    "aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
    "aten::bitwise_not(Tensor self) -> Tensor",
    "aten::bmm(Tensor self, Tensor mat2) -> Tensor",
    "aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
    "aten::convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor",
    "aten::copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor",
    "aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
    "aten::diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)",
    "aten::diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor",
    "aten::embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
    "aten::empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    "aten::expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)",
    "aten::fill.Scalar(Tensor self, Scalar value) -> Tensor",
    "aten::fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)",
    "aten::fill_diagonal_(Tensor(a!) self, Scalar fill_value, bool wrap=False) -> Tensor(a!)",
    "aten::floor_divide(Tensor self, Tensor other) -> Tensor",
    "aten::floor_divide_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)",
    "aten::gelu(Tensor self, *, str approximate=\"none\") -> Tensor",
    "aten::index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor",
    "aten::index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor(a!)",
    "aten::masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor",
    "aten::max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
    "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor",
    "aten::mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)",
    "aten::native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
    "aten::native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)",
    "aten::ones(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None) -> Tensor",
    "aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)",
    "aten::relu(Tensor self) -> Tensor",
    "aten::relu_(Tensor(a!) self) -> Tensor(a!)",
    "aten::select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)",
    "aten::select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor",
    "aten::sigmoid(Tensor self) -> Tensor",
    "aten::sigmoid_(Tensor(a!) self) -> Tensor(a!)",
    "aten::slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)",
    "aten::slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor",
    "aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
    "aten::squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)",
    "aten::t(Tensor(a) self) -> Tensor(a)",
    "aten::t_(Tensor(a!) self) -> Tensor(a!)",
    "aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)",
    "aten::tril(Tensor self, SymInt diagonal=0) -> Tensor",
    "aten::unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]",
    "aten::unsqueeze(Tensor(a) self, int dim) -> Tensor(a)",
    "aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
];

/// A schema table built with `Schema::parse`.
struct Table(HashMap<OpName, Arc<Schema>>);

impl Table {
    fn new() -> Table {
        let mut map = HashMap::new();
        for text in SCHEMAS {
            let s = Schema::parse(text).unwrap_or_else(|e| panic!("{e}"));
            let (ns, name) = s.name.split_once("::").expect("qualified schema name");
            let overload = if s.overload.is_empty() {
                "default"
            } else {
                s.overload.as_str()
            };
            map.insert(OpName::new(ns, name, overload), Arc::new(s));
        }
        Table(map)
    }
}

impl Schemas for Table {
    fn schema(&self, op: &OpName) -> Option<Arc<Schema>> {
        self.0.get(op).cloned()
    }
}

fn graph(text: &str) -> Graph {
    parse_graph(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn run(text: &str) -> Functionalized {
    let f = functionalize(&graph(text), &Table::new()).unwrap_or_else(|e| panic!("{e}"));
    f.graph.verify().unwrap();
    // Deterministic, and functional graphs are a fixed point.
    let again = functionalize(&graph(text), &Table::new()).unwrap();
    assert_eq!(again, f);
    let twice = functionalize(&f.graph, &Table::new()).unwrap();
    assert_eq!(
        twice.graph, f.graph,
        "functionalizing twice changes the graph"
    );
    assert!(twice.mutated_inputs.is_empty());
    f
}

fn unsupported(text: &str) -> (String, String, String) {
    match functionalize(&graph(text), &Table::new()) {
        Err(AutodiffError::Unsupported { node, op, message }) => (node, op, message),
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

fn fixture(path: &str) -> String {
    let p = format!(
        "{}/../../../tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// The op names of the call nodes the outputs `outputs` depend on, sorted.
fn live_ops(g: &Graph, outputs: std::ops::Range<usize>) -> Vec<String> {
    let mut live = vec![false; g.nodes.len()];
    for v in &g.outputs()[outputs] {
        v.for_each_node(&mut |n| live[n.index()] = true);
    }
    for id in g.ids().rev() {
        if live[id.index()] {
            g.node(id).for_each_input(|s| live[s.index()] = true);
        }
    }
    let mut ops: Vec<String> = g
        .ids()
        .filter(|i| live[i.index()])
        .filter_map(|i| g.node(i).op().map(OpName::qualified))
        .collect();
    ops.sort();
    ops
}

fn output_node(g: &Graph, i: usize) -> NodeId {
    g.outputs()[i].as_node().expect("a node output")
}

#[test]
fn relu_on_an_intermediate_becomes_relu() {
    let f = run(r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]"):
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(x, 1)
        relu_: "f32[3, 4]" = torch.ops.aten.relu_.default(add)
        mul: "f32[3, 4]" = torch.ops.aten.mul.Tensor(add, 2)
        return (relu_, mul)
"#);
    assert_eq!(
        print_graph(&f.graph),
        r#"class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]"):
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(x, 1);  x = None
        relu: "f32[3, 4]" = torch.ops.aten.relu.default(add);  add = None
        mul: "f32[3, 4]" = torch.ops.aten.mul.Tensor(relu, 2)
        return (relu, mul)
"#
    );
    assert!(f.mutated_inputs.is_empty());
}

#[test]
fn relu_on_an_input_returns_its_new_value_first() {
    let f = run(r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", y: "f32[3, 4]"):
        relu_: "f32[3, 4]" = torch.ops.aten.relu_.default(y)
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(x, y)
        return (add,)
"#);
    assert_eq!(
        print_graph(&f.graph),
        r#"class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", y: "f32[3, 4]"):
        relu: "f32[3, 4]" = torch.ops.aten.relu.default(y);  y = None
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(x, relu);  x = None
        return (relu, add)
"#
    );
    assert_eq!(f.mutated_inputs, [1]);
}

#[test]
fn add_chains_thread_the_new_value_through() {
    let f = run(r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", y: "f32[3, 4]", z: "f32[3, 4]"):
        add_: "f32[3, 4]" = torch.ops.aten.add_.Tensor(x, y)
        add__1: "f32[3, 4]" = torch.ops.aten.add_.Tensor(add_, y, alpha = 2)
        mul_: "f32[3, 4]" = torch.ops.aten.mul_.Tensor(y, 2)
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(x, z)
        return (add__1, add)
"#);
    assert_eq!(
        print_graph(&f.graph),
        r#"class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", y: "f32[3, 4]", z: "f32[3, 4]"):
        add_1: "f32[3, 4]" = torch.ops.aten.add.Tensor(x, y);  x = None
        add_2: "f32[3, 4]" = torch.ops.aten.add.Tensor(add_1, y, alpha = 2);  add_1 = None
        mul: "f32[3, 4]" = torch.ops.aten.mul.Tensor(y, 2);  y = None
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(add_2, z);  z = None
        return (add_2, mul, add_2, add)
"#
    );
    assert_eq!(f.mutated_inputs, [0, 1]);
}

/// The graph of the torchdynamo discussion: `y = y + 3; y[:, 0] = x[:, 0]; return y`.
#[test]
fn a_write_into_a_view_of_an_intermediate_becomes_scatters() {
    let f = run(r#"
class G(torch.nn.Module):
    def forward(self, x_1: "f32[3, 4]", y_1: "f32[3, 4]"):
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(y_1, 3)
        slice_1: "f32[3, 4]" = torch.ops.aten.slice.Tensor(x_1, 0, 0, 9223372036854775807)
        select: "f32[3]" = torch.ops.aten.select.int(slice_1, 1, 0)
        slice_2: "f32[3, 4]" = torch.ops.aten.slice.Tensor(add, 0, 0, 9223372036854775807)
        select_1: "f32[3]" = torch.ops.aten.select.int(slice_2, 1, 0)
        copy_: "f32[3]" = torch.ops.aten.copy_.default(select_1, select)
        return add
"#);
    assert_eq!(
        print_graph(&f.graph),
        r#"class G(torch.nn.Module):
    def forward(self, x_1: "f32[3, 4]", y_1: "f32[3, 4]"):
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(y_1, 3);  y_1 = None
        slice_1: "f32[3, 4]" = torch.ops.aten.slice.Tensor(x_1, 0, 0, 9223372036854775807);  x_1 = None
        select: "f32[3]" = torch.ops.aten.select.int(slice_1, 1, 0);  slice_1 = None
        slice_2: "f32[3, 4]" = torch.ops.aten.slice.Tensor(add, 0, 0, 9223372036854775807)
        select_1: "f32[3]" = torch.ops.aten.select.int(slice_2, 1, 0)
        copy: "f32[3]" = torch.ops.aten.copy.default(select_1, select);  select_1 = select = None
        select_scatter: "f32[3, 4]" = torch.ops.aten.select_scatter.default(slice_2, copy, 1, 0);  slice_2 = copy = None
        slice_scatter: "f32[3, 4]" = torch.ops.aten.slice_scatter.default(add, select_scatter, 0, 0, 9223372036854775807);  add = select_scatter = None
        return (slice_scatter,)
"#
    );
    assert!(f.mutated_inputs.is_empty());
}

#[test]
fn later_reads_of_the_base_and_its_views_see_the_write() {
    let f = run(r#"
class G(torch.nn.Module):
    def forward(self, x_1: "f32[3]", y_1: "f32[3, 4]"):
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(y_1, 3)
        t: "f32[4, 3]" = torch.ops.aten.t.default(add)
        slice_2: "f32[3, 4]" = torch.ops.aten.slice.Tensor(add, 0, 0, 9223372036854775807)
        select_1: "f32[3]" = torch.ops.aten.select.int(slice_2, 1, 0)
        select_2: "f32[3]" = torch.ops.aten.select.int(add, 1, 1)
        copy_: "f32[3]" = torch.ops.aten.copy_.default(select_1, x_1)
        mul: "f32[3, 4]" = torch.ops.aten.mul.Tensor(slice_2, 2)
        mul_1: "f32[4, 3]" = torch.ops.aten.mul.Tensor(select_2, t)
        return (copy_, select_1, mul, mul_1)
"#);
    assert_eq!(
        print_graph(&f.graph),
        r#"class G(torch.nn.Module):
    def forward(self, x_1: "f32[3]", y_1: "f32[3, 4]"):
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(y_1, 3);  y_1 = None
        t: "f32[4, 3]" = torch.ops.aten.t.default(add);  t = None
        slice_2: "f32[3, 4]" = torch.ops.aten.slice.Tensor(add, 0, 0, 9223372036854775807)
        select_1: "f32[3]" = torch.ops.aten.select.int(slice_2, 1, 0)
        select_2: "f32[3]" = torch.ops.aten.select.int(add, 1, 1);  select_2 = None
        copy: "f32[3]" = torch.ops.aten.copy.default(select_1, x_1);  select_1 = x_1 = None
        select_scatter: "f32[3, 4]" = torch.ops.aten.select_scatter.default(slice_2, copy, 1, 0);  slice_2 = None
        slice_scatter: "f32[3, 4]" = torch.ops.aten.slice_scatter.default(add, select_scatter, 0, 0, 9223372036854775807);  add = None
        mul: "f32[3, 4]" = torch.ops.aten.mul.Tensor(select_scatter, 2);  select_scatter = None
        select: "f32[3]" = torch.ops.aten.select.int(slice_scatter, 1, 1)
        t_1: "f32[4, 3]" = torch.ops.aten.t.default(slice_scatter);  slice_scatter = None
        mul_1: "f32[4, 3]" = torch.ops.aten.mul.Tensor(select, t_1);  select = t_1 = None
        return (copy, copy, mul, mul_1)
"#
    );
}

#[test]
fn writes_through_views_of_inputs_are_inverted() {
    let f = run(r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", y: "f32[2, 3, 4]"):
        t: "f32[4, 3]" = torch.ops.aten.t.default(x)
        relu_: "f32[4, 3]" = torch.ops.aten.relu_.default(t)
        permute: "f32[4, 2, 3]" = torch.ops.aten.permute.default(y, [2, 0, 1])
        unsqueeze: "f32[4, 1, 2, 3]" = torch.ops.aten.unsqueeze.default(permute, 1)
        view: "f32[4, 6]" = torch.ops.aten.view.default(permute, [4, 6])
        sigmoid_: "f32[4, 1, 2, 3]" = torch.ops.aten.sigmoid_.default(unsqueeze)
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(x, 1)
        return (add, y)
"#);
    assert_eq!(
        print_graph(&f.graph),
        r#"class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", y: "f32[2, 3, 4]"):
        t: "f32[4, 3]" = torch.ops.aten.t.default(x);  x = None
        relu: "f32[4, 3]" = torch.ops.aten.relu.default(t);  t = None
        t_1: "f32[3, 4]" = torch.ops.aten.t.default(relu);  relu = None
        permute: "f32[4, 2, 3]" = torch.ops.aten.permute.default(y, [2, 0, 1]);  y = None
        unsqueeze: "f32[4, 1, 2, 3]" = torch.ops.aten.unsqueeze.default(permute, 1)
        view: "f32[4, 6]" = torch.ops.aten.view.default(permute, [4, 6]);  permute = view = None
        sigmoid: "f32[4, 1, 2, 3]" = torch.ops.aten.sigmoid.default(unsqueeze);  unsqueeze = None
        squeeze: "f32[4, 2, 3]" = torch.ops.aten.squeeze.dim(sigmoid, 1);  sigmoid = None
        permute_1: "f32[2, 3, 4]" = torch.ops.aten.permute.default(squeeze, [1, 2, 0]);  squeeze = None
        add: "f32[3, 4]" = torch.ops.aten.add.Tensor(t_1, 1)
        return (t_1, permute_1, add, permute_1)
"#
    );
    assert_eq!(f.mutated_inputs, [0, 1]);
}

#[test]
fn diagonal_squeeze_and_split_items_are_written_back() {
    let f = run(r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4, 4]"):
        diagonal: "f32[4]" = torch.ops.aten.diagonal.default(x)
        unsqueeze: "f32[1, 4]" = torch.ops.aten.unsqueeze.default(diagonal, 0)
        squeeze: "f32[4]" = torch.ops.aten.squeeze.dim(unsqueeze, 0)
        fill_: "f32[4]" = torch.ops.aten.fill_.Scalar(squeeze, 0)
        split = torch.ops.aten.split.Tensor(x, 2)
        getitem: "f32[2, 4]" = split[0]
        getitem_1: "f32[2, 4]" = split[1]
        mul_: "f32[2, 4]" = torch.ops.aten.mul_.Tensor(getitem, 2)
        add: "f32[2, 4]" = torch.ops.aten.add.Tensor(getitem_1, getitem)
        unbind = torch.ops.aten.unbind.int(x, 1)
        getitem_2: "f32[4]" = unbind[3]
        fill__1: "f32[4]" = torch.ops.aten.fill_.Scalar(getitem_2, 5)
        return (add, unsqueeze)
"#);
    let text = print_graph(&f.graph);
    for line in [
        r#"unsqueeze_1: "f32[1, 4]" = torch.ops.aten.unsqueeze.default(fill, 0)"#,
        r#"diagonal_scatter: "f32[4, 4]" = torch.ops.aten.diagonal_scatter.default(x, squeeze_1)"#,
        r#"split = torch.ops.aten.split.Tensor(diagonal_scatter, 2)"#,
        r#"slice_scatter: "f32[4, 4]" = torch.ops.aten.slice_scatter.default(diagonal_scatter, mul, 0, 0, 2, 1)"#,
        r#"select_scatter: "f32[4, 4]" = torch.ops.aten.select_scatter.default(slice_scatter, fill_1, 1, 3)"#,
        "return (select_scatter, add, unsqueeze_2)",
    ] {
        assert!(text.contains(line), "missing `{line}` in\n{text}");
    }
    assert_eq!(f.mutated_inputs, [0]);
}

#[test]
fn copy_index_put_out_and_foreach_become_functional() {
    let f = run(r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", s: "f64[4]", i: "i64[2]", z: "f32[3, 4]", v: "f32[4]"):
        copy_: "f32[3, 4]" = torch.ops.aten.copy_.default(x, s)
        mul: "f32[3, 4]" = torch.ops.aten.mul.Tensor(x, 2)
        index_put_: "f32[3, 4]" = torch.ops.aten.index_put_.default(mul, [i], v)
        add: "f32[3, 4]" = torch.ops.aten.add.out(x, mul, alpha = 3, out = z)
        _foreach_add_ = torch.ops.aten._foreach_add_.Scalar([x, z], 1)
        floor_divide_: "f32[3, 4]" = torch.ops.aten.floor_divide_.Tensor(mul, add)
        return (mul,)
"#);
    assert_eq!(
        print_graph(&f.graph),
        r#"class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]", s: "f64[4]", i: "i64[2]", z: "f32[3, 4]", v: "f32[4]"):
        copy: "f32[3, 4]" = torch.ops.aten.copy.default(x, s);  x = s = None
        mul: "f32[3, 4]" = torch.ops.aten.mul.Tensor(copy, 2)
        index_put: "f32[3, 4]" = torch.ops.aten.index_put.default(mul, [i], v);  mul = i = v = None
        add_1: "f32[3, 4]" = torch.ops.aten.add.Tensor(copy, index_put, alpha = 3)
        _foreach_add = torch.ops.aten._foreach_add.Scalar([copy, add_1], 1);  copy = add_1 = None
        getitem: "f32[3, 4]" = _foreach_add[0]
        getitem_1: "f32[3, 4]" = _foreach_add[1];  _foreach_add = None
        floor_divide: "f32[3, 4]" = torch.ops.aten.floor_divide.default(index_put, getitem_1);  index_put = None
        return (getitem, getitem_1, floor_divide)
"#
    );
    assert_eq!(f.mutated_inputs, [0, 3]);
}

#[test]
fn a_second_getitem_of_a_written_output_sees_the_write() {
    let f = run(r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[8, 4]"):
        max_pool2d_with_indices = torch.ops.aten.max_pool2d_with_indices.default(x, [2, 2])
        getitem: "f32[4, 2]" = max_pool2d_with_indices[0]
        getitem_1: "f32[4, 2]" = max_pool2d_with_indices[0]
        relu_: "f32[4, 2]" = torch.ops.aten.relu_.default(getitem)
        return (getitem_1,)
"#);
    let text = print_graph(&f.graph);
    assert!(
        text.contains("getitem_1: \"f32[4, 2]\" = max_pool2d_with_indices[0]"),
        "{text}"
    );
    assert!(text.ends_with("return (relu,)\n"), "{text}");
}

#[test]
fn batch_norm_in_training_updates_the_running_stats_functionally() {
    let f = run(r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4, 3, 2, 2]", w: "f32[3]", b: "f32[3]", rm: "f32[3]", rv: "f32[3]"):
        native_batch_norm = torch.ops.aten.native_batch_norm.default(x, w, b, rm, rv, True, 0.1, 1e-05)
        getitem: "f32[4, 3, 2, 2]" = native_batch_norm[0]
        getitem_1: "f32[3]" = native_batch_norm[1]
        getitem_2: "f32[3]" = native_batch_norm[2]
        add: "f32[3]" = torch.ops.aten.add.Tensor(rm, 1)
        return (getitem, add)
"#);
    assert_eq!(
        print_graph(&f.graph),
        r#"class G(torch.nn.Module):
    def forward(self, x: "f32[4, 3, 2, 2]", w: "f32[3]", b: "f32[3]", rm: "f32[3]", rv: "f32[3]"):
        _native_batch_norm_legit_functional = torch.ops.aten._native_batch_norm_legit_functional.default(x, w, b, rm, rv, True, 0.1, 1e-05);  x = w = b = rm = rv = None
        getitem: "f32[4, 3, 2, 2]" = _native_batch_norm_legit_functional[0]
        getitem_1: "f32[3]" = _native_batch_norm_legit_functional[1];  getitem_1 = None
        getitem_2: "f32[3]" = _native_batch_norm_legit_functional[2];  getitem_2 = None
        getitem_3: "f32[3]" = _native_batch_norm_legit_functional[3]
        getitem_4: "f32[3]" = _native_batch_norm_legit_functional[4];  _native_batch_norm_legit_functional = None
        add: "f32[3]" = torch.ops.aten.add.Tensor(getitem_3, 1)
        return (getitem_3, getitem_4, getitem, add)
"#
    );
    assert_eq!(f.mutated_inputs, [3, 4]);
    // Every output of the 5-output node carries its meta.
    let bn = &f.graph.nodes[5];
    assert_eq!(bn.meta.item(0).unwrap().to_string(), "f32[4, 3, 2, 2]");
    assert_eq!(bn.meta.item(4).unwrap().to_string(), "f32[3]");
}

#[test]
fn batch_norm_in_eval_mode_mutates_nothing() {
    let text = r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4, 3, 2, 2]", w: "f32[3]", b: "f32[3]", rm: "f32[3]", rv: "f32[3]"):
        native_batch_norm = torch.ops.aten.native_batch_norm.default(x, w, b, rm, rv, False, 0.1, 1e-05)
        getitem: "f32[4, 3, 2, 2]" = native_batch_norm[0]
        return (getitem,)
"#;
    let f = run(text);
    assert_eq!(f.graph, graph(text));
    assert!(f.mutated_inputs.is_empty());
    let (node, _, message) = unsupported(&text.replace("False, 0.1", "x, 0.1"));
    assert_eq!(node, "native_batch_norm");
    assert!(message.contains("training"), "{message}");
}

#[test]
fn the_cnn_matches_aot_autograds_functional_forward() {
    let f = run(&fixture("cnn/forward.py"));
    // running_mean, running_var and the batch counter, in input order.
    assert_eq!(f.mutated_inputs, [8, 9, 10]);
    let g = &f.graph;
    assert_eq!(g.outputs().len(), 4);
    let bn = g.find("_native_batch_norm_legit_functional").unwrap();
    for (out, index) in [(0, 3), (1, 4)] {
        assert_eq!(
            g.node(output_node(g, out)).kind,
            NodeKind::GetItem { source: bn, index },
            "output {out}"
        );
    }
    assert_eq!(g.node(output_node(g, 2)).name, "add");
    assert_eq!(
        g.node(output_node(g, 2)).op(),
        Some(&OpName::aten("add", "Tensor"))
    );
    assert_eq!(g.node(output_node(g, 3)).name, "addmm");
    let joint = graph(&fixture("cnn/joint.py"));
    assert_eq!(live_ops(g, 0..4), live_ops(&joint, 0..4));
    assert!(
        !print_graph(g).contains("_("),
        "an in-place op is left:\n{g}"
    );
}

#[test]
fn functional_graphs_come_back_unchanged() {
    for path in ["mlp/forward.py", "gpt4/forward.py"] {
        let text = fixture(path);
        let f = run(&text);
        assert_eq!(f.graph, graph(&text), "{path}");
        assert_eq!(print_graph(&f.graph), print_graph(&graph(&text)), "{path}");
        assert!(f.mutated_inputs.is_empty(), "{path}");
    }
}

#[test]
fn an_in_place_op_without_an_out_of_place_form_is_refused() {
    let (node, op, message) = unsupported(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 3]"):
        add: "f32[3, 3]" = torch.ops.aten.add.Tensor(x, 1)
        fill_diagonal_: "f32[3, 3]" = torch.ops.aten.fill_diagonal_.default(add, 0)
        return (add,)
"#,
    );
    assert_eq!(node, "fill_diagonal_");
    assert_eq!(op, "aten::fill_diagonal_.default");
    assert!(message.contains("no out-of-place form"), "{message}");
    assert!(message.contains("aten::fill_diagonal.default"), "{message}");
}

#[test]
fn unsupported_mutations_name_the_node() {
    let cases = [
        (
            r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3]"):
        _tensor_constant0: "f32[3]" = self._tensor_constant0
        slice_1: "f32[2]" = torch.ops.aten.slice.Tensor(_tensor_constant0, 0, 0, 2)
        add_: "f32[2]" = torch.ops.aten.add_.Tensor(slice_1, 1)
        return (x,)
"#,
            "add_",
            "module constant `self._tensor_constant0`",
        ),
        (
            r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3]"):
        expand: "f32[2, 3]" = torch.ops.aten.expand.default(x, [2, 3])
        relu_: "f32[2, 3]" = torch.ops.aten.relu_.default(expand)
        return (relu_,)
"#,
            "relu_",
            "`expand`",
        ),
        (
            r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]"):
        t_: "f32[4, 3]" = torch.ops.aten.t_.default(x)
        return (t_,)
"#,
            "t_",
            "metadata",
        ),
        (
            r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[3, 4]"):
        cos: "f32[3, 4]" = torch.ops.aten.cos.default(x)
        return (cos,)
"#,
            "cos",
            "no schema",
        ),
    ];
    for (text, want_node, want_message) in cases {
        let (node, _, message) = unsupported(text);
        assert_eq!(node, want_node);
        assert!(message.contains(want_message), "{message}");
    }
}

#[test]
fn long_alias_and_in_place_chains_do_not_nest() {
    let n = 5000;
    let mut text = String::from(
        "class G(torch.nn.Module):\n    def forward(self, x: \"f32[4]\"):\n        alias: \"f32[4]\" = torch.ops.aten.alias.default(x)\n",
    );
    for i in 1..n {
        let prev = if i == 1 {
            "alias".to_string()
        } else {
            format!("alias_{}", i - 1)
        };
        text += &format!("        alias_{i}: \"f32[4]\" = torch.ops.aten.alias.default({prev})\n");
    }
    text += &format!(
        "        relu_: \"f32[4]\" = torch.ops.aten.relu_.default(alias_{})\n",
        n - 1
    );
    text += "        add_: \"f32[4]\" = torch.ops.aten.add_.Tensor(x, 1)\n";
    for i in 1..n {
        let prev = if i == 1 {
            "add_".to_string()
        } else {
            format!("add__{}", i - 1)
        };
        text += &format!("        add__{i}: \"f32[4]\" = torch.ops.aten.add_.Tensor({prev}, 1)\n");
    }
    text += &format!("        return (alias_{},)\n", n - 1);
    let f = functionalize(&graph(&text), &Table::new()).unwrap();
    f.graph.verify().unwrap();
    assert_eq!(f.mutated_inputs, [0]);
    // The last add is the new input, and the alias chain is replayed from it.
    let out = output_node(&f.graph, 1);
    assert_eq!(
        f.graph.node(out).op(),
        Some(&OpName::aten("alias", "default"))
    );
    assert_eq!(
        f.graph.node(output_node(&f.graph, 0)).name,
        format!("add_{}", n - 1)
    );
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    // A graph whose getitem reads past the outputs of its source.
    let mut g = graph(
        r#"
class G(torch.nn.Module):
    def forward(self, x: "f32[4, 3, 2, 2]", w: "f32[3]", b: "f32[3]", rm: "f32[3]", rv: "f32[3]"):
        native_batch_norm = torch.ops.aten.native_batch_norm.default(x, w, b, rm, rv, True, 0.1, 1e-05)
        getitem: "f32[4, 3, 2, 2]" = native_batch_norm[0]
        return (getitem,)
"#,
    );
    if let NodeKind::GetItem { index, .. } = &mut g.nodes[6].kind {
        *index = 7;
    }
    assert!(functionalize(&g, &Table::new()).is_err());
    // A graph with no output.
    g.output = None;
    assert!(matches!(
        functionalize(&g, &Table::new()),
        Err(AutodiffError::Ir(_))
    ));
}

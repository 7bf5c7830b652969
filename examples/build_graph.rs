//! Builds a small graph with `GraphBuilder`, prints it in PyTorch's text format, parses it
//! back, and runs the IR passes on it.
//!
//! `cargo run --example build_graph`

use graphbug::ir::passes::{
    default_side_effects, eliminate_common_subexpressions, eliminate_dead_code,
};
use graphbug::ir::{parse_graph, print_graph, Dtype, GraphBuilder, IrError, OpName, TensorMeta};

fn main() -> Result<(), IrError> {
    let f32 = |shape: &[i64]| TensorMeta::new(Dtype::Float32, shape);
    let mut b = GraphBuilder::new("Repro");
    let x = b.input("primals_1", f32(&[2, 8]));
    let w = b.input("primals_2", f32(&[16, 8]));
    let t = b.call(OpName::aten("t", "default"), [w.into()]);
    let mm = b.call(OpName::aten("mm", "default"), [x.into(), t.into()]);
    // The same relu twice (CSE merges it) and an unused sin (DCE drops it).
    let r1 = b.call(OpName::aten("relu", "default"), [mm.into()]);
    let r2 = b.call(OpName::aten("relu", "default"), [mm.into()]);
    b.call(OpName::aten("sin", "default"), [mm.into()]);
    let sum = b.call(OpName::aten("add", "Tensor"), [r1.into(), r2.into()]);
    b.output([sum.into()]);
    let graph = b.finish()?;

    let text = print_graph(&graph);
    println!("{text}");
    assert_eq!(parse_graph(&text)?, graph);

    let cleaned = eliminate_dead_code(
        &eliminate_common_subexpressions(&graph, &default_side_effects),
        &default_side_effects,
    );
    println!("after CSE and DCE:\n{}", print_graph(&cleaned));
    Ok(())
}

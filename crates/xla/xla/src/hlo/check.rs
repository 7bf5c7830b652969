//! `graphbug check` of an HLO module: what XLA's parser and verifier would refuse for
//! reasons a reader can see in the text, each named with its line, column and instruction.
//!
//! Checked: names unique in their computation; every operand defined on an earlier line
//! of its computation (XLA reads in order, so no cycle either); one `ROOT`; parameters
//! numbered 0..n without gaps; operand shapes written in the text equal to their
//! definitions'; a computation's signature equal to its parameters and root; the
//! entry computation's layout (`entry_computation_layout`) equal to the entry's; every
//! computation an attribute calls defined; `get-tuple-element` indices within the tuple and
//! `tuple` shapes made of their operands'; the operand count of elementwise ops, and the
//! shapes of their operands and result (XLA's verifier: the same sizes, no implicit
//! broadcast; the same element types but where an op says otherwise). What needs any other
//! op's semantics (a shape it computes) is the compiler's to say: `graphbug run` compiles.

use std::collections::HashMap;

use super::shape::{parse_shape_all, Shape};
use super::text::{HloError, Instruction, Module, Operands};

/// What a module holds, once it checks: instructions (all computations), the entry's
/// parameters and outputs (a tuple root's elements, or one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    /// Instructions over every computation.
    pub instructions: usize,
    /// The entry computation's parameters.
    pub parameters: usize,
    /// The entry computation's outputs.
    pub outputs: usize,
}

/// Checks `module` (see the module docs).
pub fn check(module: &Module) -> Result<Counts, HloError> {
    // `ENTRY` marks the entry; where nothing does, the last computation is it, as XLA
    // reads it (the reader marks it so).
    let entries: Vec<usize> = module
        .computations
        .iter()
        .enumerate()
        .filter(|(_, c)| c.entry_keyword)
        .map(|(k, _)| k)
        .collect();
    let entry = match entries.as_slice() {
        [k] => *k,
        [] if module.entry().is_some() => module.entry().expect("just checked"),
        [] => {
            let c = module
                .computations
                .last()
                .expect("a module has a computation");
            return Err(at_line(
                c.line,
                format!("module `{}` has no ENTRY computation", module.name),
            ));
        }
        [_, second, ..] => {
            return Err(at_line(
                module.computations[*second].line,
                format!(
                    "a second ENTRY computation, `{}`",
                    module.computations[*second].name
                ),
            ))
        }
    };
    let mut names: HashMap<&str, usize> = HashMap::new();
    for c in &module.computations {
        if let Some(line) = names.insert(&c.name, c.line) {
            return Err(at_line(
                c.line,
                format!(
                    "computation `{}` is defined twice (first on line {line})",
                    c.name
                ),
            ));
        }
    }
    for c in &module.computations {
        // Names are the computation's: XLA's parser renames a name another computation
        // used (`i` becomes `i.1`), and refuses one twice in a computation.
        let mut by_name: HashMap<&str, &Instruction> = HashMap::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (k, i) in c.instructions.iter().enumerate() {
            index.insert(&i.name, k);
            if let Some(first) = by_name.get(i.name.as_str()) {
                let line = first.line;
                return Err(on(
                    i,
                    1,
                    format!(
                        "instruction `{}` is defined twice (first on line {line})",
                        i.name
                    ),
                ));
            }
            by_name.insert(&i.name, i);
        }
        let roots: Vec<&Instruction> = c.instructions.iter().filter(|i| i.is_root).collect();
        if roots.len() > 1 {
            return Err(on(
                roots[1],
                1,
                format!("computation `{}` has a second ROOT", c.name),
            ));
        }
        if c.instructions.is_empty() {
            return Err(at_line(
                c.line,
                format!("computation `{}` has no instruction", c.name),
            ));
        }
        // Parameters 0..n.
        let params = c.parameters();
        for (k, p) in params.iter().enumerate() {
            if let Operands::Parameter(n) = p.operands {
                if n != k as u64 {
                    return Err(on(p, 1, format!("parameter({n}) in computation `{}`, which has {} parameters (numbers must be 0..{})", c.name, params.len(), params.len())));
                }
            }
        }
        for (k, i) in c.instructions.iter().enumerate() {
            if !i.shape_written && i.shape == Shape::Tuple(Vec::new()) && i.opcode != "tuple" {
                return Err(on(
                    i,
                    1,
                    format!(
                        "`{}` is written without a shape, and graphbug infers one only for elementwise ops, `tuple` and `get-tuple-element` (XLA infers more): write its shape",
                        i.opcode
                    ),
                ));
            }
            if let Operands::Values(ops) = &i.operands {
                for o in ops {
                    let Some(def) = by_name.get(o.name.as_str()) else {
                        return Err(at_operand(
                            i,
                            o,
                            format!(
                                "operand `{}` is not defined in computation `{}`",
                                o.name, c.name
                            ),
                        ));
                    };
                    if index[o.name.as_str()] >= k {
                        // XLA's parser reads an operand's name only once it is defined.
                        return Err(at_operand(
                            i,
                            o,
                            format!(
                                "operand `{}` is used before its definition on line {} (XLA's parser reads instructions in order)",
                                o.name, def.line
                            ),
                        ));
                    }
                    if let Some(written) = &o.shape {
                        // XLA's parser sets a layout on a shape written without one, and
                        // compares operand shapes without their layouts.
                        if written.without_layout() != def.shape.without_layout() {
                            return Err(at_operand(i, o, format!("operand `{}` is written as {written}, but is defined as {} on line {}", o.name, def.shape, def.line)));
                        }
                    }
                }
            }
            for called in i.called() {
                if !names.contains_key(called.as_str()) {
                    return Err(on(
                        i,
                        1,
                        format!("calls computation `{called}`, which is not defined"),
                    ));
                }
            }
            check_tuples(i, &by_name)?;
            check_elementwise(i, &by_name)?;
        }
        if let Some((sig_params, result)) = &c.signature {
            if sig_params.len() != params.len() {
                return Err(at_line(
                    c.line,
                    format!(
                        "computation `{}` declares {} parameters and has {}",
                        c.name,
                        sig_params.len(),
                        params.len()
                    ),
                ));
            }
            for ((name, shape), p) in sig_params.iter().zip(&params) {
                if shape.without_layout() != p.shape.without_layout() {
                    return Err(on(
                        p,
                        1,
                        format!(
                            "parameter `{}` is {}, but computation `{}` declares `{name}: {shape}`",
                            p.name, p.shape, c.name
                        ),
                    ));
                }
            }
            let root = c.root().expect("not empty");
            if result.without_layout() != root.shape.without_layout() {
                return Err(on(
                    root,
                    1,
                    format!(
                        "ROOT `{}` is {}, but computation `{}` declares it returns {result}",
                        root.name, root.shape, c.name
                    ),
                ));
            }
        }
    }
    let e = &module.computations[entry];
    let params = e.parameters();
    let root = e.root().expect("not empty");
    if let Some(layout) = module.attr("entry_computation_layout") {
        let text = layout
            .trim()
            .strip_prefix('{')
            .and_then(|l| l.strip_suffix('}'))
            .unwrap_or(layout);
        let (args, result) = text.rsplit_once("->").ok_or_else(|| {
            at_line(
                1,
                format!("entry_computation_layout `{layout}` has no `->`"),
            )
        })?;
        let args = parse_shape_all(args.trim())
            .map_err(|m| at_line(1, format!("entry_computation_layout: {m}")))?;
        let result = parse_shape_all(result.trim())
            .map_err(|m| at_line(1, format!("entry_computation_layout: {m}")))?;
        let declared = args.tuple().unwrap_or(&[]);
        if declared.len() != params.len() {
            return Err(at_line(
                1,
                format!(
                    "entry_computation_layout declares {} parameters; ENTRY `{}` has {}",
                    declared.len(),
                    e.name,
                    params.len()
                ),
            ));
        }
        for (shape, p) in declared.iter().zip(&params) {
            if shape.without_layout() != p.shape.without_layout() {
                return Err(on(
                    p,
                    1,
                    format!(
                        "parameter `{}` is {}, but entry_computation_layout declares {shape}",
                        p.name, p.shape
                    ),
                ));
            }
        }
        if result.without_layout() != root.shape.without_layout() {
            return Err(on(
                root,
                1,
                format!(
                    "ROOT `{}` is {}, but entry_computation_layout declares {result}",
                    root.name, root.shape
                ),
            ));
        }
    }
    Ok(Counts {
        instructions: module.num_instructions(),
        parameters: params.len(),
        outputs: match &root.shape {
            Shape::Tuple(e) => e.len(),
            Shape::Array { .. } => 1,
        },
    })
}

/// `get-tuple-element` within its tuple and of its element's shape; `tuple` made of its
/// operands' shapes.
fn check_tuples(i: &Instruction, by_name: &HashMap<&str, &Instruction>) -> Result<(), HloError> {
    let operand = |k: usize| -> Option<&Instruction> {
        i.operand_names()
            .get(k)
            .and_then(|n| by_name.get(n).copied())
    };
    match i.opcode.as_str() {
        "get-tuple-element" => {
            let Some(src) = operand(0) else { return Ok(()) };
            let index: usize = i
                .attr("index")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| on(i, 1, "get-tuple-element has no `index=N`".into()))?;
            let Some(elements) = src.shape.tuple() else {
                return Err(on(
                    i,
                    1,
                    format!(
                        "get-tuple-element of `{}`, which is not a tuple ({})",
                        src.name, src.shape
                    ),
                ));
            };
            let Some(e) = elements.get(index) else {
                return Err(on(
                    i,
                    1,
                    format!(
                        "index={index} of `{}`, a tuple of {}",
                        src.name,
                        elements.len()
                    ),
                ));
            };
            if e.without_layout() != i.shape.without_layout() {
                return Err(on(
                    i,
                    1,
                    format!(
                        "is {}, but element {index} of `{}` is {e}",
                        i.shape, src.name
                    ),
                ));
            }
        }
        "tuple" => {
            let ops: Vec<&Instruction> = (0..i.operand_names().len()).filter_map(operand).collect();
            let made = Shape::Tuple(ops.iter().map(|o| o.shape.without_layout()).collect());
            if made != i.shape.without_layout() {
                return Err(on(
                    i,
                    1,
                    format!("is {}, but its operands make {made}", i.shape),
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// How many operands each elementwise opcode takes. HLO's opcode set is fixed and small
/// (XLA's `HloOpcode`), so this one table is kept by hand rather than asked of XLA; no other
/// table here grows op by op.
const ELEMENTWISE: [(&str, usize); 57] = [
    ("abs", 1),
    ("acos", 1),
    ("acosh", 1),
    ("asin", 1),
    ("asinh", 1),
    ("atanh", 1),
    ("bitcast-convert", 1),
    ("cbrt", 1),
    ("ceil", 1),
    ("convert", 1),
    ("copy", 1),
    ("cosh", 1),
    ("cosine", 1),
    ("count-leading-zeros", 1),
    ("erf", 1),
    ("exponential", 1),
    ("exponential-minus-one", 1),
    ("floor", 1),
    ("imag", 1),
    ("is-finite", 1),
    ("log", 1),
    ("log-plus-one", 1),
    ("logistic", 1),
    ("negate", 1),
    ("not", 1),
    ("popcnt", 1),
    ("real", 1),
    ("reduce-precision", 1),
    ("round-nearest-afz", 1),
    ("round-nearest-even", 1),
    ("rsqrt", 1),
    ("sign", 1),
    ("sine", 1),
    ("sinh", 1),
    ("sqrt", 1),
    ("tan", 1),
    ("tanh", 1),
    ("add", 2),
    ("and", 2),
    ("atan2", 2),
    ("compare", 2),
    ("complex", 2),
    ("divide", 2),
    ("maximum", 2),
    ("minimum", 2),
    ("multiply", 2),
    ("or", 2),
    ("power", 2),
    ("remainder", 2),
    ("shift-left", 2),
    ("shift-right-arithmetic", 2),
    ("shift-right-logical", 2),
    ("stochastic-convert", 2),
    ("subtract", 2),
    ("xor", 2),
    ("clamp", 3),
    ("select", 3),
];

/// The number of operands elementwise `opcode` takes, if it is one.
pub fn elementwise_arity(opcode: &str) -> Option<usize> {
    ELEMENTWISE
        .iter()
        .find(|(op, _)| *op == opcode)
        .map(|(_, n)| *n)
}

/// An array's element type and sizes.
fn array(s: &Shape) -> Option<(&str, &[i64])> {
    match s {
        Shape::Array { ty, dims, .. } if ty != "token" && ty != "opaque" => Some((ty, dims)),
        _ => None,
    }
}

/// The real element type of complex `ty` (`c64` → `f32`); `ty` itself otherwise.
fn real_of(ty: &str) -> &str {
    match ty {
        "c64" => "f32",
        "c128" => "f64",
        t => t,
    }
}

/// The element type elementwise `opcode` gives operands of element type `ty`; `None` where
/// the instruction says it (`convert`).
fn result_type<'a>(opcode: &str, ty: &'a str) -> Option<&'a str> {
    match opcode {
        "convert" | "bitcast-convert" | "stochastic-convert" => None,
        "compare" | "is-finite" => Some("pred"),
        "real" | "imag" | "abs" => Some(real_of(ty)),
        "complex" => Some(match ty {
            "f32" => "c64",
            "f64" => "c128",
            t => t,
        }),
        _ => Some(ty),
    }
}

/// The operand whose shape an elementwise op's result follows: `select`'s `on_true`,
/// `clamp`'s operand, the first of the others.
fn shaping_operand(opcode: &str) -> usize {
    match opcode {
        "select" | "clamp" => 1,
        _ => 0,
    }
}

/// The shape XLA infers for elementwise `opcode` on operands of `shapes`, written without a
/// shape; `None` where it is not elementwise, its operands are no arrays, or the instruction
/// must say it (`convert`).
pub fn infer_elementwise(opcode: &str, shapes: &[&Shape]) -> Option<Shape> {
    if elementwise_arity(opcode)? != shapes.len() {
        return None;
    }
    let Shape::Array {
        ty, dims, dynamic, ..
    } = shapes[shaping_operand(opcode)]
    else {
        return None;
    };
    Some(Shape::Array {
        ty: result_type(opcode, ty)?.to_string(),
        dims: dims.clone(),
        dynamic: dynamic.clone(),
        layout: None,
    })
}

/// An elementwise instruction's operand count, its operands' shapes (the same sizes, but
/// `select`'s predicate and `clamp`'s bounds, which may be scalars; the same element types,
/// but `select`'s predicate, which is `pred`), and its result's (the operands' sizes, the
/// element type the op gives), as XLA's verifier has them.
fn check_elementwise(
    i: &Instruction,
    by_name: &HashMap<&str, &Instruction>,
) -> Result<(), HloError> {
    let Some(arity) = elementwise_arity(&i.opcode) else {
        return Ok(());
    };
    let Operands::Values(ops) = &i.operands else {
        return Ok(());
    };
    if ops.len() != arity {
        let plural = if arity == 1 { "" } else { "s" };
        return Err(on(
            i,
            ops.first().map_or(1, |o| o.column),
            format!(
                "`{}` takes {arity} operand{plural}, and is given {}",
                i.opcode,
                ops.len()
            ),
        ));
    }
    let shapes: Vec<&Shape> = ops
        .iter()
        .map(|o| &by_name[o.name.as_str()].shape)
        .collect();
    let Some(arrays) = shapes.iter().map(|s| array(s)).collect::<Option<Vec<_>>>() else {
        // A `copy` of a tuple, a token...: the compiler's to check.
        return Ok(());
    };
    let k = shaping_operand(&i.opcode);
    let (ty, dims) = arrays[k];
    for (j, (o, (oty, odims))) in ops.iter().zip(&arrays).enumerate() {
        if j == k {
            continue;
        }
        let scalar_ok = matches!((i.opcode.as_str(), j), ("select", 0) | ("clamp", 0 | 2));
        if *odims != dims && !(scalar_ok && odims.is_empty()) {
            return Err(at_operand(
                i,
                o,
                format!(
                    "the operands of `{}` have different sizes: {} and {} (HLO broadcasts nothing implicitly: write a `broadcast`)",
                    i.opcode, shapes[k].without_layout(), shapes[j].without_layout()
                ),
            ));
        }
        let want = match (i.opcode.as_str(), j) {
            ("select", 0) => "pred",
            ("stochastic-convert", _) => oty,
            _ => ty,
        };
        if *oty != want {
            return Err(at_operand(
                i,
                o,
                format!(
                    "operand `{}` of `{}` is {}; it should be of element type {want}",
                    o.name,
                    i.opcode,
                    shapes[j].without_layout()
                ),
            ));
        }
    }
    let Some((rty, rdims)) = array(&i.shape) else {
        return Err(on(
            i,
            1,
            format!(
                "`{}` gives an array, and is written as {}",
                i.opcode, i.shape
            ),
        ));
    };
    if i.opcode == "bitcast-convert" {
        // The sizes follow the element types' bit widths.
        return Ok(());
    }
    let want = result_type(&i.opcode, ty);
    if rdims != dims || want.is_some_and(|t| t != rty) {
        let expected = Shape::Array {
            ty: want.unwrap_or(rty).to_string(),
            dims: dims.to_vec(),
            dynamic: vec![false; dims.len()],
            layout: None,
        };
        return Err(on(
            i,
            1,
            format!(
                "is {}, but `{}` of {} gives {expected}",
                i.shape.without_layout(),
                i.opcode,
                shapes[k].without_layout()
            ),
        ));
    }
    Ok(())
}

/// An error at operand `o` of instruction `i`.
fn at_operand(i: &Instruction, o: &super::text::Operand, message: String) -> HloError {
    HloError {
        line: o.line,
        column: o.column,
        message,
        instruction: Some(i.name.clone()),
    }
}

/// An error on a line, with no instruction.
fn at_line(line: usize, message: String) -> HloError {
    HloError {
        line,
        column: 1,
        message,
        instruction: None,
    }
}

/// An error at `column` of instruction `i`'s first line (column 1: where it starts).
fn on(i: &Instruction, column: usize, message: String) -> HloError {
    HloError {
        line: i.line,
        column: if column == 1 {
            i.locate(i.start).1
        } else {
            column
        },
        message,
        instruction: Some(i.name.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hlo::text::parse_module;

    const GOOD: &str =
        "HloModule m, entry_computation_layout={(f32[3]{0}, f32[3]{0})->(f32[3]{0}, f32[])}

add.0 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[3]{0} parameter(0)
  y = f32[3]{0} parameter(1)
  z = f32[3]{0} add(x, y)
  c = f32[] constant(0)
  r = f32[] reduce(z, c), dimensions={0}, to_apply=add.0
  ROOT t = (f32[3]{0}, f32[]) tuple(z, r)
}
";

    #[test]
    fn a_good_module_checks_and_counts() {
        let m = parse_module(GOOD).unwrap();
        assert_eq!(
            check(&m).unwrap(),
            Counts {
                instructions: 9,
                parameters: 2,
                outputs: 2
            }
        );
    }

    #[test]
    fn what_xla_would_refuse_is_named() {
        let cases = [
            ("z = f32[3]{0} add(x, y)", "z = f32[3]{0} add(x, w)", "12:24: instruction `z`: operand `w` is not defined in computation `e`"),
            ("to_apply=add.0", "to_apply=mul.0", "instruction `r`: calls computation `mul.0`, which is not defined"),
            ("y = f32[3]{0} parameter(1)", "y = f32[3]{0} parameter(2)", "instruction `y`: parameter(2) in computation `e`, which has 2 parameters"),
            ("->(f32[3]{0}, f32[])}", "->(f32[3]{0}, f32[2])}", "ROOT `t` is (f32[3]{0}, f32[]), but entry_computation_layout declares (f32[3]{0}, f32[2])"),
            ("add.0 {", "ENTRY add.0 {", "a second ENTRY computation, `e`"),
            ("z = f32[3]{0} add(x, y)", "z = f32[3]{0} add(x, y, y)", "12:21: instruction `z`: `add` takes 2 operands, and is given 3"),
            ("z = f32[3]{0} add(x, y)", "w = f32[2]{0} parameter(2)\n  z = f32[3]{0} add(x, w)", "instruction `z`: the operands of `add` have different sizes: f32[3] and f32[2]"),
            ("z = f32[3]{0} add(x, y)", "z = f32[4]{0} add(x, y)", "instruction `z`: is f32[4], but `add` of f32[3] gives f32[3]"),
            ("  c = f32[] constant(0)\n", "  c = f32[] constant(0)\n  c = f32[] constant(1)\n", "instruction `c`: instruction `c` is defined twice"),
            ("z = f32[3]{0} add(x, y)", "z = f32[3]{0} add(x, z)", "instruction `z`: operand `z` is used before its definition on line 12"),
            ("ROOT t = (f32[3]{0}, f32[]) tuple(z, r)", "ROOT t = (f32[3]{0}, f32[]) tuple(z, z)", "instruction `t`: is (f32[3]{0}, f32[]), but its operands make (f32[3], f32[3])"),
        ];
        for (from, to, want) in cases {
            let text = GOOD.replacen(from, to, 1);
            assert_ne!(text, GOOD, "{from}");
            let e = parse_module(&text)
                .and_then(|m| check(&m).map(|_| ()))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{to}: {e}");
        }
        let old = "HloModule m\n\nENTRY %e (x: f32[3]) -> f32[3] {\n  %x = f32[3]{0} parameter(0)\n  ROOT %n = f32[3]{0} negate(f32[2]{0} %x)\n}\n";
        let e = check(&parse_module(old).unwrap()).unwrap_err().to_string();
        assert!(e.contains("instruction `n`: operand `x` is written as f32[2]{0}, but is defined as f32[3]{0} on line 4"), "{e}");
        let sig = old
            .replace("(x: f32[3])", "(x: f32[4])")
            .replace("f32[2]{0} %x", "f32[3]{0} %x");
        let e = check(&parse_module(&sig).unwrap()).unwrap_err().to_string();
        assert!(
            e.contains("parameter `x` is f32[3]{0}, but computation `e` declares `x: f32[4]`"),
            "{e}"
        );
    }
}

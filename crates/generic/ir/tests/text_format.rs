//! The text format: accepted spellings, values, and errors with positions.

use graphbug_ir::{
    parse_graph, print_graph, Device, Dtype, IrError, Layout, MemoryFormat, Meta, NodeKind, OpName,
    Value,
};

fn parse_err(text: &str) -> graphbug_ir::ParseError {
    match parse_graph(text) {
        Err(IrError::Parse(e)) => e,
        other => panic!("expected a parse error, got {other:?}"),
    }
}

const HEADER: &str = "class G(torch.nn.Module):\n    def forward(self, x: \"f32[2, 3]\"):\n";

fn body(lines: &str) -> String {
    format!("{HEADER}{lines}")
}

#[test]
fn every_value_kind_round_trips() {
    let text = body(concat!(
        "        a: \"f32[2, 3]\" = torch.ops.aten.foo.default(x, 1, -2, 1e-05, -inf, inf, nan, True, False, None, 'tanh', \"it's\", [1, [2, (3,)]], (), (x, 4), torch.float16, torch.int64, torch.bool, torch.channels_last, torch.sparse_coo, device(type='cpu'), device(type='cuda', index=1), -0.0, -9223372036854775808);  x = None\n",
        "        b: \"c64[]\" = torch.ops.prims.bar.kw(a, dtype = torch.complex64, layout = torch.strided, memory_format = torch.preserve_format, pin_memory = False)\n",
        "        return (a, b, None)\n"
    ));
    let g = parse_graph(&text).unwrap();
    assert_eq!(print_graph(&g), text);
    let NodeKind::Call { op, args, .. } = &g.nodes[1].kind else {
        panic!("call expected")
    };
    assert_eq!(op, &OpName::aten("foo", "default"));
    assert_eq!(args[1], Value::Int(1));
    assert_eq!(args[2], Value::Int(-2));
    assert_eq!(args[4], Value::Float(f64::NEG_INFINITY));
    assert!(matches!(args[6], Value::Float(f) if f.is_nan()));
    assert_eq!(args[10], Value::Str("tanh".into()));
    assert_eq!(args[15], Value::Dtype(Dtype::Float16));
    assert_eq!(args[18], Value::MemoryFormat(MemoryFormat::ChannelsLast));
    assert_eq!(args[19], Value::Layout(Layout::SparseCoo));
    assert_eq!(args[21], Value::Device(Device::cuda(1)));
    assert_eq!(args[23], Value::Int(i64::MIN));
    assert_eq!(g.outputs()[2], Value::None);
}

/// Complex constants (backward formulas multiply by `1j`) print as Python's repr and read
/// back to the same parts, signed zeros, infinities and NaNs included.
#[test]
fn complex_constants_round_trip() {
    let text = body(concat!(
        "        a: \"f32[2, 3]\" = torch.ops.aten.foo.default(x, 1j, (1+2j), (-0-1j), (1.5-0.25j), 0j, (-0+0j), (1e+16+1e-05j), infj, (1+nanj), (2-0j), (nan-infj), [0.5j]);  x = None\n",
        "        return (a,)\n"
    ));
    let g = parse_graph(&text).unwrap();
    assert_eq!(print_graph(&g), text);
    let NodeKind::Call { args, .. } = &g.nodes[1].kind else {
        panic!("call expected")
    };
    let parts = |v: &Value| match v {
        Value::Complex(re, im) => (*re, *im),
        other => panic!("{other:?} is no complex"),
    };
    assert_eq!(parts(&args[1]), (0.0, 1.0));
    assert_eq!(parts(&args[2]), (1.0, 2.0));
    let (re, im) = parts(&args[3]);
    assert!(re == 0.0 && re.is_sign_negative() && im == -1.0);
    let (re, im) = parts(&args[10]);
    assert!(re == 2.0 && im == 0.0 && im.is_sign_negative());
    let (re, im) = parts(&args[11]);
    assert!(re.is_nan() && im == f64::NEG_INFINITY);
    // Python's own spellings of the same numbers.
    let g = parse_graph(&body(concat!(
        "        a: \"f32[2, 3]\" = torch.ops.aten.foo.default(x, -1j, 2J, 1 + 2j)\n",
        "        return (a,)\n"
    )))
    .unwrap();
    let NodeKind::Call { args, .. } = &g.nodes[1].kind else {
        panic!("call expected")
    };
    // `-1j` is repr's spelling of complex(0.0, -1.0) (Python evaluates it to -0.0 - 1j).
    let (re, im) = parts(&args[1]);
    assert!(re == 0.0 && re.is_sign_positive() && im == -1.0);
    assert_eq!(parts(&args[2]), (0.0, 2.0));
    assert_eq!(parts(&args[3]), (1.0, 2.0));
}

#[test]
fn accepted_spellings_normalise() {
    // return [..], bare return, torch.device(...), aliases, comments, stride/device suffixes,
    // a multi-line call, get_attr constants and operator.getitem.
    let text = concat!(
        "# leading comment\n",
        "class Repro(torch.nn.Module):\n",
        "    def forward(self, x: \"f32[8, 64][64, 1]cpu\"):  # trailing\n",
        "        _tensor_constant0: \"f32[64]\" = self._tensor_constant0\n",
        "        y = torch.ops.aten.add.Tensor(x,\n",
        "                                      _tensor_constant0, alpha = 2)\n",
        "        s = torch.ops.aten.split.Tensor(y, 4, dim = -1)\n",
        "        g0 = operator.getitem(s, 0)\n",
        "        z = torch.ops.aten.to.dtype(g0, torch.float, device = torch.device('cuda:0'))\n",
        "        return [z]\n",
    );
    let g = parse_graph(text).unwrap();
    assert_eq!(g.name, "Repro");
    assert!(
        matches!(g.nodes[1].kind, NodeKind::GetAttr { ref target } if target == "_tensor_constant0")
    );
    let printed = print_graph(&g);
    assert_eq!(
        printed,
        concat!(
            "class Repro(torch.nn.Module):\n",
            "    def forward(self, x: \"f32[8, 64]\"):\n",
            "        _tensor_constant0: \"f32[64]\" = self._tensor_constant0\n",
            "        y = torch.ops.aten.add.Tensor(x, _tensor_constant0, alpha = 2);  x = _tensor_constant0 = None\n",
            "        s = torch.ops.aten.split.Tensor(y, 4, dim = -1);  y = None\n",
            "        g0 = s[0];  s = None\n",
            "        z = torch.ops.aten.to.dtype(g0, torch.float32, device = device(type='cuda', index=0));  g0 = None\n",
            "        return (z,)\n",
        )
    );
    assert_eq!(parse_graph(&printed).unwrap(), g);
    let bare =
        body("        r: \"f32[2, 3]\" = torch.ops.aten.relu.default(x)\n        return r\n");
    assert_eq!(parse_graph(&bare).unwrap().outputs().len(), 1);
    // No class line at all: the name defaults to GraphModule.
    let no_class = "def forward(self, x):\n    return (x,)\n";
    let g = parse_graph(no_class).unwrap();
    assert_eq!(g.name, "GraphModule");
    assert_eq!(g.nodes[0].meta, Meta::Unknown);
}

#[test]
fn errors_give_line_column_and_text() {
    let cases: Vec<(String, usize, usize, &str)> = vec![
        (body("        y = torch.ops.aten.relu.default(q)\n        return (y,)\n"), 3, 41, "unknown name `q`"),
        (
            body("        y = torch.ops.aten.relu.default(z)\n        z = torch.ops.aten.relu.default(x)\n        return (y,)\n"),
            3,
            41,
            "`z` is used before its definition on line 4",
        ),
        (
            body("        y = torch.ops.aten.relu.default(x)\n        y = torch.ops.aten.relu.default(x)\n        return (y,)\n"),
            4,
            9,
            "duplicate name `y` (first defined on line 3)",
        ),
        (body("        y = torch.ops.aten.relu.default(x)\n"), 4, 1, "no `return`"),
        (body("        y: \"f32[s0 +, 3]\" = torch.ops.aten.relu.default(x)\n        return (y,)\n"), 3, 12, "bad size `s0 +`"),
        ("class G(torch.nn.Module):\n    def forward(self, x: \"Sym(s0 $)\"):\n        return (x,)\n".into(), 2, 26, "bad annotation \"Sym(s0 $)\""),
        (body("        y = torch.ops.aten.relu(x)\n        return (y,)\n"), 3, 13, "names no overload"),
        (body("        y = math.relu(x)\n        return (y,)\n"), 3, 13, "unsupported call target `math.relu`"),
        (body("        y = 3[0]\n        return (y,)\n"), 3, 13, "only a node can be indexed"),
        (body("        y = torch.ops.aten.relu.default(x\n"), 4, 1, "expected `,` or `)`"),
        (body("        y = torch.ops.aten.relu.default(x) $\n"), 3, 44, "unexpected character `$`"),
        (body("        y = torch.ops.aten.add.Tensor(x, alpha = 1, x)\n        return (y,)\n"), 3, 53, "positional argument follows keyword"),
        (body("        y = torch.ops.aten.to.dtype(x, torch.float7)\n        return (y,)\n"), 3, 40, "unknown constant `torch.float7`"),
        (body("        y = torch.ops.aten.to.device(x, device(type='tpu'))\n        return (y,)\n"), 3, 41, "unknown device type `tpu`"),
        (body("        return (x,)\n        y = torch.ops.aten.relu.default(x)\n"), 4, 9, "statement after the `return` on line 3"),
        (body("        y = torch.ops.aten.relu.default(x, 99999999999999999999)\n"), 3, 44, "does not fit in 64 bits"),
        (body("        def helper(self):\n"), 3, 9, "only one `forward`"),
        (body("        None = torch.ops.aten.relu.default(x)\n        return (x,)\n"), 3, 9, "`None` cannot be a node name"),
        (
            body("        y = torch.ops.aten.relu.default(x);  x = None\n        z = torch.ops.aten.add.Tensor(y, x)\n        return (z,)\n"),
            4,
            42,
            "`x` is used after `x = None` on line 3 freed it",
        ),
        (
            body("        y = torch.ops.aten.relu.default(x)\n        z = torch.ops.aten.neg.default(y);  x = y = None\n        return (z, y)\n"),
            5,
            20,
            "`y` is used after `y = None` on line 4 freed it",
        ),
        // Freed before it is defined: any use after the definition still reads None.
        (
            body("        y = torch.ops.aten.relu.default(x);  q = None\n        q = torch.ops.aten.neg.default(y)\n        z = torch.ops.aten.neg.default(q)\n        return (z,)\n"),
            5,
            40,
            "`q` is used after `q = None` on line 3 freed it",
        ),
        ("class G(torch.nn.Module):\n    def forward(self, x: \"f32[-8, 32]\"):\n        return (x,)\n".into(), 2, 26, "negative size `-8`"),
        // Found by fuzzing: negating i64::MIN overflowed.
        (body("        y = torch.ops.aten.foo.default(x, --9223372036854775808)\n        return (y,)\n"), 3, 43, "integer `-(-9223372036854775808)` does not fit in 64 bits"),
    ];
    for (text, line, col, msg) in cases {
        let e = parse_err(&text);
        assert!(
            e.message.contains(msg),
            "message {:?} lacks {msg:?}",
            e.message
        );
        assert_eq!(
            (e.line, e.column),
            (line, col),
            "position of {:?}",
            e.message
        );
        let shown = e.to_string();
        assert!(shown.starts_with(&format!("{line}:{col}: ")), "{shown}");
        if line <= text.lines().count() {
            let src = text.lines().nth(line - 1).unwrap().trim();
            assert!(
                shown.contains(src.get(..40.min(src.len())).unwrap()),
                "{shown}"
            );
        }
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!(
        "{}        y = torch.ops.aten.foo.default({}1{})\n        return (y,)\n",
        HEADER,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(parse_err(&deep).message.contains("nested deeper"));
}

#[test]
fn pytree_form_errors() {
    let text = concat!(
        "class G(torch.nn.Module):\n",
        "    def forward(self, primals, tangents):\n",
        "        primals_1: \"f32[2]\"; tangents_1: \"f32[2]\"; \n",
        "        primals_1, tangents_1, = fx_pytree.tree_flatten_spec([primals], self._in_spec)\n",
        "        return (primals_1,)\n"
    );
    assert!(parse_err(text)
        .message
        .contains("tree_flatten_spec([primals, tangents]"));
    let text = concat!(
        "class G(torch.nn.Module):\n",
        "    def forward(self, primals, tangents):\n",
        "        primals_1: \"f32[2]\"; other: \"f32[2]\"; \n",
        "        primals_1, = fx_pytree.tree_flatten_spec([primals, tangents], self._in_spec)\n",
        "        y = torch.ops.aten.relu.default(primals)\n",
        "        return (y,)\n"
    );
    let e = parse_err(text);
    assert_eq!(e.line, 3);
    assert!(e.message.contains("`other` is declared"), "{}", e.message);
}

/// Higher-order ops have no overload, and take ops as values: PyTorch's effect tokens.
#[test]
fn higher_order_ops_and_op_values_round_trip() {
    let text = body(concat!(
        "        with_effects = torch.ops.higher_order.with_effects(x, torch.ops.aten._linalg_check_errors.default, x, 'linalg.inv', is_matrix = True);  x = None\n",
        "        getitem: \"f32[0]\" = with_effects[0];  with_effects = None\n",
        "        return (getitem,)\n"
    ));
    let g = parse_graph(&text).unwrap();
    assert_eq!(print_graph(&g), text);
    let NodeKind::Call { op, args, .. } = &g.nodes[1].kind else {
        panic!("call expected")
    };
    assert_eq!(op, &OpName::higher_order("with_effects"));
    assert!(op.is_effectful() && op.has_side_effects_by_name());
    assert_eq!(op.to_string(), "higher_order::with_effects");
    assert_eq!(
        args[1],
        Value::Op(OpName::aten("_linalg_check_errors", "default"))
    );
    // Other namespaces still need an overload.
    let e = parse_err(&body(
        "        a: \"f32[2, 3]\" = torch.ops.aten.relu(x)\n        return (a,)\n",
    ));
    assert!(e.to_string().contains("names no overload"), "{e}");
}

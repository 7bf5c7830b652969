//! HLO modules as XLA's own developers write them (`tests/fixtures/xla/hlo-xla-style`,
//! written for graphbug in the styles of XLA's tool inputs and tests): comments before and
//! inside the module, no `HloModule` header, no `ENTRY` keyword, instructions continued on
//! the next lines, layouts written on operands only, elided constants, `statistics`,
//! `cross_program_prefetch_index`, `domain`, async ops (long and short forms), tuple
//! literals, instructions written inside others' operands, shapes left out. Each reads,
//! checks and prints back byte for byte; each module in `bad/` (XLA's parser or verifier
//! refuses it) fails naming the line its first line's `// ERROR:` says.
//!
//! The oracle tests ask XLA itself (the venv's jaxlib; skipped, saying so, without it):
//! its parser reads every good module and reads graphbug's proto of it as the same module;
//! of the bad modules, its parser or its verifier refuses each.

use std::path::{Path, PathBuf};

use graphbug_xla::hlo::check::check;
use graphbug_xla::hlo::proto::to_proto;
use graphbug_xla::hlo::text::{parse_module, print_module, Module, Operands};

mod common;

fn dir() -> PathBuf {
    common::root().join("tests/fixtures/xla/hlo-xla-style")
}

/// The `.hlo` files of a folder, sorted.
fn modules(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the fixtures folder")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hlo"))
        .collect();
    out.sort();
    out
}

fn good() -> Vec<PathBuf> {
    let good = modules(&dir());
    assert!(good.len() >= 12, "{good:?}");
    good
}

fn bad() -> Vec<PathBuf> {
    let bad = modules(&dir().join("bad"));
    assert!(bad.len() >= 5, "{bad:?}");
    bad
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn module(name: &str) -> Module {
    parse_module(&read(&dir().join(name))).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn good_modules_check_and_print_back_byte_for_byte() {
    for path in good() {
        let text = read(&path);
        let name = path.file_name().unwrap().to_string_lossy();
        let m = parse_module(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(print_module(&m), text, "{name}");
        check(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
        to_proto(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn bad_modules_fail_naming_the_line() {
    for path in bad() {
        let text = read(&path);
        let name = path.file_name().unwrap().to_string_lossy();
        let want = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("// ERROR: "))
            .unwrap_or_else(|| panic!("{name} does not open with `// ERROR: ...`"));
        let m = parse_module(&text).unwrap_or_else(|e| panic!("{name} reads: {e}"));
        assert_eq!(print_module(&m), text, "{name}");
        let e = match check(&m).and_then(|_| to_proto(&m).map(|_| ())) {
            Ok(()) => panic!("{name} checks"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(want), "{name}\n got: {e}\nwant: {want}");
    }
}

#[test]
fn each_style_reads_as_xla_reads_it() {
    // No header: XLA names the module after the entry; `ENTRY` marks it.
    let m = module("no_header.hlo");
    assert_eq!(m.name, "module_main");
    assert!(m.header_line.is_empty() && m.leading.starts_with("// No `HloModule`"));
    assert_eq!(m.computations[m.entry().unwrap()].name, "main");
    // No `ENTRY`: the last computation is the entry.
    let m = module("no_entry_keyword.hlo");
    assert_eq!(m.name, "module_fused_reduce");
    assert_eq!(m.entry(), Some(1));
    assert!(!m.computations[1].entry_keyword);
    // Continued lines: attributes, the opcode, operands, a tuple shape, JSON.
    let m = module("continuation.hlo");
    let main = &m.computations[m.entry().unwrap()];
    let scatter = main
        .instructions
        .iter()
        .find(|i| i.name == "scattered")
        .unwrap();
    assert_eq!(scatter.attr("index_vector_dim"), Some("1"));
    assert_eq!(scatter.called(), ["combine"]);
    assert!(scatter.own_text().starts_with("scattered = ") && scatter.text.starts_with("  //"));
    let gemm = main.instructions.iter().find(|i| i.name == "gemm").unwrap();
    assert_eq!(gemm.opcode, "custom-call");
    assert_eq!(gemm.operand_names(), ["scattered", "operand"]);
    assert_eq!(gemm.operands_span, {
        let s = gemm.text.find("(scattered").unwrap();
        (s, gemm.text.find("operand),").unwrap() + "operand)".len())
    });
    assert!(gemm
        .attr("backend_config")
        .unwrap()
        .contains("\"alpha_real\": 1"));
    let root = main.root().unwrap();
    assert_eq!(root.shape.to_string(), "(f32[10,6], f32[10,6])");
    assert_eq!(root.line, 36);
    // Nested instructions: named as XLA names them, before their user; shapes inferred.
    let m = module("nested.hlo");
    let names: Vec<&str> = m.computations[0]
        .instructions
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "p",
            "constant.anon",
            "broadcast.anon",
            "scaled",
            "parameter.anon",
            "shifted",
            "gt",
            "negate.anon",
            "pair",
            "first"
        ]
    );
    let shape = |n: &str| {
        let i = m.computations[0]
            .instructions
            .iter()
            .find(|i| i.name == n)
            .unwrap();
        (i.shape.to_string(), i.shape_written, i.nested)
    };
    assert_eq!(shape("scaled"), ("f32[8,4]".into(), false, false));
    assert_eq!(shape("gt"), ("pred[8,4]".into(), false, false));
    assert_eq!(shape("broadcast.anon"), ("f32[8,4]".into(), true, true));
    assert_eq!(
        shape("pair"),
        ("(f32[8,4], pred[8,4], f32[8,4])".into(), false, false)
    );
    assert_eq!(shape("first"), ("f32[8,4]".into(), false, false));
    assert_eq!(m.computations[0].parameters().len(), 2);
    // Elided constants read as zeros.
    let m = module("elided_constant.hlo");
    let w = m.computations[0]
        .instructions
        .iter()
        .find(|i| i.name == "w")
        .unwrap();
    assert!(matches!(&w.operands, Operands::Literal(l) if l == "{...}"));
    // A computation's thread, after its `}`.
    let m = module("async.hlo");
    assert_eq!(
        m.computations[0].attrs[0].value, "\"side\"",
        "{:?}",
        m.computations[0].attrs
    );
}

#[test]
fn errors_in_continued_lines_name_their_own_line() {
    let cases = [
        (
            "ENTRY e {\n  x = f32[2] parameter(0)\n  y = f32[2]\n    add(x,\n        z)\n}\n",
            "5:9: instruction `y`: operand `z` is not defined in computation `e`",
        ),
        (
            "e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] negate(x),\n    bogus=1\n}\n",
            "4:5: instruction `y`: attribute `bogus` is not mapped to the proto",
        ),
        (
            "HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = convert(x)\n}\n",
            "4:3: instruction `y`: `convert` is written without a shape",
        ),
    ];
    for (text, want) in cases {
        let m = parse_module(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let e = check(&m)
            .and_then(|_| to_proto(&m).map(|_| ()))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{text}\n got: {e}\nwant: {want}");
    }
}

/// jaxlib's Python, if there is one.
fn python() -> Option<PathBuf> {
    common::python("XLA is not asked of the XLA-style modules (the other checks run)")
}

#[test]
fn oracle_xla_reads_each_good_module_as_graphbug_does() {
    let Some(python) = python() else { return };
    let scratch = common::scratch("xla-style");
    let mut args = Vec::new();
    for path in good() {
        let m = parse_module(&read(&path)).unwrap();
        let pb = scratch
            .path()
            .join(path.file_name().unwrap())
            .with_extension("pb");
        std::fs::write(&pb, to_proto(&m).unwrap()).unwrap();
        args.push(path);
        args.push(pb);
    }
    // XLA parses each text and loads graphbug's proto of it; both print the same (but for
    // the module's configuration, `replica_count`, which the proto does not hold, and the
    // values XLA makes up for elided constants).
    let script = r#"
import re, sys
from jaxlib import _hlo as h
o = h.HloPrintOptions()
o.print_large_constants = True
o.print_metadata = True
args = sys.argv[1:]
for text_path, pb_path in zip(args[::2], args[1::2]):
    text = open(text_path).read()
    a = h.hlo_module_from_text(text).to_string(o)
    b = h.HloModule.from_serialized_hlo_module_proto(open(pb_path, 'rb').read()).to_string(o)
    a = re.sub(r', replica_count=\d+', '', a)
    if '{...}' in text:
        a, b = ['\n'.join(l for l in s.splitlines() if 'constant(' not in l) for s in (a, b)]
    print(text_path, 'same' if a == b else 'DIFFERENT:\n' + a + '\n---\n' + b)
"#;
    let arg_refs: Vec<&Path> = args.iter().map(PathBuf::as_path).collect();
    let out = common::run_python(&python, script, &arg_refs);
    assert_eq!(
        out.lines().filter(|l| l.ends_with(" same")).count(),
        good().len(),
        "{out}"
    );
}

#[test]
fn oracle_xla_refuses_each_bad_module() {
    let Some(python) = python() else { return };
    // XLA's parser; where it reads, XLA's conversion to StableHLO verified (its op
    // verifiers check what XLA's verifier checks of operands and results).
    let script = r#"
import sys
from jaxlib import _hlo as h
from jax._src.lib import _jax
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir
for path in sys.argv[1:]:
    try:
        m = h.hlo_module_from_text(open(path).read())
    except Exception:
        print(path, 'parser refuses')
        continue
    try:
        code = _jax.mlir.hlo_to_stablehlo(m.as_serialized_hlo_module_proto())
        with mlir.make_ir_context():
            ok = ir.Module.parse(code).operation.verify()
        print(path, 'verifies' if ok else 'verifier refuses')
    except Exception as e:
        print(path, 'verifier refuses')
"#;
    let bad = bad();
    let args: Vec<&Path> = bad.iter().map(PathBuf::as_path).collect();
    let out = common::run_python(&python, script, &args);
    assert_eq!(
        out.lines().filter(|l| l.ends_with(" refuses")).count(),
        bad.len(),
        "{out}"
    );
    // The verifier-only ones, which XLA's parser reads, are what graphbug's check adds.
    assert!(out.contains("verifier refuses"), "{out}");
}

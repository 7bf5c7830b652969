//! HLO text ⇄ `xla.HloModuleProto`, checked against XLA itself.
//!
//! The corpus (`tests/fixtures/xla/hlo`, made by its `make_corpus.py` with jax/jaxlib
//! 0.10.2) holds programs JAX lowers (a transformer block, a conv net with `reduce_window`,
//! its training step, `lax.scan`, an MLP training step, gather/scatter/sort/top-k, cumsum,
//! argmax, `lax.cond`/`lax.switch`, LAPACK custom calls, a sharded program with collectives,
//! assorted ops and constants) in both text styles, plus `attributes.hlo` (every attribute
//! graphbug maps), and XLA's answers: `*.pb` (the proto XLA's parser makes of each text) and
//! `*.pb.hlo` (XLA's print of that proto). The first tests compare with those answers and
//! need nothing but Rust; the oracle tests ask jaxlib live (`.venv/bin/python`) and skip,
//! saying so, where it is absent.

use std::path::PathBuf;

use graphbug_xla::hlo::proto::wire::describe;
use graphbug_xla::hlo::proto::{from_proto, proto_to_text, to_proto, HloModuleProto};
use graphbug_xla::hlo::text::parse_module;
use prost::Message;

mod common;
use common::{corpus, corpus_dir};

fn read(name: &str) -> String {
    std::fs::read_to_string(corpus_dir().join(name)).expect("a corpus file")
}

fn our_proto(stem: &str) -> Vec<u8> {
    let module = parse_module(&read(&format!("{stem}.hlo"))).expect("the corpus parses");
    to_proto(&module).unwrap_or_else(|e| panic!("{stem}: {e}"))
}

/// A proto as comparable lines: the module, then each computation and instruction, fields
/// by name, empty messages and the module's own id (XLA counts modules) left out.
fn canonical(bytes: &[u8]) -> Vec<String> {
    let mut m = HloModuleProto::decode(bytes).expect("a module proto");
    m.id = 0;
    let comps = std::mem::take(&mut m.computations);
    let mut out = vec![describe(&m.encode_to_vec(), "xla.HloModuleProto")];
    for mut c in comps {
        let instructions = std::mem::take(&mut c.instructions);
        out.push(describe(&c.encode_to_vec(), "xla.HloComputationProto"));
        for i in instructions {
            out.push(format!(
                "  {}",
                describe(&i.encode_to_vec(), "xla.HloInstructionProto")
            ));
        }
    }
    out
}

fn first_difference(a: &[String], b: &[String]) -> Option<String> {
    if let Some((x, y)) = a.iter().zip(b).find(|(x, y)| x != y) {
        return Some(format!("\n xla:  {x}\n ours: {y}"));
    }
    (a.len() != b.len()).then(|| format!("{} lines against {}", a.len(), b.len()))
}

#[test]
fn to_proto_makes_the_proto_xla_makes() {
    for stem in corpus() {
        let xla = std::fs::read(corpus_dir().join(format!("{stem}.pb"))).unwrap();
        let diff = first_difference(&canonical(&xla), &canonical(&our_proto(&stem)));
        assert!(diff.is_none(), "{stem}: {}", diff.unwrap());
    }
}

#[test]
fn from_proto_prints_what_xla_prints() {
    for stem in corpus() {
        let xla = std::fs::read(corpus_dir().join(format!("{stem}.pb"))).unwrap();
        let text = proto_to_text(&xla).unwrap_or_else(|e| panic!("{stem}: {e}"));
        assert_eq!(text, read(&format!("{stem}.pb.hlo")), "{stem}");
        let module = from_proto(&xla).unwrap_or_else(|e| panic!("{stem}: {e}"));
        assert_eq!(graphbug_xla::hlo::text::print_module(&module), text);
        graphbug_xla::hlo::check::check(&module).unwrap_or_else(|e| panic!("{stem}: {e}"));
    }
}

#[test]
fn text_to_proto_to_text_is_xla_print_and_a_fixpoint() {
    for stem in corpus() {
        let once = proto_to_text(&our_proto(&stem)).unwrap_or_else(|e| panic!("{stem}: {e}"));
        assert_eq!(once, read(&format!("{stem}.pb.hlo")), "{stem}");
        let again = to_proto(&parse_module(&once).unwrap()).unwrap();
        assert_eq!(proto_to_text(&again).unwrap(), once, "{stem}");
    }
}

#[test]
fn an_empty_stack_frame_index_prints_no_tables_as_xla_prints_it() {
    // PyTorch/XLA writes an empty StackFrameIndexProto into every module it builds; XLA
    // prints no `FileNames` ... `StackFrames` tables for it.
    let xla = std::fs::read(corpus_dir().join("cond.pb")).unwrap();
    let mut m = HloModuleProto::decode(&*xla).unwrap();
    assert!(m.stack_frame_index.is_none());
    m.stack_frame_index = Some(Default::default());
    let text = proto_to_text(&m.encode_to_vec()).unwrap();
    assert_eq!(text, read("cond.pb.hlo"));
    // The check can fail: an index that holds frames prints its tables.
    let frames = std::fs::read(corpus_dir().join("frames.pb")).unwrap();
    assert!(proto_to_text(&frames).unwrap().contains("FileNames\n1 "));
}

/// An error's text for a module text.
fn text_error(text: &str) -> String {
    match parse_module(text) {
        Ok(m) => to_proto(&m).expect_err("must fail").to_string(),
        Err(e) => format!("parse: {e}"),
    }
}

#[test]
fn bad_text_fails_naming_what_and_where() {
    let module = |body: &str| {
        format!("HloModule m\n\nENTRY e {{\n  a = f32[2,3]{{1,0}} parameter(0)\n{body}\n}}\n")
    };
    for (body, want) in [
        (
            "  ROOT b = f32[2,3]{1,0} negate(a), bogus=1",
            "5:37: instruction `b`: attribute `bogus` is not mapped to the proto",
        ),
        (
            "  ROOT b = f32[2,3]{1,0} negate(a), dimensions={0}",
            "5:37: instruction `b`: attribute `dimensions` does not belong to opcode `negate`",
        ),
        (
            "  z = f32[] constant(0)\n  ROOT b = f32[1,2]{1,0} reduce-window(a, z), window={size=2x2 stride=1}, to_apply=e",
            "instruction `b`: attribute `window`: malformed window `{size=2x2 stride=1}`: `stride` has 1 dimensions, not 2",
        ),
        (
            "  ROOT c = f32[2,3]{1,0} constant({ {1, 2}, {3, 4, 5} })",
            "5:26: instruction `c`: the literal has 2 elements in dimension 1, the shape says 3",
        ),
        (
            "  ROOT b = f32[2,3]{1,0} frobnicate(a)",
            "5:25: instruction `b`: unknown opcode `frobnicate` (not one of XLA's HLO opcodes)",
        ),
        (
            "  ROOT b = f32[2,3]{1,0} negate(q)",
            "5:33: instruction `b`: operand `q` is not defined in this computation",
        ),
        (
            "  ROOT b = f32[2,3]{1,0} negate(a), metadata={op_name=\"x\"}, metadata={op_name=\"y\"}",
            "attribute `metadata` is written twice",
        ),
        (
            "  ROOT b = f32[2,3]{1,0} call(a)",
            "instruction `b`: `call` needs `to_apply=`",
        ),
    ] {
        let e = text_error(&module(body));
        assert!(e.contains(want), "{body}\n got: {e}\nwant: {want}");
    }
    let e = text_error("HloModule m, bogus=2\n\nENTRY e {\n  ROOT a = f32[] parameter(0)\n}\n");
    assert!(
        e.contains("1:14: attribute `bogus`: module attribute is not mapped"),
        "{e}"
    );
}

/// A field (number, wire type 0, value) appended to a message's bytes.
fn with_varint_field(mut bytes: Vec<u8>, number: u32, value: u8) -> Vec<u8> {
    let tag = u64::from(number) << 3;
    let mut t = tag;
    loop {
        let b = (t & 0x7f) as u8;
        t >>= 7;
        if t == 0 {
            bytes.push(b);
            break;
        }
        bytes.push(b | 0x80);
    }
    bytes.push(value);
    bytes
}

#[test]
fn bad_protos_fail_naming_the_field() {
    let good = our_proto("cond");
    let e = proto_to_text(&with_varint_field(good.clone(), 200, 1)).unwrap_err();
    assert!(
        e.to_string().contains(
            "field XLA's schema (jaxlib 0.10.2) lacks: xla.HloModuleProto field number 200"
        ),
        "{e}"
    );
    let mut m = HloModuleProto::decode(&good[..]).unwrap();
    m.is_dynamic = true;
    let e = proto_to_text(&m.encode_to_vec()).unwrap_err().to_string();
    assert!(
        e.contains("field xla.HloModuleProto.is_dynamic is not mapped to text"),
        "{e}"
    );
    let mut m = HloModuleProto::decode(&good[..]).unwrap();
    let inst = &mut m.computations[0].instructions[1];
    inst.fft_type = 9;
    let name = inst.name.clone();
    let e = proto_to_text(&m.encode_to_vec()).unwrap_err();
    assert_eq!(e.instruction.as_deref(), Some(name.as_str()));
    assert!(
        e.message
            .contains("field xla.HloInstructionProto.fft_type is not mapped to text"),
        "{e}"
    );
    let mut m = HloModuleProto::decode(&good[..]).unwrap();
    m.computations[0].instructions[1]
        .shape
        .as_mut()
        .unwrap()
        .element_type = 77;
    let e = proto_to_text(&m.encode_to_vec()).unwrap_err().to_string();
    assert!(e.contains("unknown xla.PrimitiveType value 77"), "{e}");
    let e = proto_to_text(b"\xff\xff\xff").unwrap_err().to_string();
    assert!(
        e.contains("not well formed") || e.contains("not an xla.HloModuleProto"),
        "{e}"
    );
}

/// jaxlib's Python, if there is one.
fn python() -> Option<PathBuf> {
    common::python("the XLA oracle does not run (the checks against XLA's committed answers do)")
}

/// A fresh scratch folder, removed when the test ends.
fn scratch(tag: &str) -> tempfile::TempDir {
    common::scratch(&format!("hlo-proto-{tag}"))
}

const PRINT_OPTIONS: &str = r#"
from jaxlib import _hlo as h
def opts(new_style):
    o = h.HloPrintOptions()
    o.print_large_constants = True
    o.print_metadata = True
    o.print_percent = not new_style
    o.print_operand_shape = not new_style
    o.print_program_shape = not new_style
    return o
"#;

#[test]
fn oracle_xla_reads_our_protos_as_it_reads_the_text() {
    let Some(python) = python() else { return };
    let scratch = scratch("a");
    let dir = scratch.path();
    for stem in corpus() {
        std::fs::copy(
            corpus_dir().join(format!("{stem}.hlo")),
            dir.join(format!("{stem}.hlo")),
        )
        .unwrap();
        std::fs::write(dir.join(format!("{stem}.ours.pb")), our_proto(&stem)).unwrap();
    }
    // XLA parses each text, loads our proto of it, and prints both in both styles.
    let script = format!(
        "{PRINT_OPTIONS}
import glob, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], '*.hlo'))):
    stem = os.path.basename(path)[:-4]
    text = h.hlo_module_from_text(open(path).read())
    ours = h.HloModule.from_serialized_hlo_module_proto(open(os.path.join(sys.argv[1], stem + '.ours.pb'), 'rb').read())
    same = all(text.to_string(opts(s)) == ours.to_string(opts(s)) for s in (True, False))
    print(stem, 'same' if same else 'DIFFERENT')
"
    );
    let out = common::run_python(&python, &script, &[dir]);
    assert_eq!(out.lines().count(), corpus().len(), "{out}");
    assert!(out.lines().all(|l| l.ends_with(" same")), "{out}");
}

#[test]
fn oracle_xla_reads_our_text_of_its_protos_as_the_same_module() {
    let Some(python) = python() else { return };
    let scratch = scratch("b");
    let dir = scratch.path();
    for stem in corpus() {
        std::fs::copy(
            corpus_dir().join(format!("{stem}.hlo")),
            dir.join(format!("{stem}.hlo")),
        )
        .unwrap();
    }
    // XLA's own protos of the texts, made live.
    let make = format!(
        "{PRINT_OPTIONS}
import glob, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], '*.hlo'))):
    open(path[:-4] + '.xla.pb', 'wb').write(h.hlo_module_from_text(open(path).read()).as_serialized_hlo_module_proto())
# And JAX's own protos (`compiler_ir`: ids in JAX's order, stack frames).
import jax, jax.numpy as jnp
from jax import lax
def loss(w, x):
    h_ = jnp.tanh(x @ w)
    c = lax.scan(lambda c, r: (c + r.sum(), c), 0.0, h_)[0]
    return jnp.mean(h_ ** 2) + c + jnp.argmax(x, axis=1).sum()
def block(x, w):
    y = lax.conv_general_dilated(x, w, (1, 1), 'SAME')
    return lax.cond(y.sum() > 0, jnp.sin, jnp.cos, y).at[0].add(1.0)
for name, f, args in [
    ('grad_scan', jax.value_and_grad(loss), (jnp.ones((4, 3)), jnp.ones((2, 4)))),
    ('conv_cond', block, (jnp.ones((1, 2, 5, 5)), jnp.ones((3, 2, 3, 3)))),
]:
    proto = jax.jit(f).lower(*args).compiler_ir('hlo').as_serialized_hlo_module_proto()
    open(os.path.join(sys.argv[1], name + '.jax.pb'), 'wb').write(proto)
"
    );
    common::run_python(&python, &make, &[dir]);
    let mut protos: Vec<(String, &str)> = corpus().into_iter().map(|s| (s, "xla")).collect();
    protos.extend([
        ("grad_scan".to_string(), "jax"),
        ("conv_cond".to_string(), "jax"),
    ]);
    for (stem, kind) in &protos {
        let bytes = std::fs::read(dir.join(format!("{stem}.{kind}.pb"))).unwrap();
        let text = proto_to_text(&bytes).unwrap_or_else(|e| panic!("{stem}: {e}"));
        parse_module(&text).unwrap_or_else(|e| panic!("{stem}: {e}"));
        std::fs::write(dir.join(format!("{stem}.ours.txt")), text).unwrap();
    }
    // Our text is XLA's print of the proto; XLA parses it to a module printed alike (for
    // JAX's protos XLA's own print and parse renumber ids, so only the text is compared).
    let compare = format!(
        "{PRINT_OPTIONS}
import glob, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], '*.pb'))):
    stem, kind = os.path.basename(path)[:-3].rsplit('.', 1)
    xla = h.HloModule.from_serialized_hlo_module_proto(open(path, 'rb').read())
    ours_text = open(os.path.join(sys.argv[1], stem + '.ours.txt')).read()
    ours = h.hlo_module_from_text(ours_text)
    same = kind == 'jax' or all(xla.to_string(opts(s)) == ours.to_string(opts(s)) for s in (True, False))
    print(stem, 'same' if same and ours_text == xla.to_string(opts(True)) else 'DIFFERENT')
"
    );
    let out = common::run_python(&python, &compare, &[dir]);
    assert_eq!(out.lines().count(), protos.len(), "{out}");
    assert!(out.lines().all(|l| l.ends_with(" same")), "{out}");
}

#[test]
fn oracle_our_protos_run_on_xla_cpu_as_jax_runs_the_programs() {
    let Some(python) = python() else { return };
    let scratch = scratch("c");
    let dir = scratch.path();
    let mut runnable = Vec::new();
    for stem in corpus() {
        let program = stem.trim_end_matches(".old");
        let io = corpus_dir().join(format!("{program}.io.npz"));
        if io.exists() {
            std::fs::write(dir.join(format!("{stem}.pb")), our_proto(&stem)).unwrap();
            std::fs::copy(&io, dir.join(format!("{stem}.io.npz"))).unwrap();
            runnable.push(stem);
        }
    }
    assert!(runnable.len() >= 22, "{runnable:?}");
    // Each of our protos compiled by XLA CPU (through jax's PJRT client) and run on the
    // inputs JAX ran; the outputs against JAX's own (`jax.jit(f)(inputs)`).
    let script = r#"
import glob, os, sys
import numpy as np
import jax, jax.extend
jax.config.update("jax_enable_x64", True)
from jax._src.lib import _jax
import jax.numpy as jnp
# JAX registers its LAPACK custom-call targets when it first runs one (else XLA crashes).
jnp.linalg.cholesky(np.eye(2, dtype=np.float32)); jnp.linalg.eigh(np.eye(2, dtype=np.float32))
backend = jax.extend.backend.get_backend("cpu")
device = backend.local_devices()[0]
def same(g, w):
    if w.dtype.kind == 'V' and w.dtype.itemsize == g.dtype.itemsize:
        w = w.view(g.dtype)  # npz keeps bf16 as raw bytes
    if g.shape != w.shape or g.dtype != w.dtype:
        return False
    if g.dtype == bool or np.issubdtype(g.dtype, np.integer):
        return np.array_equal(g, w)
    wide = np.complex128 if np.iscomplexobj(g) else np.float64
    return np.allclose(g.astype(wide), w.astype(wide), rtol=1e-5, atol=1e-6, equal_nan=True)
for path in sorted(glob.glob(os.path.join(sys.argv[1], '*.pb'))):
    stem = os.path.basename(path)[:-3]
    io = np.load(os.path.join(sys.argv[1], stem + '.io.npz'))
    ins = [io[f"arg{k}"] for k in range(sum(1 for n in io.files if n.startswith("arg")))]
    want = [io[f"out{k}"] for k in range(sum(1 for n in io.files if n.startswith("out")))]
    exe = backend.compile_and_load(_jax.mlir.hlo_to_stablehlo(open(path, 'rb').read()), _jax.DeviceList((device,)), _jax.CompileOptions())
    args = [jax.device_put(a, device) for a in ins]
    got = [np.asarray(o[0]) for o in exe.execute_sharded(args).disassemble_into_single_device_arrays()]
    ok = len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    print(stem, 'ok' if ok else 'MISMATCH', len(got), 'outputs')
"#;
    let out = common::run_python(&python, script, &[dir]);
    assert_eq!(out.lines().count(), runnable.len(), "{out}");
    assert!(out.lines().all(|l| l.contains(" ok ")), "{out}");
}

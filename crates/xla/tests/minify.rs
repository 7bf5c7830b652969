//! The XLA checker: candidates cut from a lowered transformer block, printed as programs,
//! compiled and run by the CPU plugin on the values the reference run recorded. A correct
//! backend passes every cut; a wrong answer fails, localized to the faulted instruction.

mod common;

use std::sync::Arc;

use graphbug_accuracy::AccuracyMode;
use graphbug_files::random_tensors;
use graphbug_ir::{Meta, TensorMeta};
use graphbug_minifier::{CheckKind, Checker, Original, Verdict};
use graphbug_xla::execute::XlaBackend;
use graphbug_xla::minify::{Printer, Recorded, XlaChecker, ACCURACY_MESSAGE};
use graphbug_xla::program::{Kind, Program};

fn transformer() -> (Arc<Printer>, Arc<Recorded>) {
    let path = common::corpus_dir().join("transformer.hlo");
    let program = Program::read(&std::fs::read(path).unwrap(), Kind::HloText).unwrap();
    let printer = Arc::new(Printer::new(&program).unwrap());
    let metas: Vec<TensorMeta> = program
        .parameters()
        .unwrap()
        .into_iter()
        .map(|(_, m)| m)
        .collect();
    let inputs = random_tensors(&metas, 0).unwrap();
    let reference = XlaBackend::parse("pjrt:cpu").unwrap();
    let recorded = Arc::new(Recorded::record(&printer, inputs, &reference, true).unwrap());
    assert!(recorded.has_fp64(), "the transformer runs in float64");
    (printer, recorded)
}

fn checker(backend: &str, kind: CheckKind, p: &Arc<Printer>, r: &Arc<Recorded>) -> XlaChecker {
    XlaChecker::new(
        XlaBackend::parse(backend).unwrap(),
        kind,
        p.clone(),
        r.clone(),
        AccuracyMode::Accuracy,
    )
}

#[test]
fn every_cut_of_one_instruction_runs_as_recorded() {
    let (printer, recorded) = transformer();
    let graph = printer.graph();
    let original = Original::borrowing(graph);
    let mut check = checker("pjrt:cpu", CheckKind::Accuracy, &printer, &recorded);
    let mut checked = 0;
    for id in graph.ids() {
        let node = graph.node(id);
        if node.is_placeholder() || !matches!(node.meta, Meta::Tensor(_)) {
            continue;
        }
        let candidate = original.candidate(&[id.0]);
        // Parameters that stand for values the cut leaves out keep their layouts: the
        // values run as the original computed them.
        assert_eq!(
            check.check(&candidate),
            Verdict::Passes,
            "`{}` alone:\n{}",
            node.name,
            printer.text(&candidate.graph).unwrap()
        );
        checked += 1;
    }
    assert!(checked > 100, "{checked}");
    assert_eq!(
        check.check(&original.as_given()),
        Verdict::Passes,
        "the whole program"
    );
}

#[test]
fn a_wrong_answer_fails_at_its_instruction() {
    let (printer, recorded) = transformer();
    let original = Original::borrowing(printer.graph());
    let mut check = checker(
        "fault:accuracy@node:dot_general.12+pjrt:cpu",
        CheckKind::Accuracy,
        &printer,
        &recorded,
    );
    match check.check(&original.as_given()) {
        Verdict::Fails(sig) => {
            assert_eq!(sig.kind, "accuracy wrong result");
            assert_eq!(sig.message, ACCURACY_MESSAGE);
            assert_eq!(sig.culprits, vec!["dot_general.12".to_string()]);
            assert!(sig.margin.is_some_and(|m| m > 1.0), "{sig:?}");
        }
        other => panic!("{other:?}"),
    }
    // A fault that softmax cancels (a constant added to every score) is no wrong result.
    let mut cancelled = checker(
        "fault:accuracy@node:dot_general.11+pjrt:cpu",
        CheckKind::Accuracy,
        &printer,
        &recorded,
    );
    assert_eq!(cancelled.check(&original.as_given()), Verdict::Passes);
}

#[test]
fn compile_and_runtime_failures_are_the_plugins_errors() {
    let (printer, recorded) = transformer();
    let original = Original::borrowing(printer.graph());
    let cases = [
        (
            "fault:compile@node:dot_general.12+pjrt:cpu",
            CheckKind::Compile,
            "compile error",
        ),
        (
            "fault:runtime@node:dot_general.12+pjrt:cpu",
            CheckKind::Runtime,
            "runtime error",
        ),
    ];
    for (backend, kind, expected) in cases {
        let mut check = checker(backend, kind, &printer, &recorded);
        match check.check(&original.as_given()) {
            Verdict::Fails(sig) => assert_eq!(sig.kind, expected, "{backend}: {sig:?}"),
            other => panic!("{backend}: {other:?}"),
        }
        // Cut away from the faulted instruction, the candidate passes.
        let elsewhere = original.candidate(&[printer
            .graph()
            .ids()
            .find(|&id| printer.graph().node(id).name.as_str() == "dot_general.8")
            .unwrap()
            .0]);
        assert_eq!(check.check(&elsewhere), Verdict::Passes, "{backend}");
    }
}

#[test]
fn a_cut_keeps_every_computation_its_instructions_call() {
    // select_and_scatter names its computations in `select=` and `scatter=`.
    let path = common::corpus_dir().join("conv_train.hlo");
    let program = Program::read(&std::fs::read(path).unwrap(), Kind::HloText).unwrap();
    let printer = Printer::new(&program).unwrap();
    let g = printer.graph();
    let id = g
        .ids()
        .find(|&id| g.node(id).name.as_str() == "select_and_scatter.9")
        .unwrap();
    let cut = Original::borrowing(g).candidate(&[id.0]);
    let text = printer.text(&cut.graph).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("select_and_scatter.9 = "))
        .unwrap();
    for attr in ["select=", "scatter="] {
        let called = line.split(attr).nth(1).unwrap();
        let name = called.split([',', ' ']).next().unwrap();
        assert!(
            text.lines().any(
                |l| l.starts_with(&format!("{name} {{")) || l.starts_with(&format!("{name} ("))
            ),
            "{name} is not printed:\n{text}"
        );
    }
    // And the cut reads back as a program.
    printer.program(&cut.graph).unwrap();
}

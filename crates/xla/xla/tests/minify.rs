//! The XLA checker: candidates cut from a lowered transformer block, printed as programs,
//! compiled and run by the CPU plugin on the values the reference run recorded. A correct
//! backend passes every cut; a wrong answer fails, localized to the faulted instruction.

mod common;

use std::sync::Arc;

use graphbug_accuracy::AccuracyMode;
use graphbug_files::random_tensors;
use graphbug_ir::{Meta, TensorMeta};
use graphbug_minifier::{CheckKind, Checker, Form, Original, Verdict};
use graphbug_xla::execute::XlaBackend;
use graphbug_xla::minify::{called_values, Printer, Recorded, XlaChecker, ACCURACY_MESSAGE};
use graphbug_xla::program::{Constants, Kind, Program};

fn transformer() -> (Arc<Printer>, Arc<Recorded>) {
    let (printer, recorded) = recorded_run("hlo/transformer.hlo", Kind::HloText);
    assert!(recorded.has_fp64(), "the transformer runs in float64");
    (printer, recorded)
}

/// A fixture of `tests/fixtures/xla` and the values one run on `pjrt:cpu` records, on its
/// `.io.npz` inputs where it has them (seeded random ones otherwise).
fn recorded_run(fixture: &str, kind: Kind) -> (Arc<Printer>, Arc<Recorded>) {
    let path = common::root().join("tests/fixtures/xla").join(fixture);
    let program = Program::read(&std::fs::read(&path).unwrap(), kind).unwrap();
    let printer = Arc::new(Printer::new(&program).unwrap());
    let io = path.with_extension("io.npz");
    let inputs = if io.is_file() {
        graphbug_files::read(&io)
            .unwrap()
            .into_iter()
            .filter(|(k, _)| k.starts_with("arg"))
            .map(|(_, t)| t)
            .collect()
    } else {
        random_tensors(&parameter_metas(&program), 0).unwrap()
    };
    let reference = XlaBackend::parse("pjrt:cpu").unwrap();
    let recorded = Arc::new(Recorded::record(&printer, inputs, &reference, true).unwrap());
    (printer, recorded)
}

/// The metas of a program's parameters, in order.
fn parameter_metas(program: &Program) -> Vec<TensorMeta> {
    program
        .parameters()
        .unwrap()
        .into_iter()
        .map(|(_, m)| m)
        .collect()
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
    let checked = every_cut_of_one_passes(&printer, &recorded, &mut check);
    assert!(checked > 100, "{checked}");
    assert_eq!(
        check.check(&original.as_given()),
        Verdict::Passes,
        "the whole program"
    );
}

/// Checks the cut of each array-valued instruction alone, its inputs as parameters and as
/// constants holding their recorded values (in the program's text: every element type's
/// literal read back exactly), expecting each to pass; how many instructions it checked.
fn every_cut_of_one_passes(
    printer: &Printer,
    recorded: &Recorded,
    check: &mut XlaChecker,
) -> usize {
    let graph = printer.graph();
    let original = Original::borrowing(graph);
    let mut checked = 0;
    for id in graph.ids() {
        let node = graph.node(id);
        // (A result of several alone is no candidate: it is kept with its instruction.)
        if node.is_placeholder()
            || !matches!(node.meta, Meta::Tensor(_))
            || original.normalize(&[id.0]).is_empty()
        {
            continue;
        }
        for constants in [false, true] {
            let form = Form {
                consolidate: false,
                constants,
            };
            let candidate = original.candidate_with(&[id.0], form);
            // Parameters that stand for values the cut leaves out keep their layouts: the
            // values run as the original computed them.
            assert_eq!(
                check.check(&candidate),
                Verdict::Passes,
                "`{}` alone (constants: {constants}):\n{}",
                node.name,
                printer
                    .text(&candidate.graph, &recorded.constants(&candidate).unwrap())
                    .unwrap()
            );
        }
        checked += 1;
    }
    checked
}

#[test]
fn cuts_with_constants_of_every_element_type_run_as_recorded() {
    // Integers, booleans, float64 and complex values (HLO literals, StableHLO `dense`).
    for (fixture, kind) in [
        ("hlo/gather_scatter_sort.hlo", Kind::HloText),
        ("hlo/misc.hlo", Kind::HloText),
        ("stablehlo/specials.mlir", Kind::StableHloText),
        ("stablehlo/train.mlir", Kind::StableHloText),
    ] {
        let (printer, recorded) = recorded_run(fixture, kind);
        let mut check = checker("pjrt:cpu", CheckKind::Accuracy, &printer, &recorded);
        let checked = every_cut_of_one_passes(&printer, &recorded, &mut check);
        assert!(checked > 5, "{fixture}: {checked}");
    }
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
    let text = printer.text(&cut.graph, &Constants::new()).unwrap();
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
    printer.program(&cut.graph, &Constants::new()).unwrap();
}

#[test]
fn a_called_computation_alone_is_a_program_that_runs() {
    use graphbug_xla::hlo::graph::HloGraph;
    let path = common::corpus_dir().join("scan.hlo");
    let program = Program::read(&std::fs::read(path).unwrap(), Kind::HloText).unwrap();
    let Program::Hlo { module, .. } = &program else {
        unreachable!()
    };
    let g = HloGraph::new(module).unwrap();
    assert_eq!(g.called_by("while.6"), ["region_2.6", "region_0.5"]);
    let backend = XlaBackend::parse("pjrt:cpu").unwrap();
    // The while body takes the loop state, a tuple: one parameter per array, tupled back.
    for (name, arrays) in [("region_0.5", 4), ("region_1.2", 2), ("closed_call.3", 2)] {
        let outlined = g.outline(name).unwrap();
        assert_eq!(outlined.parameters.len(), arrays, "{}", outlined.text);
        let p = Program::read(outlined.text.as_bytes(), Kind::HloText)
            .unwrap_or_else(|e| panic!("{e}\n{}", outlined.text));
        p.check()
            .unwrap_or_else(|e| panic!("{e}\n{}", outlined.text));
        let metas = parameter_metas(&p);
        let inputs = random_tensors(&metas, 0).unwrap();
        backend
            .compile(&p)
            .and_then(|c| c.execute(&inputs))
            .unwrap_or_else(|f| panic!("{f}\n{}", outlined.text));
        if name == "region_0.5" {
            // Element 1 of the state's tuple is its second array.
            assert_eq!(outlined.parameters[1], (0, vec![1]));
        }
    }
    assert!(g.outline("main.7").is_err());
    assert!(g.outline("nothing").is_err());
    // The values each receives in a run: the loop's first state (the tuple the while
    // reads, taken apart); a reducer's scalars were never recorded.
    let (printer, recorded) = recorded_run("hlo/scan.hlo", Kind::HloText);
    let body = printer.outline("region_0.5").unwrap();
    let values = called_values(&printer, &recorded, "while.6", "region_0.5", &body);
    let p = Program::read(body.text.as_bytes(), Kind::HloText).unwrap();
    let metas = parameter_metas(&p);
    assert_eq!(values.len(), 4);
    for (v, meta) in values.iter().zip(&metas) {
        let v = v.as_ref().expect("the loop state was recorded");
        assert_eq!((v.dtype, v.shape.len()), (meta.dtype, meta.shape.len()));
    }
    assert_eq!(values[1].as_ref(), recorded.inputs.get(1));
    let reducer = printer.outline("region_1.2").unwrap();
    assert!(
        called_values(&printer, &recorded, "while.6", "region_1.2", &reducer)
            .iter()
            .all(Option::is_none)
    );
}

#[test]
fn a_called_stablehlo_function_alone_is_a_program_that_runs() {
    let path = common::root().join("tests/fixtures/xla/bart/decoder.mlir");
    let program = Program::read(&std::fs::read(&path).unwrap(), Kind::StableHloText).unwrap();
    let printer = Arc::new(Printer::new(&program).unwrap());
    let mut named = graphbug_files::read(&path.with_file_name("inputs.safetensors")).unwrap();
    named.sort_by_key(|(k, _)| k.trim_start_matches("arg").parse::<usize>().unwrap());
    let inputs: Vec<_> = named.into_iter().map(|(_, t)| t).collect();
    let reference = XlaBackend::parse("pjrt:cpu").unwrap();
    let recorded = Recorded::record(&printer, inputs, &reference, false).unwrap();
    assert_eq!(printer.called_by("3"), ["_take"]);
    let take = printer.outline("_take").unwrap();
    assert!(
        take.text
            .contains("func.func public @main(%arg0: tensor<48x32xf32>"),
        "{}",
        take.text
    );
    assert!(!take.text.contains("@tril"), "{}", take.text);
    // The call's operands, as main passed them.
    let values: Vec<_> = called_values(&printer, &recorded, "3", "_take", &take)
        .into_iter()
        .map(|v| v.expect("recorded"))
        .collect();
    let p = Program::read(take.text.as_bytes(), Kind::StableHloText).unwrap();
    let out = reference.compile(&p).unwrap().execute(&values).unwrap();
    assert_eq!(
        Some(&out[0]),
        recorded.by_name("3"),
        "the call's value, recorded in main"
    );
    assert!(printer.outline("main").is_err());
}

#[test]
fn a_stablehlo_while_region_alone_is_a_program_that_runs() {
    let (printer, recorded) = recorded_run("stablehlo/train.mlir", Kind::StableHloText);
    let called = printer.called_by("23:9");
    assert_eq!(called[..2], ["23:9.cond", "23:9.body"], "{called:?}");
    let reference = XlaBackend::parse("pjrt:cpu").unwrap();
    for region in ["23:9.cond", "23:9.body"] {
        let outlined = printer.outline(region).unwrap();
        // The loop-carried values, as the loop starts, then nothing else: the regions read
        // only what the loop carries.
        let values: Vec<_> = called_values(&printer, &recorded, "23:9", region, &outlined)
            .into_iter()
            .map(|v| v.unwrap_or_else(|| panic!("{region}: a value was not recorded")))
            .collect();
        assert_eq!(values.len(), 9, "{}", outlined.text);
        let p = Program::read(outlined.text.as_bytes(), Kind::StableHloText)
            .unwrap_or_else(|e| panic!("{e}\n{}", outlined.text));
        let out = reference
            .compile(&p)
            .and_then(|c| c.execute(&values))
            .unwrap_or_else(|f| panic!("{f}\n{}", outlined.text));
        // The condition holds at the start (the loop runs 5 times from 0).
        if region.ends_with(".cond") {
            assert_eq!(out[0].data, [1], "{}", outlined.text);
        } else {
            assert_eq!(out.len(), 9);
        }
    }
}

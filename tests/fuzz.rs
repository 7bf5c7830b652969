//! A time-boxed fuzz run of the parser, and of `graphbug check --meta` and `graphbug run`,
//! over mutated fixtures. The parser must never panic and must print what it accepts
//! back identically; the commands must end in an answer or a clear error (exit 0 or 1):
//! never a panic, an abort or a hang of graphbug itself, even when the graph makes
//! libtorch crash (kernels such as batch norm's do not check their arguments' sizes).
//!
//! The corpus is the reference graphs, `tests/fuzz/seeds/` and `tests/fuzz/regressions/`
//! (inputs that once broke graphbug, kept forever); the regressions run first, then
//! seeded mutations until the time box (`GRAPHBUG_FUZZ_SECONDS`, default 30) runs out.
//! `cargo xtask fuzz [SECONDS]` runs it longer. A defect is reported with its text; add it
//! to the regressions.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{command, output_within, text, Rng};
use graphbug::ir::{parse_graph, print_graph};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn texts_in(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

/// What became of the cases.
#[derive(Default, Debug)]
struct Tally {
    parsed: usize,
    accepted: usize,
    commands: usize,
    answered: usize,
}

/// The parser on one text: `Err` describes a defect.
fn parse_case(text: &str, tally: &mut Tally) -> Result<bool, String> {
    tally.parsed += 1;
    let outcome = std::panic::catch_unwind(|| {
        let Ok(graph) = parse_graph(text) else {
            return Ok(false);
        };
        let printed = print_graph(&graph);
        let again =
            parse_graph(&printed).map_err(|e| format!("printed graph does not parse: {e}"))?;
        if print_graph(&again) != printed {
            return Err("printing is not stable".to_string());
        }
        Ok(true)
    });
    let accepted = outcome.map_err(|_| "the parser panicked".to_string())??;
    tally.accepted += usize::from(accepted);
    Ok(accepted)
}

/// `check --meta` and `run` on one graph file: `Err` describes a defect.
fn command_case(file: &Path, tmp: &Path, tally: &mut Tally) -> Result<(), String> {
    let f = file.to_str().expect("UTF-8 path");
    for args in [
        vec!["check", "--meta", f],
        vec!["run", f, "--timeout", "20"],
    ] {
        tally.commands += 1;
        let out = output_within(command(&args, &[], tmp), Duration::from_secs(60));
        let err = text(&out.stderr);
        match out.status.code() {
            Some(0 | 1) if !err.contains("panicked") => {
                tally.answered += usize::from(out.status.code() == Some(0))
            }
            _ => {
                return Err(format!(
                    "`graphbug {}` ended with {:?}:\n{}",
                    args.join(" "),
                    out.status,
                    err.chars().take(800).collect::<String>()
                ))
            }
        }
    }
    Ok(())
}

/// Values that break careless size arithmetic and parsers.
const NUMBERS: [&str; 12] = [
    "0",
    "-1",
    "-8",
    "1",
    "3",
    "4294967296",
    "1000000000000",
    "9223372036854775807",
    "-9223372036854775808",
    "1e-45",
    "nan",
    "inf",
];

const TOKENS: [&str; 16] = [
    "(",
    ")",
    "[",
    "]",
    ",",
    ";",
    " = None",
    "\"f32[",
    "torch.ops.aten.",
    "\n",
    "#",
    "'",
    "\\",
    "x",
    "getitem",
    "[0]",
];

const DTYPES: [&str; 8] = ["f32", "f64", "f16", "bf16", "i64", "b8", "c64", "u8"];

/// One random edit of `text`.
fn mutate(text: &str, rng: &mut Rng) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let pick = |rng: &mut Rng, n: usize| rng.below(n as u64) as usize;
    let char_boundary = |s: &str, mut i: usize| {
        while i > 0 && !s.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    match rng.below(9) {
        // Delete a short byte range.
        0 => {
            let a = char_boundary(text, pick(rng, text.len().max(1)));
            let b = char_boundary(text, (a + 1 + pick(rng, 20)).min(text.len()));
            format!("{}{}", &text[..a], &text[b.max(a)..])
        }
        // Duplicate, delete or swap lines.
        1..=3 if lines.len() > 1 => {
            let mut ls: Vec<&str> = lines.clone();
            let i = pick(rng, ls.len());
            let j = pick(rng, ls.len());
            match rng.below(3) {
                0 => ls.insert(j, lines[i]),
                1 => {
                    ls.remove(i);
                }
                _ => ls.swap(i, j),
            }
            ls.join("\n") + "\n"
        }
        // Replace a number.
        4 | 5 => {
            let digits: Vec<usize> = text
                .char_indices()
                .filter(|(i, c)| {
                    c.is_ascii_digit() && (*i == 0 || !text.as_bytes()[i - 1].is_ascii_digit())
                })
                .map(|(i, _)| i)
                .collect();
            if digits.is_empty() {
                return text.to_string();
            }
            let a = digits[pick(rng, digits.len())];
            let b = a + text[a..].chars().take_while(char::is_ascii_digit).count();
            format!(
                "{}{}{}",
                &text[..a],
                NUMBERS[pick(rng, NUMBERS.len())],
                &text[b..]
            )
        }
        // Insert a token.
        6 => {
            let a = char_boundary(text, pick(rng, text.len().max(1)));
            format!(
                "{}{}{}",
                &text[..a],
                TOKENS[pick(rng, TOKENS.len())],
                &text[a..]
            )
        }
        // Change a dtype.
        7 => {
            let d = DTYPES[pick(rng, DTYPES.len())];
            let from = DTYPES[pick(rng, DTYPES.len())];
            text.replacen(&format!("\"{from}["), &format!("\"{d}["), 1 + pick(rng, 3))
        }
        // Truncate.
        _ => {
            let a = char_boundary(text, pick(rng, text.len().max(1)));
            text[..a].to_string()
        }
    }
}

#[test]
fn fuzz_the_parser_and_the_commands_over_mutated_fixtures() {
    let seconds: u64 = std::env::var("GRAPHBUG_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let seed = std::env::var("GRAPHBUG_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2026);
    let tmp = tempfile::tempdir().unwrap();
    let mut corpus = Vec::new();
    for model in ["mlp", "cnn", "gpt4"] {
        corpus.extend(texts_in(&root().join("tests/fixtures").join(model)));
    }
    corpus.extend(texts_in(&root().join("tests/fuzz/seeds")));
    let regressions = texts_in(&root().join("tests/fuzz/regressions"));
    assert!(!regressions.is_empty());
    let mut tally = Tally::default();
    let mut defects = Vec::new();
    let case_file = tmp.path().join("case.py");
    let commands = |label: &str, text: &str, tally: &mut Tally, defects: &mut Vec<String>| {
        std::fs::write(&case_file, text).unwrap();
        if let Err(e) = command_case(&case_file, tmp.path(), tally) {
            defects.push(format!("{label}: {e}\n{text}"));
        }
    };
    // The regressions, whole: every stage.
    for (name, text) in &regressions {
        if let Err(e) = parse_case(text, &mut tally) {
            defects.push(format!("{name}: {e}"));
        }
        commands(name, text, &mut tally, &mut defects);
    }
    // Mutants: a third of the time box for the parser alone, the rest for the commands.
    let mut rng = Rng::new(seed);
    let mutant = |rng: &mut Rng| {
        let (name, text) = &corpus[rng.below(corpus.len() as u64) as usize];
        let mut m = text.clone();
        for _ in 0..=rng.below(4) {
            m = mutate(&m, rng);
        }
        (name.clone(), m)
    };
    let start = Instant::now();
    let parse_box = Duration::from_secs(seconds / 3);
    while start.elapsed() < parse_box && defects.len() < 10 {
        let (name, m) = mutant(&mut rng);
        if let Err(e) = parse_case(&m, &mut tally) {
            defects.push(format!("mutant of {name}: {e}\n{m}"));
        }
    }
    while start.elapsed() < Duration::from_secs(seconds) && defects.len() < 10 {
        let (name, m) = mutant(&mut rng);
        // Commands only on graphs that parse: the rest is the parser's business above.
        if parse_graph(&m).is_ok() {
            commands(&format!("mutant of {name}"), &m, &mut tally, &mut defects);
        }
    }
    println!("fuzz (seed {seed}, {seconds} s): {tally:?}");
    assert!(
        defects.is_empty(),
        "{} defects (add each case to tests/fuzz/regressions/):\n{}",
        defects.len(),
        defects.join("\n---\n")
    );
    assert!(tally.accepted > 0 && tally.answered > 0, "{tally:?}");
}

//! `cargo xtask bench`'s summary: the figures every benchmark printed against its target
//! (`target: <bench>: <what>: <value> (target <= <t>): met|MISSED`, see
//! `graphbug_ir::bench::Targets`), and what its spinner says cargo is doing.

/// The figures in a benchmark's output line, if it is one.
pub fn figure(line: &str) -> Option<&str> {
    line.strip_prefix("target: ")
}

/// How many of `figures` missed their target.
pub fn missed<S: AsRef<str>>(figures: &[S]) -> usize {
    figures
        .iter()
        .filter(|f| f.as_ref().ends_with(": MISSED"))
        .count()
}

/// What a line of `cargo bench`'s standard error says it is doing, for the spinner:
/// `running scale (benches/scale.rs)` for cargo's `Running benches/scale.rs
/// (target/release/deps/scale-0123abcd)`, `compiling graphbug-ir` for its `Compiling
/// graphbug-ir v0.1.0 (...)`. Colours (`CARGO_TERM_COLOR=always`) are read through.
pub fn status(line: &str) -> Option<String> {
    let line = without_escapes(line);
    let line = line.trim();
    if let Some(what) = line.strip_prefix("Running ") {
        let (source, binary) = match what.rsplit_once(" (") {
            Some((source, binary)) => (source.trim(), binary.trim_end_matches(')')),
            None => (what.trim(), what.trim()),
        };
        let file = binary.rsplit('/').next().unwrap_or(binary);
        // `scale-0123abcd`: the bench's name and cargo's hash of it.
        let name = match file.rsplit_once('-') {
            Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name,
            _ => file,
        };
        return Some(format!("running {name} ({source})"));
    }
    let krate = line.strip_prefix("Compiling ")?.split_whitespace().next()?;
    Some(format!("compiling {krate}"))
}

/// `line` without its ANSI escape sequences (`ESC [ ... letter`).
fn without_escapes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        if chars.next() == Some('[') {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargos_running_and_compiling_lines_name_the_bench() {
        assert_eq!(
            status("     Running benches/scale.rs (target/release/deps/scale-0123abcd89ef)")
                .as_deref(),
            Some("running scale (benches/scale.rs)")
        );
        assert_eq!(
            status("\x1b[1m\x1b[92m     Running\x1b[0m unittests src/lib.rs (target/release/deps/graphbug_ir-00ff)")
                .as_deref(),
            Some("running graphbug_ir (unittests src/lib.rs)")
        );
        assert_eq!(
            status("   Compiling graphbug-ir v0.1.0 (/work/crates/generic/ir)").as_deref(),
            Some("compiling graphbug-ir")
        );
        assert_eq!(status("target: scale: x: 1 ms (target <= 2 ms): met"), None);
        assert_eq!(status("running 3 tests"), None);
    }

    #[test]
    fn figures_are_read_and_misses_counted() {
        let out = "min-cut partition of GPT joint graphs\n\
                   target: mincut: 48-layer min-cut: 10.6 ms (target <= 54 ms): met\n\
                   target: aten_eager: gpt4 eager run, of PyTorch's: 0.508x (target <= 0.5x): MISSED\n";
        let figures: Vec<&str> = out.lines().filter_map(figure).collect();
        assert_eq!(figures.len(), 2);
        assert_eq!(missed(&figures), 1);
        assert_eq!(missed(&figures[..1]), 0);
    }
}

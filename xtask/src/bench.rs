//! `cargo xtask bench`'s summary: the figures every benchmark printed against its target
//! (`target: <bench>: <what>: <value> (target <= <t>): met|MISSED`, see
//! `graphbug_ir::bench::Targets`).

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

#[cfg(test)]
mod tests {
    use super::*;

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

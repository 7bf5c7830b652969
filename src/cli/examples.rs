//! Examples after each subcommand's `--help`, and the example lines read back as
//! arguments (for the tests that parse every example): shared by `graphbug` and `cargo
//! xtask`, which includes this file by path (it needs only clap).

#![allow(dead_code)]

use clap::Command;

/// `cli` with `table`'s examples (subcommand, lines) after each subcommand's help, and
/// `hint` after its own.
pub fn with_examples(mut cli: Command, table: &[(&str, &str)], hint: &'static str) -> Command {
    for (name, examples) in table {
        if cli.find_subcommand(name).is_some() {
            let text = format!("Examples:\n{}", indented(examples));
            cli = cli.mut_subcommand(name, |c| c.after_help(text));
        }
    }
    cli.after_help(hint)
}

/// `text` indented by two spaces.
fn indented(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The example commands of a help text that start with `program`: each line that starts
/// with it, split into arguments as a shell splits them (quotes), up to a pipe or a
/// redirection.
pub fn examples(help: &str, program: &str) -> Vec<Vec<String>> {
    help.lines()
        .map(str::trim)
        .filter(|l| l.starts_with(&format!("{program} ")) || *l == program)
        .map(|l| {
            shell_words(l)
                .into_iter()
                .take_while(|w| !matches!(w.as_str(), "|" | ">" | "<" | "&&" | ";" | "#"))
                .collect()
        })
        .collect()
}

/// `line` split into words as a shell splits them (single and double quotes; no
/// expansions).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_lines_split_as_a_shell_splits_them() {
        let help = "Examples:\n  # a comment\n  graphbug minify g.py --check-command './x.sh --y'\n  cat g.py | graphbug fmt -\n  graphbug joint g.py > joint.py\n";
        assert_eq!(
            examples(help, "graphbug"),
            [
                vec![
                    "graphbug",
                    "minify",
                    "g.py",
                    "--check-command",
                    "./x.sh --y"
                ],
                vec!["graphbug", "joint", "g.py"],
            ]
        );
        assert_eq!(shell_words(r#"a "b c" '' d"#), ["a", "b c", "", "d"]);
    }
}

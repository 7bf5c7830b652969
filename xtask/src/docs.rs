//! `cargo xtask docs`: builds the book (`docs/`, mdBook) and runs the code blocks of the
//! documentation, so that every command a reader copies works.
//!
//! The conventions (docs/src/contributing.md says them to writers):
//! - ```` ```sh ```` blocks run. The blocks of one markdown file run in order in one bash
//!   process (`set -euo pipefail`), so a block can use the files an earlier one made; the
//!   working directory is a fresh scratch directory per file under the system temp dir,
//!   removed afterwards; `target/debug` (with `graphbug`, built first) leads `PATH`, and
//!   `GRAPHBUG_REPO` is the repository root. The scratch directory's `.cargo/config.toml`
//!   includes the repository's, so `cargo xtask ...` works there as in the repository.
//! - ```` ```python ```` blocks run with `.venv/bin/python` in the same process, cwd and order.
//! - ```` ```text ```` blocks (output, usage synopses) and ```` ```toml ```` blocks do not
//!   run; ```` ```rust ```` blocks are doctests of the root crate (`src/lib.rs` includes
//!   each file that has one, which this check verifies).
//! - Any other tag, or none, is an error: nothing is skipped silently.
//!
//! Each file gets a bounded wait; on timeout its whole process group is killed. A failing
//! block fails the run, naming the file, the block's first line and its stderr's tail.
//! Relative links and images must point at files that exist.

use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use graphbug_run::process::{wait_bounded, Ended};

/// The mdBook release `cargo xtask setup` installs (`cargo install mdbook --locked`).
pub const MDBOOK_VERSION: &str = "0.5.4";

/// The language of a fenced code block, from its info string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Runs in the file's bash process.
    Sh,
    /// Runs with the venv's Python, in the same working directory.
    Python,
    /// Output or a usage synopsis: never runs.
    Text,
    /// A doctest of the root crate (`cargo test --doc`).
    Rust,
    /// A configuration excerpt: never runs.
    Toml,
}

impl Lang {
    /// The language a fence's first word names, if it is one the documentation may use.
    fn from_tag(tag: &str) -> Option<Lang> {
        Some(match tag {
            "sh" => Lang::Sh,
            "python" => Lang::Python,
            "text" => Lang::Text,
            "rust" => Lang::Rust,
            "toml" => Lang::Toml,
            _ => return None,
        })
    }

    /// Whether `cargo xtask docs` runs blocks of this language itself.
    pub fn runs(self) -> bool {
        matches!(self, Lang::Sh | Lang::Python)
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Lang::Sh => "sh",
            Lang::Python => "python",
            Lang::Text => "text",
            Lang::Rust => "rust",
            Lang::Toml => "toml",
        })
    }
}

/// One fenced code block of a markdown file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Its language.
    pub lang: Lang,
    /// The line (1-based) of its opening fence.
    pub line: usize,
    /// Its text, the fence's indentation removed, each line ending in a newline.
    pub code: String,
}

/// What the tags mean, for error messages.
const TAGS_HELP: &str = "tag it sh (runs), python (runs), text (output or a synopsis: does \
                         not run), rust (a doctest) or toml";

/// The fenced code blocks of a markdown text, in order. An untagged block, a tag outside
/// [`Lang`] or a block never closed is an error naming its line.
pub fn extract_blocks(text: &str) -> Result<Vec<Block>, String> {
    struct Open {
        lang: Lang,
        line: usize,
        indent: usize,
        fence: char,
        len: usize,
        code: String,
    }
    let mut blocks = Vec::new();
    let mut open: Option<Open> = None;
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        let indent = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[indent..];
        let fence = rest.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = fence.map_or(0, |c| rest.chars().take_while(|x| *x == c).count());
        match &mut open {
            Some(block) => {
                if fence == Some(block.fence) && run >= block.len && rest[run..].trim().is_empty() {
                    let done = open.take().expect("a block is open");
                    blocks.push(Block {
                        lang: done.lang,
                        line: done.line,
                        code: done.code,
                    });
                } else {
                    let strip = indent.min(block.indent);
                    block.code.push_str(&line[strip..]);
                    block.code.push('\n');
                }
            }
            None => {
                let Some(c) = fence else { continue };
                if run < 3 {
                    continue;
                }
                let info = rest[run..].trim();
                // CommonMark: a backtick fence's info string has no backtick (``` `x` ```
                // on one line is inline code, not a fence).
                if c == '`' && info.contains('`') {
                    continue;
                }
                let tag = info
                    .split(|ch: char| ch == ',' || ch.is_whitespace())
                    .next()
                    .unwrap_or("");
                if tag.is_empty() {
                    return Err(format!(
                        "line {number}: a code block without a language: {TAGS_HELP}"
                    ));
                }
                let lang = Lang::from_tag(tag).ok_or_else(|| {
                    format!("line {number}: unknown code block language `{tag}`: {TAGS_HELP}")
                })?;
                // Only Rust blocks take attributes (rustdoc's: `rust,no_run`); `ignore`
                // would skip one, which nothing here may do.
                if info != tag && (lang != Lang::Rust || info.contains("ignore")) {
                    return Err(format!(
                        "line {number}: code block info `{info}`: only `{tag}` is allowed \
                         (rust blocks may add rustdoc attributes other than ignore)"
                    ));
                }
                open = Some(Open {
                    lang,
                    line: number,
                    indent,
                    fence: c,
                    len: run,
                    code: String::new(),
                });
            }
        }
    }
    match open {
        Some(block) => Err(format!("line {}: code block never closed", block.line)),
        None => Ok(blocks),
    }
}

/// The relative link and image targets of a markdown text outside code (blocks and inline
/// code), each with its line: `[a](target)`, `![a](target)`, `[a]: target`. Web links
/// and in-page anchors are left out; a target's own anchor is cut off.
pub fn relative_links(text: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    let mut in_block: Option<(char, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let fence = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = fence.map_or(0, |c| trimmed.chars().take_while(|x| *x == c).count());
        if let Some((c, len)) = in_block {
            if fence == Some(c) && run >= len && trimmed[run..].trim().is_empty() {
                in_block = None;
            }
            continue;
        }
        if run >= 3 {
            in_block = fence.map(|c| (c, run));
            continue;
        }
        // Inline code spans cannot hold links.
        let mut plain = String::new();
        for (k, part) in line.split('`').enumerate() {
            if k % 2 == 0 {
                plain.push_str(part);
            }
            plain.push(' ');
        }
        let mut targets = Vec::new();
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            targets.push(
                after[..end]
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_string(),
            );
            rest = &after[end..];
        }
        if let Some(def) = plain.trim_start().strip_prefix('[') {
            if let Some((_, target)) = def.split_once("]:") {
                targets.push(target.split_whitespace().next().unwrap_or("").to_string());
            }
        }
        for target in targets {
            let target = target.trim_matches(|c| c == '<' || c == '>');
            if target.is_empty()
                || target.starts_with('#')
                || target.contains("://")
                || target.starts_with("mailto:")
            {
                continue;
            }
            let path = target.split('#').next().unwrap_or(target);
            links.push((i + 1, path.to_string()));
        }
    }
    links
}

/// The markdown files whose blocks are checked, relative to `root`: README.md,
/// ARCHITECTURE.md and every `.md` under docs/src, in that order (the book's sorted).
pub fn doc_files(root: &Path) -> Result<Vec<PathBuf>> {
    let mut files = vec![PathBuf::from("README.md"), PathBuf::from("ARCHITECTURE.md")];
    let mut book = Vec::new();
    let mut dirs = vec![root.join("docs/src")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                book.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
            }
        }
    }
    book.sort();
    files.extend(book);
    Ok(files)
}

/// Options of a docs check.
pub struct Options {
    /// The repository root.
    pub root: PathBuf,
    /// Only these files (relative to the root); all of [`doc_files`] when empty.
    pub files: Vec<PathBuf>,
    /// How long one file's blocks may run together.
    pub timeout: Duration,
    /// The mdbook executable.
    pub mdbook: PathBuf,
}

/// Builds the book into target/book, checks links and doctest coverage, and runs the
/// blocks of every file; returns whether everything passed (failures are printed).
pub fn check(opts: &Options) -> Result<bool> {
    let root = &opts.root;
    let started = Instant::now();
    let mut ok = build_book(root, &opts.mdbook)?;
    let all = doc_files(root)?;
    let files = if opts.files.is_empty() {
        all
    } else {
        opts.files.clone()
    };
    let lib_rs = fs::read_to_string(root.join("src/lib.rs")).context("cannot read src/lib.rs")?;
    let mut ran = 0usize;
    for rel in &files {
        let path = root.join(rel);
        let text =
            fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        for (line, target) in relative_links(&text) {
            let dir = path.parent().unwrap_or(root);
            if dir.join(&target).exists() {
                continue;
            }
            eprintln!("docs: {}:{line}: broken link `{target}`", rel.display());
            ok = false;
        }
        let blocks = match extract_blocks(&text) {
            Ok(blocks) => blocks,
            Err(e) => {
                eprintln!("docs: {}: {e}", rel.display());
                ok = false;
                continue;
            }
        };
        if blocks.iter().any(|b| b.lang == Lang::Rust) {
            let include = format!("include_str!(\"../{}\")", rel.display());
            if !lib_rs.contains(&include) {
                eprintln!(
                    "docs: {} has rust blocks, but src/lib.rs has no `#[doc = {include}]` \
                     (a #[cfg(doctest)] item), so `cargo test --doc` would not run them",
                    rel.display()
                );
                ok = false;
            }
        }
        let runnable: Vec<&Block> = blocks.iter().filter(|b| b.lang.runs()).collect();
        if runnable.is_empty() {
            continue;
        }
        let t = Instant::now();
        let outcome = run_file(opts, rel, &runnable)?;
        ran += runnable.len();
        match outcome {
            None => eprintln!(
                "docs: {}: {} block(s) passed in {:.1} s",
                rel.display(),
                runnable.len(),
                t.elapsed().as_secs_f64()
            ),
            Some(failure) => {
                eprintln!("docs: {}: FAILED\n{failure}", rel.display());
                ok = false;
            }
        }
    }
    eprintln!(
        "docs: {ran} block(s) in {} file(s), {} in {:.0} s",
        files.len(),
        if ok { "all passed" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    Ok(ok)
}

/// Runs `mdbook build docs` into target/book; a warning or an error fails it.
fn build_book(root: &Path, mdbook: &Path) -> Result<bool> {
    let out = root.join("target/book");
    let output = xtask::process::die_with_parent(&mut Command::new(mdbook))
        .arg("build")
        .arg(root.join("docs"))
        .arg("--dest-dir")
        .arg(&out)
        .stdin(Stdio::null())
        .output()
        .with_context(|| {
            format!(
                "cannot run {} (`cargo xtask setup` installs mdbook {MDBOOK_VERSION})",
                mdbook.display()
            )
        })?;
    let log = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    let complaints: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    if !output.status.success() || !complaints.is_empty() {
        eprintln!("docs: mdbook build failed ({}):\n{log}", output.status);
        return Ok(false);
    }
    eprintln!("docs: book built in {}", out.display());
    Ok(true)
}

/// The bash script that runs `blocks` (each written to `state/b<line>.<ext>`) in order,
/// recording the block under way in `state/current`, each block's output in
/// `state/b<line>.out|.err`, and `done` at the end.
fn driver(state: &Path, python: &Path, blocks: &[&Block]) -> Result<String> {
    let q = |p: &Path| shell_quote(&p.to_string_lossy());
    let mut script = String::from("set -euo pipefail\n");
    for b in blocks {
        let (ext, run) = match b.lang {
            Lang::Sh => ("sh", "source".to_string()),
            Lang::Python => ("py", q(python)),
            _ => unreachable!("only sh and python blocks run"),
        };
        let file = state.join(format!("b{}.{ext}", b.line));
        fs::write(&file, &b.code).with_context(|| format!("cannot write {}", file.display()))?;
        let out = state.join(format!("b{}.out", b.line));
        let err = state.join(format!("b{}.err", b.line));
        script.push_str(&format!(
            "printf '%s\\n' {} > {}\n{run} {} > {} 2> {}\n",
            b.line,
            q(&state.join("current")),
            q(&file),
            q(&out),
            q(&err)
        ));
    }
    script.push_str(&format!(
        "printf 'done\\n' > {}\n",
        q(&state.join("current"))
    ));
    Ok(script)
}

/// `s` quoted for bash.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Runs the blocks of `rel` in a fresh scratch directory; `None` when they all pass, or
/// the failure (block, exit, output tails).
fn run_file(opts: &Options, rel: &Path, blocks: &[&Block]) -> Result<Option<String>> {
    let stem = rel
        .to_string_lossy()
        .replace(|c: char| !c.is_ascii_alphanumeric(), "_");
    let base = std::env::temp_dir().join(format!("graphbug-docs-{}-{stem}", std::process::id()));
    let scratch = base.join("work");
    let state = base.join("state");
    let _ = fs::remove_dir_all(&base);
    fs::create_dir_all(scratch.join(".cargo"))
        .with_context(|| format!("cannot create {}", scratch.display()))?;
    fs::create_dir_all(&state)?;
    let result = run_in(opts, rel, blocks, &scratch, &state);
    let _ = fs::remove_dir_all(&base);
    result
}

/// [`run_file`] in `scratch`, with the driver's files in `state`.
fn run_in(
    opts: &Options,
    rel: &Path,
    blocks: &[&Block],
    scratch: &Path,
    state: &Path,
) -> Result<Option<String>> {
    let root = &opts.root;
    // `cargo xtask ...` in the scratch directory: the repository's configuration (libtorch,
    // rustflags: the same builds, nothing rebuilt) and an alias that names its manifest.
    let config = root.join(".cargo/config.toml");
    let manifest = root.join("Cargo.toml");
    fs::write(
        scratch.join(".cargo/config.toml"),
        format!(
            "# Written by `cargo xtask docs`: `cargo xtask` works here as in the repository.\n\
             include = [{{ path = {:?} }}]\n\n[alias]\n\
             xtask = \"run --quiet --manifest-path {} --package xtask --\"\n",
            config.to_string_lossy(),
            manifest.to_string_lossy().replace('"', "\\\"")
        ),
    )?;
    let python = root.join(".venv/bin/python");
    let script = driver(state, &python, blocks)?;
    let driver_path = state.join("driver.sh");
    fs::write(&driver_path, script)?;
    let path = std::env::join_paths(std::iter::once(root.join("target/debug")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))?;
    let mut cmd = Command::new("bash");
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = xtask::process::die_with_parent(&mut cmd)
        .arg(&driver_path)
        .current_dir(scratch)
        .env("PATH", path)
        .env("GRAPHBUG_REPO", root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run bash")?;
    let pgid = child.id() as i32;
    // On a timeout the driver's whole group is killed.
    let status = match wait_bounded(&mut child, opts.timeout, true)? {
        Ended::Exited(status) => Some(status),
        Ended::TimedOut => None,
    };
    // Whatever a block left running in the background ends with the file.
    // SAFETY: killpg has no memory-safety preconditions; the group is the driver's own.
    unsafe { libc::killpg(pgid, libc::SIGKILL) };
    let current = fs::read_to_string(state.join("current")).unwrap_or_default();
    let current = current.trim();
    if status.is_some_and(|s| s.success()) && current == "done" {
        return Ok(None);
    }
    let line: usize = current.parse().unwrap_or(0);
    let Some(block) = blocks.iter().find(|b| b.line == line) else {
        return Ok(Some(format!(
            "  the driver ended ({status:?}) before its first block"
        )));
    };
    let why = match status {
        None => format!("timed out after {} s", opts.timeout.as_secs()),
        Some(s) => format!("failed ({s})"),
    };
    let tail = |ext: &str| -> String {
        let text = fs::read_to_string(state.join(format!("b{line}.{ext}"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(20);
        // bash names the block's file and line: give the markdown file's line instead.
        let ext_in = if block.lang == Lang::Sh { "sh" } else { "py" };
        let marker = format!(
            "{}: line ",
            state.join(format!("b{line}.{ext_in}")).display()
        );
        lines[from..]
            .iter()
            .map(|l| match l.split_once(&marker) {
                Some((head, rest)) => {
                    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    let k: usize = digits.parse().unwrap_or(0);
                    format!(
                        "{head}{}:{}{}",
                        rel.display(),
                        line + k,
                        &rest[digits.len()..]
                    )
                }
                None => l.to_string(),
            })
            .map(|l| format!("    {l}\n"))
            .collect()
    };
    let mut report = format!(
        "  the {} block at {}:{line} {why}\n",
        block.lang,
        rel.display()
    );
    let err = tail("err");
    let out = tail("out");
    if !err.is_empty() {
        report.push_str(&format!("  its stderr (last lines):\n{err}"));
    }
    if !out.is_empty() {
        report.push_str(&format!("  its stdout (last lines):\n{out}"));
    }
    let _ = std::io::stderr().flush();
    Ok(Some(report))
}

/// The mdbook to run: on `PATH`, else in cargo's bin directory; `None` when neither has
/// version [`MDBOOK_VERSION`].
pub fn find_mdbook() -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from("mdbook")];
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(home) = cargo_home {
        candidates.push(home.join("bin/mdbook"));
    }
    candidates.into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .is_ok_and(|o| {
                String::from_utf8_lossy(&o.stdout).trim() == format!("mdbook v{MDBOOK_VERSION}")
            })
    })
}

/// Installs mdbook [`MDBOOK_VERSION`] with `cargo install` unless it is there (about 85 s
/// on 2 cores, with only the features `build` needs).
pub fn ensure_mdbook() -> Result<PathBuf> {
    if let Some(found) = find_mdbook() {
        return Ok(found);
    }
    eprintln!(
        "setup: installing mdbook {MDBOOK_VERSION} (cargo install, about 90 s): it builds the \
         book (docs/ into target/book)"
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["install", "mdbook", "--locked", "--version", MDBOOK_VERSION])
        // `serve` and `watch` (a web server, file watching) are not needed to build.
        .args(["--no-default-features", "--features", "search"])
        // Away from the repository's .cargo/config.toml (libtorch's rustflags).
        .current_dir(std::env::temp_dir())
        .status()
        .context("cannot run cargo install")?;
    ensure!(
        status.success(),
        "`cargo install mdbook --locked --version {MDBOOK_VERSION}` failed ({status}); crates.io \
         must be reachable"
    );
    match find_mdbook() {
        Some(found) => Ok(found),
        None => bail!(
            "cargo installed mdbook {MDBOOK_VERSION}, but it is neither on PATH nor in \
             cargo's bin directory"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_keep_their_language_line_and_text() {
        let md = "# Title\n\n```sh\ngraphbug check g.py\necho ok\n```\n\ntext\n\n\
                  ```python\nprint(1)\n```\n```text\nout0: f32[2]\n```\n\
                  ```rust,no_run\nlet x = 1;\n```\n```toml\n[book]\n```\n";
        let blocks = extract_blocks(md).unwrap();
        let got: Vec<(Lang, usize, &str)> = blocks
            .iter()
            .map(|b| (b.lang, b.line, b.code.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Lang::Sh, 3, "graphbug check g.py\necho ok\n"),
                (Lang::Python, 10, "print(1)\n"),
                (Lang::Text, 13, "out0: f32[2]\n"),
                (Lang::Rust, 16, "let x = 1;\n"),
                (Lang::Toml, 19, "[book]\n"),
            ]
        );
        assert!(blocks[0].lang.runs() && blocks[1].lang.runs());
        assert!(!blocks[2].lang.runs() && !blocks[3].lang.runs() && !blocks[4].lang.runs());
    }

    #[test]
    fn indented_and_long_fences_are_blocks() {
        // A block in a list item is indented; a longer fence holds a shorter one.
        let md = "- item:\n\n  ```sh\n  echo a\n    echo b\n  ```\n\n\
                  ````text\n```sh\nnot a block\n```\n````\n";
        let blocks = extract_blocks(md).unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].line, 3);
        assert_eq!(blocks[0].code, "echo a\n  echo b\n");
        assert_eq!(blocks[1].lang, Lang::Text);
        assert_eq!(blocks[1].line, 8);
        assert_eq!(blocks[1].code, "```sh\nnot a block\n```\n");
    }

    #[test]
    fn tildes_and_inline_code_on_a_line_of_its_own() {
        let md = "~~~sh\necho ~\n~~~\n``` `inline` ```\n";
        let blocks = extract_blocks(md).unwrap();
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].code, "echo ~\n");
    }

    #[test]
    fn untagged_unknown_and_unclosed_blocks_are_errors_with_their_line() {
        let err = extract_blocks("a\n\n```\nx\n```\n").unwrap_err();
        assert!(
            err.starts_with("line 3: a code block without a language"),
            "{err}"
        );
        let err = extract_blocks("```sh\nok\n```\n```console\n$ x\n```\n").unwrap_err();
        assert!(
            err.starts_with("line 4: unknown code block language `console`"),
            "{err}"
        );
        let err = extract_blocks("```bash\nx\n```\n").unwrap_err();
        assert!(err.contains("`bash`"), "{err}");
        let err = extract_blocks("text\n```python\nprint(1)\n").unwrap_err();
        assert_eq!(err, "line 2: code block never closed");
        // Attributes: rustdoc's on rust blocks only, and never one that skips the block.
        assert!(extract_blocks("```sh,no_run\nx\n```\n").is_err());
        assert!(extract_blocks("```rust,ignore\nx\n```\n").is_err());
        assert!(extract_blocks("```rust,no_run\nx\n```\n").is_ok());
    }

    #[test]
    fn relative_links_skip_code_web_links_and_anchors() {
        let md = "See [the book](docs/src/x.md#part) and ![pic](images/a.svg).\n\
                  [web](https://example.org) [here](#top) `[no](code.md)`\n\
                  ```sh\necho [no](block.md)\n```\n[ref]: ../ARCHITECTURE.md\n";
        assert_eq!(
            relative_links(md),
            vec![
                (1, "docs/src/x.md".to_string()),
                (1, "images/a.svg".to_string()),
                (6, "../ARCHITECTURE.md".to_string()),
            ]
        );
    }

    #[test]
    fn the_driver_runs_blocks_in_order_and_records_progress() {
        let blocks = extract_blocks("```sh\ncd sub\n```\n```python\nprint(1)\n```\n").unwrap();
        let refs: Vec<&Block> = blocks.iter().collect();
        let dir = std::env::temp_dir().join(format!("xtask-docs-driver-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let script = driver(&dir, Path::new("/py"), &refs).unwrap();
        assert!(script.starts_with("set -euo pipefail\n"));
        let sh = script.find("source").unwrap();
        let py = script.find("'/py'").unwrap();
        assert!(sh < py, "{script}");
        assert!(script.trim_end().ends_with("current'"), "{script}");
        assert_eq!(fs::read_to_string(dir.join("b1.sh")).unwrap(), "cd sub\n");
        assert_eq!(fs::read_to_string(dir.join("b4.py")).unwrap(), "print(1)\n");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failing_block_is_named_with_its_stderr() {
        let root = std::env::temp_dir().join(format!("xtask-docs-run-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        let md = "```sh\necho made > f.txt\n```\n\n```sh\ncat f.txt\necho oops >&2\nfalse\n```\n";
        let blocks = extract_blocks(md).unwrap();
        let refs: Vec<&Block> = blocks.iter().collect();
        let opts = Options {
            root: root.clone(),
            files: vec![],
            timeout: Duration::from_secs(60),
            mdbook: PathBuf::from("mdbook"),
        };
        let failure = run_file(&opts, Path::new("x.md"), &refs).unwrap().unwrap();
        assert!(
            failure.contains("the sh block at x.md:5 failed"),
            "{failure}"
        );
        assert!(failure.contains("oops"), "{failure}");
        assert!(
            failure.contains("made"),
            "the stdout of the block: {failure}"
        );
        // A timeout kills the block's whole process group.
        let md = "```sh\nsleep 30 &\nsleep 30\n```\n";
        let blocks = extract_blocks(md).unwrap();
        let refs: Vec<&Block> = blocks.iter().collect();
        let opts = Options {
            timeout: Duration::from_millis(500),
            ..opts
        };
        let started = Instant::now();
        let failure = run_file(&opts, Path::new("y.md"), &refs).unwrap().unwrap();
        assert!(failure.contains("y.md:1 timed out"), "{failure}");
        assert!(started.elapsed() < Duration::from_secs(10));
        // Passing blocks pass; the cwd is shared between blocks of a file.
        let md = "```sh\nmkdir d && cd d\n```\n```sh\ntest \"$(basename \"$PWD\")\" = d\n```\n";
        let blocks = extract_blocks(md).unwrap();
        let refs: Vec<&Block> = blocks.iter().collect();
        let opts = Options {
            timeout: Duration::from_secs(60),
            ..opts
        };
        assert_eq!(run_file(&opts, Path::new("z.md"), &refs).unwrap(), None);
        fs::remove_dir_all(&root).unwrap();
    }
}

//! The examples each `cargo xtask` subcommand's `--help` ends with: what to type, each
//! under a comment that says what it does (the binary's tests check that every visible
//! subcommand has some and that they parse).

use clap::Command;

#[path = "../../src/cli/examples.rs"]
mod shared;

/// Examples of each subcommand, by name: lines of `# what it does` and `cargo xtask ...`.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "setup",
        "# Everything every command needs (.venv with torch, torchvision, JAX, the XLA CPU plugin;
# .libtorch; Graphviz; for the tests mdBook, Chromium, Slurm and sshd); again: a no-op
cargo xtask setup
# Only what the main job (cargo xtask repro) needs: torch and Graphviz
cargo xtask setup --for repro",
    ),
    (
        "test",
        "# Every test, every example, the XLA tests without libtorch and the docs check, all run
# whatever fails; the end lists every stage and every failing test
cargo xtask test
# One package's tests, or one test file's tests whose names match
cargo xtask test -p graphbug-ir
cargo xtask test --test cli check_",
    ),
    (
        "repro",
        "# The demo: a failing backend's repro written and minified
cargo xtask repro
# A graph of yours
cargo xtask repro tests/fixtures/mlp/forward.py --backend aot_eager --out repro_out",
    ),
    (
        "fuzz",
        "# Fuzz for 30 s, as CI does
cargo xtask fuzz 30
# Ten minutes, with other mutations
cargo xtask fuzz 600 --seed 7",
    ),
    (
        "bench",
        "# Every benchmark, then each figure against its target
cargo xtask bench
# One benchmark binary
cargo xtask bench --bench scale",
    ),
    (
        "conformance",
        "# The CI subset of every source
cargo xtask conformance --subset ci --sources opinfo,zoo,capture,xla
# Only the XLA programs of one JAX harness, four cases at a time
cargo xtask conformance --sources xla --filter cumsum -j 4
# Run the cases generated last time again, and report without failing
cargo xtask conformance --reuse-cases --no-targets",
    ),
    (
        "gpu-bundle",
        "# Pack the bundle into target/gpu-bundle, then run it on a GPU machine
cargo xtask gpu-bundle
# With a graphbug built elsewhere, into another directory
cargo xtask gpu-bundle --out /tmp/bundle --binary target/release/graphbug",
    ),
    (
        "aten-gpu-bundle",
        "# Build graphbug against torch 2.11's libtorch and pack the aten checks
cargo xtask aten-gpu-bundle
# On the GPU machine (PyTorch 2.11 with CUDA, no Rust): every check on cuda
target/aten-gpu-bundle/run.sh",
    ),
];

/// `cli` (the `cargo xtask` command) with the examples after each subcommand's help.
pub fn with_examples(cli: Command) -> Command {
    shared::with_examples(
        cli,
        EXAMPLES,
        "Each command's --help ends with examples: cargo xtask conformance --help",
    )
}

/// The example commands of a help text: each line that starts with `cargo xtask `, its
/// arguments after `cargo xtask`.
pub fn examples(help: &str) -> Vec<Vec<String>> {
    shared::examples(help, "cargo xtask")
        .into_iter()
        .map(|words| words.into_iter().skip(2).collect())
        .collect()
}

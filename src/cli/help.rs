//! The examples each subcommand's `--help` ends with: what to type, each under a comment
//! that says what it does. Every visible subcommand has some, and every example parses
//! (the binary's tests check both).

use clap::Command;

#[cfg(test)]
pub use super::examples::examples;

/// Examples of each subcommand, by name: lines of `# what it does` and `graphbug ...`.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "fmt",
        "# Print a graph pasted from PyTorch's print_readable() in canonical text
graphbug fmt forward.py
# An HLO program prints back exactly as written
graphbug fmt model.hlo
# From standard input
cat forward.py | graphbug fmt -",
    ),
    (
        "check",
        "# Verify a graph: prints `<N> nodes, <I> inputs, <O> outputs`
graphbug check forward.py
# Also check every shape annotation against libtorch's meta kernels
graphbug check forward.py --meta
# A dynamic-shape graph, its size symbol bound
graphbug check dynamic.py --meta --bind s0=8",
    ),
    (
        "specialize",
        "# Bind a dynamic-shape graph's size symbol and print the static graph
graphbug specialize dynamic.py --bind s0=8
# Bound from the inputs' sizes, lowered to aten: the graph exactly as graphbug runs it
graphbug specialize dynamic.py --inputs inputs.safetensors --aten",
    ),
    (
        "run",
        "# Run a graph through aot_eager and compare its outputs with PyTorch's
graphbug run forward.py --backend aot_eager --inputs inputs.npz --compare outputs.npz
# A training step: the forward, then the gradients of every floating input
graphbug run forward.py --backend aot_eager --backward --save-outputs grads.safetensors
# An XLA program on XLA's CPU plugin
graphbug run model.hlo --backend pjrt:cpu --inputs inputs.npz",
    ),
    (
        "trace-diff",
        "# Record every node's value in two runs, then find where they part
graphbug run forward.py --backend eager --trace eager.jsonl
graphbug run forward.py --backend aot_eager --trace aot.jsonl
graphbug trace-diff eager.jsonl aot.jsonl --atol 1e-5 --rtol 1e-4",
    ),
    (
        "backends",
        "# The backends for everyday use, and the PJRT plugins found
graphbug backends
# With the debug and testing backends (fault:, explain:, limit:, slow:)
graphbug backends --all",
    ),
    (
        "explain",
        "# The graphs aot_eager compiled: ops, their counts, a histogram
graphbug explain forward.py --backend aot_eager",
    ),
    (
        "bisect",
        "# Which pass, and which application of it, makes the output wrong
graphbug bisect forward.py --backend fault:accuracy@aten.relu.default --check accuracy
# A backward compiler's failure, probes run four at a time, repros under bisect_out
graphbug bisect forward.py --backend aot_eager:partitioner=min-cut --check runtime -j 4 --out bisect_out
# Which of XLA CPU's HLO passes makes a program's results wrong, with a workaround
graphbug bisect model.hlo --backend pjrt:cpu --check accuracy --reference-backend 'pjrt:cpu?xla_enable_hlo_passes_only=layout-assignment'
# The passes the plugin runs on a program, each invocation in order
graphbug bisect model.hlo --backend pjrt:cpu --list-passes",
    ),
    (
        "minify",
        "# Shrink a graph whose outputs a backend gets wrong; keep the smallest in min_out
graphbug minify forward.py --inputs inputs.npz --backend aot_eager --check accuracy --out min_out
# The smallest graph that still calls an op (nothing runs)
graphbug minify forward.py --check contains:aten.relu.default
# An XLA program, four workers side by side
graphbug minify model.hlo --backend fault:runtime@node:dot.12+pjrt:cpu --check runtime -j 4",
    ),
    (
        "draw",
        "# Draw a graph as SVG
graphbug draw forward.py -o forward.svg
# A joint graph cut by min-cut: forward and backward, saved and recomputed values marked
graphbug draw joint.py --partition min-cut -o joint.html
# Where two runs' traces part (`graphbug run --trace`), around the culprit node
graphbug draw forward.py --trace eager.jsonl --against aot.jsonl --around relu --depth 3 -o diverge.svg",
    ),
    (
        "repro",
        "# The bundled demo: a failing backend's repro written and minified
graphbug repro
# Reproduce a backend's failure on a graph into repro_out, without minifying
graphbug repro forward.py --backend aot_eager --level 4 --out repro_out --no-minify
# Check that a repro directory still fails, then minify it
graphbug repro repro_out run
graphbug repro repro_out minify",
    ),
    (
        "functionalize",
        "# The graph without mutation: mutated inputs become outputs
graphbug functionalize forward.py",
    ),
    (
        "joint",
        "# AOTAutograd's joint forward/backward graph, gradients of inputs 0 and 1
graphbug joint forward.py --requires-grad 0,1",
    ),
    (
        "partition",
        "# Split a joint graph into forward and backward as functorch's default partitioner
graphbug partition joint.py
# The min-cut partitioner under a peak memory budget, with the peak measured
graphbug partition joint.py --partitioner min-cut --memory-budget 512MB --measure-peak
# The memory/recompute curve of min-cut cuts
graphbug partition joint.py --partitioner min-cut --pareto",
    ),
];

/// `cli` (the `graphbug` command) with the examples after each subcommand's help.
pub fn with_examples(cli: Command) -> Command {
    super::examples::with_examples(
        cli,
        EXAMPLES,
        "Each command's --help ends with examples: graphbug minify --help",
    )
}

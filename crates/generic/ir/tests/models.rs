//! The reference model builders against PyTorch's own traces in tests/fixtures.

use graphbug_ir::models::{cnn_forward, gpt_forward, mlp_forward, GptConfig};
use graphbug_ir::{parse_graph, print_graph, Graph};

const GPT4: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../tests/fixtures/gpt4/forward.py"
));
const MLP: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../tests/fixtures/mlp/forward.py"
));
const CNN: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../tests/fixtures/cnn/forward.py"
));

/// The text without its class line and comment lines.
fn body(text: &str) -> String {
    text.lines()
        .skip(1)
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn assert_matches_fixture(graph: &Graph, fixture: &str, class: &str) {
    let printed = print_graph(graph);
    assert_eq!(
        printed.lines().next(),
        Some(format!("class {class}(torch.nn.Module):").as_str())
    );
    let (got, want) = (body(&printed), body(fixture));
    if got != want {
        let diff = got
            .lines()
            .zip(want.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b);
        panic!(
            "{class} differs from the fixture ({} vs {} lines); first difference: {diff:#?}",
            got.lines().count(),
            want.lines().count()
        );
    }
}

#[test]
fn gpt4_matches_the_pytorch_trace() {
    let g = gpt_forward(&GptConfig::gpt4());
    assert_matches_fixture(&g, GPT4, "GptForward");
    assert_eq!(g.num_call_function_nodes(), 259);
    assert_eq!(GptConfig::gpt4_layers(4), GptConfig::gpt4());
}

#[test]
fn mlp_matches_the_pytorch_trace() {
    assert_matches_fixture(&mlp_forward(), MLP, "MlpForward");
}

#[test]
fn cnn_matches_the_pytorch_trace() {
    assert_matches_fixture(&cnn_forward(), CNN, "CnnForward");
}

#[test]
fn gpt_48_layers_is_about_3000_nodes() {
    let g = gpt_forward(&GptConfig::gpt4_layers(48));
    g.verify().unwrap();
    // 3 embedding nodes, 62 per block, 8 for the final LayerNorm and projection.
    assert_eq!(g.num_call_function_nodes(), 3 + 62 * 48 + 8);
    assert_eq!(g.num_call_function_nodes(), 2987);
    let placeholders = g.placeholders();
    assert_eq!(placeholders.len(), 2 + 12 * 48 + 4 + 1);
    for (i, id) in placeholders.iter().enumerate() {
        assert_eq!(g.node(*id).name, format!("arg{i}_1"));
    }
    let names = g.placeholder_names();
    assert_eq!(names.len(), placeholders.len());
    assert_eq!(names[0], "arg0_1");
    assert_eq!(
        names.last().unwrap(),
        &format!("arg{}_1", placeholders.len() - 1)
    );
    // Deterministic: the same config prints the same text.
    assert_eq!(
        print_graph(&g),
        print_graph(&gpt_forward(&GptConfig::gpt4_layers(48)))
    );
}

#[test]
fn gpt_layers_scale_linearly_and_odd_configs_do_not_panic() {
    for layers in [0, 1, 2] {
        let g = gpt_forward(&GptConfig::gpt4_layers(layers));
        assert_eq!(g.num_call_function_nodes(), 11 + 62 * layers);
    }
    let odd = GptConfig {
        heads: 0,
        embed: 0,
        seq: 0,
        batch: i64::MAX,
        ..GptConfig::gpt4()
    };
    gpt_forward(&odd).verify().unwrap();
}

#[test]
fn printed_models_parse_back_unchanged() {
    for g in [
        gpt_forward(&GptConfig::gpt4()),
        mlp_forward(),
        cnn_forward(),
    ] {
        let back = parse_graph(&print_graph(&g)).unwrap();
        assert_eq!(back, g, "{}", g.name);
    }
}

//! The client against the XLA CPU plugin of the `xla-cpu-pjrt` wheel in the workspace's
//! `.venv` (PJRT API 0.81), or the one `PJRT_NAMES_AND_LIBRARY_PATHS=cpu:PATH` names; each
//! test is skipped, with a notice, when there is none.
//! Timings are printed: `cargo test -p graphbug-pjrt -- --nocapture`.

use std::path::Path;
use std::time::Instant;

use graphbug_ir::Dtype;
use graphbug_pjrt::{
    discover, resolve, Attribute, Client, CompileOptions, ElementType, Error, Executable, Format,
    HostTensor, OptionOverride, Origin, Partitioning, Plugin, Sharding, TensorSpec,
};

fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.."))
}

/// A client of the CPU plugin, or `None` (and a notice) when it is not installed.
fn cpu() -> Option<Client> {
    let path = match resolve("cpu", Some(workspace())) {
        Ok(path) => path,
        Err(e) => {
            graphbug_run::not_run_here(
                "graphbug-pjrt's client tests",
                &format!("no XLA CPU plugin ({e}); pip install xla-cpu-pjrt into .venv"),
            );
            return None;
        }
    };
    let start = Instant::now();
    let plugin = Plugin::load(path).expect("the CPU plugin loads");
    let loaded = start.elapsed();
    let client = Client::new(&plugin).expect("a CPU client");
    eprintln!(
        "plugin load {:.1} ms (cached after the first), client {:.1} ms",
        loaded.as_secs_f64() * 1e3,
        (start.elapsed() - loaded).as_secs_f64() * 1e3
    );
    Some(client)
}

fn tensor<T: Copy, const N: usize>(
    dtype: Dtype,
    shape: &[usize],
    values: [T; N],
    bytes: fn(T) -> Vec<u8>,
) -> HostTensor {
    let data = values.into_iter().flat_map(bytes).collect();
    HostTensor::new(dtype, shape.to_vec(), data).unwrap()
}

fn f32s<const N: usize>(shape: &[usize], values: [f32; N]) -> HostTensor {
    tensor(Dtype::Float32, shape, values, |v| v.to_le_bytes().to_vec())
}

fn to_f32s(t: &HostTensor) -> Vec<f32> {
    assert_eq!(t.dtype, Dtype::Float32);
    t.data
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Compiles and runs, printing how long each took.
fn compile_timed(client: &Client, what: &str, program: &[u8], format: Format) -> Executable {
    let start = Instant::now();
    let exe = client.compile(program, format).unwrap();
    eprintln!(
        "{what}: compile {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    exe
}

fn run_timed(what: &str, exe: &Executable, inputs: &[HostTensor]) -> Vec<HostTensor> {
    let start = Instant::now();
    let out = exe.execute(inputs).unwrap();
    eprintln!(
        "{what}: execute {:.3} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    out
}

const ADD_MLIR: &str = "module { func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> { %0 = stablehlo.add %a, %b : tensor<3xf32> \n return %0 : tensor<3xf32> } }";

#[test]
fn loads_the_cpu_plugin() {
    let Some(client) = cpu() else { return };
    let start = Instant::now();
    let plugin = Plugin::load(resolve("pjrt:cpu", Some(workspace())).unwrap()).unwrap();
    eprintln!(
        "load (cached): {:.3} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    let version = plugin.api_version();
    assert_eq!(version.major, 0);
    eprintln!("{}: PJRT API {version}", plugin.path().display());
    let attributes = plugin.attributes().unwrap();
    for (name, value) in &attributes {
        eprintln!("  {name} = {value}");
    }
    assert!(
        attributes
            .iter()
            .any(|(n, v)| n == "xla_version" || matches!(v, Attribute::Int64List(_))),
        "{attributes:?}"
    );
    assert_eq!(client.platform_name().unwrap(), "cpu");
    let devices = client.devices().unwrap();
    let addressable = client.addressable_devices().unwrap();
    assert!(!addressable.is_empty());
    assert!(addressable.len() <= devices.len());
    eprintln!("devices: {devices:?}");
    let start = Instant::now();
    let _another = Client::new(&plugin).unwrap();
    eprintln!("client: {:.1} ms", start.elapsed().as_secs_f64() * 1e3);
}

#[test]
fn compiles_and_runs_stablehlo_text() {
    let Some(client) = cpu() else { return };
    let exe = compile_timed(&client, "mlir add", ADD_MLIR.as_bytes(), Format::Mlir);
    assert_eq!(exe.num_outputs(), 1);
    let f32_3 = TensorSpec {
        element_type: Dtype::Float32.into(),
        dims: vec![3],
    };
    assert_eq!(exe.outputs(), Some(&[f32_3.clone()][..]));
    let start = Instant::now();
    assert_eq!(exe.inputs(), Some(&[f32_3.clone(), f32_3][..]));
    eprintln!(
        "mlir add: inputs read from the optimized program {:.3} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    let a = f32s(&[3], [1.0, 2.0, 3.0]);
    let b = f32s(&[3], [10.0, 20.5, -3.0]);
    let out = run_timed("mlir add", &exe, &[a.clone(), b.clone()]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].shape, [3]);
    assert_eq!(to_f32s(&out[0]), [11.0, 22.5, 0.0]);
    // A second run of the same executable.
    let out = run_timed("mlir add (again)", &exe, &[b, a]);
    assert_eq!(to_f32s(&out[0]), [11.0, 22.5, 0.0]);
}

#[test]
fn compiles_and_runs_an_hlo_module_proto() {
    let Some(client) = cpu() else { return };
    let proto = include_bytes!("data/add.hlo.pb");
    let exe = compile_timed(&client, "hlo add", proto, Format::Hlo);
    let a = f32s(&[3], [1.0, 2.0, 3.0]);
    let b = f32s(&[3], [0.5, 0.25, 0.125]);
    let out = run_timed("hlo add", &exe, &[a, b]);
    assert_eq!(to_f32s(&out[0]), [1.5, 2.25, 3.125]);
}

#[test]
fn runs_programs_with_two_outputs() {
    let Some(client) = cpu() else { return };
    let mlir = "module { func.func @main(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2xf32>) {
      %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      %zero = stablehlo.constant dense<0.0> : tensor<f32>
      %1 = stablehlo.reduce(%a init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<2x2xf32>, tensor<f32>) -> tensor<2xf32>
      return %0, %1 : tensor<2x2xf32>, tensor<2xf32> } }";
    let exe = compile_timed(&client, "mlir two outputs", mlir.as_bytes(), Format::Mlir);
    assert_eq!(exe.num_outputs(), 2);
    let a = f32s(&[2, 2], [1.0, 2.0, 3.0, 4.0]);
    let b = f32s(&[2, 2], [5.0, 6.0, 7.0, 8.0]);
    let out = run_timed("mlir two outputs", &exe, &[a.clone(), b.clone()]);
    assert_eq!(out[0].shape, [2, 2]);
    // Row-major: [[1,2],[3,4]] @ [[5,6],[7,8]] = [[19,22],[43,50]].
    assert_eq!(to_f32s(&out[0]), [19.0, 22.0, 43.0, 50.0]);
    assert_eq!(out[1].shape, [2]);
    assert_eq!(to_f32s(&out[1]), [3.0, 7.0]);

    // JAX's `(a + b, a * b)`: an HLO module whose root is a tuple.
    let proto = include_bytes!("data/add_mul.hlo.pb");
    let exe = compile_timed(&client, "hlo tuple", proto, Format::Hlo);
    assert_eq!(exe.num_outputs(), 2);
    let out = run_timed(
        "hlo tuple",
        &exe,
        &[f32s(&[3], [1.0, 2.0, 3.0]), f32s(&[3], [4.0, 5.0, 6.0])],
    );
    assert_eq!(to_f32s(&out[0]), [5.0, 7.0, 9.0]);
    assert_eq!(to_f32s(&out[1]), [4.0, 10.0, 18.0]);
}

/// `op(a, b)` on `ty` tensors of `shape`, in StableHLO.
fn binary(op: &str, ty: &str) -> String {
    format!(
        "module {{ func.func @main(%a: {ty}, %b: {ty}) -> {ty} {{ %0 = stablehlo.{op} %a, %b : {ty} \n return %0 : {ty} }} }}"
    )
}

#[test]
fn runs_every_common_dtype_and_odd_shapes() {
    let Some(client) = cpu() else { return };
    let run = |op: &str, ty: &str, a: HostTensor, b: HostTensor| {
        let exe = compile_timed(&client, ty, binary(op, ty).as_bytes(), Format::Mlir);
        let out = exe.execute(&[a.clone(), b]).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].dtype, &out[0].shape), (a.dtype, &a.shape), "{ty}");
        out.into_iter().next().unwrap()
    };
    let le = |v: f64| v.to_le_bytes().to_vec();
    let out = run(
        "add",
        "tensor<2xf64>",
        tensor(Dtype::Float64, &[2], [0.1, 1e300], le),
        tensor(Dtype::Float64, &[2], [0.2, 1e300], le),
    );
    assert_eq!(out.data, [0.1 + 0.2, 2e300].map(le).concat());

    let le = |v: i32| v.to_le_bytes().to_vec();
    let out = run(
        "multiply",
        "tensor<2x3xi32>",
        tensor(Dtype::Int32, &[2, 3], [1, -2, 3, 4, 5, i32::MAX], le),
        tensor(Dtype::Int32, &[2, 3], [7, 7, 7, 7, 7, 1], le),
    );
    assert_eq!(out.data, [7, -14, 21, 28, 35, i32::MAX].map(le).concat());

    let byte = |v: u8| vec![v];
    let out = run(
        "and",
        "tensor<4xi1>",
        tensor(Dtype::Bool, &[4], [1, 1, 0, 0], byte),
        tensor(Dtype::Bool, &[4], [1, 0, 1, 0], byte),
    );
    assert_eq!(out.data, [1, 0, 0, 0]);

    // bf16 is the top half of an f32: 1.5 + 2.25 = 3.75 exactly.
    let bf16 = |v: f32| (v.to_bits() >> 16).to_le_bytes()[..2].to_vec();
    let out = run(
        "add",
        "tensor<2xbf16>",
        tensor(Dtype::BFloat16, &[2], [1.5f32, -1.0], bf16),
        tensor(Dtype::BFloat16, &[2], [2.25f32, 0.5], bf16),
    );
    assert_eq!(out.data, [3.75f32, -0.5].map(bf16).concat());

    // A 0-d tensor and an empty one.
    let out = run("add", "tensor<f32>", f32s(&[], [1.5]), f32s(&[], [2.0]));
    assert_eq!(to_f32s(&out), [3.5]);
    let out = run(
        "add",
        "tensor<0x3xf32>",
        f32s(&[0, 3], []),
        f32s(&[0, 3], []),
    );
    assert!(out.data.is_empty());
}

#[test]
fn outputs_come_back_in_c_order() {
    let Some(client) = cpu() else { return };
    let mlir = "module { func.func @main(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
      %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
      return %0 : tensor<3x2xf32> } }";
    let exe = compile_timed(&client, "transpose", mlir.as_bytes(), Format::Mlir);
    let out = exe
        .execute(&[f32s(&[2, 3], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])])
        .unwrap();
    assert_eq!(out[0].shape, [3, 2]);
    assert_eq!(to_f32s(&out[0]), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
}

#[test]
fn invalid_programs_are_compile_errors() {
    let Some(client) = cpu() else { return };
    let err = client
        .compile(b"module { func.func @main( }", Format::Mlir)
        .err()
        .unwrap();
    eprintln!("{err}");
    match &err {
        Error::Pjrt {
            call,
            code,
            message,
            ..
        } => {
            assert_eq!(call, "PJRT_Client_Compile");
            // XLA CPU reports MLIR parse errors as UNKNOWN.
            assert_eq!(code.name(), Some("UNKNOWN"));
            assert!(
                message.contains("error: expected non-function type"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains(".so: PJRT_Client_Compile failed (UNKNOWN): "),
        "{text}"
    );

    // Types that do not match.
    let bad = "module { func.func @main(%a: tensor<3xf32>) -> tensor<3xi32> { return %a : tensor<3xf32> } }";
    let err = client.compile(bad.as_bytes(), Format::Mlir).err().unwrap();
    eprintln!("{err}");
    assert!(matches!(err, Error::Pjrt { .. }));

    // HLO text is not a module proto.
    let err = client
        .compile(
            b"HloModule m\nENTRY e { ROOT c = f32[] constant(1) }",
            Format::Hlo,
        )
        .err()
        .unwrap();
    eprintln!("{err}");
    assert!(matches!(err, Error::Pjrt { .. }));
}

#[test]
fn wrong_inputs_are_errors_before_the_plugin_runs() {
    let Some(client) = cpu() else { return };
    let exe = client.compile(ADD_MLIR.as_bytes(), Format::Mlir).unwrap();
    let a = f32s(&[3], [1.0, 2.0, 3.0]);
    let message = |inputs: &[HostTensor]| match exe.execute(inputs) {
        Err(e @ Error::BadInput { .. }) => e.to_string(),
        other => panic!("{other:?}"),
    };
    let err = message(std::slice::from_ref(&a));
    assert!(
        err.ends_with("PJRT_LoadedExecutable_Execute: the executable takes 2 inputs (f32[3], f32[3]), 1 given (f32[3])"),
        "{err}"
    );
    let err = message(&[a.clone(), f32s(&[1, 3], [1.0, 2.0, 3.0])]);
    assert!(
        err.ends_with("input 1: the executable expects f32[3], got f32[1,3]"),
        "{err}"
    );
    let ints = tensor(Dtype::Int32, &[3], [1, 2, 3], |v: i32| {
        v.to_le_bytes().to_vec()
    });
    let err = message(&[ints, a.clone()]);
    assert!(
        err.ends_with("input 0: the executable expects f32[3], got s32[3]"),
        "{err}"
    );
    let mut short = a.clone();
    short.data.pop();
    let err = message(&[a.clone(), short]);
    assert!(
        err.ends_with("input 1 is f32[3] but holds 11 bytes"),
        "{err}"
    );
    // The executable still runs afterwards.
    assert_eq!(
        to_f32s(&exe.execute(&[a.clone(), a]).unwrap()[0]),
        [2.0, 4.0, 6.0]
    );
}

#[test]
fn files_that_are_not_plugins_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("not_a_library.so");
    std::fs::write(&text, "this is not a shared library\n").unwrap();
    let err = Plugin::load(&text).unwrap_err();
    assert!(matches!(err, Error::Load { .. }), "{err:?}");
    assert!(err
        .to_string()
        .contains("not_a_library.so: cannot load as a shared library"));

    let missing = dir.path().join("missing.so");
    let err = Plugin::load(&missing).unwrap_err().to_string();
    assert!(err.contains("missing.so: cannot load"), "{err}");

    let libm = Path::new("/lib/x86_64-linux-gnu/libm.so.6");
    if libm.exists() {
        let err = Plugin::load(libm).unwrap_err();
        assert!(matches!(err, Error::NotAPlugin { .. }), "{err:?}");
        let err = err.to_string();
        assert!(
            err.contains("libm.so.6: not a PJRT plugin: no GetPjrtApi symbol"),
            "{err}"
        );
    }
}

#[test]
fn discovery_finds_the_venv_wheel() {
    let wheel = "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so";
    let start = Instant::now();
    let found = discover(Some(workspace()));
    eprintln!(
        "discover: {:.1} ms, {found:?}",
        start.elapsed().as_secs_f64() * 1e3
    );
    // (PJRT_NAMES_AND_LIBRARY_PATHS may name another `cpu` first.)
    let Some(cpu) = found.iter().find(|f| f.origin == Origin::Venv) else {
        graphbug_run::not_run_here(
            "discovery_finds_the_venv_wheel",
            &format!("no {wheel} in .venv"),
        );
        return;
    };
    assert_eq!(cpu.name, "cpu");
    assert!(cpu.path.ends_with(wheel));
    // jaxlib's own library does not export GetPjrtApi.
    assert!(found.iter().all(|f| !f.path.ends_with("libjax_common.so")));
}

#[test]
fn outputs_of_many_runs_are_freed() {
    let Some(client) = cpu() else { return };
    let ty = "tensor<262144xf32>";
    let exe = client
        .compile(binary("add", ty).as_bytes(), Format::Mlir)
        .unwrap();
    let one_mib = HostTensor::new(Dtype::Float32, vec![262144], vec![0; 1 << 20]).unwrap();
    let inputs = [one_mib.clone(), one_mib];
    let rss = || {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        statm.split(' ').nth(1).unwrap().parse::<u64>().unwrap() * 4096
    };
    exe.execute(&inputs).unwrap();
    let before = rss();
    let start = Instant::now();
    for _ in 0..200 {
        exe.execute(&inputs).unwrap();
    }
    let grown = rss().saturating_sub(before);
    eprintln!(
        "200 runs of 1 MiB adds: {:.1} ms each, RSS grew {} KiB",
        start.elapsed().as_secs_f64() * 1e3 / 200.0,
        grown / 1024
    );
    // Three 1 MiB buffers a run: a leak would be about 600 MiB.
    assert!(grown < 200 << 20, "RSS grew by {grown} bytes");
}

#[test]
fn element_types_graphbug_cannot_hold_are_named() {
    let Some(client) = cpu() else { return };
    let mlir = "module { func.func @main(%a: tensor<2xf32>) -> tensor<2xf8E4M3FN> {
      %0 = stablehlo.convert %a : (tensor<2xf32>) -> tensor<2xf8E4M3FN>
      return %0 : tensor<2xf8E4M3FN> } }";
    let exe = client.compile(mlir.as_bytes(), Format::Mlir).unwrap();
    assert_eq!(
        exe.outputs().map(|o| o[0].element_type),
        Some(ElementType(17))
    );
    let err = exe
        .execute(&[f32s(&[2], [1.0, 2.0])])
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with("PJRT_Buffer_ElementType: output 0 has element type f8e4m3fn, which graphbug's host tensors cannot hold"),
        "{err}"
    );
}

#[test]
fn create_options_reach_the_plugin() {
    let Some(client) = cpu() else { return };
    let plugin = Plugin::load(resolve("cpu", Some(workspace())).unwrap()).unwrap();
    let two = Client::with_options(
        &plugin,
        &[("cpu_device_count".to_string(), Attribute::Int64(2))],
    )
    .expect("a CPU client of two devices");
    assert_eq!(two.addressable_devices().unwrap().len(), 2);
    drop(client);
}

/// A program over 4 partitions: `a` split by rows, `b` whole on every device; `a + b` split
/// as `a` is, and the sum of `a`, which needs every device's rows (an all-reduce the SPMD
/// partitioner inserts).
const SPMD_MLIR: &str = r#"module @spmd attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<8x2xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"}, %b: tensor<8x2xf32> {mhlo.sharding = "{replicated}"}) -> (tensor<8x2xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"}, tensor<f32> {mhlo.sharding = "{replicated}"}) {
    %0 = stablehlo.add %a, %b : tensor<8x2xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %1 = stablehlo.reduce(%a init: %zero) applies stablehlo.add across dimensions = [0, 1] : (tensor<8x2xf32>, tensor<f32>) -> tensor<f32>
    return %0, %1 : tensor<8x2xf32>, tensor<f32>
  }
}"#;

#[test]
fn runs_a_partitioned_program_on_four_cpu_devices() {
    let Some(one) = cpu() else { return };
    let plugin = Plugin::load(resolve("cpu", Some(workspace())).unwrap()).unwrap();
    let four = Partitioning {
        num_partitions: 4,
        ..Partitioning::ONE
    };
    let options = CompileOptions {
        partitioning: four,
        ..CompileOptions::default()
    };
    // A client of one device says so before compiling.
    if one.addressable_devices().unwrap().len() < 4 {
        let err = one
            .compile_with(SPMD_MLIR.as_bytes(), Format::Mlir, &options)
            .err()
            .expect("too few devices");
        assert!(err.to_string().contains("the client has 1 device"), "{err}");
    }
    let client = Client::with_options(
        &plugin,
        &[("cpu_device_count".to_string(), Attribute::Int64(4))],
    )
    .unwrap();
    assert_eq!(client.addressable_devices().unwrap().len(), 4);
    let exe = client
        .compile_with(SPMD_MLIR.as_bytes(), Format::Mlir, &options)
        .unwrap();
    assert_eq!(exe.partitioning(), four);
    let (params, outputs) = exe
        .shardings()
        .expect("the partitioned program's shardings");
    eprintln!("parameters {params:?}, outputs {outputs:?}");
    assert_eq!(params[1], Sharding::Replicated);
    // Each device takes two rows of `a`.
    assert_eq!(exe.inputs().unwrap()[0].dims, [2, 2]);
    let a = f32s::<16>(&[8, 2], std::array::from_fn(|i| i as f32));
    let b = f32s(&[8, 2], [100.0; 16]);
    let run = exe.execute_global(&[a, b], &[vec![8, 2], vec![]]).unwrap();
    assert_eq!(
        to_f32s(&run.outputs[0]),
        (0..16).map(|i| i as f32 + 100.0).collect::<Vec<_>>()
    );
    assert_eq!(to_f32s(&run.outputs[1]), [120.0]);
    assert!(run.disagreements.is_empty());
    // Inputs that do not hold their shape's bytes are refused before anything runs.
    let short = HostTensor {
        data: vec![0; 8],
        ..f32s(&[8, 2], [0.0; 16])
    };
    let err = exe
        .execute_global(&[short, f32s(&[8, 2], [0.0; 16])], &[vec![8, 2], vec![]])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("input 0 is f32[8,2] but holds 8 bytes"),
        "{err}"
    );
    // One device's way is refused for it.
    let err = exe.execute(&[]).unwrap_err().to_string();
    assert!(err.contains("runs on 4 devices"), "{err}");
}

#[test]
fn option_overrides_reach_the_compiler() {
    let Some(client) = cpu() else { return };
    let with = |key: &str, value: &str| CompileOptions {
        overrides: vec![(key.to_string(), OptionOverride::parse(value))],
        ..CompileOptions::default()
    };
    for (key, value) in [
        ("xla_disable_hlo_passes", "algsimp,cse"),
        ("xla_cpu_enable_fast_math", "true"),
    ] {
        let exe = client
            .compile_with(ADD_MLIR.as_bytes(), Format::Mlir, &with(key, value))
            .unwrap_or_else(|e| panic!("{key}={value}: {e}"));
        let out = exe
            .execute(&[f32s(&[3], [1.0, 2.0, 3.0]), f32s(&[3], [1.0, 1.0, 1.0])])
            .unwrap();
        assert_eq!(to_f32s(&out[0]), [2.0, 3.0, 4.0]);
    }
    // A key XLA does not have is its error, which names it.
    let err = client
        .compile_with(
            ADD_MLIR.as_bytes(),
            Format::Mlir,
            &with("no_such_option_xyz", "1"),
        )
        .err()
        .expect("an unknown option");
    assert!(err.to_string().contains("No such compile option"), "{err}");
    assert_eq!(OptionOverride::parse("2.5"), OptionOverride::Double(2.5));
    assert_eq!(OptionOverride::parse("-3"), OptionOverride::Int(-3));
    assert_eq!(
        OptionOverride::parse("inf"),
        OptionOverride::String("inf".into())
    );
}

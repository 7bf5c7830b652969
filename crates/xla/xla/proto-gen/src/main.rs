//! Regenerates `crates/xla/xla/src/hlo/proto/schema.rs`: XLA's HLO schema as prost types, plus a
//! table of every message's fields (number, name, kind) for finding fields the schema lacks.
//!
//! 1. `python extract.py .venv/lib/python3.11/site-packages/jaxlib/libjax_common.so /tmp/pb`
//! 2. `cargo run --manifest-path crates/xla/xla/proto-gen/Cargo.toml -- /tmp/pb OUT.rs "jaxlib X"`
//! 3. move OUT.rs to crates/xla/xla/src/hlo/proto/schema.rs and run `cargo fmt`.
use prost::Message;
use prost_types::field_descriptor_proto::Type;
use prost_types::{DescriptorProto, FileDescriptorProto, FileDescriptorSet};
use std::fmt::Write;

const FILES: [&str; 6] = [
    "google_protobuf_any",
    "google_protobuf_duration",
    "google_protobuf_timestamp",
    "xla_xla_data",
    "xla_service_metrics",
    "xla_service_hlo",
];

fn table(prefix: &str, m: &DescriptorProto, out: &mut String) {
    let full = format!("{prefix}.{}", m.name());
    let _ = writeln!(out, "    (\n        \"{}\",\n        &[", &full[1..]);
    for f in &m.field {
        let kind = match f.r#type() {
            Type::Message | Type::Group => format!("Msg(\"{}\")", &f.type_name()[1..]),
            Type::Enum => format!("Enum(\"{}\")", &f.type_name()[1..]),
            _ => "Scalar".to_string(),
        };
        let _ = writeln!(out, "            ({}, \"{}\", {kind}),", f.number(), f.name());
    }
    out.push_str("        ],\n    ),\n");
    for n in &m.nested_type {
        table(&full, n, out);
    }
}

fn indent(code: &str) -> String {
    code.lines()
        .filter(|l| !l.starts_with("// This file is @generated"))
        .map(|l| if l.is_empty() { "\n".to_string() } else { format!("    {l}\n") })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (dir, out, source) = (&args[1], &args[2], &args[3]);
    let mut fds = FileDescriptorSet::default();
    let mut names = Vec::new();
    for f in FILES {
        let b = std::fs::read(format!("{dir}/{f}.proto.pb")).unwrap();
        let mut fd = FileDescriptorProto::decode(&b[..]).unwrap();
        fd.source_code_info = None;
        names.push(fd.name().to_string());
        fds.file.push(fd);
    }
    let mut fields = String::new();
    for fd in &fds.file {
        for m in &fd.message_type {
            table(&format!(".{}", fd.package()), m, &mut fields);
        }
    }
    let tmp = std::env::temp_dir().join("hlo-proto-gen");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut c = prost_build::Config::new();
    c.out_dir(&tmp);
    c.compile_well_known_types();
    c.disable_comments(["."]);
    c.btree_map(["."]);
    c.compile_fds(fds).unwrap();
    let xla = std::fs::read_to_string(tmp.join("xla.rs")).unwrap();
    let google = std::fs::read_to_string(tmp.join("google.protobuf.rs")).unwrap();
    let mut s = String::new();
    let _ = write!(
        s,
        "//! @generated: XLA's HLO schema (`HloModuleProto` and what it holds) as prost types. Do not edit.\n\
         //!\n\
         //! Made once, not at build time, by `crates/xla/xla/proto-gen` (prost-build 0.14.6, `compile_fds`,\n\
         //! well-known types compiled, comments off, maps as BTreeMap) from the serialized descriptors of\n\
         {files}\
         //! as compiled into {source},\n\
         //! read out of `libjax_common.so` by `proto-gen/extract.py`: the schema of the XLA that\n\
         //! is this crate's test oracle. It is newer than openxla/xla's\n\
         //! `xla/service/hlo.proto` at bfbc776e6233f97b5fb13bbc6022834f61646b62 (it adds\n\
         //! `HloInstructionProto.sparsity_config` = 98 and `backend_config_payload` = 99) and holds\n\
         //! every field of it. `MESSAGES` lists each message's fields for the walk that refuses\n\
         //! fields a proto holds and this schema lacks (prost would drop them).\n\n\
         #![allow(missing_docs, clippy::all, clippy::pedantic)]\n\n\
         /// What a field holds.\n\
         #[derive(Clone, Copy, Debug, PartialEq, Eq)]\n\
         pub(crate) enum FieldKind {{\n    /// A number, string or bytes.\n    Scalar,\n    /// An enum (its full name).\n    Enum(&'static str),\n    /// A message (its full name).\n    Msg(&'static str),\n}}\n\n\
         use FieldKind::{{Enum, Msg, Scalar}};\n\n\
         /// Every message of the schema: its full name and its fields (number, name, kind).\n\
         pub(crate) const MESSAGES: &[(&str, &[(u32, &str, FieldKind)])] = &[\n{fields}];\n\n\
         /// Package `xla`.\n\
         pub mod xla {{\n{xla}}}\n\n\
         /// Package `google.protobuf` (the well-known types `xla` uses).\n\
         pub mod google {{\n    /// Package `google.protobuf`.\n    pub mod protobuf {{\n{google}    }}\n}}\n",
        files = names.iter().map(|n| format!("//! `{n}`,\n")).collect::<String>(),
        xla = indent(&xla),
        google = indent(&indent(&google)),
    );
    std::fs::write(out, s).unwrap();
}

//! HLO text ⇄ `xla.HloModuleProto`, the form PJRT plugins take HLO in (program format
//! `hlo`) and XLA dumps and torch_xla hand out (`*.hlo.pb`).
//!
//! [`to_proto`] makes the proto XLA's own parser makes of the same text (ids, layouts,
//! program shapes, `host_program_shape`, literals, every attribute of the programs JAX and
//! torch_xla write); [`from_proto`] prints a proto as XLA does, in its current style, and
//! reads that text back. An attribute, opcode or proto field that is not mapped is an error
//! naming it, never dropped. XLA itself is the oracle of the tests
//! (`crates/xla/xla/tests/hlo_proto.rs`).

mod attrs;
mod decode;
mod encode;
mod literal;
pub mod schema;
mod shapes;
mod syntax;
pub mod wire;

use graphbug_files::HostTensor;
use prost::Message;

pub use schema::xla::HloModuleProto;

use super::text::{parse_module, HloError, Module};

/// The literal text (as XLA prints a `constant`'s) of an array of `shape` whose elements,
/// in row-major order (as PJRT hands out buffers graphbug asks for), are `data`
/// (little-endian, a `pred` a byte): what a value a run recorded prints as in a program.
pub fn literal_text(shape: &super::shape::Shape, data: &[u8]) -> Result<String, String> {
    let proto = shapes::shape_to_proto(&shape.without_layout().with_default_layout())?;
    if proto.element_type == schema::xla::PrimitiveType::Tuple as i32 {
        return Err("a tuple is no array to print as a literal".into());
    }
    literal::print_literal(&literal::literal_of_bytes(&proto, data)?)
}

/// The arguments an `xla.HloSnapshot` recorded (XLA's `--xla_dump_hlo_snapshots` writes
/// one per execution, `module_*.snapshot.*.pb`), as host tensors in parameter order, with
/// the platform that ran it (`Host`, `CUDA`...; empty where unsaid).
pub fn snapshot_arguments(bytes: &[u8]) -> Result<(Vec<HostTensor>, String), String> {
    let snapshot = schema::xla::HloSnapshot::decode(bytes)
        .map_err(|e| format!("not an xla.HloSnapshot: {e}"))?;
    let tensors = snapshot
        .arguments
        .into_iter()
        .enumerate()
        .map(|(i, lit)| {
            let (ty, dims, data) =
                literal::bytes_of_literal(lit).map_err(|e| format!("argument {i}: {e}"))?;
            let dtype = super::shape::dtype_of(&ty)
                .ok_or_else(|| format!("argument {i}: {ty} has no host tensor type"))?;
            let shape = dims.iter().map(|d| *d as usize).collect();
            HostTensor::new(dtype, shape, data).map_err(|e| format!("argument {i}: {e}"))
        })
        .collect::<Result<_, _>>()?;
    Ok((tensors, snapshot.execution_platform))
}

/// The literal of an array of `shape` whose elements are `data`, row-major and
/// little-endian (a `pred` a byte), stored in the order of `shape`'s layout.
pub fn literal_of_row_major(
    shape: &schema::xla::ShapeProto,
    data: &[u8],
) -> Result<schema::xla::LiteralProto, String> {
    if !literal::layout_orders_dimensions(shape) {
        return Err("the shape's layout is no order of its dimensions".into());
    }
    let n = shape.dimensions.iter().product::<i64>().max(0) as usize;
    if n > 0 && !data.len().is_multiple_of(n) {
        return Err(format!("{} bytes for {n} elements", data.len()));
    }
    let width = data.len().checked_div(n).unwrap_or(1);
    literal::literal_of_bytes(shape, &literal::reorder(data, shape, width, false))
}

/// The text name (`f32`) of a proto's `element_type`; `None` for a tuple, a token or an
/// unknown value.
pub fn element_name_of(element_type: i32) -> Option<String> {
    shapes::proto_element_type(element_type)
        .ok()
        .filter(|t| *t != schema::xla::PrimitiveType::Token)
        .and_then(shapes::element_name)
}

/// The serialized `xla.HloModuleProto` XLA's parser makes of the module's text.
pub fn to_proto(module: &Module) -> Result<Vec<u8>, HloError> {
    Ok(to_proto_message(module)?.encode_to_vec())
}

/// The `xla.HloModuleProto` XLA's parser makes of the module's text, as a message.
pub fn to_proto_message(module: &Module) -> Result<HloModuleProto, HloError> {
    encode::module_to_proto(module)
}

/// Reads a serialized `xla.HloModuleProto` as a module (its text as XLA prints it).
pub fn from_proto(bytes: &[u8]) -> Result<Module, HloError> {
    let text = proto_to_text(bytes)?;
    parse_module(&text).map_err(|e| HloError {
        message: format!(
            "the text printed from the proto does not read back: {}",
            e.message
        ),
        ..e
    })
}

/// The text of a serialized `xla.HloModuleProto`, as XLA prints it (no `%`, no operand
/// shapes), refusing fields that text cannot carry.
pub fn proto_to_text(bytes: &[u8]) -> Result<String, HloError> {
    let fail = |message: String| HloError {
        line: 0,
        column: 0,
        message,
        instruction: None,
    };
    if let Some(field) = wire::unknown_field(bytes, "xla.HloModuleProto") {
        return Err(fail(format!(
            "the proto holds a field XLA's schema (jaxlib 0.10.2) lacks: {field}"
        )));
    }
    let proto = HloModuleProto::decode(bytes)
        .map_err(|e| fail(format!("not an xla.HloModuleProto: {e}")))?;
    decode::proto_to_text(&proto)
}

/// The text of a proto message, as XLA prints it.
pub fn message_to_text(proto: &HloModuleProto) -> Result<String, HloError> {
    decode::proto_to_text(proto)
}

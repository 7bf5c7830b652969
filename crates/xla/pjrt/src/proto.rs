//! The two bits of protobuf the client needs, without a protobuf library: writing the
//! compile options, and reading an HLO module's parameter shapes.

use crate::{ElementType, TensorSpec};

const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;
const FIXED32: u64 = 5;

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_key(out: &mut Vec<u8>, field: u64, wire_type: u64) {
    put_varint(out, (field << 3) | wire_type);
}

/// A serialized `xla.CompileOptionsProto` (xla/pjrt/compile_options.proto) for one device:
///
/// ```text
/// CompileOptionsProto { executable_build_options (3): ExecutableBuildOptionsProto {
///     device_ordinal (1): -1,   // not set: the plugin picks the device
///     num_replicas (4): 1,
///     num_partitions (5): 1 } }
/// ```
///
/// 17 bytes. Options must always be given: with none, XLA aborts the process
/// (`Check failed: replica_count > 0`).
pub(crate) fn compile_options() -> Vec<u8> {
    let mut build = Vec::new();
    put_key(&mut build, 1, VARINT);
    put_varint(&mut build, -1i64 as u64);
    put_key(&mut build, 4, VARINT);
    put_varint(&mut build, 1);
    put_key(&mut build, 5, VARINT);
    put_varint(&mut build, 1);
    let mut options = Vec::new();
    put_key(&mut options, 3, LEN);
    put_varint(&mut options, build.len() as u64);
    options.extend(build);
    options
}

/// One field of a message: its number and value.
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf.split_first()?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

/// The fields of a message, in order; `None` if it is malformed.
fn fields(mut buf: &[u8]) -> Option<Vec<(u64, Value<'_>)>> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let value = match key & 7 {
            VARINT => Value::Varint(varint(&mut buf)?),
            LEN => {
                let len = usize::try_from(varint(&mut buf)?).ok()?;
                let (bytes, rest) = (buf.get(..len)?, buf.get(len..)?);
                buf = rest;
                Value::Bytes(bytes)
            }
            FIXED64 => {
                buf = buf.get(8..)?;
                Value::Fixed
            }
            FIXED32 => {
                buf = buf.get(4..)?;
                Value::Fixed
            }
            _ => return None,
        };
        out.push((key >> 3, value));
    }
    Some(out)
}

/// The `hlo_module` (field 1) of an `xla.HloModuleProtoWithConfig` (xla/xla.proto).
pub(crate) fn module_of_module_with_config(with_config: &[u8]) -> Option<Vec<u8>> {
    fields(with_config)?.into_iter().find_map(|(n, v)| match v {
        Value::Bytes(module) if n == 1 => Some(module.to_vec()),
        _ => None,
    })
}

/// The parameters of an `xla.HloModuleProto`'s entry computation, from its
/// `host_program_shape` (field 4, a `ProgramShapeProto` whose `parameters` are field 1).
/// `None` when the module has none, or a parameter this check cannot compare (a tuple, a
/// dynamic dimension, an element type the 0.81 header lacks).
pub(crate) fn entry_parameters(module: &[u8]) -> Option<Vec<TensorSpec>> {
    let program_shape = fields(module)?.into_iter().find_map(|(n, v)| match v {
        Value::Bytes(b) if n == 4 => Some(b),
        _ => None,
    })?;
    let mut params = Vec::new();
    for (n, v) in fields(program_shape)? {
        if let (1, Value::Bytes(shape)) = (n, v) {
            params.push(array_shape(shape)?);
        }
    }
    Some(params)
}

/// An array `xla.ShapeProto`: `element_type` (2), `dimensions` (3, packed or not),
/// `tuple_shapes` (4), `is_dynamic_dimension` (6, packed or not).
fn array_shape(shape: &[u8]) -> Option<TensorSpec> {
    let mut element_type = None;
    let mut dims = Vec::new();
    for (n, v) in fields(shape)? {
        match (n, v) {
            (2, Value::Varint(t)) => element_type = Some(t),
            (3, Value::Varint(d)) => dims.push(d as i64),
            (3, Value::Bytes(mut packed)) => {
                while !packed.is_empty() {
                    dims.push(varint(&mut packed)? as i64);
                }
            }
            (4, _) => return None,
            (6, Value::Varint(dynamic)) if dynamic != 0 => return None,
            (6, Value::Bytes(packed)) if packed.iter().any(|&b| b != 0) => return None,
            _ => {}
        }
    }
    let element_type = ElementType::from_xla_primitive(element_type.unwrap_or(0) as i64)?;
    // Only types host tensors hold can be compared (a token has no elements).
    element_type.dtype()?;
    Some(TensorSpec { element_type, dims })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compile_options_are_the_17_bytes_that_work() {
        let bytes = compile_options();
        assert_eq!(bytes.len(), 17);
        assert_eq!(&bytes[..4], &[0x1a, 15, 0x08, 0xff]);
        assert_eq!(&bytes[13..], &[0x20, 1, 0x28, 1]);
    }

    #[test]
    fn reads_the_parameters_of_a_jax_module() {
        let module = include_bytes!("../tests/data/add.hlo.pb");
        let params = entry_parameters(module).unwrap();
        let text: Vec<String> = params.iter().map(ToString::to_string).collect();
        assert_eq!(text, ["f32[3]", "f32[3]"]);
        assert!(entry_parameters(&[0xff]).is_none());
        assert!(entry_parameters(&[]).is_none());
    }
}

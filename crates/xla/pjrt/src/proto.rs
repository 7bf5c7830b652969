//! The two bits of protobuf the client needs, without a protobuf library: writing the
//! compile options, and reading an HLO module's parameter shapes.

use crate::sharding::{CompileOptions, OptionOverride, Sharding};
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

/// A serialized `xla.CompileOptionsProto` (xla/pjrt/compile_options.proto) for
/// `partitioning`:
///
/// ```text
/// CompileOptionsProto { executable_build_options (3): ExecutableBuildOptionsProto {
///     device_ordinal (1): -1,   // not set: the plugin picks the device(s)
///     num_replicas (4): R,
///     num_partitions (5): P,
///     use_spmd_partitioning (6): true,  // only with several partitions
///     use_shardy_partitioner (19): true // only for a program lowered for Shardy
/// } }
/// ```
///
/// 17 bytes for one device. Options must always be given: with none, XLA aborts the process
/// (`Check failed: replica_count > 0`). With several devices the plugin assigns them itself
/// (its default device assignment), as JAX lets it. Each of `overrides` is an entry of
/// `env_option_overrides` (field 7, `map<string, OptionOverrideProto>`), which XLA applies
/// over its flags' defaults (a bare `debug_options` would replace them all).
pub(crate) fn compile_options(options: &CompileOptions) -> Vec<u8> {
    let partitioning = options.partitioning;
    let mut build = Vec::new();
    put_key(&mut build, 1, VARINT);
    put_varint(&mut build, -1i64 as u64);
    put_key(&mut build, 4, VARINT);
    put_varint(&mut build, partitioning.num_replicas as u64);
    put_key(&mut build, 5, VARINT);
    put_varint(&mut build, partitioning.num_partitions as u64);
    if partitioning.spmd() {
        put_key(&mut build, 6, VARINT);
        put_varint(&mut build, 1);
    }
    if partitioning.shardy {
        put_key(&mut build, 19, VARINT);
        put_varint(&mut build, 1);
    }
    let mut out = Vec::new();
    put_key(&mut out, 3, LEN);
    put_varint(&mut out, build.len() as u64);
    out.extend(build);
    for (key, value) in &options.overrides {
        // OptionOverrideProto: string_field 1, bool_field 2, int_field 3, double_field 4.
        let mut value_proto = Vec::new();
        match value {
            OptionOverride::String(v) => put_bytes(&mut value_proto, 1, v.as_bytes()),
            OptionOverride::Bool(b) => {
                put_key(&mut value_proto, 2, VARINT);
                put_varint(&mut value_proto, u64::from(*b));
            }
            OptionOverride::Int(i) => {
                put_key(&mut value_proto, 3, VARINT);
                put_varint(&mut value_proto, *i as u64);
            }
            OptionOverride::Double(d) => {
                put_key(&mut value_proto, 4, FIXED64);
                value_proto.extend(d.to_le_bytes());
            }
        }
        let mut entry = Vec::new();
        put_bytes(&mut entry, 1, key.as_bytes());
        put_bytes(&mut entry, 2, &value_proto);
        put_bytes(&mut out, 7, &entry);
    }
    out
}

fn put_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_key(out, field, LEN);
    put_varint(out, bytes.len() as u64);
    out.extend(bytes);
}

/// The shardings an SPMD-partitioned `xla.HloModuleProto` records for its entry
/// computation: its parameters' (`spmd_parameters_shardings`, field 14) and its result's
/// (`spmd_output_sharding`, field 12; a tuple's elements in order). `None` for a module
/// that records none (not partitioned) or a sharding this reader cannot use.
pub(crate) fn spmd_shardings(module: &[u8]) -> Option<(Vec<Sharding>, Vec<Sharding>)> {
    let mut parameters = Vec::new();
    let mut output = None;
    for (n, v) in fields(module)? {
        match (n, v) {
            (14, Value::Bytes(b)) => parameters.push(op_sharding(b)?),
            (12, Value::Bytes(b)) => output = Some(b),
            _ => {}
        }
    }
    let output = output?;
    let outputs = match tuple_shardings(output)? {
        Some(elements) => elements,
        None => vec![op_sharding(output)?],
    };
    Some((parameters, outputs))
}

/// The elements of a tuple `xla.OpSharding` (type 2, `tuple_shardings` field 5); `None`
/// inside when it is no tuple.
fn tuple_shardings(message: &[u8]) -> Option<Option<Vec<Sharding>>> {
    let fields = fields(message)?;
    let is_tuple = fields
        .iter()
        .any(|(n, v)| *n == 1 && matches!(v, Value::Varint(2)));
    if !is_tuple {
        return Some(None);
    }
    let mut elements = Vec::new();
    for (n, v) in fields {
        if let (5, Value::Bytes(b)) = (n, v) {
            elements.push(op_sharding(b)?);
        }
    }
    Some(Some(elements))
}

/// An array's `xla.OpSharding` (xla/xla_data.proto): `type` (1: replicated 0, maximal 1,
/// other 3, manual 4), `tile_assignment_dimensions` (3), `tile_assignment_devices` (4) or
/// the iota form (`iota_reshape_dims` 9, `iota_transpose_perm` 10),
/// `replicate_on_last_tile_dim` (6), `last_tile_dims` (8). `None` for a tuple, a type this
/// reader does not know, or a tile assignment that does not add up.
fn op_sharding(message: &[u8]) -> Option<Sharding> {
    let mut kind = 0;
    let mut grid = Vec::new();
    let mut devices = Vec::new();
    let mut reshape = Vec::new();
    let mut perm = Vec::new();
    let mut replicate_last = false;
    let mut last_tile_dims = 0;
    for (n, v) in fields(message)? {
        match (n, v) {
            (1, Value::Varint(t)) => kind = t,
            (3, v) => grid.extend(int_values(v)?),
            (4, v) => devices.extend(int_values(v)?),
            (6, Value::Varint(b)) => replicate_last = b != 0,
            (8, v) => last_tile_dims += int_values(v)?.len(),
            (9, v) => reshape.extend(int_values(v)?),
            (10, v) => perm.extend(int_values(v)?),
            _ => {}
        }
    }
    match kind {
        0 => return Some(Sharding::Replicated),
        1 => return Some(Sharding::Maximal(*devices.first()? as usize)),
        4 => return Some(Sharding::Manual),
        3 => {}
        _ => return None,
    }
    let grid: Vec<usize> = grid.into_iter().map(|d| d as usize).collect();
    let cells: usize = grid.iter().product();
    if devices.is_empty() {
        devices = iota_devices(&reshape, &perm)?;
    }
    let trailing = usize::from(replicate_last) + last_tile_dims;
    if devices.len() != cells || trailing > grid.len() {
        return None;
    }
    Some(Sharding::Tiled {
        rank: grid.len() - trailing,
        grid,
        devices: devices.into_iter().map(|d| d as usize).collect(),
    })
}

/// A tile assignment's devices in the iota form XLA prints as `<=[4]` or `<=[2,2]T(1,0)`:
/// 0..n laid out in `reshape` dimensions, transposed by `perm`, read row-major.
fn iota_devices(reshape: &[u64], perm: &[u64]) -> Option<Vec<u64>> {
    let dims: Vec<usize> = reshape.iter().map(|&d| d as usize).collect();
    let perm: Vec<usize> = if perm.is_empty() {
        (0..dims.len()).collect()
    } else {
        perm.iter().map(|&p| p as usize).collect()
    };
    if perm.len() != dims.len() || perm.iter().any(|&p| p >= dims.len()) {
        return None;
    }
    let n: usize = dims.iter().product();
    // Strides of the reshaped iota, then walked in the transposed order.
    let mut strides = vec![1; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * dims[k + 1];
    }
    let tdims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    let mut out = Vec::with_capacity(n);
    for cell in 0..n {
        let mut rest = cell;
        let mut id = 0;
        for k in (0..tdims.len()).rev() {
            id += (rest % tdims[k]) * strides[perm[k]];
            rest /= tdims[k];
        }
        out.push(id as u64);
    }
    Some(out)
}

/// The integers of a repeated field, packed or not.
fn int_values(value: Value<'_>) -> Option<Vec<u64>> {
    match value {
        Value::Varint(v) => Some(vec![v]),
        Value::Bytes(mut packed) => {
            let mut out = Vec::new();
            while !packed.is_empty() {
                out.push(varint(&mut packed)?);
            }
            Some(out)
        }
        Value::Fixed => None,
    }
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
    use crate::sharding::Partitioning;

    #[test]
    fn compile_options_are_the_17_bytes_that_work() {
        let bytes = compile_options(&CompileOptions::default());
        assert_eq!(bytes.len(), 17);
        assert_eq!(&bytes[..4], &[0x1a, 15, 0x08, 0xff]);
        assert_eq!(&bytes[13..], &[0x20, 1, 0x28, 1]);
    }

    #[test]
    fn several_partitions_ask_for_spmd_partitioning() {
        let four = Partitioning {
            num_partitions: 4,
            ..Partitioning::ONE
        };
        let bytes = compile_options(&CompileOptions {
            partitioning: four,
            ..CompileOptions::default()
        });
        // As JAX writes them: num_replicas 1, num_partitions 4, use_spmd_partitioning.
        assert_eq!(&bytes[13..], &[0x20, 1, 0x28, 4, 0x30, 1]);
        assert_eq!(bytes[1] as usize, bytes.len() - 2);
        let shardy = compile_options(&CompileOptions {
            partitioning: Partitioning {
                shardy: true,
                ..four
            },
            ..CompileOptions::default()
        });
        assert_eq!(&shardy[19..], &[0x98, 0x01, 1]);
    }

    #[test]
    fn overrides_are_entries_of_env_option_overrides() {
        let bytes = compile_options(&CompileOptions {
            overrides: vec![
                (
                    "xla_disable_hlo_passes".into(),
                    OptionOverride::String("algsimp".into()),
                ),
                (
                    "xla_cpu_enable_fast_math".into(),
                    OptionOverride::Bool(true),
                ),
            ],
            ..CompileOptions::default()
        });
        let fields = fields(&bytes).unwrap();
        let entries: Vec<&[u8]> = fields
            .iter()
            .filter_map(|(n, v)| match v {
                Value::Bytes(b) if *n == 7 => Some(*b),
                _ => None,
            })
            .collect();
        assert_eq!(entries.len(), 2);
        // The first: key 1 "xla_disable_hlo_passes", value 2 { string_field 1 "algsimp" }.
        let mut want = Vec::new();
        put_bytes(&mut want, 1, b"xla_disable_hlo_passes");
        put_bytes(
            &mut want,
            2,
            &[0x0a, 7, b'a', b'l', b'g', b's', b'i', b'm', b'p'],
        );
        assert_eq!(entries[0], &want[..]);
        assert!(entries[1].ends_with(&[0x12, 2, 0x10, 1]));
    }

    #[test]
    fn iota_tile_assignments_are_laid_out_as_xla_prints_them() {
        assert_eq!(iota_devices(&[4], &[]).unwrap(), [0, 1, 2, 3]);
        // <=[2,2]T(1,0): 0 2 1 3.
        assert_eq!(iota_devices(&[2, 2], &[1, 0]).unwrap(), [0, 2, 1, 3]);
        // <=[2,3]T(1,0): 0 3 1 4 2 5.
        assert_eq!(iota_devices(&[2, 3], &[1, 0]).unwrap(), [0, 3, 1, 4, 2, 5]);
        assert!(iota_devices(&[2, 2], &[0]).is_none());
    }

    #[test]
    fn op_shardings_read_as_the_module_records_them() {
        // {devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}
        let mut m = Vec::new();
        put_key(&mut m, 1, VARINT);
        put_varint(&mut m, 3);
        for (field, values) in [(3, &[1u64, 2, 2][..]), (9, &[2, 2]), (10, &[1, 0])] {
            let mut packed = Vec::new();
            for &v in values {
                put_varint(&mut packed, v);
            }
            put_key(&mut m, field, LEN);
            put_varint(&mut m, packed.len() as u64);
            m.extend(packed);
        }
        put_key(&mut m, 6, VARINT);
        put_varint(&mut m, 1);
        assert_eq!(
            op_sharding(&m).unwrap(),
            Sharding::Tiled {
                grid: vec![1, 2, 2],
                rank: 2,
                devices: vec![0, 2, 1, 3]
            }
        );
        let mut module = Vec::new();
        put_key(&mut module, 14, LEN);
        put_varint(&mut module, m.len() as u64);
        module.extend(&m);
        // The output: a tuple of one replicated element.
        let mut out = Vec::new();
        put_key(&mut out, 1, VARINT);
        put_varint(&mut out, 2);
        put_key(&mut out, 5, LEN);
        put_varint(&mut out, 0);
        put_key(&mut module, 12, LEN);
        put_varint(&mut module, out.len() as u64);
        module.extend(&out);
        let (params, outputs) = spmd_shardings(&module).unwrap();
        assert_eq!(params.len(), 1);
        assert_eq!(outputs, [Sharding::Replicated]);
        // A module that records no sharding: not partitioned.
        assert!(spmd_shardings(&[]).is_none());
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

//! Conversions between graphbug's IR types and tch / c10 types.
//!
//! The c10 codes (`c10_scalar_type`, `c10_layout`, `c10_memory_format`) are the integer
//! values of libtorch's `c10::ScalarType`, `c10::Layout` and `c10::MemoryFormat` enums, as
//! the boxed-dispatcher shim passes them in an `IValue`.

use graphbug_ir::{Device, Dtype, Layout, MemoryFormat, TensorMeta};
use tch::{Kind, Tensor};

use crate::error::AtenError;

/// The tch element kind of a graphbug dtype; `None` for uint16, uint32 and uint64, which
/// tch 0.26 has no `Kind` for (make such tensors with [`to_dtype`] or [`view_bits`]).
pub fn kind_of(dtype: Dtype) -> Option<Kind> {
    Some(match dtype {
        Dtype::Float32 => Kind::Float,
        Dtype::Float64 => Kind::Double,
        Dtype::Float16 => Kind::Half,
        Dtype::BFloat16 => Kind::BFloat16,
        Dtype::Int64 => Kind::Int64,
        Dtype::Int32 => Kind::Int,
        Dtype::Int16 => Kind::Int16,
        Dtype::Int8 => Kind::Int8,
        Dtype::UInt8 => Kind::Uint8,
        Dtype::Bool => Kind::Bool,
        Dtype::Complex64 => Kind::ComplexFloat,
        Dtype::Complex128 => Kind::ComplexDouble,
        Dtype::UInt16 | Dtype::UInt32 | Dtype::UInt64 => return None,
    })
}

/// A dtype tch can name whose elements hold `dtype`'s bits: `dtype` itself, or for
/// uint16/32/64 the signed integer dtype of the same width (see [`view_bits`]).
pub fn bits_dtype(dtype: Dtype) -> Dtype {
    match dtype {
        Dtype::UInt16 => Dtype::Int16,
        Dtype::UInt32 => Dtype::Int32,
        Dtype::UInt64 => Dtype::Int64,
        other => other,
    }
}

/// The tch kind of [`bits_dtype`]`(dtype)`.
pub fn bits_kind(dtype: Dtype) -> Kind {
    kind_of(bits_dtype(dtype)).expect("invariant: bits_dtype gives a dtype tch has a kind for")
}

/// `t` with its bits read as `dtype` (`Tensor.view(dtype)`; a no-op when `t` is `dtype`).
pub fn view_bits(t: &Tensor, dtype: Dtype) -> Result<Tensor, String> {
    if tensor_dtype(t) == Some(dtype) {
        return Ok(t.shallow_clone());
    }
    crate::shim::tensor_view_dtype(t, c10_scalar_type(dtype))
}

/// `t`'s values converted to `dtype` (every dtype, uint16/32/64 included).
pub fn to_dtype(t: &Tensor, dtype: Dtype) -> Result<Tensor, String> {
    match kind_of(dtype) {
        Some(kind) => t.f_to_kind(kind).map_err(|e| e.to_string()),
        None => crate::shim::tensor_to_dtype(t, c10_scalar_type(dtype)),
    }
}

/// The graphbug dtype of a tch element kind; `None` for kinds graphbug does not model
/// (quantized, float8, complex half).
pub fn dtype_of(kind: Kind) -> Option<Dtype> {
    Some(match kind {
        Kind::Float => Dtype::Float32,
        Kind::Double => Dtype::Float64,
        Kind::Half => Dtype::Float16,
        Kind::BFloat16 => Dtype::BFloat16,
        Kind::Int64 => Dtype::Int64,
        Kind::Int => Dtype::Int32,
        Kind::Int16 => Dtype::Int16,
        Kind::Int8 => Dtype::Int8,
        Kind::Uint8 => Dtype::UInt8,
        Kind::Bool => Dtype::Bool,
        Kind::ComplexFloat => Dtype::Complex64,
        Kind::ComplexDouble => Dtype::Complex128,
        Kind::ComplexHalf
        | Kind::QInt8
        | Kind::QUInt8
        | Kind::QInt32
        | Kind::Float8e5m2
        | Kind::Float8e4m3fn
        | Kind::Float8e5m2fnuz
        | Kind::Float8e4m3fnuz => return None,
    })
}

/// The graphbug dtype of a `c10::ScalarType` code; `None` for types graphbug does not model.
pub fn dtype_of_c10(code: i64) -> Option<Dtype> {
    Dtype::ALL.into_iter().find(|&d| c10_scalar_type(d) == code)
}

/// The dtype of a defined tensor, asked of libtorch (tch cannot name uint16/32/64).
pub fn tensor_dtype(tensor: &Tensor) -> Option<Dtype> {
    dtype_of_c10(i64::from(crate::shim::scalar_type(tensor)))
}

/// Dtype and shape of a tensor; `None` for an undefined tensor or an unsupported kind.
pub fn meta_of(tensor: &Tensor) -> Option<TensorMeta> {
    if !tensor.defined() {
        return None;
    }
    Some(TensorMeta::new(tensor_dtype(tensor)?, tensor.size()))
}

/// A short description such as `f32[2, 3]`; unsupported kinds print their tch name
/// (`QInt8[2, 3]`), undefined tensors print `undefined`.
pub fn describe(tensor: &Tensor) -> String {
    if !tensor.defined() {
        return "undefined".to_string();
    }
    if let Some(meta) = meta_of(tensor) {
        return meta.to_string();
    }
    let shape = tensor
        .size()
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    match tensor.f_kind() {
        Ok(kind) => format!("{kind:?}[{shape}]"),
        Err(_) => format!("unknown-dtype[{shape}]"),
    }
}

/// The tch device for a graphbug device: `cpu` and `cuda[:i]` only.
///
/// tch cannot hold the `meta` device (and graphbug runs on CPU and CUDA only), so every
/// other kind is an [`AtenError::Device`].
pub fn tch_device(device: &Device) -> crate::Result<tch::Device> {
    match (device.kind.as_str(), device.index) {
        ("cpu", None | Some(0)) => Ok(tch::Device::Cpu),
        ("cpu", Some(i)) => Err(AtenError::Device(format!(
            "`{device}`: the CPU has only index 0, not {i}"
        ))),
        ("cuda", index) => {
            // CUDA's kernels register when libtorch_cuda loads, which must come before any
            // tensor is put on the device (tch panics otherwise).
            crate::device::ensure_device(device)?;
            Ok(tch::Device::Cuda(index.unwrap_or(0) as usize))
        }
        (other, _) => Err(AtenError::Device(format!(
            "`{device}`: device type `{other}` cannot hold tensors here (graphbug runs on cpu and cuda)"
        ))),
    }
}

/// The `c10::ScalarType` code of a dtype (`Float` = 6, `Bool` = 11, `BFloat16` = 15, ...).
pub fn c10_scalar_type(dtype: Dtype) -> i64 {
    match dtype {
        Dtype::UInt8 => 0,
        Dtype::Int8 => 1,
        Dtype::Int16 => 2,
        Dtype::Int32 => 3,
        Dtype::Int64 => 4,
        Dtype::Float16 => 5,
        Dtype::Float32 => 6,
        Dtype::Float64 => 7,
        Dtype::Complex64 => 9,
        Dtype::Complex128 => 10,
        Dtype::Bool => 11,
        Dtype::BFloat16 => 15,
        Dtype::UInt16 => 27,
        Dtype::UInt32 => 28,
        Dtype::UInt64 => 29,
    }
}

/// The `c10::Layout` code of a layout (`Strided` = 0, `Sparse` (COO) = 1, ...).
pub fn c10_layout(layout: Layout) -> i64 {
    match layout {
        Layout::Strided => 0,
        Layout::SparseCoo => 1,
        Layout::SparseCsr => 2,
        Layout::Mkldnn => 3,
        Layout::SparseCsc => 4,
        Layout::SparseBsr => 5,
        Layout::SparseBsc => 6,
    }
}

/// The `c10::MemoryFormat` code of a memory format (`Contiguous` = 0, `Preserve` = 1, ...).
pub fn c10_memory_format(format: MemoryFormat) -> i64 {
    match format {
        MemoryFormat::ContiguousFormat => 0,
        MemoryFormat::PreserveFormat => 1,
        MemoryFormat::ChannelsLast => 2,
        MemoryFormat::ChannelsLast3d => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CUDA device is checked (and libtorch_cuda loaded) before tch is handed it: without
    /// a GPU it is an error naming it, never a tch device a later `to_device` panics on.
    #[test]
    fn cuda_devices_are_checked_before_tch_gets_them() {
        let cuda = Device::new("cuda", None).unwrap();
        match tch_device(&cuda) {
            Ok(d) => {
                assert!(crate::device::cuda_available());
                assert_eq!(d, tch::Device::Cuda(0));
            }
            Err(e) => {
                assert!(!crate::device::cuda_available());
                assert!(e.to_string().contains("cuda"), "{e}");
            }
        }
        let beyond = Device::cuda(u32::try_from(crate::device::cuda_device_count()).unwrap());
        assert!(matches!(tch_device(&beyond), Err(AtenError::Device(_))));
    }

    #[test]
    fn kind_round_trip() {
        for d in Dtype::ALL {
            match kind_of(d) {
                Some(k) => assert_eq!(dtype_of(k), Some(d), "{d}"),
                None => assert!(matches!(d, Dtype::UInt16 | Dtype::UInt32 | Dtype::UInt64)),
            }
        }
        for k in [
            Kind::ComplexHalf,
            Kind::QInt8,
            Kind::QUInt8,
            Kind::QInt32,
            Kind::Float8e5m2,
            Kind::Float8e4m3fn,
            Kind::Float8e5m2fnuz,
            Kind::Float8e4m3fnuz,
        ] {
            assert_eq!(dtype_of(k), None, "{k:?}");
        }
    }

    #[test]
    fn meta_and_describe_of_real_tensors() {
        for d in Dtype::ALL {
            let t = to_dtype(&Tensor::zeros([2, 3], (Kind::Float, tch::Device::Cpu)), d).unwrap();
            let meta = meta_of(&t).expect("supported dtype");
            assert_eq!(meta, TensorMeta::new(d, vec![2, 3]));
            assert_eq!(describe(&t), format!("{}[2, 3]", d.short_name()));
        }
        let scalar = Tensor::from(1.5f64);
        assert_eq!(describe(&scalar), "f64[]");
        let empty = Tensor::zeros([0, 4], (Kind::Int64, tch::Device::Cpu));
        assert_eq!(describe(&empty), "i64[0, 4]");
    }

    #[test]
    fn describe_unsupported_and_undefined() {
        let f8 = Tensor::zeros([2], (Kind::Float, tch::Device::Cpu)).to_kind(Kind::Float8e5m2);
        assert_eq!(meta_of(&f8), None);
        assert_eq!(describe(&f8), "Float8e5m2[2]");
        let undefined = Tensor::new();
        assert_eq!(meta_of(&undefined), None);
        assert_eq!(describe(&undefined), "undefined");
    }

    #[test]
    fn unsigned_dtypes_tch_cannot_name_convert_and_reinterpret() {
        let big = Tensor::from_slice(&[-1i64, 7]);
        let u64s = view_bits(&big, Dtype::UInt64).unwrap();
        assert_eq!(describe(&u64s), "u64[2]");
        // The bits survive a round trip; the value 2^64-1 is what -1's bits mean.
        let back = view_bits(&u64s, Dtype::Int64).unwrap();
        assert_eq!(Vec::<i64>::try_from(&back).unwrap(), vec![-1, 7]);
        let u16s = to_dtype(&Tensor::from_slice(&[3.0f32, 65535.0]), Dtype::UInt16).unwrap();
        assert_eq!(
            meta_of(&u16s),
            Some(TensorMeta::new(Dtype::UInt16, vec![2]))
        );
        let f = to_dtype(&u16s, Dtype::Float32).unwrap();
        assert_eq!(Vec::<f32>::try_from(&f).unwrap(), vec![3.0, 65535.0]);
        assert_eq!(bits_kind(Dtype::UInt32), Kind::Int);
        // Bits that do not fill the wider elements are libtorch's error, not a panic.
        let e = view_bits(&Tensor::from_slice(&[1i32]), Dtype::UInt64).unwrap_err();
        assert!(!e.is_empty());
    }

    #[test]
    fn devices() {
        assert_eq!(tch_device(&Device::cpu()).unwrap(), tch::Device::Cpu);
        let meta = Device::new("meta", None).unwrap();
        let e = tch_device(&meta).unwrap_err().to_string();
        assert!(e.contains("`meta`"), "{e}");
        assert!(matches!(tch_device(&meta), Err(AtenError::Device(_))));
        let cpu1 = Device::new("cpu", Some(1)).unwrap();
        assert!(matches!(tch_device(&cpu1), Err(AtenError::Device(_))));
    }

    /// Reads `NAME /* N */` comments or enum bodies from a libtorch header, when present.
    fn header(rel: &str) -> Option<String> {
        let base = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../.libtorch/include/");
        std::fs::read_to_string(format!("{base}{rel}")).ok()
    }

    /// The variant names of `enum class <name> : int8_t { ... }` in order.
    fn enum_variants(text: &str, name: &str) -> Vec<String> {
        let start = text
            .find(&format!("enum class {name}"))
            .expect("enum present in header");
        let body = &text[start..];
        let open = body.find('{').expect("enum body opens");
        let close = body.find('}').expect("enum body closes");
        body[open + 1..close]
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect()
    }

    #[test]
    fn scalar_type_codes_match_libtorch_headers() {
        let expected: Vec<(Dtype, &str)> = vec![
            (Dtype::UInt8, "Byte"),
            (Dtype::Int8, "Char"),
            (Dtype::Int16, "Short"),
            (Dtype::Int32, "Int"),
            (Dtype::Int64, "Long"),
            (Dtype::Float16, "Half"),
            (Dtype::Float32, "Float"),
            (Dtype::Float64, "Double"),
            (Dtype::Complex64, "ComplexFloat"),
            (Dtype::Complex128, "ComplexDouble"),
            (Dtype::Bool, "Bool"),
            (Dtype::BFloat16, "BFloat16"),
            (Dtype::UInt16, "UInt16"),
            (Dtype::UInt32, "UInt32"),
            (Dtype::UInt64, "UInt64"),
        ];
        // tch's own Kind codes agree (tch passes them to the same C API).
        for (d, _) in &expected {
            if let Some(kind) = kind_of(*d) {
                let t = Tensor::zeros([1], (kind, tch::Device::Cpu));
                assert_eq!(dtype_of(t.kind()), Some(*d));
                assert_eq!(tensor_dtype(&t), Some(*d));
            }
        }
        let Some(text) = header("torch/headeronly/core/ScalarType.h")
            .or_else(|| header("c10/core/ScalarType.h"))
        else {
            graphbug_run::not_run_here(
                "the c10 code check of dtypes",
                "libtorch headers not found",
            );
            return;
        };
        for (d, name) in expected {
            let needle = format!(", {name}) /* {} */", c10_scalar_type(d));
            assert!(
                text.contains(&needle),
                "{d}: `{needle}` not in ScalarType.h"
            );
        }
    }

    #[test]
    fn layout_and_memory_format_codes_match_libtorch_headers() {
        let layouts = [
            (Layout::Strided, "Strided"),
            (Layout::SparseCoo, "Sparse"),
            (Layout::SparseCsr, "SparseCsr"),
            (Layout::Mkldnn, "Mkldnn"),
            (Layout::SparseCsc, "SparseCsc"),
            (Layout::SparseBsr, "SparseBsr"),
            (Layout::SparseBsc, "SparseBsc"),
        ];
        let formats = [
            (MemoryFormat::ContiguousFormat, "Contiguous"),
            (MemoryFormat::PreserveFormat, "Preserve"),
            (MemoryFormat::ChannelsLast, "ChannelsLast"),
            (MemoryFormat::ChannelsLast3d, "ChannelsLast3d"),
        ];
        let layout_h =
            header("torch/headeronly/core/Layout.h").or_else(|| header("c10/core/Layout.h"));
        let format_h = header("torch/headeronly/core/MemoryFormat.h")
            .or_else(|| header("c10/core/MemoryFormat.h"));
        let (Some(layout_h), Some(format_h)) = (layout_h, format_h) else {
            graphbug_run::not_run_here(
                "the c10 code check of layouts and memory formats",
                "libtorch headers not found",
            );
            return;
        };
        let variants = enum_variants(&layout_h, "Layout");
        for (l, name) in layouts {
            assert_eq!(variants[c10_layout(l) as usize], name, "{l:?}");
        }
        let variants = enum_variants(&format_h, "MemoryFormat");
        for (m, name) in formats {
            assert_eq!(variants[c10_memory_format(m) as usize], name, "{m:?}");
        }
    }
}

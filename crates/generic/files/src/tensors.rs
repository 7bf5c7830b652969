//! Tensor files, `.npz` and `.safetensors`, as [`HostTensor`]s.
//!
//! Both formats are read and written here rather than through a framework's helpers:
//! tch's npz writer stamps the current time into the zip (so two writes differ) and
//! cannot store bool or complex tensors, its npz reader panics on a damaged zip entry and
//! trusts the npy header's size, and its safetensors reader returns tensors in hash-map
//! order. Reading keeps the file's order (zip entry order for npz, data-offset order for
//! safetensors); writing is atomic, durable and byte-for-byte deterministic.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Cursor, Read, Write};
use std::path::Path;

use graphbug_ir::Dtype;

/// A tensor file that cannot be read or written: the file, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct TensorFileError {
    /// The file.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

fn file_error(path: &Path, message: impl Into<String>) -> TensorFileError {
    TensorFileError {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// A tensor on the host: its dtype, shape and little-endian C-order bytes, and the strides
/// it was laid out with when they were not the contiguous ones (kept in safetensors
/// metadata, so a reader can lay it out again).
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    /// The element type.
    pub dtype: Dtype,
    /// The sizes.
    pub shape: Vec<usize>,
    /// The elements, row-major, little-endian.
    pub data: Vec<u8>,
    /// The strides of the tensor it came from, when not the contiguous ones.
    pub strides: Option<Vec<i64>>,
}

impl HostTensor {
    /// A contiguous tensor of `dtype` and `shape` holding `data`, whose length must be
    /// exactly what they need.
    pub fn new(dtype: Dtype, shape: Vec<usize>, data: Vec<u8>) -> Result<HostTensor, String> {
        let expected = shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .and_then(|n| n.checked_mul(dtype.itemsize()))
            .ok_or_else(|| format!("shape {shape:?} is too large"))?;
        if data.len() != expected {
            return Err(format!(
                "{}{shape:?} needs {expected} bytes of data, found {}",
                dtype.short_name(),
                data.len()
            ));
        }
        Ok(HostTensor {
            dtype,
            shape,
            data,
            strides: None,
        })
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The two tensor file formats, chosen by file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// numpy's zip of `.npy` arrays.
    Npz,
    /// Hugging Face's safetensors.
    Safetensors,
}

impl Format {
    /// The format of a path, by its extension.
    pub fn of(path: &Path) -> Result<Format, TensorFileError> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("npz") => Ok(Format::Npz),
            Some("safetensors") => Ok(Format::Safetensors),
            Some(other) => Err(file_error(
                path,
                format!("unknown extension `.{other}` (expected .npz or .safetensors)"),
            )),
            None => Err(file_error(
                path,
                "no file extension (expected .npz or .safetensors)",
            )),
        }
    }
}

/// Reads every tensor of a `.npz` or `.safetensors` file, in the file's order.
pub fn read(path: &Path) -> Result<Vec<(String, HostTensor)>, TensorFileError> {
    let format = Format::of(path)?;
    let bytes = std::fs::read(path).map_err(|e| file_error(path, format!("cannot read: {e}")))?;
    match format {
        Format::Npz => read_npz(path, &bytes),
        Format::Safetensors => read_safetensors(path, &bytes),
    }
}

/// Writes tensors to a `.npz` or `.safetensors` file, atomically, durably and
/// deterministically: npz entries keep the given order with a fixed timestamp;
/// safetensors orders entries by dtype, then name, as the format's writer does. In `.npz`
/// bf16 is written as JAX's `np.savez` writes ml_dtypes' bfloat16: two-byte void (`|V2`;
/// `.view(ml_dtypes.bfloat16)` reads it back in numpy); `.safetensors` cannot hold complex.
pub fn write<S: AsRef<str>>(
    path: &Path,
    tensors: &[(S, HostTensor)],
) -> Result<(), TensorFileError> {
    let format = Format::of(path)?;
    let mut seen = HashSet::new();
    for (name, _) in tensors {
        if !seen.insert(name.as_ref()) {
            return Err(file_error(
                path,
                format!("duplicate tensor name `{}`", name.as_ref()),
            ));
        }
    }
    let bytes = match format {
        Format::Npz => npz_bytes(path, tensors)?,
        Format::Safetensors => safetensors_bytes(path, tensors)?,
    };
    crate::write_file_atomically(path, &bytes)
        .map_err(|e| file_error(path, format!("cannot write: {e}")))
}

// ---------------------------------------------------------------- npz / npy

const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// The npy `descr` of a dtype. numpy has no bfloat16: ml_dtypes' (JAX's) is saved as
/// two-byte void, `|V2`, and graphbug does the same.
fn npy_descr(dtype: Dtype) -> &'static str {
    match dtype {
        Dtype::Float32 => "<f4",
        Dtype::Float64 => "<f8",
        Dtype::Float16 => "<f2",
        Dtype::BFloat16 => "|V2",
        Dtype::Int64 => "<i8",
        Dtype::Int32 => "<i4",
        Dtype::Int16 => "<i2",
        Dtype::Int8 => "|i1",
        Dtype::UInt8 => "|u1",
        Dtype::Bool => "|b1",
        Dtype::Complex64 => "<c8",
        Dtype::Complex128 => "<c16",
        Dtype::UInt16 => "<u2",
        Dtype::UInt32 => "<u4",
        Dtype::UInt64 => "<u8",
    }
}

/// The dtype of an npy `descr` such as `<f4`; big-endian multi-byte types are refused.
fn dtype_of_descr(descr: &str) -> Result<Dtype, String> {
    let (order, body) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &descr[1..]),
        _ => ('=', descr),
    };
    let dtype = match body {
        "f4" | "f" => Dtype::Float32,
        "f8" | "d" => Dtype::Float64,
        "f2" | "e" => Dtype::Float16,
        "i8" | "q" => Dtype::Int64,
        "i4" | "i" => Dtype::Int32,
        "i2" | "h" => Dtype::Int16,
        "i1" | "b" => Dtype::Int8,
        "u1" | "B" => Dtype::UInt8,
        "u2" | "H" => Dtype::UInt16,
        "u4" | "I" => Dtype::UInt32,
        "u8" | "Q" => Dtype::UInt64,
        "b1" | "?" => Dtype::Bool,
        "c8" | "F" => Dtype::Complex64,
        "c16" | "D" => Dtype::Complex128,
        // ml_dtypes' bfloat16, as numpy saves it (JAX's outputs): its only two-byte type.
        "V2" => Dtype::BFloat16,
        _ => return Err(format!("unsupported npy dtype `{descr}`")),
    };
    if order == '>' && dtype.itemsize() > 1 {
        return Err(format!("big-endian npy dtype `{descr}` is not supported"));
    }
    Ok(dtype)
}

/// One npy file: header (version 1.0, 64-byte aligned as numpy writes it) and data.
fn npy_bytes(path: &Path, name: &str, t: &HostTensor) -> Result<Vec<u8>, TensorFileError> {
    let descr = npy_descr(t.dtype);
    let shape = match t.shape.as_slice() {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // magic (6) + version (2) + header length (2) + header + '\n' is a multiple of 64.
    let unpadded = NPY_MAGIC.len() + 4 + header.len() + 1;
    header.extend(std::iter::repeat_n(' ', (64 - unpadded % 64) % 64));
    header.push('\n');
    let header_len = u16::try_from(header.len())
        .map_err(|_| file_error(path, format!("npy header of `{name}` is too long")))?;
    let mut out = Vec::with_capacity(NPY_MAGIC.len() + 4 + header.len() + t.data.len());
    out.extend_from_slice(NPY_MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&header_len.to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&t.data);
    Ok(out)
}

fn npz_bytes<S: AsRef<str>>(
    path: &Path,
    tensors: &[(S, HostTensor)],
) -> Result<Vec<u8>, TensorFileError> {
    let zip_err = |e: zip::result::ZipError| file_error(path, format!("zip: {e}"));
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, t) in tensors {
        let npy = npy_bytes(path, name.as_ref(), t)?;
        let options = zip::write::FileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            // A fixed timestamp (1980-01-01, the zip epoch) keeps the bytes reproducible.
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(0o644)
            .large_file(npy.len() as u64 >= u64::from(u32::MAX));
        zip.start_file(format!("{}.npy", name.as_ref()), options)
            .map_err(zip_err)?;
        zip.write_all(&npy)
            .map_err(|e| file_error(path, format!("zip: {e}")))?;
    }
    Ok(zip.finish().map_err(zip_err)?.into_inner())
}

/// The parsed dictionary of an npy header.
#[derive(Debug)]
struct NpyHeader {
    dtype: Dtype,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// The text after `'key':` in an npy header dict.
fn header_value<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    for quote in ['\'', '"'] {
        let needle = format!("{quote}{key}{quote}");
        if let Some(pos) = header.find(&needle) {
            let rest = header[pos + needle.len()..].trim_start();
            return rest.strip_prefix(':').map(str::trim_start);
        }
    }
    None
}

fn parse_npy_header(header: &str) -> Result<NpyHeader, String> {
    let descr_text = header_value(header, "descr").ok_or("npy header has no `descr`")?;
    let quote = descr_text
        .chars()
        .next()
        .filter(|c| *c == '\'' || *c == '"')
        .ok_or("npy `descr` is not a string (structured dtypes are not supported)")?;
    let descr = descr_text[1..]
        .split(quote)
        .next()
        .ok_or("npy `descr` is not terminated")?;
    let dtype = dtype_of_descr(descr)?;
    let fortran_text = header_value(header, "fortran_order").unwrap_or("False");
    let fortran_order = if fortran_text.starts_with("True") {
        true
    } else if fortran_text.starts_with("False") {
        false
    } else {
        return Err("npy `fortran_order` is neither True nor False".into());
    };
    let shape_text = header_value(header, "shape").ok_or("npy header has no `shape`")?;
    let body = shape_text
        .strip_prefix('(')
        .and_then(|r| r.split(')').next())
        .ok_or("npy `shape` is not a tuple")?;
    let shape = body
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            d.trim_end_matches('L')
                .parse::<usize>()
                .map_err(|_| format!("bad npy dimension `{d}`"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(NpyHeader {
        dtype,
        fortran_order,
        shape,
    })
}

/// C-order bytes of elements of `itemsize` bytes stored in Fortran order with `shape`.
fn fortran_to_c(data: &[u8], shape: &[usize], itemsize: usize) -> Vec<u8> {
    let numel: usize = shape.iter().product();
    let mut out = vec![0u8; data.len()];
    // Fortran strides (in elements) of each dimension.
    let mut fstride = vec![1usize; shape.len()];
    for d in 1..shape.len() {
        fstride[d] = fstride[d - 1] * shape[d - 1];
    }
    let mut index = vec![0usize; shape.len()];
    for c in 0..numel {
        let f: usize = index.iter().zip(&fstride).map(|(i, s)| i * s).sum();
        out[c * itemsize..(c + 1) * itemsize]
            .copy_from_slice(&data[f * itemsize..(f + 1) * itemsize]);
        // The next C-order index: the last dimension moves fastest.
        for d in (0..shape.len()).rev() {
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}

/// Parses one npy file: magic, version 1/2/3 header, data.
fn parse_npy(bytes: &[u8]) -> Result<HostTensor, String> {
    let rest = bytes
        .strip_prefix(NPY_MAGIC)
        .ok_or("not an npy array (bad magic)")?;
    let (header_len, rest) = match rest {
        [1, _, a, b, rest @ ..] => (u16::from_le_bytes([*a, *b]) as usize, rest),
        [2 | 3, _, a, b, c, d, rest @ ..] => (u32::from_le_bytes([*a, *b, *c, *d]) as usize, rest),
        [v, ..] => return Err(format!("unsupported npy version {v}")),
        [] => return Err("truncated npy header".into()),
    };
    if rest.len() < header_len {
        return Err("truncated npy header".into());
    }
    let header = std::str::from_utf8(&rest[..header_len]).map_err(|_| "npy header is not text")?;
    let h = parse_npy_header(header)?;
    let mut t = HostTensor::new(h.dtype, h.shape, rest[header_len..].to_vec())?;
    if h.fortran_order && t.shape.len() > 1 {
        t.data = fortran_to_c(&t.data, &t.shape, t.dtype.itemsize());
    }
    Ok(t)
}

fn read_npz(path: &Path, bytes: &[u8]) -> Result<Vec<(String, HostTensor)>, TensorFileError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| file_error(path, format!("not a valid .npz (zip) file: {e}")))?;
    let mut out = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| file_error(path, format!("zip entry {i}: {e}")))?;
        let entry_name = entry.name().to_string();
        let mut data = Vec::new();
        entry
            .read_to_end(&mut data)
            .map_err(|e| file_error(path, format!("entry `{entry_name}`: {e}")))?;
        let tensor =
            parse_npy(&data).map_err(|e| file_error(path, format!("entry `{entry_name}`: {e}")))?;
        let name = entry_name
            .strip_suffix(".npy")
            .unwrap_or(&entry_name)
            .to_string();
        out.push((name, tensor));
    }
    Ok(out)
}

// ---------------------------------------------------------------- safetensors

fn safetensors_dtype(dtype: Dtype) -> Option<safetensors::Dtype> {
    use safetensors::Dtype as S;
    Some(match dtype {
        Dtype::Float32 => S::F32,
        Dtype::Float64 => S::F64,
        Dtype::Float16 => S::F16,
        Dtype::BFloat16 => S::BF16,
        Dtype::Int64 => S::I64,
        Dtype::Int32 => S::I32,
        Dtype::Int16 => S::I16,
        Dtype::Int8 => S::I8,
        Dtype::UInt8 => S::U8,
        Dtype::Bool => S::BOOL,
        Dtype::UInt16 => S::U16,
        Dtype::UInt32 => S::U32,
        Dtype::UInt64 => S::U64,
        Dtype::Complex64 | Dtype::Complex128 => return None,
    })
}

fn dtype_of_safetensors(dtype: safetensors::Dtype) -> Option<Dtype> {
    Dtype::ALL
        .into_iter()
        .find(|d| safetensors_dtype(*d) == Some(dtype))
}

/// A [`safetensors::View`] over host bytes.
struct SafeView<'t> {
    dtype: safetensors::Dtype,
    shape: &'t [usize],
    data: &'t [u8],
}

impl safetensors::View for SafeView<'_> {
    fn dtype(&self) -> safetensors::Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        self.shape
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// The safetensors metadata key holding the strides of tensors that were not contiguous:
/// a JSON object from tensor name to strides (graphbug_capture writes it too).
pub const STRIDES_METADATA: &str = "strides";

fn safetensors_bytes<S: AsRef<str>>(
    path: &Path,
    tensors: &[(S, HostTensor)],
) -> Result<Vec<u8>, TensorFileError> {
    let mut views = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        let dtype = safetensors_dtype(t.dtype).ok_or_else(|| {
            file_error(
                path,
                format!(
                    "tensor `{}` is {}, which .safetensors cannot hold; use .npz",
                    name.as_ref(),
                    t.dtype.short_name()
                ),
            )
        })?;
        views.push((
            name.as_ref(),
            SafeView {
                dtype,
                shape: &t.shape,
                data: &t.data,
            },
        ));
    }
    // Strides that are not the contiguous ones ride in the header's metadata, so a
    // reader gets the layout back (AOT graphs `view` their inputs as they were laid out).
    let strides: BTreeMap<&str, &Vec<i64>> = tensors
        .iter()
        .filter_map(|(name, t)| t.strides.as_ref().map(|s| (name.as_ref(), s)))
        .collect();
    let metadata = (!strides.is_empty()).then(|| {
        HashMap::from([(
            STRIDES_METADATA.to_string(),
            serde_json::to_string(&strides).expect("strides serialize"),
        )])
    });
    // The writer sorts by (dtype alignment, name) and serialises the header from a Vec,
    // so the output does not depend on hash-map order (the metadata has one key).
    safetensors::serialize(views, &metadata)
        .map_err(|e| file_error(path, format!("safetensors: {e:?}")))
}

fn read_safetensors(
    path: &Path,
    bytes: &[u8],
) -> Result<Vec<(String, HostTensor)>, TensorFileError> {
    let st = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| file_error(path, format!("not a valid .safetensors file: {e:?}")))?;
    let (_, metadata) = safetensors::SafeTensors::read_metadata(bytes)
        .map_err(|e| file_error(path, format!("not a valid .safetensors file: {e:?}")))?;
    // File order: by data offset (zero-size tensors may share an offset; name breaks ties).
    let mut names: Vec<(String, (usize, usize))> = metadata
        .tensors()
        .into_iter()
        .map(|(name, info)| (name, info.data_offsets))
        .collect();
    names.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    let mut strides: HashMap<String, Vec<i64>> = match metadata
        .metadata()
        .as_ref()
        .and_then(|m| m.get(STRIDES_METADATA))
    {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| file_error(path, format!("bad `{STRIDES_METADATA}` metadata: {e}")))?,
        None => HashMap::new(),
    };
    let mut out = Vec::with_capacity(names.len());
    for (name, _) in names {
        let view = st
            .tensor(&name)
            .map_err(|e| file_error(path, format!("tensor `{name}`: {e:?}")))?;
        let dtype = dtype_of_safetensors(view.dtype()).ok_or_else(|| {
            file_error(
                path,
                format!("tensor `{name}` has unsupported dtype {:?}", view.dtype()),
            )
        })?;
        let mut tensor = HostTensor::new(dtype, view.shape().to_vec(), view.data().to_vec())
            .map_err(|e| file_error(path, format!("tensor `{name}`: {e}")))?;
        tensor.strides = strides.remove(&name);
        out.push((name, tensor));
    }
    Ok(out)
}

/// Tensor names for an error message: all of them up to six, else the first three and the
/// last (`arg0, arg1, arg2, ..., arg9`).
pub fn name_list<S: AsRef<str>>(names: &[S]) -> String {
    let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    if names.len() <= 6 {
        names.join(", ")
    } else {
        format!("{}, ..., {}", names[..3].join(", "), names[names.len() - 1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(values: &[f32], shape: Vec<usize>) -> HostTensor {
        HostTensor::new(
            Dtype::Float32,
            shape,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
        .unwrap()
    }

    #[test]
    fn both_formats_round_trip_in_order_and_deterministically() {
        let dir = tempfile::tempdir().unwrap();
        let mut strided = f32s(&[1.0, 2.0, 3.0, 4.0], vec![2, 2]);
        strided.strides = Some(vec![1, 2]);
        let tensors = vec![
            ("b", f32s(&[1.5, 2.5], vec![2])),
            (
                "a",
                HostTensor::new(Dtype::Int64, vec![], 7i64.to_le_bytes().to_vec()).unwrap(),
            ),
            (
                "c",
                HostTensor::new(Dtype::Bool, vec![3], vec![1, 0, 1]).unwrap(),
            ),
        ];
        for ext in ["npz", "safetensors"] {
            let path = dir.path().join(format!("t.{ext}"));
            write(&path, &tensors).unwrap();
            let first = std::fs::read(&path).unwrap();
            write(&path, &tensors).unwrap();
            assert_eq!(
                std::fs::read(&path).unwrap(),
                first,
                "{ext}: not deterministic"
            );
            let back = read(&path).unwrap();
            let names: Vec<&str> = back.iter().map(|(n, _)| n.as_str()).collect();
            let want: Vec<&str> = tensors.iter().map(|(n, _)| *n).collect();
            if ext == "npz" {
                assert_eq!(names, want, "npz keeps the given order");
            }
            for (name, t) in &tensors {
                let got = &back.iter().find(|(n, _)| n == name).unwrap().1;
                assert_eq!(got, t, "{ext}: {name}");
            }
        }
        // Strides ride in safetensors' metadata.
        let path = dir.path().join("s.safetensors");
        write(&path, &[("x", strided.clone())]).unwrap();
        assert_eq!(read(&path).unwrap()[0].1, strided);
    }

    #[test]
    fn bad_files_and_tensors_are_errors_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        // bf16 in npz is ml_dtypes' two-byte void, read back as bf16.
        let bf16 = HostTensor::new(Dtype::BFloat16, vec![2], vec![0x80, 0x3f, 0xc0, 0x7f]).unwrap();
        write(&dir.path().join("w.npz"), &[("w", bf16.clone())]).unwrap();
        assert_eq!(
            read(&dir.path().join("w.npz")).unwrap(),
            [("w".to_string(), bf16)]
        );
        let npz = std::fs::read(dir.path().join("w.npz")).unwrap();
        assert!(npz.windows(14).any(|w| w == b"'descr': '|V2'"));
        let c64 = HostTensor::new(Dtype::Complex64, vec![1], vec![0; 8]).unwrap();
        let err = write(&dir.path().join("x.safetensors"), &[("z", c64)]).unwrap_err();
        assert!(err.to_string().contains("cannot hold"), "{err}");
        let t = f32s(&[1.0], vec![1]);
        let err = write(&dir.path().join("x.npz"), &[("a", t.clone()), ("a", t)]).unwrap_err();
        assert!(
            err.to_string().contains("duplicate tensor name `a`"),
            "{err}"
        );
        let err = read(&dir.path().join("x.txt")).unwrap_err();
        assert!(
            err.to_string().contains("unknown extension `.txt`"),
            "{err}"
        );
        let junk = dir.path().join("junk.safetensors");
        std::fs::write(&junk, b"\x10\0\0\0\0\0\0\0{}").unwrap();
        assert!(read(&junk).is_err());
        assert!(HostTensor::new(Dtype::Float32, vec![2], vec![0; 4]).is_err());
    }

    #[test]
    fn fortran_order_arrays_are_read_in_c_order() {
        // numpy.asfortranarray([[1, 2, 3], [4, 5, 6]], dtype=int8).
        let mut npy = NPY_MAGIC.to_vec();
        let header = "{'descr': '|i1', 'fortran_order': True, 'shape': (2, 3), }\n";
        npy.extend_from_slice(&[1, 0]);
        npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
        npy.extend_from_slice(header.as_bytes());
        npy.extend_from_slice(&[1, 4, 2, 5, 3, 6]);
        let t = parse_npy(&npy).unwrap();
        assert_eq!(
            (t.shape.clone(), t.data),
            (vec![2, 3], vec![1, 2, 3, 4, 5, 6])
        );
    }
}

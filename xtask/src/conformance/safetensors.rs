//! Just enough of the safetensors format to merge and rename tensors between files
//! (no libtorch here: tensors stay raw bytes).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Map, Value};

/// One tensor of a safetensors file: dtype name, shape and raw little-endian bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct RawTensor {
    /// The safetensors dtype name (`F32`, `I64`, ...).
    pub dtype: String,
    /// The shape.
    pub shape: Vec<u64>,
    /// The data, row-major.
    pub data: Vec<u8>,
}

/// Reads every tensor of a safetensors file, by name.
pub fn read(path: &Path) -> Result<BTreeMap<String, RawTensor>> {
    let bytes = fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse(&bytes).with_context(|| format!("{} is not a valid safetensors file", path.display()))
}

/// Parses safetensors bytes.
fn parse(bytes: &[u8]) -> Result<BTreeMap<String, RawTensor>> {
    ensure!(bytes.len() >= 8, "shorter than its 8-byte header length");
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[..8]);
    let n = usize::try_from(u64::from_le_bytes(len)).context("header length overflows")?;
    let end = 8usize.checked_add(n).context("header length overflows")?;
    ensure!(
        end <= bytes.len(),
        "header length {n} runs past the end of the file"
    );
    let header: Map<String, Value> =
        serde_json::from_slice(&bytes[8..end]).context("header is not a JSON object")?;
    let data = &bytes[end..];
    let mut out = BTreeMap::new();
    for (name, entry) in header {
        if name == "__metadata__" {
            continue;
        }
        let dtype = entry["dtype"]
            .as_str()
            .with_context(|| format!("tensor `{name}` has no dtype"))?
            .to_string();
        let shape = entry["shape"]
            .as_array()
            .with_context(|| format!("tensor `{name}` has no shape"))?
            .iter()
            .map(|d| {
                d.as_u64()
                    .with_context(|| format!("tensor `{name}`: bad shape"))
            })
            .collect::<Result<Vec<u64>>>()?;
        let offsets = entry["data_offsets"]
            .as_array()
            .with_context(|| format!("tensor `{name}` has no data_offsets"))?;
        let (Some(a), Some(b)) = (
            offsets.first().and_then(Value::as_u64),
            offsets.get(1).and_then(Value::as_u64),
        ) else {
            bail!("tensor `{name}`: bad data_offsets");
        };
        let (a, b) = (usize::try_from(a)?, usize::try_from(b)?);
        ensure!(
            a <= b && b <= data.len(),
            "tensor `{name}`: data_offsets {a}..{b} outside the {} data bytes",
            data.len()
        );
        out.insert(
            name,
            RawTensor {
                dtype,
                shape,
                data: data[a..b].to_vec(),
            },
        );
    }
    Ok(out)
}

/// Writes tensors as a safetensors file (entries in name order, header padded to 8 bytes).
pub fn write(path: &Path, tensors: &BTreeMap<String, RawTensor>) -> Result<()> {
    let mut header = Map::new();
    let mut offset = 0usize;
    for (name, t) in tensors {
        header.insert(
            name.clone(),
            json!({"dtype": t.dtype, "shape": t.shape, "data_offsets": [offset, offset + t.data.len()]}),
        );
        offset += t.data.len();
    }
    let mut text = serde_json::to_vec(&Value::Object(header))?;
    while text.len() % 8 != 0 {
        text.push(b' ');
    }
    let mut bytes = Vec::with_capacity(8 + text.len() + offset);
    bytes.extend_from_slice(&(text.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&text);
    for t in tensors.values() {
        bytes.extend_from_slice(&t.data);
    }
    fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = std::env::temp_dir().join(format!("xtask-st-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.safetensors");
        let mut m = BTreeMap::new();
        m.insert(
            "b".to_string(),
            RawTensor {
                dtype: "F32".into(),
                shape: vec![2],
                data: 1.5f32
                    .to_le_bytes()
                    .into_iter()
                    .chain(2.5f32.to_le_bytes())
                    .collect(),
            },
        );
        m.insert(
            "a".to_string(),
            RawTensor {
                dtype: "I64".into(),
                shape: vec![],
                data: 7i64.to_le_bytes().to_vec(),
            },
        );
        write(&path, &m).unwrap();
        assert_eq!(read(&path).unwrap(), m);
        fs::write(&path, b"\x10\0\0\0\0\0\0\0{}").unwrap();
        assert!(read(&path).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}

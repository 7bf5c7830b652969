//! Tensor files as libtorch tensors, input ordering and deterministic random inputs.
//!
//! The files themselves (`.npz`, `.safetensors`: their formats, atomic durable writes,
//! file order, strides in metadata) are `graphbug-files`'s, on host tensors; this module
//! copies libtorch's tensors to and from them.

use std::collections::HashSet;
use std::path::Path;

use graphbug_files::{name_list, HostTensor, TensorFileError};
use graphbug_ir::{Dtype, TensorMeta};
use tch::Tensor;

use crate::dtype::{bits_dtype, bits_kind, describe, tensor_dtype, view_bits};
use crate::error::AtenError;

pub use graphbug_files::STRIDES_METADATA;

fn file_error(path: &Path, message: impl Into<String>) -> AtenError {
    AtenError::TensorFile {
        path: path.display().to_string(),
        message: message.into(),
    }
}

impl From<TensorFileError> for AtenError {
    fn from(e: TensorFileError) -> Self {
        AtenError::TensorFile {
            path: e.path,
            message: e.message,
        }
    }
}

/// Reads every tensor of a `.npz` or `.safetensors` file, in the file's order, on CPU
/// (laid out with the strides the file records).
pub fn read_tensors(path: &Path) -> crate::Result<Vec<(String, Tensor)>> {
    graphbug_files::read(path)?
        .into_iter()
        .map(|(name, host)| {
            let t =
                tensor_of(&host).map_err(|e| file_error(path, format!("tensor `{name}`: {e}")))?;
            Ok((name, t))
        })
        .collect()
}

/// Writes tensors to a `.npz` or `.safetensors` file, atomically, durably and
/// deterministically (see [`graphbug_files::write`]). Tensors are copied to the host
/// first (contiguous; a non-contiguous one's strides are recorded). `.npz` cannot hold
/// bf16 (numpy has no such type); `.safetensors` cannot hold complex.
pub fn write_tensors(path: &Path, tensors: &[(String, Tensor)]) -> crate::Result<()> {
    let mut hosts = Vec::with_capacity(tensors.len());
    for (name, tensor) in tensors {
        hosts.push((
            name.as_str(),
            host_of(name, tensor).map_err(|e| file_error(path, e))?,
        ));
    }
    Ok(graphbug_files::write(path, &hosts)?)
}

/// Tensor `name` copied to the host: dtype, shape, contiguous bytes, and its strides when
/// they are not the contiguous ones.
pub fn host_of(name: &str, tensor: &Tensor) -> Result<HostTensor, String> {
    if !tensor.defined() {
        return Err(format!("tensor `{name}` is undefined"));
    }
    let dtype = tensor_dtype(tensor).ok_or_else(|| {
        format!(
            "tensor `{name}` ({}) has an unsupported dtype",
            describe(tensor)
        )
    })?;
    // Autograd's efficient zeros (sgn's gradient, among others) have no storage to copy:
    // they are read as the zeros they stand for.
    let zeros;
    let tensor = if tensor.f_internal_is_zerotensor().unwrap_or(false) {
        zeros =
            Tensor::f_zeros(tensor.size(), (bits_kind(dtype), tensor.device())).map_err(|e| {
                format!(
                    "cannot make the zeros of tensor `{name}` ({}): {e}",
                    describe(tensor)
                )
            })?;
        &zeros
    } else {
        tensor
    };
    let strides = (!tensor.is_contiguous() && tensor.numel() > 1).then(|| tensor.stride());
    // uint16/32/64 are read through the signed kind of their width (tch lacks them).
    let host = view_bits(tensor, bits_dtype(dtype))
        .map_err(tch::TchError::Torch)
        .and_then(|t| t.f_to_device(tch::Device::Cpu))
        .and_then(|t| t.f_contiguous())
        .map_err(|e| {
            format!(
                "cannot copy tensor `{name}` ({}) to the CPU: {e}",
                describe(tensor)
            )
        })?;
    let shape = host
        .size()
        .iter()
        .map(|&d| usize::try_from(d).unwrap_or(0))
        .collect();
    let numel = host.numel();
    let mut data = vec![0u8; numel * dtype.itemsize()];
    host.f_copy_data_u8(&mut data, numel)
        .map_err(|e| format!("cannot read the data of tensor `{name}`: {e}"))?;
    let mut out = HostTensor::new(dtype, shape, data)?;
    out.strides = strides;
    Ok(out)
}

/// A CPU tensor holding a host tensor's values, laid out with its strides if it has any.
pub fn tensor_of(host: &HostTensor) -> Result<Tensor, String> {
    let shape: Vec<i64> = host
        .shape
        .iter()
        .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
        .collect();
    let t = Tensor::f_from_data_size(&host.data, &shape, bits_kind(host.dtype))
        .map_err(|e| e.to_string())
        .and_then(|t| view_bits(&t, host.dtype))?;
    match &host.strides {
        Some(s) => with_strides(&t, s),
        None => Ok(t),
    }
}

/// `t` (contiguous) laid out with `strides`: the same values in a fresh buffer with that
/// layout; stride-0 (broadcast) dimensions are expanded from their first element.
fn with_strides(t: &Tensor, strides: &[i64]) -> Result<Tensor, String> {
    let shape = t.size();
    if strides.len() != shape.len() || strides.iter().any(|&s| s < 0) {
        return Err(format!("strides {strides:?} do not fit shape {shape:?}"));
    }
    // Broadcast dimensions keep one element; the rest get the strides' buffer.
    let base = shape
        .iter()
        .zip(strides)
        .enumerate()
        .filter(|(_, (&n, &s))| s == 0 && n > 1)
        .fold(t.shallow_clone(), |acc, (d, _)| acc.narrow(d as i64, 0, 1));
    let base_shape = base.size();
    let extent: i64 = 1 + base_shape
        .iter()
        .zip(strides)
        .map(|(&n, &s)| (n - 1).max(0) * s)
        .sum::<i64>();
    // A zero buffer of t's dtype (zeros_like: uint16/32/64 have no tch kind).
    let buffer = t
        .f_reshape([-1])
        .and_then(|flat| flat.f_narrow(0, 0, 1))
        .and_then(|one| one.f_zeros_like())
        .and_then(|zero| zero.f_expand([extent], false))
        .and_then(|zeros| zeros.f_contiguous())
        .map_err(|e| e.to_string())?;
    let laid = buffer
        .f_as_strided(&base_shape, strides, 0)
        .map_err(|e| e.to_string())?;
    let mut dst = laid.shallow_clone();
    dst.f_copy_(&base).map_err(|e| e.to_string())?;
    laid.f_expand(&shape, false).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------- ordering

/// Splits `arg12` into (`arg`, 12): an alphabetic (or `_`) prefix and a canonical index.
fn indexed_key(key: &str) -> Option<(&str, usize)> {
    let split = key.find(|c: char| c.is_ascii_digit())?;
    let (prefix, digits) = key.split_at(split);
    let prefix_ok =
        !prefix.is_empty() && prefix.chars().all(|c| c.is_ascii_alphabetic() || c == '_');
    let digits_ok =
        digits.chars().all(|c| c.is_ascii_digit()) && (digits == "0" || !digits.starts_with('0'));
    if !(prefix_ok && digits_ok) {
        return None;
    }
    Some((prefix, digits.parse().ok()?))
}

/// The key prefix of positional tensor files: PyTorch's reference files and graphbug's
/// saved outputs use `arg0..argN` for inputs and `out0..outN` for outputs.
fn positional_prefix(what: &str) -> Option<&'static str> {
    match what {
        "inputs" => Some("arg"),
        "outputs" => Some("out"),
        _ => None,
    }
}

/// Puts named tensors in the order of `expected_names` (e.g. a graph's placeholders).
///
/// The file's keys must either be exactly the expected names (in any order), or the
/// positional names `arg0..argN` (for `what` = "inputs") or `out0..outN` ("outputs"),
/// ordered numerically. Any other keys (`foo0..foo8`) are refused, never taken by
/// position: the error, a [`AtenError::BadInputs`], lists what is expected.
pub fn order_tensors(
    named: Vec<(String, Tensor)>,
    expected_names: &[String],
    what: &str,
) -> crate::Result<Vec<Tensor>> {
    let (keys, tensors): (Vec<String>, Vec<Tensor>) = named.into_iter().unzip();
    let found = || {
        format!(
            "graph has {} {what} ({}), file has {} tensors ({})",
            expected_names.len(),
            name_list(expected_names),
            keys.len(),
            name_list(&keys)
        )
    };
    if keys.len() != expected_names.len() {
        return Err(AtenError::BadInputs(found()));
    }
    let n = keys.len();

    // (a) exactly the expected names.
    let position: std::collections::HashMap<&str, usize> = expected_names
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i))
        .collect();
    let unique_keys: HashSet<&str> = keys.iter().map(String::as_str).collect();
    if position.len() == n
        && unique_keys.len() == n
        && keys.iter().all(|k| position.contains_key(k.as_str()))
    {
        let mut slots: Vec<Option<Tensor>> = (0..n).map(|_| None).collect();
        for (k, t) in keys.iter().zip(tensors) {
            slots[position[k.as_str()]] = Some(t);
        }
        return Ok(slots
            .into_iter()
            .map(|s| s.expect("invariant: the keys are a permutation of the expected names"))
            .collect());
    }

    // (b) `arg<index>` / `out<index>` for indices 0..n.
    let indexed: Option<Vec<(&str, usize)>> = keys.iter().map(|k| indexed_key(k)).collect();
    let prefix = positional_prefix(what);
    if let (Some(indexed), Some(prefix)) = (indexed, prefix) {
        let mut seen = vec![false; n];
        let ok = indexed.iter().all(|(p, i)| {
            let fresh = *p == prefix && *i < n && !seen[*i];
            if fresh {
                seen[*i] = true;
            }
            fresh
        });
        if ok {
            let mut slots: Vec<Option<Tensor>> = (0..n).map(|_| None).collect();
            for (t, (_, i)) in tensors.into_iter().zip(indexed) {
                slots[i] = Some(t);
            }
            return Ok(slots
                .into_iter()
                .map(|s| s.expect("invariant: the indices are a permutation of 0..n"))
                .collect());
        }
    }

    let missing: Vec<&str> = expected_names
        .iter()
        .map(String::as_str)
        .filter(|e| !unique_keys.contains(e))
        .collect();
    let positional = match prefix {
        Some(p) => format!(" or positional keys {p}0..{p}{}", n.saturating_sub(1)),
        None => String::new(),
    };
    Err(AtenError::BadInputs(format!(
        "{}: expected the keys to be the graph's {what} by name (missing {}){positional}",
        found(),
        name_list(&missing),
    )))
}

// ---------------------------------------------------------------- random inputs

/// Deterministic random tensors for `metas`, independent of libtorch's global RNG.
///
/// One ChaCha8 stream seeded with `seed` fills the tensors in order. Floating-point
/// values are standard normal (complex: real and imaginary parts both normal; f16/bf16
/// are rounded from f32). Integer tensors are uniform in the "safe range" `[0, 2)`,
/// i.e. 0 or 1, so that index-like inputs (gather/embedding indices, sizes) stay in
/// bounds for any tensor with at least two rows; bools are fair coin flips. The same
/// seed gives bit-identical tensors on every run and machine.
pub fn random_tensors(
    metas: &[TensorMeta],
    seed: u64,
    device: tch::Device,
) -> crate::Result<Vec<Tensor>> {
    // What generating them takes (the samples, then the tensor they are copied into),
    // checked against the machine before anything is allocated.
    let available = crate::memory::Available::now();
    let mut total: Option<u64> = Some(0);
    for (i, meta) in metas.iter().enumerate() {
        if meta.shape.iter().any(|d| *d < 0) {
            continue; // refused by name below
        }
        let (sample, per) = match meta.dtype {
            Dtype::Bool => (1u64, 1u64),
            Dtype::Float32 | Dtype::Float16 | Dtype::BFloat16 => (4, 1),
            Dtype::Complex64 => (4, 2),
            Dtype::Complex128 => (8, 2),
            _ => (8, 1),
        };
        let need = meta.checked_numel().and_then(|n| {
            (n as u64)
                .checked_mul(sample * per * 2)?
                .checked_add(meta.checked_nbytes()?)
        });
        available.ensure_fits(&format!("random input {i} ({meta})"), need)?;
        total = total.zip(need).and_then(|(t, n)| t.checked_add(n));
    }
    available.ensure_fits(&format!("{} random inputs", metas.len()), total)?;
    let hosts = graphbug_files::random_tensors(metas, seed).map_err(AtenError::BadInputs)?;
    let mut out = Vec::with_capacity(metas.len());
    for (i, (host, meta)) in hosts.iter().zip(metas).enumerate() {
        let built = tensor_of(host)
            .map_err(|e| AtenError::BadInputs(format!("random input {i} ({meta}): {e}")))?;
        let placed = built.f_to_device(device).map_err(|e| {
            AtenError::Device(format!(
                "cannot place random input {i} ({meta}) on {device:?}: {e}"
            ))
        })?;
        out.push(placed);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{meta_of, to_dtype};
    use std::fs;
    use tch::Kind;

    #[test]
    fn efficient_zero_tensors_read_as_zeros() {
        // What libtorch's autograd gives for sgn's gradient: zeros without storage.
        let z = Tensor::f_internal_efficientzerotensor([2, 3], (Kind::Double, tch::Device::Cpu))
            .unwrap();
        assert!(z.f_internal_is_zerotensor().unwrap());
        let host = host_of("grad0", &z).unwrap();
        assert_eq!(host.shape, [2, 3]);
        assert_eq!(host.data, vec![0u8; 48]);
        assert_eq!(host.strides, None);
    }

    const MLP_INPUTS: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../tests/fixtures/mlp/inputs.npz"
    );
    const MLP_OUTPUTS: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../tests/fixtures/mlp/outputs.npz"
    );
    const GPT4_INPUTS: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../tests/fixtures/gpt4/inputs.npz"
    );

    fn scratch() -> tempfile::TempDir {
        tempfile::tempdir().expect("a scratch directory can be created")
    }

    fn names(prefix: &str, n: usize, suffix: &str) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i}{suffix}")).collect()
    }

    fn bits_equal(a: &Tensor, b: &Tensor) -> bool {
        meta_of(a) == meta_of(b) && {
            let n = a.numel();
            let dtype = meta_of(a).expect("supported dtype").dtype;
            let size = dtype.itemsize();
            let (a, b) = (
                view_bits(a, bits_dtype(dtype)).unwrap(),
                view_bits(b, bits_dtype(dtype)).unwrap(),
            );
            let mut x = vec![0u8; n * size];
            let mut y = vec![0u8; n * size];
            a.copy_data_u8(&mut x, n);
            b.copy_data_u8(&mut y, n);
            x == y
        }
    }

    /// One small tensor of each dtype with distinctive values (includes 0-d and empty).
    fn sample_tensors() -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        for (i, d) in Dtype::ALL.into_iter().enumerate() {
            let base = Tensor::from_slice(&[1.5f64, -2.0, 3.25, 0.0, 7.0, -0.5]).reshape([2, 3]);
            let t = if d.is_complex() {
                let re = base.to_kind(Kind::Double);
                let im = (&base * 2.0).to_kind(Kind::Double);
                to_dtype(&Tensor::complex(&re, &im), d).unwrap()
            } else {
                to_dtype(&base, d).unwrap()
            };
            out.push((format!("t{i}_{}", d.short_name()), t));
        }
        out.push(("scalar".into(), Tensor::from(3.0f32)));
        out.push((
            "empty".into(),
            Tensor::zeros([0, 4], (Kind::Float, tch::Device::Cpu)),
        ));
        // Non-contiguous input is written as its logical (row-major) contents.
        out.push((
            "transposed".into(),
            Tensor::arange(6, (Kind::Float, tch::Device::Cpu))
                .reshape([2, 3])
                .tr(),
        ));
        out
    }

    #[test]
    fn safetensors_keep_the_layout_of_strided_tensors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("strided.safetensors");
        let base = Tensor::arange(24, (Kind::Float, tch::Device::Cpu)).reshape([2, 3, 4]);
        let tensors = vec![
            ("permuted".to_string(), base.permute([2, 0, 1])),
            (
                "broadcast".to_string(),
                base.narrow(0, 0, 1).expand([5, 3, 4], false),
            ),
            ("sliced".to_string(), base.narrow(2, 1, 2)),
            ("plain".to_string(), base.shallow_clone()),
        ];
        write_tensors(&path, &tensors).unwrap();
        let back = read_tensors(&path).unwrap();
        for (name, want) in &tensors {
            let (_, got) = back.iter().find(|(n, _)| n == name).unwrap();
            assert_eq!(got.stride(), want.stride(), "{name}");
            assert!(got.equal(want), "{name}");
        }
        // A stride list that does not fit the shape is named, not guessed at.
        let text = std::fs::read(&path).unwrap();
        let n = u64::from_le_bytes(text[..8].try_into().unwrap()) as usize;
        let header = String::from_utf8(text[8..8 + n].to_vec()).unwrap();
        let bad = header.replacen("[1,12,4]", "[1,12]  ", 1);
        assert_ne!(bad, header, "{header}");
        let mut broken = text[..8].to_vec();
        broken.extend(bad.as_bytes());
        broken.extend(&text[8 + n..]);
        std::fs::write(&path, broken).unwrap();
        let err = read_tensors(&path).unwrap_err().to_string();
        assert!(
            err.contains("tensor `permuted`: strides [1, 12] do not fit shape [4, 2, 3]"),
            "{err}"
        );
    }

    #[test]
    fn reads_mlp_inputs_in_file_order_and_orders_them() {
        let named = read_tensors(Path::new(MLP_INPUTS)).unwrap();
        let keys: Vec<&str> = named.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            names("arg", 9, "")
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
        );
        let shapes = [
            vec![64, 32],
            vec![64],
            vec![64],
            vec![64],
            vec![64, 64],
            vec![64],
            vec![10, 64],
            vec![10],
            vec![8, 32],
        ];
        let ordered = order_tensors(named, &names("arg", 9, "_1"), "inputs").unwrap();
        for (t, shape) in ordered.iter().zip(shapes) {
            assert_eq!(meta_of(t), Some(TensorMeta::new(Dtype::Float32, shape)));
        }
        let outs = read_tensors(Path::new(MLP_OUTPUTS)).unwrap();
        let outs = order_tensors(outs, &["addmm_2".to_string()], "outputs").unwrap();
        assert_eq!(describe(&outs[0]), "f32[8, 10]");
    }

    #[test]
    fn gpt4_inputs_order_numerically() {
        let named = read_tensors(Path::new(GPT4_INPUTS)).unwrap();
        assert_eq!(named.len(), 55);
        let by_name: Vec<(String, Tensor)> = named
            .iter()
            .map(|(k, t)| (k.clone(), t.shallow_clone()))
            .collect();
        // Shuffle into lexicographic order (arg0, arg1, arg10, ...) to prove numeric ordering.
        let mut shuffled = by_name;
        shuffled.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(shuffled[2].0, "arg10");
        let ordered = order_tensors(shuffled, &names("primals_", 55, ""), "inputs").unwrap();
        for (i, t) in ordered.iter().enumerate() {
            let original = &named
                .iter()
                .find(|(k, _)| *k == format!("arg{i}"))
                .expect("every index is present")
                .1;
            assert!(bits_equal(t, original), "arg{i}");
        }
    }

    #[test]
    fn order_by_exact_names_in_any_order() {
        let named = vec![
            ("y".to_string(), Tensor::from(2i64)),
            ("x".to_string(), Tensor::from(1i64)),
        ];
        let ordered = order_tensors(named, &["x".into(), "y".into()], "inputs").unwrap();
        assert_eq!(ordered[0].int64_value(&[]), 1);
        assert_eq!(ordered[1].int64_value(&[]), 2);
    }

    #[test]
    fn order_errors() {
        let eight: Vec<(String, Tensor)> = (0..8)
            .map(|i| (format!("arg{i}"), Tensor::from(i as i64)))
            .collect();
        let e = order_tensors(eight, &names("arg", 9, "_1"), "inputs")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("graph has 9 inputs (arg0_1, arg1_1, arg2_1, ..., arg8_1), file has 8 tensors (arg0, arg1, arg2, ..., arg7)"),
            "{e}"
        );
        // Same count, wrong names.
        let named = vec![
            ("a".to_string(), Tensor::from(0i64)),
            ("b".to_string(), Tensor::from(1i64)),
        ];
        let e = order_tensors(named, &["x".into(), "y".into()], "outputs").unwrap_err();
        assert!(matches!(e, AtenError::BadInputs(_)));
        let e = e.to_string();
        assert!(
            e.contains("graph has 2 outputs (x, y), file has 2 tensors (a, b)"),
            "{e}"
        );
        assert!(e.contains("missing x, y"), "{e}");
        // Mixed prefixes, gaps, duplicates, leading zeros and prefixes other than
        // `arg` (inputs) are refused: never taken by position.
        for keys in [
            ["arg0", "out1"],
            ["arg0", "arg2"],
            ["arg1", "arg1"],
            ["arg00", "arg1"],
            ["foo0", "foo1"],
            ["out0", "out1"],
        ] {
            let named = keys
                .iter()
                .map(|k| (k.to_string(), Tensor::from(0i64)))
                .collect();
            assert!(
                order_tensors(named, &["p".into(), "q".into()], "inputs").is_err(),
                "{keys:?}"
            );
        }
        let foo = (0..9)
            .map(|i| (format!("foo{i}"), Tensor::from(0i64)))
            .collect();
        let e = order_tensors(foo, &names("arg", 9, "_1"), "inputs")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expected the keys to be the graph's inputs by name (missing arg0_1, arg1_1, arg2_1, ..., arg8_1) or positional keys arg0..arg8"),
            "{e}"
        );
        let outs = (0..2)
            .map(|i| (format!("out{i}"), Tensor::from(i as i64)))
            .collect();
        let ordered = order_tensors(outs, &["a".into(), "b".into()], "outputs").unwrap();
        assert_eq!(ordered[1].int64_value(&[]), 1);
        assert!(order_tensors(Vec::new(), &[], "inputs").unwrap().is_empty());
    }

    fn round_trip(ext: &str, skip: &[Dtype]) {
        let dir = scratch();
        let path = dir.path().join(format!("all.{ext}"));
        let tensors: Vec<(String, Tensor)> = sample_tensors()
            .into_iter()
            .filter(|(_, t)| !skip.contains(&meta_of(t).expect("supported").dtype))
            .collect();
        write_tensors(&path, &tensors).unwrap();
        let back = read_tensors(&path).unwrap();
        let mut expected: Vec<&(String, Tensor)> = tensors.iter().collect();
        if ext == "npz" {
            // npz keeps the given order.
            let keys: Vec<&str> = back.iter().map(|(k, _)| k.as_str()).collect();
            let want: Vec<&str> = expected.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, want);
        } else {
            expected.sort_by(|a, b| a.0.cmp(&b.0));
        }
        for (name, t) in &expected {
            let (_, b) = back
                .iter()
                .find(|(k, _)| k == name)
                .expect("every written tensor is read back");
            assert!(
                bits_equal(&t.contiguous(), b),
                "{ext}: {name}: {}",
                describe(b)
            );
        }
        assert_eq!(back.len(), expected.len());
        // Write the read-back tensors again: identical bytes.
        let again = dir.path().join(format!("again.{ext}"));
        write_tensors(&again, &back).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(fs::read(&path).unwrap(), fs::read(&again).unwrap(), "{ext}");
    }

    #[test]
    fn npz_round_trip_every_dtype() {
        // bfloat16 goes as ml_dtypes' two-byte void, as JAX's np.savez writes it.
        round_trip("npz", &[]);
    }

    #[test]
    fn safetensors_round_trip_every_dtype() {
        // The safetensors format has no complex dtypes.
        round_trip("safetensors", &[Dtype::Complex64, Dtype::Complex128]);
    }

    #[test]
    fn unsupported_dtypes_are_refused_by_name() {
        let dir = scratch();
        let c = vec![(
            "z".to_string(),
            Tensor::from(1.0f32).to_kind(Kind::ComplexFloat),
        )];
        let e = write_tensors(&dir.path().join("a.safetensors"), &c)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`z` is c64"), "{e}");
        assert!(!dir.path().join("a.safetensors").exists());
        let dup = vec![
            ("x".to_string(), Tensor::from(1.0f32)),
            ("x".to_string(), Tensor::from(2.0f32)),
        ];
        let e = write_tensors(&dir.path().join("d.npz"), &dup)
            .unwrap_err()
            .to_string();
        assert!(e.contains("duplicate tensor name `x`"), "{e}");
    }

    #[test]
    fn repeated_writes_are_byte_identical() {
        let dir = scratch();
        for ext in ["npz", "safetensors"] {
            let tensors: Vec<(String, Tensor)> = sample_tensors()
                .into_iter()
                .filter(|(_, t)| {
                    let d = meta_of(t).expect("supported").dtype;
                    if ext == "npz" {
                        d != Dtype::BFloat16
                    } else {
                        !d.is_complex()
                    }
                })
                .collect();
            let a = dir.path().join(format!("a.{ext}"));
            let b = dir.path().join(format!("b.{ext}"));
            write_tensors(&a, &tensors).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(1100));
            write_tensors(&b, &tensors).unwrap();
            assert_eq!(fs::read(&a).unwrap(), fs::read(&b).unwrap(), "{ext}");
            // Overwriting in place works and gives the same bytes.
            write_tensors(&a, &tensors).unwrap();
            assert_eq!(fs::read(&a).unwrap(), fs::read(&b).unwrap(), "{ext}");
        }
    }

    #[test]
    fn writes_are_atomic_and_leave_no_temp_files() {
        let dir = scratch();
        let path = dir.path().join("x.safetensors");
        let tensors = vec![("x".to_string(), Tensor::from_slice(&[1.0f32, 2.0]))];
        write_tensors(&path, &tensors).unwrap();
        // A failing write (complex in safetensors) leaves the old file intact.
        let bad = vec![(
            "x".to_string(),
            Tensor::from(1.0f32).to_kind(Kind::ComplexFloat),
        )];
        assert!(write_tensors(&path, &bad).is_err());
        let entries: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(entries, vec!["x.safetensors".to_string()]);
        assert_eq!(read_tensors(&path).unwrap()[0].0, "x");

        let missing = dir.path().join("no/such/dir/y.npz");
        let e = write_tensors(&missing, &tensors).unwrap_err();
        assert!(matches!(e, AtenError::TensorFile { .. }));
        let e = e.to_string();
        assert!(
            e.contains("no/such/dir/y.npz") && e.contains("does not exist"),
            "{e}"
        );
    }

    #[test]
    fn read_errors_name_the_file_and_problem() {
        let dir = scratch();
        let missing = dir.path().join("missing.npz");
        let e = read_tensors(&missing).unwrap_err().to_string();
        assert!(
            e.contains("missing.npz") && e.contains("cannot read"),
            "{e}"
        );

        // Extensions are matched case-insensitively.
        let e = read_tensors(&dir.path().join("UPPER.NPZ"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("UPPER.NPZ") && e.contains("cannot read"), "{e}");

        let e = read_tensors(Path::new("inputs.pt"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("inputs.pt") && e.contains("unknown extension `.pt`"),
            "{e}"
        );
        let e = read_tensors(Path::new("inputs")).unwrap_err().to_string();
        assert!(e.contains("no file extension"), "{e}");
        let e = write_tensors(Path::new("out.txt"), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown extension `.txt`"), "{e}");

        let garbage = dir.path().join("garbage.npz");
        fs::write(&garbage, b"this is not a zip file at all").unwrap();
        let e = read_tensors(&garbage).unwrap_err().to_string();
        assert!(
            e.contains("garbage.npz") && e.contains("not a valid .npz"),
            "{e}"
        );

        let garbage = dir.path().join("garbage.safetensors");
        fs::write(&garbage, b"\x05\0\0\0\0\0\0\0{\"a\":").unwrap();
        let e = read_tensors(&garbage).unwrap_err().to_string();
        assert!(
            e.contains("garbage.safetensors") && e.contains("not a valid"),
            "{e}"
        );
    }

    #[test]
    fn corrupt_npz_entries_are_errors_not_panics() {
        let dir = scratch();
        let path = dir.path().join("c.npz");
        let tensors = vec![("w".to_string(), Tensor::from_slice(&[1.0f32, 2.0, 3.0]))];
        write_tensors(&path, &tensors).unwrap();
        let good = fs::read(&path).unwrap();
        // Damage every byte in turn (one at a time): never a panic, and every error names the file.
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x5a;
            fs::write(&path, &bad).unwrap();
            if let Err(e) = read_tensors(&path) {
                assert!(e.to_string().contains("c.npz"), "{e}");
            }
        }
    }

    #[test]
    fn random_tensors_are_deterministic_and_well_formed() {
        let mut metas: Vec<TensorMeta> = Dtype::ALL
            .into_iter()
            .map(|d| TensorMeta::new(d, vec![3, 5]))
            .collect();
        metas.push(TensorMeta::new(Dtype::Float32, vec![]));
        metas.push(TensorMeta::new(Dtype::Int64, vec![0, 7]));
        let a = random_tensors(&metas, 7, tch::Device::Cpu).unwrap();
        let b = random_tensors(&metas, 7, tch::Device::Cpu).unwrap();
        let c = random_tensors(&metas, 8, tch::Device::Cpu).unwrap();
        assert_eq!(a.len(), metas.len());
        for ((x, y), meta) in a.iter().zip(&b).zip(&metas) {
            assert_eq!(meta_of(x).as_ref(), Some(meta));
            assert!(bits_equal(x, y), "{meta}");
        }
        assert!(!bits_equal(&a[0], &c[0]), "different seeds differ");
        // Integers in [0, 2); floats look normal-ish; bools take both values.
        let i = &a[4];
        assert!(i.min().int64_value(&[]) >= 0 && i.max().int64_value(&[]) <= 1);
        let f = Tensor::cat(
            &[
                a[0].flatten(0, -1),
                a[1].to_kind(Kind::Float).flatten(0, -1),
            ],
            0,
        );
        assert!(f.abs().max().double_value(&[]) < 6.0);
        assert!(f.std(true).double_value(&[]) > 0.3);
        let bools = a[9].to_kind(Kind::Int64).sum(Kind::Int64).int64_value(&[]);
        assert!(bools > 0 && bools < 15, "{bools}");
        assert_eq!(a[metas.len() - 1].numel(), 0);
        // Independent of libtorch's global RNG.
        tch::manual_seed(123);
        let _ = Tensor::randn([10], (Kind::Float, tch::Device::Cpu));
        let d = random_tensors(&metas, 7, tch::Device::Cpu).unwrap();
        assert!(a.iter().zip(&d).all(|(x, y)| bits_equal(x, y)));

        let e = random_tensors(
            &[TensorMeta::new(Dtype::Float32, vec![2, -1])],
            0,
            tch::Device::Cpu,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("random input 0 (f32[2, -1]): negative size -1"),
            "{e}"
        );
    }

    #[test]
    fn random_tensors_on_cuda_when_present() {
        if !tch::Cuda::is_available() {
            graphbug_run::not_run_here("random_tensors_on_cuda_when_present", "no CUDA device");
            return;
        }
        let metas = [TensorMeta::new(Dtype::Float16, vec![4, 4])];
        let gpu = random_tensors(&metas, 1, tch::Device::Cuda(0)).unwrap();
        let cpu = random_tensors(&metas, 1, tch::Device::Cpu).unwrap();
        assert!(bits_equal(&gpu[0].to_device(tch::Device::Cpu), &cpu[0]));
    }
}

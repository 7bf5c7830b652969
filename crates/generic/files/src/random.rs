//! Seeded random inputs, the same bits on every run and machine, for any dialect: floating
//! values standard normal (complex: both parts normal; f16/bf16 rounded from f32),
//! integers 0 or 1 (index-like inputs stay in bounds for any tensor of two rows or more),
//! bools fair coin flips.

use graphbug_ir::{Dtype, TensorMeta};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Bernoulli, Distribution, StandardNormal, Uniform};

use crate::HostTensor;

/// Random tensors of `metas` from `seed` (see the module docs); an error names a meta with
/// a negative size or too many elements. The caller checks they fit in memory first.
pub fn random_tensors(metas: &[TensorMeta], seed: u64) -> Result<Vec<HostTensor>, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let ints = Uniform::new(0i64, 2);
    let coin = Bernoulli::new(0.5).expect("invariant: 0.5 is a valid probability");
    let mut out = Vec::with_capacity(metas.len());
    for (i, meta) in metas.iter().enumerate() {
        let bad = |message: String| format!("random input {i} ({meta}): {message}");
        if let Some(d) = meta.shape.iter().find(|d| **d < 0) {
            return Err(bad(format!("negative size {d}")));
        }
        let numel = meta
            .shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize))
            .filter(|n| n.checked_mul(meta.dtype.itemsize()).is_some())
            .ok_or_else(|| bad("too many elements".into()))?;
        let mut normal32 = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    let v: f64 = StandardNormal.sample(&mut rng);
                    v as f32
                })
                .collect()
        };
        let data: Vec<u8> = match meta.dtype {
            Dtype::Float32 => normal32(numel)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            Dtype::Complex64 => normal32(2 * numel)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            Dtype::Float16 => normal32(numel)
                .iter()
                .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
                .collect(),
            Dtype::BFloat16 => normal32(numel)
                .iter()
                .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
                .collect(),
            Dtype::Float64 | Dtype::Complex128 => {
                let n = if meta.dtype == Dtype::Complex128 {
                    2 * numel
                } else {
                    numel
                };
                (0..n)
                    .flat_map(|_| {
                        let v: f64 = StandardNormal.sample(&mut rng);
                        v.to_le_bytes()
                    })
                    .collect()
            }
            Dtype::Bool => (0..numel)
                .map(|_| u8::from(coin.sample(&mut rng)))
                .collect(),
            d => {
                // Integers: 0 or 1 in the dtype's width, little-endian.
                let width = d.itemsize();
                (0..numel)
                    .flat_map(|_| {
                        let v = ints.sample(&mut rng);
                        let mut bytes = vec![0u8; width];
                        bytes[0] = v as u8;
                        bytes
                    })
                    .collect()
            }
        };
        out.push(
            HostTensor::new(
                meta.dtype,
                meta.shape.iter().map(|&d| d as usize).collect(),
                data,
            )
            .map_err(bad)?,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_bits() {
        let metas: Vec<TensorMeta> = Dtype::ALL
            .iter()
            .map(|&d| TensorMeta::new(d, vec![2, 3]))
            .collect();
        let a = random_tensors(&metas, 7).unwrap();
        assert_eq!(a, random_tensors(&metas, 7).unwrap());
        assert_ne!(a, random_tensors(&metas, 8).unwrap());
        for (t, m) in a.iter().zip(&metas) {
            assert_eq!(t.data.len(), 6 * m.dtype.itemsize(), "{m}");
        }
        let ints = &a[Dtype::ALL.iter().position(|&d| d == Dtype::Int64).unwrap()];
        assert!(ints
            .data
            .chunks(8)
            .all(|c| c[0] <= 1 && c[1..].iter().all(|b| *b == 0)));
        assert!(
            random_tensors(&[TensorMeta::new(Dtype::Float32, vec![-1])], 0)
                .unwrap_err()
                .contains("negative size -1")
        );
    }
}

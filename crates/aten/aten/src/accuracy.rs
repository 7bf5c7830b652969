//! Accuracy checks on libtorch tensors: TorchDynamo's `torch._dynamo.utils.same()`, made
//! so that it cannot say "fine" about values that differ.
//!
//! The rules live in `graphbug-accuracy`, on host tensors, so that aten graphs and XLA
//! programs are judged by one checker (see that crate for the rules themselves). This
//! module copies tch tensors to the host (whatever devices they live on, conjugate and
//! negative views resolved) and asks it; its types are that crate's.

use graphbug_accuracy::HostTensor;
use tch::Tensor;

pub use graphbug_accuracy::{
    mode_for, AccuracyMode, AccuracyReport, Element, OutputVerdict, SameOptions, LOOSE_TOL,
    ONLY_NON_FLOATING,
};

use crate::dtype::describe;
use crate::io::host_of;

/// TorchDynamo's detection of wrong results: every output counts (strict, as PyTorch's
/// `repro_ignore_non_fp` default). The report of a failure, if any, ends with
/// [`ONLY_NON_FLOATING`] when the default `accuracy` mode would not see it.
pub fn detect(
    reference: &[Tensor],
    result: &[Tensor],
    fp64_ref: Option<&[Tensor]>,
) -> Option<String> {
    let host = OnHost::of(reference, result, fp64_ref);
    graphbug_accuracy::detect_by(|opts| host.same(result, opts))
}

/// Compares `result` with `reference` output by output (see `graphbug_accuracy::same`).
///
/// `fp64_ref`, when given, holds the same graph's outputs computed in float64; entry `i`
/// judges output `i` (a missing entry falls back to the reference itself, as PyTorch does
/// when no float64 reference exists). Undefined tensors are compared as such. Never
/// fails: a tensor that cannot be copied to the host (a dtype graphbug does not model,
/// a device error) fails its output with a verdict that says so.
pub fn same(
    reference: &[Tensor],
    result: &[Tensor],
    fp64_ref: Option<&[Tensor]>,
    opts: &SameOptions,
) -> AccuracyReport {
    OnHost::of(reference, result, fp64_ref).same(result, opts)
}

/// Outputs copied to the host once, with the outputs that could not be copied.
struct OnHost {
    reference: Vec<Option<HostTensor>>,
    result: Vec<Option<HostTensor>>,
    fp64: Option<Vec<Option<HostTensor>>>,
    /// Output position and why one of its tensors could not be copied.
    errors: Vec<(usize, String)>,
}

impl OnHost {
    fn of(reference: &[Tensor], result: &[Tensor], fp64_ref: Option<&[Tensor]>) -> OnHost {
        let mut errors = Vec::new();
        let mut copy = |tensors: &[Tensor], what: &str| -> Vec<Option<HostTensor>> {
            tensors
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    if !t.defined() {
                        return None;
                    }
                    match to_host(t, what) {
                        Ok(h) => Some(h),
                        Err(e) => {
                            errors.push((i, e));
                            None
                        }
                    }
                })
                .collect()
        };
        let reference = copy(reference, "reference");
        let result = copy(result, "result");
        let fp64 = fp64_ref.map(|f| copy(f, "float64 reference"));
        errors.sort_by_key(|&(i, _)| i);
        OnHost {
            reference,
            result,
            fp64,
            errors,
        }
    }

    fn same(&self, result: &[Tensor], opts: &SameOptions) -> AccuracyReport {
        let mut report =
            graphbug_accuracy::same(&self.reference, &self.result, self.fp64.as_deref(), opts);
        let mut said = None;
        for &(i, ref e) in &self.errors {
            // The first error of an output both sides have (a missing or extra output is a
            // count mismatch whatever its tensors).
            if said == Some(i) || i >= self.reference.len() {
                continue;
            }
            if let (Some(s), Some(v)) = (result.get(i), report.outputs.get_mut(i)) {
                *v = OutputVerdict::new(i, false, format!("cannot compare: {e}"), describe(s));
                said = Some(i);
            }
        }
        report
    }
}

/// A defined tensor's values on the host, its conjugate and negative bits resolved (the
/// host copy reads the memory as it is).
/// `t` copied to the host (from any device, conjugate and negative views resolved);
/// errors name it as `what`.
pub fn to_host(t: &Tensor, what: &str) -> Result<HostTensor, String> {
    let resolved = t
        .f_resolve_conj()
        .and_then(|t| t.f_resolve_neg())
        .map_err(|e| format!("cannot resolve the {what} {}: {e}", describe(t)))?;
    host_of(what, &resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphbug_ir::Dtype;
    use tch::Kind;

    fn f32s(v: &[f32]) -> Tensor {
        Tensor::from_slice(v)
    }

    fn one(
        reference: Tensor,
        result: Tensor,
        fp64: Option<Tensor>,
        opts: &SameOptions,
    ) -> OutputVerdict {
        let fp64: Option<Vec<Tensor>> = fp64.map(|t| vec![t]);
        let report = same(&[reference], &[result], fp64.as_deref(), opts);
        assert_eq!(report.outputs.len(), 1);
        report.outputs[0].clone()
    }

    #[test]
    fn tensors_are_judged_by_the_host_rules() {
        let opts = SameOptions::default();
        let v = one(f32s(&[1.0, 2.0]), f32s(&[1.0, 2.0]), None, &opts);
        assert!(v.passed, "{v:?}");
        assert_eq!(v.reason, "allclose within tol=0.0001");
        assert_eq!(v.meta, "f32[2]");
        let v = one(
            Tensor::full([2000], 0.01, (Kind::Float, tch::Device::Cpu)),
            Tensor::full([2000], 0.025, (Kind::Float, tch::Device::Cpu)),
            Some(Tensor::zeros([2000], (Kind::Double, tch::Device::Cpu))),
            &opts,
        );
        assert_eq!(
            v.reason,
            "RMSE (res-fp64) 2.500000e-2 > 2.0 x RMSE (ref-fp64) 1.000000e-2 + tol/10 1.000000e-5"
        );
    }

    #[test]
    fn unsigned_dtypes_tch_cannot_name_compare_exactly() {
        use crate::dtype::view_bits;
        let u64s = |v: &[i64]| view_bits(&Tensor::from_slice(v), Dtype::UInt64).unwrap();
        let opts = SameOptions::default();
        let same = one(u64s(&[-1, 5]), u64s(&[-1, 5]), None, &opts);
        assert!(same.passed, "{same:?}");
        assert_eq!(same.meta, "u64[2]");
        // 2^64-1 against 2^64-2: one bit apart, still a failure.
        let wrong = one(u64s(&[-1, 5]), u64s(&[-2, 5]), None, &opts);
        assert!(!wrong.passed, "{wrong:?}");
        let dtype = one(u64s(&[1]), Tensor::from_slice(&[1i64]), None, &opts);
        assert!(!dtype.passed, "{dtype:?}");
        assert_eq!(dtype.reason, "dtype mismatch: reference u64 vs result i64");
    }

    #[test]
    fn undefined_tensors_fail_cleanly() {
        let v = one(Tensor::new(), f32s(&[1.0]), None, &SameOptions::default());
        assert!(!v.passed, "{v:?}");
        assert_eq!(v.reason, "reference is undefined");
        let v = one(Tensor::new(), Tensor::new(), None, &SameOptions::default());
        assert!(v.passed && v.meta == "undefined", "{v:?}");
        // An undefined float64 entry is no float64 reference: a float64 reference judges.
        let r = Tensor::from_slice(&[1.0f64]);
        let v = one(
            r.copy(),
            &r + 0.5,
            Some(Tensor::new()),
            &SameOptions::default(),
        );
        assert_eq!(v.ref_error, Some(0.0), "{v:?}");
    }

    /// Views whose values are not their memory's compare by their values.
    #[test]
    fn conjugate_and_strided_views_compare_by_value() {
        let re = Tensor::from_slice(&[1.0f32, 2.0]);
        let z = Tensor::complex(&re, &re);
        let v = one(
            z.conj().resolve_conj(),
            z.conj(),
            None,
            &SameOptions::default(),
        );
        assert!(v.passed, "{v:?}");
        let v = one(z.copy(), z.conj(), None, &SameOptions::default());
        assert!(!v.passed, "{v:?}");
        let m = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).reshape([2, 2]);
        let v = one(
            m.transpose(0, 1).contiguous(),
            m.transpose(0, 1),
            None,
            &SameOptions::default(),
        );
        assert!(v.passed, "{v:?}");
    }

    /// Dtypes graphbug does not model cannot be copied to the host: the output fails and
    /// says why (libtorch's comparison read float8 values as truncated integers).
    #[test]
    fn unmodelled_dtypes_fail_and_say_why() {
        let f8 = |v: &[f32]| f32s(v).to_kind(Kind::Float8e5m2);
        let v = one(f8(&[0.5]), f8(&[0.25]), None, &SameOptions::default());
        assert!(!v.passed, "{v:?}");
        assert_eq!(
            v.reason,
            "cannot compare: tensor `reference` (Float8e5m2[1]) has an unsupported dtype"
        );
        assert_eq!(v.meta, "Float8e5m2[1]");
        // Other outputs are still judged.
        let r = same(
            &[f32s(&[1.0]), f8(&[0.5])],
            &[f32s(&[1.0]), f8(&[0.5])],
            None,
            &SameOptions::default(),
        );
        assert!(r.outputs[0].passed && !r.outputs[1].passed, "{r}");
        assert!(detect(&[f8(&[0.5])], &[f8(&[0.5])], None).is_some());
    }

    #[test]
    fn detect_reports_only_non_floating_failures() {
        let b = |v: &[bool]| Tensor::from_slice(v);
        let report = detect(
            &[b(&[true]), f32s(&[1.0])],
            &[b(&[false]), f32s(&[1.0])],
            None,
        )
        .expect("strict accuracy sees the bool");
        assert!(report.ends_with(ONLY_NON_FLOATING), "{report}");
        assert_eq!(detect(&[f32s(&[1.0])], &[f32s(&[1.0])], None), None);
    }

    #[test]
    fn cuda_results_are_compared_on_cpu() {
        if !tch::Cuda::is_available() {
            graphbug_run::not_run_here("cuda_results_are_compared_on_cpu", "no CUDA device");
            return;
        }
        let a = f32s(&[1.0, 2.0]);
        let v = one(
            a.shallow_clone(),
            a.to_device(tch::Device::Cuda(0)),
            None,
            &SameOptions::default(),
        );
        assert!(v.passed, "{v:?}");
    }
}

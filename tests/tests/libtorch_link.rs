//! Proves that tch links against the project's libtorch and runs without any environment.

use tch::{Kind, Tensor};

#[test]
fn cpu_tensor_sum_through_libtorch() {
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
    let sum = t.sum(Kind::Float).double_value(&[]);
    assert_eq!(sum, 6.0);
    // Must not panic, whether or not a GPU (or libtorch_cuda) is available.
    let _ = tch::Cuda::is_available();
}

//! Devices: run-time CUDA loading and availability checks.
//!
//! The linker's `--as-needed` drops `libtorch_cuda.so`, so CUDA kernels are registered only
//! once it is loaded. It is loaded on first use of a CUDA device (about 0.15 s), never for
//! CPU work.

use graphbug_ir::Device;
use once_cell::sync::Lazy;

use crate::error::{AtenError, Result};

/// `libtorch_cuda.so`, loaded globally so its kernels register; kept for the process.
static CUDA_LIBRARY: Lazy<std::result::Result<libloading::os::unix::Library, String>> =
    Lazy::new(|| {
        use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
        // SAFETY: loading libtorch_cuda runs its static initialisers, which register CUDA
        // kernels with the dispatcher; it has no other side effects on this process.
        unsafe { Library::open(Some("libtorch_cuda.so"), RTLD_NOW | RTLD_GLOBAL) }
            .map_err(|e| format!("cannot load libtorch_cuda.so: {e}"))
    });

/// True when a CUDA device can be used: libtorch_cuda loads and a GPU is present.
pub fn cuda_available() -> bool {
    CUDA_LIBRARY.is_ok() && tch::Cuda::is_available()
}

/// Number of usable CUDA devices (0 without a GPU).
pub fn cuda_device_count() -> usize {
    if cuda_available() {
        usize::try_from(tch::Cuda::device_count()).unwrap_or(0)
    } else {
        0
    }
}

/// Checks that graphs can run on `device`, loading CUDA support when it is a CUDA device.
pub fn ensure_device(device: &Device) -> Result<()> {
    match device.kind.as_str() {
        "cpu" | "meta" => Ok(()),
        "cuda" => {
            if let Err(e) = &*CUDA_LIBRARY {
                return Err(AtenError::Device(format!("{device} requested: {e}")));
            }
            let count = cuda_device_count();
            let index = device.index.unwrap_or(0) as usize;
            if count == 0 {
                Err(AtenError::Device(format!(
                    "{device} requested but no CUDA device is available"
                )))
            } else if index >= count {
                Err(AtenError::Device(format!(
                    "{device} requested but only {count} CUDA device(s) exist"
                )))
            } else {
                Ok(())
            }
        }
        other => Err(AtenError::Device(format!(
            "device type `{other}` is not supported (use cpu, cuda[:N] or meta)"
        ))),
    }
}

/// True when torch's device string `actual` (e.g. `cuda:0`) is `device` (`cuda` means index 0).
pub fn same_device(actual: &str, device: &Device) -> bool {
    match actual.parse::<Device>() {
        Ok(a) => a.kind == device.kind && a.index.unwrap_or(0) == device.index.unwrap_or(0),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_matching() {
        assert!(same_device("cpu", &Device::cpu()));
        assert!(same_device("cuda:0", &"cuda".parse().unwrap()));
        assert!(!same_device("cuda:1", &Device::cuda(0)));
        assert!(!same_device("meta", &Device::cpu()));
    }

    #[test]
    fn unsupported_and_missing_devices_are_errors() {
        assert!(ensure_device(&Device::cpu()).is_ok());
        let err = ensure_device(&Device::new("mps", None).unwrap()).unwrap_err();
        assert!(err.to_string().contains("not supported"), "{err}");
        if cuda_device_count() == 0 {
            eprintln!("no GPU: checking the CUDA error path only");
            let err = ensure_device(&Device::cuda(0)).unwrap_err().to_string();
            assert!(err.contains("cuda:0 requested"), "{err}");
        } else {
            ensure_device(&Device::cuda(0)).unwrap();
            assert!(ensure_device(&Device::cuda(999)).is_err());
        }
    }
}

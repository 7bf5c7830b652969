//! The machine's memory, asked before graphbug allocates what a graph's annotations ask
//! for: a graph declaring `f32[1000000000000]` gets an error naming the input and its
//! size, not an allocation failure that aborts the process.

/// Bytes this process can still allocate: the kernel's `MemAvailable`, capped by the
/// cgroup's limit (containers) when there is one. `None` where neither can be read.
pub fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map(|kb| kb * 1024)
        });
    let read = |p: &str| -> Option<u64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    let cgroup = match (
        read("/sys/fs/cgroup/memory.max"),
        read("/sys/fs/cgroup/memory.current"),
    ) {
        (Some(max), Some(current)) => Some(max.saturating_sub(current)),
        _ => None,
    };
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `3.6 TiB`, `512.0 MiB`, `96 B`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The memory available at one moment: many sizes are checked against one reading.
#[derive(Clone, Copy, Debug)]
pub struct Available(Option<u64>);

impl Available {
    /// What is available now (see [`available_bytes`]).
    pub fn now() -> Available {
        Available(available_bytes())
    }

    /// An error unless `bytes` (for `what`, e.g. "input `x` (f32[1000000000000])") fit
    /// in the memory available; `None` bytes means the size overflows 64 bits.
    pub fn ensure_fits(&self, what: &str, bytes: Option<u64>) -> Result<(), String> {
        let Some(bytes) = bytes else {
            return Err(format!(
                "{what} needs more bytes than a 64-bit size can count"
            ));
        };
        match self.0 {
            Some(available) if bytes > available => Err(format!(
                "{what} needs {} of memory, but only {} is available",
                human(bytes),
                human(available)
            )),
            _ => Ok(()),
        }
    }

    /// The bytes available, if known.
    pub fn bytes(&self) -> Option<u64> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_and_print() {
        let a = available_bytes().expect("Linux reports available memory");
        assert!(a > 1 << 20, "{a}");
        assert_eq!(human(96), "96 B");
        assert_eq!(human(4_000_000_000_000), "3.6 TiB");
        let now = Available::now();
        assert!(now.ensure_fits("a small input", Some(1024)).is_ok());
        let e = now
            .ensure_fits("input `x` (f32[1000000000000])", Some(4_000_000_000_000))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("input `x` (f32[1000000000000]) needs 3.6 TiB of memory, but only"),
            "{e}"
        );
        assert!(now.ensure_fits("huge", None).is_err());
    }
}

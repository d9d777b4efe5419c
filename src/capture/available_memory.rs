//! The memory a check may use when the user set no `--max-memory`: what the machine has
//! free, read after both models are loaded, so that capturing every value never gets the
//! process killed by the kernel's OOM killer (exit -9, no report).
//!
//! Capturing everything holds each value twice (TorchScript's and ONNX Runtime's). When
//! that, estimated from ONNX Runtime's inferred value sizes, would not fit in what is
//! available with headroom, the check runs as `--max-memory` would, with the budget this
//! module picks; otherwise nothing changes.

/// The share of the available memory a check plans to use; the rest is headroom for the
/// estimate's misses (values of unknown size, allocator slack) and for other processes.
const USABLE_SHARE: f64 = 0.8;

/// Bytes the kernel says can be allocated without swapping (`MemAvailable`), lowered to
/// what the cgroup this process runs in still allows (containers, CI runners).
pub fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let available = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())?
        * 1024;
    Some(match cgroup_headroom() {
        Some(room) => available.min(room),
        None => available,
    })
}

/// What the cgroup v2 limit leaves above its current usage; `None` without a limit.
fn cgroup_headroom() -> Option<u64> {
    let read = |name: &str| {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{name}"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let (max, current) = (read("memory.max")?, read("memory.current")?);
    Some(max.saturating_sub(current))
}

/// The budget to capture within, or `None` when capturing everything fits: `resident` bytes
/// are held after loading, a capture needs about `capture` more, and `available` more could
/// be allocated.
pub fn automatic_budget(resident: u64, capture: u64, available: u64) -> Option<u64> {
    let usable = (available as f64 * USABLE_SHARE) as u64;
    (capture > usable).then_some(resident + usable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_that_fits_changes_nothing() {
        assert_eq!(automatic_budget(1 << 30, 2 << 30, 10 << 30), None);
    }

    #[test]
    fn a_capture_beyond_the_headroom_gets_a_budget_within_it() {
        let budget = automatic_budget(1 << 30, 20 << 30, 10 << 30).unwrap();
        assert_eq!(budget, (1 << 30) + 8 * (1 << 30));
        // Just above the usable share is already too much.
        assert!(automatic_budget(0, 9 << 30, 10 << 30).is_some());
    }

    #[test]
    fn the_machine_reports_what_it_has() {
        // Linux always has MemAvailable; the value is positive on any running machine.
        assert!(available_bytes().is_some_and(|b| b > 0));
    }
}

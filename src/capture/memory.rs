//! The memory budget (`--max-memory`): parsing sizes, reading the process's resident memory
//! from the OS, and planning how a check stays under the budget.
//!
//! Without a budget ONNX Runtime returns every value in one run and its values stay in memory,
//! while the TorchScript side's values go to a temporary spill file as they are captured
//! (into the page cache, usually never to the disk): otherwise both sides' activations would
//! be resident together at the end of the ONNX run, and the ONNX run's own outputs cannot be
//! avoided. With a budget the plan is made after both models are loaded (their weights and
//! the runtimes are a fixed cost the budget must cover): both sides spill, ONNX Runtime's
//! values are fetched in groups sized to what is left, and pairs are compared one at a time.
//! A budget too small for even that is an error that says what would fit, never a run that
//! silently exceeds it.

use crate::capture::store::Keep;
use anyhow::{anyhow, bail, Result};

/// Parses `512M`, `1.5G`, `2GiB`, `800MB`, `1048576` into bytes (K/M/G/T are powers of 1024).
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| anyhow!("`{text}` is not a size (examples: 800M, 1.5G, 2GiB)"))?;
    let unit = unit.trim().to_ascii_uppercase();
    let unit = unit.trim_end_matches('B').trim_end_matches('I');
    let scale: u64 = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => bail!("`{text}` has an unknown unit (use K, M, G or T, e.g. 800M)"),
    };
    let bytes = value * scale as f64;
    if !bytes.is_finite() || bytes < 1.0 {
        bail!("`{text}` is not a usable size");
    }
    Ok(bytes as u64)
}

/// Sizes for messages: `812 MB`.
pub fn show_bytes(bytes: u64) -> String {
    format!("{} MB", bytes.div_ceil(1 << 20))
}

/// A field of /proc/self/status in bytes (VmRSS: now, VmHWM: peak).
fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line
        .trim_start_matches(field)
        .trim_start_matches(':')
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Resident memory of this process now.
pub fn current_rss() -> Option<u64> {
    proc_status_bytes("VmRSS")
}

/// Highest resident memory of this process so far, as the kernel counts it.
pub fn peak_rss() -> Option<u64> {
    proc_status_bytes("VmHWM")
}

/// How large buffers are allocated. glibc raises its mmap threshold after large frees, after
/// which freed activations stay in the heap and in the resident set; a fixed threshold makes
/// every large buffer go back to the OS when it is freed, which a budget needs.
fn return_large_frees_to_os() {
    // SAFETY: mallopt only changes allocator tuning; called before any large allocation.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 4 << 20);
    }
}

/// Hands memory freed in the middle of the heap back to the OS. Loading frees the ONNX
/// file's bytes and the serialised instrumented model after ONNX Runtime has its own copy
/// of the weights; glibc would otherwise keep those pages resident for the whole run.
pub fn release_freed() {
    // SAFETY: malloc_trim only returns free pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Must run before the models are loaded when a budget is set.
pub fn prepare(budget: Option<u64>) {
    if budget.is_some() {
        return_large_frees_to_os();
    }
}

/// How one check keeps its tensors and fetches ONNX Runtime's values.
pub struct MemoryPlan {
    pub budget: Option<u64>,
    /// Estimated bytes of ONNX values fetched per run; `None` fetches all in one run.
    pub group_bytes: Option<u64>,
    /// Whether spilling is required (a budget) or only preferred.
    strict: bool,
}

/// What the runs need beyond the loaded models, in units of the largest single value: the
/// runtime's working set around it, its host copy, and the two tensors of a compared pair.
const WORKING_SET_FACTOR: u64 = 4;
/// A session's own structures besides weights and values (graph, kernels, allocation plan,
/// thread pools), measured at 20-30 MB on ResNet-50 and FPN with ONNX Runtime 1.31.
const SESSION_OVERHEAD: u64 = 48 << 20;

impl MemoryPlan {
    pub fn unbounded() -> MemoryPlan {
        MemoryPlan {
            budget: None,
            group_bytes: None,
            strict: false,
        }
    }

    /// The plan for `budget` bytes, made after loading, when `loaded` bytes are resident
    /// (plus what a group session will bring back: its weights),
    /// loading peaked at `load_peak`, and the largest single value is about `largest_value`
    /// bytes.
    pub fn bounded(
        budget: u64,
        loaded: u64,
        load_peak: u64,
        largest_value: u64,
    ) -> Result<MemoryPlan> {
        let working = largest_value.max(1 << 20) * WORKING_SET_FACTOR + SESSION_OVERHEAD;
        let needed = loaded + working;
        if load_peak > budget && load_peak >= needed {
            bail!(
                "--max-memory {} is too small for these models: loading them (weights, both runtimes, the protobuf while it is decoded) already peaks at {}; use at least --max-memory {}",
                show_bytes(budget),
                show_bytes(load_peak),
                show_bytes(load_peak + load_peak / 10)
            );
        }
        if budget < needed {
            bail!(
                "--max-memory {} is too small for these models: loading them takes {} and running them needs about {} more (the largest activation is {}); use at least --max-memory {}",
                show_bytes(budget),
                show_bytes(loaded),
                show_bytes(working),
                show_bytes(largest_value),
                show_bytes(needed + needed / 10)
            );
        }
        // Half of what is left beyond that for the fetched group: the other half is slack
        // for the runtime's working set while it computes the values it does not return.
        let group = ((budget - needed) / 2).max(largest_value);
        Ok(MemoryPlan {
            budget: Some(budget),
            group_bytes: Some(group),
            strict: true,
        })
    }

    /// Where one sample's TorchScript and ONNX tensors go: a spill file of the sample's own
    /// (so that samples no longer needed free their disk space), or memory.
    pub fn keeps_for_sample(&self) -> Result<(Keep, Keep)> {
        let torch = Keep::spill(self.strict)?;
        let onnx = if self.strict {
            torch.clone()
        } else {
            Keep::Memory
        };
        Ok((torch, onnx))
    }

    /// The ONNX side's keeper for a sample whose TorchScript side was captured before this
    /// plan was made, into `torch` (a spill that is only an optimisation): without a budget
    /// memory, as `keeps_for_sample` says; under one that same file, strictly, so that both
    /// sides share it as they would have.
    pub fn onnx_keep_after(&self, torch: &Keep) -> Result<Keep> {
        if !self.strict {
            return Ok(Keep::Memory);
        }
        match torch {
            Keep::Spill { file, .. } => Ok(Keep::Spill {
                file: file.clone(),
                strict: true,
            }),
            // The temporary folder could not take a file then; it must now.
            Keep::Memory => Keep::spill(true),
        }
    }

    /// Pairs are compared one at a time under a budget (each brings two tensors back from
    /// disk), in parallel otherwise.
    pub fn compare_in_parallel(&self) -> bool {
        self.budget.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size("800M").unwrap(), 800 << 20);
        assert_eq!(parse_size("800MB").unwrap(), 800 << 20);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
        assert_eq!(parse_size(" 64k ").unwrap(), 64 << 10);
        for bad in ["", "M", "12Q", "-5M", "0", "1..2G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rss_is_read_from_the_os() {
        let now = current_rss().unwrap();
        let peak = peak_rss().unwrap();
        assert!(now > 1 << 20 && peak >= now, "{now} {peak}");
    }

    #[test]
    fn too_small_a_budget_says_what_would_fit() {
        let e = MemoryPlan::bounded(300 << 20, 280 << 20, 290 << 20, 16 << 20)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("too small") && e.contains("at least --max-memory"),
            "{e}"
        );
        let e = MemoryPlan::bounded(400 << 20, 200 << 20, 500 << 20, 1 << 20)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("already peaks at 500 MB"), "{e}");
        let plan = MemoryPlan::bounded(1 << 30, 300 << 20, 400 << 20, 16 << 20).unwrap();
        let needed = (300 << 20) + 4 * (16 << 20) + SESSION_OVERHEAD;
        assert_eq!(plan.group_bytes, Some(((1 << 30) - needed) / 2));
        assert!(!plan.compare_in_parallel());
    }
}

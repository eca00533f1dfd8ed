//! Where a measurement came from: CPU, GPU, NIC, host, code revision, time.
//!
//! Every CSV row carries these, so rows from different machines compare honestly.
#![forbid(unsafe_code)]

use std::process::Command;
use std::time::{Duration, SystemTime};

/// The machine-describing columns of a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    pub cpu: String,
    pub gpu: String,
    pub host: String,
    pub git_rev: String,
}

impl Provenance {
    /// Reads this machine's description (no GPU -> `none`).
    pub fn detect() -> Provenance {
        Provenance {
            cpu: cpu_model().unwrap_or_else(|| "unknown".into()),
            gpu: gpu_name().unwrap_or_else(|| "none".into()),
            host: host_name().unwrap_or_else(|| "unknown".into()),
            git_rev: git_rev().to_string(),
        }
    }
}

/// The git revision this binary was built from (`-dirty` if the tree had changes).
pub fn git_rev() -> &'static str {
    env!("QFWD_GIT_REV")
}

/// CPU model and the number of online cores, e.g.
/// `AMD EPYC 9454 48-Core Processor (2 cores)`.
pub fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let model = info
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())?;
    let cores = qfwd::host::online_core_count();
    Some(format!("{model} ({cores} cores)"))
}

/// GPU name as `nvidia-smi` reports it, if there is one.
pub fn gpu_name() -> Option<String> {
    let out = Command::new("nvidia-smi")
        .args(["--query-gpu=name", "--format=csv,noheader"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next()?.trim();
    (!first.is_empty()).then(|| first.to_string())
}

pub fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Now, as RFC 3339 UTC to the second.
pub fn timestamp_utc() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// A run id: UTC time, compact, unique enough per sweep.
pub fn run_id() -> String {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let stamp = humantime::format_rfc3339_seconds(
        SystemTime::UNIX_EPOCH + Duration::from_secs(now.as_secs()),
    )
    .to_string()
    .replace([':', '-'], "");
    format!("{}-{:03}", stamp.trim_end_matches('Z'), now.subsec_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_this_machine() {
        let p = Provenance::detect();
        assert!(!p.cpu.is_empty() && !p.host.is_empty() && !p.git_rev.is_empty());
        let ts = timestamp_utc();
        assert!(ts.ends_with('Z') && ts.len() == 20, "{ts}");
        assert!(run_id().len() >= 15);
    }
}

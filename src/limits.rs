//! The accepted range of every numeric setting, checked when settings are loaded.
//!
//! An operator's typo (`--batch 100000000`, `duration_s = 1e30`) must be an error that
//! names the key, the value and the range, never a panic, an allocation of the machine's
//! whole memory, or a forwarder that prints a status line every nanosecond. Every numeric
//! flag of `qfwd run`, every numeric key of its TOML file and of the harness's scenario
//! files is checked against one of the [`Limit`]s here before anything is allocated.
//!
//! The bounds are the largest values that make sense on a lab host, not the largest the
//! types hold: a year of `--duration` (longer runs leave it out and stop with a signal),
//! 64 Ki requests in flight, 1024 datagrams per poll. `docs/operations.md` lists them.
#![forbid(unsafe_code)]

use std::fmt::Display;

use crate::{Error, Result};

/// The range of one numeric setting: `min ..= max`, plus an optional value outside it
/// that turns the feature off (`0` for `stats_interval_s`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit<T> {
    /// The TOML key (flags are the key with dashes: `max_in_flight` is `--max-in-flight`).
    pub key: &'static str,
    pub min: T,
    pub max: T,
    /// A value outside `min ..= max` that is also accepted (it turns the feature off).
    pub off: Option<T>,
    /// Unit for messages: `" s"`, `" bytes"`, or `""`.
    pub unit: &'static str,
}

impl<T: PartialOrd + Copy + Display> Limit<T> {
    const fn new(key: &'static str, min: T, max: T, unit: &'static str) -> Limit<T> {
        Limit {
            key,
            min,
            max,
            off: None,
            unit,
        }
    }

    pub const fn or_off(self, off: T) -> Limit<T> {
        Limit {
            off: Some(off),
            ..self
        }
    }

    /// Whether `value` is accepted. NaN never is.
    pub fn contains(&self, value: T) -> bool {
        (value >= self.min && value <= self.max) || self.off.is_some_and(|o| value == o)
    }

    /// The range as messages and docs show it: `1 ..= 1024`, `0.1 ..= 86400 s, or 0 (off)`.
    pub fn describe(&self) -> String {
        let mut s = format!("{} ..= {}{}", self.min, self.max, self.unit);
        if let Some(o) = self.off {
            s.push_str(&format!(", or {o} (off)"));
        }
        s
    }

    /// `Ok(value)` when accepted, else an error naming the key, the value and the range.
    pub fn check(&self, value: T) -> Result<T> {
        if self.contains(value) {
            Ok(value)
        } else {
            Err(self.error(value))
        }
    }

    /// Like [`Limit::check`], with the key written as `key` (a list element: `cores[2]`).
    pub fn check_as(&self, key: &str, value: T) -> Result<T> {
        self.check(value).map_err(|_| Error::OutOfRange {
            key: key.to_string(),
            value: value.to_string(),
            range: self.describe(),
        })
    }

    /// The error for `value`, as a plain message (for harness errors built from strings).
    pub fn message(&self, value: T) -> String {
        self.error(value).to_string()
    }

    fn error(&self, value: T) -> Error {
        Error::OutOfRange {
            key: self.key.to_string(),
            value: value.to_string(),
            range: self.describe(),
        }
    }
}

/// Seconds in a year: the longest `duration_s`.
const YEAR_S: f64 = 31_536_000.0;

// ---- qfwd run ----------------------------------------------------------------------------

/// Seconds to serve.
pub const DURATION_S: Limit<f64> = Limit::new("duration_s", 0.001, YEAR_S, " s");
/// Seconds between status lines; 0 turns them off.
pub const STATS_INTERVAL_S: Limit<f64> =
    Limit::new("stats_interval_s", 0.1, 86_400.0, " s").or_off(0.0);
/// Largest request argument (a UDP datagram holds 65 507 bytes, the header 24 of them).
pub const MAX_REQUEST_BYTES: Limit<usize> = Limit::new("max_request_bytes", 1, 65_000, " bytes");
/// Datagrams received per poll.
pub const BATCH: Limit<usize> = Limit::new("batch", 1, 1024, "");
/// Requests in flight toward the backend (one table entry each).
pub const MAX_IN_FLIGHT: Limit<usize> = Limit::new("max_in_flight", 1, 65_536, "");
/// Per-request deadline of the backend.
pub const WATCHDOG_US: Limit<u64> = Limit::new("watchdog_us", 1, 60_000_000, " us");
/// Longest a request may wait before the forwarder reads it; 0 turns the check off.
pub const QUEUE_DEADLINE_US: Limit<u64> =
    Limit::new("queue_deadline_us", 1, 60_000_000, " us").or_off(0);
/// A CPU core number (the kernel's `CPU_SETSIZE` is 1024).
pub const CORE: Limit<usize> = Limit::new("cores", 0, 1023, "");
/// A CUDA device index.
pub const GPU: Limit<usize> = Limit::new("gpu_device", 0, 255, "");
/// Poller warps of the persistent kernel.
pub const POLLERS: Limit<u32> = Limit::new("pollers", 1, 32, "");
/// Warps polling each slot.
pub const POLLERS_PER_SLOT: Limit<u32> = Limit::new("pollers_per_slot", 1, 32, "");
/// Request slots on the GPU.
pub const SLOTS: Limit<usize> = Limit::new("slots", 1, 4096, "");
/// Defects of the GPU uf table (0: off).
pub const UF_TABLE_MAX_DEFECTS: Limit<u32> = Limit::new("uf_table_max_defects", 0, 16, "");
/// Defects up to which the GPU uf split path is tried.
pub const UF_SPLIT_MAX_DEFECTS: Limit<u32> = Limit::new("uf_split_max_defects", 0, 32, "");

// ---- qfwd-latency scenarios ---------------------------------------------------------------

/// Argument bytes per request.
pub const PAYLOAD_BYTES: Limit<u32> = Limit::new("payload_bytes", 0, 65_000, " bytes");
/// Offered open-loop rate.
pub const RATE_HZ: Limit<u64> = Limit::new("rate_hz", 1, 100_000_000, " req/s");
/// Requests timed / sent untimed first (request ids are 32 bits).
pub const SAMPLES: Limit<u64> = Limit::new("samples", 1, u32::MAX as u64 / 2, "");
pub const WARMUP: Limit<u64> = Limit::new("warmup", 0, u32::MAX as u64 / 2, "");
/// Open-loop run time.
pub const LOAD_DURATION_S: Limit<f64> = Limit::new("duration_s", 0.001, 86_400.0, " s");
/// A request unanswered this long is lost.
pub const TIMEOUT_MS: Limit<u64> = Limit::new("timeout_ms", 1, 60_000, " ms");
/// Share of hostile datagrams mixed into the load.
pub const HOSTILE_PERCENT: Limit<f64> = Limit::new("hostile_percent", 0.0, 50.0, " %");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_key_the_value_and_the_range() {
        let e = BATCH.check(100_000_000).unwrap_err().to_string();
        assert!(
            e.contains("batch") && e.contains("100000000") && e.contains("1 ..= 1024"),
            "{e}"
        );
        assert_eq!(BATCH.check(32).unwrap(), 32);
        let e = STATS_INTERVAL_S.check(1e-9).unwrap_err().to_string();
        assert!(e.contains("0.1 ..= 86400 s, or 0 (off)"), "{e}");
        assert!(STATS_INTERVAL_S.contains(0.0));
        assert!(!DURATION_S.contains(f64::NAN));
        assert!(!DURATION_S.contains(f64::INFINITY));
        assert!(!DURATION_S.contains(1e30));
        let e = CORE.check_as("cores[1]", 5000).unwrap_err().to_string();
        assert!(e.contains("cores[1]") && e.contains("5000"), "{e}");
    }
}

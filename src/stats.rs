//! Counters that account for every datagram, and service-time histograms.
//!
//! The invariant the forwarder keeps, and tests check:
//! `received == answered_ok + answered_error (all kinds) + dropped (all kinds)`.
#![forbid(unsafe_code)]

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::wire::status;

/// Why a datagram got no response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropKind {
    /// Shorter than a header.
    TruncatedHeader = 0,
    /// Not a CUQR request.
    BadMagic = 1,
    /// From a peer outside the allowlist.
    NotAllowed = 2,
    /// The response could not be handed to the transport.
    SendFailed = 3,
    /// The NIC completed the receive with an error CQE (gpu-direct): no request to answer.
    RxError = 4,
}

impl DropKind {
    pub const ALL: [DropKind; 5] = [
        DropKind::TruncatedHeader,
        DropKind::BadMagic,
        DropKind::NotAllowed,
        DropKind::SendFailed,
        DropKind::RxError,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            DropKind::TruncatedHeader => "truncated_header",
            DropKind::BadMagic => "bad_magic",
            DropKind::NotAllowed => "not_allowed",
            DropKind::SendFailed => "send_failed",
            DropKind::RxError => "rx_error",
        }
    }
}

/// Error statuses the forwarder answers with, in counter order.
const ERROR_KINDS: [i32; 8] = [
    status::BAD_ARGUMENT,
    status::OVER_BUDGET,
    status::LENGTH_MISMATCH,
    status::UNKNOWN_FUNCTION,
    status::OVERSIZED,
    status::OVERLOAD,
    status::DECODER_TIMEOUT,
    status::SHUTTING_DOWN,
];
/// Slot for handler errors (> 0) other than BAD_ARGUMENT and OVER_BUDGET.
const OTHER_HANDLER_ERROR: usize = ERROR_KINDS.len();

/// What one shard (one GPU's backend) of a routed run did; see [`crate::route`].
/// `submitted == completed + in flight` while it runs; `rejected` requests were answered
/// with the shard's error status (`OVERLOAD`, `OVERSIZED`...) and never entered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShardCounts {
    /// The GPU index (for `topology = cpu`: the shard's label from `gpus`).
    pub gpu: usize,
    pub submitted: u64,
    pub completed: u64,
    pub rejected: u64,
}

impl fmt::Display for ShardCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "gpu {}: submitted {}, completed {}, rejected {}",
            self.gpu, self.submitted, self.completed, self.rejected
        )
    }
}

/// A gap between two of a polling loop's clock reads at least this much beyond its
/// quickest is a stall: the thread did not run (the host ran something else on its core).
/// Well above a poll of any transport here (inproc ~10-100 ns; a UDP `recv` ~1-2 µs is
/// inside the quickest gap already) and below the round trips that matter (a 4 µs decode
/// stalled for 5 µs crosses a 10 µs target). The forwarder ([`crate::forward`]) and the
/// latency harness's emulator both use it.
pub const STALL_NS: u64 = 5_000;

/// The stall rule of one polling loop: it keeps the quickest gap seen between two clock
/// reads, and a gap [`STALL_NS`] or more beyond it is a stall.
#[derive(Debug, Clone, Copy)]
pub struct StallRule {
    quickest_ns: u64,
}

impl Default for StallRule {
    fn default() -> Self {
        StallRule {
            quickest_ns: u64::MAX,
        }
    }
}

impl StallRule {
    /// Takes the gap (ns) between two clock reads; whether it was a stall.
    #[inline]
    pub fn is_stall(&mut self, gap_ns: u64) -> bool {
        self.quickest_ns = self.quickest_ns.min(gap_ns);
        gap_ns >= self.quickest_ns.saturating_add(STALL_NS)
    }
}

/// A polling loop's next interval between clock reads (in polls), from the last one and
/// the gap it took: halved above 2 µs, doubled below 0.5 µs, within `1..=max`. Keeps the
/// reads about a microsecond apart whatever a poll costs (in-process ~20 ns, a UDP `recv`
/// ~0.5-1 µs), so that the gaps between reads vary far less than [`STALL_NS`] and a stall
/// stands out; a read per poll would slow the cheap polls.
pub fn next_polls_per_read(polls: u32, gap: Duration, max: u32) -> u32 {
    if gap > Duration::from_micros(2) {
        (polls / 2).max(1)
    } else if gap < Duration::from_nanos(500) {
        polls.saturating_mul(2).min(max)
    } else {
        polls.min(max)
    }
}

/// Highest service time recorded exactly; larger ones saturate (and are still counted).
const MAX_TRACKED_NS: u64 = 60_000_000_000;

/// Every counter of one forwarder.
#[derive(Clone)]
pub struct Stats {
    pub received: u64,
    pub answered_ok: u64,
    answered_error: [u64; ERROR_KINDS.len() + 1],
    dropped: [u64; DropKind::ALL.len()],
    /// Completions that arrived after the watchdog had already answered the request.
    pub late_completions: u64,
    /// Service time (receive to response handed to the transport), whole run.
    pub service_ns: Histogram<u64>,
    /// Same, since the last status line.
    pub interval_ns: Histogram<u64>,
    /// Requests received since the last status line.
    pub interval_received: u64,
    /// Per-GPU counters when requests are routed over several backends (empty otherwise);
    /// filled by [`crate::serve`] for status lines and at the end of a run.
    pub shards: Vec<ShardCounts>,
    /// Stalls of the forwarder's own loop ([`STALL_NS`]; [`crate::forward`] docs).
    pub stalls: u64,
    /// Requests answered after being in service across such a stall: their service time
    /// includes time the forwarder did not run.
    pub stalled_requests: u64,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKED_NS, 3).expect("static histogram bounds are valid")
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            received: 0,
            answered_ok: 0,
            answered_error: [0; ERROR_KINDS.len() + 1],
            dropped: [0; DropKind::ALL.len()],
            late_completions: 0,
            service_ns: histogram(),
            interval_ns: histogram(),
            interval_received: 0,
            shards: Vec::new(),
            stalls: 0,
            stalled_requests: 0,
        }
    }
}

impl Stats {
    #[inline]
    pub fn on_received(&mut self) {
        self.received += 1;
        self.interval_received += 1;
    }

    #[inline]
    pub fn on_dropped(&mut self, kind: DropKind) {
        self.dropped[kind as usize] += 1;
    }

    /// Records one response handed to the transport, with its service time.
    #[inline]
    pub fn on_answered(&mut self, status_code: i32, service: Duration) {
        if status_code == status::OK {
            self.answered_ok += 1;
        } else {
            let slot = ERROR_KINDS
                .iter()
                .position(|&k| k == status_code)
                .unwrap_or(OTHER_HANDLER_ERROR);
            self.answered_error[slot] += 1;
        }
        let ns = (service.as_nanos() as u64).max(1);
        self.service_ns.saturating_record(ns);
        self.interval_ns.saturating_record(ns);
    }

    /// Counts an answered request as stalled if a stall was counted since its receipt,
    /// when [`Stats::stalls`] was `stalls_at_receipt`.
    #[inline]
    pub fn note_stalled(&mut self, stalls_at_receipt: u64) {
        self.stalled_requests += u64::from(self.stalls > stalls_at_receipt);
    }

    /// Adds counts another party kept (a device side that serves requests itself):
    /// `received`, answered `ok`, answered with each error status (a code not listed
    /// separately goes to the other handler errors), and dropped by kind.
    pub fn add_counts(
        &mut self,
        received: u64,
        ok: u64,
        errors: &[(i32, u64)],
        drops: &[(DropKind, u64)],
    ) {
        self.received += received;
        self.answered_ok += ok;
        for &(code, n) in errors {
            let slot = ERROR_KINDS
                .iter()
                .position(|&k| k == code)
                .unwrap_or(OTHER_HANDLER_ERROR);
            self.answered_error[slot] += n;
        }
        for &(kind, n) in drops {
            self.dropped[kind as usize] += n;
        }
    }

    pub fn dropped(&self, kind: DropKind) -> u64 {
        self.dropped[kind as usize]
    }

    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    /// Responses sent with status `code` (any non-zero code).
    pub fn answered_with(&self, code: i32) -> u64 {
        match ERROR_KINDS.iter().position(|&k| k == code) {
            Some(i) => self.answered_error[i],
            None if code > 0 => self.answered_error[OTHER_HANDLER_ERROR],
            None => 0,
        }
    }

    pub fn answered_error_total(&self) -> u64 {
        self.answered_error.iter().sum()
    }

    /// Whether every received datagram is accounted for exactly once.
    pub fn adds_up(&self) -> bool {
        self.received == self.answered_ok + self.answered_error_total() + self.dropped_total()
    }

    /// Named non-zero error and drop counters, for summaries.
    pub fn breakdown(&self) -> Vec<(&'static str, u64)> {
        let mut v = Vec::new();
        for (i, &code) in ERROR_KINDS.iter().enumerate() {
            if self.answered_error[i] > 0 {
                v.push((status::name(code), self.answered_error[i]));
            }
        }
        if self.answered_error[OTHER_HANDLER_ERROR] > 0 {
            v.push(("handler_error", self.answered_error[OTHER_HANDLER_ERROR]));
        }
        for k in DropKind::ALL {
            if self.dropped(k) > 0 {
                v.push((k.name(), self.dropped(k)));
            }
        }
        v
    }

    /// The live one-line status; resets the interval histogram.
    pub fn status_line(&mut self, interval: Duration) -> String {
        let rate = self.interval_received as f64 / interval.as_secs_f64().max(1e-9);
        let (p50, p99) = quantiles_us(&self.interval_ns);
        let mut line = format!(
            "qfwd: rx {} | ok {} | err {} | drop {} | {:.0} req/s | svc p50 {} p99 {}",
            self.received,
            self.answered_ok,
            self.answered_error_total(),
            self.dropped_total(),
            rate,
            p50,
            p99
        );
        for s in &self.shards {
            line.push_str(&format!(
                " | gpu{} sub {} done {} rej {}",
                s.gpu, s.submitted, s.completed, s.rejected
            ));
        }
        self.interval_ns.reset();
        self.interval_received = 0;
        line
    }
}

fn quantiles_us(h: &Histogram<u64>) -> (String, String) {
    if h.is_empty() {
        return ("-".into(), "-".into());
    }
    let f = |q| format!("{:.2}us", h.value_at_quantile(q) as f64 / 1000.0);
    (f(0.5), f(0.99))
}

/// The final summary: counters that add up, each kind named.
impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "received {} = answered ok {} + answered with error {} + dropped {}{}",
            self.received,
            self.answered_ok,
            self.answered_error_total(),
            self.dropped_total(),
            if self.adds_up() {
                ""
            } else {
                "  (DOES NOT ADD UP: bug)"
            }
        )?;
        for (name, n) in self.breakdown() {
            writeln!(f, "  {name:<18} {n}")?;
        }
        if self.late_completions > 0 {
            writeln!(
                f,
                "  late completions (after watchdog answered) {}",
                self.late_completions
            )?;
        }
        for s in &self.shards {
            writeln!(f, "  {s}")?;
        }
        writeln!(
            f,
            "forwarder stalls: {}, requests in service across one: {}",
            self.stalls, self.stalled_requests
        )?;
        let h = &self.service_ns;
        if !h.is_empty() {
            let us = |v: u64| v as f64 / 1000.0;
            write!(
                f,
                "service time: min {:.2}us p50 {:.2}us p99 {:.2}us p99.9 {:.2}us max {:.2}us",
                us(h.min()),
                us(h.value_at_quantile(0.5)),
                us(h.value_at_quantile(0.99)),
                us(h.value_at_quantile(0.999)),
                us(h.max())
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_add_up_and_name_each_kind() {
        let mut s = Stats::default();
        for _ in 0..6 {
            s.on_received();
        }
        s.on_answered(status::OK, Duration::from_micros(3));
        s.on_answered(status::OK, Duration::from_micros(5));
        s.on_answered(status::UNKNOWN_FUNCTION, Duration::from_micros(1));
        s.on_answered(42, Duration::from_micros(1));
        s.on_dropped(DropKind::BadMagic);
        assert!(!s.adds_up());
        s.on_dropped(DropKind::NotAllowed);
        assert!(s.adds_up());
        assert_eq!(s.answered_with(status::UNKNOWN_FUNCTION), 1);
        assert_eq!(s.answered_with(42), 1);
        let text = s.to_string();
        assert!(text.contains("received 6 = answered ok 2 + answered with error 2 + dropped 2"));
        assert!(text.contains("unknown_function"));
        assert!(text.contains("handler_error"));
        assert!(text.contains("not_allowed"));
        let line = s.status_line(Duration::from_secs(1));
        assert!(line.contains("rx 6"), "{line}");
        assert!(s.interval_ns.is_empty());
    }

    #[test]
    fn a_stall_is_a_gap_stall_ns_beyond_the_quickest_so_far() {
        let mut r = StallRule::default();
        assert!(!r.is_stall(10_000), "the first gap is the quickest");
        assert!(!r.is_stall(14_999));
        assert!(r.is_stall(15_000));
        assert!(!r.is_stall(200), "a quicker gap lowers the bar");
        assert!(!r.is_stall(5_199));
        assert!(r.is_stall(5_200));
    }

    #[test]
    fn the_read_interval_keeps_reads_about_a_microsecond_apart() {
        let us = Duration::from_micros;
        assert_eq!(next_polls_per_read(64, Duration::from_nanos(300), 64), 64);
        assert_eq!(next_polls_per_read(8, Duration::from_nanos(300), 64), 16);
        assert_eq!(next_polls_per_read(8, us(1), 64), 8);
        assert_eq!(next_polls_per_read(8, us(3), 64), 4);
        assert_eq!(next_polls_per_read(1, us(50), 64), 1);
        // UDP-like polls of ~700 ns each: from 64 down to 2 and no further.
        let mut n = 64;
        for _ in 0..10 {
            n = next_polls_per_read(n, Duration::from_nanos(700) * n, 64);
        }
        assert_eq!(n, 2);
        // In-process polls of ~20 ns: up to the cap and no further.
        let mut n = 1;
        for _ in 0..10 {
            n = next_polls_per_read(n, Duration::from_nanos(20) * n, 16);
        }
        assert_eq!(n, 16);
    }

    #[test]
    fn per_gpu_counters_show_in_the_summary_and_status_line() {
        let mut s = Stats {
            shards: vec![
                ShardCounts {
                    gpu: 0,
                    submitted: 5,
                    completed: 4,
                    rejected: 1,
                },
                ShardCounts {
                    gpu: 1,
                    submitted: 3,
                    completed: 3,
                    rejected: 0,
                },
            ],
            ..Stats::default()
        };
        let text = s.to_string();
        assert!(
            text.contains("gpu 0: submitted 5, completed 4, rejected 1"),
            "{text}"
        );
        assert!(
            text.contains("gpu 1: submitted 3, completed 3, rejected 0"),
            "{text}"
        );
        let line = s.status_line(Duration::from_secs(1));
        assert!(line.contains("gpu1 sub 3 done 3 rej 0"), "{line}");
    }
}

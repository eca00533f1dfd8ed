//! Counters that account for every datagram, and service-time histograms.
//!
//! The invariant the forwarder keeps, and tests check:
//! `received == answered_ok + answered_error (all kinds) + dropped (all kinds)`.
#![forbid(unsafe_code)]

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::transport::TransportDrops;
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
    /// From an allowed peer other than the one the soft NIC's queue pair is connected to.
    ForeignPeer = 4,
    /// Dropped by the kernel before the forwarder read it: the socket's receive buffer was
    /// full (the forwarder did not keep up).
    SocketOverflow = 5,
    /// The NIC completed the receive with an error CQE (gpu-direct): no request to answer.
    RxError = 6,
}

impl DropKind {
    pub const ALL: [DropKind; 7] = [
        DropKind::TruncatedHeader,
        DropKind::BadMagic,
        DropKind::NotAllowed,
        DropKind::SendFailed,
        DropKind::ForeignPeer,
        DropKind::SocketOverflow,
        DropKind::RxError,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            DropKind::TruncatedHeader => "truncated_header",
            DropKind::BadMagic => "bad_magic",
            DropKind::NotAllowed => "not_allowed",
            DropKind::SendFailed => "send_failed",
            DropKind::ForeignPeer => "foreign_peer",
            DropKind::SocketOverflow => "socket_overflow",
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
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
    /// Requests that had waited longer than the queue deadline before the forwarder read
    /// them (the transport's arrival time says so): answered `OVERLOAD` without being
    /// computed, and counted there too.
    pub expired: u64,
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
    /// The transport's own drops as last absorbed ([`Stats::absorb_transport_drops`]).
    transport_drops: TransportDrops,
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
            expired: 0,
            service_ns: histogram(),
            interval_ns: histogram(),
            interval_received: 0,
            shards: Vec::new(),
            stalls: 0,
            stalled_requests: 0,
            transport_drops: TransportDrops::default(),
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

    /// Counts what the transport dropped before the forwarder saw it (`total`: its
    /// counters since it started) as received and dropped, so the totals add up over
    /// every datagram that reached the host. Takes the growth since the last call.
    pub fn absorb_transport_drops(&mut self, total: TransportDrops) {
        let last = std::mem::replace(&mut self.transport_drops, total);
        for (kind, now, before) in [
            (DropKind::NotAllowed, total.not_allowed, last.not_allowed),
            (DropKind::ForeignPeer, total.foreign_peer, last.foreign_peer),
            (
                DropKind::SocketOverflow,
                total.socket_overflow,
                last.socket_overflow,
            ),
        ] {
            let n = now.saturating_sub(before);
            self.received += n;
            self.interval_received += n;
            self.dropped[kind as usize] += n;
        }
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

    /// The live report of the interval that just ended (`interval` long): the counters so
    /// far and the interval's rate and service time. Resets the interval's counts.
    pub fn interval(&mut self, interval: Duration) -> Interval {
        let h = &self.interval_ns;
        let report = Interval {
            kind: "interval",
            interval_s: interval.as_secs_f64(),
            received: self.received,
            answered_ok: self.answered_ok,
            answered_error: self.answered_error_total(),
            overload: self.answered_with(status::OVERLOAD),
            expired: self.expired,
            dropped: self.dropped_total(),
            socket_overflow: self.dropped(DropKind::SocketOverflow),
            rate_hz: self.interval_received as f64 / interval.as_secs_f64().max(1e-9),
            service_p50_ns: (!h.is_empty()).then(|| h.value_at_quantile(0.5)),
            service_p99_ns: (!h.is_empty()).then(|| h.value_at_quantile(0.99)),
            stalls: self.stalls,
            stalled_requests: self.stalled_requests,
            shards: self.shards.clone(),
        };
        self.interval_ns.reset();
        self.interval_received = 0;
        report
    }

    /// The live one-line status ([`Stats::interval`] as text); resets the interval.
    pub fn status_line(&mut self, interval: Duration) -> String {
        self.interval(interval).to_string()
    }

    /// The final counters and service time, for `qfwd run --stats-format json`.
    pub fn summary(&self) -> Summary {
        let h = &self.service_ns;
        Summary {
            kind: "summary",
            received: self.received,
            answered_ok: self.answered_ok,
            answered_error: self.answered_error_total(),
            dropped: self.dropped_total(),
            adds_up: self.adds_up(),
            breakdown: self
                .breakdown()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            late_completions: self.late_completions,
            stalls: self.stalls,
            stalled_requests: self.stalled_requests,
            service_ns: (!h.is_empty()).then(|| ServiceTime {
                min: h.min(),
                p50: h.value_at_quantile(0.5),
                p99: h.value_at_quantile(0.99),
                p99_9: h.value_at_quantile(0.999),
                max: h.max(),
                mean: h.mean().round() as u64,
            }),
            shards: self.shards.clone(),
        }
    }
}

/// One live interval of a running forwarder ([`Stats::interval`]). Its `Display` is the
/// status line; serialized (`qfwd run --stats-format json`) it is one JSON object with
/// `"kind": "interval"`. Counters are totals since the start; `rate_hz` and the service
/// time quantiles (ns, absent when nothing was answered) cover the interval only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    pub kind: &'static str,
    pub interval_s: f64,
    pub received: u64,
    pub answered_ok: u64,
    pub answered_error: u64,
    /// Of the errors, answers `OVERLOAD` (no room toward the decoder, or waited too long).
    pub overload: u64,
    /// Of those, requests that waited past the queue deadline before they were read.
    pub expired: u64,
    pub dropped: u64,
    /// Of the drops, datagrams the kernel dropped (socket receive buffer full).
    pub socket_overflow: u64,
    pub rate_hz: f64,
    pub service_p50_ns: Option<u64>,
    pub service_p99_ns: Option<u64>,
    pub stalls: u64,
    pub stalled_requests: u64,
    /// Per-GPU counters of a routed run (empty otherwise).
    pub shards: Vec<ShardCounts>,
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |ns: Option<u64>| match ns {
            Some(ns) => format!("{:.2}us", ns as f64 / 1000.0),
            None => "-".into(),
        };
        write!(
            f,
            "qfwd: rx {} | ok {} | err {} (overload {}, expired {}) | drop {} (socket {}) \
             | {:.0} req/s | svc p50 {} p99 {}",
            self.received,
            self.answered_ok,
            self.answered_error,
            self.overload,
            self.expired,
            self.dropped,
            self.socket_overflow,
            self.rate_hz,
            us(self.service_p50_ns),
            us(self.service_p99_ns)
        )?;
        for s in &self.shards {
            write!(
                f,
                " | gpu{} sub {} done {} rej {}",
                s.gpu, s.submitted, s.completed, s.rejected
            )?;
        }
        Ok(())
    }
}

/// The end of a run as one JSON object (`"kind": "summary"`): the counters that add up
/// (`received = answered_ok + answered_error + dropped`), each non-zero error and drop
/// kind by name, and the whole run's service time in ns (absent when nothing was answered).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub kind: &'static str,
    pub received: u64,
    pub answered_ok: u64,
    pub answered_error: u64,
    pub dropped: u64,
    pub adds_up: bool,
    pub breakdown: std::collections::BTreeMap<String, u64>,
    pub late_completions: u64,
    pub stalls: u64,
    pub stalled_requests: u64,
    pub service_ns: Option<ServiceTime>,
    pub shards: Vec<ShardCounts>,
}

/// Service-time quantiles in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ServiceTime {
    pub min: u64,
    pub p50: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
    pub mean: u64,
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
        if self.expired > 0 {
            writeln!(
                f,
                "  of the overload answers, {} had waited past the queue deadline before the \
                 forwarder read them",
                self.expired
            )?;
        }
        if self.dropped(DropKind::SocketOverflow) > 0 {
            writeln!(
                f,
                "  socket_overflow: the kernel dropped these at the receive buffer: the \
                 forwarder did not keep up"
            )?;
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
    fn intervals_and_the_summary_serialize_as_one_json_object_each() {
        let mut s = Stats::default();
        for _ in 0..4 {
            s.on_received();
        }
        s.on_answered(status::OK, Duration::from_micros(3));
        s.on_answered(status::OK, Duration::from_micros(5));
        s.on_answered(status::UNKNOWN_FUNCTION, Duration::from_micros(1));
        s.on_dropped(DropKind::BadMagic);
        let i = s.interval(Duration::from_millis(500));
        let json: serde_json::Value = serde_json::to_value(&i).unwrap();
        assert_eq!(json["kind"], "interval");
        assert_eq!(json["received"], 4);
        assert_eq!(json["rate_hz"], 8.0);
        assert_eq!(json["dropped"], 1);
        assert!(json["service_p99_ns"].as_u64().unwrap() >= 4_990);
        let text = serde_json::to_string(&i).unwrap();
        assert!(!text.contains('\n'), "one line: {text}");
        // The next interval saw nothing: its quantiles are null, its counters still totals.
        let quiet = serde_json::to_value(s.interval(Duration::from_secs(1))).unwrap();
        assert_eq!(quiet["service_p50_ns"], serde_json::Value::Null);
        assert_eq!(quiet["rate_hz"], 0.0);
        assert_eq!(quiet["answered_ok"], 2);

        let sum = serde_json::to_value(s.summary()).unwrap();
        assert_eq!(sum["kind"], "summary");
        assert_eq!(sum["adds_up"], true);
        assert_eq!(sum["breakdown"]["unknown_function"], 1);
        assert_eq!(sum["breakdown"]["bad_magic"], 1);
        assert_eq!(sum["service_ns"]["max"].as_u64().unwrap() / 1000, 5);
        assert_eq!(
            sum["received"].as_u64().unwrap(),
            ["answered_ok", "answered_error", "dropped"]
                .iter()
                .map(|k| sum[k].as_u64().unwrap())
                .sum::<u64>()
        );
    }

    #[test]
    fn transport_drops_are_received_and_dropped_once() {
        let mut s = Stats::default();
        s.on_received();
        s.on_answered(status::OK, Duration::from_micros(1));
        let mut t = TransportDrops {
            not_allowed: 3,
            foreign_peer: 1,
            socket_overflow: 0,
        };
        s.absorb_transport_drops(t);
        s.absorb_transport_drops(t);
        assert_eq!(s.received, 5);
        assert_eq!(s.dropped(DropKind::NotAllowed), 3);
        assert_eq!(s.dropped(DropKind::ForeignPeer), 1);
        assert!(s.adds_up());
        t.foreign_peer = 4;
        s.absorb_transport_drops(t);
        assert_eq!((s.received, s.dropped_total()), (8, 7));
        assert!(s.adds_up());
        assert!(s.to_string().contains("foreign_peer       4"), "{s}");
        t.socket_overflow = 10;
        s.absorb_transport_drops(t);
        assert_eq!((s.received, s.dropped(DropKind::SocketOverflow)), (18, 10));
        assert!(s.adds_up());
        let text = s.to_string();
        assert!(text.contains("socket_overflow    10"), "{text}");
        let line = s.status_line(Duration::from_secs(1));
        assert!(line.contains("drop 17 (socket 10)"), "{line}");
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

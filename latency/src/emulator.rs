//! The QPU-controller emulator: sends requests, checks every answer, times each one.
//!
//! Two modes (docs/measuring.md):
//! - `ping-pong`: one request in flight; each sample is a full round trip.
//! - `open-loop`: requests leave on a fixed schedule whatever the answers do; each
//!   sample is timed from its *intended* send time (as wrk2 does), so a stall in the
//!   forwarder shows up in every request it delayed instead of hiding as one slow one.
//!
//! Every response is checked: request_id and timestamp echoed, status, and the result
//! against the answer the emulator computed itself. Each request ends in exactly one
//! class: ok, error status, wrong answer, or lost; late and duplicate answers are
//! counted beside them.
//!
//! The emulator also watches itself: a gap between two of its clock reads longer than
//! its quickest by [`STALL_NS`] or more is a *stall* (the host ran something else on its
//! core, or did not run it), and every timed sample in flight across one, or in open loop
//! due to be sent during one, is counted in [`Outcome::stalled_samples`]: its latency
//! includes time the emulator did not watch. When a row's slowest 1 % is about as many
//! samples as it has stalled ones, its p99 is the host's, not the system under test's.
//! (The forwarder watches its own loop by the same rule, `qfwd::forward`.)
#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use qfwd::decode::sample::SplitMix64;
use qfwd::handler::parity;
use qfwd::stats::{next_polls_per_read, StallRule};
use qfwd::transport::Client;
use qfwd::wire::{self, status, HEADER_LEN};
use serde::{Deserialize, Serialize};

use crate::hostile::{Hostile, HOSTILE_ID_BASE};
use crate::{Error, Result};

/// How requests are paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    PingPong,
    OpenLoop,
}

impl Mode {
    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::PingPong => "ping-pong",
            Mode::OpenLoop => "open-loop",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "ping-pong" => Ok(Mode::PingPong),
            "open-loop" => Ok(Mode::OpenLoop),
            _ => Err(format!(
                "unknown mode {s:?}; expected ping-pong or open-loop"
            )),
        }
    }
}

/// A pool of requests with their known answers, cycled through by the emulator.
pub struct Workload {
    function_id: u32,
    /// Encoded datagrams; request_id and timestamp are patched in before each send.
    datagrams: Vec<Vec<u8>>,
    expected: Vec<Vec<u8>>,
    /// An argument the function refuses with `BAD_ARGUMENT` (for hostile datagrams).
    bad_argument: Option<Vec<u8>>,
}

impl Workload {
    /// `count` random arguments of `payload_bytes` bytes for the parity handler.
    pub fn parity(function_name: &str, payload_bytes: usize, count: usize, seed: u64) -> Workload {
        let mut rng = SplitMix64(seed);
        let mut datagrams = Vec::with_capacity(count);
        let mut expected = Vec::with_capacity(count);
        for _ in 0..count.max(1) {
            let arg: Vec<u8> = (0..payload_bytes).map(|_| rng.next_u64() as u8).collect();
            expected.push(vec![parity(&arg)]);
            datagrams.push(encode(wire::function_id(function_name), &arg));
        }
        Workload {
            function_id: wire::function_id(function_name),
            datagrams,
            expected,
            bad_argument: None,
        }
    }

    /// Arbitrary arguments with the answers a reference implementation gave.
    pub fn from_pairs(function_name: &str, pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Workload {
        let fid = wire::function_id(function_name);
        let (datagrams, expected) = pairs.into_iter().map(|(a, e)| (encode(fid, &a), e)).unzip();
        Workload {
            function_id: fid,
            datagrams,
            expected,
            bad_argument: None,
        }
    }

    /// Names an argument the function refuses with `BAD_ARGUMENT`: a hostile load then
    /// sends it too (see [`crate::hostile`]).
    pub fn with_bad_argument(mut self, arg: Vec<u8>) -> Workload {
        self.bad_argument = Some(arg);
        self
    }

    pub fn function_id(&self) -> u32 {
        self.function_id
    }

    /// Argument bytes of the first request (all requests of a workload have the same size).
    pub fn arg_len(&self) -> usize {
        self.datagrams.first().map_or(0, |d| d.len() - HEADER_LEN)
    }

    pub fn len(&self) -> usize {
        self.datagrams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.datagrams.is_empty()
    }

    /// Addresses the k-th request of the pool to `names[k % names.len()]`, spreading the
    /// load round-robin over several functions (patches, routed to several GPUs); the
    /// expected answers do not change. With a pool a multiple of `names.len()` long, the
    /// requests sent go round-robin too. No names: unchanged.
    pub fn spread_over(mut self, names: &[String]) -> Workload {
        if names.is_empty() {
            return self;
        }
        let ids: Vec<u32> = names.iter().map(|n| wire::function_id(n)).collect();
        for (k, d) in self.datagrams.iter_mut().enumerate() {
            // function_id: bytes 4..8 of the CUQR header.
            d[4..8].copy_from_slice(&ids[k % ids.len()].to_le_bytes());
        }
        self.function_id = ids[0];
        self
    }
}

fn encode(function_id: u32, arg: &[u8]) -> Vec<u8> {
    let mut d = vec![0u8; HEADER_LEN + arg.len()];
    wire::write_request(&mut d, function_id, 0, 0, arg).expect("buffer sized for the request");
    d
}

/// What to send and how.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub mode: Mode,
    /// Requests per second (open loop only).
    pub rate_hz: u64,
    /// Requests sent first and checked, but not timed.
    pub warmup: u64,
    /// Requests timed.
    pub samples: u64,
    /// A request not answered within this is lost (a later answer counts as late).
    pub timeout: Duration,
    /// Yield instead of spinning while waiting (for machines short of cores).
    pub yield_when_idle: bool,
    /// Hostile datagrams mixed in, per 100 requests ([`crate::hostile`]); 0 = none.
    pub hostile_percent: f64,
}

impl Default for LoadSpec {
    fn default() -> Self {
        LoadSpec {
            mode: Mode::PingPong,
            rate_hz: 0,
            warmup: 1_000,
            samples: 10_000,
            timeout: Duration::from_secs(1),
            yield_when_idle: false,
            hostile_percent: 0.0,
        }
    }
}

/// The most requests one run may send: request ids are 32 bits, and those from 2^31 up
/// mark hostile datagrams.
pub const MAX_REQUESTS: u64 = crate::hostile::HOSTILE_ID_BASE as u64;

/// The most requests tracked at once (24 B each): a ring, so a long run needs no more
/// memory than a short one. An entry is reused after this many later requests, which
/// must be several timeouts' worth ([`ring_len`]).
pub const MAX_TRACKED: u64 = 1 << 24;

/// What hostile datagrams the run sent, and what came of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostileCounts {
    /// Hostile datagrams handed to the transport.
    pub sent: u64,
    /// Of which the forwarder must answer (a readable header).
    pub answerable: u64,
    /// Answers with the status their kind expects (or -6: shed by an overloaded forwarder).
    pub answered: u64,
    /// Answers with another status, or to a kind that must get none.
    pub unexpected: u64,
}

/// Everything one run saw.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Round-trip times of the timed requests, ns (from intended send time in open loop).
    pub histogram: Histogram<u64>,
    pub sent: u64,
    /// Correct answers.
    pub ok: u64,
    /// Answers with a non-zero status, by status code.
    pub error_status: Vec<(i32, u64)>,
    /// Answers whose result or echoed timestamp is wrong.
    pub wrong: u64,
    /// Requests never answered within the timeout (nor later).
    pub lost: u64,
    /// Answers that arrived after the timeout (each also classified above by content).
    pub late: u64,
    /// Second answers to the same request.
    pub duplicate: u64,
    /// Datagrams that were not valid responses, or answered an id never sent.
    pub malformed: u64,
    /// Time from the first send to the last answer.
    pub elapsed: Duration,
    /// Requests the transport refused at first try (full ring or socket buffer); they
    /// were retried, and their wait is inside their latency.
    pub send_retries: u64,
    /// Ping-pong stopped sending after this many requests in a row were lost (the system
    /// under test is not answering; waiting out every timeout would take hours).
    pub abandoned_after: Option<u64>,
    /// Hostile datagrams mixed in (`hostile_percent`).
    pub hostile: HostileCounts,
    /// Gaps of [`STALL_NS`] or more beyond the quickest between two of the emulator's
    /// clock reads once timed requests were being sent (module docs).
    pub stalls: u64,
    /// Timed samples (answered) that were in flight across a stall, or (open loop) due
    /// to be sent during one.
    pub stalled_samples: u64,
}

impl Outcome {
    /// Answers with an error status, all codes.
    pub fn error_status_total(&self) -> u64 {
        self.error_status.iter().map(|e| e.1).sum()
    }

    /// Requests that did not get a correct answer, plus malformed and duplicate answers.
    pub fn errors(&self) -> u64 {
        self.error_status_total() + self.wrong + self.duplicate + self.malformed
    }

    /// Each request sent is ok, error status, wrong, or lost: exactly one.
    pub fn adds_up(&self) -> bool {
        self.sent == self.ok + self.error_status_total() + self.wrong + self.lost
    }

    /// Adds the outcome of a run that went on at the same time over another link: counts
    /// add, histograms merge, the elapsed time is the longer one.
    pub fn merge(&mut self, other: Outcome) {
        self.histogram
            .add(&other.histogram)
            .expect("histograms of one configuration have the same bounds");
        self.sent += other.sent;
        self.ok += other.ok;
        for (code, n) in other.error_status {
            match self.error_status.iter_mut().find(|e| e.0 == code) {
                Some(e) => e.1 += n,
                None => self.error_status.push((code, n)),
            }
        }
        self.wrong += other.wrong;
        self.lost += other.lost;
        self.late += other.late;
        self.duplicate += other.duplicate;
        self.malformed += other.malformed;
        self.elapsed = self.elapsed.max(other.elapsed);
        self.send_retries += other.send_retries;
        self.abandoned_after = match (self.abandoned_after, other.abandoned_after) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.stalls += other.stalls;
        self.stalled_samples += other.stalled_samples;
    }

    /// Answers per second over the run.
    pub fn achieved_rate_hz(&self) -> u64 {
        let answered = self.sent - self.lost;
        (answered as f64 / self.elapsed.as_secs_f64().max(1e-9)).round() as u64
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Unsent,
    Sent,
    Answered,
}

#[derive(Clone, Copy)]
struct Entry {
    /// The request id in this ring slot.
    id: u64,
    /// Intended (open loop) or actual (ping-pong) send time, ns since the run began.
    t_ns: u64,
    state: State,
}

/// Ring entries for a run: four timeouts' worth of requests at the offered rate (at least
/// 64 Ki, at most the run), a power of two. `None` when that is more than
/// [`MAX_TRACKED`].
pub fn ring_len(load: &LoadSpec) -> Option<usize> {
    let total = load.warmup + load.samples;
    let in_flight = match load.mode {
        Mode::PingPong => 1,
        Mode::OpenLoop => (load.rate_hz as f64 * load.timeout.as_secs_f64()).ceil() as u64,
    };
    let want = in_flight.saturating_mul(4).max(1 << 16).min(total.max(1));
    let n = want.checked_next_power_of_two()?;
    (n <= MAX_TRACKED).then_some(n as usize)
}

/// A gap between two of the emulator's clock reads at least this much longer than its
/// quickest is a stall: the forwarder's rule, so the two counts compare.
pub use qfwd::stats::STALL_NS;

/// The ping-pong wait reads the clock at most every this many empty polls: a clock read
/// (~25-40 ns in a VM) costs more than an in-process poll, so reading it on every one
/// would delay seeing the answer. Fewer where a poll costs more (a UDP `recv`:
/// [`qfwd::stats::next_polls_per_read`] keeps the reads about a microsecond apart, so the
/// gaps between them vary far less than a stall).
const POLLS_PER_CLOCK_READ: u32 = 16;

/// Whether one of `windows` (stalls, in time order) overlaps `[sent, answered]`: the
/// request was in flight, or (open loop, timed from its intended send) due, while the
/// emulator did not run.
fn stalled_between(windows: &[(u64, u64)], sent: u64, answered: u64) -> bool {
    let first_ending_after_send = windows.partition_point(|&(_, end)| end <= sent);
    windows
        .get(first_ending_after_send)
        .is_some_and(|&(start, _)| start < answered)
}

/// Drives `client` with `load`, cycling through `workload`. `progress` is called now
/// and then with the number of requests sent so far.
pub fn run<C: Client>(
    client: &mut C,
    workload: &Workload,
    load: &LoadSpec,
    mut progress: impl FnMut(u64),
) -> Result<Outcome> {
    let target = client.describe();
    let fail = |detail: String| Error::Emulator {
        target: target.clone(),
        detail,
    };
    let total = load.warmup + load.samples;
    if total == 0 {
        return Err(fail("nothing to send: warmup + samples is 0".into()));
    }
    if total > MAX_REQUESTS {
        return Err(fail(format!(
            "{total} requests is more than {MAX_REQUESTS} per run"
        )));
    }
    if workload.is_empty() {
        return Err(fail("empty workload".into()));
    }
    if load.mode == Mode::OpenLoop && load.rate_hz == 0 {
        return Err(fail("open-loop needs a rate above 0".into()));
    }
    if !(0.0..=50.0).contains(&load.hostile_percent) {
        return Err(fail(format!(
            "hostile_percent {}: expected 0 ..= 50",
            load.hostile_percent
        )));
    }
    let ring = ring_len(load).ok_or_else(|| {
        fail(format!(
            "{} req/s x {:?} timeout is more requests in flight than the {MAX_TRACKED} the \
             emulator tracks; lower the timeout",
            load.rate_hz, load.timeout
        ))
    })?;
    let mut run = Run {
        entries: vec![
            Entry {
                id: u64::MAX,
                t_ns: 0,
                state: State::Unsent,
            };
            ring
        ],
        evicted_unanswered: 0,
        last_sent_ns: 0,
        hostile: (load.hostile_percent > 0.0)
            .then(|| Hostile::new(workload.function_id, workload.bad_argument.clone())),
        hostile_per_request: load.hostile_percent / 100.0,
        hostile_due: 0.0,
        hostile_counts: HostileCounts::default(),
        histogram: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("static bounds"),
        outcome_errors: Vec::new(),
        ok: 0,
        wrong: 0,
        late: 0,
        duplicate: 0,
        malformed: 0,
        send_retries: 0,
        sent_n: 0,
        answered_n: 0,
        warmup: load.warmup,
        timeout_ns: load.timeout.as_nanos() as u64,
        rx: vec![0u8; 65_536],
        tx: vec![0u8; workload.datagrams.iter().map(Vec::len).max().unwrap_or(0)],
        start: Instant::now(),
        last_answer_ns: 0,
        abandoned_after: None,
        last_clock_ns: 0,
        stall_rule: StallRule::default(),
        stalls: 0,
        stalled_samples: 0,
        stall_windows: Vec::new(),
        polls_per_read: POLLS_PER_CLOCK_READ,
    };
    let step = (total / 100).max(1);
    match load.mode {
        Mode::PingPong => run.ping_pong(client, workload, load, total, step, &mut progress)?,
        Mode::OpenLoop => run.open_loop(client, workload, load, total, step, &mut progress)?,
    }
    progress(total);
    let lost = run.evicted_unanswered
        + run
            .entries
            .iter()
            .filter(|e| e.state == State::Sent)
            .count() as u64;
    let sent = run.sent_n;
    let mut errs = run.outcome_errors;
    errs.sort();
    Ok(Outcome {
        histogram: run.histogram,
        sent,
        ok: run.ok,
        error_status: errs,
        wrong: run.wrong,
        lost,
        late: run.late,
        duplicate: run.duplicate,
        malformed: run.malformed,
        elapsed: Duration::from_nanos(run.last_answer_ns.max(1)),
        send_retries: run.send_retries,
        abandoned_after: run.abandoned_after,
        hostile: run.hostile_counts,
        stalls: run.stalls,
        stalled_samples: run.stalled_samples,
    })
}

/// Ping-pong gives up after this many consecutive lost requests.
const MAX_LOST_IN_A_ROW: u64 = 8;

struct Run {
    abandoned_after: Option<u64>,
    /// A ring indexed by request id ([`ring_len`]).
    entries: Vec<Entry>,
    /// Requests whose ring entry was reused before any answer came: lost.
    evicted_unanswered: u64,
    /// The send time of the last request sent.
    last_sent_ns: u64,
    hostile: Option<Hostile>,
    hostile_per_request: f64,
    /// Hostile datagrams owed so far (sent when it reaches 1).
    hostile_due: f64,
    hostile_counts: HostileCounts,
    histogram: Histogram<u64>,
    outcome_errors: Vec<(i32, u64)>,
    ok: u64,
    wrong: u64,
    late: u64,
    duplicate: u64,
    malformed: u64,
    send_retries: u64,
    sent_n: u64,
    answered_n: u64,
    warmup: u64,
    timeout_ns: u64,
    rx: Vec<u8>,
    tx: Vec<u8>,
    start: Instant,
    last_answer_ns: u64,
    /// The last [`Run::clock`] read, and the rule its gaps are judged by.
    last_clock_ns: u64,
    stall_rule: StallRule,
    stalls: u64,
    stalled_samples: u64,
    /// Every stall's gap, from one clock read to the next, in time order.
    stall_windows: Vec<(u64, u64)>,
    /// The ping-pong wait's empty polls between clock reads ([`POLLS_PER_CLOCK_READ`]).
    polls_per_read: u32,
}

impl Run {
    #[inline]
    fn slot(&self, id: u64) -> usize {
        id as usize & (self.entries.len() - 1)
    }

    /// Whether request `id` (sent) still waits for its answer.
    #[inline]
    fn waiting(&self, id: u64) -> bool {
        let e = &self.entries[self.slot(id)];
        e.id == id && e.state == State::Sent
    }

    /// Sends the hostile datagrams owed after one more request (`hostile_percent`).
    fn send_hostile<C: Client>(&mut self, client: &mut C) -> Result<()> {
        let Some(h) = self.hostile.as_mut() else {
            return Ok(());
        };
        self.hostile_due += self.hostile_per_request;
        while self.hostile_due >= 1.0 {
            self.hostile_due -= 1.0;
            let k = self.hostile_counts.sent as u32;
            let answered = h.kind(k).answer().is_some();
            // A full transport refuses it: not sent, tried with the next one.
            if client.send(h.datagram(k))? {
                self.hostile_counts.sent += 1;
                self.hostile_counts.answerable += u64::from(answered);
            }
        }
        Ok(())
    }

    /// An answer to a hostile datagram: its status must be its kind's.
    fn on_hostile_response(&mut self, request_id: u32, code: i32) {
        let expected = self
            .hostile
            .as_ref()
            .filter(|_| request_id - HOSTILE_ID_BASE < self.hostile_counts.sent as u32)
            .and_then(|h| h.kind_of_id(request_id).answer());
        // An overloaded forwarder may shed a late request before looking at it: -6 is a
        // right answer to any kind that gets one.
        if expected == Some(code) || (expected.is_some() && code == status::OVERLOAD) {
            self.hostile_counts.answered += 1;
        } else {
            self.hostile_counts.unexpected += 1;
        }
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Reads the clock, and notes a stall when the gap since the last read is
    /// [`STALL_NS`] beyond the quickest (counted once timed requests are being sent).
    #[inline]
    fn clock(&mut self) -> u64 {
        let now = self.now_ns();
        let prev = self.last_clock_ns;
        self.last_clock_ns = now;
        if self.stall_rule.is_stall(now.saturating_sub(prev)) {
            self.stall_windows.push((prev, now));
            if self.sent_n > self.warmup {
                self.stalls += 1;
            }
        }
        now
    }

    /// Patches id and timestamp into request `id`'s datagram and sends it, retrying
    /// while the transport is full (bounded by the timeout).
    fn send<C: Client>(
        &mut self,
        client: &mut C,
        workload: &Workload,
        id: u64,
        t_ns: u64,
    ) -> Result<()> {
        self.send_hostile(client)?;
        let d = &workload.datagrams[(id % workload.len() as u64) as usize];
        let len = d.len();
        self.tx[..len].copy_from_slice(d);
        self.tx[12..16].copy_from_slice(&(id as u32).to_le_bytes());
        self.tx[16..24].copy_from_slice(&t_ns.to_le_bytes());
        let at = self.slot(id);
        // The entry's last user, four timeouts of requests ago, never got an answer.
        self.evicted_unanswered += u64::from(self.entries[at].state == State::Sent);
        self.entries[at] = Entry {
            id,
            t_ns,
            state: State::Sent,
        };
        self.last_sent_ns = t_ns;
        self.sent_n += 1;
        let mut retried = false;
        loop {
            if client.send(&self.tx[..len])? {
                return Ok(());
            }
            if !retried {
                self.send_retries += 1;
                retried = true;
            }
            // Keep reading answers while the transport is full, or both sides wait.
            self.drain(client, workload)?;
            if self.now_ns().saturating_sub(t_ns) > self.timeout_ns {
                // The request never left: it will be counted as lost.
                return Ok(());
            }
        }
    }

    /// Reads every waiting response; returns how many.
    fn drain<C: Client>(&mut self, client: &mut C, workload: &Workload) -> Result<u64> {
        let mut n = 0;
        while let Some(len) = client.try_recv(&mut self.rx)? {
            let now = self.clock();
            self.on_response(len, now, workload);
            n += 1;
        }
        Ok(n)
    }

    fn on_response(&mut self, len: usize, now: u64, workload: &Workload) {
        let Ok(resp) = wire::parse_response(&self.rx[..len.min(self.rx.len())]) else {
            self.malformed += 1;
            return;
        };
        if resp.header.request_id >= HOSTILE_ID_BASE {
            self.on_hostile_response(resp.header.request_id, resp.header.status);
            return;
        }
        let id = resp.header.request_id as u64;
        let at = self.slot(id);
        let entry = &mut self.entries[at];
        if entry.id != id {
            if id < self.sent_n {
                // Its entry was reused: counted lost; the answer is very late.
                self.late += 1;
            } else {
                self.malformed += 1;
            }
            return;
        }
        match entry.state {
            State::Unsent => {
                self.malformed += 1;
                return;
            }
            State::Answered => {
                self.duplicate += 1;
                return;
            }
            State::Sent => {}
        }
        entry.state = State::Answered;
        self.answered_n += 1;
        self.last_answer_ns = now;
        let latency = now.saturating_sub(entry.t_ns).max(1);
        if latency > self.timeout_ns {
            self.late += 1;
        }
        if id >= self.warmup {
            self.histogram.saturating_record(latency);
            self.stalled_samples +=
                u64::from(stalled_between(&self.stall_windows, entry.t_ns, now));
        }
        let expected = &workload.expected[(id % workload.len() as u64) as usize];
        if resp.header.ptp_timestamp != entry.t_ns {
            self.wrong += 1;
        } else if resp.header.status != wire::status::OK {
            match self
                .outcome_errors
                .iter_mut()
                .find(|e| e.0 == resp.header.status)
            {
                Some(e) => e.1 += 1,
                None => self.outcome_errors.push((resp.header.status, 1)),
            }
        } else if resp.result != &expected[..] {
            self.wrong += 1;
        } else {
            self.ok += 1;
        }
    }

    #[inline]
    fn idle(&self, load: &LoadSpec) {
        if load.yield_when_idle {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }

    fn ping_pong<C: Client>(
        &mut self,
        client: &mut C,
        workload: &Workload,
        load: &LoadSpec,
        total: u64,
        step: u64,
        progress: &mut impl FnMut(u64),
    ) -> Result<()> {
        let mut lost_in_a_row = 0;
        for id in 0..total {
            if id % step == 0 {
                progress(id);
            }
            let t = self.clock();
            self.send(client, workload, id, t)?;
            // Wait for this request's answer (earlier late ones are classified as they come).
            // The clock (stalls, the timeout) is read every `polls_per_read`-th empty poll.
            let mut empty: u32 = 0;
            while self.waiting(id) {
                if self.drain(client, workload)? == 0 {
                    empty += 1;
                    if empty >= self.polls_per_read {
                        empty = 0;
                        let before = self.last_clock_ns;
                        let now = self.clock();
                        self.polls_per_read = next_polls_per_read(
                            self.polls_per_read,
                            Duration::from_nanos(now.saturating_sub(before)),
                            POLLS_PER_CLOCK_READ,
                        );
                        if now.saturating_sub(t) > self.timeout_ns {
                            break;
                        }
                    }
                    self.idle(load);
                }
            }
            if self.waiting(id) {
                lost_in_a_row += 1;
                if lost_in_a_row == MAX_LOST_IN_A_ROW {
                    self.abandoned_after = Some(lost_in_a_row);
                    break;
                }
            } else {
                lost_in_a_row = 0;
            }
        }
        self.wait_for_stragglers(client, workload, load)
    }

    fn open_loop<C: Client>(
        &mut self,
        client: &mut C,
        workload: &Workload,
        load: &LoadSpec,
        total: u64,
        step: u64,
        progress: &mut impl FnMut(u64),
    ) -> Result<()> {
        let period_ns = 1e9 / load.rate_hz as f64;
        let mut next: u64 = 0;
        while next < total {
            let now = self.clock();
            // Send everything whose time has come, each stamped with its intended time.
            let first = next;
            while next < total {
                let intended = (next as f64 * period_ns) as u64;
                if intended > now {
                    break;
                }
                if next % step == 0 {
                    progress(next);
                }
                self.send(client, workload, next, intended)?;
                next += 1;
            }
            if next > first {
                // The sends are the emulator's own work, not a stall: the next gap starts here.
                self.last_clock_ns = self.now_ns();
            }
            if self.drain(client, workload)? == 0 {
                self.idle(load);
            }
        }
        self.wait_for_stragglers(client, workload, load)
    }

    /// After the last send: collect answers until all are in or the timeout passes.
    fn wait_for_stragglers<C: Client>(
        &mut self,
        client: &mut C,
        workload: &Workload,
        load: &LoadSpec,
    ) -> Result<()> {
        let deadline = self.last_sent_ns + self.timeout_ns;
        while self.answered_n < self.sent_n && self.clock() < deadline {
            if self.drain(client, workload)? == 0 {
                self.idle(load);
            }
        }
        Ok(())
    }
}

/// A percentile table for the terminal, latencies in µs.
pub fn percentile_table(h: &Histogram<u64>) -> String {
    let mut s = String::new();
    if h.is_empty() {
        return "no samples\n".to_string();
    }
    let us = |v: u64| v as f64 / 1000.0;
    s.push_str(&format!("{:>10} {:>12}\n", "percentile", "latency_us"));
    s.push_str(&format!("{:>10} {:>12.3}\n", "min", us(h.min())));
    for (label, q) in [
        ("50%", 0.5),
        ("90%", 0.9),
        ("99%", 0.99),
        ("99.9%", 0.999),
        ("99.99%", 0.9999),
    ] {
        s.push_str(&format!(
            "{:>10} {:>12.3}\n",
            label,
            us(h.value_at_quantile(q))
        ));
    }
    s.push_str(&format!("{:>10} {:>12.3}\n", "max", us(h.max())));
    s.push_str(&format!(
        "{:>10} {:>12.3}  (stdev {:.3}, {} samples)\n",
        "mean",
        h.mean() / 1000.0,
        h.stdev() / 1000.0,
        h.len()
    ));
    s
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sent {} = ok {} + error status {} + wrong {} + lost {}{}; late {}, duplicate {}, malformed {}, send retries {}; {} answers/s; \
             emulator stalls {} ({} timed samples in flight or due during one)",
            self.sent,
            self.ok,
            self.error_status_total(),
            self.wrong,
            self.lost,
            if self.adds_up() { "" } else { " (DOES NOT ADD UP: bug)" },
            self.late,
            self.duplicate,
            self.malformed,
            self.send_retries,
            self.achieved_rate_hz(),
            self.stalls,
            self.stalled_samples
        )?;
        for (code, n) in &self.error_status {
            write!(f, "\n  status {code} ({}): {n}", wire::status::name(*code))?;
        }
        let h = &self.hostile;
        if h.sent > 0 {
            write!(
                f,
                "\n  hostile datagrams sent {} ({} answerable): answered as their kind \
                 expects {}, unexpected answers {}, unanswered {}",
                h.sent,
                h.answerable,
                h.answered,
                h.unexpected,
                h.answerable.saturating_sub(h.answered)
            )?;
        }
        if let Some(n) = self.abandoned_after {
            write!(
                f,
                "\n  ABANDONED: {n} requests in a row got no answer within the timeout; \
                 the rest were not sent"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qfwd::config::RunConfig;
    use qfwd::forward::IdlePolicy;
    use qfwd::transport::inproc;

    fn inproc_forwarder() -> (inproc::InprocClient, qfwd::serve::Running) {
        inproc_forwarder_with(256, RunConfig::default().queue_deadline_us)
    }

    /// A forwarder on a ring of `slots`, answering -6 to requests older than
    /// `queue_deadline_us` (0: never).
    fn inproc_forwarder_with(
        slots: usize,
        queue_deadline_us: u64,
    ) -> (inproc::InprocClient, qfwd::serve::Running) {
        let (client, server) = inproc::channel(slots, 2048).unwrap();
        let cfg = RunConfig {
            idle: IdlePolicy::Yield,
            stats_interval_s: 0.0,
            queue_deadline_us,
            transport: qfwd::transport::TransportKind::Inproc,
            ..Default::default()
        };
        let wiring = qfwd::serve::Wiring::Ring(server);
        (client, qfwd::serve::start(&cfg, wiring).unwrap())
    }

    fn load(mode: Mode) -> LoadSpec {
        LoadSpec {
            mode,
            rate_hz: 20_000,
            warmup: 100,
            samples: 2_000,
            timeout: Duration::from_secs(2),
            yield_when_idle: true,
            ..LoadSpec::default()
        }
    }

    #[test]
    fn hostile_datagrams_are_dropped_or_answered_as_their_kind_expects() {
        let (mut client, fwd) = inproc_forwarder();
        let w = Workload::parity("parity", 8, 64, 3);
        let l = LoadSpec {
            hostile_percent: 5.0,
            ..load(Mode::PingPong)
        };
        let o = run(&mut client, &w, &l, |_| {}).unwrap();
        fwd.stop();
        let s = fwd.join().unwrap().stats;
        assert_eq!((o.ok, o.wrong, o.lost), (o.sent, 0, 0), "{o}");
        let h = o.hostile;
        // 5 % of 2 100 requests, 4 of each 5 kinds (no bad argument for parity) answered.
        assert_eq!(h.sent, 105, "{o}");
        assert_eq!((h.answerable, h.answered, h.unexpected), (63, 63, 0), "{o}");
        assert_eq!(s.received, o.sent + h.sent, "{s}");
        assert_eq!(
            s.dropped(qfwd::stats::DropKind::TruncatedHeader)
                + s.dropped(qfwd::stats::DropKind::BadMagic),
            h.sent - h.answerable,
            "{s}"
        );
        assert!(s.adds_up());
        assert!(o.to_string().contains("hostile datagrams sent 105"), "{o}");
    }

    /// Takes every request, answers none.
    struct BlackHole;
    impl Client for BlackHole {
        fn send(&mut self, _: &[u8]) -> qfwd::Result<bool> {
            Ok(true)
        }
        fn try_recv(&mut self, _: &mut [u8]) -> qfwd::Result<Option<usize>> {
            Ok(None)
        }
        fn describe(&self) -> String {
            "black hole".into()
        }
    }

    #[test]
    fn a_run_longer_than_its_ring_counts_every_lost_request() {
        // 200 000 requests at 10 M/s with a 1 ms timeout: a ring of 64 Ki entries, each
        // reused about three times.
        let l = LoadSpec {
            mode: Mode::OpenLoop,
            rate_hz: 10_000_000,
            warmup: 0,
            samples: 200_000,
            timeout: Duration::from_millis(1),
            ..LoadSpec::default()
        };
        assert_eq!(ring_len(&l), Some(1 << 16));
        let w = Workload::parity("parity", 8, 16, 1);
        let o = run(&mut BlackHole, &w, &l, |_| {}).unwrap();
        assert_eq!((o.sent, o.lost), (200_000, 200_000), "{o}");
        assert!(o.adds_up());
        // A ring never outgrows MAX_TRACKED; an impossible one is refused up front.
        let huge = LoadSpec {
            rate_hz: 100_000_000,
            samples: 1 << 30,
            timeout: Duration::from_secs(60),
            ..l
        };
        assert_eq!(ring_len(&huge), None);
        let e = run(&mut BlackHole, &w, &huge, |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("lower the timeout"), "{e}");
    }

    #[test]
    fn ping_pong_through_a_forwarder_is_all_correct() {
        let (mut client, fwd) = inproc_forwarder();
        let w = Workload::parity("parity", 32, 64, 1);
        let o = run(&mut client, &w, &load(Mode::PingPong), |_| {}).unwrap();
        assert_eq!(
            (o.sent, o.ok, o.lost, o.errors()),
            (2_100, 2_100, 0, 0),
            "{o}"
        );
        assert_eq!(o.histogram.len(), 2_000);
        assert!(o.adds_up());
        fwd.stop();
        let s = fwd.join().unwrap().stats;
        assert_eq!(s.answered_ok, 2_100);
        assert!(s.adds_up());
    }

    #[test]
    fn open_loop_times_from_intended_send() {
        // A ring that holds the whole run and no queue deadline: on a loaded CI host the
        // forwarder may be descheduled for tens of ms, which must not lose a request here.
        let (mut client, fwd) = inproc_forwarder_with(4096, 0);
        let w = Workload::parity("parity", 64, 64, 2);
        let o = run(&mut client, &w, &load(Mode::OpenLoop), |_| {}).unwrap();
        assert_eq!((o.sent, o.ok, o.lost), (2_100, 2_100, 0), "{o}");
        // 2100 requests at 20k/s take ~105 ms: the run cannot be much shorter.
        assert!(o.elapsed >= Duration::from_millis(100), "{:?}", o.elapsed);
        drop(fwd);
    }

    #[test]
    fn wrong_answers_unknown_functions_and_loss_are_classified() {
        // Expected answers deliberately wrong for every other request.
        let (mut client, fwd) = inproc_forwarder();
        let pairs = (0..4u8)
            .map(|i| {
                let arg = vec![i];
                let right = parity(&arg);
                (arg, vec![if i % 2 == 0 { right } else { right ^ 1 }])
            })
            .collect();
        let w = Workload::from_pairs("parity", pairs);
        let l = LoadSpec {
            warmup: 0,
            samples: 40,
            ..load(Mode::PingPong)
        };
        let o = run(&mut client, &w, &l, |_| {}).unwrap();
        assert_eq!((o.ok, o.wrong), (20, 20), "{o}");

        let w = Workload::parity("no-such-handler", 8, 4, 3);
        let o = run(&mut client, &w, &l, |_| {}).unwrap();
        assert_eq!(
            o.error_status,
            vec![(wire::status::UNKNOWN_FUNCTION, 40)],
            "{o}"
        );
        assert!(o.adds_up());
        drop(fwd);

        // Nobody answers: everything is lost after the timeout, and it adds up.
        let (mut client, _server) = inproc::channel(64, 256).unwrap();
        let l = LoadSpec {
            samples: 5,
            timeout: Duration::from_millis(5),
            ..l
        };
        let o = run(
            &mut client,
            &Workload::parity("parity", 8, 1, 4),
            &l,
            |_| {},
        )
        .unwrap();
        assert_eq!((o.sent, o.lost), (5, 5), "{o}");
        assert!(o.adds_up());
        assert_eq!(o.abandoned_after, None);

        // A dead forwarder: ping-pong stops after a few timeouts instead of waiting out
        // every one, and what was sent still adds up.
        let l = LoadSpec { samples: 1000, ..l };
        let o = run(
            &mut client,
            &Workload::parity("parity", 8, 1, 4),
            &l,
            |_| {},
        )
        .unwrap();
        assert_eq!(o.abandoned_after, Some(MAX_LOST_IN_A_ROW), "{o}");
        assert_eq!(
            (o.sent, o.lost),
            (MAX_LOST_IN_A_ROW, MAX_LOST_IN_A_ROW),
            "{o}"
        );
        assert!(o.adds_up());
        assert!(o.to_string().contains("ABANDONED"), "{o}");
    }

    /// Answers parity at once, `delay` requests late (answers wait until that many newer
    /// requests are sent; 0 = on the first poll), and sleeps `stall` on the first poll
    /// after sending each request in `stall_after`.
    struct EchoClient {
        delay: usize,
        waiting: std::collections::VecDeque<Vec<u8>>,
        stall_after: Vec<u32>,
        stall: Duration,
        stall_next_poll: bool,
    }

    impl EchoClient {
        fn new(delay: usize, stall_after: Vec<u32>, stall: Duration) -> Self {
            EchoClient {
                delay,
                waiting: Default::default(),
                stall_after,
                stall,
                stall_next_poll: false,
            }
        }
    }

    impl Client for EchoClient {
        fn send(&mut self, bytes: &[u8]) -> qfwd::Result<bool> {
            let req = wire::parse_request(bytes).expect("the emulator sends valid requests");
            let mut out = vec![0u8; HEADER_LEN + 1];
            let h = req.header;
            wire::write_response(
                &mut out,
                0,
                h.request_id,
                h.ptp_timestamp,
                &[parity(req.arg)],
            )
            .expect("room for one byte");
            self.waiting.push_back(out);
            // Sticky until the next poll: an emulator behind its schedule sends the next
            // requests in the same burst, and they must not cancel the stall.
            self.stall_next_poll |= self.stall_after.contains(&h.request_id);
            Ok(true)
        }

        fn try_recv(&mut self, buf: &mut [u8]) -> qfwd::Result<Option<usize>> {
            if std::mem::take(&mut self.stall_next_poll) {
                std::thread::sleep(self.stall);
                return Ok(None);
            }
            if self.waiting.len() <= self.delay {
                return Ok(None);
            }
            let r = self.waiting.pop_front().expect("not empty");
            buf[..r.len()].copy_from_slice(&r);
            Ok(Some(r.len()))
        }

        fn describe(&self) -> String {
            "echo".into()
        }
    }

    #[test]
    fn a_sample_is_stalled_when_a_stall_overlaps_its_round_trip() {
        let w = [(10, 20), (30, 40)];
        for (sent, answered, stalled) in [
            (0, 5, false),
            (0, 10, false), // answered as the emulator stopped: seen before the gap
            (0, 11, true),
            (15, 16, true),  // sent (due) inside the gap
            (20, 30, false), // between the two gaps
            (19, 30, true),
            (25, 35, true),
            (0, 100, true),
            (40, 50, false),
        ] {
            assert_eq!(
                stalled_between(&w, sent, answered),
                stalled,
                "{sent}..{answered}"
            );
        }
        assert!(!stalled_between(&[], 0, 100));
    }

    /// Samples at least `floor` long: with an echo client, only a stall makes one.
    fn slow_samples(o: &Outcome, floor: Duration) -> u64 {
        o.histogram
            .iter_recorded()
            .filter(|v| v.value_iterated_to() >= floor.as_nanos() as u64)
            .map(|v| v.count_at_value())
            .sum()
    }

    #[test]
    fn ping_pong_counts_the_samples_the_emulator_stalled_in() {
        let w = Workload::parity("parity", 8, 16, 6);
        let stall = Duration::from_millis(2);
        // Requests 3 (warm-up), 40 and 90 stall the emulator while they are in flight.
        let mut client = EchoClient::new(0, vec![3, 40, 90], stall);
        let l = LoadSpec {
            warmup: 10,
            samples: 200,
            yield_when_idle: false,
            ..load(Mode::PingPong)
        };
        let o = run(&mut client, &w, &l, |_| {}).unwrap();
        assert_eq!((o.ok, o.errors()), (210, 0), "{o}");
        // Each slow sample's gap is one the emulator saw: every one is counted (the host
        // may add stalls of its own, never fewer).
        let slow = slow_samples(&o, stall);
        assert!(
            slow >= 2,
            "the two timed stalls are in the histogram: {slow}"
        );
        assert!(o.stalled_samples >= slow, "{o}");
        assert!(
            o.stalls >= o.stalled_samples,
            "one sample in flight per stall: {o}"
        );
        assert!(o.stalled_samples <= 200);
        assert!(o.to_string().contains("emulator stalls"), "{o}");
    }

    #[test]
    fn open_loop_counts_the_samples_in_flight_and_due_during_a_stall() {
        let w = Workload::parity("parity", 8, 16, 7);
        // At 20 000 requests/s, ~400 requests fall due while request 499 stalls the
        // emulator for 20 ms (answers lag one request, so one or two are in flight).
        // Request 500 falls due during that stall and goes out in the catch-up burst; its
        // stall must still happen (an emulator behind its schedule on a busy host does the
        // same), so ~800 are due across the two. The host's own stalls mark a few each:
        // far fewer than 800 on a busy 2-core VM too.
        let stall = Duration::from_millis(20);
        let mut client = EchoClient::new(1, vec![499, 500], stall);
        let l = LoadSpec {
            warmup: 100,
            samples: 2_000,
            timeout: Duration::from_millis(200),
            yield_when_idle: false,
            ..load(Mode::OpenLoop)
        };
        let o = run(&mut client, &w, &l, |_| {}).unwrap();
        // The last one waits in the client for a newer request that never comes: lost.
        assert_eq!((o.ok, o.lost, o.errors()), (2_099, 1, 0), "{o}");
        assert!(o.stalls >= 2, "{o}");
        assert!(o.stalled_samples >= 700, "due during the 40 ms: {o}");
        assert!(o.stalled_samples >= slow_samples(&o, stall / 2), "{o}");
    }

    #[test]
    fn bad_specs_are_refused() {
        let (mut client, _server) = inproc::channel(4, 256).unwrap();
        let w = Workload::parity("parity", 8, 1, 5);
        let l = LoadSpec {
            mode: Mode::OpenLoop,
            rate_hz: 0,
            ..LoadSpec::default()
        };
        assert!(run(&mut client, &w, &l, |_| {})
            .unwrap_err()
            .to_string()
            .contains("rate"));
        let l = LoadSpec {
            warmup: 0,
            samples: 0,
            ..LoadSpec::default()
        };
        assert!(run(&mut client, &w, &l, |_| {}).is_err());
    }
}

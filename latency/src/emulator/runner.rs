//! The state of one run: the ring of requests in flight, the checks on every answer,
//! the stall watch, and the ping-pong and open-loop pacing.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use qfwd::stats::{next_polls_per_read, StallRule};
use qfwd::transport::Client;
use qfwd::wire::{self, status};

use crate::hostile::{Hostile, HOSTILE_ID_BASE};
use crate::Result;

use super::outcome::{HostileCounts, Outcome};
use super::workload::Workload;
use super::LoadSpec;

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

/// The ping-pong wait reads the clock at most every this many empty polls: a clock read
/// (~25-40 ns in a VM) costs more than an in-process poll, so reading it on every one
/// would delay seeing the answer. Fewer where a poll costs more (a UDP `recv`:
/// [`qfwd::stats::next_polls_per_read`] keeps the reads about a microsecond apart, so the
/// gaps between them vary far less than a stall).
const POLLS_PER_CLOCK_READ: u32 = 16;

/// Whether one of `windows` (stalls, in time order) overlaps `[sent, answered]`: the
/// request was in flight, or (open loop, timed from its intended send) due, while the
/// emulator did not run.
pub(super) fn stalled_between(windows: &[(u64, u64)], sent: u64, answered: u64) -> bool {
    let first_ending_after_send = windows.partition_point(|&(_, end)| end <= sent);
    windows
        .get(first_ending_after_send)
        .is_some_and(|&(start, _)| start < answered)
}

/// Ping-pong gives up after this many consecutive lost requests.
pub(super) const MAX_LOST_IN_A_ROW: u64 = 8;

pub(super) struct Run {
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
    /// A run of `load` over `workload`, tracking `ring` requests at once.
    pub(super) fn new(workload: &Workload, load: &LoadSpec, ring: usize) -> Run {
        Run {
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
        }
    }

    /// What the run measured; a request still unanswered (in the ring or evicted from it) is lost.
    pub(super) fn into_outcome(self) -> Outcome {
        let lost = self.evicted_unanswered
            + self
                .entries
                .iter()
                .filter(|e| e.state == State::Sent)
                .count() as u64;
        let sent = self.sent_n;
        let mut errs = self.outcome_errors;
        errs.sort();
        Outcome {
            histogram: self.histogram,
            sent,
            ok: self.ok,
            error_status: errs,
            wrong: self.wrong,
            lost,
            late: self.late,
            duplicate: self.duplicate,
            malformed: self.malformed,
            elapsed: Duration::from_nanos(self.last_answer_ns.max(1)),
            send_retries: self.send_retries,
            abandoned_after: self.abandoned_after,
            hostile: self.hostile_counts,
            stalls: self.stalls,
            stalled_samples: self.stalled_samples,
        }
    }

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

    pub(super) fn ping_pong<C: Client>(
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

    pub(super) fn open_loop<C: Client>(
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

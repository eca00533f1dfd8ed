//! The forwarding loop: receive, validate, hand to the backend, answer.
//!
//! One thread, busy-polling. Per message there is no allocation, no lock and no system
//! call other than the transport's own; transport and backend are generic parameters,
//! so nothing is dispatched dynamically. Every request whose header parses gets exactly
//! one response (a result or an error status); everything else is dropped and counted.
//! A watchdog answers requests the backend has not completed by their deadline.
//!
//! Overload speaks. A request reaches the forwarder through a queue it does not see: the
//! kernel's socket buffer (udp), the soft NIC's receive ring and the socket behind it. Where
//! the transport knows when a datagram reached the host (a kernel receive timestamp, a CQE
//! timestamp), a well-formed request that waited longer than the queue deadline is
//! answered at once with `OVERLOAD` (-6) and counted as expired, instead of being computed
//! and answered too late to be of use. Answering (rather than dropping) keeps the
//! protocol's promise that every request whose header parses gets exactly one response:
//! the QPU controller learns at once that this round was refused, instead of waiting out
//! its own timeout, and the answer costs a header-sized send, a fraction of a decode, so
//! shedding catches up with the queue. What the kernel itself drops (a full socket buffer)
//! cannot be answered: it is read from the socket's drop counter and counted
//! ([`DropKind::SocketOverflow`]), so the totals still add up over every datagram that
//! reached the host.
//!
//! The loop also watches its own thread, as the emulator does its own: a gap between two
//! of its clock reads [`STALL_NS`](crate::stats::STALL_NS) or more beyond the quickest is a *stall* (the host ran
//! something else on the core), and a request in service across one is counted
//! ([`Stats::stalled_requests`]): its service time includes time the forwarder did not
//! run. The clock is read where the loop reads it anyway (about every microsecond of
//! polling, and at each request's receipt and answer); the time a backend computes inside
//! `submit` is the forwarder's own work, never a stall.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::backend::{Backend, Completion};
use crate::handler::{Registry, MAX_RESULT_LEN};
use crate::stats::{next_polls_per_read, DropKind, StallRule, Stats};
use crate::transport::Transport;
use crate::wire::{self, status, RequestHeader, WireError, HEADER_LEN};

pub use crate::idle::IdlePolicy;

/// Tunables of the loop.
#[derive(Debug, Clone)]
pub struct ForwardConfig {
    /// Largest request argument accepted, in bytes; larger ones get `OVERSIZED`.
    pub max_request_bytes: usize,
    /// Most datagrams received per poll before completions are reaped.
    pub batch: usize,
    /// Most requests handed to the backend and not yet answered.
    pub max_in_flight: usize,
    /// A request not completed within this gets `DECODER_TIMEOUT`.
    pub watchdog: Duration,
    pub idle: IdlePolicy,
    /// After a stop, how long in-flight requests may still complete before they are
    /// answered with `SHUTTING_DOWN`.
    pub drain: Duration,
    /// A request that waited longer than this between reaching the host and being read
    /// (where the transport knows its arrival time) is answered `OVERLOAD` at once, not
    /// computed; `None`: no such deadline. See the module docs.
    pub queue_deadline: Option<Duration>,
}

impl Default for ForwardConfig {
    fn default() -> Self {
        ForwardConfig {
            max_request_bytes: 4096,
            batch: 32,
            max_in_flight: 1024,
            watchdog: Duration::from_millis(10),
            idle: IdlePolicy::Spin,
            drain: Duration::from_millis(100),
            // Off in the library; `qfwd run` sets 10 ms (`RunConfig::queue_deadline_us`).
            queue_deadline: None,
        }
    }
}

#[derive(Clone, Copy)]
struct InFlight<P> {
    peer: P,
    header: RequestHeader,
    /// When the forwarder took the request: before `submit` for a backend that computes
    /// in it, right after for a device backend (see [`Backend::computes_in_submit`]).
    received_at: Instant,
    /// Submission number: tells this use of a token from earlier ones in `order`.
    seq: u64,
    /// Answered already (by the watchdog); the token returns to the free list only when
    /// the backend completes it, so a slot the device still owns is never reused.
    answered: bool,
    /// [`Stats::stalls`] when it was received: more at its answer means it was in service
    /// across a stall.
    stalls_at_receipt: u64,
}

/// Most rounds between two of the loop's clock reads (well under a microsecond of
/// in-process polls when spinning).
const MAX_ROUNDS_PER_READ: u32 = 64;

/// The loop's clock: every read ends a gap since the previous one, and a gap
/// [`STALL_NS`](crate::stats::STALL_NS) beyond the quickest is counted as a stall.
struct StallClock {
    last: Instant,
    rule: StallRule,
    /// The next gap holds the forwarder's own work (a decode inside `submit`).
    own_work: bool,
    /// Off while draining after a stop, where the loop yields on purpose.
    watching: bool,
}

impl StallClock {
    fn new() -> Self {
        StallClock {
            last: Instant::now(),
            rule: StallRule::default(),
            own_work: false,
            watching: true,
        }
    }

    #[inline]
    fn read(&mut self, stats: &mut Stats) -> Instant {
        let now = Instant::now();
        let gap = now.saturating_duration_since(self.last);
        self.last = now;
        if !std::mem::take(&mut self.own_work)
            && self.watching
            && self.rule.is_stall(gap.as_nanos() as u64)
        {
            stats.stalls += 1;
        }
        now
    }
}

/// The loop's state: transport, backend, handlers, in-flight table, counters.
pub struct Forwarder<T: Transport, B: Backend> {
    transport: T,
    backend: B,
    registry: Registry,
    config: ForwardConfig,
    rx: Vec<u8>,
    tx: Vec<u8>,
    in_flight: Vec<Option<InFlight<T::Peer>>>,
    free_tokens: Vec<u32>,
    /// (token, seq) in submission order: the watchdog looks at the oldest live entry only,
    /// so a poll costs O(1), not a scan of the whole table (which, done on every idle
    /// round, delayed each GPU completion by about a microsecond).
    order: VecDeque<(u32, u64)>,
    next_seq: u64,
    stats: Stats,
    clock: StallClock,
    /// Stopped: requests still read are answered `SHUTTING_DOWN`, not computed.
    stopping: bool,
}

/// Stops the loop from outside: a flag, a deadline, or both.
pub struct StopWhen<'a> {
    pub flag: &'a AtomicBool,
    pub deadline: Option<Instant>,
}

impl<T: Transport, B: Backend> Forwarder<T, B> {
    pub fn new(transport: T, backend: B, registry: Registry, config: ForwardConfig) -> Self {
        let slots = config.max_in_flight.max(1);
        // Room for the largest datagram the transport may deliver plus one byte, so an
        // over-long one shows as longer than the buffer.
        let rx_len = (HEADER_LEN + config.max_request_bytes + 1).max(crate::wire::MAX_DATAGRAM + 1);
        Forwarder {
            transport,
            backend,
            registry,
            rx: vec![0; rx_len],
            tx: vec![0; HEADER_LEN + MAX_RESULT_LEN],
            in_flight: vec![None; slots],
            free_tokens: (0..slots as u32).rev().collect(),
            // Entries leave once they reach the front, so the queue holds at most the
            // submissions of one watchdog period; this covers most without regrowing.
            order: VecDeque::with_capacity(slots.max(1024) * 4),
            next_seq: 0,
            stats: Stats::default(),
            clock: StallClock::new(),
            stopping: false,
            config,
        }
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// The transport, to feed or inspect it between polls (tests, fuzzing).
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Gives the backend back (to shut it down cleanly after the loop).
    pub fn into_backend(self) -> B {
        self.backend
    }

    /// Runs until `stop` says so, calling `on_interval` with the stats every
    /// `interval` (if any). Then drains in-flight requests and returns the counters.
    pub fn run(
        &mut self,
        stop: StopWhen<'_>,
        interval: Option<Duration>,
        mut on_interval: impl FnMut(&mut Stats, Duration),
    ) -> crate::Result<Stats> {
        let mut last_report = Instant::now();
        // Clock reads and the stop flag only every `rounds_per_read`-th round, busy or
        // idle: a clock read (~25-40 ns in a VM) costs more than a whole idle round of
        // in-process polls, so reading it every round would slow the detection of
        // requests and completions. The interval adapts so that reads stay about a
        // microsecond apart: 64 rounds of in-process polls, a few of UDP `recv` calls
        // (64 of those would take ~50 µs, and their sum would vary by more than a stall).
        let mut rounds_per_read: u32 = MAX_ROUNDS_PER_READ;
        let mut rounds: u32 = 0;
        loop {
            let worked = self.poll_once()?;
            rounds += 1;
            if !worked {
                match self.config.idle {
                    IdlePolicy::Spin => std::hint::spin_loop(),
                    IdlePolicy::Yield => std::thread::yield_now(),
                }
            }
            if rounds >= rounds_per_read {
                rounds = 0;
                let before = self.clock.last;
                let now = self.clock.read(&mut self.stats);
                rounds_per_read =
                    next_polls_per_read(rounds_per_read, now - before, MAX_ROUNDS_PER_READ);
                self.watchdog(now);
                if stop.flag.load(Ordering::Relaxed) || stop.deadline.is_some_and(|d| now >= d) {
                    break;
                }
                if let Some(iv) = interval {
                    let elapsed = now - last_report;
                    if elapsed >= iv {
                        self.stats.absorb_transport_drops(self.transport.drops());
                        on_interval(&mut self.stats, elapsed);
                        last_report = now;
                    }
                }
            }
        }
        self.drain()?;
        self.stats.absorb_transport_drops(self.transport.drops());
        Ok(self.stats.clone())
    }

    /// One round: receive up to `batch` datagrams, then reap completions. Returns
    /// whether anything happened.
    pub fn poll_once(&mut self) -> crate::Result<bool> {
        let mut worked = false;
        for _ in 0..self.config.batch {
            let Some((len, peer)) = self.transport.try_recv(&mut self.rx)? else {
                break;
            };
            worked = true;
            self.on_datagram(len, peer);
            // Answer what is ready before receiving more: batching receives must not
            // hold back finished responses.
            if self.backend.in_flight() > 0 {
                self.reap();
            }
        }
        if self.backend.in_flight() > 0 {
            worked |= self.reap() > 0;
        }
        Ok(worked)
    }

    fn on_datagram(&mut self, len: usize, peer: T::Peer) {
        self.stats.on_received();
        if !self.transport.is_allowed(&peer) {
            self.stats.on_dropped(DropKind::NotAllowed);
            return;
        }
        let datagram = &self.rx[..len.min(self.rx.len())];
        let (header, arg_range) = match wire::parse_request(datagram) {
            Ok(req) => (req.header, HEADER_LEN..HEADER_LEN + req.arg.len()),
            Err(WireError::TruncatedHeader { .. }) => {
                self.stats.on_dropped(DropKind::TruncatedHeader);
                return;
            }
            Err(WireError::BadMagic { .. }) => {
                self.stats.on_dropped(DropKind::BadMagic);
                return;
            }
            Err(e) => {
                // The header is readable: answer with the error.
                let header = wire::parse_request_header(datagram)
                    .expect("a length mismatch implies a readable header");
                let code = if header.arg_len as usize > self.config.max_request_bytes {
                    status::OVERSIZED
                } else {
                    e.status()
                };
                let now = self.clock.read(&mut self.stats);
                self.answer_error(peer, &header, code, now);
                return;
            }
        };
        if self.waited_too_long() {
            self.stats.expired += 1;
            let now = self.clock.read(&mut self.stats);
            self.answer_error(peer, &header, status::OVERLOAD, now);
            return;
        }
        if self.stopping {
            let now = self.clock.read(&mut self.stats);
            self.answer_error(peer, &header, status::SHUTTING_DOWN, now);
            return;
        }
        if header.arg_len as usize > self.config.max_request_bytes {
            let now = self.clock.read(&mut self.stats);
            self.answer_error(peer, &header, status::OVERSIZED, now);
            return;
        }
        let Some(handler) = self.registry.lookup(header.function_id) else {
            let now = self.clock.read(&mut self.stats);
            self.answer_error(peer, &header, status::UNKNOWN_FUNCTION, now);
            return;
        };
        let Some(token) = self.free_tokens.pop() else {
            let now = self.clock.read(&mut self.stats);
            self.answer_error(peer, &header, status::OVERLOAD, now);
            return;
        };
        let computes = self.backend.computes_in_submit();
        let before = computes.then(|| self.clock.read(&mut self.stats));
        let submitted = self
            .backend
            .submit_request(token, &header, handler, &self.rx[arg_range]);
        let received_at = match before {
            Some(at) => {
                self.clock.own_work = true;
                at
            }
            None => self.clock.read(&mut self.stats),
        };
        let stalls_at_receipt = self.stats.stalls;
        match submitted {
            Ok(()) => {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.in_flight[token as usize] = Some(InFlight {
                    peer,
                    header,
                    received_at,
                    seq,
                    answered: false,
                    stalls_at_receipt,
                });
                self.order.push_back((token, seq));
            }
            Err(code) => {
                self.free_tokens.push(token);
                self.answer_error(peer, &header, code, received_at);
            }
        }
    }

    /// Whether the datagram just received waited in the host longer than the queue
    /// deadline before this loop read it.
    #[inline]
    fn waited_too_long(&self) -> bool {
        match (self.config.queue_deadline, self.transport.last_arrival_ns()) {
            (Some(limit), Some(at)) => {
                crate::transport::realtime_ns().saturating_sub(at) > limit.as_nanos() as u64
            }
            _ => false,
        }
    }

    /// Reaps the backend's completions and answers each.
    fn reap(&mut self) -> usize {
        let Forwarder {
            transport,
            backend,
            tx,
            in_flight,
            free_tokens,
            stats,
            clock,
            ..
        } = self;
        backend.poll(|c: Completion<'_>| {
            let Some(entry) = in_flight.get_mut(c.token as usize).and_then(Option::take) else {
                // A token we never issued: a backend bug, but never a crash.
                stats.late_completions += 1;
                return;
            };
            free_tokens.push(c.token);
            if entry.answered {
                stats.late_completions += 1;
                return;
            }
            if c.sent_by_device {
                // The device side already sent the response to the QPU (GPU-initiated
                // doorbell): count it, send nothing.
                let now = clock.read(stats);
                stats.on_answered(c.status, now.saturating_duration_since(entry.received_at));
                stats.note_stalled(entry.stalls_at_receipt);
                return;
            }
            let (code, result) = if c.result.len() > MAX_RESULT_LEN {
                (status::BAD_ARGUMENT, &[][..])
            } else {
                (c.status, c.result)
            };
            let answered = send_response(
                transport,
                tx,
                stats,
                clock,
                entry.peer,
                &entry.header,
                code,
                result,
                entry.received_at,
            );
            if answered {
                stats.note_stalled(entry.stalls_at_receipt);
            }
        })
    }

    /// Answers requests older than the watchdog deadline with `DECODER_TIMEOUT`, oldest
    /// first, stopping at the first one still within its deadline.
    fn watchdog(&mut self, now: Instant) {
        if self.backend.in_flight() == 0 {
            self.order.clear();
            return;
        }
        let limit = self.config.watchdog;
        while let Some(&(token, seq)) = self.order.front() {
            let live = match &self.in_flight[token as usize] {
                Some(e) if e.seq == seq && !e.answered => {
                    Some((e.peer, e.header, e.received_at, e.stalls_at_receipt))
                }
                _ => None,
            };
            let Some((peer, header, at, stalls_at_receipt)) = live else {
                // Completed, or answered already: nothing left to watch.
                self.order.pop_front();
                continue;
            };
            if now.duration_since(at) <= limit {
                break;
            }
            self.order.pop_front();
            if let Some(e) = self.in_flight[token as usize].as_mut() {
                e.answered = true;
            }
            if self.answer_error(peer, &header, status::DECODER_TIMEOUT, at) {
                self.stats.note_stalled(stalls_at_receipt);
            }
        }
    }

    /// After a stop: answer what already waits in the transport with `SHUTTING_DOWN` (it
    /// reached the host, so it is counted), let in-flight requests finish, both within
    /// `drain`, then answer the rest with `SHUTTING_DOWN`, so every request still gets
    /// one response.
    fn drain(&mut self) -> crate::Result<()> {
        // The drain yields between polls on purpose: not the host's stalls.
        self.clock.watching = false;
        self.stopping = true;
        let deadline = Instant::now() + self.config.drain;
        while Instant::now() < deadline {
            let Some((len, peer)) = self.transport.try_recv(&mut self.rx)? else {
                break;
            };
            self.on_datagram(len, peer);
            if self.backend.in_flight() > 0 {
                self.reap();
            }
        }
        while self.backend.in_flight() > 0 && Instant::now() < deadline {
            if self.reap() == 0 {
                std::thread::yield_now();
            }
        }
        for i in 0..self.in_flight.len() {
            if let Some(e) = self.in_flight[i] {
                if !e.answered {
                    self.in_flight[i] = Some(InFlight {
                        answered: true,
                        ..e
                    });
                    self.answer_error(e.peer, &e.header, status::SHUTTING_DOWN, e.received_at);
                }
            }
        }
        Ok(())
    }

    /// Whether the response went out (else it is counted as dropped).
    fn answer_error(
        &mut self,
        peer: T::Peer,
        header: &RequestHeader,
        code: i32,
        at: Instant,
    ) -> bool {
        send_response(
            &mut self.transport,
            &mut self.tx,
            &mut self.stats,
            &mut self.clock,
            peer,
            header,
            code,
            &[],
            at,
        )
    }
}

/// Writes and sends one response; whether it went out (else it is counted as dropped).
#[allow(clippy::too_many_arguments)]
#[inline]
fn send_response<T: Transport>(
    transport: &mut T,
    tx: &mut [u8],
    stats: &mut Stats,
    clock: &mut StallClock,
    peer: T::Peer,
    header: &RequestHeader,
    code: i32,
    result: &[u8],
    received_at: Instant,
) -> bool {
    let len = match wire::write_response(tx, code, header.request_id, header.ptp_timestamp, result)
    {
        Ok(n) => n,
        Err(_) => {
            stats.on_dropped(DropKind::SendFailed);
            return false;
        }
    };
    match transport.send(peer, &tx[..len]) {
        Ok(()) => {
            let now = clock.read(stats);
            stats.on_answered(code, now.saturating_duration_since(received_at));
            true
        }
        Err(_) => {
            stats.on_dropped(DropKind::SendFailed);
            false
        }
    }
}

#[cfg(test)]
mod tests;

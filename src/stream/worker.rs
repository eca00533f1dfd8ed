//! A decoder thread of the CPU pool: it owns a contiguous range of streams, takes the
//! requests the dispatcher routed to it from its queue, applies them stream by stream, and
//! hands the responses back to the dispatcher, which sends them.
//!
//! Queue items and responses are the wire's own bytes behind a peer prefix
//! ([`super::link`]): a worker reads the same batches a GPU would.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use qfwd_decode::window::StreamModel;

use super::link::{self, PEER_BYTES};
use super::protocol::{
    self, BatchView, GetCorrections, Record, ResetDecoder, FLAG_RESET_CORRECTIONS, RECORD_BYTES,
};
use super::state::{RoundCounts, StreamState};
use crate::idle::{IdlePolicy, IdleWait};
use crate::transport::inproc::{Consumer, Producer};
use crate::wire::{self, status, HEADER_LEN};

/// How long a worker waits for room in its response queue before it counts a response
/// as dropped (the dispatcher drains it every poll; this is a stuck dispatcher).
const RESPONSE_DEADLINE: Duration = Duration::from_secs(1);

/// What a worker counted, returned when it stops.
#[derive(Debug, Clone, Default)]
pub struct WorkerCounts {
    /// Streams it owns: `first_stream .. first_stream + streams`.
    pub first_stream: u32,
    pub streams: u32,
    pub rounds: RoundCounts,
    /// Requests taken from its queue.
    pub items: u64,
    /// Responses handed to the dispatcher, and records in them.
    pub responses: u64,
    pub records: u64,
    /// Responses it could not hand over within the deadline (the dispatcher was stuck).
    pub responses_dropped: u64,
    /// Queue items that did not parse (a dispatcher bug; never expected).
    pub malformed_items: u64,
    /// Time spent applying requests, ns (its busy time).
    pub busy_ns: u64,
}

/// A worker's parts, moved onto its thread.
pub struct Worker {
    pub first_stream: u32,
    pub states: Vec<StreamState>,
    pub round_bytes: usize,
    pub queue: Consumer,
    pub responses: Producer,
    /// Largest response (prefix included) its queue slots hold.
    pub response_bytes: usize,
    pub idle: IdlePolicy,
    pub core: Option<usize>,
}

/// A response being filled (the peer prefix, the CUQS header, then records), and the
/// queue it goes to.
pub(super) struct Outgoing {
    responses: Producer,
    buf: Vec<u8>,
    records: usize,
    max_records: usize,
    request_id: u32,
    ptp_timestamp: u64,
    sent: u64,
    sent_records: u64,
    dropped: u64,
}

impl Worker {
    /// The states of `count` streams.
    pub fn states(model: &Arc<StreamModel>, count: u32) -> Vec<StreamState> {
        (0..count).map(|_| StreamState::new(model)).collect()
    }

    /// Serves until `closing` is set and its queue is empty.
    pub fn run(self, closing: &AtomicBool) -> WorkerCounts {
        if let Some(c) = self.core {
            if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
                tracing::warn!(
                    core = c,
                    "stream worker: cannot pin to core; running unpinned"
                );
            }
        }
        let mut counts = WorkerCounts {
            first_stream: self.first_stream,
            streams: self.states.len() as u32,
            ..WorkerCounts::default()
        };
        let Worker {
            first_stream,
            mut states,
            round_bytes,
            mut queue,
            responses,
            response_bytes,
            idle,
            ..
        } = self;
        let mut out = Outgoing::new(responses, response_bytes);
        let mut item = vec![0u8; u16::MAX as usize];
        let mut wait = IdleWait::new(idle);
        let mut apply = Apply {
            first_stream,
            states: &mut states,
            round_bytes,
        };
        loop {
            // Read `closing` before polling: a request queued before it was set is seen.
            let closing_now = closing.load(Ordering::Acquire);
            let Some(n) = queue.pop(&mut item) else {
                if closing_now {
                    break;
                }
                wait.idle();
                continue;
            };
            wait.worked();
            let start = Instant::now();
            counts.items += 1;
            if !apply.item(&item[..n], &mut counts.rounds, &mut out) {
                counts.malformed_items += 1;
            }
            out.flush();
            counts.busy_ns += start.elapsed().as_nanos() as u64;
        }
        counts.rounds.pending = states.iter().map(|s| s.pending()).sum();
        counts.responses = out.sent;
        counts.records = out.sent_records;
        counts.responses_dropped = out.dropped;
        counts
    }
}

/// The part of a worker that applies requests to its streams.
struct Apply<'a> {
    first_stream: u32,
    states: &'a mut [StreamState],
    round_bytes: usize,
}

impl Apply<'_> {
    /// Applies one routed request, its records into `out`; false when it does not parse.
    fn item(&mut self, item: &[u8], counts: &mut RoundCounts, out: &mut Outgoing) -> bool {
        let Some((peer, datagram)) = link::split(item) else {
            return false;
        };
        let Ok(req) = wire::parse_request(datagram) else {
            return false;
        };
        out.begin(peer, req.header.request_id, req.header.ptp_timestamp);
        let first = self.first_stream;
        let mut emit = |r: Record| out.push(r);
        match req.header.function_id {
            protocol::ENQUEUE_SYNDROMES_ID => {
                let Ok(batch) = BatchView::parse(req.arg, self.round_bytes) else {
                    return false;
                };
                for block in batch.blocks() {
                    for s in 0..usize::from(block.streams) {
                        let id = block.first_stream + s as u32;
                        self.states[(id - first) as usize].apply(id, &block, s, counts, &mut emit);
                    }
                }
            }
            protocol::GET_CORRECTIONS_ID => {
                let Ok(g) = GetCorrections::parse(req.arg) else {
                    return false;
                };
                let clear = g.flags & FLAG_RESET_CORRECTIONS != 0;
                self.states[(g.stream - first) as usize].corrections(g.stream, clear, &mut emit);
            }
            protocol::RESET_DECODER_ID => {
                let Ok(r) = ResetDecoder::parse(req.arg) else {
                    return false;
                };
                for id in r.first_stream..r.first_stream + r.streams {
                    self.states[(id - first) as usize].reset(id, counts, &mut emit);
                }
            }
            _ => return false,
        }
        true
    }
}

impl Outgoing {
    /// Responses of at most `response_bytes` (prefix included) into `responses`.
    pub(super) fn new(responses: Producer, response_bytes: usize) -> Outgoing {
        Outgoing {
            responses,
            buf: Vec::with_capacity(response_bytes),
            records: 0,
            max_records: (response_bytes - PEER_BYTES - HEADER_LEN) / RECORD_BYTES,
            request_id: 0,
            ptp_timestamp: 0,
            sent: 0,
            sent_records: 0,
            dropped: 0,
        }
    }

    /// Responses handed over, their records, and those dropped past the deadline.
    pub(super) fn totals(&self) -> (u64, u64, u64) {
        (self.sent, self.sent_records, self.dropped)
    }

    /// Adds a record, sending the response first when it is full.
    pub(super) fn push(&mut self, r: Record) {
        if self.records == self.max_records {
            self.flush();
            self.buf.truncate(PEER_BYTES + HEADER_LEN);
        }
        let at = self.buf.len();
        self.buf.resize(at + RECORD_BYTES, 0);
        r.encode(&mut self.buf[at..]);
        self.records += 1;
    }

    pub(super) fn begin(&mut self, peer: &[u8], request_id: u32, ptp_timestamp: u64) {
        self.buf.clear();
        self.buf.extend_from_slice(peer);
        self.buf.resize(PEER_BYTES + HEADER_LEN, 0);
        self.records = 0;
        self.request_id = request_id;
        self.ptp_timestamp = ptp_timestamp;
    }

    /// Writes the CUQS header and hands the response over (nothing when it has no record:
    /// a request that completes no window and refuses nothing is not answered).
    pub(super) fn flush(&mut self) {
        if self.records == 0 {
            return;
        }
        let header = wire::ResponseHeader {
            status: status::OK,
            result_len: (self.records * RECORD_BYTES) as u32,
            request_id: self.request_id,
            ptp_timestamp: self.ptp_timestamp,
        };
        // The buffer holds exactly header + records past the prefix.
        let written = wire::write_response_header(&mut self.buf[PEER_BYTES..], &header);
        debug_assert!(written.is_ok());
        let deadline = Instant::now() + RESPONSE_DEADLINE;
        loop {
            match self.responses.push(&self.buf) {
                Ok(true) => {
                    self.sent += 1;
                    self.sent_records += self.records as u64;
                    break;
                }
                Ok(false) if Instant::now() < deadline => std::thread::yield_now(),
                _ => {
                    self.dropped += 1;
                    // Told at the 1st, 2nd, 4th, ... drop; the summary has the total.
                    if self.dropped.is_power_of_two() {
                        tracing::warn!(
                            dropped = self.dropped,
                            "stream worker: response queue full past its deadline; response dropped"
                        );
                    }
                    break;
                }
            }
        }
        self.records = 0;
    }
}

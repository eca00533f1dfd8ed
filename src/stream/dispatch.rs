//! The pool's dispatcher: the one thread that owns the transport. It receives requests,
//! checks them, splits each batch by the worker that owns each stream, queues the parts,
//! and sends the responses the workers hand back (and its own: errors, unknown streams,
//! full queues). Like a NIC queue in front of the GPU's per-stream state.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::link::{self, PeerBytes, PEER_BYTES};
use super::protocol::{
    self, refusal, write_batch_header, write_block, BatchView, GetCorrections, Record, RecordKind,
    ResetDecoder, EXPECTED_UNKNOWN, HEADER_BYTES, RECORD_BYTES,
};
use super::state::RoundCounts;
use crate::idle::{IdlePolicy, IdleWait};
use crate::transport::inproc::{Consumer, Producer};
use crate::transport::Transport;
use crate::wire::{self, status, RequestHeader, WireError, HEADER_LEN, MAX_DATAGRAM};

/// What the dispatcher counted. Requests add up: `datagrams = requests() + not_allowed +
/// unparseable`, and `requests() = applied + answered_error()`.
#[derive(Debug, Clone, Default)]
pub struct DispatchCounts {
    /// Datagrams the transport delivered.
    pub datagrams: u64,
    /// Dropped: from a peer not on the allowlist.
    pub not_allowed: u64,
    /// Dropped: not a CUQR request (short, bad magic): no header to answer.
    pub unparseable: u64,
    /// Requests per function: enqueue_syndromes, get_corrections, reset_decoder, other.
    pub by_function: [u64; 4],
    /// Requests checked and routed (their rounds counted in the workers' or here).
    pub applied: u64,
    /// Requests answered with an error status, per status: bad_argument, length_mismatch,
    /// unknown_function, oversized.
    pub errors: [u64; 4],
    /// Rounds refused here (unknown streams, full queues); `received` counts them too.
    pub rounds: RoundCounts,
    /// Responses sent (the dispatcher's own and the workers'), their records, and sends the
    /// transport failed.
    pub responses: u64,
    pub records: u64,
    pub send_failures: u64,
    /// Parts of requests refused because their worker's queue was full.
    pub queue_full: u64,
}

impl DispatchCounts {
    pub fn requests(&self) -> u64 {
        self.by_function.iter().sum()
    }

    pub fn answered_error(&self) -> u64 {
        self.errors.iter().sum()
    }
}

/// Names of [`DispatchCounts::errors`]'s entries.
pub const ERROR_NAMES: [&str; 4] = [
    "bad_argument",
    "length_mismatch",
    "unknown_function",
    "oversized",
];

/// A part of a request being built for one worker: peer, CUQR header, batch.
struct Part {
    buf: Vec<u8>,
    len: usize,
    blocks: u32,
    entries: u32,
}

/// Where the request's argument starts in a part.
const ARG_AT: usize = PEER_BYTES + HEADER_LEN;

pub struct Dispatcher<T: Transport> {
    pub transport: T,
    pub round_bytes: usize,
    pub streams: u32,
    /// Streams per worker: worker `w` owns `w * chunk .. (w + 1) * chunk`.
    pub chunk: u32,
    pub queues: Vec<Producer>,
    pub responses: Vec<Consumer>,
    pub max_request_bytes: usize,
    pub batch: usize,
    pub idle: IdlePolicy,
    pub core: Option<usize>,
}

/// The dispatcher's working state.
struct Run<T: Transport> {
    d: Dispatcher<T>,
    rx: Vec<u8>,
    parts: Vec<Part>,
    /// Its own response to the current request: CUQS header, then records.
    own: Vec<u8>,
    own_records: usize,
    own_request: (u32, u64),
    /// Who the current request came from.
    own_peer: Option<T::Peer>,
    max_records: usize,
    popped: Vec<u8>,
    counts: DispatchCounts,
}

impl<T: Transport> Dispatcher<T>
where
    T::Peer: PeerBytes,
{
    /// Serves until `stop`; then tells the workers to finish (`closing`), forwards their
    /// last responses until all `workers_done`, and returns its counts.
    pub fn run(
        self,
        stop: &AtomicBool,
        closing: &AtomicBool,
        workers_done: &AtomicUsize,
    ) -> DispatchCounts {
        if let Some(c) = self.core {
            if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
                tracing::warn!(
                    core = c,
                    "stream dispatcher: cannot pin to core; running unpinned"
                );
            }
        }
        let workers = self.queues.len();
        let mut r = self.into_run();
        let mut wait = IdleWait::new(r.d.idle);
        loop {
            let stopping = stop.load(Ordering::Relaxed);
            if stopping {
                closing.store(true, Ordering::Release);
            }
            let done = workers_done.load(Ordering::Acquire) == workers;
            let mut worked = false;
            if !stopping {
                worked |= r.receive();
            }
            worked |= r.forward_responses();
            if done && !worked {
                // Every worker has returned: its responses are all in the queues, and
                // the poll above found none left.
                break;
            }
            if worked {
                wait.worked();
            } else {
                wait.idle();
            }
        }
        r.counts
    }
}

impl<T: Transport> Dispatcher<T>
where
    T::Peer: PeerBytes,
{
    /// Its working state: buffers sized once, before the first request.
    fn into_run(self) -> Run<T> {
        let workers = self.queues.len();
        let part_bytes = self.queues.first().map_or(0, |q| q.slot_bytes());
        let max_records = (self.max_request_bytes.min(MAX_DATAGRAM - HEADER_LEN)) / RECORD_BYTES;
        Run {
            parts: (0..workers)
                .map(|_| Part {
                    buf: vec![0; part_bytes],
                    len: 0,
                    blocks: 0,
                    entries: 0,
                })
                .collect(),
            rx: vec![0; MAX_DATAGRAM],
            own: Vec::with_capacity(HEADER_LEN + max_records * RECORD_BYTES),
            own_records: 0,
            own_request: (0, 0),
            own_peer: None,
            max_records,
            popped: vec![0; u16::MAX as usize],
            counts: DispatchCounts::default(),
            d: self,
        }
    }
}

impl<T: Transport> Run<T>
where
    T::Peer: PeerBytes,
{
    /// Takes up to `batch` datagrams; true when it took any.
    fn receive(&mut self) -> bool {
        let mut any = false;
        for _ in 0..self.d.batch {
            let got = match self.d.transport.try_recv(&mut self.rx) {
                Ok(Some(g)) => g,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "stream dispatcher: receive failed");
                    break;
                }
            };
            any = true;
            self.counts.datagrams += 1;
            let (len, peer) = got;
            if !self.d.transport.is_allowed(&peer) {
                self.counts.not_allowed += 1;
                continue;
            }
            self.request(len, peer);
        }
        any
    }

    fn request(&mut self, len: usize, peer: T::Peer) {
        let seen = len.min(self.rx.len());
        let header = match wire::parse_request_header(&self.rx[..seen]) {
            Ok(h) => h,
            Err(_) => {
                self.counts.unparseable += 1;
                return;
            }
        };
        self.counts.by_function[match header.function_id {
            protocol::ENQUEUE_SYNDROMES_ID => 0,
            protocol::GET_CORRECTIONS_ID => 1,
            protocol::RESET_DECODER_ID => 2,
            _ => 3,
        }] += 1;
        if len > HEADER_LEN + self.d.max_request_bytes {
            return self.error(peer, &header, status::OVERSIZED, 3);
        }
        let arg = match wire::parse_request(&self.rx[..len]) {
            Ok(v) => v.arg,
            Err(WireError::LengthMismatch { .. }) => {
                return self.error(peer, &header, status::LENGTH_MISMATCH, 1)
            }
            Err(_) => {
                self.counts.unparseable += 1;
                return;
            }
        };
        let arg_len = arg.len();
        // The receive buffer leaves `self` while its argument is read (no copy).
        let rx = std::mem::take(&mut self.rx);
        let arg = &rx[HEADER_LEN..HEADER_LEN + arg_len];
        self.own_begin(&header, peer);
        let ok = match header.function_id {
            protocol::ENQUEUE_SYNDROMES_ID => Some(self.enqueue(peer, &header, arg)),
            protocol::GET_CORRECTIONS_ID => Some(self.get_corrections(peer, &header, arg)),
            protocol::RESET_DECODER_ID => Some(self.reset(peer, &header, arg)),
            _ => None,
        };
        self.rx = rx;
        let Some(ok) = ok else {
            return self.error(peer, &header, status::UNKNOWN_FUNCTION, 2);
        };
        if ok {
            self.counts.applied += 1;
            self.own_flush(peer);
        } else {
            self.error(peer, &header, status::BAD_ARGUMENT, 0);
        }
    }

    fn error(&mut self, peer: T::Peer, header: &RequestHeader, code: i32, slot: usize) {
        self.counts.errors[slot] += 1;
        let mut buf = [0u8; HEADER_LEN];
        if wire::write_error_response(&mut buf, header, code).is_ok() {
            self.send(peer, &buf, 0);
        }
    }

    fn send(&mut self, peer: T::Peer, bytes: &[u8], records: usize) {
        match self.d.transport.send(peer, bytes) {
            Ok(()) => {
                self.counts.responses += 1;
                self.counts.records += records as u64;
            }
            Err(e) => {
                self.counts.send_failures += 1;
                // Counted always; told at the 1st, 2nd, 4th, ... so a peer that stops
                // reading cannot flood the log (the summary has the total).
                let n = self.counts.send_failures;
                if n.is_power_of_two() {
                    tracing::warn!(error = %e, failures = n, "stream dispatcher: send failed");
                }
            }
        }
    }

    fn worker_of(&self, stream: u32) -> usize {
        (stream / self.d.chunk) as usize
    }

    /// Routes a batch's blocks to the workers that own their streams; false when the
    /// batch does not parse.
    fn enqueue(&mut self, peer: T::Peer, header: &RequestHeader, arg: &[u8]) -> bool {
        let rb = self.d.round_bytes;
        let Ok(batch) = BatchView::parse(arg, rb) else {
            return false;
        };
        for p in &mut self.parts {
            p.len = ARG_AT + HEADER_BYTES;
            p.blocks = 0;
            p.entries = 0;
        }
        let n = self.d.streams;
        for block in batch.blocks() {
            let a = block.first_stream;
            let b = a + u32::from(block.streams);
            if b > n {
                let first = a.max(n);
                self.refuse(
                    first,
                    &block.header(),
                    refusal::UNKNOWN_STREAM,
                    u64::from(b - first),
                );
            }
            let mut s = a;
            while s < b.min(n) {
                let w = self.worker_of(s);
                let end = (((w as u32) + 1) * self.d.chunk).min(b).min(n);
                let h = protocol::BlockHeader {
                    first_stream: s,
                    streams: (end - s) as u16,
                    ..block.header()
                };
                let data = block.streams_data((s - a) as usize, (end - a) as usize);
                let part = &mut self.parts[w];
                match write_block(&mut part.buf[part.len..], &h, rb, data) {
                    Ok(len) => {
                        part.len += len;
                        part.blocks += 1;
                        part.entries += u32::from(h.streams) * u32::from(h.rounds);
                    }
                    // More than a queue slot holds: refused as a full queue.
                    Err(_) => self.refuse_part(&h),
                }
                s = end;
            }
        }
        for w in 0..self.parts.len() {
            if self.parts[w].blocks > 0 {
                self.queue_part(w, peer, header);
            }
        }
        true
    }

    /// Finishes part `w` (batch and CUQR headers) and queues it; a full queue refuses it.
    fn queue_part(&mut self, w: usize, peer: T::Peer, header: &RequestHeader) {
        let part = &mut self.parts[w];
        write_batch_header(
            &mut part.buf[ARG_AT..],
            self.d.round_bytes,
            part.blocks,
            part.entries,
        );
        let arg_len = part.len - ARG_AT;
        let mut prefix = [0u8; PEER_BYTES];
        peer.put(&mut prefix);
        part.buf[..PEER_BYTES].copy_from_slice(&prefix);
        put_request_header(
            &mut part.buf[PEER_BYTES..],
            protocol::ENQUEUE_SYNDROMES_ID,
            arg_len,
            header,
        );
        let queued = self.d.queues[w]
            .push(&part.buf[..part.len])
            .unwrap_or(false);
        if queued {
            return;
        }
        self.counts.queue_full += 1;
        let len = self.parts[w].len;
        let bytes = std::mem::take(&mut self.parts[w].buf);
        if let Ok(b) = BatchView::parse(&bytes[ARG_AT..len], self.d.round_bytes) {
            for block in b.blocks() {
                self.refuse_part(&block.header());
            }
        }
        self.parts[w].buf = bytes;
    }

    /// Every stream of a block refused: the queue toward its decoder is full.
    fn refuse_part(&mut self, h: &protocol::BlockHeader) {
        for s in h.first_stream..h.first_stream + u32::from(h.streams) {
            self.refuse(s, h, refusal::STREAM_BUFFER_FULL, EXPECTED_UNKNOWN);
        }
    }

    /// A refusal record for `h`'s rounds of stream `stream` (for unknown streams, `value`
    /// = how many streams from `stream` on the record covers).
    fn refuse(&mut self, stream: u32, h: &protocol::BlockHeader, code: u16, value: u64) {
        let covered = if code == refusal::UNKNOWN_STREAM {
            value
        } else {
            1
        };
        self.counts
            .rounds
            .refuse(code, covered * u64::from(h.rounds));
        self.own_push(Record {
            stream,
            kind: RecordKind::Refused,
            status: code,
            first_round: h.first_round,
            value,
            rounds: h.rounds.into(),
            window_rounds: 0,
        });
    }

    fn get_corrections(&mut self, peer: T::Peer, header: &RequestHeader, arg: &[u8]) -> bool {
        let Ok(g) = GetCorrections::parse(arg) else {
            return false;
        };
        if g.stream >= self.d.streams {
            self.own_push(no_such_stream(g.stream, 1));
            return true;
        }
        self.route_whole(
            self.worker_of(g.stream),
            peer,
            header,
            protocol::GET_CORRECTIONS_ID,
            &g.encode(),
            g.stream,
        );
        true
    }

    fn reset(&mut self, peer: T::Peer, header: &RequestHeader, arg: &[u8]) -> bool {
        let Ok(r) = ResetDecoder::parse(arg) else {
            return false;
        };
        let (a, b) = (
            r.first_stream,
            (u64::from(r.first_stream) + u64::from(r.streams)),
        );
        let n = self.d.streams;
        if b > u64::from(n) {
            let first = a.max(n);
            self.own_push(no_such_stream(first, b - u64::from(first)));
        }
        let mut s = a;
        while s < n && u64::from(s) < b {
            let w = self.worker_of(s);
            let end = (((w as u32) + 1) * self.d.chunk).min(n).min(b as u32);
            let part = ResetDecoder {
                first_stream: s,
                streams: end - s,
            };
            self.route_whole(
                w,
                peer,
                header,
                protocol::RESET_DECODER_ID,
                &part.encode(),
                s,
            );
            s = end;
        }
        true
    }

    /// Queues a small request for worker `w`; a full queue refuses it for `stream`.
    fn route_whole(
        &mut self,
        w: usize,
        peer: T::Peer,
        header: &RequestHeader,
        function_id: u32,
        arg: &[u8],
        stream: u32,
    ) {
        let part = &mut self.parts[w];
        let mut prefix = [0u8; PEER_BYTES];
        peer.put(&mut prefix);
        part.buf[..PEER_BYTES].copy_from_slice(&prefix);
        put_request_header(&mut part.buf[PEER_BYTES..], function_id, arg.len(), header);
        part.buf[ARG_AT..ARG_AT + arg.len()].copy_from_slice(arg);
        if !self.d.queues[w]
            .push(&part.buf[..ARG_AT + arg.len()])
            .unwrap_or(false)
        {
            self.counts.queue_full += 1;
            self.own_push(Record {
                stream,
                kind: RecordKind::Refused,
                status: refusal::STREAM_BUFFER_FULL,
                first_round: 0,
                value: EXPECTED_UNKNOWN,
                rounds: 0,
                window_rounds: 0,
            });
        }
    }

    fn own_begin(&mut self, header: &RequestHeader, peer: T::Peer) {
        self.own_peer = Some(peer);
        self.own.clear();
        self.own.resize(HEADER_LEN, 0);
        self.own_records = 0;
        self.own_request = (header.request_id, header.ptp_timestamp);
    }

    fn own_push(&mut self, r: Record) {
        if self.own_records == self.max_records {
            // Full: send what it holds, go on in a second response to the same request.
            if let Some(peer) = self.own_peer {
                self.own_flush(peer);
            }
            self.own.truncate(HEADER_LEN);
            self.own_records = 0;
        }
        let at = self.own.len();
        self.own.resize(at + RECORD_BYTES, 0);
        r.encode(&mut self.own[at..]);
        self.own_records += 1;
    }

    /// Sends the dispatcher's own records for the current request, if it has any.
    fn own_flush(&mut self, peer: T::Peer) {
        if self.own_records == 0 {
            return;
        }
        let header = wire::ResponseHeader {
            status: status::OK,
            result_len: (self.own_records * RECORD_BYTES) as u32,
            request_id: self.own_request.0,
            ptp_timestamp: self.own_request.1,
        };
        let mut bytes = std::mem::take(&mut self.own);
        if wire::write_response_header(&mut bytes, &header).is_ok() {
            let records = self.own_records;
            self.send(peer, &bytes, records);
        }
        self.own = bytes;
    }

    /// Sends what the workers handed back; true when there was any.
    fn forward_responses(&mut self) -> bool {
        let mut any = false;
        for w in 0..self.d.responses.len() {
            // A bounded number per worker per poll, so receiving is never starved.
            for _ in 0..64 {
                let Some(n) = self.d.responses[w].pop(&mut self.popped) else {
                    break;
                };
                any = true;
                let item = std::mem::take(&mut self.popped);
                if let Some((p, bytes)) = link::split(&item[..n]) {
                    if let Some(peer) = T::Peer::get(p) {
                        let records = bytes.len().saturating_sub(HEADER_LEN) / RECORD_BYTES;
                        self.send(peer, bytes, records);
                    }
                }
                self.popped = item;
            }
        }
        any
    }
}

fn no_such_stream(stream: u32, how_many: u64) -> Record {
    Record {
        stream,
        kind: RecordKind::Refused,
        status: refusal::UNKNOWN_STREAM,
        first_round: 0,
        value: how_many,
        rounds: 0,
        window_rounds: 0,
    }
}

/// A CUQR header for a part of `original` (same request id and timestamp).
fn put_request_header(out: &mut [u8], function_id: u32, arg_len: usize, original: &RequestHeader) {
    out[0..4].copy_from_slice(&wire::REQUEST_MAGIC.to_le_bytes());
    out[4..8].copy_from_slice(&function_id.to_le_bytes());
    out[8..12].copy_from_slice(&(arg_len as u32).to_le_bytes());
    out[12..16].copy_from_slice(&original.request_id.to_le_bytes());
    out[16..24].copy_from_slice(&original.ptp_timestamp.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::protocol::{records, BatchWriter};
    use crate::transport::inproc::{self, InprocClient, InprocServer};
    use crate::transport::Client;

    /// A dispatcher for 4 streams on two decoder threads whose queues (one slot each)
    /// nobody reads; rounds of 3 bytes.
    fn dispatcher() -> (InprocClient, Run<InprocServer>, Vec<Consumer>) {
        let (client, server) = inproc::channel(16, 4096).unwrap();
        let mut queues = Vec::new();
        let mut held = Vec::new();
        let mut responses = Vec::new();
        for _ in 0..2 {
            let (tx, rx) = inproc::ring(1, 4096).unwrap();
            queues.push(tx);
            held.push(rx);
            responses.push(inproc::ring(1, 4096).unwrap().1);
        }
        let d = Dispatcher {
            transport: server,
            round_bytes: 3,
            streams: 4,
            chunk: 2,
            queues,
            responses,
            max_request_bytes: 2048,
            batch: 8,
            idle: IdlePolicy::Yield,
            core: None,
        };
        (client, d.into_run(), held)
    }

    fn enqueue(client: &mut InprocClient, id: u32, first_stream: u32, streams: u16) {
        let mut arg = [0u8; 256];
        let mut w = BatchWriter::new(&mut arg, 3).unwrap();
        w.block(
            first_stream,
            streams,
            2,
            0,
            0,
            &vec![0u8; usize::from(streams) * 6],
        )
        .unwrap();
        let n = w.finish();
        let mut req = [0u8; 300];
        let len = wire::write_request(&mut req, protocol::ENQUEUE_SYNDROMES_ID, id, 0, &arg[..n])
            .unwrap();
        assert!(client.send(&req[..len]).unwrap());
    }

    fn answers(client: &mut InprocClient) -> Vec<Record> {
        let mut buf = [0u8; 4096];
        let mut out = Vec::new();
        while let Some(n) = client.try_recv(&mut buf).unwrap() {
            let v = wire::parse_response(&buf[..n]).unwrap();
            out.extend(records(v.result).unwrap().map(|r| r.unwrap()));
        }
        out
    }

    #[test]
    fn a_batch_splits_by_owner_and_a_full_queue_refuses_its_part() {
        let (mut client, mut run, mut held) = dispatcher();
        // Streams 1..4: stream 1 to thread 0, streams 2 and 3 to thread 1, stream 4 unknown.
        enqueue(&mut client, 1, 1, 4);
        assert!(run.receive());
        let unknown = answers(&mut client);
        assert_eq!(unknown.len(), 1);
        assert_eq!(
            (unknown[0].stream, unknown[0].status, unknown[0].value),
            (4, refusal::UNKNOWN_STREAM, 1)
        );
        let mut item = [0u8; 4096];
        for (w, first, streams) in [(0, 1, 1), (1, 2, 2)] {
            let n = held[w].pop(&mut item).expect("a part for each thread");
            let (_, datagram) = link::split(&item[..n]).unwrap();
            let req = wire::parse_request(datagram).unwrap();
            assert_eq!(req.header.request_id, 1, "the request's own id");
            let b = BatchView::parse(req.arg, 3)
                .unwrap()
                .blocks()
                .next()
                .unwrap();
            assert_eq!((b.first_stream, b.streams, b.rounds), (first, streams, 2));
        }
        // Thread 1's queue holds one part: the second request's part for it is refused.
        enqueue(&mut client, 2, 2, 2);
        enqueue(&mut client, 3, 2, 2);
        assert!(run.receive());
        let full = answers(&mut client);
        assert_eq!(full.len(), 2, "one record per stream: {full:?}");
        for (r, s) in full.iter().zip([2, 3]) {
            assert_eq!(
                (r.stream, r.status, r.rounds, r.value),
                (s, refusal::STREAM_BUFFER_FULL, 2, EXPECTED_UNKNOWN)
            );
        }
        let c = &run.counts;
        assert_eq!((c.datagrams, c.applied, c.queue_full), (3, 3, 1));
        assert_eq!(
            c.rounds.refused[usize::from(refusal::UNKNOWN_STREAM) - 1],
            2
        );
        assert_eq!(
            c.rounds.refused[usize::from(refusal::STREAM_BUFFER_FULL) - 1],
            4
        );
        assert_eq!(
            c.rounds.received, 6,
            "the dispatcher counts the rounds it refused"
        );
    }
}

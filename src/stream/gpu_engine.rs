//! The batched stream engine: the GPU's way of serving the stream protocol.
//!
//! Three threads. The dispatcher ([`super::dispatch`], the CPU pool's own) owns the
//! transport, checks requests and answers what it refuses itself. The batcher takes the
//! requests it queues, runs each stream's [`Ledger`] (which rounds are accepted, refused,
//! complete a window: round indices decide it all) and gathers every stream's accepted
//! rounds into the batch being built. The decoding thread hands a finished batch to a
//! [`BatchDecoder`] (the GPU: one launch for all streams; or the CPU stand-in), fills in
//! the commits' flips, and hands the responses to the dispatcher, which sends them. A
//! decoder of depth 2 (the persistent kernel) holds two batches: the next is posted while
//! one decodes, and the oldest one's answers go out as soon as it is decoded. Meanwhile
//! the next batch accumulates: it carries whatever every stream sent, so the work per
//! batch grows with the number of streams.
//!
//! Answers are the CPU pool's, byte for byte, for the same requests (with one decoder
//! thread, whose responses are not split by thread): `tests/stream_gpu_engine.rs`.
//! Every round ends in the same counters ([`RoundCounts`]); [`BatchedCounts`] adds the
//! batches and launches.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

use qfwd_decode::window::{Commit, StreamModel};

use super::batch::{BatchDecoder, CpuBatchDecoder, GpuBatchDecoder, Work};
use super::dispatch::Dispatcher;
use super::ledger::{CommitRef, Item, Ledger, LedgerSink, Windows};
use super::link::{self, PeerBytes, PEER_BYTES};
use super::protocol::{
    self, BatchView, GetCorrections, Record, ResetDecoder, FLAG_RESET_CORRECTIONS,
};
use super::served::{CpuServeDevice, ServedBatchDecoder};
use super::service::{DecoderRings, RunningStreams, ServiceOptions, StreamStats};
use super::state::RoundCounts;
use super::worker::{Outgoing, WorkerCounts};
use crate::idle::IdleWait;
use crate::transport::inproc::{Consumer, InprocServer};
use crate::transport::Transport;
use crate::wire;
use crate::{Error, Result};

/// Which GPU, and the threads of each stream's block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuEngineOptions {
    pub device: usize,
    /// A multiple of 32, at most 1024.
    pub threads: u32,
}

impl Default for GpuEngineOptions {
    fn default() -> Self {
        GpuEngineOptions {
            device: 0,
            threads: 256,
        }
    }
}

/// What the batched engine counted besides the rounds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchedCounts {
    /// What decodes (one line).
    pub decoder: String,
    /// Batches decoded; segments (a stream reset after rounds of its own in a batch goes
    /// on in the next one); decode calls
    /// (GPU launches, or submissions to the persistent kernel).
    pub batches: u64,
    pub segments: u64,
    pub launches: u64,
    /// Rounds handed to the decoder (final rounds included).
    pub rounds_decoded: u64,
    /// Batches posted while the one before was still decoding.
    pub overlapped: u64,
    /// Time in the decoder, ns.
    pub decode_ns: u64,
}

impl fmt::Display for BatchedCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per = |x: u64| {
            if self.batches == 0 {
                0.0
            } else {
                x as f64 / self.batches as f64
            }
        };
        write!(
            f,
            "batched decoding on {}: batches {}, segments {} ({:.2} a batch), decode calls \
             (launches or submissions) {} ({:.2} a batch), rounds decoded {} ({:.1} a batch), \
             {:.1} µs decoding a batch, {} posted while another decoded",
            self.decoder,
            self.batches,
            self.segments,
            per(self.segments),
            self.launches,
            per(self.launches),
            self.rounds_decoded,
            per(self.rounds_decoded),
            per(self.decode_ns) / 1e3,
            self.overlapped
        )
    }
}

/// A request whose records are in [`Batch::items`] up to `items_end`.
#[derive(Debug, Clone)]
struct Pending {
    peer: [u8; PEER_BYTES],
    request_id: u32,
    ptp_timestamp: u64,
    items_end: usize,
}

/// Everything between two launches: the rounds to decode (in segments, decoded in
/// order), and the requests to answer once they are.
#[derive(Debug, Default)]
struct Batch {
    segments: Vec<Vec<Work>>,
    items: Vec<Item>,
    requests: Vec<Pending>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.items.is_empty() && self.segments.iter().all(Vec::is_empty)
    }

    fn clear(&mut self) {
        self.segments.truncate(1);
        if let Some(s) = self.segments.first_mut() {
            s.clear();
        }
        self.items.clear();
        self.requests.clear();
    }
}

const NO_ENTRY: u32 = u32::MAX;

/// The batcher's state: every stream's ledger and the batch being built.
///
/// A batch's segment k holds each stream's k-th piece of work: a stream that is reset
/// after rounds of its own in the batch goes on in its next segment, and the other streams
/// stay where they are (a reset used to close the segment for every stream, cutting each
/// one's rounds into as many pieces as the batch had resets).
struct Builder {
    ledgers: Vec<Ledger>,
    windows: Windows,
    round_bytes: usize,
    batch: Batch,
    /// Each stream's segment, its entry there (or none yet), and the commits it will make.
    layer_of: Vec<u32>,
    entry_of: Vec<u32>,
    commits_of: Vec<u32>,
    counts: RoundCounts,
}

impl LedgerSink for Builder {
    fn reset(&mut self, stream: u32, record: Record) {
        let s = stream as usize;
        let e = self.entry_of[s];
        if e != NO_ENTRY {
            let w = &self.batch.segments[self.layer_of[s] as usize][e as usize];
            if w.rounds > 0 || w.finish {
                // Its rounds after the reset are decoded after those before it.
                self.layer_of[s] += 1;
                self.entry_of[s] = NO_ENTRY;
            }
        }
        let e = self.entry(stream, 0);
        self.work(stream, e).reset = true;
        self.batch.items.push(Item::Reset(record));
    }

    fn accept(&mut self, stream: u32, round: u64, events: &[u8], last: bool) {
        let e = self.entry(stream, round);
        let w = self.work(stream, e);
        w.events.extend_from_slice(events);
        if last {
            w.finish = true;
        } else {
            w.rounds += 1;
        }
    }

    fn commit(&mut self, stream: u32, record: Record) {
        let entry = self.entry_of[stream as usize];
        let k = self.commits_of[stream as usize];
        self.commits_of[stream as usize] += 1;
        let at = CommitRef {
            segment: self.layer_of[stream as usize],
            entry,
            k,
        };
        self.batch.items.push(Item::Commit { record, at });
    }

    fn record(&mut self, record: Record) {
        self.batch.items.push(Item::Ready(record));
    }

    fn corrections(&mut self, record: Record, clear: bool) {
        self.batch.items.push(Item::Corrections { record, clear });
    }
}

impl Builder {
    fn new(model: &StreamModel, streams: usize) -> Builder {
        Builder {
            ledgers: vec![Ledger::default(); streams],
            windows: Windows {
                rounds_per_window: model.rounds_per_window(),
                commit_rounds: model.commit_rounds(),
                min_rounds: model.min_rounds(),
            },
            round_bytes: model.round_bytes(),
            batch: Batch {
                segments: vec![Vec::new()],
                ..Batch::default()
            },
            layer_of: vec![0; streams],
            entry_of: vec![NO_ENTRY; streams],
            commits_of: vec![0; streams],
            counts: RoundCounts::default(),
        }
    }

    /// Entry `e` of stream `stream`'s segment.
    fn work(&mut self, stream: u32, e: usize) -> &mut Work {
        &mut self.batch.segments[self.layer_of[stream as usize] as usize][e]
    }

    /// Stream `stream`'s entry in its segment, made starting at `round`.
    fn entry(&mut self, stream: u32, round: u64) -> usize {
        let s = stream as usize;
        let e = self.entry_of[s];
        if e != NO_ENTRY {
            return e as usize;
        }
        let layer = self.layer_of[s] as usize;
        if self.batch.segments.len() <= layer {
            self.batch.segments.resize_with(layer + 1, Vec::new);
        }
        let seg = &mut self.batch.segments[layer];
        seg.push(Work {
            stream,
            first_round: round,
            ..Work::default()
        });
        let e = seg.len() - 1;
        self.entry_of[s] = e as u32;
        self.commits_of[s] = 0;
        e
    }

    /// Swaps the built batch for `empty`; every stream starts the next in its first
    /// segment.
    fn take(&mut self, mut empty: Batch) -> Batch {
        for w in self.batch.segments.iter().flatten() {
            self.entry_of[w.stream as usize] = NO_ENTRY;
            self.layer_of[w.stream as usize] = 0;
        }
        empty.clear();
        if empty.segments.is_empty() {
            empty.segments.push(Vec::new());
        }
        std::mem::replace(&mut self.batch, empty)
    }

    /// Applies one queued request (as the CPU pool's worker does); false when it does not
    /// parse.
    fn item(&mut self, item: &[u8]) -> bool {
        let Some((peer, datagram)) = link::split(item) else {
            return false;
        };
        let Ok(req) = wire::parse_request(datagram) else {
            return false;
        };
        let items_start = self.batch.items.len();
        let mut counts = std::mem::take(&mut self.counts);
        let ok = self.apply(req.header.function_id, req.arg, &mut counts);
        self.counts = counts;
        if self.batch.items.len() > items_start {
            let mut p = [0u8; PEER_BYTES];
            p.copy_from_slice(peer);
            self.batch.requests.push(Pending {
                peer: p,
                request_id: req.header.request_id,
                ptp_timestamp: req.header.ptp_timestamp,
                items_end: self.batch.items.len(),
            });
        }
        ok
    }

    fn apply(&mut self, function_id: u32, arg: &[u8], counts: &mut RoundCounts) -> bool {
        let n = self.ledgers.len() as u32;
        match function_id {
            protocol::ENQUEUE_SYNDROMES_ID => {
                let Ok(batch) = BatchView::parse(arg, self.round_bytes) else {
                    return false;
                };
                for block in batch.blocks() {
                    for s in 0..usize::from(block.streams) {
                        let id = block.first_stream + s as u32;
                        if id >= n {
                            return false;
                        }
                        let mut l = self.ledgers[id as usize];
                        l.apply(self.windows, id, &block, s, counts, self);
                        self.ledgers[id as usize] = l;
                    }
                }
            }
            protocol::GET_CORRECTIONS_ID => {
                let Ok(g) = GetCorrections::parse(arg) else {
                    return false;
                };
                let Some(l) = self.ledgers.get(g.stream as usize).copied() else {
                    return false;
                };
                l.corrections(g.stream, g.flags & FLAG_RESET_CORRECTIONS != 0, self);
            }
            protocol::RESET_DECODER_ID => {
                let Ok(r) = ResetDecoder::parse(arg) else {
                    return false;
                };
                let end = u64::from(r.first_stream) + u64::from(r.streams);
                if end > u64::from(n) {
                    return false;
                }
                for id in r.first_stream..end as u32 {
                    let mut l = self.ledgers[id as usize];
                    l.reset(id, counts, self);
                    self.ledgers[id as usize] = l;
                }
            }
            _ => return false,
        }
        true
    }
}

/// The decoding thread's state.
struct Decoding {
    decoder: Box<dyn BatchDecoder>,
    /// Each stream's flips committed since its last reset (or clear).
    corrections: Vec<u64>,
    out: Outgoing,
    commits: Vec<Vec<Commit>>,
    /// Per segment: each entry's number of commits, and where its first one is.
    counts_of: Vec<Vec<u32>>,
    offsets: Vec<Vec<u32>>,
    counts: RoundCounts,
    batched: BatchedCounts,
    busy_ns: u64,
}

impl Decoding {
    /// Decodes `batch` and sends its answers.
    fn run(&mut self, batch: &Batch) -> Result<()> {
        let start = Instant::now();
        let segments = self.make_room(batch);
        self.batched.launches += self.decoder.decode_segments(
            &batch.segments,
            &mut self.commits[..segments],
            &mut self.counts_of[..segments],
        )?;
        self.answer_batch(batch, start)
    }

    /// Hands `batch` to a decoder that decodes it while it takes the next; false where
    /// it did not take it (decode it with [`Decoding::run`], after those in flight).
    fn post(&mut self, batch: &Batch) -> Result<bool> {
        let start = Instant::now();
        let taken = self.decoder.post(&batch.segments)?;
        let ns = start.elapsed().as_nanos() as u64;
        self.batched.decode_ns += ns;
        self.busy_ns += ns;
        Ok(taken)
    }

    /// The answers of the oldest batch posted, `batch`, sent.
    fn complete(&mut self, batch: &Batch) -> Result<()> {
        let start = Instant::now();
        let segments = self.make_room(batch);
        self.batched.launches += self.decoder.collect(
            &mut self.commits[..segments],
            &mut self.counts_of[..segments],
        )?;
        self.answer_batch(batch, start)
    }

    /// Room for `batch`'s segments' answers; their number.
    fn make_room(&mut self, batch: &Batch) -> usize {
        let segments = batch.segments.len();
        self.commits
            .resize_with(segments.max(self.commits.len()), Vec::new);
        self.offsets
            .resize_with(segments.max(self.offsets.len()), Vec::new);
        self.counts_of
            .resize_with(segments.max(self.counts_of.len()), Vec::new);
        segments
    }

    /// Counts `batch` (decoded since `start`) and sends its answers.
    fn answer_batch(&mut self, batch: &Batch, start: Instant) -> Result<()> {
        for (i, work) in batch.segments.iter().enumerate() {
            let offsets = &mut self.offsets[i];
            offsets.clear();
            let mut at = 0;
            for c in &self.counts_of[i] {
                offsets.push(at);
                at += c;
            }
            self.batched.segments += u64::from(!work.is_empty());
            self.batched.rounds_decoded += work
                .iter()
                .map(|w| u64::from(w.rounds) + u64::from(w.finish))
                .sum::<u64>();
        }
        self.batched.batches += 1;
        self.batched.decode_ns += start.elapsed().as_nanos() as u64;
        let mut from = 0;
        for p in &batch.requests {
            self.out.begin(&p.peer, p.request_id, p.ptp_timestamp);
            for item in &batch.items[from..p.items_end] {
                let r = self.answer(item)?;
                self.out.push(r);
            }
            self.out.flush();
            from = p.items_end;
        }
        self.busy_ns += start.elapsed().as_nanos() as u64;
        Ok(())
    }

    /// The record of `item`, its value filled in.
    fn answer(&mut self, item: &Item) -> Result<Record> {
        Ok(match *item {
            Item::Ready(r) => r,
            Item::Reset(r) => {
                self.corrections[r.stream as usize] = 0;
                r
            }
            Item::Corrections { mut record, clear } => {
                let c = &mut self.corrections[record.stream as usize];
                record.value = *c;
                if clear {
                    *c = 0;
                }
                record
            }
            Item::Commit { mut record, at } => {
                let c = self.offsets[at.segment as usize]
                    .get(at.entry as usize)
                    .and_then(|o| self.commits[at.segment as usize].get((o + at.k) as usize))
                    .copied();
                let Some(c) =
                    c.filter(|c| c.first_round == record.first_round && c.rounds == record.rounds)
                else {
                    return Err(Error::Decode {
                        detail: format!(
                            "stream {}: the decoder did not commit rounds {}..{} (it gave {c:?})",
                            record.stream,
                            record.first_round,
                            record.first_round + u64::from(record.rounds)
                        ),
                    });
                };
                record.value = c.flips;
                self.corrections[record.stream as usize] ^= c.flips;
                self.counts.committed += u64::from(c.rounds);
                self.counts.windows += 1;
                record
            }
        })
    }
}

/// A batched service running on its own threads: [`RunningStreams`].
pub fn spawn_batched<T>(
    transport: T,
    opts: &ServiceOptions,
    model: Arc<StreamModel>,
    decoder: Box<dyn BatchDecoder>,
    local_addr: Option<SocketAddr>,
    description: String,
) -> Result<RunningStreams>
where
    T: Transport + Send + 'static,
    T::Peer: PeerBytes,
{
    let s = &opts.settings;
    s.validate()?;
    if decoder.streams() != s.streams as usize {
        return Err(Error::InvalidSetting {
            key: "streams",
            detail: format!(
                "the decoder serves {} streams, the service {}",
                decoder.streams(),
                s.streams
            ),
        });
    }
    let DecoderRings {
        slot,
        requests: (q_tx, q_rx),
        responses: (r_tx, r_rx),
    } = DecoderRings::new(s)?;
    let dispatcher = Dispatcher {
        transport,
        round_bytes: model.round_bytes(),
        streams: s.streams,
        chunk: s.streams,
        queues: vec![q_tx],
        responses: vec![r_rx],
        max_request_bytes: s.max_request_bytes,
        batch: opts.batch.max(1),
        idle: opts.idle,
        core: opts.cores.first().copied(),
    };
    let streams = s.streams as usize;
    let decoding = Decoding {
        decoder,
        corrections: vec![0; streams],
        out: Outgoing::new(r_tx, slot),
        commits: Vec::new(),
        counts_of: Vec::new(),
        offsets: Vec::new(),
        counts: RoundCounts::default(),
        batched: BatchedCounts::default(),
        busy_ns: 0,
    };
    let builder = Builder::new(&model, streams);
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let opts = opts.clone();
    let thread = std::thread::Builder::new()
        .name("qfwd-streams".into())
        .spawn(move || serve(dispatcher, builder, q_rx, decoding, &opts, &flag))
        .map_err(|e| Error::Io {
            what: "starting the stream service thread".into(),
            source: e,
        })?;
    Ok(RunningStreams {
        stop,
        thread: Some(thread),
        local_addr,
        description,
    })
}

fn pin(core: Option<usize>, what: &str) {
    if let Some(c) = core {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
            tracing::warn!(core = c, "{what}: cannot pin to core; running unpinned");
        }
    }
}

/// What the batcher hands back when it stops.
struct BatcherEnd {
    counts: RoundCounts,
    items: u64,
    malformed: u64,
}

/// Takes queued requests into batches; hands a batch over whenever the decoding thread
/// has room for one (`depth` batches: it returns each once answered). Ends once
/// `closing` is set and everything queued went out.
fn batcher(
    mut b: Builder,
    mut queue: Consumer,
    (to_decoder, returned): (SyncSender<Batch>, Receiver<Batch>),
    depth: usize,
    opts: &ServiceOptions,
    closing: &AtomicBool,
) -> BatcherEnd {
    pin(opts.cores.get(1).copied(), "stream batcher");
    let mut spares: Vec<Batch> = (0..depth.max(1)).map(|_| Batch::default()).collect();
    let mut item = vec![0u8; u16::MAX as usize];
    let mut wait = IdleWait::new(opts.idle);
    let (mut items, mut malformed) = (0u64, 0u64);
    loop {
        let closing_now = closing.load(Ordering::Acquire);
        loop {
            match returned.try_recv() {
                Ok(done) => spares.push(done),
                // The decoding thread failed: batches are dropped from now on.
                Err(TryRecvError::Disconnected) => {
                    if spares.is_empty() {
                        spares.push(Batch::default());
                    }
                    break;
                }
                Err(TryRecvError::Empty) => break,
            }
        }
        let mut popped = 0;
        while popped < 4096 {
            let Some(n) = queue.pop(&mut item) else {
                break;
            };
            popped += 1;
            items += 1;
            if !b.item(&item[..n]) {
                malformed += 1;
            }
        }
        if !b.batch.is_empty() {
            if let Some(empty) = spares.pop() {
                let full = b.take(empty);
                if to_decoder.send(full).is_err() {
                    spares.push(Batch::default());
                }
            }
        } else if closing_now && popped == 0 {
            break;
        }
        if popped > 0 {
            wait.worked();
        } else {
            wait.idle();
        }
    }
    let mut counts = b.counts;
    counts.pending = b.ledgers.iter().map(Ledger::pending).sum();
    BatcherEnd {
        counts,
        items,
        malformed,
    }
}

/// Decodes batches until the batcher hangs up. A decoder of depth 2 or more holds that
/// many batches at once: a batch is posted while the one before decodes, and the oldest
/// batch's answers go out as soon as it is decoded, before anything else is done.
fn decoding_thread(
    d: &mut Decoding,
    from_batcher: Receiver<Batch>,
    back: SyncSender<Batch>,
    opts: &ServiceOptions,
    stop: &AtomicBool,
) -> Result<()> {
    pin(opts.cores.get(2).copied(), "stream decoding thread");
    let mut wait = IdleWait::new(opts.idle);
    let mut in_flight: VecDeque<Batch> = VecDeque::new();
    let depth = d.decoder.depth().max(1);
    let failed = |e: Error| {
        tracing::error!(error = %e, "stream decoding failed; stopping the service");
        stop.store(true, Ordering::Relaxed);
        Err(e)
    };
    // When the oldest batch in flight was posted: past the deadline, its collection
    // waits (and fails, with the decoder's own deadline) instead of polling on.
    let mut oldest_since = Instant::now();
    let mut hung_up = false;
    loop {
        let overdue = oldest_since.elapsed() > IN_FLIGHT_DEADLINE;
        let must = in_flight.len() >= depth || hung_up || overdue;
        if !in_flight.is_empty() && (must || d.decoder.ready()) {
            let batch = in_flight.pop_front().expect("checked");
            if let Err(e) = d.complete(&batch) {
                return failed(e);
            }
            let _ = back.send(batch);
            oldest_since = Instant::now();
            wait.worked();
            continue;
        }
        match from_batcher.try_recv() {
            Ok(batch) => {
                wait.worked();
                if in_flight.is_empty() {
                    oldest_since = Instant::now();
                }
                if let Err(e) = take_batch(d, batch, &mut in_flight, &back) {
                    return failed(e);
                }
                continue;
            }
            Err(TryRecvError::Disconnected) if in_flight.is_empty() => return Ok(()),
            Err(TryRecvError::Disconnected) => hung_up = true,
            Err(TryRecvError::Empty) => {}
        }
        wait.idle();
    }
}

/// How long the decoding thread polls for the oldest batch in flight before it waits
/// for it (the decoder's wait has its own deadline).
const IN_FLIGHT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(1);

/// Posts `batch`, or, where the decoder does not take it, decodes it now, after the
/// batches in flight (answers go out in batch order).
fn take_batch(
    d: &mut Decoding,
    batch: Batch,
    in_flight: &mut VecDeque<Batch>,
    back: &SyncSender<Batch>,
) -> Result<()> {
    if d.decoder.depth() > 1 && d.post(&batch)? {
        d.batched.overlapped += u64::from(!in_flight.is_empty());
        in_flight.push_back(batch);
        return Ok(());
    }
    while let Some(old) = in_flight.pop_front() {
        d.complete(&old)?;
        let _ = back.send(old);
    }
    d.run(&batch)?;
    let _ = back.send(batch);
    Ok(())
}

fn serve<T>(
    dispatcher: Dispatcher<T>,
    builder: Builder,
    queue: Consumer,
    mut decoding: Decoding,
    opts: &ServiceOptions,
    stop: &AtomicBool,
) -> Result<StreamStats>
where
    T: Transport,
    T::Peer: PeerBytes,
{
    let started = Instant::now();
    let closing = AtomicBool::new(false);
    let done = AtomicUsize::new(0);
    let streams = builder.ledgers.len() as u32;
    decoding.batched.decoder = decoding.decoder.describe();
    // Batches circulate: the batcher builds one and holds `depth` spares; the decoding
    // thread holds up to `depth`. Neither channel can fill, so neither side blocks.
    let depth = decoding.decoder.depth().max(1);
    let (to_decoder, from_batcher) = mpsc::sync_channel::<Batch>(depth + 1);
    let (back, returned) = mpsc::sync_channel::<Batch>(depth + 1);
    let (dispatch, end, decoded) = std::thread::scope(|scope| {
        let (closing, done) = (&closing, &done);
        let batcher = std::thread::Builder::new()
            .name("qfwd-batcher".into())
            .spawn_scoped(scope, move || {
                batcher(builder, queue, (to_decoder, returned), depth, opts, closing)
            });
        let decoder = std::thread::Builder::new()
            .name("qfwd-batch-decode".into())
            .spawn_scoped(scope, move || {
                let r = decoding_thread(&mut decoding, from_batcher, back, opts, stop);
                done.fetch_add(1, Ordering::Release);
                (r, decoding)
            });
        if decoder.is_err() {
            done.fetch_add(1, Ordering::Release);
            stop.store(true, Ordering::Relaxed);
        }
        let dispatch = dispatcher.run(stop, closing, done);
        let end = batcher.ok().and_then(|h| h.join().ok());
        let decoded = decoder.ok().and_then(|h| h.join().ok());
        (dispatch, end, decoded)
    });
    let (Some(end), Some((result, decoding))) = (end, decoded) else {
        return Err(Error::ThreadPanicked);
    };
    result?;
    let (responses, records, responses_dropped) = decoding.out.totals();
    let mut rounds = end.counts;
    rounds.committed += decoding.counts.committed;
    rounds.windows += decoding.counts.windows;
    let engine = WorkerCounts {
        first_stream: 0,
        streams,
        rounds,
        items: end.items,
        responses,
        records,
        responses_dropped,
        malformed_items: end.malformed,
        busy_ns: decoding.busy_ns,
    };
    let mut stats = StreamStats::new(dispatch, vec![engine], started.elapsed().as_secs_f64());
    let mut batched = decoding.batched;
    if let Some(t) = decoding.decoder.timings() {
        batched.decoder = format!("{}; {t}", batched.decoder);
    }
    stats.batched = Some(batched);
    Ok(stats)
}

/// Which decoder a batched service uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchedDecoder {
    /// The persistent kernel ([`ServedBatchDecoder`]).
    Gpu(GpuEngineOptions),
    /// A launch per batch ([`GpuBatchDecoder`]).
    GpuLaunch(GpuEngineOptions),
    /// The CPU stand-in (tests, and hosts without a GPU that want the batched path).
    Cpu,
    /// The persistent kernel's protocol served by host threads ([`CpuServeDevice`]):
    /// tests of the GPU engine's host side without a GPU.
    CpuServed,
}

impl BatchedDecoder {
    /// The decoder for `streams` streams of `model`: for the GPU, a clear error where
    /// there is none.
    pub fn build(&self, model: &Arc<StreamModel>, streams: u32) -> Result<Box<dyn BatchDecoder>> {
        Ok(match *self {
            BatchedDecoder::Cpu => Box::new(CpuBatchDecoder::new(model, streams as usize)),
            BatchedDecoder::CpuServed => {
                let device = CpuServeDevice::new(model, streams as usize, 2, 1 << 20)?;
                Box::new(ServedBatchDecoder::new(device, model, streams as usize))
            }
            BatchedDecoder::Gpu(g) | BatchedDecoder::GpuLaunch(g) => {
                if let Some(why) = crate::gpu::unavailable_reason() {
                    return Err(Error::GpuUnavailable {
                        detail: format!(
                            "{} (the GPU stream engine needs an NVIDIA GPU)",
                            why.trim_start_matches("no usable GPU: ")
                        ),
                    });
                }
                if matches!(self, BatchedDecoder::Gpu(_)) {
                    Box::new(ServedBatchDecoder::gpu(
                        g.device,
                        model,
                        streams as usize,
                        g.threads,
                    )?)
                } else {
                    Box::new(GpuBatchDecoder::new(
                        g.device,
                        model,
                        streams as usize,
                        g.threads,
                    )?)
                }
            }
        })
    }
}

fn describe(
    opts: &ServiceOptions,
    model: &StreamModel,
    decoder: &dyn BatchDecoder,
    on: &str,
) -> String {
    let s = &opts.settings;
    format!(
        "{} streams of {} ({} bits a round), windows of {} rounds committing {}, decoded in \
         batches by {}; rounds cross a CPU dispatcher thread and a batching thread; on {on}",
        s.streams,
        model.source(),
        model.detectors_per_round(),
        s.window,
        s.commit,
        decoder.describe()
    )
}

/// Serves the in-process ring's server end with a batched engine (whatever the settings'
/// `engine` says).
pub fn spawn_batched_inproc(
    opts: &ServiceOptions,
    model: Arc<StreamModel>,
    server: InprocServer,
    which: BatchedDecoder,
) -> Result<RunningStreams> {
    spawn_batched_on(server, opts, model, None, "an inproc ring", which)
}

/// Serves `transport` (reached at `local_addr`, described as `on`: `udp ADDR`) with a
/// batched engine (whatever the settings' `engine` says).
pub fn spawn_batched_on<T>(
    transport: T,
    opts: &ServiceOptions,
    model: Arc<StreamModel>,
    local_addr: Option<SocketAddr>,
    on: &str,
    which: BatchedDecoder,
) -> Result<RunningStreams>
where
    T: Transport + Send + 'static,
    T::Peer: PeerBytes,
{
    opts.settings.validate()?;
    let decoder = which.build(&model, opts.settings.streams)?;
    let description = describe(opts, &model, decoder.as_ref(), on);
    spawn_batched(transport, opts, model, decoder, local_addr, description)
}

#[cfg(test)]
mod tests;

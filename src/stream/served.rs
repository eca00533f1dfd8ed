//! The batched engine's decoder when a persistent device side keeps every stream
//! ([`ServedBatchDecoder`]): a batch becomes one submission (or a few, when it exceeds the
//! block's capacities) to the submission block of [`crate::mailbox::streams`], not a
//! launch. Resets travel as a flag of the stream's entry and happen in place; streams at
//! different round phases share the submission, since each entry names its own rounds.
//!
//! Two device sides ([`ServeDevice`]): the persistent GPU kernel
//! ([`RunningStreamServer`]), and [`CpuServeDevice`], host threads that follow the kernel's
//! steps over a heap region with a [`StreamDecoder`] per stream, so CI runs the protocol
//! and this decoder without a GPU.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use qfwd_decode::window::{Commit, StreamDecoder, StreamModel};

use super::batch::{fault, feed, BatchDecoder, Work};
use crate::abi::{
    StreamCommitDesc, StreamServeEntryDesc, SERVE_FINISH, SERVE_RESET, STREAM_COMMIT,
    STREAM_FINISHED, STREAM_ROUNDS_MISSING, STREAM_ROUND_REPEATED, STREAM_TOO_SHORT,
};
use crate::gpu::stream_server::{PreparedStreamServer, RunningStreamServer};
use crate::mailbox::streams::{DeviceSide, Poll, Submissions, SubmitLayout};
use crate::shm::SharedRegion;
use crate::Result;

/// How long one submission may take.
const SUBMISSION_DEADLINE: Duration = Duration::from_secs(20);

/// A device side serving a submission block.
pub trait ServeDevice: Send {
    fn submissions(&mut self) -> &mut Submissions;
    /// Waits for the last submission's answers (with a deadline).
    fn wait(&mut self) -> Result<()>;
    fn describe(&self) -> String;
    /// Where the device's own time went, when it counts (one line).
    fn profile(&self) -> Option<String> {
        None
    }
}

impl ServeDevice for RunningStreamServer {
    fn profile(&self) -> Option<String> {
        let p = RunningStreamServer::profile(self);
        let per = |s: f64, n: u64| s * 1e6 / n.max(1) as f64;
        Some(format!(
            "the kernel's blocks: {:.3} s idle, {:.3} s reading entries and events, {:.3} s \
             decoding; {} entries, {} rounds ({:.2} µs a round that completes no window), {} \
             answers ({:.1} µs a round that completes one)",
            p.idle_s,
            p.stage_s,
            p.decode_s,
            p.entries,
            p.rounds,
            per(p.decode_s - p.windows_s, p.rounds.saturating_sub(p.answers)),
            p.answers,
            per(p.windows_s, p.answers)
        ))
    }
    fn submissions(&mut self) -> &mut Submissions {
        RunningStreamServer::submissions(self)
    }
    fn wait(&mut self) -> Result<()> {
        RunningStreamServer::wait(self, SUBMISSION_DEADLINE)
    }
    fn describe(&self) -> String {
        let o = self.occupancy();
        format!(
            "GPU {} (a persistent kernel of {} blocks of {} threads, {} a multiprocessor: {} \
             registers a thread, {} B of scratch a block; every stream's state in device \
             memory; one submission per batch)",
            self.device(),
            self.grid(),
            self.threads(),
            o.blocks_per_sm,
            o.registers,
            o.shared_bytes
        )
    }
}

/// Decodes batches through a [`ServeDevice`].
pub struct ServedBatchDecoder<D> {
    device: D,
    layout: SubmitLayout,
    streams: usize,
    round_bytes: usize,
    commit_rounds: u32,
    /// The submission being built: each entry's span, the entries, the jobs (first entry
    /// of each), the events, commit slots taken.
    spans: Vec<usize>,
    entries: Vec<StreamServeEntryDesc>,
    jobs: Vec<u32>,
    events: Vec<u8>,
    slots: usize,
    /// Per entry piece of a batch: its (segment, work entry) and where its answers are
    /// in `answers`.
    pieces: Vec<Piece>,
    answers: Vec<Commit>,
    times: ServedTimes,
}

#[derive(Debug, Clone, Copy)]
struct Piece {
    segment: usize,
    work: usize,
    start: usize,
    len: usize,
}

/// Where the submissions' time went, summed (ns): writing them into the block, waiting
/// for every device block, reading the answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServedTimes {
    pub submissions: u64,
    pub entries: u64,
    pub jobs: u64,
    pub write_ns: u64,
    pub wait_ns: u64,
    pub read_ns: u64,
}

impl ServedBatchDecoder<RunningStreamServer> {
    /// The persistent GPU kernel for `streams` streams, blocks of `threads`.
    pub fn gpu(
        device: usize,
        model: &Arc<StreamModel>,
        streams: usize,
        threads: u32,
    ) -> Result<Self> {
        let server = PreparedStreamServer::new(device, model, streams, threads)?.launch()?;
        Ok(ServedBatchDecoder::new(server, model, streams))
    }
}

impl<D: ServeDevice> ServedBatchDecoder<D> {
    pub fn new(mut device: D, model: &StreamModel, streams: usize) -> Self {
        let layout = *device.submissions().layout();
        ServedBatchDecoder {
            device,
            layout,
            streams,
            round_bytes: model.round_bytes().max(1),
            commit_rounds: model.commit_rounds().max(1),
            spans: Vec::new(),
            entries: Vec::new(),
            jobs: Vec::new(),
            events: Vec::new(),
            slots: 0,
            pieces: Vec::new(),
            answers: Vec::new(),
            times: ServedTimes::default(),
        }
    }

    pub fn device(&self) -> &D {
        &self.device
    }

    pub fn times(&self) -> ServedTimes {
        self.times
    }

    /// Submits what was gathered, waits, and files each entry's answers under its piece.
    fn flush(&mut self) -> Result<u64> {
        if self.entries.is_empty() {
            return Ok(0);
        }
        let made = (self.entries.len(), self.jobs.len());
        let t0 = Instant::now();
        self.device
            .submissions()
            .submit(&self.entries, &self.jobs, &self.events)?;
        let t1 = Instant::now();
        self.device.wait()?;
        let t2 = Instant::now();
        let subs = self.device.submissions();
        for (j, e) in self.entries.iter().enumerate() {
            let n = subs.count(j);
            if n > e.commit_capacity {
                return Err(fault(format!(
                    "stream {}: {n} answers to {} rounds (room for {})",
                    e.stream, e.rounds, e.commit_capacity
                )));
            }
            let piece = &mut self.pieces[self.spans[j]];
            piece.start = self.answers.len();
            piece.len = n as usize;
            for k in 0..n as usize {
                let c = subs.commit(e.commit_offset as usize + k);
                self.answers.push(answer(e, &c)?);
            }
        }
        self.spans.clear();
        self.entries.clear();
        self.jobs.clear();
        self.events.clear();
        self.slots = 0;
        let t = &mut self.times;
        t.submissions += 1;
        t.entries += made.0 as u64;
        t.jobs += made.1 as u64;
        t.write_ns += (t1 - t0).as_nanos() as u64;
        t.wait_ns += (t2 - t1).as_nanos() as u64;
        t.read_ns += t2.elapsed().as_nanos() as u64;
        Ok(1)
    }

    /// Adds entry `e` (piece `piece`) with `bytes` of events, flushing first if it would
    /// not fit; `new_job` starts a job (a stream's first piece). Returns submissions made.
    fn add(
        &mut self,
        piece: usize,
        mut e: StreamServeEntryDesc,
        bytes: &[u8],
        new_job: bool,
    ) -> Result<u64> {
        let fits = |s: &Self, at: usize| {
            s.layout.fits(
                s.entries.len() + 1,
                at + bytes.len(),
                s.slots + e.commit_capacity as usize,
            )
        };
        let mut at = self.events.len().next_multiple_of(4);
        let mut made = 0;
        if !fits(self, at) {
            made = self.flush()?;
            at = 0;
        }
        if !fits(self, at) {
            return Err(fault(format!(
                "stream {}: a piece of {} rounds does not fit an empty submission",
                e.stream, e.rounds
            )));
        }
        if new_job || self.entries.is_empty() {
            self.jobs.push(self.entries.len() as u32);
        }
        self.events.resize(at, 0);
        self.events.extend_from_slice(bytes);
        e.events_offset = at as u32;
        e.commit_offset = self.slots as u32;
        self.slots += e.commit_capacity as usize;
        self.spans.push(piece);
        self.entries.push(e);
        Ok(made)
    }

    /// Rounds of one piece: what fits an empty submission, less one for a final round.
    fn piece_rounds(&self) -> usize {
        (self.layout.events_bytes / self.round_bytes)
            .saturating_sub(2)
            .max(1)
    }

    /// Adds work entry `w` (of `segment`) as pieces; the first starts a job when
    /// `new_job`. Returns submissions made.
    fn add_work(&mut self, segment: usize, index: usize, w: &Work, new_job: bool) -> Result<u64> {
        let rb = self.round_bytes;
        if w.stream as usize >= self.streams {
            return Err(fault(format!("stream {} is not served", w.stream)));
        }
        let inputs = w.rounds as usize + usize::from(w.finish);
        if w.events.len() < inputs * rb {
            return Err(fault(format!(
                "stream {}: {} event bytes for {inputs} rounds",
                w.stream,
                w.events.len()
            )));
        }
        let most = self.piece_rounds();
        let mut made = 0;
        let mut from = 0usize;
        loop {
            let take = (w.rounds as usize - from).min(most);
            let last = from + take == w.rounds as usize;
            let finish = last && w.finish;
            let mut flags = 0;
            if from == 0 && w.reset {
                flags |= SERVE_RESET;
            }
            if finish {
                flags |= SERVE_FINISH;
            }
            let e = StreamServeEntryDesc {
                first_round: w.first_round + from as u64,
                stream: w.stream,
                flags,
                rounds: take as u32,
                commit_capacity: take as u32 / self.commit_rounds + 2,
                ..Default::default()
            };
            self.pieces.push(Piece {
                segment,
                work: index,
                start: 0,
                len: 0,
            });
            let end = (from + take + usize::from(finish)) * rb;
            let piece = self.pieces.len() - 1;
            made += self.add(piece, e, &w.events[from * rb..end], new_job && from == 0)?;
            from += take;
            if last {
                return Ok(made);
            }
        }
    }
}

/// A served answer as a commit; a refusal is a fault (the batcher hands rounds in order).
fn answer(e: &StreamServeEntryDesc, c: &StreamCommitDesc) -> Result<Commit> {
    if c.status == STREAM_COMMIT {
        return Ok(Commit {
            first_round: c.first_round,
            rounds: c.rounds,
            flips: c.flips,
        });
    }
    let why = match c.status {
        STREAM_ROUND_REPEATED => "a repeated round",
        STREAM_ROUNDS_MISSING => "missing rounds",
        STREAM_FINISHED => "a finished stream",
        STREAM_TOO_SHORT => "too few rounds",
        _ => "an unknown status",
    };
    Err(fault(format!(
        "stream {}: the device refused a round it was handed in order ({why}, status {})",
        e.stream, c.status
    )))
}

impl<D: ServeDevice> BatchDecoder for ServedBatchDecoder<D> {
    fn streams(&self) -> usize {
        self.streams
    }

    fn decode(
        &mut self,
        work: &[Work],
        commits: &mut Vec<Commit>,
        counts: &mut Vec<u32>,
    ) -> Result<u64> {
        // decode() appends, as the trait says; decode_parts fills.
        let (mut c, mut n) = ([Vec::new()], [Vec::new()]);
        let made = self.decode_parts(&[work], &mut c, &mut n)?;
        let ([mut c], [n]) = (c, n);
        commits.append(&mut c);
        counts.extend(n);
        Ok(made)
    }

    /// Every segment in as few submissions as fit: a stream's entries of all segments
    /// form one job, served in segment order, so resets mid-batch cost no submission.
    fn decode_segments(
        &mut self,
        segments: &[Vec<Work>],
        commits: &mut [Vec<Commit>],
        counts: &mut [Vec<u32>],
    ) -> Result<u64> {
        let parts: Vec<&[Work]> = segments.iter().map(Vec::as_slice).collect();
        self.decode_parts(&parts, commits, counts)
    }

    fn describe(&self) -> String {
        self.device.describe()
    }

    fn timings(&self) -> Option<String> {
        let t = self.times;
        let per = |x: u64| x as f64 / t.submissions.max(1) as f64;
        Some(
            format!(
            "{} submissions, each {:.1} entries in {:.1} jobs: writing {:.1} µs, waiting {:.1} µs, \
             reading {:.1} µs",
            t.submissions,
            per(t.entries),
            per(t.jobs),
            per(t.write_ns) / 1e3,
            per(t.wait_ns) / 1e3,
            per(t.read_ns) / 1e3
        ) + &self
                .device
                .profile()
                .map(|p| format!("; {p}"))
                .unwrap_or_default(),
        )
    }
}

impl<D: ServeDevice> ServedBatchDecoder<D> {
    /// [`BatchDecoder::decode_segments`] over borrowed segments: fills `commits[s]` and
    /// `counts[s]` for each segment `s`.
    fn decode_parts(
        &mut self,
        segments: &[&[Work]],
        commits: &mut [Vec<Commit>],
        counts: &mut [Vec<u32>],
    ) -> Result<u64> {
        self.pieces.clear();
        self.answers.clear();
        // Runs of whole segments, each run's entries within half a submission: every
        // stream busy in a run has its job in that run's submission, so a long batch
        // (many resets per stream) still keeps every stream's block busy, rather than
        // filling a submission with a few streams' many entries.
        let room = (self.layout.max_entries as usize / 2).max(1);
        let mut made = 0;
        let mut first = 0;
        let mut order: Vec<(u32, usize, usize)> = Vec::new();
        while first < segments.len() {
            let mut end = first + 1;
            let mut entries = segments[first].len();
            while end < segments.len() && entries + segments[end].len() <= room {
                entries += segments[end].len();
                end += 1;
            }
            // Each stream's work entries of the run, in segment order.
            order.clear();
            order.extend(
                segments[first..end]
                    .iter()
                    .enumerate()
                    .flat_map(|(k, seg)| {
                        seg.iter()
                            .enumerate()
                            .map(move |(i, w)| (w.stream, first + k, i))
                    }),
            );
            order.sort_unstable();
            let mut last_stream = None;
            for &(stream, s, i) in &order {
                let new_job = last_stream != Some(stream);
                last_stream = Some(stream);
                made += self.add_work(s, i, &segments[s][i], new_job)?;
            }
            made += self.flush()?;
            first = end;
        }
        for (s, seg) in segments.iter().enumerate() {
            commits[s].clear();
            counts[s].clear();
            counts[s].resize(seg.len(), 0);
        }
        // Pieces were made in (stream, segment, entry) order; answers go back in each
        // segment's entry order.
        let mut pieces = std::mem::take(&mut self.pieces);
        pieces.sort_by_key(|p| (p.segment, p.work));
        for p in &pieces {
            commits[p.segment].extend_from_slice(&self.answers[p.start..p.start + p.len]);
            counts[p.segment][p.work] += p.len as u32;
        }
        self.pieces = pieces;
        Ok(made)
    }
}

/// Host threads playing the persistent kernel's part: `blocks` threads, each serving
/// jobs `b, b + blocks, ...` of every submission (a job's entries in order) with a
/// [`StreamDecoder`] per stream.
/// Idle threads yield. Stopped (and joined) on drop.
pub struct CpuServeDevice {
    submissions: Submissions,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl CpuServeDevice {
    /// `streams` streams served by `blocks` threads; a submission holds `events_bytes`
    /// of events at most.
    pub fn new(
        model: &Arc<StreamModel>,
        streams: usize,
        blocks: u32,
        events_bytes: usize,
    ) -> Result<CpuServeDevice> {
        let layout = SubmitLayout {
            blocks: blocks.max(1),
            max_entries: (2 * streams).max(1) as u32,
            events_bytes,
            commit_slots: (events_bytes / model.round_bytes().max(1)) as u32 + 4 * streams as u32,
        };
        let region = SharedRegion::heap(layout.total_bytes())?;
        let decoders: Arc<Vec<Mutex<StreamDecoder>>> = Arc::new(
            (0..streams)
                .map(|_| Mutex::new(StreamDecoder::new(model)))
                .collect(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..layout.blocks as usize)
            .map(|b| {
                let dev = DeviceSide::new(region.clone(), layout);
                let decoders = Arc::clone(&decoders);
                let stop = Arc::clone(&stop);
                let rb = model.round_bytes();
                std::thread::spawn(move || {
                    serve_block(&dev, b, layout.blocks, &decoders, rb, &stop)
                })
            })
            .collect();
        Ok(CpuServeDevice {
            submissions: Submissions::new(region, layout)?,
            stop,
            threads,
        })
    }
}

/// One stand-in block's loop (the kernel's, step for step).
fn serve_block(
    dev: &DeviceSide,
    block: usize,
    blocks: u32,
    decoders: &[Mutex<StreamDecoder>],
    round_bytes: usize,
    stop: &AtomicBool,
) {
    let mut seen = 0;
    let mut events = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let (seq, jobs) = match dev.poll(seen) {
            Poll::Stop => return,
            Poll::Idle => {
                std::thread::yield_now();
                continue;
            }
            Poll::Work { seq, jobs } => (seq, jobs),
        };
        for job in (block..jobs as usize).step_by(blocks as usize) {
            // A job: its head, then each entry's `next`, in order.
            let mut j = job;
            for _ in 0..dev.max_entries() {
                let e = dev.entry(j);
                let count = decoders
                    .get(e.stream as usize)
                    .map_or(0, |d| serve_entry(dev, &e, d, round_bytes, &mut events));
                dev.set_count(j, count);
                if e.next as usize >= dev.max_entries() {
                    break;
                }
                j = e.next as usize;
            }
        }
        dev.done(block, seq);
        seen = seq;
    }
}

/// One entry on the stand-in: its answers written, their number returned.
fn serve_entry(
    dev: &DeviceSide,
    e: &StreamServeEntryDesc,
    decoder: &Mutex<StreamDecoder>,
    round_bytes: usize,
    events: &mut Vec<u8>,
) -> u32 {
    let mut d = decoder.lock().unwrap_or_else(|p| p.into_inner());
    let finish = e.flags & SERVE_FINISH != 0;
    let inputs = e.rounds as usize + usize::from(finish);
    events.resize(inputs * round_bytes, 0);
    dev.events(e.events_offset as usize, events);
    let piece = (e.flags & SERVE_RESET != 0, e.first_round, e.rounds);
    let mut count = 0u32;
    // The kernel answers a refusal with its status and goes on; so does the stand-in.
    feed(&mut d, piece, finish, events, |a| {
        let desc = match a {
            Ok(c) => StreamCommitDesc {
                first_round: c.first_round,
                flips: c.flips,
                rounds: c.rounds,
                status: STREAM_COMMIT,
            },
            Err(_) => StreamCommitDesc {
                status: STREAM_ROUNDS_MISSING,
                ..Default::default()
            },
        };
        if count < e.commit_capacity {
            dev.write_commit(e.commit_offset as usize + count as usize, &desc);
        }
        count += 1;
        true
    });
    count
}

impl ServeDevice for CpuServeDevice {
    fn submissions(&mut self) -> &mut Submissions {
        &mut self.submissions
    }
    fn wait(&mut self) -> Result<()> {
        let start = std::time::Instant::now();
        while !self.submissions.finished() {
            if start.elapsed() > SUBMISSION_DEADLINE {
                return Err(fault("the CPU serve device did not answer in time".into()));
            }
            std::thread::yield_now();
        }
        Ok(())
    }
    fn describe(&self) -> String {
        format!(
            "the CPU stand-in of the persistent kernel ({} host threads)",
            self.threads.len()
        )
    }
}

impl Drop for CpuServeDevice {
    fn drop(&mut self) {
        self.submissions.stop();
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::batch::CpuBatchDecoder;
    use qfwd_decode::window::StreamSampler;
    use qfwd_decode::Dem;

    fn model() -> Arc<StreamModel> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/surface_d5_r5_z_p005.dem"
        );
        Arc::new(StreamModel::from_dem(&Dem::from_path(path.as_ref()).unwrap(), 10, 5).unwrap())
    }

    /// Stream `s`'s `n` rounds from `from` (and its final round when `finish`).
    fn piece(
        rounds: &[Vec<Vec<u8>>],
        s: usize,
        reset: bool,
        from: usize,
        n: usize,
        finish: bool,
    ) -> Work {
        Work {
            stream: s as u32,
            reset,
            first_round: from as u64,
            rounds: n as u32,
            finish,
            events: rounds[s][from..from + n + usize::from(finish)].concat(),
        }
    }

    /// `rounds` sampled rounds (and a final one) of each of `streams` streams.
    fn sampled(m: &Arc<StreamModel>, streams: usize, rounds: u32, seed: u64) -> Vec<Vec<Vec<u8>>> {
        (0..streams)
            .map(|s| {
                let mut smp = StreamSampler::new(m, rounds, seed + s as u64).unwrap();
                std::iter::from_fn(|| smp.next_round()).collect()
            })
            .collect()
    }

    /// Batches with streams at different phases, resets mid-stream and final rounds,
    /// some entries larger than a submission holds: the served decoder (two stand-in
    /// blocks) commits exactly what the CPU stand-in does.
    #[test]
    fn served_batches_commit_what_the_stand_in_does() {
        let m = model();
        let streams = 5;
        let rounds = sampled(&m, streams, 60, 100);
        // 40 rounds of events per submission at most: a 45-round entry is split.
        let events = 40 * m.round_bytes();
        let device = CpuServeDevice::new(&m, streams, 2, events).unwrap();
        let mut served = ServedBatchDecoder::new(device, &m, streams);
        let mut reference = CpuBatchDecoder::new(&m, streams);
        let mut next = vec![0usize; streams];
        // Per batch and stream: rounds to send, and whether the stream finishes.
        let plan: [[(usize, bool); 5]; 4] = [
            [(3, false), (12, false), (0, false), (45, false), (7, false)],
            [(9, false), (0, false), (6, false), (15, true), (53, true)],
            [(20, false), (30, false), (4, false), (8, false), (0, false)],
            [(28, true), (18, true), (50, true), (0, false), (0, false)],
        ];
        let mut submissions = 0;
        for batch in plan {
            let mut work = Vec::new();
            for (s, &(n, finish)) in batch.iter().enumerate() {
                if n == 0 && !finish {
                    continue;
                }
                // A stream that finished starts again with a reset.
                let reset = next[s] == usize::MAX || next[s] == 0;
                let from = if next[s] == usize::MAX { 0 } else { next[s] };
                let n = n.min(59 - from);
                work.push(piece(&rounds, s, reset, from, n, finish));
                next[s] = if finish { usize::MAX } else { from + n };
            }
            let (mut want, mut want_counts) = (Vec::new(), Vec::new());
            reference
                .decode(&work, &mut want, &mut want_counts)
                .unwrap();
            let (mut got, mut got_counts) = (Vec::new(), Vec::new());
            submissions += served.decode(&work, &mut got, &mut got_counts).unwrap();
            assert_eq!(got_counts, want_counts);
            assert_eq!(got, want);
        }
        assert!(
            submissions > 4,
            "the large entries took more than one submission each"
        );
    }

    /// Streams reset mid-batch (an entry in each of three segments, one split over two
    /// submissions): one job per stream, answers filed by segment as the segment-by-
    /// segment default files them.
    #[test]
    fn segments_go_in_one_submission_with_each_streams_pieces_in_order() {
        let m = model();
        let rb = m.round_bytes();
        let streams = 4;
        let rounds = sampled(&m, streams, 40, 7);
        let work = |s, reset, from, n, finish| piece(&rounds, s, reset, from, n, finish);
        // Stream 0: 12 rounds, finish; again from 0 (reset) 30 rounds. Stream 1: three
        // pieces. Stream 2 in the middle segment only; stream 3 only in the first.
        let segments = vec![
            vec![
                work(0, true, 0, 12, true),
                work(1, true, 0, 6, false),
                work(3, true, 0, 25, false),
            ],
            vec![
                work(1, false, 6, 14, true),
                work(2, true, 0, 11, false),
                work(0, true, 0, 30, false),
            ],
            vec![work(1, true, 0, 9, false)],
        ];
        let mut reference = CpuBatchDecoder::new(&m, streams);
        let (mut want, mut want_n) = (vec![Vec::new(); 3], vec![Vec::new(); 3]);
        let calls = reference
            .decode_segments(&segments, &mut want, &mut want_n)
            .unwrap();
        assert_eq!(calls, 3, "the default: a call per segment");
        // Room for 40 rounds a submission: stream 0's 42 rounds take two.
        let device = CpuServeDevice::new(&m, streams, 3, 40 * rb).unwrap();
        let mut served = ServedBatchDecoder::new(device, &m, streams);
        let (mut got, mut got_n) = (
            vec![
                vec![Commit {
                    first_round: 9,
                    rounds: 9,
                    flips: 9
                }];
                3
            ],
            vec![vec![9]; 3],
        );
        let made = served
            .decode_segments(&segments, &mut got, &mut got_n)
            .unwrap();
        assert_eq!(got_n, want_n);
        assert_eq!(got, want);
        assert!(want.iter().map(Vec::len).sum::<usize>() > 8, "{want:?}");
        assert_eq!(made, served.times().submissions);
        // 107 rounds at 40 a submission, no more for the resets.
        assert!((3..=4).contains(&made), "{made} submissions");
    }

    #[test]
    fn a_round_out_of_order_is_a_fault_not_an_answer() {
        let m = model();
        let device = CpuServeDevice::new(&m, 2, 1, 4096).unwrap();
        let mut served = ServedBatchDecoder::new(device, &m, 2);
        let rb = m.round_bytes();
        let work = |stream, first_round| Work {
            stream,
            reset: false,
            first_round,
            rounds: 1,
            finish: false,
            events: vec![0; rb],
        };
        let (mut c, mut n) = (Vec::new(), Vec::new());
        assert!(served.decode(&[work(0, 0)], &mut c, &mut n).is_ok());
        let err = served.decode(&[work(0, 5)], &mut c, &mut n).unwrap_err();
        assert!(err.to_string().contains("refused"), "{err}");
        assert!(served.decode(&[work(7, 0)], &mut c, &mut n).is_err());
    }
}

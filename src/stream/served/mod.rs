//! The batched engine's decoder when a persistent device side keeps every stream
//! ([`ServedBatchDecoder`]): a batch becomes one submission (or a few, when it exceeds the
//! buffer's capacities) to the submission buffers of [`crate::mailbox::streams`], not a
//! launch. Resets travel as a flag of the stream's entry and happen in place; streams at
//! different round phases share the submission, since each entry names its own rounds.
//!
//! Batches go in flight two at a time ([`BatchDecoder::post`], [`BatchDecoder::collect`]):
//! a batch that fits one submission is written into the free buffer while the device
//! serves the other, so the device does not wait for the host to read one batch's answers
//! and write the next. A larger one is decoded synchronously ([`BatchDecoder::decode`]),
//! after those in flight.
//!
//! Two device sides ([`ServeDevice`]): the persistent GPU kernel
//! ([`RunningStreamServer`]), and [`CpuServeDevice`], host threads that follow the kernel's
//! steps over a heap region with a `StreamDecoder` per stream, so CI runs the protocol
//! and this decoder without a GPU.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use qfwd_decode::window::{Commit, StreamModel};

use super::batch::{fault, BatchDecoder, Work};
use crate::abi::{
    StreamCommitDesc, StreamServeEntryDesc, SERVE_BUFFERS, SERVE_FINISH, SERVE_RESET,
    STREAM_COMMIT, STREAM_FINISHED, STREAM_ROUNDS_MISSING, STREAM_ROUND_REPEATED, STREAM_TOO_SHORT,
};
use crate::gpu::stream_server::{PreparedStreamServer, RunningStreamServer};
use crate::mailbox::streams::{Submissions, SubmitLayout};
use crate::Result;

/// How long one submission may take.
const SUBMISSION_DEADLINE: Duration = Duration::from_secs(20);

/// A device side serving a submission block.
pub trait ServeDevice: Send {
    fn submissions(&mut self) -> &mut Submissions;
    /// Waits for the oldest submission in flight's answers (with a deadline).
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
             memory; batches in two submission buffers, one written while the other is served)",
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
    /// Batches posted (one submission each), oldest first, awaiting their answers.
    posted: VecDeque<Posted>,
    times: ServedTimes,
}

/// A batch in flight as one submission: its entries, each entry's piece, the pieces,
/// and each segment's number of work entries.
#[derive(Debug, Default)]
struct Posted {
    entries: Vec<StreamServeEntryDesc>,
    spans: Vec<usize>,
    pieces: Vec<Piece>,
    lens: Vec<usize>,
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
            posted: VecDeque::new(),
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
        let t0 = Instant::now();
        self.submit_staged()?;
        let t1 = Instant::now();
        self.device.wait()?;
        let t2 = Instant::now();
        let subs = self.device.submissions();
        read_answers(
            subs,
            &self.entries,
            &self.spans,
            &mut self.pieces,
            &mut self.answers,
        )?;
        subs.release();
        self.spans.clear();
        self.entries.clear();
        let t = &mut self.times;
        t.write_ns += (t1 - t0).as_nanos() as u64;
        t.wait_ns += (t2 - t1).as_nanos() as u64;
        t.read_ns += t2.elapsed().as_nanos() as u64;
        Ok(1)
    }

    /// Rings the gathered entries as the next submission; the events, jobs and slots
    /// start over (the entries and spans stay, to read the answers by).
    fn submit_staged(&mut self) -> Result<()> {
        self.device
            .submissions()
            .submit(&self.entries, &self.jobs, &self.events)?;
        let t = &mut self.times;
        t.submissions += 1;
        t.entries += self.entries.len() as u64;
        t.jobs += self.jobs.len() as u64;
        self.jobs.clear();
        self.events.clear();
        self.slots = 0;
        Ok(())
    }

    /// Whether `segments` fit one submission as [`Self::add_work`] cuts them (counting
    /// every piece's events as if each needed its alignment: an upper bound).
    fn fits_one(&self, segments: &[&[Work]]) -> bool {
        let (rb, most) = (self.round_bytes, self.piece_rounds());
        let (mut entries, mut bytes, mut slots) = (0usize, 0usize, 0usize);
        for c in segments
            .iter()
            .flat_map(|s| s.iter())
            .flat_map(|w| cuts(w, most))
        {
            entries += 1;
            bytes += ((c.take + usize::from(c.finish)) * rb).next_multiple_of(4);
            slots += self.capacity(c.take) as usize;
        }
        self.layout.fits(entries, bytes, slots)
    }

    /// Commit slots a piece of `take` rounds (and maybe a final round) may fill.
    fn capacity(&self, take: usize) -> u32 {
        take as u32 / self.commit_rounds + 2
    }

    /// [`BatchDecoder::post`] over borrowed segments.
    fn post_parts(&mut self, segments: &[&[Work]]) -> Result<bool> {
        let room = self.device.submissions().in_flight() < SERVE_BUFFERS;
        let work = segments.iter().any(|s| !s.is_empty());
        if !room || !work || !self.entries.is_empty() || !self.fits_one(segments) {
            return Ok(false);
        }
        let t0 = Instant::now();
        self.pieces.clear();
        if self.add_run(segments, 0, segments.len())? != 0 {
            return Err(fault(
                "a batch that fits one submission was split (fits_one is wrong)".into(),
            ));
        }
        self.submit_staged()?;
        self.posted.push_back(Posted {
            entries: std::mem::take(&mut self.entries),
            spans: std::mem::take(&mut self.spans),
            pieces: std::mem::take(&mut self.pieces),
            lens: segments.iter().map(|s| s.len()).collect(),
        });
        self.times.write_ns += t0.elapsed().as_nanos() as u64;
        Ok(true)
    }

    /// [`BatchDecoder::collect`]: the oldest posted batch's answers.
    fn collect_posted(
        &mut self,
        commits: &mut [Vec<Commit>],
        counts: &mut [Vec<u32>],
    ) -> Result<u64> {
        let Some(mut p) = self.posted.pop_front() else {
            return Err(fault("no batch was posted".into()));
        };
        let t1 = Instant::now();
        self.device.wait()?;
        let t2 = Instant::now();
        let subs = self.device.submissions();
        self.answers.clear();
        read_answers(subs, &p.entries, &p.spans, &mut p.pieces, &mut self.answers)?;
        subs.release();
        deliver(&mut p.pieces, &self.answers, &p.lens, commits, counts);
        let t = &mut self.times;
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
        let mut made = 0;
        for c in cuts(w, self.piece_rounds()) {
            let mut flags = 0;
            if c.from == 0 && w.reset {
                flags |= SERVE_RESET;
            }
            if c.finish {
                flags |= SERVE_FINISH;
            }
            let e = StreamServeEntryDesc {
                first_round: w.first_round + c.from as u64,
                stream: w.stream,
                flags,
                rounds: c.take as u32,
                commit_capacity: self.capacity(c.take),
                ..Default::default()
            };
            self.pieces.push(Piece {
                segment,
                work: index,
                start: 0,
                len: 0,
            });
            let end = (c.from + c.take + usize::from(c.finish)) * rb;
            let piece = self.pieces.len() - 1;
            made += self.add(
                piece,
                e,
                &w.events[c.from * rb..end],
                new_job && c.from == 0,
            )?;
        }
        Ok(made)
    }
}

/// One piece of a work entry in a submission: `take` rounds from `from`, then the final
/// round when `finish`.
#[derive(Debug, Clone, Copy)]
struct Cut {
    from: usize,
    take: usize,
    finish: bool,
}

/// Work `w` in pieces of at most `most` rounds (`most` >= 1); one piece at least.
fn cuts(w: &Work, most: usize) -> impl Iterator<Item = Cut> + '_ {
    let rounds = w.rounds as usize;
    let (mut from, mut done) = (0usize, false);
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let take = (rounds - from).min(most);
        done = from + take == rounds;
        let cut = Cut {
            from,
            take,
            finish: done && w.finish,
        };
        from += take;
        Some(cut)
    })
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

    fn depth(&self) -> usize {
        SERVE_BUFFERS as usize
    }

    fn post(&mut self, segments: &[Vec<Work>]) -> Result<bool> {
        let parts: Vec<&[Work]> = segments.iter().map(Vec::as_slice).collect();
        self.post_parts(&parts)
    }

    fn ready(&mut self) -> bool {
        self.posted.is_empty() || self.device.submissions().finished()
    }

    fn collect(&mut self, commits: &mut [Vec<Commit>], counts: &mut [Vec<u32>]) -> Result<u64> {
        self.collect_posted(commits, counts)
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
        if !self.posted.is_empty() {
            return Err(fault(
                "a batch decoded while posted ones are in flight: collect them first".into(),
            ));
        }
        self.pieces.clear();
        self.answers.clear();
        // Runs of whole segments, each run's entries within half a submission: every
        // stream busy in a run has its job in that run's submission, so a long batch
        // (many resets per stream) still keeps every stream's block busy, rather than
        // filling a submission with a few streams' many entries.
        let room = (self.layout.max_entries as usize / 2).max(1);
        let mut made = 0;
        let mut first = 0;
        while first < segments.len() {
            let mut end = first + 1;
            let mut entries = segments[first].len();
            while end < segments.len() && entries + segments[end].len() <= room {
                entries += segments[end].len();
                end += 1;
            }
            made += self.add_run(segments, first, end)?;
            made += self.flush()?;
            first = end;
        }
        let mut pieces = std::mem::take(&mut self.pieces);
        let lens: Vec<usize> = segments.iter().map(|s| s.len()).collect();
        deliver(&mut pieces, &self.answers, &lens, commits, counts);
        self.pieces = pieces;
        Ok(made)
    }

    /// Adds segments `first .. end`: each stream's work entries in segment order, a
    /// stream's first starting its job. Returns submissions made on the way.
    fn add_run(&mut self, segments: &[&[Work]], first: usize, end: usize) -> Result<u64> {
        let mut order: Vec<(u32, usize, usize)> = segments[first..end]
            .iter()
            .enumerate()
            .flat_map(|(k, seg)| {
                seg.iter()
                    .enumerate()
                    .map(move |(i, w)| (w.stream, first + k, i))
            })
            .collect();
        order.sort_unstable();
        let mut made = 0;
        let mut last_stream = None;
        for &(stream, s, i) in &order {
            let new_job = last_stream != Some(stream);
            last_stream = Some(stream);
            made += self.add_work(s, i, &segments[s][i], new_job)?;
        }
        Ok(made)
    }
}

/// Files the answers of the submission of `entries` (entry `j` of piece `spans[j]`),
/// finished on the device, under their pieces, appending them to `answers`.
fn read_answers(
    subs: &Submissions,
    entries: &[StreamServeEntryDesc],
    spans: &[usize],
    pieces: &mut [Piece],
    answers: &mut Vec<Commit>,
) -> Result<()> {
    for (j, e) in entries.iter().enumerate() {
        let n = subs.count(j);
        if n > e.commit_capacity {
            return Err(fault(format!(
                "stream {}: {n} answers to {} rounds (room for {})",
                e.stream, e.rounds, e.commit_capacity
            )));
        }
        let piece = &mut pieces[spans[j]];
        piece.start = answers.len();
        piece.len = n as usize;
        for k in 0..n as usize {
            let c = subs.commit(e.commit_offset as usize + k);
            answers.push(answer(e, &c)?);
        }
    }
    Ok(())
}

/// Each segment's commits and counts (segment `s` has `lens[s]` work entries) from the
/// pieces' answers. Pieces were made in (stream, segment, entry) order; answers go back
/// in each segment's entry order.
fn deliver(
    pieces: &mut [Piece],
    answers: &[Commit],
    lens: &[usize],
    commits: &mut [Vec<Commit>],
    counts: &mut [Vec<u32>],
) {
    for (s, &len) in lens.iter().enumerate() {
        commits[s].clear();
        counts[s].clear();
        counts[s].resize(len, 0);
    }
    pieces.sort_by_key(|p| (p.segment, p.work));
    for p in pieces.iter() {
        commits[p.segment].extend_from_slice(&answers[p.start..p.start + p.len]);
        counts[p.segment][p.work] += p.len as u32;
    }
}

mod stand_in;
pub use stand_in::CpuServeDevice;

#[cfg(test)]
mod tests;

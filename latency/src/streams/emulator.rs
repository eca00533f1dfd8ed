//! The QPU stream emulator: N logical qubits, one round of syndromes each per cycle, sent
//! in one request per link per cycle; every answer checked against what the stream was
//! owed.
//!
//! Each link is a thread of its own with a wire of its own, and owns a contiguous range
//! of the streams ([`link_streams`]): link `i` of L carries streams `i * ceil(N / L) ..`.
//! Every link's cycle `k` is due at the same instant; at the end the links' measurements
//! merge into one [`StreamOutcome`] (counts add, highs take the highest, and a cycle late
//! on any link counts once).
//!
//! Each stream plays Stim shots of a long memory experiment back to back (stream `s` plays
//! shots `s`, `s + N`, ... of the fixture, cycling): round 0 of each shot carries the reset
//! flag, its last round the final flag. Cycle `k` is due at `start + k * round_ns`; a
//! round's time is that *intended* time (as wrk2 times open-loop requests), so an emulator
//! that falls behind shows up in the numbers instead of hiding them.
//!
//! For every window the emulator knows which round completes it (W, C and the shot's
//! length say so), and expects its commit, in order per stream. Measured:
//! - **reaction time**: the window's last round due -> its commit received;
//! - **backlog**: rounds whose window was complete at the emulator but not yet answered,
//!   the most any stream had at once;
//! - **behind**: at the end of sending, how long the oldest unanswered window had waited;
//! - **logical errors**: per finished shot, the XOR of its commits against the observable
//!   flips Stim recorded.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use qfwd::decode::shots::{ShotFormat, Shots};
use qfwd::decode::window::StreamModel;
use qfwd::decode::Dem;
use qfwd::stream::protocol::{
    self, refusal, BatchWriter, Record, RecordKind, FLAG_FINAL, FLAG_RESET,
};
use qfwd::transport::Client;
use qfwd::wire;

use crate::{Error, Result};

/// A cycle sent this late after it was due counts as late (the emulator stalled).
pub const LATE_NS: u64 = 50_000;

/// Shots of a long memory experiment, split into the rounds a stream sends.
pub struct StreamShots {
    /// Per shot: its rounds (`round_bytes` each; the final round last).
    pub rounds: Vec<Vec<u8>>,
    /// Per shot: the observable flips Stim recorded (bit k: Lk).
    pub observables: Vec<u64>,
    /// Rounds per shot, the final one included.
    pub shot_rounds: usize,
    pub round_bytes: usize,
}

impl StreamShots {
    /// Reads `<base>.dem`, `<base>.b8` and `<base>.obs.01`, split by `model`'s rounds.
    pub fn load(base: &Path, model: &StreamModel) -> Result<StreamShots> {
        let file = |ext: &str| {
            let mut p = base.as_os_str().to_owned();
            p.push(ext);
            std::path::PathBuf::from(p)
        };
        let bad = |detail: String| Error::Emulator {
            target: base.display().to_string(),
            detail,
        };
        let dem = Dem::from_path(&file(".dem")).map_err(|e| bad(e.to_string()))?;
        let exp = model.experiment(&dem).map_err(|e| bad(e.to_string()))?;
        let dets = Shots::read(
            &file(".b8"),
            dem.num_detectors as usize,
            Some(ShotFormat::B8),
        )
        .map_err(|e| bad(e.to_string()))?;
        let obs = Shots::read(
            &file(".obs.01"),
            dem.num_observables as usize,
            Some(ShotFormat::Zero1),
        )
        .map_err(|e| bad(e.to_string()))?;
        if dets.len() != obs.len() || dets.is_empty() {
            return Err(bad(format!(
                "{} shots of detection events but {} of observables",
                dets.len(),
                obs.len()
            )));
        }
        let mut rounds = Vec::with_capacity(dets.len());
        let mut observables = Vec::with_capacity(dets.len());
        for i in 0..dets.len() {
            rounds.push(exp.split(dets.row(i)).concat());
            observables.push(
                (0..obs.bits().min(64)).fold(0u64, |m, k| m | (u64::from(obs.get(i, k)) << k)),
            );
        }
        Ok(StreamShots {
            rounds,
            observables,
            shot_rounds: exp.rounds() as usize + 1,
            round_bytes: model.round_bytes(),
        })
    }

    fn round(&self, shot: usize, r: usize) -> &[u8] {
        &self.rounds[shot][r * self.round_bytes..(r + 1) * self.round_bytes]
    }
}

/// What the emulator sends and how.
#[derive(Debug, Clone)]
pub struct StreamLoad {
    pub streams: u32,
    pub links: u32,
    /// Cycle length: every stream sends one round per cycle.
    pub round_ns: u64,
    /// Cycles sent.
    pub rounds: u64,
    /// Cycles before reaction times are kept.
    pub warmup_rounds: u64,
    /// Spread the streams' shots over `commit` phases (windows of different streams end
    /// on different cycles); false: every stream starts at cycle 0.
    pub stagger: bool,
    pub window: u32,
    pub commit: u32,
    /// After the last cycle, how long to wait for the commits still owed.
    pub drain: Duration,
    /// Yield while waiting for the next cycle instead of spinning.
    pub yield_when_idle: bool,
}

/// A window owed to a stream.
#[derive(Debug, Clone, Copy)]
struct Owed {
    first_round: u64,
    rounds: u32,
    /// When its last round was due, ns after the start.
    due_ns: u64,
    /// The cycle of its last round (reaction times kept from `warmup_rounds` on).
    cycle: u64,
    last: bool,
    /// The shot it belongs to (the stream's count of shots begun).
    seq: usize,
}

/// A shot a stream is playing, as far as its answers go.
#[derive(Debug, Clone, Copy)]
struct ShotInFlight {
    seq: usize,
    /// Its index in the fixture.
    index: usize,
    /// XOR of its commits so far.
    flips: u64,
}

/// One stream as the emulator sees it.
#[derive(Debug, Default)]
struct StreamSide {
    /// Cycle of round 0 of its current shot (streams start at their phase).
    shot_start: u64,
    /// Shot index in the fixture of the current shot.
    shot: usize,
    /// Shots begun (the `k` of shot `s + k * N`).
    shots_begun: usize,
    /// Windows owed, oldest first, across shots.
    owed: VecDeque<Owed>,
    /// Rounds in `owed`.
    owed_rounds: u64,
    /// Shots begun and not yet over at the service, oldest first.
    shots: VecDeque<ShotInFlight>,
    /// The service acknowledged the reset that began the oldest shot.
    front_started: bool,
    /// A round of this stream was refused: its windows no longer all come, so the
    /// emulator stops expecting any (the run did not keep up).
    broken: bool,
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct StreamOutcome {
    /// Reaction times, ns.
    pub reaction: Histogram<u64>,
    pub round_entries: u64,
    pub rounds_committed: u64,
    /// Rounds the service refused, per refusal code (index `code - 1`).
    pub refused: [u64; refusal::ALL.len()],
    pub windows: u64,
    /// Windows owed and never answered (their shot broke, or the drain ran out).
    pub windows_lost: u64,
    /// Records that were not what the stream was owed (never expected).
    pub unexpected: u64,
    /// Streams that had a round refused (their windows stopped being tracked).
    pub streams_broken: u64,
    /// Error statuses on whole requests.
    pub request_errors: u64,
    pub backlog_max_rounds: u64,
    /// At the last cycle: how long the oldest unanswered window had waited, ns.
    pub behind_end_ns: u64,
    /// The latest a cycle was sent after it was due, ns.
    pub send_late_max_ns: u64,
    /// Cycles sent more than [`LATE_NS`] after they were due.
    pub send_late_cycles: u64,
    /// Requests that found their wire full (the service not taking them), and the time
    /// spent waiting for room, summed over links.
    pub sends_blocked: u64,
    pub send_blocked_ns: u64,
    pub shots: u64,
    pub mistakes: u64,
    pub elapsed: Duration,
}

impl StreamOutcome {
    pub fn refused_total(&self) -> u64 {
        self.refused.iter().sum()
    }

    pub fn ler(&self) -> f64 {
        if self.shots == 0 {
            f64::NAN
        } else {
            self.mistakes as f64 / self.shots as f64
        }
    }
}

/// The windows a shot of `shot_rounds` rounds owes: (first round, rounds, last round).
pub fn windows_of_shot(shot_rounds: u64, w: u64, c: u64) -> Vec<(u64, u64, u64)> {
    let syndrome = shot_rounds - 1;
    let mut v = Vec::new();
    let mut j = 0;
    while j * c + w <= syndrome {
        v.push((j * c, c, j * c + w - 1));
        j += 1;
    }
    v.push((j * c, shot_rounds - j * c, shot_rounds - 1));
    v
}

/// The emulator's view of one link's streams and what it measured so far.
struct Book<'a> {
    /// The link's streams: ids `first ..`.
    streams: Vec<StreamSide>,
    first: u32,
    shots: &'a StreamShots,
    load: &'a StreamLoad,
    out: StreamOutcome,
    rx: Vec<u8>,
    start: Instant,
}

impl Book<'_> {
    fn now(&self) -> u64 {
        Instant::now()
            .saturating_duration_since(self.start)
            .as_nanos() as u64
    }

    /// Sends one request, retrying while the transport is full (answering meanwhile).
    fn send(&mut self, client: &mut impl Client, bytes: &[u8]) -> Result<()> {
        if client.send(bytes)? {
            return Ok(());
        }
        // The service is not taking requests as fast as they are due: time the wait, so
        // a late emulator can be told from one held back by the service.
        let since = Instant::now();
        let deadline = since + Duration::from_secs(10);
        self.out.sends_blocked += 1;
        while !client.send(bytes)? {
            if Instant::now() > deadline {
                return Err(Error::Emulator {
                    target: client.describe(),
                    detail: "the service took no request for 10 s".into(),
                });
            }
            self.receive(client)?;
        }
        self.out.send_blocked_ns += since.elapsed().as_nanos() as u64;
        Ok(())
    }

    /// Takes every response waiting; true when there was any.
    fn receive(&mut self, client: &mut impl Client) -> Result<bool> {
        let mut any = false;
        while let Some(len) = client.try_recv(&mut self.rx)? {
            any = true;
            let now = self.now();
            let rx = std::mem::take(&mut self.rx);
            self.response(&rx[..len.min(rx.len())], now);
            self.rx = rx;
        }
        Ok(any)
    }

    fn response(&mut self, bytes: &[u8], now: u64) {
        let Ok(v) = wire::parse_response(bytes) else {
            self.out.unexpected += 1;
            return;
        };
        if v.header.status != wire::status::OK {
            self.out.request_errors += 1;
            return;
        }
        let Ok(records) = protocol::records(v.result) else {
            self.out.unexpected += 1;
            return;
        };
        for r in records {
            match r {
                Ok(r) => take_record(
                    r,
                    self.first,
                    &mut self.streams,
                    self.shots,
                    self.load,
                    &mut self.out,
                    now,
                ),
                Err(_) => self.out.unexpected += 1,
            }
        }
    }
}

impl StreamOutcome {
    fn empty() -> StreamOutcome {
        StreamOutcome {
            reaction: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("static bounds"),
            round_entries: 0,
            rounds_committed: 0,
            refused: [0; refusal::ALL.len()],
            windows: 0,
            windows_lost: 0,
            unexpected: 0,
            streams_broken: 0,
            request_errors: 0,
            backlog_max_rounds: 0,
            behind_end_ns: 0,
            send_late_max_ns: 0,
            send_late_cycles: 0,
            sends_blocked: 0,
            send_blocked_ns: 0,
            shots: 0,
            mistakes: 0,
            elapsed: Duration::ZERO,
        }
    }

    /// Adds another link's measurements: counts add, highs take the higher. Late cycles
    /// are not added here (a cycle late on two links is one late cycle): the caller
    /// counts them across links.
    fn merge(&mut self, o: &StreamOutcome) {
        self.reaction
            .add(&o.reaction)
            .expect("histograms of the same bounds");
        self.round_entries += o.round_entries;
        self.rounds_committed += o.rounds_committed;
        for (a, b) in self.refused.iter_mut().zip(o.refused) {
            *a += b;
        }
        self.windows += o.windows;
        self.windows_lost += o.windows_lost;
        self.unexpected += o.unexpected;
        self.streams_broken += o.streams_broken;
        self.request_errors += o.request_errors;
        self.backlog_max_rounds = self.backlog_max_rounds.max(o.backlog_max_rounds);
        self.behind_end_ns = self.behind_end_ns.max(o.behind_end_ns);
        self.send_late_max_ns = self.send_late_max_ns.max(o.send_late_max_ns);
        self.sends_blocked += o.sends_blocked;
        self.send_blocked_ns += o.send_blocked_ns;
        self.shots += o.shots;
        self.mistakes += o.mistakes;
        self.elapsed = self.elapsed.max(o.elapsed);
    }
}

/// The streams link `link` of `links` carries: contiguous ranges of `ceil(N / links)`.
pub fn link_streams(streams: u32, links: u32, link: u32) -> std::ops::Range<u32> {
    let per_link = streams.div_ceil(links.clamp(1, streams.max(1)));
    let lo = (link * per_link).min(streams);
    lo..((link + 1) * per_link).min(streams)
}

/// Runs the load against a service: link `i` sends over `clients[i]` from a thread of its
/// own, pinned to `cores[i]` when `cores` is not empty (the caller's mask unchanged).
/// `progress` gets cycles sent (as link 0 sends them).
pub fn run<C: Client + Send>(
    clients: &mut [C],
    cores: &[usize],
    shots: &StreamShots,
    load: &StreamLoad,
    mut progress: impl FnMut(u64) + Send,
) -> Result<StreamOutcome> {
    let links = load.links.clamp(1, load.streams);
    if clients.len() != links as usize || (!cores.is_empty() && cores.len() < clients.len()) {
        return Err(Error::Emulator {
            target: "stream emulator".into(),
            detail: format!(
                "{} links need a client each (got {}) and, when pinned, a core each (got {})",
                links,
                clients.len(),
                cores.len()
            ),
        });
    }
    // Every link's cycle k is due at the same instant; a cycle late on any link is late.
    let start = Instant::now() + Duration::from_millis(5);
    let late: Vec<AtomicU64> = (0..load.rounds.div_ceil(64))
        .map(|_| AtomicU64::new(0))
        .collect();
    let progress: &mut (dyn FnMut(u64) + Send) = &mut progress;
    let mut progress = Some(progress);
    let outcomes: Vec<Result<StreamOutcome>> = std::thread::scope(|scope| {
        let handles: Vec<_> = clients
            .iter_mut()
            .enumerate()
            .map(|(i, client)| {
                let core = cores.get(i).copied();
                let link = LinkRun {
                    streams: link_streams(load.streams, links, i as u32),
                    shots,
                    load,
                    start,
                    late: &late,
                    progress: progress.take(),
                };
                std::thread::Builder::new()
                    .name(format!("qfwd-emu-link-{i}"))
                    .spawn_scoped(scope, move || {
                        if let Some(c) = core {
                            if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
                                return Err(Error::Emulator {
                                    target: "local".into(),
                                    detail: format!("cannot pin emulator link {i} to core {c}"),
                                });
                            }
                        }
                        link.run(client)
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.map_err(|e| Error::Emulator {
                    target: "local".into(),
                    detail: format!("cannot start an emulator thread: {e}"),
                })?
                .join()
                .map_err(|_| Error::Emulator {
                    target: "local".into(),
                    detail: "a stream emulator thread panicked".into(),
                })?
            })
            .collect()
    });
    let mut out = StreamOutcome::empty();
    for o in outcomes {
        out.merge(&o?);
    }
    out.send_late_cycles = late
        .iter()
        .map(|w| u64::from(w.load(Relaxed).count_ones()))
        .sum();
    Ok(out)
}

/// One link's share of the run: its streams, on a thread of its own.
struct LinkRun<'a> {
    streams: std::ops::Range<u32>,
    shots: &'a StreamShots,
    load: &'a StreamLoad,
    start: Instant,
    /// A bit per cycle: sent more than [`LATE_NS`] after it was due on some link.
    late: &'a [AtomicU64],
    progress: Option<&'a mut (dyn FnMut(u64) + Send)>,
}

impl LinkRun<'_> {
    fn run(mut self, client: &mut impl Client) -> Result<StreamOutcome> {
        let (shots, load) = (self.shots, self.load);
        let per_link = load.streams.div_ceil(load.links.clamp(1, load.streams)) as usize;
        // Per round of a shot: the window it completes (first round, rounds), if any.
        let mut windows = vec![None; shots.shot_rounds];
        for (first, rounds, last) in windows_of_shot(
            shots.shot_rounds as u64,
            load.window.into(),
            load.commit.into(),
        ) {
            windows[last as usize] = Some((first, rounds));
        }
        let streams: Vec<StreamSide> = self
            .streams
            .clone()
            .map(|s| StreamSide {
                // Contiguous groups share a phase, so a link's request has few blocks.
                shot_start: if load.stagger {
                    ((s as usize % per_link) * load.commit as usize / per_link) as u64
                } else {
                    0
                },
                ..StreamSide::default()
            })
            .collect();
        let mut book = Book {
            streams,
            first: self.streams.start,
            shots,
            load,
            out: StreamOutcome::empty(),
            rx: vec![0u8; wire::MAX_DATAGRAM],
            start: self.start,
        };
        let rb = shots.round_bytes;
        // The batch header, every stream's round, a block header per phase.
        let max_arg = 16 + per_link * rb + 16 * (load.commit as usize + 4) * 2 + 16;
        let mut arg = vec![0u8; max_arg];
        let mut datagram = vec![0u8; wire::HEADER_LEN + max_arg];
        let mut data = Vec::with_capacity(per_link * rb);
        let mut request_id: u32 = 0;
        for cycle in 0..load.rounds {
            let due = cycle * load.round_ns;
            // Wait for the cycle, answering what comes meanwhile.
            loop {
                let now = book.now();
                if now >= due {
                    book.out.send_late_max_ns = book.out.send_late_max_ns.max(now - due);
                    if now - due > LATE_NS {
                        self.late[(cycle / 64) as usize].fetch_or(1 << (cycle % 64), Relaxed);
                    }
                    break;
                }
                if !book.receive(client)? && load.yield_when_idle {
                    std::thread::yield_now();
                }
            }
            let first = book.first;
            let len = build_request(
                &mut arg,
                &mut data,
                &mut book.streams,
                first,
                cycle,
                shots,
                load,
                &windows,
                due,
                &mut book.out,
            )?;
            if len > 0 {
                request_id = request_id.wrapping_add(1);
                let total = wire::write_request(
                    &mut datagram,
                    protocol::ENQUEUE_SYNDROMES_ID,
                    request_id,
                    due,
                    &arg[..len],
                )
                .map_err(|e| Error::Emulator {
                    target: client.describe(),
                    detail: e.to_string(),
                })?;
                book.send(client, &datagram[..total])?;
            }
            if cycle % 4096 == 0 {
                if let Some(p) = self.progress.as_mut() {
                    p(cycle);
                }
            }
            book.receive(client)?;
        }
        let out = drain(book, client)?;
        if let Some(p) = self.progress.as_mut() {
            p(load.rounds);
        }
        Ok(out)
    }
}

/// After the last cycle: notes how far behind the answers were, waits up to the drain
/// time for the windows still owed (and, where the wire can tell, for the service to take
/// every request, so none is still on the wire when it stops), and counts the windows that
/// never came as lost.
fn drain(mut book: Book<'_>, client: &mut impl Client) -> Result<StreamOutcome> {
    let now = book.now();
    book.out.behind_end_ns = book
        .streams
        .iter()
        .filter_map(|s| s.owed.front().map(|o| now.saturating_sub(o.due_ns)))
        .max()
        .unwrap_or(0);
    let deadline = Instant::now() + book.load.drain;
    while (book.streams.iter().any(|s| !s.owed.is_empty())
        || client.unread().is_some_and(|n| n > 0))
        && Instant::now() < deadline
    {
        if !book.receive(client)? {
            std::thread::yield_now();
        }
    }
    let mut out = book.out;
    out.windows_lost += book
        .streams
        .iter()
        .map(|s| s.owed.len() as u64)
        .sum::<u64>();
    out.elapsed = book.start.elapsed();
    Ok(out)
}

/// This cycle's request for one link's streams (`first` the first one's id); 0 when none
/// of them sends this cycle (staggered starts).
#[allow(clippy::too_many_arguments)]
fn build_request(
    arg: &mut [u8],
    data: &mut Vec<u8>,
    streams: &mut [StreamSide],
    first: u32,
    cycle: u64,
    shots: &StreamShots,
    load: &StreamLoad,
    windows: &[Option<(u64, u64)>],
    due: u64,
    out: &mut StreamOutcome,
) -> Result<usize> {
    let rb = shots.round_bytes;
    let total_shots = shots.rounds.len();
    let n = load.streams as usize;
    let mut w = BatchWriter::new(arg, rb).map_err(emulator_error)?;
    // Runs of consecutive streams sending the same round with the same flags: one block.
    let mut run: Option<(u32, u16, u8, u64)> = None;
    data.clear();
    let flush = |w: &mut BatchWriter<'_>,
                 run: &mut Option<(u32, u16, u8, u64)>,
                 data: &mut Vec<u8>|
     -> Result<()> {
        if let Some((fs, count, flags, round)) = run.take() {
            w.block(fs, count, 1, flags, round, data)
                .map_err(emulator_error)?;
            data.clear();
        }
        Ok(())
    };
    for (i, s) in streams.iter_mut().enumerate() {
        let id = first + i as u32;
        if cycle < s.shot_start {
            flush(&mut w, &mut run, data)?;
            continue;
        }
        let mut r = (cycle - s.shot_start) as usize;
        if r == shots.shot_rounds {
            s.shot_start = cycle;
            r = 0;
        }
        if r == 0 {
            s.shot = (id as usize + s.shots_begun * n) % total_shots;
            s.shots_begun += 1;
            s.shots.push_back(ShotInFlight {
                seq: s.shots_begun,
                index: s.shot,
                flips: 0,
            });
        }
        let flags = match r {
            0 => FLAG_RESET,
            _ if r == shots.shot_rounds - 1 => FLAG_FINAL,
            _ => 0,
        };
        // The window this round completes, if any.
        if let Some((fr, rounds)) = windows[r].filter(|_| !s.broken) {
            s.owed.push_back(Owed {
                first_round: fr,
                rounds: rounds as u32,
                due_ns: due,
                cycle,
                last: r + 1 == shots.shot_rounds,
                seq: s.shots_begun,
            });
            s.owed_rounds += rounds;
            out.backlog_max_rounds = out.backlog_max_rounds.max(s.owed_rounds);
        }
        out.round_entries += 1;
        let extends = matches!(run, Some((fs, count, f, round)) if f == flags && round == r as u64 && fs + u32::from(count) == id && count < u16::MAX);
        if !extends {
            flush(&mut w, &mut run, data)?;
            run = Some((id, 0, flags, r as u64));
        }
        if let Some(x) = run.as_mut() {
            x.1 += 1;
        }
        data.extend_from_slice(shots.round(s.shot, r));
    }
    flush(&mut w, &mut run, data)?;
    Ok(if w.is_empty() { 0 } else { w.finish() })
}

fn emulator_error(e: protocol::ProtocolError) -> Error {
    Error::Emulator {
        target: "stream emulator".into(),
        detail: e.to_string(),
    }
}

#[allow(clippy::too_many_arguments)]
fn take_record(
    r: Record,
    first: u32,
    streams: &mut [StreamSide],
    shots: &StreamShots,
    load: &StreamLoad,
    out: &mut StreamOutcome,
    now: u64,
) {
    let Some(s) = r
        .stream
        .checked_sub(first)
        .and_then(|i| streams.get_mut(i as usize))
    else {
        out.unexpected += 1;
        return;
    };
    if r.kind == RecordKind::Refused {
        out.refused[usize::from(r.status).clamp(1, refusal::ALL.len()) - 1] +=
            u64::from(r.rounds.max(1));
        break_stream(s, out);
        return;
    }
    if s.broken {
        return;
    }
    match r.kind {
        RecordKind::Reset => {
            if s.front_started {
                // The oldest shot is over at the service; a window it still owes was lost
                // on the way (a response dropped): the stream's answers no longer line up.
                let Some(done) = s.shots.pop_front() else {
                    out.unexpected += 1;
                    return break_stream(s, out);
                };
                if s.owed.front().is_some_and(|o| o.seq == done.seq) {
                    return break_stream(s, out);
                }
            }
            s.front_started = true;
        }
        RecordKind::Commit | RecordKind::CommitFinal => {
            let (Some(o), Some(shot)) = (s.owed.front().copied(), s.shots.front_mut()) else {
                out.unexpected += 1;
                return break_stream(s, out);
            };
            let is_final = r.kind == RecordKind::CommitFinal;
            if o.seq != shot.seq
                || o.first_round != r.first_round
                || o.rounds != r.rounds
                || o.last != is_final
            {
                // Not the window owed next: an earlier answer was lost.
                out.unexpected += 1;
                return break_stream(s, out);
            }
            s.owed.pop_front();
            s.owed_rounds -= u64::from(o.rounds);
            out.windows += 1;
            out.rounds_committed += u64::from(r.rounds);
            if o.cycle >= load.warmup_rounds {
                let _ = out.reaction.record(now.saturating_sub(o.due_ns).max(1));
            }
            shot.flips ^= r.value;
            if is_final {
                out.shots += 1;
                if shot.flips != shots.observables[shot.index] {
                    out.mistakes += 1;
                }
            }
        }
        RecordKind::Refused | RecordKind::Corrections => out.unexpected += 1,
    }
}

/// Stops tracking a stream whose answers no longer line up (a refusal, a lost answer):
/// what it was owed is counted lost, and its shots from here on count for nothing.
fn break_stream(s: &mut StreamSide, out: &mut StreamOutcome) {
    if s.broken {
        return;
    }
    s.broken = true;
    out.streams_broken += 1;
    out.windows_lost += s.owed.len() as u64;
    s.owed.clear();
    s.owed_rounds = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shot_owes_its_bulk_windows_then_the_rest() {
        // 101 rounds (100 and the final), W = 15, C = 5: windows end at rounds 14, 19, ..,
        // 99 (18 of them, committing 0..90), then the final window commits 90..=100.
        let w = windows_of_shot(101, 15, 5);
        assert_eq!(w.len(), 19);
        assert_eq!(w[0], (0, 5, 14));
        assert_eq!(w[17], (85, 5, 99));
        assert_eq!(w[18], (90, 11, 100));
        assert_eq!(w.iter().map(|x| x.1).sum::<u64>(), 101, "every round once");
        // A shot shorter than a window: one final window.
        assert_eq!(windows_of_shot(8, 15, 5), vec![(0, 8, 7)]);
    }
}

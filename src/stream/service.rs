//! The CPU stream service: a dispatcher thread on the transport and a pool of decoder
//! threads (by default one per core left), the streams dealt to them in contiguous
//! ranges, on any [`Transport`] ([`spawn`]): `qfwd run --streams` gets a UDP socket from
//! `crate::serve` (where wires are chosen); [`spawn_inproc`] serves the harness's
//! in-process ring, [`spawn_inproc_links`] one ring per emulator link.
#![forbid(unsafe_code)]

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use qfwd_decode::window::StreamModel;
use serde::{Deserialize, Serialize};

use super::dispatch::{DispatchCounts, Dispatcher, ERROR_NAMES};
use super::link::{PeerBytes, PEER_BYTES};
use super::protocol::refusal;
use super::state::RoundCounts;
use super::worker::{Worker, WorkerCounts};
use crate::idle::IdlePolicy;
use crate::transport::inproc::{self, InprocLinks, InprocServer};
use crate::transport::Transport;
use crate::wire::HEADER_LEN;
use crate::{Error, Result};

/// The stream service's settings (`qfwd run --streams N ...`; TOML table `[streams]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StreamSettings {
    /// Streams served: `decoder_id` 0 .. streams. 1 ..= 1 048 576.
    pub streams: u32,
    /// Rounds per window (W), 2 ..= 255.
    pub window: u32,
    /// Rounds each window commits (C), 1 ..= W - 1.
    pub commit: u32,
    /// Decoder threads; 0 = one per online core, less the dispatcher's (at least 1).
    /// Never more than `streams`. 0 ..= 1024.
    pub workers: usize,
    /// Requests each decoder thread's queue holds; a request finding it full has its
    /// rounds refused (`stream_buffer_full`). 1 ..= 65 536.
    pub queue_slots: usize,
    /// Largest request argument accepted, bytes; larger is answered `OVERSIZED`.
    /// 64 ..= 64 000.
    pub max_request_bytes: usize,
    /// What decodes: the CPU pool, or the batched engine on the GPU (or on its CPU
    /// stand-in).
    pub engine: StreamEngine,
    /// With `engine = "gpu"`: the CUDA device, and the threads of each stream's block
    /// (a multiple of 32, at most 1024).
    pub gpu_device: usize,
    pub gpu_threads: u32,
}

/// Which engine serves the streams (`qfwd run --stream-engine`, `[streams] engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum StreamEngine {
    /// A dispatcher and a pool of decoder threads, each owning a range of streams.
    #[default]
    Cpu,
    /// Every stream's state on the GPU, served by a persistent kernel; the rounds of all
    /// streams handed over in batches (one submission each, two in flight, no launch),
    /// behind a CPU dispatcher thread and a batching thread.
    Gpu,
    /// The GPU engine with a kernel launch per batch instead of the persistent kernel
    /// (the baseline it replaces).
    GpuLaunch,
    /// The GPU engine's threads and batches with its CPU stand-in decoder (no GPU needed).
    CpuBatched,
}

impl Default for StreamSettings {
    fn default() -> Self {
        StreamSettings {
            streams: 1,
            window: 10,
            commit: 5,
            workers: 0,
            queue_slots: 256,
            max_request_bytes: 16_384,
            engine: StreamEngine::Cpu,
            gpu_device: 0,
            gpu_threads: 256,
        }
    }
}

impl StreamSettings {
    /// Checks every value against its documented range.
    pub fn validate(&self) -> Result<()> {
        let bad = |key, detail: String| Err(Error::InvalidSetting { key, detail });
        if !(1..=1 << 20).contains(&self.streams) {
            return bad(
                "streams",
                format!("{} is not in 1 ..= 1048576", self.streams),
            );
        }
        if !(2..=255).contains(&self.window) {
            return bad("window", format!("{} is not in 2 ..= 255", self.window));
        }
        if !(1..self.window).contains(&self.commit) {
            return bad(
                "commit",
                format!(
                    "{} is not in 1 ..= window - 1 = {}",
                    self.commit,
                    self.window - 1
                ),
            );
        }
        if self.workers > 1024 {
            return bad("workers", format!("{} is not in 0 ..= 1024", self.workers));
        }
        if !(1..=65_536).contains(&self.queue_slots) {
            return bad(
                "queue_slots",
                format!("{} is not in 1 ..= 65536", self.queue_slots),
            );
        }
        if self.gpu_threads == 0 || self.gpu_threads % 32 != 0 || self.gpu_threads > 1024 {
            return bad(
                "gpu_threads",
                format!(
                    "{} is not a multiple of 32 in 32 ..= 1024",
                    self.gpu_threads
                ),
            );
        }
        if !(64..=64_000).contains(&self.max_request_bytes) {
            return bad(
                "max_request_bytes",
                format!("{} is not in 64 ..= 64000", self.max_request_bytes),
            );
        }
        Ok(())
    }

    /// Decoder threads: `workers`, or one per core but the dispatcher's; at most `streams`.
    pub fn worker_count(&self) -> usize {
        let n = if self.workers == 0 {
            crate::host::online_core_count().saturating_sub(1).max(1)
        } else {
            self.workers
        };
        n.min(self.streams as usize).max(1)
    }
}

/// How the service's threads run.
#[derive(Debug, Clone, Default)]
pub struct ServiceOptions {
    pub settings: StreamSettings,
    /// Cores to pin to: the dispatcher, then each decoder thread in turn.
    pub cores: Vec<usize>,
    pub idle: IdlePolicy,
    /// Most datagrams the dispatcher takes per poll.
    pub batch: usize,
}

/// Reads the model of a long memory experiment and cuts its windows.
pub fn load_model(dem: &Path, settings: &StreamSettings) -> Result<Arc<StreamModel>> {
    let d = qfwd_decode::Dem::from_path(dem)?;
    Ok(Arc::new(StreamModel::from_dem(
        &d,
        settings.window,
        settings.commit,
    )?))
}

/// Everything the service counted.
#[derive(Debug, Clone, Default)]
pub struct StreamStats {
    pub dispatch: DispatchCounts,
    pub workers: Vec<WorkerCounts>,
    /// The dispatcher's and every worker's rounds together.
    pub rounds: RoundCounts,
    /// Seconds the service ran.
    pub seconds: f64,
    /// The batched engine's batches and launches (`None` for the CPU pool).
    pub batched: Option<super::gpu_engine::BatchedCounts>,
}

impl StreamStats {
    pub(super) fn new(
        dispatch: DispatchCounts,
        workers: Vec<WorkerCounts>,
        seconds: f64,
    ) -> StreamStats {
        let mut rounds = dispatch.rounds;
        for w in &workers {
            rounds.add(&w.rounds);
        }
        StreamStats {
            dispatch,
            workers,
            rounds,
            seconds,
            batched: None,
        }
    }

    /// Whether the datagram and round identities hold.
    pub fn adds_up(&self) -> bool {
        let d = &self.dispatch;
        d.datagrams == d.requests() + d.not_allowed + d.unparseable
            && d.requests() == d.applied + d.answered_error()
            && self.rounds.adds_up()
    }
}

impl fmt::Display for StreamStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.dispatch;
        let r = &self.rounds;
        writeln!(
            f,
            "datagrams {} = requests {} + dropped not allowed {} + dropped unparseable {}",
            d.datagrams,
            d.requests(),
            d.not_allowed,
            d.unparseable
        )?;
        let errors: Vec<String> = ERROR_NAMES
            .iter()
            .zip(d.errors)
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        writeln!(
            f,
            "requests {} = applied {} + answered with error {}{}",
            d.requests(),
            d.applied,
            d.answered_error(),
            if errors.is_empty() {
                String::new()
            } else {
                format!(" ({})", errors.join(", "))
            }
        )?;
        let refused: Vec<String> = refusal::ALL
            .iter()
            .zip(r.refused)
            .filter(|(_, n)| *n > 0)
            .map(|(&c, n)| format!("{} {n}", refusal::name(c)))
            .collect();
        writeln!(
            f,
            "rounds received {} = accepted {} + refused {}{}",
            r.received,
            r.accepted,
            r.refused_total(),
            if refused.is_empty() {
                String::new()
            } else {
                format!(" ({})", refused.join(", "))
            }
        )?;
        writeln!(
            f,
            "rounds accepted {} = committed {} + discarded by reset {} + pending at stop {}",
            r.accepted, r.committed, r.discarded, r.pending
        )?;
        write!(
            f,
            "windows committed {}; responses sent {} ({} records), send failures {}, \
             dropped by a stuck dispatcher {}",
            r.windows,
            d.responses,
            d.records,
            d.send_failures,
            self.workers
                .iter()
                .map(|w| w.responses_dropped)
                .sum::<u64>()
        )?;
        if let Some(b) = &self.batched {
            write!(f, "\n  {b}")?;
        }
        for (i, w) in self.workers.iter().enumerate() {
            let busy = if self.seconds > 0.0 {
                w.busy_ns as f64 / 1e9 / self.seconds * 100.0
            } else {
                0.0
            };
            write!(
                f,
                "\n  decoder thread {i}: streams {}..{}, rounds accepted {}, windows {}, busy {busy:.1} %",
                w.first_stream,
                w.first_stream + w.streams,
                w.rounds.accepted,
                w.rounds.windows
            )?;
        }
        Ok(())
    }
}

/// A stream service running on its own threads.
pub struct RunningStreams {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) thread: Option<JoinHandle<Result<StreamStats>>>,
    pub(super) local_addr: Option<SocketAddr>,
    pub(super) description: String,
}

impl RunningStreams {
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// One line saying what is served, where, and how.
    pub fn description(&self) -> &str {
        &self.description
    }

    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Asks it to stop: it takes no more requests, decodes what its queues hold, sends
    /// the last responses, and ends.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn join(mut self) -> Result<StreamStats> {
        let t = self.thread.take().ok_or(Error::ThreadPanicked)?;
        t.join().map_err(|_| Error::ThreadPanicked)?
    }
}

impl Drop for RunningStreams {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::Relaxed);
            let _ = t.join();
        }
    }
}

/// Serves the in-process ring's server end (with the engine the settings name).
pub fn spawn_inproc(
    opts: &ServiceOptions,
    model: Arc<StreamModel>,
    server: InprocServer,
) -> Result<RunningStreams> {
    spawn_on(server, opts, model, None, "an inproc ring")
}

/// Serves several in-process rings, one per link (the harness's emulator threads), as
/// one wire (with the engine the settings name): each response goes back on the ring its
/// request came in on.
pub fn spawn_inproc_links(
    opts: &ServiceOptions,
    model: Arc<StreamModel>,
    server: InprocLinks,
) -> Result<RunningStreams> {
    let on = format!(
        "{} inproc ring{}",
        server.len(),
        if server.len() == 1 { "" } else { "s" }
    );
    spawn_on(server, opts, model, None, &on)
}

/// Serves `transport` (reached at `local_addr`; `on` names it in the start-up line:
/// `udp ADDR`, `an inproc ring`) with the engine the settings name: the CPU pool, or the
/// batched engine.
pub fn spawn_on<T>(
    transport: T,
    opts: &ServiceOptions,
    model: Arc<StreamModel>,
    local_addr: Option<SocketAddr>,
    on: &str,
) -> Result<RunningStreams>
where
    T: Transport + Send + 'static,
    T::Peer: PeerBytes,
{
    if let Some(which) = batched_engine(&opts.settings) {
        return super::gpu_engine::spawn_batched_on(transport, opts, model, local_addr, on, which);
    }
    let description = describe(opts, &model, on);
    spawn(transport, opts, model, local_addr, description)
}

/// The batched engine's decoder, when the settings ask for one (`None`: the CPU pool).
pub fn batched_engine(s: &StreamSettings) -> Option<super::gpu_engine::BatchedDecoder> {
    use super::gpu_engine::{BatchedDecoder, GpuEngineOptions};
    match s.engine {
        StreamEngine::Cpu => None,
        StreamEngine::CpuBatched => Some(BatchedDecoder::Cpu),
        StreamEngine::Gpu => Some(BatchedDecoder::Gpu(GpuEngineOptions {
            device: s.gpu_device,
            threads: s.gpu_threads,
        })),
        StreamEngine::GpuLaunch => Some(BatchedDecoder::GpuLaunch(GpuEngineOptions {
            device: s.gpu_device,
            threads: s.gpu_threads,
        })),
    }
}

/// The start-up line of a stream service on `on` (a wire's words: `udp ADDR`, ...).
pub fn describe(opts: &ServiceOptions, model: &StreamModel, on: &str) -> String {
    let s = &opts.settings;
    format!(
        "{} streams of {} ({} bits a round), windows of {} rounds committing {}, \
         {} decoder thread{}, on {on}",
        s.streams,
        model.source(),
        model.detectors_per_round(),
        s.window,
        s.commit,
        s.worker_count(),
        if s.worker_count() == 1 { "" } else { "s" }
    )
}

/// The rings between the dispatcher and one decoding thread, sized from the settings.
pub(super) struct DecoderRings {
    /// Bytes a slot holds: the largest request, and the block headers its split can add.
    pub slot: usize,
    /// Requests to the decoding thread (`queue_slots` of them).
    pub requests: (inproc::Producer, inproc::Consumer),
    /// Its responses, drained every dispatcher poll (the thread waits for room).
    pub responses: (inproc::Producer, inproc::Consumer),
}

impl DecoderRings {
    pub(super) fn new(s: &StreamSettings) -> Result<DecoderRings> {
        let slot = PEER_BYTES + HEADER_LEN + s.max_request_bytes + 1024;
        Ok(DecoderRings {
            slot,
            requests: inproc::ring(s.queue_slots, slot)?,
            responses: inproc::ring(s.queue_slots.clamp(64, 1024), slot)?,
        })
    }
}

/// Starts the dispatcher on `transport` and the decoder threads behind it.
pub fn spawn<T>(
    transport: T,
    opts: &ServiceOptions,
    model: Arc<StreamModel>,
    local_addr: Option<SocketAddr>,
    description: String,
) -> Result<RunningStreams>
where
    T: Transport + Send + 'static,
    T::Peer: PeerBytes,
{
    let s = &opts.settings;
    s.validate()?;
    let workers = s.worker_count();
    let chunk = s.streams.div_ceil(workers as u32);
    // The last workers may own nothing when `chunk` rounds up: drop them.
    let workers = s.streams.div_ceil(chunk) as usize;
    let mut queues = Vec::new();
    let mut responses = Vec::new();
    let mut pool = Vec::new();
    for w in 0..workers {
        let DecoderRings {
            slot,
            requests: (q_tx, q_rx),
            responses: (r_tx, r_rx),
        } = DecoderRings::new(s)?;
        queues.push(q_tx);
        responses.push(r_rx);
        let first = w as u32 * chunk;
        let count = chunk.min(s.streams - first);
        pool.push(Worker {
            first_stream: first,
            states: Worker::states(&model, count),
            round_bytes: model.round_bytes(),
            queue: q_rx,
            responses: r_tx,
            response_bytes: slot,
            idle: opts.idle,
            core: opts.cores.get(w + 1).copied(),
        });
    }
    let dispatcher = Dispatcher {
        transport,
        round_bytes: model.round_bytes(),
        streams: s.streams,
        chunk,
        queues,
        responses,
        max_request_bytes: s.max_request_bytes,
        batch: opts.batch.max(1),
        idle: opts.idle,
        core: opts.cores.first().copied(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("qfwd-streams".into())
        .spawn(move || Ok(serve(dispatcher, pool, &flag)))
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

fn serve<T>(dispatcher: Dispatcher<T>, pool: Vec<Worker>, stop: &AtomicBool) -> StreamStats
where
    T: Transport,
    T::Peer: PeerBytes,
{
    let started = std::time::Instant::now();
    let closing = AtomicBool::new(false);
    let done = AtomicUsize::new(0);
    let (dispatch, workers) = std::thread::scope(|scope| {
        let handles: Vec<_> = pool
            .into_iter()
            .enumerate()
            .map(|(i, w)| {
                let (closing, done) = (&closing, &done);
                std::thread::Builder::new()
                    .name(format!("qfwd-decode-{i}"))
                    .spawn_scoped(scope, move || {
                        let c = w.run(closing);
                        done.fetch_add(1, Ordering::Release);
                        c
                    })
            })
            .collect();
        let ok: Vec<_> = handles.into_iter().filter_map(|h| h.ok()).collect();
        // A worker that failed to start never counts itself done: count it here.
        let missing = dispatcher.queues.len() - ok.len();
        done.fetch_add(missing, Ordering::Release);
        let dispatch = dispatcher.run(stop, &closing, &done);
        let workers: Vec<WorkerCounts> = ok.into_iter().filter_map(|h| h.join().ok()).collect();
        (dispatch, workers)
    });
    StreamStats::new(dispatch, workers, started.elapsed().as_secs_f64())
}

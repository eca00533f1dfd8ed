//! The sliding-window stream decoder on the GPU (`device/window.cu`): a stream model packed
//! for the device ([`PackedModel`], pure Rust, also what the host check of the device code
//! reads), and [`GpuStreams`]: many streams' state in GPU memory, fed rounds in batches by
//! the batch kernel, which decodes every window that completes, one thread block per
//! stream, and answers exactly the CPU's [`StreamDecoder`] commits
//! (`tests/gpu_window.rs` checks it on a GPU, `tests/window_host.rs` on the CPU).
//!
//! A persistent kernel serves streams with the same device functions
//! (`qfwd_stream_push_rounds`, `qfwd_stream_finish`, `qfwd_stream_reset`) over a model
//! uploaded by [`DeviceModel::upload`], its streams' states and rows, and a scratch area
//! per decoding group ([`PackedModel::scratch_bytes`]).
//!
//! [`StreamDecoder`]: crate::decode::window::StreamDecoder

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::context::GpuContext;
use super::memory::DeviceBuffer;
use super::module::{Kernel, Module, Stream};
use super::nvrtc::WINDOW;
use crate::abi::{
    self, StreamCommitDesc, StreamModelDesc, StreamStateDesc, WindowBatchParams, WindowGraphDesc,
};
use crate::decode::window::{Commit, MatchLimits, Metric, StreamModel, WindowGraph, WindowKind};
use crate::{Error, Result};

/// The batch kernel in `device/window.cu`.
pub const BATCH_KERNEL: &str = <WindowBatchParams as abi::KernelParams>::KERNEL;
/// Shared memory a block may use without opting in.
pub(crate) const DEFAULT_SHARED_LIMIT: usize = 48 * 1024;
/// Most dynamic shared memory a block of an sm_90 device may take.
pub(crate) const MAX_SHARED: usize = 227 * 1024;
/// Shared memory a kernel's own variables may take beside the scratch (the persistent
/// kernel's counters, entry and claim), with room to spare.
pub(crate) const KERNEL_STATIC_SHARED: usize = 1024;
/// Most blocks of a batch whose scratch is in global memory.
const GLOBAL_SCRATCH_BLOCKS: usize = 1024;
/// How long a batch may run.
const BATCH_DEADLINE: Duration = Duration::from_secs(20);

/// An error unless there is at least one stream and `threads` is a group size the window
/// decoder takes (a multiple of 32, at most `WINDOW_MAX_THREADS`).
pub fn check_groups(streams: usize, threads: u32) -> Result<()> {
    if threads == 0 || threads % 32 != 0 || threads > abi::WINDOW_MAX_THREADS || streams == 0 {
        return Err(Error::InvalidSetting {
            key: "threads",
            detail: format!(
                "{streams} streams of {threads} threads: need at least one stream and a \
                 multiple of 32 threads up to {}",
                abi::WINDOW_MAX_THREADS
            ),
        });
    }
    Ok(())
}

/// A stream model as the device reads it: the descriptor (its `data` address is filled in
/// at upload) and the u32 blob it points into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedModel {
    pub desc: StreamModelDesc,
    pub blob: Vec<u32>,
}

impl PackedModel {
    /// Packs every window graph of `model` and its distance tables (see `WindowGraphDesc`
    /// and `StreamModelDesc` in `src/abi.rs`).
    pub fn of(model: &StreamModel) -> Result<PackedModel> {
        let windows = model.windows();
        let metric = model.metric();
        let desc_words = std::mem::size_of::<WindowGraphDesc>() / 4;
        let k = model.kept_slots().len();
        let row_words = k.div_ceil(32);
        let mut blob = vec![0u32; windows.len() * desc_words];
        let kept_at = blob.len();
        blob.extend(model.kept_slots());
        let mut max_v = 0usize;
        let mut descs = Vec::with_capacity(windows.len());
        for (i, w) in windows.iter().enumerate() {
            max_v = max_v.max(w.graph.num_detectors());
            descs.push(pack_graph(w, metric, i, row_words, &mut blob)?);
        }
        for (i, d) in descs.iter().enumerate() {
            let bytes = d.to_bytes();
            for (j, w) in bytes.chunks_exact(4).enumerate() {
                blob[i * desc_words + j] = u32::from_le_bytes(w.try_into().expect("4 bytes"));
            }
        }
        let pairs_at = blob.len() as u32;
        blob.extend(metric.pair_table());
        let masks_at = blob.len() as u32;
        for &m in metric.masks() {
            blob.extend([m as u32, (m >> 32) as u32]);
        }
        let w = model.rounds_per_window();
        let c = model.commit_rounds();
        let index = |kind| model.window_index(kind).map_or(0, |i| i as u32);
        let bulk = index(WindowKind::Bulk);
        let limits = model.match_limits();
        let (scratch, scratch_words) = scratch_layout(max_v, limits);
        // The bulk context is the last: bulk below and above.
        let span_words = (w as usize * k * k) as u32;
        let bulk_pairs = pairs_at + (metric.contexts() - 1) * span_words;
        let bulk_vertices = windows[bulk as usize].graph.num_detectors() as u32;
        let cache = [0, span_words, span_words + bulk_vertices];
        let desc = StreamModelDesc {
            data: 0,
            graphs: 0,
            graph_count: windows.len() as u32,
            rounds_per_window: w,
            commit_rounds: c,
            slots: k as u32,
            kept_slots: kept_at as u32,
            round_bytes: model.round_bytes() as u32,
            row_words: row_words as u32,
            min_rounds: model.min_rounds(),
            first_final_from_start: index(WindowKind::Final {
                from_start: true,
                rounds: model.min_rounds(),
            }),
            first_final_from_bulk: index(WindowKind::Final {
                from_start: false,
                rounds: w - c,
            }),
            max_defects: max_v as u32,
            scratch_words,
            scratch,
            scratch_hot_words: scratch[abi::SCR_COST as usize],
            match_defects: limits.defects,
            pairs: pairs_at,
            span: metric.span(),
            head_rounds: model.head_rounds(),
            tail_rounds: model.tail_rounds(),
            masks: masks_at,
            bulk_graph: bulk,
            cache_words: span_words + 2 * bulk_vertices,
            cache,
            reserved: 0,
        };
        // The cache's parts are copies of blob words (tests/window_host.rs checks it).
        debug_assert_eq!(
            bulk_pairs + span_words,
            pairs_at + metric.pair_table().len() as u32
        );
        Ok(PackedModel { desc, blob })
    }

    /// Bytes of one decoding group's scratch.
    pub fn scratch_bytes(&self) -> usize {
        self.desc.scratch_words as usize * 4
    }

    /// Bytes of one group's scratch without the exact matching's tables.
    pub fn scratch_hot_bytes(&self) -> usize {
        self.desc.scratch_hot_words as usize * 4
    }

    /// Bytes of one group's exact-matching tables.
    pub fn dp_bytes(&self) -> usize {
        self.scratch_bytes() - self.scratch_hot_bytes()
    }

    /// Bytes of a block's copy of the bulk window's tables.
    pub fn cache_bytes(&self) -> usize {
        self.desc.cache_words as usize * 4
    }

    /// u32 words of one stream's rows (its ring of W rounds).
    pub fn row_words_per_stream(&self) -> usize {
        (self.desc.rounds_per_window * self.desc.row_words) as usize
    }

    /// The blob's bytes, little-endian.
    pub fn blob_bytes(&self) -> Vec<u8> {
        self.blob.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}

/// Appends window graph `w`'s arrays (graph `index` of `metric`'s tables) to `blob`;
/// returns where each starts.
fn pack_graph(
    w: &WindowGraph,
    metric: &Metric,
    index: usize,
    row_words: usize,
    blob: &mut Vec<u32>,
) -> Result<WindowGraphDesc> {
    let g = &w.graph;
    if g.num_detectors() >= u32::MAX as usize / 2 || g.num_edges() >= u32::MAX as usize / 2 {
        return Err(Error::InvalidSetting {
            key: "rounds_per_window",
            detail: format!("window {:?} is too large for the device", w.kind),
        });
    }
    let (from_start, is_final) = match w.kind {
        WindowKind::First => (1, 0),
        WindowKind::Bulk => (0, 0),
        WindowKind::Final { from_start, .. } => (u32::from(from_start), 1),
    };
    let mut d = WindowGraphDesc {
        vertices: g.num_detectors() as u32,
        edges: g.num_edges() as u32,
        rounds: w.rounds,
        commit_rounds: w.commit_rounds,
        from_start,
        is_final,
        ..Default::default()
    };
    d.adj_offset = blob.len() as u32;
    blob.extend(g.adj_offset());
    d.adj_pairs = blob.len() as u32;
    blob.extend(g.adj_pairs().iter().flatten());
    d.weight = blob.len() as u32;
    blob.extend(g.edge_weight());
    d.obs = blob.len() as u32;
    for &o in g.edge_obs() {
        blob.extend([o as u32, (o >> 32) as u32]);
    }
    let (bounds, exits) = metric.boundary_table(index);
    d.bounds = blob.len() as u32;
    blob.extend(bounds);
    d.exits = blob.len() as u32;
    blob.extend(exits);
    d.present = blob.len() as u32;
    let off = g.adj_offset();
    let k = w.slots as usize;
    for j in 0..w.rounds as usize {
        let mut words = vec![0u32; row_words];
        for s in 0..k {
            let v = j * k + s;
            if off[v] != off[v + 1] {
                words[s / 32] |= 1 << (s % 32);
            }
        }
        blob.extend(words);
    }
    Ok(d)
}

/// Where a decoding group's scratch arrays start (word offsets, by `SCR_*`), and its size
/// in words, for windows of at most `max_defects` detectors, matching clusters within
/// `limits` exactly.
pub fn scratch_layout(
    max_defects: usize,
    limits: MatchLimits,
) -> ([u32; abi::SCR_COUNT as usize], u32) {
    let n = max_defects.max(1);
    let subsets = 1usize << limits.defects;
    let mut sizes = [n; abi::SCR_COUNT as usize];
    sizes[abi::SCR_PICKS as usize] = 2 * n;
    // The costs and choices last: a group may keep them apart (`scratch_hot_words`).
    sizes[abi::SCR_COST as usize] = subsets;
    sizes[abi::SCR_CHOICE as usize] = subsets.div_ceil(4);
    sizes[abi::SCR_SCALARS as usize] = abi::WINDOW_SCALARS as usize;
    let mut offsets = [0u32; abi::SCR_COUNT as usize];
    let mut at = 0usize;
    for (o, size) in offsets.iter_mut().zip(sizes) {
        *o = at as u32;
        at += size;
    }
    (offsets, at as u32)
}

/// A stream model in device memory: the descriptor at [`DeviceModel::desc_ptr`].
pub struct DeviceModel {
    desc: DeviceBuffer,
    blob: DeviceBuffer,
    pub packed: PackedModel,
}

impl DeviceModel {
    pub fn upload(ctx: &Arc<GpuContext>, model: &StreamModel) -> Result<DeviceModel> {
        let mut packed = PackedModel::of(model)?;
        let bytes = packed.blob_bytes();
        let blob = DeviceBuffer::zeroed(ctx, bytes.len())?;
        blob.write_bytes(0, &bytes)?;
        packed.desc.data = blob.device_ptr();
        let d = packed.desc.to_bytes();
        let desc = DeviceBuffer::zeroed(ctx, d.len())?;
        desc.write_bytes(0, &d)?;
        Ok(DeviceModel { desc, blob, packed })
    }

    /// Device address of the `QfwdStreamModel`.
    pub fn desc_ptr(&self) -> u64 {
        self.desc.device_ptr()
    }

    /// Device address of the blob.
    pub fn blob_ptr(&self) -> u64 {
        self.blob.device_ptr()
    }
}

/// Why a device stream refused a round (`STREAM_*`; the CPU's `StreamError` says more).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    RoundRepeated,
    RoundsMissing,
    Finished,
    TooShort,
}

/// One answer of a device stream: a commit or a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Commit(Commit),
    Refused(Refusal),
}

impl Answer {
    /// Reads a `QfwdCommit`.
    pub fn from_bytes(b: &[u8]) -> Answer {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let status = u32_at(20) as i32;
        match status {
            abi::STREAM_COMMIT => Answer::Commit(Commit {
                first_round: u64_at(0),
                flips: u64_at(8),
                rounds: u32_at(16),
            }),
            abi::STREAM_ROUND_REPEATED => Answer::Refused(Refusal::RoundRepeated),
            abi::STREAM_ROUNDS_MISSING => Answer::Refused(Refusal::RoundsMissing),
            abi::STREAM_FINISHED => Answer::Refused(Refusal::Finished),
            _ => Answer::Refused(Refusal::TooShort),
        }
    }
}

/// What one batch measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchTimes {
    /// Launch to completion, seen from the host (launch overhead included, copies not).
    pub kernel: Duration,
    /// The whole call: events in, kernel, answers out.
    pub total: Duration,
}

/// What a batch kernel may be using: freed on drop, leaked if a kernel did not finish.
struct Resources {
    kernel: Kernel<WindowBatchParams>,
    _module: Module,
    model: DeviceModel,
    states: DeviceBuffer,
    rows: DeviceBuffer,
    events: Option<DeviceBuffer>,
    commits: Option<DeviceBuffer>,
    counts: DeviceBuffer,
    cycles: DeviceBuffer,
    scratch: Option<DeviceBuffer>,
    dp: Option<DeviceBuffer>,
}

/// Threads of a warp: the batch kernel decodes a window with one.
const WARP: u32 = 32;

/// Where the batch kernel keeps the bulk tables and each warp's scratch, and its grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLayout {
    pub grid: u32,
    pub shared_bytes: u32,
    /// The block's copy of the bulk tables is in shared memory.
    pub cached: bool,
    /// The warps' scratch is in global memory (it does not fit in shared memory).
    pub global_scratch: bool,
}

impl BatchLayout {
    /// The layout for `streams` streams in blocks of `threads`: the bulk tables and every
    /// warp's scratch in shared memory when they fit; else the tables alone, the scratch
    /// global; else both global.
    pub fn of(p: &PackedModel, streams: usize, threads: u32) -> BatchLayout {
        let groups = (threads / WARP) as usize;
        let blocks = streams.div_ceil(groups);
        let (cache, scratch) = (p.cache_bytes(), p.scratch_hot_bytes() * groups);
        let (cached, global_scratch) = if cache + scratch <= MAX_SHARED {
            (true, false)
        } else if cache <= MAX_SHARED {
            (true, true)
        } else if scratch <= MAX_SHARED {
            (false, false)
        } else {
            (false, true)
        };
        let shared = if cached { cache } else { 0 } + if global_scratch { 0 } else { scratch };
        let grid = blocks.min(if global_scratch {
            GLOBAL_SCRATCH_BLOCKS
        } else {
            65_535
        });
        BatchLayout {
            grid: grid as u32,
            shared_bytes: shared as u32,
            cached,
            global_scratch,
        }
    }
}

/// Streams of one model on one GPU, fed by the batch kernel.
pub struct GpuStreams {
    // Declared in drop order: what the kernel uses goes before the context.
    stream: Stream,
    res: Option<Resources>,
    ctx: Arc<GpuContext>,
    streams: usize,
    threads: u32,
    layout: BatchLayout,
    /// A batch did not finish in time: its memory is leaked rather than freed under it.
    stuck: bool,
}

impl Drop for GpuStreams {
    fn drop(&mut self) {
        if self.stuck {
            std::mem::forget(self.res.take());
        }
    }
}

// SAFETY: the device buffers and handles are used only through `&mut self` here, from
// one thread at a time; each call binds the context first.
unsafe impl Send for GpuStreams {}

impl GpuStreams {
    /// `streams` streams at round 0 on GPU `device`, a warp each, in blocks of `threads`
    /// threads (a multiple of 32, at most 1024): `threads / 32` streams' windows a block
    /// at once, sharing one copy of the bulk window's tables.
    pub fn new(
        device: usize,
        model: &Arc<StreamModel>,
        streams: usize,
        threads: u32,
    ) -> Result<GpuStreams> {
        check_groups(streams, threads)?;
        let ctx = GpuContext::open(device)?;
        let module = Module::compile_and_load(&ctx, &WINDOW)?;
        let kernel = module.kernel::<WindowBatchParams>()?;
        // The kernel's registers may allow fewer threads a block than asked: say so
        // before launching.
        let most = kernel.function().max_threads_per_block(&ctx)?;
        if threads > most {
            return Err(Error::InvalidSetting {
                key: "threads",
                detail: format!(
                    "{BATCH_KERNEL} on GPU {device} takes at most {most} threads a block, not \
                     {threads}"
                ),
            });
        }
        let model = DeviceModel::upload(&ctx, model)?;
        let p = &model.packed;
        let layout = BatchLayout::of(p, streams, threads);
        if layout.shared_bytes as usize > DEFAULT_SHARED_LIMIT {
            kernel
                .function()
                .allow_dynamic_shared(&ctx, layout.shared_bytes)?;
        }
        // A global scratch holds everything; a shared one leaves the exact matching's
        // tables (used by clusters of 5 defects or more) in global memory.
        let groups = layout.grid as usize * (threads / WARP) as usize;
        let (scratch, dp) = if layout.global_scratch {
            (
                Some(DeviceBuffer::zeroed(&ctx, p.scratch_bytes() * groups)?),
                None,
            )
        } else {
            (
                None,
                Some(DeviceBuffer::zeroed(&ctx, p.dp_bytes().max(4) * groups)?),
            )
        };
        let states = DeviceBuffer::zeroed(&ctx, streams * std::mem::size_of::<StreamStateDesc>())?;
        let rows = DeviceBuffer::zeroed(&ctx, streams * p.row_words_per_stream() * 4)?;
        let counts = DeviceBuffer::zeroed(&ctx, streams * 4)?;
        let cycles = DeviceBuffer::zeroed(&ctx, streams * 8)?;
        let stream = Stream::new(&ctx)?;
        Ok(GpuStreams {
            stream,
            res: Some(Resources {
                kernel,
                _module: module,
                model,
                states,
                rows,
                events: None,
                commits: None,
                counts,
                cycles,
                scratch,
                dp,
            }),
            ctx,
            streams,
            threads,
            layout,
            stuck: false,
        })
    }

    /// Each stream's clock cycles in its windows' decodes since the last call (the
    /// kernel's own counter, `clock64` around each decode), and zeroes them.
    pub fn take_window_cycles(&mut self) -> Result<Vec<u64>> {
        let res = self.res();
        let mut raw = vec![0u8; self.streams * 8];
        res.cycles.read_bytes(0, &mut raw)?;
        res.cycles.write_bytes(0, &vec![0u8; raw.len()])?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    }

    /// The GPU's clock in kHz (what `clock64` counts), to read
    /// [`GpuStreams::take_window_cycles`] as time.
    pub fn clock_khz(&self) -> Result<u64> {
        let khz = self
            .ctx
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?;
        Ok(khz.max(1) as u64)
    }

    /// Whether the block's copy of the bulk tables and the warps' scratch are in shared
    /// memory, for reports.
    pub fn describe(&self) -> String {
        format!(
            "{} threads a block ({} windows at once), bulk tables {}, scratch {}",
            self.threads,
            self.threads / WARP,
            if self.layout.cached {
                "in shared memory"
            } else {
                "in global memory"
            },
            if self.layout.global_scratch {
                "global"
            } else {
                "shared"
            }
        )
    }

    fn res(&self) -> &Resources {
        self.res.as_ref().expect("resources live until drop")
    }

    pub fn streams(&self) -> usize {
        self.streams
    }

    /// The packed model (its descriptor holds the device addresses).
    pub fn packed(&self) -> &PackedModel {
        &self.res().model.packed
    }

    /// Every stream starts again at round 0.
    pub fn reset(&mut self) -> Result<()> {
        let states = &self.res().states;
        states.write_bytes(0, &vec![0u8; states.len()])
    }

    /// Overwrites every stream's state (`streams` of them, in order): a batched service
    /// parks the streams a launch must not touch (`finished = 1` refuses every round) and
    /// restores them after.
    pub fn set_states(&mut self, states: &[StreamStateDesc]) -> Result<()> {
        if states.len() != self.streams {
            return Err(Error::InvalidSetting {
                key: "states",
                detail: format!("{} states for {} streams", states.len(), self.streams),
            });
        }
        let bytes: Vec<u8> = states.iter().flat_map(|s| s.to_bytes()).collect();
        self.res().states.write_bytes(0, &bytes)
    }

    fn ensure(slot: &mut Option<DeviceBuffer>, ctx: &Arc<GpuContext>, len: usize) -> Result<u64> {
        if slot.as_ref().is_none_or(|b| b.len() < len) {
            *slot = None;
            *slot = Some(DeviceBuffer::zeroed(ctx, len)?);
        }
        Ok(slot.as_ref().map_or(0, |b| b.device_ptr()))
    }

    /// Every stream takes `rounds` rounds from round `first_round` and, when `finish`, its
    /// final round after them: `events` holds `streams x (rounds + finish)` rounds of
    /// `round_bytes` bytes, stream by stream. Returns each stream's answers (commits and
    /// refusals, in order) and the batch's times.
    pub fn push(
        &mut self,
        first_round: u64,
        events: &[u8],
        rounds: u32,
        finish: bool,
    ) -> Result<(Vec<Vec<Answer>>, BatchTimes)> {
        let t0 = Instant::now();
        let ctx = Arc::clone(&self.ctx);
        let streams = self.streams;
        let res = self.res.as_mut().expect("resources live until drop");
        let p = res.model.packed.desc;
        let inputs = rounds as usize + usize::from(finish);
        let want = streams * inputs * p.round_bytes as usize;
        if events.len() != want || inputs == 0 {
            return Err(Error::InvalidSetting {
                key: "events",
                detail: format!(
                    "{} bytes of events for {} streams x {inputs} rounds of {} bytes (need {want}, \
                     and at least one round)",
                    events.len(),
                    streams,
                    p.round_bytes
                ),
            });
        }
        // A commit per window, a refusal per round at most.
        let per_stream = inputs as u32;
        let commit_bytes = std::mem::size_of::<StreamCommitDesc>();
        let events_ptr = Self::ensure(&mut res.events, &ctx, events.len())?;
        let commits_ptr = Self::ensure(
            &mut res.commits,
            &ctx,
            streams * per_stream as usize * commit_bytes,
        )?;
        res.events
            .as_ref()
            .expect("allocated above")
            .write_bytes(0, events)?;
        let params = WindowBatchParams {
            model: res.model.desc_ptr(),
            states: res.states.device_ptr(),
            rows: res.rows.device_ptr(),
            events: events_ptr,
            commits: commits_ptr,
            counts: res.counts.device_ptr(),
            scratch: res.scratch.as_ref().map_or(0, |s| s.device_ptr()),
            dp: res.dp.as_ref().map_or(0, |s| s.device_ptr()),
            cycles: res.cycles.device_ptr(),
            first_round,
            streams: streams as u32,
            rounds,
            finish: u32::from(finish),
            commits_per_stream: per_stream,
            group_threads: WARP,
            cached: u32::from(self.layout.cached),
        };
        let t_launch = Instant::now();
        // SAFETY: every address in `params` is a live allocation of this context, sized
        // for `streams` and `inputs` as the kernel reads them, and kept until the kernel
        // finished (waited for below), or leaked if it does not (`stuck`).
        unsafe {
            res.kernel.launch(
                &ctx,
                &self.stream,
                self.layout.grid,
                self.threads,
                self.layout.shared_bytes,
                &params,
            )?;
        }
        if let Err(e) = self.wait() {
            self.stuck = matches!(e, Error::KernelTimeout { .. });
            return Err(e);
        }
        let kernel = t_launch.elapsed();
        let res = self.res();
        let mut counts = vec![0u8; streams * 4];
        res.counts.read_bytes(0, &mut counts)?;
        let mut raw = vec![0u8; streams * per_stream as usize * commit_bytes];
        res.commits
            .as_ref()
            .expect("allocated above")
            .read_bytes(0, &mut raw)?;
        let answers = (0..streams)
            .map(|i| {
                let n = u32::from_le_bytes(counts[4 * i..4 * i + 4].try_into().expect("4 bytes"));
                (0..n.min(per_stream) as usize)
                    .map(|j| {
                        let at = (i * per_stream as usize + j) * commit_bytes;
                        Answer::from_bytes(&raw[at..at + commit_bytes])
                    })
                    .collect()
            })
            .collect();
        Ok((
            answers,
            BatchTimes {
                kernel,
                total: t0.elapsed(),
            },
        ))
    }

    /// Waits for the stream's work, with a deadline.
    fn wait(&self) -> Result<()> {
        self.stream.wait_finished(BATCH_KERNEL, BATCH_DEADLINE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::Dem;

    fn model(w: u32, c: u32) -> StreamModel {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/surface_d5_r5_z_p001.dem"
        );
        StreamModel::from_dem(&Dem::from_path(path.as_ref()).unwrap(), w, c).unwrap()
    }

    /// The blob holds each window's arrays and tables where its descriptor says, as the
    /// CPU's graphs and metric have them.
    #[test]
    fn packed_windows_are_the_cpu_graphs() {
        let m = model(4, 2);
        let p = PackedModel::of(&m).unwrap();
        assert_eq!(p.desc.graph_count as usize, m.windows().len());
        assert_eq!(p.desc.slots, 12);
        assert_eq!(p.desc.row_words, 1);
        assert_eq!(p.desc.round_bytes, 3);
        let kept = &p.blob[p.desc.kept_slots as usize..][..12];
        assert_eq!(kept, m.kept_slots());
        let words = std::mem::size_of::<WindowGraphDesc>() / 4;
        for (i, w) in m.windows().iter().enumerate() {
            let d = &p.blob[i * words..(i + 1) * words];
            let g = &w.graph;
            assert_eq!(
                (d[0], d[1], d[2], d[3]),
                (
                    g.num_detectors() as u32,
                    g.num_edges() as u32,
                    w.rounds,
                    w.commit_rounds
                )
            );
            let n = g.num_detectors();
            assert_eq!(&p.blob[d[4] as usize..][..n + 2], g.adj_offset());
            for (o, pair) in g.adj_pairs().iter().enumerate() {
                assert_eq!(&p.blob[d[5] as usize + 2 * o..][..2], pair);
            }
            for e in 0..g.num_edges() {
                assert_eq!(p.blob[d[6] as usize + e], g.edge_weight()[e]);
                assert_eq!(p.blob[d[7] as usize + 2 * e], g.edge_obs()[e] as u32);
            }
            let (bounds, exits) = m.metric().boundary_table(i);
            assert_eq!(&p.blob[d[8] as usize..][..n], bounds);
            assert_eq!(&p.blob[d[9] as usize..][..n], exits);
            assert!(p.desc.max_defects as usize >= n);
        }
        let pairs = m.metric().pair_table();
        assert_eq!(&p.blob[p.desc.pairs as usize..][..pairs.len()], pairs);
        let first_final = m
            .window_index(WindowKind::Final {
                from_start: false,
                rounds: 2,
            })
            .unwrap();
        assert_eq!(p.desc.first_final_from_bulk as usize, first_final);
    }

    /// Sizes of the scratch and the bulk tables for the fixtures' windows
    /// (docs/streaming.md quotes them).
    #[test]
    #[ignore = "prints sizes: cargo test --lib scratch_sizes -- --ignored --nocapture"]
    fn scratch_sizes() {
        for d in [5, 7, 9, 11, 13, 15] {
            let r = if d <= 7 { 100 } else { 3 };
            let path = format!(
                "{}/tests/fixtures/stream/surface_d{d}_r{r}_z_p001.dem",
                env!("CARGO_MANIFEST_DIR")
            );
            let Ok(dem) = Dem::from_path(path.as_ref()) else {
                continue;
            };
            let w = 2 * d;
            let Ok(m) = StreamModel::from_dem(&dem, w, d) else {
                continue;
            };
            let p = PackedModel::of(&m).unwrap();
            println!(
                "d={d} W={w}: {} defects at most, scratch {} KB a warp (and {} KB of exact \
                 matching tables), bulk tables {} KB, model {} KB",
                p.desc.max_defects,
                p.scratch_hot_bytes().div_ceil(1024),
                p.dp_bytes().div_ceil(1024),
                p.cache_bytes().div_ceil(1024),
                (p.blob.len() * 4).div_ceil(1024)
            );
        }
    }

    #[test]
    fn answers_read_the_commit_layout() {
        let c = StreamCommitDesc {
            first_round: 7,
            flips: 0x1_0000_0001,
            rounds: 3,
            status: abi::STREAM_COMMIT,
        };
        assert_eq!(
            Answer::from_bytes(&c.to_bytes()),
            Answer::Commit(Commit {
                first_round: 7,
                rounds: 3,
                flips: 0x1_0000_0001
            })
        );
        let r = StreamCommitDesc {
            status: abi::STREAM_ROUNDS_MISSING,
            ..c
        };
        assert_eq!(
            Answer::from_bytes(&r.to_bytes()),
            Answer::Refused(Refusal::RoundsMissing)
        );
    }
}

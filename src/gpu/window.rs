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
use crate::decode::window::{Commit, MatchLimits, StreamModel, WindowGraph, WindowKind};
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
    /// Packs every window graph of `model` (see `WindowGraphDesc` in `src/abi.rs`).
    pub fn of(model: &StreamModel) -> Result<PackedModel> {
        let windows = model.windows();
        let desc_words = std::mem::size_of::<WindowGraphDesc>() / 4;
        let k = model.kept_slots().len();
        let mut blob = vec![0u32; windows.len() * desc_words];
        let kept_at = blob.len();
        blob.extend(model.kept_slots());
        let (mut max_v, mut max_e, mut max_degree) = (0usize, 0usize, 1u32);
        let mut descs = Vec::with_capacity(windows.len());
        // Each graph's arrays, one run of blob words: where the run ends.
        let mut ends = Vec::with_capacity(windows.len());
        for w in windows {
            let g = &w.graph;
            max_v = max_v.max(g.num_detectors());
            max_e = max_e.max(g.num_edges());
            let off = g.adj_offset();
            max_degree = (0..g.num_detectors())
                .map(|v| off[v + 1] - off[v])
                .fold(max_degree, u32::max);
            descs.push(pack_graph(w, &mut blob)?);
            ends.push(blob.len() as u32);
        }
        for (i, d) in descs.iter().enumerate() {
            let bytes = d.to_bytes();
            for (j, w) in bytes.chunks_exact(4).enumerate() {
                blob[i * desc_words + j] = u32::from_le_bytes(w.try_into().expect("4 bytes"));
            }
        }
        let w = model.rounds_per_window();
        let c = model.commit_rounds();
        let index = |kind| model.window_index(kind).map_or(0, |i| i as u32);
        let desc = StreamModelDesc {
            data: 0,
            graphs: 0,
            graph_count: windows.len() as u32,
            rounds_per_window: w,
            commit_rounds: c,
            slots: k as u32,
            kept_slots: kept_at as u32,
            round_bytes: model.round_bytes() as u32,
            row_words: k.div_ceil(32) as u32,
            min_rounds: model.min_rounds(),
            first_final_from_start: index(WindowKind::Final {
                from_start: true,
                rounds: model.min_rounds(),
            }),
            first_final_from_bulk: index(WindowKind::Final {
                from_start: false,
                rounds: w - c,
            }),
            max_vertices: max_v as u32,
            max_edges: max_e as u32,
            scratch_words: 0,
            scratch: [0; abi::SCR_COUNT as usize],
            match_defects: model.match_limits().defects,
            match_members: model.match_limits().members,
            match_edges: model.match_limits().edges,
            degree_shift: max_degree.next_power_of_two().trailing_zeros(),
            match_pool_words: 0,
            cache_graph: 0,
            cache_from: 0,
            cache_words: 0,
            reserved: 0,
        };
        let bulk = model.window_index(WindowKind::Bulk).unwrap_or(0);
        let span = (descs[bulk].adj_offset, ends[bulk] - descs[bulk].adj_offset);
        let desc = with_scratch(desc, model.match_limits(), bulk, span);
        Ok(PackedModel { desc, blob })
    }

    /// Bytes of one decoding group's scratch.
    pub fn scratch_bytes(&self) -> usize {
        self.desc.scratch_words as usize * 4
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

/// Appends window graph `w`'s arrays to `blob`, one run of words from its CSR offsets to its
/// boundary edges; returns where each starts.
fn pack_graph(w: &WindowGraph, blob: &mut Vec<u32>) -> Result<WindowGraphDesc> {
    let g = &w.graph;
    if g.num_detectors() >= u32::MAX as usize / 2 || g.num_edges() >= u32::MAX as usize / 2 {
        return Err(Error::InvalidSetting {
            key: "rounds_per_window",
            detail: format!("window {:?} is too large for the device", w.kind),
        });
    }
    let mut d = WindowGraphDesc {
        vertices: g.num_detectors() as u32,
        edges: g.num_edges() as u32,
        rounds: w.rounds,
        commit_rounds: w.commit_rounds,
        ..Default::default()
    };
    d.adj_offset = blob.len() as u32;
    blob.extend(g.adj_offset());
    d.ends = blob.len() as u32;
    for (&u, &v) in g.edge_u().iter().zip(g.edge_v()) {
        blob.extend([u, v]);
    }
    d.weight = blob.len() as u32;
    blob.extend(g.edge_weight());
    d.obs = blob.len() as u32;
    for &o in g.edge_obs() {
        blob.extend([o as u32, (o >> 32) as u32]);
    }
    d.adj_pairs = blob.len() as u32;
    blob.extend(g.adj_pairs().iter().flatten());
    d.boundary_edge = blob.len() as u32;
    blob.extend(g.boundary_edge());
    Ok(d)
}

/// `desc` with its scratch laid out. The bulk window (graph `bulk`, its arrays the blob words
/// `from .. from + words`) decodes nearly every window of a stream: its arrays get a copy in
/// the scratch when both fit in shared memory.
fn with_scratch(
    desc: StreamModelDesc,
    limits: MatchLimits,
    bulk: usize,
    (from, words): (u32, u32),
) -> StreamModelDesc {
    let (max_v, max_e) = (desc.max_vertices as usize, desc.max_edges as usize);
    let (_, plain) = scratch_layout(max_v, max_e, limits, 0);
    let cache = if (plain + words) as usize * 4 + KERNEL_STATIC_SHARED <= MAX_SHARED {
        words
    } else {
        0
    };
    let (offsets, scratch_words) = scratch_layout(max_v, max_e, limits, cache as usize);
    StreamModelDesc {
        scratch: offsets,
        scratch_words,
        match_pool_words: offsets[abi::SCR_TABLE as usize] - offsets[abi::SCR_POOL as usize],
        cache_graph: bulk as u32,
        cache_from: from,
        cache_words: cache,
        ..desc
    }
}

/// Pool words beyond what the largest region needs: room for many small regions in one
/// batch beside it.
const MATCH_POOL_SPARE: usize = 2048;

/// Pool words of a region of `members` vertices and `defects` defects whose edges take at
/// most `edges` words (as `qw_region_words` in `device/window/match.cuh` counts them):
/// members, defects, their sort buffer, boundary distances and matches, distances, the
/// subsets' costs and choices (bytes), the edges.
pub fn match_region_words(members: u32, defects: u32, edges: u32) -> u32 {
    let subsets = 1u32 << defects;
    members + 4 * defects + defects * members + subsets + subsets.div_ceil(4) + edges
}

/// Where a decoding group's scratch arrays start (word offsets, by `SCR_*`), and its size
/// in words, for windows of at most `max_v` detectors and `max_e` edges, with a copy of
/// `cache_words` words of a window graph.
pub fn scratch_layout(
    max_v: usize,
    max_e: usize,
    limits: MatchLimits,
    cache_words: usize,
) -> ([u32; abi::SCR_COUNT as usize], u32) {
    let nv = max_v + 1;
    let mut sizes = [0usize; abi::SCR_COUNT as usize];
    for i in abi::SCR_PARENT..=abi::SCR_VERTS {
        sizes[i as usize] = nv;
    }
    for i in abi::SCR_GROWTH..=abi::SCR_FULL {
        sizes[i as usize] = max_e;
    }
    // Growth never exceeds a weight, and weights fit 16 bits.
    sizes[abi::SCR_GROWTH as usize] = max_e.div_ceil(2);
    if limits.defects != 0 {
        let largest = match_region_words(limits.members, limits.defects, limits.edges);
        sizes[abi::SCR_POOL as usize] = largest as usize + MATCH_POOL_SPARE;
        sizes[abi::SCR_TABLE as usize] =
            (abi::MATCH_BATCH_REGIONS * abi::MATCH_ENTRY_WORDS) as usize;
    }
    sizes[abi::SCR_CACHE as usize] = cache_words;
    // Two banks (a window's, and the next one's being cleaned) and the bank word.
    sizes[abi::SCR_SCALARS as usize] = 2 * abi::WINDOW_SCALARS as usize + 1;
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
    scratch: Option<DeviceBuffer>,
}

/// Streams of one model on one GPU, fed by the batch kernel.
pub struct GpuStreams {
    // Declared in drop order: what the kernel uses goes before the context.
    stream: Stream,
    res: Option<Resources>,
    ctx: Arc<GpuContext>,
    streams: usize,
    threads: u32,
    shared_bytes: u32,
    grid: u32,
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
    /// `streams` streams at round 0 on GPU `device`, each decoded by a block of `threads`
    /// threads (a multiple of 32, at most 1024).
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
        // The kernel's registers may allow fewer threads a block than the group takes (on
        // an H200, 1 024 do not launch): say so before launching.
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
        // Each block's scratch: in dynamic shared memory when it fits (opting in above
        // 48 KiB), else one global area per block, for at most GLOBAL_SCRATCH_BLOCKS blocks
        // (the others' streams are served grid-stride).
        let in_shared = p.scratch_bytes() <= MAX_SHARED;
        let grid = streams.min(if in_shared {
            65_535
        } else {
            GLOBAL_SCRATCH_BLOCKS
        }) as u32;
        let (shared_bytes, scratch) = if in_shared {
            if p.scratch_bytes() > DEFAULT_SHARED_LIMIT {
                kernel
                    .function()
                    .allow_dynamic_shared(&ctx, p.scratch_bytes() as u32)?;
            }
            (p.scratch_bytes() as u32, None)
        } else {
            let s = DeviceBuffer::zeroed(&ctx, p.scratch_bytes() * grid as usize)?;
            (0, Some(s))
        };
        let states = DeviceBuffer::zeroed(&ctx, streams * std::mem::size_of::<StreamStateDesc>())?;
        let rows = DeviceBuffer::zeroed(&ctx, streams * p.row_words_per_stream() * 4)?;
        let counts = DeviceBuffer::zeroed(&ctx, streams * 4)?;
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
                scratch,
            }),
            ctx,
            streams,
            threads,
            shared_bytes,
            grid,
            stuck: false,
        })
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
            first_round,
            streams: streams as u32,
            rounds,
            finish: u32::from(finish),
            commits_per_stream: per_stream,
        };
        let t_launch = Instant::now();
        // SAFETY: every address in `params` is a live allocation of this context, sized
        // for `streams` and `inputs` as the kernel reads them, and kept until the kernel
        // finished (waited for below), or leaked if it does not (`stuck`).
        unsafe {
            res.kernel.launch(
                &ctx,
                &self.stream,
                self.grid,
                self.threads,
                self.shared_bytes,
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

    /// The blob holds each window's arrays where its descriptor says, as the CPU's graphs
    /// have them.
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
        for (i, w) in m.windows().iter().enumerate() {
            let d = &p.blob[i * 10..i * 10 + 10];
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
            for e in 0..g.num_edges() {
                assert_eq!(p.blob[d[5] as usize + 2 * e], g.edge_u()[e]);
                assert_eq!(p.blob[d[5] as usize + 2 * e + 1], g.edge_v()[e]);
                assert_eq!(p.blob[d[6] as usize + e], g.edge_weight()[e]);
                let o = g.edge_obs()[e];
                assert_eq!(p.blob[d[7] as usize + 2 * e], o as u32);
            }
            assert!(p.desc.max_vertices as usize >= n);
        }
        let first_final = m
            .window_index(WindowKind::Final {
                from_start: false,
                rounds: 2,
            })
            .unwrap();
        assert_eq!(p.desc.first_final_from_bulk as usize, first_final);
    }

    /// Each detector's adjacency fits the `2^degree_shift` items the decoder gives it, and
    /// no smaller power of two would do.
    #[test]
    fn degree_shift_covers_the_largest_degree() {
        let m = model(4, 2);
        let p = PackedModel::of(&m).unwrap();
        let slots = 1u32 << p.desc.degree_shift;
        let mut largest = 0;
        for w in m.windows() {
            let off = w.graph.adj_offset();
            for v in 0..w.graph.num_detectors() {
                largest = largest.max(off[v + 1] - off[v]);
            }
        }
        assert!(
            largest <= slots && largest > slots / 2,
            "{largest} in {slots} slots"
        );
    }

    /// Sizes of the scratch for the fixtures' windows (docs/streaming.md quotes them).
    #[test]
    #[ignore = "prints sizes: cargo test --lib scratch_sizes -- --ignored --nocapture"]
    fn scratch_sizes() {
        for d in [5, 7, 11, 13, 15] {
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
                "d={d} W={w}: {} vertices, {} edges, degree shift {}, scratch {} KB",
                p.desc.max_vertices,
                p.desc.max_edges,
                p.desc.degree_shift,
                p.scratch_bytes().div_ceil(1024)
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

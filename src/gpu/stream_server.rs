//! The persistent stream kernel (`device/stream.cu`): every stream's state and rows in GPU
//! memory for as long as the kernel runs, fed through two submission buffers in mapped host
//! memory ([`crate::mailbox::streams`]) instead of a launch per batch.
//!
//! [`PreparedStreamServer::new`] compiles the kernel, uploads the model, allocates the
//! states, rows, scratch and stages, and sizes the grid to the blocks the device holds at
//! once (the occupancy API), so that every block runs. [`PreparedStreamServer::launch`]
//! starts it; the [`RunningStreamServer`] submits, waits with a deadline (and notices a
//! kernel that ended or faulted), and stops it on drop, leaking its memory rather than
//! freeing it under a kernel that does not stop.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::context::GpuContext;
use super::memory::{DeviceBuffer, MappedHostBuffer};
use super::module::{Kernel, Module, Stream};
use super::nvrtc::STREAM_SERVE;
use super::window::{
    check_groups, DeviceModel, PackedModel, DEFAULT_SHARED_LIMIT, KERNEL_STATIC_SHARED, MAX_SHARED,
};
use crate::abi::{self, StreamServeParams, StreamStateDesc};
use crate::decode::window::StreamModel;
use crate::mailbox::streams::{Submissions, SubmitLayout};
use crate::shm::SharedRegion;
use crate::{Error, Result};

/// The kernel in `device/stream.cu`.
pub const STREAM_SERVE_KERNEL: &str = <StreamServeParams as abi::KernelParams>::KERNEL;
/// Device memory each block copies an entry's events into.
const STAGE_BYTES: u32 = 16 * 1024;
/// Event bytes one submission may carry.
const EVENTS_BYTES: usize = 4 << 20;
/// Pause of an idle block between two polls.
const POLL_NS: u32 = 200;
/// How long `stop` waits for the kernel to end.
const STOP_DEADLINE: Duration = Duration::from_secs(12);

/// What bounds the grid: blocks one multiprocessor holds, given the kernel's registers
/// per thread and a block's dynamic shared memory (the window decoder's scratch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occupancy {
    pub blocks_per_sm: u32,
    pub registers: u32,
    pub shared_bytes: u32,
}

/// The kernel's counters (`SERVE_PROF_*`), in mapped host memory after the submission
/// block.
struct Profile {
    region: SharedRegion,
    at: usize,
    blocks: usize,
    clock_khz: u64,
}

/// Where the kernel's time went, summed over its blocks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerProfile {
    /// Seconds waiting for submissions, reading entries and staging events, decoding.
    pub idle_s: f64,
    pub stage_s: f64,
    pub decode_s: f64,
    pub entries: u64,
    pub rounds: u64,
    pub answers: u64,
    /// Seconds of the decoding spent in the calls that answered (decoded a window).
    pub windows_s: f64,
}

impl Profile {
    fn read(&self) -> ServerProfile {
        let mut sum = [0u64; abi::SERVE_PROFILE_WORDS as usize];
        for b in 0..self.blocks {
            for (k, s) in sum.iter_mut().enumerate() {
                let at = self.at + 8 * (b * abi::SERVE_PROFILE_WORDS as usize + k);
                *s += self.region.load_u64(at, Ordering::Relaxed);
            }
        }
        let secs = |cycles: u64| cycles as f64 / (self.clock_khz as f64 * 1e3);
        ServerProfile {
            idle_s: secs(sum[abi::SERVE_PROF_IDLE as usize]),
            stage_s: secs(sum[abi::SERVE_PROF_STAGE as usize]),
            decode_s: secs(sum[abi::SERVE_PROF_DECODE as usize]),
            entries: sum[abi::SERVE_PROF_ENTRIES as usize],
            rounds: sum[abi::SERVE_PROF_ROUNDS as usize],
            answers: sum[abi::SERVE_PROF_ANSWERS as usize],
            windows_s: secs(sum[abi::SERVE_PROF_WINDOWS as usize]),
        }
    }
}

/// What the kernel uses, freed once it stopped (or leaked if it does not).
struct Resources {
    _module: Module,
    _model: DeviceModel,
    _states: DeviceBuffer,
    _rows: DeviceBuffer,
    _scratch: Option<DeviceBuffer>,
    _stage: DeviceBuffer,
    _relay: DeviceBuffer,
    submissions: Submissions,
    profile: Profile,
}

/// How many blocks of the kernel the device holds at once, and what bounds them. Opts in
/// to `shared_bytes` of dynamic shared memory where that is above the default limit.
fn resident_blocks(
    ctx: &Arc<GpuContext>,
    kernel: &Kernel<StreamServeParams>,
    threads: u32,
    shared_bytes: u32,
) -> Result<(usize, Occupancy)> {
    if shared_bytes as usize > DEFAULT_SHARED_LIMIT {
        kernel.function().allow_dynamic_shared(ctx, shared_bytes)?;
    }
    let sms = ctx.attribute(
        cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    )?;
    let per_sm = kernel
        .function()
        .max_active_blocks_per_sm(ctx, threads, shared_bytes)?;
    let resident = sms.max(0) as usize * per_sm as usize;
    if resident == 0 {
        return Err(Error::InvalidSetting {
            key: "threads",
            detail: format!(
                "GPU {} holds no block of {threads} threads with {shared_bytes} bytes of shared \
                 memory for {STREAM_SERVE_KERNEL}",
                ctx.index()
            ),
        });
    }
    let occupancy = Occupancy {
        blocks_per_sm: per_sm,
        registers: kernel.function().registers(ctx)?,
        shared_bytes,
    };
    Ok((resident, occupancy))
}

/// The submission block for `streams` streams served by `grid` blocks.
fn submit_layout(p: &PackedModel, streams: usize, grid: u32) -> SubmitLayout {
    let round_bytes = (p.desc.round_bytes as usize).max(1);
    // A batch's segments give a stream one entry per reset in it.
    let max_entries = (8 * streams).max(4096) as u32;
    SubmitLayout {
        blocks: grid,
        max_entries,
        events_bytes: EVENTS_BYTES,
        commit_slots: (EVENTS_BYTES / round_bytes / p.desc.commit_rounds.max(1) as usize) as u32
            + 2 * max_entries,
    }
}

/// A stream server ready to launch: memory allocated, grid sized.
pub struct PreparedStreamServer {
    kernel: Kernel<StreamServeParams>,
    occupancy: Occupancy,
    params: StreamServeParams,
    res: Resources,
    ctx: Arc<GpuContext>,
    grid: u32,
    threads: u32,
    shared_bytes: u32,
}

impl PreparedStreamServer {
    /// `streams` streams at round 0 on GPU `device`, each window decoded by a block of
    /// `threads` threads (a multiple of 32, at most 1024).
    pub fn new(
        device: usize,
        model: &Arc<StreamModel>,
        streams: usize,
        threads: u32,
    ) -> Result<PreparedStreamServer> {
        check_groups(streams, threads)?;
        let ctx = GpuContext::open(device)?;
        let module = Module::compile_and_load(&ctx, &STREAM_SERVE)?;
        let kernel = module.kernel::<StreamServeParams>()?;
        let dmodel = DeviceModel::upload(&ctx, model)?;
        let p = &dmodel.packed;
        // The kernel's own shared variables (counters, the entry, the claim) come on top.
        let in_shared = p.scratch_bytes() + KERNEL_STATIC_SHARED <= MAX_SHARED;
        let shared_bytes = if in_shared {
            p.scratch_bytes() as u32
        } else {
            0
        };
        let (resident, occupancy) = resident_blocks(&ctx, &kernel, threads, shared_bytes)?;
        let grid = streams.min(resident) as u32;
        tracing::debug!(device, grid, ?occupancy, "stream server sized");
        let scratch = (!in_shared)
            .then(|| DeviceBuffer::zeroed(&ctx, p.scratch_bytes() * grid as usize))
            .transpose()?;
        let states = DeviceBuffer::zeroed(&ctx, streams * std::mem::size_of::<StreamStateDesc>())?;
        let rows = DeviceBuffer::zeroed(&ctx, streams * p.row_words_per_stream() * 4)?;
        let stage = DeviceBuffer::zeroed(&ctx, STAGE_BYTES as usize * grid as usize)?;
        let relay = DeviceBuffer::zeroed(&ctx, abi::SERVE_CONTROL_BYTES as usize)?;
        let layout = submit_layout(p, streams, grid);
        let max_entries = layout.max_entries;
        let profile_bytes = 8 * abi::SERVE_PROFILE_WORDS as usize * grid as usize;
        let buffers = layout.region_bytes();
        let block = MappedHostBuffer::new(&ctx, buffers + profile_bytes)?;
        let base = block.device_ptr();
        let region = block.into_region()?;
        region.zero(0, buffers);
        let params = StreamServeParams {
            model: dmodel.desc_ptr(),
            states: states.device_ptr(),
            rows: rows.device_ptr(),
            scratch: scratch.as_ref().map_or(0, |s| s.device_ptr()),
            stage: stage.device_ptr(),
            relay: relay.device_ptr(),
            control: base,
            done: base + layout.done() as u64,
            entries: base + layout.entries() as u64,
            events: base + layout.events() as u64,
            commits: base + layout.commits() as u64,
            counts: base + layout.counts() as u64,
            profile: base + buffers as u64,
            buffer_stride: layout.total_bytes() as u64,
            streams: streams as u32,
            max_entries,
            stage_bytes: STAGE_BYTES,
            poll_ns: POLL_NS,
        };
        let profile = Profile {
            region: region.clone(),
            at: buffers,
            blocks: grid as usize,
            clock_khz: ctx
                .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?
                .max(1) as u64,
        };
        let submissions = Submissions::new(region, layout)?;
        Ok(PreparedStreamServer {
            kernel,
            occupancy,
            params,
            res: Resources {
                _module: module,
                _model: dmodel,
                _states: states,
                _rows: rows,
                _scratch: scratch,
                _stage: stage,
                _relay: relay,
                submissions,
                profile,
            },
            ctx,
            grid,
            threads,
            shared_bytes,
        })
    }

    /// Blocks the kernel runs (streams beyond them share blocks).
    pub fn grid(&self) -> u32 {
        self.grid
    }

    /// Launches the kernel; it serves submissions until stopped.
    pub fn launch(self) -> Result<RunningStreamServer> {
        let stream = Stream::new(&self.ctx)?;
        // SAFETY: every address in `params` is a live allocation of this context, sized as
        // the kernel reads it (streams, grid, layout), and owned by `res`, which the
        // running server frees only after the kernel stopped, or leaks.
        unsafe {
            self.kernel.launch(
                &self.ctx,
                &stream,
                self.grid,
                self.threads,
                self.shared_bytes,
                &self.params,
            )?;
        }
        Ok(RunningStreamServer {
            occupancy: self.occupancy,
            stream,
            res: Some(self.res),
            ctx: self.ctx,
            grid: self.grid,
            threads: self.threads,
            stuck: false,
        })
    }
}

/// A launched stream server. Dropping it stops the kernel.
pub struct RunningStreamServer {
    // Declared in drop order: the kernel's stream before its memory and context.
    stream: Stream,
    res: Option<Resources>,
    ctx: Arc<GpuContext>,
    grid: u32,
    threads: u32,
    occupancy: Occupancy,
    /// The kernel did not answer or stop in time: its memory is leaked on drop.
    stuck: bool,
}

// SAFETY: the device buffers and handles are used only through `&mut self`, from one
// thread at a time; each driver call binds the context first.
unsafe impl Send for RunningStreamServer {}

impl RunningStreamServer {
    pub fn submissions(&mut self) -> &mut Submissions {
        &mut self
            .res
            .as_mut()
            .expect("resources live until drop")
            .submissions
    }

    pub fn grid(&self) -> u32 {
        self.grid
    }

    pub fn threads(&self) -> u32 {
        self.threads
    }

    pub fn device(&self) -> usize {
        self.ctx.index()
    }

    pub fn occupancy(&self) -> Occupancy {
        self.occupancy
    }

    /// The kernel's counters so far (as of the last submission each block finished).
    pub fn profile(&self) -> ServerProfile {
        self.res
            .as_ref()
            .map(|r| r.profile.read())
            .unwrap_or_default()
    }

    /// Waits until every block served the oldest submission in flight, at most
    /// `deadline`; an error if the kernel ended, faulted or did not answer in time.
    pub fn wait(&mut self, deadline: Duration) -> Result<()> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if self.submissions().finished() {
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            if spins % 1024 == 0 {
                self.check()?;
                if start.elapsed() > deadline {
                    self.stuck = true;
                    return Err(Error::KernelTimeout {
                        device: self.ctx.index(),
                        kernel: STREAM_SERVE_KERNEL,
                        waited_ms: deadline.as_millis() as u64,
                    });
                }
            }
            std::hint::spin_loop();
        }
    }

    /// An error if the kernel is no longer running.
    fn check(&mut self) -> Result<()> {
        match self.stream.query() {
            Ok(false) => Ok(()),
            Ok(true) => Err(Error::Decode {
                detail: format!(
                    "{STREAM_SERVE_KERNEL} on GPU {} ended before it was stopped",
                    self.ctx.index()
                ),
            }),
            Err(source) => Err(Error::KernelFault {
                device: self.ctx.index(),
                kernel: STREAM_SERVE_KERNEL,
                source,
            }),
        }
    }

    /// Stops the kernel and waits for it (with a deadline).
    pub fn stop(&mut self) -> Result<()> {
        if let Some(res) = self.res.as_ref() {
            res.submissions.stop();
        }
        let done = self
            .stream
            .wait_finished(STREAM_SERVE_KERNEL, STOP_DEADLINE);
        self.stuck |= matches!(done, Err(Error::KernelTimeout { .. }));
        done
    }
}

impl Drop for RunningStreamServer {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::warn!("{e}; leaking the stream server's memory");
        }
        if self.stuck {
            std::mem::forget(self.res.take());
        }
    }
}

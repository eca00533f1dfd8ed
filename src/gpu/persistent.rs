//! The persistent kernel (`gpu-persistent`): launched once on its own stream, it spin-polls
//! the request ring in mapped host memory until the stop sentinel.
//!
//! Typed states: [`PreparedKernel::new`] compiles the kernel, allocates its mailbox and
//! state and uploads its decoders; [`PreparedKernel::launch`] consumes it and returns the
//! running [`PersistentKernel`], which [`PersistentKernel::stop`] and
//! [`PersistentKernel::wait`] end (or [`crate::mailbox::MailboxBackend::shutdown`]);
//! dropping a running kernel stops it, and leaks its memory rather than free it under a
//! kernel that did not stop. A prepared kernel cannot be stopped, nor launched twice:
//!
//! ```compile_fail
//! fn twice(k: qfwd::gpu::persistent::PreparedKernel) {
//!     let _first = k.launch();
//!     let _second = k.launch(); // `k` was moved into the first launch
//! }
//! ```
//!
//! ```compile_fail
//! fn stop(k: &mut qfwd::gpu::persistent::PreparedKernel) {
//!     k.stop(); // only a running kernel has a stop
//! }
//! ```
//!
//! With a soft NIC's send queue ([`PersistentKernel::start_with_nic`]) it also sends every
//! response to the QPU itself, ringing the NIC's doorbell (`regular` or `blueflame`) from
//! the GPU: it runs `FORWARD_DOORBELL` (device/doorbell.cu + device/forward.cu), requests
//! carry their wire identity (a reply layout), and the host only counts the "already sent"
//! completions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys;

use super::context::GpuContext;
use super::decoder::{DeviceDecoders, ScratchPlacement};
use super::memory::{device_address_of, DeviceBuffer, MappedHostBuffer};
use super::module::{Kernel, Module, Stream};
use super::nvrtc::{FORWARD, FORWARD_DOORBELL};
use super::GpuOptions;
use crate::abi::{KernelParams, PersistentParams};
use crate::backend::Topology;
use crate::decode::Decoder;
use crate::mailbox::layout::{COUNTERS_PER_POLLER, STATE_COUNTERS_OFFSET};
use crate::mailbox::{protocol, Layout, MailboxDevice, PollerCounters, RxCompletion};
use crate::queues::posting::{BLOCK_BYTES, COUNTERS, COUNTERS_OFFSET};
use crate::queues::{DevicePostCounters, DevicePosting};
use crate::shm::SharedRegion;
use crate::{Error, Result};

/// Kernel entry point in `device/forward.cu`.
pub const PERSISTENT_KERNEL: &str = PersistentParams::KERNEL;

/// Shared memory a block may use without opting in.
const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;

/// How long `Drop` waits for the kernel after the sentinel before giving up on it.
const DROP_STOP_TIMEOUT: Duration = Duration::from_secs(3);

/// What the kernel uses, freed in field order once it has stopped (or leaked if it does
/// not stop).
struct Resources {
    stream: Stream,
    /// The loaded code (unloaded only after the kernel stopped).
    _module: Module,
    /// Device memory: claim tickets and per-poller counters.
    state: DeviceBuffer,
    /// The mailbox (mapped pinned host memory, owned by the region).
    memory: SharedRegion,
    /// The device posting block, and the NIC memory the kernel writes (kept alive).
    nic: Option<(DeviceBuffer, SharedRegion)>,
    /// The decoder models and per-warp state the kernel reads.
    decoders: Option<DeviceDecoders>,
}

/// A persistent kernel ready to launch: compiled and loaded, its mailbox, state and posting
/// block allocated, its decoders uploaded, its parameters and launch shape fixed.
pub struct PreparedKernel {
    resources: Resources,
    kernel: Kernel<PersistentParams>,
    params: PersistentParams,
    blocks: u32,
    warps_per_block: u32,
    shared: u32,
    ctx: Arc<GpuContext>,
    layout: Layout,
    device: usize,
}

/// Fails unless GPU `options.device` can map host memory (the mailbox lives there).
fn check_maps_host_memory(ctx: &GpuContext, options: &GpuOptions) -> Result<()> {
    let maps = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)?;
    let uva = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)?;
    if maps == 0 || uva == 0 {
        return Err(Error::GpuUnavailable {
            detail: format!(
                "GPU {} cannot map host memory (needed by gpu-persistent)",
                options.device
            ),
        });
    }
    Ok(())
}

/// The device posting block describing the soft NIC's send queue, and the NIC's region
/// (which the kernel writes, so it is kept alive with the block).
fn upload_posting_block(
    ctx: &Arc<GpuContext>,
    posting: &DevicePosting,
) -> Result<(DeviceBuffer, SharedRegion)> {
    let region = posting.region().clone();
    let base = device_address_of(ctx, region.host_addr(0), "the soft NIC's region")?;
    let block = DeviceBuffer::zeroed(ctx, BLOCK_BYTES)?;
    block.write_u64s(&posting.desc(base).to_u64_words())?;
    Ok((block, region))
}

/// How the kernel is launched: blocks, poller warps in each, dynamic shared memory.
struct LaunchShape {
    blocks: u32,
    warps_per_block: u32,
    shared: u32,
}

impl LaunchShape {
    /// Spreads the pollers over blocks, places the decoders' per-warp state (installing
    /// the decoders in `module`), and opts the kernel in to the shared memory it needs.
    #[allow(clippy::too_many_arguments)]
    fn fit(
        ctx: &Arc<GpuContext>,
        options: &GpuOptions,
        layout: &Layout,
        module: &Module,
        kernel: &Kernel<PersistentParams>,
        decoders: Option<&mut DeviceDecoders>,
        placement: ScratchPlacement,
        with_nic: bool,
    ) -> Result<LaunchShape> {
        let pollers = options.pollers;
        let warps_per_block = match options.warps_per_block {
            0 if with_nic => 1,
            0 => pollers,
            w => w.min(pollers),
        };
        // No more warps in a block than the kernel's registers allow (256 threads: its
        // __launch_bounds__): more pollers go to more blocks.
        let warps_per_block =
            warps_per_block.min(kernel.function().max_threads_per_block(ctx)? / 32);
        let blocks = pollers.div_ceil(warps_per_block);
        let mut shared =
            warps_per_block * (layout.req_slot_bytes() + layout.resp_slot_bytes()) as u32;
        // The decoders' per-warp state follows the staging in shared memory, or goes to
        // global memory when it does not fit (device/decode.cu).
        if let Some(d) = decoders {
            shared += d.place(
                ctx,
                placement,
                shared,
                warps_per_block,
                blocks * warps_per_block,
                true,
            )?;
            d.install(module)?;
        }
        if shared > DEFAULT_SHARED_LIMIT {
            let max = ctx.attribute(
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?;
            if shared as i64 > max as i64 {
                return Err(Error::InvalidSetting {
                    key: "warps_per_block",
                    detail: format!(
                        "{warps_per_block} warps x {} B slots need {shared} B of shared memory \
                         per block; GPU {} allows {max}",
                        layout.req_slot_bytes() + layout.resp_slot_bytes(),
                        options.device
                    ),
                });
            }
            kernel.function().allow_dynamic_shared(ctx, shared)?;
        }
        Ok(LaunchShape {
            blocks,
            warps_per_block,
            shared,
        })
    }
}

impl PreparedKernel {
    /// Prepares the kernel over a fresh zeroed mailbox. With `nic` (GPU-mapped pinned
    /// memory, [`super::mapped_nic_region`]) it will send every response through that soft
    /// NIC's send queue itself (GPU-initiated `regular` or `blueflame` doorbells); then
    /// `warps_per_block = 0` means one warp per block: the system fence of each post waits
    /// only for its own SM's host loads, not for those of the other poller warps
    /// (docs/architecture.md: a fence's cost grows with the warps polling on its SM); and
    /// each poll reads one more chunk, for the request's reply trailer. `decoders` (handler
    /// device codes 2 and 3; at most one model per kind) are uploaded, and each poller
    /// warp's `uf` state is placed as `placement` says (see [`super::decoder`]).
    pub fn new(
        options: &GpuOptions,
        nic: Option<&DevicePosting>,
        decoders: &[Arc<Decoder>],
        placement: ScratchPlacement,
    ) -> Result<PreparedKernel> {
        options.validate()?;
        let layout = options.layout()?.with_reply(nic.is_some());
        let ctx = GpuContext::open(options.device)?;
        check_maps_host_memory(&ctx, options)?;
        let source = if nic.is_some() {
            &FORWARD_DOORBELL
        } else {
            &FORWARD
        };
        let module = Module::compile_and_load(&ctx, source)?;
        let kernel = module.kernel::<PersistentParams>()?;
        let mut decoders = DeviceDecoders::upload(&ctx, decoders, options)?;
        let memory = MappedHostBuffer::new(&ctx, layout.total_bytes())?;
        let base = memory.device_ptr();
        let memory = memory.into_region()?;
        let nic = match nic {
            Some(posting) => Some(upload_posting_block(&ctx, posting)?),
            None => None,
        };
        let pollers = options.pollers;
        let state = DeviceBuffer::zeroed(
            &ctx,
            STATE_COUNTERS_OFFSET + pollers as usize * COUNTERS_PER_POLLER * 8,
        )?;
        let stream = Stream::new(&ctx)?;
        let shape = LaunchShape::fit(
            &ctx,
            options,
            &layout,
            &module,
            &kernel,
            decoders.as_mut(),
            placement,
            nic.is_some(),
        )?;
        let params = PersistentParams {
            req_ring: base + layout.req_ring_offset() as u64,
            resp_ring: base + layout.resp_ring_offset() as u64,
            control: base + layout.control_offset() as u64,
            state: state.device_ptr(),
            nic: nic.as_ref().map_or(0, |(block, _)| block.device_ptr()),
            slots: layout.slots() as u32,
            req_slot_bytes: layout.req_slot_bytes() as u32,
            resp_slot_bytes: layout.resp_slot_bytes() as u32,
            rx_inline: u32::from(layout.rx() == RxCompletion::Inline),
            // The reply trailer adds one chunk to a request: read one more per poll, so a
            // request that arrives in one read without it still does.
            poll_chunks: if nic.is_some() {
                (options.poll_chunks + 1).min(32)
            } else {
                options.poll_chunks
            },
            pollers,
            pollers_per_slot: options.pollers_per_slot,
            // Groups that lie within one block keep their claim ticket in shared memory.
            claim_in_block: u32::from(shape.warps_per_block % options.pollers_per_slot == 0),
        };
        Ok(PreparedKernel {
            resources: Resources {
                stream,
                _module: module,
                state,
                memory,
                nic,
                decoders,
            },
            kernel,
            params,
            blocks: shape.blocks,
            warps_per_block: shape.warps_per_block,
            shared: shape.shared,
            ctx,
            layout,
            device: options.device,
        })
    }

    /// The parameters the kernel will be launched with.
    pub fn params(&self) -> &PersistentParams {
        &self.params
    }

    /// Launches the kernel; it runs until [`PersistentKernel::stop`].
    pub fn launch(self) -> Result<PersistentKernel> {
        let PreparedKernel {
            resources,
            kernel,
            params,
            blocks,
            warps_per_block,
            shared,
            ctx,
            layout,
            device,
        } = self;
        // SAFETY: the addresses in `params` are of `resources` (mailbox, state, posting
        // block and NIC region), which the running kernel below owns and frees only after
        // the kernel stopped (or leaks, see Drop). On a launch error nothing runs.
        unsafe {
            kernel.launch(
                &ctx,
                &resources.stream,
                blocks,
                warps_per_block * 32,
                shared,
                &params,
            )
        }?;
        let mut running = PersistentKernel {
            resources: Some(resources),
            ctx,
            layout,
            pollers: params.pollers,
            phase: Phase::Running,
        };
        // A kernel that cannot run (bad launch resources, a fault) shows up at once.
        std::thread::sleep(Duration::from_millis(1));
        match running.resources().stream.query() {
            Ok(false) => Ok(running),
            Ok(true) => {
                running.phase = Phase::ended();
                Err(Error::GpuUnavailable {
                    detail: format!(
                        "{PERSISTENT_KERNEL} on GPU {device} exited right after its launch"
                    ),
                })
            }
            Err(source) => {
                running.phase = Phase::ended();
                Err(Error::KernelFault {
                    device,
                    kernel: PERSISTENT_KERNEL,
                    source,
                })
            }
        }
    }
}

/// Where a launched kernel is in its life.
enum Phase {
    Running,
    /// Seen to finish (or to fault); what its pollers and posters counted.
    Ended {
        counters: Vec<PollerCounters>,
        nic: Option<DevicePostCounters>,
    },
}

impl Phase {
    fn ended() -> Phase {
        Phase::Ended {
            counters: Vec::new(),
            nic: None,
        }
    }
}

/// A launched persistent kernel serving a mailbox. Stop it with [`PersistentKernel::stop`]
/// and [`PersistentKernel::wait`] (or through
/// [`crate::mailbox::MailboxBackend::shutdown`]); dropping it does both, and if the kernel
/// does not stop, leaks the memory it uses rather than free it under a running kernel.
pub struct PersistentKernel {
    /// `None` only once leaked by `Drop`.
    resources: Option<Resources>,
    ctx: Arc<GpuContext>,
    layout: Layout,
    pollers: u32,
    phase: Phase,
}

impl PersistentKernel {
    /// Prepares and launches the kernel over a fresh zeroed mailbox.
    pub fn start(options: &GpuOptions) -> Result<PersistentKernel> {
        PersistentKernel::start_with_nic(options, None)
    }

    /// [`PersistentKernel::start`]; with `nic`, the kernel sends every response through
    /// that soft NIC's send queue itself (see [`PreparedKernel::new`]).
    pub fn start_with_nic(
        options: &GpuOptions,
        nic: Option<&DevicePosting>,
    ) -> Result<PersistentKernel> {
        PersistentKernel::start_with(options, nic, &[], ScratchPlacement::Auto)
    }

    /// [`PersistentKernel::start_with_nic`], serving `decoders` too (see
    /// [`PreparedKernel::new`]).
    pub fn start_with(
        options: &GpuOptions,
        nic: Option<&DevicePosting>,
        decoders: &[Arc<Decoder>],
        placement: ScratchPlacement,
    ) -> Result<PersistentKernel> {
        PreparedKernel::new(options, nic, decoders, placement)?.launch()
    }

    fn resources(&self) -> &Resources {
        self.resources
            .as_ref()
            .expect("a kernel's resources live until it is dropped")
    }

    pub fn device_index(&self) -> usize {
        self.ctx.index()
    }

    pub fn pollers(&self) -> u32 {
        self.pollers
    }

    /// Where the poller warps' `uf` decoder state lives (`None` without a `uf` decoder).
    pub fn decoder_placement(&self) -> Option<ScratchPlacement> {
        self.resources()
            .decoders
            .as_ref()
            .and_then(DeviceDecoders::placement)
    }

    /// Whether each block holds the `uf` split path's arrays in its shared memory
    /// ([`DeviceDecoders::place`]).
    pub fn decoder_staged(&self) -> bool {
        self.resources()
            .decoders
            .as_ref()
            .is_some_and(DeviceDecoders::staged)
    }

    /// Whether each block holds the `uf` graph in its shared memory
    /// ([`DeviceDecoders::place`]).
    pub fn decoder_graph_staged(&self) -> bool {
        self.resources()
            .decoders
            .as_ref()
            .is_some_and(DeviceDecoders::graph_staged)
    }

    /// Whether the kernel sends responses through a soft NIC itself.
    pub fn posts_to_nic(&self) -> bool {
        self.resources().nic.is_some()
    }

    /// What the kernel's posters counted, once it stopped (`None` before, or without a NIC).
    pub fn nic_counters(&self) -> Option<DevicePostCounters> {
        match &self.phase {
            Phase::Ended { nic, .. } => *nic,
            Phase::Running => None,
        }
    }

    /// True while the kernel has not been seen to finish.
    pub fn is_running(&self) -> bool {
        matches!(self.phase, Phase::Running)
    }

    /// Writes the stop sentinel into every request slot (where the pollers already look)
    /// and releases stalls. Returns at once; [`PersistentKernel::wait`] for the end.
    pub fn stop(&mut self) {
        if let Some(r) = &self.resources {
            let region = &r.memory;
            protocol::write_stop(region, &self.layout);
            protocol::release_stalls(region, &self.layout);
        }
    }

    /// Waits until the kernel finished, at most until `deadline`; returns each poller's
    /// counters. `KernelDidNotStop` names the kernel if it is still running then.
    pub fn wait(&mut self, deadline: Instant) -> Result<Vec<PollerCounters>> {
        let start = Instant::now();
        while self.is_running() {
            self.ctx.bind()?;
            match self.resources().stream.query() {
                Ok(true) => {
                    self.phase = Phase::Ended {
                        counters: self.read_counters()?,
                        nic: self.read_nic_counters()?,
                    };
                }
                Ok(false) => {
                    if Instant::now() >= deadline {
                        return Err(Error::KernelDidNotStop {
                            device: self.ctx.index(),
                            kernel: PERSISTENT_KERNEL,
                            waited_ms: start.elapsed().as_millis() as u64,
                        });
                    }
                    // Off the hot path: the host is stopping.
                    std::thread::sleep(Duration::from_micros(100));
                }
                Err(source) => {
                    self.phase = Phase::ended();
                    return Err(Error::KernelFault {
                        device: self.ctx.index(),
                        kernel: PERSISTENT_KERNEL,
                        source,
                    });
                }
            }
        }
        match &self.phase {
            Phase::Ended { counters, .. } => Ok(counters.clone()),
            Phase::Running => Ok(Vec::new()),
        }
    }

    fn read_counters(&self) -> Result<Vec<PollerCounters>> {
        let skip = STATE_COUNTERS_OFFSET / 8;
        let mut words = vec![0u64; skip + self.pollers as usize * COUNTERS_PER_POLLER];
        self.resources().state.read_u64s(&mut words)?;
        Ok(words[skip..]
            .chunks_exact(COUNTERS_PER_POLLER)
            .map(|c| PollerCounters {
                polls: c[0],
                served: c[1],
                torn: c[2],
                lost_claims: c[3],
            })
            .collect())
    }

    fn read_nic_counters(&self) -> Result<Option<DevicePostCounters>> {
        let Some((block, _)) = &self.resources().nic else {
            return Ok(None);
        };
        let mut words = vec![0u64; COUNTERS_OFFSET / 8 + COUNTERS];
        block.read_u64s(&mut words)?;
        Ok(Some(DevicePostCounters::from_words(
            &words[COUNTERS_OFFSET / 8..],
        )))
    }
}

impl MailboxDevice for PersistentKernel {
    fn region(&self) -> &SharedRegion {
        &self.resources().memory
    }

    fn layout(&self) -> Layout {
        self.layout
    }

    fn topology(&self) -> Topology {
        Topology::GpuPersistent
    }

    fn stop(&mut self) {
        PersistentKernel::stop(self)
    }

    fn wait(&mut self, deadline: Instant) -> Result<Vec<PollerCounters>> {
        PersistentKernel::wait(self, deadline)
    }
}

impl Drop for PersistentKernel {
    fn drop(&mut self) {
        if !self.is_running() {
            return;
        }
        self.stop();
        if let Err(Error::KernelDidNotStop { .. }) = self.wait(Instant::now() + DROP_STOP_TIMEOUT) {
            // Freeing (or unloading) under a running kernel is worse than a leak.
            tracing::error!(
                "{PERSISTENT_KERNEL} on GPU {} did not stop within {:?}; leaking its buffers, \
                 module and stream",
                self.ctx.index(),
                DROP_STOP_TIMEOUT
            );
            std::mem::forget(self.resources.take());
        }
    }
}

//! The `gpu-direct` kernel on a GPU (`device/direct.cu`): launched once, one thread block
//! per link, it polls the links' receive CQs in GPU-mapped host memory and posts the
//! answers itself; the host only reads its counters (mapped memory) and writes the stop
//! sentinel ([`crate::queues::links::LinkSet::write_stop`]).
//!
//! Typed states: [`DirectKernel::start`] returns a running kernel, [`DirectKernel::wait`]
//! ends it (after the sentinel); dropping a running one writes the sentinel itself and
//! waits, and leaks its memory rather than free it under a kernel that did not stop.
//! [`DirectKernel::start_on`] launches the same kernel on queues described link by link
//! (a ConnectX's, whose buffers the NIC provider allocated), with [`KernelLinks`] saying
//! where the stop sentinel goes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys;

use super::context::GpuContext;
use super::decoder::{DeviceDecoders, ScratchPlacement};
use super::memory::{device_address_of, DeviceBuffer};
use super::module::{Kernel, Module, Stream};
use super::nvrtc::DIRECT;
use super::GpuOptions;
use crate::abi::{self, DirectParams, LinkDesc};
use crate::decode::Decoder;
use crate::queues::layout::SoftNicConfig;
use crate::queues::links::LinkSet;
use crate::shm::SharedRegion;
use crate::wire::HEADER_LEN;
use crate::{Error, Result};

/// Kernel entry point in `device/direct.cu`.
pub const DIRECT_KERNEL: &str = <DirectParams as crate::abi::KernelParams>::KERNEL;
/// Bytes of a warp's response staging (`QD_RESP_BYTES`).
const RESP_STAGE_BYTES: u32 = 256;
/// Most poller warps per link (`QD_MAX_WARPS`: the decoders' register budget).
pub const MAX_WARPS_PER_LINK: u32 = 8;
/// Shared memory a block may use without opting in.
const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;
/// How long `Drop` waits for the kernel after the sentinel.
const DROP_STOP_TIMEOUT: Duration = Duration::from_secs(3);

/// The queues a running kernel polls, as its owner knows them: where the stop sentinel
/// goes. A kernel that does not stop keeps (leaks) them, with everything they keep alive.
pub trait KernelLinks: Send + Sync {
    /// Writes the stop sentinel into every receive CQE the kernel may poll.
    fn write_stop(&self) -> Result<()>;
}

/// The soft NIC's links: a [`LinkSet`] in one mapped region.
struct SoftLinks {
    set: LinkSet,
    region: SharedRegion,
}

impl KernelLinks for SoftLinks {
    fn write_stop(&self) -> Result<()> {
        self.set.write_stop(&self.region)
    }
}

/// A running `gpu-direct` kernel.
pub struct DirectKernel {
    // Declared in drop order: what the kernel uses goes before the context.
    stream: Option<Stream>,
    module: Option<Module>,
    descs: Option<DeviceBuffer>,
    handoff: Option<DeviceBuffer>,
    decoders: Option<DeviceDecoders>,
    /// The queues (keeps the memory alive while the kernel may touch it).
    links: Option<Arc<dyn KernelLinks>>,
    nlinks: u32,
    ctx: Arc<GpuContext>,
    running: bool,
}

/// Chunks of a receive buffer a poll should read with the CQE so that the largest decoder
/// request arrives in that one read (0 when every request fits the CQE's 32 bytes).
pub fn poll_chunks_for(decoders: &[Arc<Decoder>], at_least: u32) -> u32 {
    let largest = decoders
        .iter()
        .map(|d| HEADER_LEN + d.payload_len())
        .max()
        .unwrap_or(0);
    let needed = if largest <= crate::queues::direct::CQE_INLINE_BYTES {
        0
    } else {
        largest.div_ceil(16) as u32
    };
    needed.max(at_least).min(28)
}

impl DirectKernel {
    /// Compiles (NVRTC, cached) and launches the kernel over the links of `set` in
    /// `region` (GPU-mapped pinned memory, initialised by [`LinkSet::init`]), with
    /// `params` (its link table is filled in here) and `decoders` uploaded.
    pub fn start(
        options: &GpuOptions,
        set: &LinkSet,
        region: &SharedRegion,
        queues: &SoftNicConfig,
        params: DirectParams,
        decoders: &[Arc<Decoder>],
    ) -> Result<DirectKernel> {
        let ctx = GpuContext::open(options.device)?;
        let base = device_address_of(&ctx, region.host_addr(0), "the gpu-direct queues")?;
        let descs: Vec<LinkDesc> = (0..set.links)
            .map(|i| set.desc(i, base, queues.doorbell, queues.signal_every))
            .collect();
        let links = Arc::new(SoftLinks {
            set: *set,
            region: region.clone(),
        });
        Self::start_on(options, &descs, links, params, decoders)
    }

    /// Compiles (NVRTC, cached) and launches the kernel over the links `descs` describes
    /// (device addresses; every link with the same doorbell mode), whose stop sentinel
    /// `links` writes; `params` as in [`DirectKernel::start`].
    pub fn start_on(
        options: &GpuOptions,
        descs: &[LinkDesc],
        links: Arc<dyn KernelLinks>,
        mut params: DirectParams,
        decoders: &[Arc<Decoder>],
    ) -> Result<DirectKernel> {
        let doorbell = check_links(descs, &params)?;
        let ctx = GpuContext::open(options.device)?;
        let mut prepared = Prepared::build(&ctx, options, descs, doorbell, &mut params, decoders)?;
        prepared.shared = reserve_shared(&ctx, options, &prepared, params.warps_per_link)?;
        Self::launch(&ctx, options, links, prepared, &params)
    }

    /// Launches the prepared kernel once everything its parameters point at is written,
    /// and checks that it did not exit at once.
    fn launch(
        ctx: &Arc<GpuContext>,
        options: &GpuOptions,
        links: Arc<dyn KernelLinks>,
        prepared: Prepared,
        params: &DirectParams,
    ) -> Result<DirectKernel> {
        let Prepared {
            module,
            kernel,
            descs,
            handoff,
            decoders,
            nlinks,
            blocks,
            shared,
            ..
        } = prepared;
        let stream = Stream::new(ctx)?;
        // Every copy and memset above (the NULL stream's) is done before the kernel, which
        // runs on a non-blocking stream, reads what they wrote.
        ctx.bind()?;
        cudarc::driver::result::ctx::synchronize()
            .map_err(|source| ctx.error("cuCtxSynchronize", source))?;
        let mut running = DirectKernel {
            stream: None,
            module: None,
            descs: None,
            handoff: None,
            decoders: None,
            links: Some(links),
            nlinks,
            ctx: Arc::clone(ctx),
            running: false,
        };
        let warps = params.warps_per_link;
        // SAFETY: the addresses in `params` are of `descs`, the decoders' buffers and the
        // links' queues, which `running` owns (or keeps alive) from here on and frees only
        // after the kernel stopped (or leaks, see Drop).
        unsafe { kernel.launch(ctx, &stream, blocks, warps * 32, shared, params) }?;
        running.stream = Some(stream);
        running.module = Some(module);
        running.descs = Some(descs);
        running.handoff = Some(handoff);
        running.decoders = decoders;
        running.running = true;
        // A kernel that cannot run (launch resources, a fault) shows up at once.
        std::thread::sleep(Duration::from_millis(1));
        match running.query() {
            Ok(false) => Ok(running),
            Ok(true) => {
                running.running = false;
                Err(Error::GpuUnavailable {
                    detail: format!(
                        "{DIRECT_KERNEL} on GPU {} exited right after its launch",
                        options.device
                    ),
                })
            }
            Err(e) => {
                running.running = false;
                Err(e)
            }
        }
    }

    pub fn device_index(&self) -> usize {
        self.ctx.index()
    }

    /// The copy of each link's poster counters the poster keeps in device memory (read
    /// after the kernel stopped; a cross-check of the ones in mapped host memory).
    pub fn poster_counters(&self) -> Result<Vec<Vec<u64>>> {
        let Some(h) = &self.handoff else {
            return Ok(Vec::new());
        };
        let per_link =
            (abi::HANDOFF_HEADER_BYTES + abi::HANDOFF_SLOTS * abi::HANDOFF_SLOT_BYTES) as usize / 8;
        let mut words = vec![0u64; per_link * self.nlinks as usize];
        h.read_u64s(&mut words)?;
        Ok((0..self.nlinks as usize)
            .map(|i| {
                words[i * per_link + 8..i * per_link + 8 + abi::WARP_COUNTERS as usize].to_vec()
            })
            .collect())
    }

    /// True while the kernel has not been seen to finish.
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// Whether the kernel has finished (`Err`: it faulted).
    fn query(&self) -> Result<bool> {
        let Some(stream) = &self.stream else {
            return Ok(true);
        };
        self.ctx.bind()?;
        stream.query().map_err(|source| Error::KernelFault {
            device: self.ctx.index(),
            kernel: DIRECT_KERNEL,
            source,
        })
    }

    /// Waits until the kernel finished (the host wrote the stop sentinel), at most until
    /// `deadline`; `KernelDidNotStop` names it if it is still running then.
    pub fn wait(&mut self, deadline: Instant) -> Result<()> {
        let start = Instant::now();
        while self.running {
            match self.query() {
                Ok(true) => self.running = false,
                Ok(false) if Instant::now() >= deadline => {
                    return Err(Error::KernelDidNotStop {
                        device: self.ctx.index(),
                        kernel: DIRECT_KERNEL,
                        waited_ms: start.elapsed().as_millis() as u64,
                    })
                }
                // Off the hot path: the host is stopping.
                Ok(false) => std::thread::sleep(Duration::from_micros(100)),
                Err(e) => {
                    self.running = false;
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

impl Drop for DirectKernel {
    fn drop(&mut self) {
        if !self.running {
            return;
        }
        if let Some(links) = &self.links {
            let _ = links.write_stop();
        }
        if let Err(Error::KernelDidNotStop { .. }) = self.wait(Instant::now() + DROP_STOP_TIMEOUT) {
            // Freeing (or unloading) under a running kernel is worse than a leak.
            tracing::error!(
                "{DIRECT_KERNEL} on GPU {} did not stop within {:?}; leaking its buffers, module \
                 and stream",
                self.ctx.index(),
                DROP_STOP_TIMEOUT
            );
            std::mem::forget(self.links.take());
            std::mem::forget(self.descs.take());
            std::mem::forget(self.handoff.take());
            std::mem::forget(self.decoders.take());
            std::mem::forget(self.module.take());
            std::mem::forget(self.stream.take());
        }
    }
}

/// The `pollers` setting's error.
fn pollers_error(detail: String) -> Error {
    Error::InvalidSetting {
        key: "pollers",
        detail,
    }
}

/// Checks the poller warps per link and that `descs` matches `params`' links, all with
/// one doorbell mode; returns that mode.
fn check_links(descs: &[LinkDesc], params: &DirectParams) -> Result<u32> {
    let warps = params.warps_per_link;
    if warps == 0
        || warps > MAX_WARPS_PER_LINK
        || params.pollers_per_slot == 0
        || warps % params.pollers_per_slot != 0
    {
        return Err(pollers_error(format!(
            "gpu-direct runs 1..={MAX_WARPS_PER_LINK} poller warps per link in groups that \
             divide them; got {warps} warps, {} per slot",
            params.pollers_per_slot
        )));
    }
    let nlinks = descs.len() as u32;
    let doorbell = descs
        .first()
        .map_or(abi::DB_MODE_CPU_ASSISTED, |d| d.doorbell);
    if nlinks == 0 || nlinks != params.nlinks || descs.iter().any(|d| d.doorbell != doorbell) {
        return Err(Error::InvalidSetting {
            key: "links",
            detail: format!(
                "{nlinks} link descriptions for {} links, all with one doorbell mode",
                params.nlinks
            ),
        });
    }
    Ok(doorbell)
}

/// The compiled kernel and the device memory it reads, before its launch.
struct Prepared {
    module: Module,
    kernel: Kernel<DirectParams>,
    /// The link table.
    descs: DeviceBuffer,
    /// The rings pollers hand answers to their link's poster through.
    handoff: DeviceBuffer,
    decoders: Option<DeviceDecoders>,
    nlinks: u32,
    /// Bytes of one link's receive slot (the largest).
    rx_slot_bytes: u32,
    blocks: u32,
    /// Dynamic shared memory per block.
    shared: u32,
}

impl Prepared {
    /// Compiles the kernel, uploads the link table, the handoff rings and the decoders,
    /// and fills in `params`' addresses.
    fn build(
        ctx: &Arc<GpuContext>,
        options: &GpuOptions,
        descs: &[LinkDesc],
        doorbell: u32,
        params: &mut DirectParams,
        decoders: &[Arc<Decoder>],
    ) -> Result<Prepared> {
        let nlinks = descs.len() as u32;
        let warps = params.warps_per_link;
        let rx_slot_bytes = descs.iter().map(|d| d.rx_slot_bytes).max().unwrap_or(0);
        let module = Module::compile_and_load(ctx, &DIRECT)?;
        let kernel = module.kernel::<DirectParams>()?;
        let mut words = Vec::new();
        for d in descs {
            words.extend(d.to_u64_words());
        }
        let descs = DeviceBuffer::zeroed(ctx, words.len() * 8)?;
        descs.write_u64s(&words)?;
        params.links = descs.device_ptr();
        // regular / blueflame: each link's poster block, and the ring its pollers hand
        // answers to it through.
        let posters = doorbell != abi::DB_MODE_CPU_ASSISTED;
        let per_link =
            (abi::HANDOFF_HEADER_BYTES + abi::HANDOFF_SLOTS * abi::HANDOFF_SLOT_BYTES) as usize;
        let handoff = DeviceBuffer::zeroed(ctx, per_link * nlinks as usize)?;
        params.handoff = if posters { handoff.device_ptr() } else { 0 };
        let blocks = nlinks * if posters { 2 } else { 1 };
        params.poll_chunks = poll_chunks_for(decoders, params.poll_chunks);
        let mut decoders = DeviceDecoders::upload(ctx, decoders, options)?;
        let staging = warps * (rx_slot_bytes + RESP_STAGE_BYTES);
        // The poster's block stages four answers of 256 B in the same memory.
        let mut shared = staging.max(4 * RESP_STAGE_BYTES);
        if let Some(d) = decoders.as_mut() {
            shared += d.place(
                ctx,
                ScratchPlacement::Auto,
                staging,
                warps,
                nlinks * warps,
                true,
            )?;
            d.install(&module)?;
        } else {
            super::decoder::install_none(&module)?;
        }
        Ok(Prepared {
            module,
            kernel,
            descs,
            handoff,
            decoders,
            nlinks,
            rx_slot_bytes,
            blocks,
            shared,
        })
    }
}

/// The dynamic shared memory each block gets: at least what `prepared` needs, more to
/// keep blocks on SMs of their own; opts the kernel in above the default limit.
fn reserve_shared(
    ctx: &GpuContext,
    options: &GpuOptions,
    prepared: &Prepared,
    warps: u32,
) -> Result<u32> {
    let mut shared = prepared.shared;
    // One block per SM: a system fence waits for its SM's outstanding host reads, so a
    // poster must not share its SM with pollers (nor pollers of two links share one).
    // Asking for more than half an SM's shared memory keeps any two blocks apart.
    let sms = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let per_sm = ctx.attribute(
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
    )?;
    if i64::from(prepared.blocks) <= i64::from(sms) && per_sm > 0 {
        shared = shared.max(per_sm as u32 / 2 + 1024);
    }
    if shared > DEFAULT_SHARED_LIMIT {
        let max = ctx.attribute(
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?;
        if i64::from(shared) > i64::from(max) {
            return Err(pollers_error(format!(
                "{warps} warps x {} B of staging need {shared} B of shared memory per block; \
                 GPU {} allows {max}",
                prepared.rx_slot_bytes + RESP_STAGE_BYTES,
                options.device
            )));
        }
        prepared
            .kernel
            .function()
            .allow_dynamic_shared(ctx, shared)?;
    }
    Ok(shared)
}

const _: () = assert!(abi::MAX_WARPS_PER_LINK == MAX_WARPS_PER_LINK);

//! The running persistent kernel (`gpu-persistent`): launched once on its own stream, it
//! spin-polls the request ring in mapped host memory until the stop sentinel.

use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys;

use super::context::GpuContext;
use super::memory::{DeviceBuffer, MappedHostBuffer};
use super::module::{Module, Stream};
use super::nvrtc::FORWARD;
use super::GpuOptions;
use crate::backend::Topology;
use crate::mailbox::layout::{COUNTERS_PER_POLLER, STATE_COUNTERS_OFFSET};
use crate::mailbox::{protocol, Layout, MailboxDevice, PollerCounters, Region, RxCompletion};
use crate::{Error, Result};

/// Kernel entry point in `device/forward.cu`.
pub const PERSISTENT_KERNEL: &str = "qfwd_persistent";

/// Shared memory a block may use without opting in.
const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;

/// How long `Drop` waits for the kernel after the sentinel before giving up on it.
const DROP_STOP_TIMEOUT: Duration = Duration::from_secs(3);

/// A persistent kernel serving a mailbox. Stop it with [`PersistentKernel::stop`] and
/// [`PersistentKernel::wait`] (or through [`crate::mailbox::MailboxBackend::shutdown`]);
/// dropping it does both, and if the kernel does not stop, leaks the memory it uses rather
/// than free it under a running kernel.
pub struct PersistentKernel {
    // Declared in drop order: what the kernel uses goes before the context.
    stream: Option<Stream>,
    module: Option<Module>,
    state: Option<DeviceBuffer>,
    memory: Option<MappedHostBuffer>,
    ctx: Arc<GpuContext>,
    layout: Layout,
    pollers: u32,
    running: bool,
    counters: Vec<PollerCounters>,
}

impl PersistentKernel {
    /// Compiles (NVRTC, cached) and launches the kernel over a fresh zeroed mailbox.
    pub fn start(options: &GpuOptions) -> Result<PersistentKernel> {
        options.validate()?;
        let layout = options.layout()?;
        let ctx = GpuContext::open(options.device)?;
        let maps =
            ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)?;
        let uva = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)?;
        if maps == 0 || uva == 0 {
            return Err(Error::GpuUnavailable {
                detail: format!(
                    "GPU {} cannot map host memory (needed by gpu-persistent)",
                    options.device
                ),
            });
        }
        let module = Module::compile_and_load(&ctx, &FORWARD)?;
        let function = module.function(PERSISTENT_KERNEL)?;
        let memory = MappedHostBuffer::new(&ctx, layout.total_bytes())?;
        let pollers = options.pollers;
        let state = DeviceBuffer::zeroed(
            &ctx,
            STATE_COUNTERS_OFFSET + pollers as usize * COUNTERS_PER_POLLER * 8,
        )?;
        let stream = Stream::new(&ctx)?;

        let warps_per_block = match options.warps_per_block {
            0 => pollers,
            w => w.min(pollers),
        };
        let blocks = pollers.div_ceil(warps_per_block);
        let shared = warps_per_block * (layout.req_slot_bytes() + layout.resp_slot_bytes()) as u32;
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
            function.allow_dynamic_shared(&ctx, shared)?;
        }

        let base = memory.device_ptr();
        let mut req_ring = base + layout.req_ring_offset() as u64;
        let mut resp_ring = base + layout.resp_ring_offset() as u64;
        let mut control = base + layout.control_offset() as u64;
        let mut state_ptr = state.device_ptr();
        let mut slots = layout.slots() as u32;
        let mut req_slot_bytes = layout.req_slot_bytes() as u32;
        let mut resp_slot_bytes = layout.resp_slot_bytes() as u32;
        let mut rx_inline = u32::from(layout.rx() == RxCompletion::Inline);
        let mut poll_chunks = options.poll_chunks;
        let mut pollers_param = pollers;
        let mut pollers_per_slot = options.pollers_per_slot;
        // About one PCIe read round trip spread over a slot's pollers (DESIGN §5: ~1.7 µs).
        let mut stagger_ns = 1700 / pollers_per_slot;
        let mut params: [*mut c_void; 12] = [
            &mut req_ring as *mut u64 as *mut c_void,
            &mut resp_ring as *mut u64 as *mut c_void,
            &mut control as *mut u64 as *mut c_void,
            &mut state_ptr as *mut u64 as *mut c_void,
            &mut slots as *mut u32 as *mut c_void,
            &mut req_slot_bytes as *mut u32 as *mut c_void,
            &mut resp_slot_bytes as *mut u32 as *mut c_void,
            &mut rx_inline as *mut u32 as *mut c_void,
            &mut poll_chunks as *mut u32 as *mut c_void,
            &mut pollers_param as *mut u32 as *mut c_void,
            &mut pollers_per_slot as *mut u32 as *mut c_void,
            &mut stagger_ns as *mut u32 as *mut c_void,
        ];
        let mut kernel = PersistentKernel {
            stream: None,
            module: None,
            state: None,
            memory: None,
            ctx: Arc::clone(&ctx),
            layout,
            pollers,
            running: false,
            counters: Vec::new(),
        };
        // SAFETY: the 12 params match `qfwd_persistent(u64 x4, u32 x8)` in order and size;
        // the addresses are of `memory` and `state`, which `kernel` owns from here on and
        // frees only after the kernel stopped (or leaks, see Drop).
        unsafe {
            function.launch(
                &ctx,
                &stream,
                blocks,
                warps_per_block * 32,
                shared,
                &mut params,
            )
        }?;
        kernel.stream = Some(stream);
        kernel.module = Some(module);
        kernel.state = Some(state);
        kernel.memory = Some(memory);
        kernel.running = true;
        // A kernel that cannot run (bad launch resources, a fault) shows up at once.
        std::thread::sleep(Duration::from_millis(1));
        match kernel.stream().query() {
            Ok(false) => Ok(kernel),
            Ok(true) => {
                kernel.running = false;
                Err(Error::GpuUnavailable {
                    detail: format!(
                        "{PERSISTENT_KERNEL} on GPU {} exited right after its launch",
                        options.device
                    ),
                })
            }
            Err(source) => {
                kernel.running = false;
                Err(Error::KernelFault {
                    device: options.device,
                    kernel: PERSISTENT_KERNEL,
                    source,
                })
            }
        }
    }

    fn stream(&self) -> &Stream {
        self.stream
            .as_ref()
            .expect("a started kernel has its stream")
    }

    fn memory(&self) -> &MappedHostBuffer {
        self.memory
            .as_ref()
            .expect("a started kernel has its memory")
    }

    pub fn device_index(&self) -> usize {
        self.ctx.index()
    }

    pub fn pollers(&self) -> u32 {
        self.pollers
    }

    /// True while the kernel has not been seen to finish.
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// Writes the stop sentinel into every request slot (where the pollers already look)
    /// and releases stalls. Returns at once; [`PersistentKernel::wait`] for the end.
    pub fn stop(&mut self) {
        if let Some(memory) = &self.memory {
            let region = memory.region();
            protocol::write_stop(region, &self.layout);
            protocol::release_stalls(region, &self.layout);
        }
    }

    /// Waits until the kernel finished, at most until `deadline`; returns each poller's
    /// counters. `KernelDidNotStop` names the kernel if it is still running then.
    pub fn wait(&mut self, deadline: Instant) -> Result<Vec<PollerCounters>> {
        let start = Instant::now();
        while self.running {
            self.ctx.bind()?;
            match self.stream().query() {
                Ok(true) => {
                    self.running = false;
                    self.counters = self.read_counters()?;
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
                    self.running = false;
                    return Err(Error::KernelFault {
                        device: self.ctx.index(),
                        kernel: PERSISTENT_KERNEL,
                        source,
                    });
                }
            }
        }
        Ok(self.counters.clone())
    }

    fn read_counters(&self) -> Result<Vec<PollerCounters>> {
        let Some(state) = &self.state else {
            return Ok(Vec::new());
        };
        let skip = STATE_COUNTERS_OFFSET / 8;
        let mut words = vec![0u64; skip + self.pollers as usize * COUNTERS_PER_POLLER];
        state.read_u64s(&mut words)?;
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
}

impl MailboxDevice for PersistentKernel {
    fn region(&self) -> Region<'_> {
        self.memory().region()
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
        if !self.running {
            return;
        }
        self.stop();
        if let Err(Error::KernelDidNotStop { .. }) = self.wait(Instant::now() + DROP_STOP_TIMEOUT) {
            // Freeing (or unloading) under a running kernel is worse than a leak.
            eprintln!(
                "qfwd: {PERSISTENT_KERNEL} on GPU {} did not stop within {:?}; leaking its \
                 buffers, module and stream",
                self.ctx.index(),
                DROP_STOP_TIMEOUT
            );
            std::mem::forget(self.memory.take());
            std::mem::forget(self.state.take());
            std::mem::forget(self.module.take());
            std::mem::forget(self.stream.take());
        }
    }
}

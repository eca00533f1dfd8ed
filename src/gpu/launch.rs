//! The baselines to beat (docs/architecture.md, "Topologies"): `gpu-launch`, one kernel
//! launch per request, and `gpu-graph`, one CUDA graph replay per request.
//!
//! Same slot layout and handler code as `gpu-persistent`: the request is written into an
//! inline slot of mapped host memory, a one-warp kernel (`qfwd_serve_once`) is launched
//! (or the graph that captured that launch for this slot is replayed) on a stream, an
//! event is recorded after it, and the host learns of completion from the event, as a
//! stream synchronization would tell it, then reads the tagged response. Completions come
//! in submission order (one stream).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::context::GpuContext;
use super::decoder::{DeviceDecoders, ScratchPlacement};
use super::memory::MappedHostBuffer;
use super::module::{Event, GraphExec, Kernel, Module, Stream};
use super::nvrtc::FORWARD;
use super::GpuOptions;
use crate::abi::ServeOnceParams;
use crate::backend::{Backend, Completion, Topology};
use crate::decode::Decoder;
use crate::handler::Handler;
use crate::mailbox::layout::device_code;
use crate::mailbox::ring::SlotRing;
use crate::mailbox::{protocol, Layout, RxCompletion};
use crate::shm::SharedRegion;
use crate::wire::status;
use crate::{Error, Result};

/// Kernel entry point in `device/forward.cu`.
pub const SERVE_ONCE_KERNEL: &str = <ServeOnceParams as crate::abi::KernelParams>::KERNEL;

/// How long `Drop` waits for launched work before giving up on it.
const DROP_IDLE_TIMEOUT: Duration = Duration::from_secs(12);

/// Launch per request, or graph replay per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchMode {
    Kernel,
    Graph,
}

/// The `gpu-launch` and `gpu-graph` backends.
pub struct LaunchBackend {
    // Declared in drop order: what the kernels use goes before the memory and context.
    graphs: Vec<GraphExec>,
    events: Vec<Event>,
    stream: Option<Stream>,
    kernel: Kernel<ServeOnceParams>,
    module: Option<Module>,
    /// The slots (mapped pinned host memory, owned by the region), and their device address.
    memory: SharedRegion,
    device_base: u64,
    /// The decoder models and the warp's state the kernel reads.
    decoders: Option<DeviceDecoders>,
    ctx: Arc<GpuContext>,
    mode: LaunchMode,
    /// Dynamic shared memory per launch: request and response staging, decoder state.
    shared: u32,
    layout: Layout,
    poll_chunks: u32,
    ring: SlotRing,
    result: Box<[u8]>,
    fault: Option<Error>,
}

impl LaunchBackend {
    /// Compiles the kernel, allocates the slots and (graph mode) captures one graph per
    /// slot. Uses `options.device`, `slots`, `slot_bytes`, `result_slot_bytes` and
    /// `poll_chunks`; requests are always in the inline layout.
    pub fn new(options: &GpuOptions, mode: LaunchMode) -> Result<LaunchBackend> {
        LaunchBackend::with_decoders(options, mode, &[], ScratchPlacement::Auto)
    }

    /// [`LaunchBackend::new`], serving `decoders` too (handler device codes 2 and 3; at most
    /// one model per decoder kind), their models uploaded once here; the one warp's `uf`
    /// state is placed as `placement` says (see [`super::decoder`]).
    pub fn with_decoders(
        options: &GpuOptions,
        mode: LaunchMode,
        decoders: &[Arc<Decoder>],
        placement: ScratchPlacement,
    ) -> Result<LaunchBackend> {
        options.validate()?;
        let layout = Layout::new(
            options.slots,
            options.slot_bytes,
            options.result_slot_bytes,
            RxCompletion::Inline,
        )?;
        let ctx = GpuContext::open(options.device)?;
        let module = Module::compile_and_load(&ctx, &FORWARD)?;
        let kernel = module.kernel::<ServeOnceParams>()?;
        let mut decoders = DeviceDecoders::upload(&ctx, decoders, options)?;
        let mut shared = (layout.req_slot_bytes() + layout.resp_slot_bytes()) as u32;
        if let Some(d) = decoders.as_mut() {
            shared += d.place(&ctx, placement, shared, 1, 1, false)?;
            d.install(&module)?;
        }
        if shared > 48 * 1024 {
            kernel.function().allow_dynamic_shared(&ctx, shared)?;
        }
        let memory = MappedHostBuffer::new(&ctx, layout.total_bytes())?;
        let device_base = memory.device_ptr();
        let memory = memory.into_region()?;
        let stream = Stream::new(&ctx)?;
        let events = (0..layout.slots())
            .map(|_| Event::new(&ctx))
            .collect::<Result<Vec<_>>>()?;
        let mut backend = LaunchBackend {
            graphs: Vec::new(),
            events,
            stream: Some(stream),
            kernel,
            module: Some(module),
            memory,
            device_base,
            decoders,
            ctx,
            mode,
            shared,
            layout,
            poll_chunks: options.poll_chunks,
            ring: SlotRing::new(layout.slots()),
            result: vec![0; layout.max_result_len()].into_boxed_slice(),
            fault: None,
        };
        if mode == LaunchMode::Graph {
            for slot in 0..layout.slots() {
                let graph = backend.capture(slot)?;
                backend.graphs.push(graph);
            }
        }
        Ok(backend)
    }

    fn stream(&self) -> &Stream {
        self.stream.as_ref().expect("stream lives until drop")
    }

    fn shared_bytes(&self) -> u32 {
        self.shared
    }

    /// The kernel's parameters for `slot`.
    fn slot_params(&self, slot: usize) -> ServeOnceParams {
        let base = self.device_base;
        ServeOnceParams {
            req: base + self.layout.req_offset(slot) as u64,
            resp: base + self.layout.resp_offset(slot) as u64,
            control: base + self.layout.control_offset() as u64,
            req_slot_bytes: self.layout.req_slot_bytes() as u32,
            resp_slot_bytes: self.layout.resp_slot_bytes() as u32,
            poll_chunks: self.poll_chunks,
            reserved: 0,
        }
    }

    fn capture(&self, slot: usize) -> Result<GraphExec> {
        let params = self.slot_params(slot);
        // SAFETY: the params address `self.memory`, which outlives the graphs (field
        // order, and Drop waits for the stream to go idle first).
        unsafe {
            GraphExec::capture_launch(
                &self.ctx,
                self.stream(),
                &self.kernel,
                32,
                self.shared_bytes(),
                &params,
            )
        }
    }

    fn launch(&self, slot: usize) -> Result<()> {
        match self.mode {
            LaunchMode::Kernel => {
                let params = self.slot_params(slot);
                // SAFETY: as in `capture`: the params address memory that outlives the
                // launch.
                unsafe {
                    self.kernel.launch(
                        &self.ctx,
                        self.stream(),
                        1,
                        32,
                        self.shared_bytes(),
                        &params,
                    )
                }?;
            }
            LaunchMode::Graph => {
                self.ctx.bind()?;
                self.graphs[slot]
                    .launch(self.stream())
                    .map_err(|source| Error::GpuGraph {
                        device: self.ctx.index(),
                        kernel: SERVE_ONCE_KERNEL,
                        op: "cuGraphLaunch",
                        source,
                    })?;
            }
        }
        self.events[slot]
            .record(self.stream())
            .map_err(|source| self.ctx.error("cuEventRecord", source))
    }

    /// Submits a request for a raw device handler code (see [`device_code`]).
    pub fn submit_code(
        &mut self,
        token: u32,
        code: u32,
        arg: &[u8],
    ) -> std::result::Result<(), i32> {
        if self.fault.is_some() {
            return Err(status::SHUTTING_DOWN);
        }
        if arg.len() > self.layout.max_arg_len() {
            return Err(status::OVERSIZED);
        }
        let Some((slot, tag)) = self.ring.reserve(token) else {
            return Err(status::OVERLOAD);
        };
        let region = &self.memory;
        protocol::write_request(region, &self.layout, slot, tag, code, arg);
        if let Err(e) = self.launch(slot) {
            self.ring.complete(slot);
            self.ring.advance();
            self.fault = Some(e);
            return Err(status::SHUTTING_DOWN);
        }
        Ok(())
    }

    /// Debug: a request whose kernel spins for `micros` (see [`device_code::STALL`]).
    pub fn submit_stall(&mut self, token: u32, micros: u32) -> std::result::Result<(), i32> {
        let release = self
            .memory
            .load_u32(self.layout.release_word_offset(), Ordering::Acquire);
        let mut arg = [0u8; 8];
        arg[..4].copy_from_slice(&micros.to_le_bytes());
        arg[4..].copy_from_slice(&release.wrapping_add(1).to_le_bytes());
        self.submit_code(token, device_code::STALL, &arg)
    }

    /// Ends every stall submitted so far (in progress or not started yet).
    pub fn release_stalls(&self) {
        protocol::release_stalls(&self.memory, &self.layout);
    }

    /// The driver error that put this backend out of service, if any.
    pub fn fault(&self) -> Option<&Error> {
        self.fault.as_ref()
    }

    pub fn mode(&self) -> LaunchMode {
        self.mode
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }
}

impl Backend for LaunchBackend {
    fn topology(&self) -> Topology {
        match self.mode {
            LaunchMode::Kernel => Topology::GpuLaunch,
            LaunchMode::Graph => Topology::GpuGraph,
        }
    }

    #[inline]
    fn submit(
        &mut self,
        token: u32,
        handler: &Handler,
        arg: &[u8],
    ) -> std::result::Result<(), i32> {
        self.submit_code(token, handler.device_code(), arg)
    }

    fn poll<F: FnMut(Completion<'_>)>(&mut self, mut done: F) -> usize {
        if self.ring.pending() == 0 {
            return 0;
        }
        let region = &self.memory;
        if self.ctx.bind().is_err() {
            return 0;
        }
        let mut reaped = 0;
        for i in 0..self.ring.span() {
            let (slot, entry) = self.ring.nth(i);
            if !entry.pending {
                continue;
            }
            let finished = match self.events[slot].query() {
                Ok(finished) => finished,
                Err(source) => {
                    // The context is broken: answer everything in flight, take no more.
                    if self.fault.is_none() {
                        self.fault = Some(Error::KernelFault {
                            device: self.ctx.index(),
                            kernel: SERVE_ONCE_KERNEL,
                            source,
                        });
                    }
                    self.ring.complete(slot);
                    reaped += 1;
                    done(Completion {
                        token: entry.token,
                        status: status::DECODER_TIMEOUT,
                        result: &[],
                        sent_by_device: false,
                    });
                    continue;
                }
            };
            if !finished {
                break; // one stream: later ones are not done either
            }
            let Some((st, len)) =
                protocol::read_response(region, &self.layout, slot, entry.tag, &mut self.result)
            else {
                break; // finished kernels' stores are visible; not reached in practice
            };
            self.ring.complete(slot);
            reaped += 1;
            let result = if st == status::OK {
                &self.result[..len]
            } else {
                &[][..]
            };
            done(Completion {
                token: entry.token,
                status: st,
                result,
                sent_by_device: false,
            });
        }
        self.ring.advance();
        reaped
    }

    fn in_flight(&self) -> usize {
        self.ring.pending()
    }

    fn max_arg_len(&self) -> usize {
        self.layout.max_arg_len()
    }
}

impl Drop for LaunchBackend {
    fn drop(&mut self) {
        self.release_stalls();
        let deadline = Instant::now() + DROP_IDLE_TIMEOUT;
        let idle = loop {
            if self.ctx.bind().is_err() {
                break false;
            }
            match self.stream().query() {
                Ok(true) => break true,
                Err(_) => break true, // failed work runs no more
                Ok(false) if Instant::now() >= deadline => break false,
                Ok(false) => std::thread::sleep(Duration::from_micros(100)),
            }
        };
        if !idle {
            tracing::warn!(
                "{SERVE_ONCE_KERNEL} work on GPU {} still running after {:?}; leaking \
                 its buffers",
                self.ctx.index(),
                DROP_IDLE_TIMEOUT
            );
            std::mem::forget(std::mem::take(&mut self.graphs));
            std::mem::forget(self.stream.take());
            std::mem::forget(self.module.take());
            // A clone forgotten keeps the region's memory allocated for good.
            std::mem::forget(self.memory.clone());
            std::mem::forget(self.decoders.take());
        }
    }
}

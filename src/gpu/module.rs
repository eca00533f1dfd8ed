//! RAII wrappers of the driver objects the kernels need: a loaded module and its
//! functions, a non-blocking stream, an event, an instantiated CUDA graph.
//!
//! Kernels take one parameter struct by value ([`crate::abi::KernelParams`]), and are
//! launched through a [`Kernel`] typed by it: the struct's C twin is generated from the
//! same Rust declaration, so argument lists kept in order by hand do not exist.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{result, sys, DriverError};

use super::context::GpuContext;
use super::nvrtc::{self, KernelSource};
use crate::abi::KernelParams;
use crate::{Error, Result};

/// A module compiled from one `device/*.cu` file and loaded into a context.
pub struct Module {
    ctx: Arc<GpuContext>,
    module: sys::CUmodule,
    file: &'static str,
}

// SAFETY: a CUmodule handle may be used from any thread of its context.
unsafe impl Send for Module {}

impl Module {
    /// Compiles `source` with NVRTC for the context's device (cached per process) and
    /// loads it.
    pub fn compile_and_load(ctx: &Arc<GpuContext>, source: &KernelSource) -> Result<Module> {
        let image = nvrtc::module_image(source, &ctx.arch())?;
        ctx.bind()?;
        // SAFETY: `image` is a CUBIN (or NUL-terminated PTX) produced by NVRTC, alive for
        // the call; the driver copies it.
        let module = unsafe { result::module::load_data(image.as_ptr() as *const c_void) }
            .map_err(|source_error| Error::GpuModuleLoad {
                device: ctx.index(),
                file: source.file,
                source: source_error,
            })?;
        Ok(Module {
            ctx: Arc::clone(ctx),
            module,
            file: source.file,
        })
    }

    /// The kernel that takes parameter struct `P` ([`KernelParams::KERNEL`]).
    pub fn kernel<P: KernelParams>(&self) -> Result<Kernel<P>> {
        Ok(Kernel {
            function: self.function(P::KERNEL)?,
            _params: PhantomData,
        })
    }

    /// A kernel of this module by its `extern "C"` name.
    pub fn function(&self, name: &'static str) -> Result<Function> {
        self.ctx.bind()?;
        // SAFETY: the module is loaded and stays loaded while `self` lives; the function
        // handle is only used by owners that also keep this module.
        let function =
            unsafe { result::module::get_function(self.module, nvrtc::kernel_name(name)) }
                .map_err(|source| Error::GpuKernelMissing {
                    device: self.ctx.index(),
                    kernel: name,
                    file: self.file,
                    source,
                })?;
        Ok(Function { function, name })
    }

    /// Copies `bytes` into the module's `__device__` / `__constant__` variable `name`
    /// (synchronous; before the kernels that read it are launched). The variable must be
    /// exactly `bytes.len()` long.
    pub fn write_global(&self, name: &'static str, bytes: &[u8]) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: the module is loaded; the name is a valid C string.
        let (ptr, size) =
            unsafe { result::module::get_global(self.module, nvrtc::kernel_name(name)) }.map_err(
                |source| Error::GpuKernelMissing {
                    device: self.ctx.index(),
                    kernel: name,
                    file: self.file,
                    source,
                },
            )?;
        if size != bytes.len() {
            return Err(Error::GpuUnavailable {
                detail: format!(
                    "{name} in {} is {size} bytes, the host wrote {}: device and host sources \
                     disagree",
                    self.file,
                    bytes.len()
                ),
            });
        }
        // SAFETY: `ptr` addresses `size` bytes of the module's memory (checked above);
        // `bytes` is readable.
        unsafe { result::memcpy_htod_sync(ptr, bytes) }
            .map_err(|source| self.ctx.error("cuMemcpyHtoD", source))
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: loaded in `compile_and_load`, unloaded once; owners stop their kernels
            // first. Errors cannot be reported from Drop.
            let _ = unsafe { result::module::unload(self.module) };
        }
    }
}

/// A kernel handle. Valid while the [`Module`] it came from is loaded; owners keep both.
#[derive(Clone, Copy)]
pub struct Function {
    function: sys::CUfunction,
    name: &'static str,
}

// SAFETY: a CUfunction handle may be used from any thread of its context.
unsafe impl Send for Function {}

impl Function {
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// One of this kernel's attributes.
    fn attribute(&self, ctx: &GpuContext, attr: sys::CUfunction_attribute) -> Result<i32> {
        ctx.bind()?;
        // SAFETY: a live function handle (owner keeps its module).
        unsafe { result::function::get_function_attribute(self.function, attr) }
            .map_err(|source| ctx.error("cuFuncGetAttribute", source))
    }

    /// The most threads a block of this kernel may have, given the registers it uses.
    pub fn max_threads_per_block(&self, ctx: &GpuContext) -> Result<u32> {
        let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK;
        Ok(self.attribute(ctx, attr)?.max(32) as u32)
    }

    /// How many blocks of `block` threads with `shared_bytes` of dynamic shared memory
    /// one multiprocessor holds at once.
    pub fn max_active_blocks_per_sm(
        &self,
        ctx: &GpuContext,
        block: u32,
        shared_bytes: u32,
    ) -> Result<u32> {
        ctx.bind()?;
        // SAFETY: a live function handle (owner keeps its module).
        let n = unsafe {
            result::occupancy::max_active_block_per_multiprocessor(
                self.function,
                block as i32,
                shared_bytes as usize,
            )
        }
        .map_err(|source| ctx.error("cuOccupancyMaxActiveBlocksPerMultiprocessor", source))?;
        Ok(n.max(0) as u32)
    }

    /// Registers each thread of this kernel uses.
    pub fn registers(&self, ctx: &GpuContext) -> Result<u32> {
        let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS;
        Ok(self.attribute(ctx, attr)?.max(0) as u32)
    }

    /// Allows `bytes` of dynamic shared memory per block (needed above 48 KiB).
    pub fn allow_dynamic_shared(&self, ctx: &GpuContext, bytes: u32) -> Result<()> {
        ctx.bind()?;
        // SAFETY: a live function handle (owner keeps its module).
        unsafe {
            result::function::set_function_attribute(
                self.function,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        }
        .map_err(|source| ctx.error("cuFuncSetAttribute", source))
    }

    /// Launches on `stream` with `params` (pointers to each argument value, which the
    /// driver copies before returning).
    ///
    /// # Safety
    ///
    /// `params` must match the kernel's parameter list in number, order and size, and every
    /// address passed in them must stay valid for as long as the kernel uses it.
    unsafe fn launch_raw(
        &self,
        ctx: &GpuContext,
        stream: &Stream,
        grid: u32,
        block: u32,
        shared_bytes: u32,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        ctx.bind()?;
        // SAFETY: forwarded from the caller's contract; function and stream are live.
        unsafe {
            result::launch_kernel(
                self.function,
                (grid, 1, 1),
                (block, 1, 1),
                shared_bytes,
                stream.raw(),
                params,
            )
        }
        .map_err(|source| Error::GpuLaunch {
            device: ctx.index(),
            kernel: self.name,
            source,
        })
    }
}

/// A kernel whose one parameter is `P`, passed by value; valid while the [`Module`] it came
/// from is loaded (owners keep both).
pub struct Kernel<P> {
    function: Function,
    _params: PhantomData<fn(P)>,
}

impl<P> Clone for Kernel<P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P> Copy for Kernel<P> {}

impl<P: KernelParams> Kernel<P> {
    /// The untyped handle (attributes, shared-memory limits).
    pub fn function(&self) -> &Function {
        &self.function
    }

    /// Launches `grid` blocks of `block` threads with `shared_bytes` of dynamic shared
    /// memory on `stream`; the driver copies `params` before returning.
    ///
    /// # Safety
    ///
    /// Every device address in `params` must stay valid (allocated, and holding what the
    /// kernel expects) for as long as the kernel runs: the caller keeps the memory alive
    /// until it has seen the kernel finish, or leaks it.
    pub unsafe fn launch(
        &self,
        ctx: &GpuContext,
        stream: &Stream,
        grid: u32,
        block: u32,
        shared_bytes: u32,
        params: &P,
    ) -> Result<()> {
        let mut value = *params;
        let mut args = [&mut value as *mut P as *mut c_void];
        // SAFETY: the kernel named `P::KERNEL` takes one `P` by value (its C twin, generated
        // from the same declaration, asserts the layout); the addresses in it are the
        // caller's contract.
        unsafe {
            self.function
                .launch_raw(ctx, stream, grid, block, shared_bytes, &mut args)
        }
    }
}

/// A non-blocking stream (no implicit synchronization with the legacy default stream, so a
/// never-ending kernel on it does not block other work).
pub struct Stream {
    ctx: Arc<GpuContext>,
    stream: sys::CUstream,
}

// SAFETY: a CUstream may be used from any thread of its context.
unsafe impl Send for Stream {}

impl Stream {
    pub fn new(ctx: &Arc<GpuContext>) -> Result<Stream> {
        ctx.bind()?;
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|source| ctx.error("cuStreamCreate", source))?;
        Ok(Stream {
            ctx: Arc::clone(ctx),
            stream,
        })
    }

    pub(crate) fn raw(&self) -> sys::CUstream {
        self.stream
    }

    /// Waits (yielding) until all work on the stream finished, at most `deadline`:
    /// `KernelTimeout` or `KernelFault`, naming `kernel`, otherwise.
    pub fn wait_finished(&self, kernel: &'static str, deadline: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            match self.query() {
                Ok(true) => return Ok(()),
                Ok(false) if start.elapsed() < deadline => std::thread::yield_now(),
                Ok(false) => {
                    return Err(Error::KernelTimeout {
                        device: self.ctx.index(),
                        kernel,
                        waited_ms: deadline.as_millis() as u64,
                    })
                }
                Err(source) => {
                    return Err(Error::KernelFault {
                        device: self.ctx.index(),
                        kernel,
                        source,
                    })
                }
            }
        }
    }

    /// `Ok(true)` when all work on the stream finished, `Ok(false)` while some runs, the
    /// error a kernel on it failed with otherwise.
    pub fn query(&self) -> std::result::Result<bool, DriverError> {
        // SAFETY: a live stream.
        match unsafe { sys::cuStreamQuery(self.stream) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => Err(DriverError(other)),
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: created in `new`, destroyed once. Errors cannot be reported from Drop.
            let _ = unsafe { result::stream::destroy(self.stream) };
        }
    }
}

/// An event without timing, to learn when the work before it on a stream finished.
pub struct Event {
    ctx: Arc<GpuContext>,
    event: sys::CUevent,
}

// SAFETY: a CUevent may be used from any thread of its context.
unsafe impl Send for Event {}

impl Event {
    pub fn new(ctx: &Arc<GpuContext>) -> Result<Event> {
        ctx.bind()?;
        let event = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(|source| ctx.error("cuEventCreate", source))?;
        Ok(Event {
            ctx: Arc::clone(ctx),
            event,
        })
    }

    pub fn record(&self, stream: &Stream) -> std::result::Result<(), DriverError> {
        // SAFETY: live event and stream of the same context.
        unsafe { result::event::record(self.event, stream.raw()) }
    }

    /// `Ok(true)` once the work before the last `record` finished.
    pub fn query(&self) -> std::result::Result<bool, DriverError> {
        // SAFETY: a live event.
        match unsafe { sys::cuEventQuery(self.event) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => Err(DriverError(other)),
        }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: created in `new`, destroyed once.
            let _ = unsafe { result::event::destroy(self.event) };
        }
    }
}

/// One kernel launch captured as a CUDA graph, instantiated for replay.
pub struct GraphExec {
    ctx: Arc<GpuContext>,
    exec: sys::CUgraphExec,
}

// SAFETY: a CUgraphExec may be launched from any thread of its context.
unsafe impl Send for GraphExec {}

impl GraphExec {
    /// Captures one launch of `kernel` (one block) with `params` on `stream` and
    /// instantiates it.
    ///
    /// # Safety
    ///
    /// As [`Kernel::launch`], for every replay of the graph: the addresses in `params`
    /// must stay valid as long as the graph may be launched.
    pub unsafe fn capture_launch<P: KernelParams>(
        ctx: &Arc<GpuContext>,
        stream: &Stream,
        kernel: &Kernel<P>,
        block: u32,
        shared_bytes: u32,
        params: &P,
    ) -> Result<GraphExec> {
        let graph_error = |op: &'static str, source: DriverError| Error::GpuGraph {
            device: ctx.index(),
            kernel: kernel.function().name(),
            op,
            source,
        };
        ctx.bind()?;
        // SAFETY: a live stream of this context, not capturing yet.
        unsafe {
            result::stream::begin_capture(
                stream.raw(),
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        }
        .map_err(|e| graph_error("cuStreamBeginCapture", e))?;
        // SAFETY: forwarded from the caller's contract. Captured, not run.
        let launched = unsafe { kernel.launch(ctx, stream, 1, block, shared_bytes, params) };
        // SAFETY: the stream is capturing (begun above); end it whatever the launch did.
        let graph = unsafe { result::stream::end_capture(stream.raw()) };
        launched?;
        let graph = graph.map_err(|e| graph_error("cuStreamEndCapture", e))?;
        // SAFETY: `graph` was just captured.
        let exec = unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) };
        // SAFETY: the template is not needed once instantiated (or failed to be).
        let _ = unsafe { result::graph::destroy(graph) };
        let exec = exec.map_err(|e| graph_error("cuGraphInstantiate", e))?;
        let exec = GraphExec {
            ctx: Arc::clone(ctx),
            exec,
        };
        // SAFETY: live exec and stream; uploads ahead so the first replay costs no more.
        unsafe { result::graph::upload(exec.exec, stream.raw()) }
            .map_err(|e| graph_error("cuGraphUpload", e))?;
        Ok(exec)
    }

    pub fn launch(&self, stream: &Stream) -> std::result::Result<(), DriverError> {
        // SAFETY: live exec and stream of the same context; the params' addresses are kept
        // valid by the owner (capture_launch's contract).
        unsafe { result::graph::launch(self.exec, stream.raw()) }
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: instantiated in `capture_launch`, destroyed once.
            let _ = unsafe { result::graph::exec_destroy(self.exec) };
        }
    }
}

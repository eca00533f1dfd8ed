//! Memory the kernels use: pinned host memory mapped into the GPU's address space (the
//! mailbox), and plain device memory (claim ticket, counters); for a ConnectX whose queues
//! the GPU serves itself, host memory someone else allocated (the NIC provider's queue
//! buffers, its UAR page) registered for the GPU ([`HostRegistrations`]), and device
//! memory a NIC writes directly through a dma-buf ([`NicWritableDeviceMemory`]).
//!
//! Not `CudaContext::alloc_pinned` (docs/architecture.md, "Mailbox rules"): that memory is
//! write-combined and unmapped. The kernels get raw `u64` device addresses, never a
//! `CudaSlice`: a kernel that never ends would make a `CudaSlice`'s drop wait forever.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::context::GpuContext;
use crate::shm::{ForeignMemory, SharedRegion};
use crate::{Error, Result};

/// Zeroed pinned host memory, mapped for the device (`CU_MEMHOSTALLOC_DEVICEMAP |
/// CU_MEMHOSTALLOC_PORTABLE`), freed on drop.
///
/// Dropping it while a kernel still uses it would let the kernel touch freed memory: the
/// owners ([`super::PersistentKernel`]) stop their kernel first, and leak the buffer if the
/// kernel does not stop.
pub struct MappedHostBuffer {
    ctx: Arc<GpuContext>,
    host: NonNull<u8>,
    device_ptr: u64,
    len: usize,
}

// SAFETY: the buffer owns its allocation; host access goes through `SharedRegion`, which
// only uses atomics and single 16-byte accesses, so sharing between threads is sound.
unsafe impl Send for MappedHostBuffer {}
// SAFETY: as above.
unsafe impl Sync for MappedHostBuffer {}

impl MappedHostBuffer {
    pub fn new(ctx: &Arc<GpuContext>, len: usize) -> Result<MappedHostBuffer> {
        let len = len.max(16);
        ctx.bind()?;
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: plain allocation in the current (bound) context; freed in Drop.
        let raw =
            unsafe { result::malloc_host(len, flags) }.map_err(|source| Error::GpuHostAlloc {
                device: ctx.index(),
                bytes: len,
                source,
            })?;
        let Some(host) = NonNull::new(raw as *mut u8) else {
            return Err(Error::GpuUnavailable {
                detail: "cuMemHostAlloc returned a null pointer".to_string(),
            });
        };
        let mut buffer = MappedHostBuffer {
            ctx: Arc::clone(ctx),
            host,
            device_ptr: 0,
            len,
        };
        // From here on `buffer`'s Drop frees the allocation on every error path.
        if host.as_ptr() as usize % 4096 != 0 {
            return Err(Error::GpuUnavailable {
                detail: format!("cuMemHostAlloc returned unaligned memory at {:p}", host),
            });
        }
        // SAFETY: `len` bytes at `host` were just allocated and nothing else uses them yet.
        unsafe { std::ptr::write_bytes(host.as_ptr(), 0, len) };
        let mut device_ptr: sys::CUdeviceptr = 0;
        // SAFETY: `host` was allocated with DEVICEMAP in this context; flags must be 0.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_ptr, raw, 0) }
            .result()
            .map_err(|source| ctx.error("cuMemHostGetDevicePointer", source))?;
        buffer.device_ptr = device_ptr;
        Ok(buffer)
    }

    /// The host view of the buffer, which owns it from now on: the memory is freed when the
    /// last clone of the region is dropped (so a holder that has not stopped yet never
    /// touches freed memory). Take [`MappedHostBuffer::device_ptr`] first.
    pub fn into_region(self) -> Result<SharedRegion> {
        let base = self.host;
        let len = self.len;
        // SAFETY: `len` bytes at `base`, page-aligned (checked by `new`), valid until the
        // buffer (the owner handed over) is dropped; the device accesses them only with
        // aligned volatile loads and stores of at most 16 bytes, the host only through
        // `SharedRegion`.
        unsafe { SharedRegion::from_raw_parts(base, len, Box::new(self)) }
    }

    /// The same memory as the device addresses it.
    pub fn device_ptr(&self) -> u64 {
        self.device_ptr
    }

    /// The host address of the buffer (page-aligned).
    pub fn host_ptr(&self) -> NonNull<u8> {
        self.host
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A soft NIC region ([`SharedRegion`]) in fresh zeroed pinned memory that GPU `device` can
/// address (for a kernel that rings the soft NIC's doorbells itself). The region owns the
/// buffer: it is freed when the last clone of the region is dropped, so holders (the NIC
/// thread, a kernel) keep it alive.
pub fn mapped_nic_region(device: usize, len: usize) -> Result<SharedRegion> {
    let ctx = GpuContext::open(device)?;
    MappedHostBuffer::new(&ctx, len)?.into_region()
}

/// The device address of host memory at `host` (pinned and mapped, e.g. by
/// [`mapped_nic_region`]); an error naming `what` when the driver does not know it.
pub fn device_address_of(ctx: &GpuContext, host: u64, what: &str) -> Result<u64> {
    ctx.bind()?;
    let mut device_ptr: sys::CUdeviceptr = 0;
    // SAFETY: a query; the driver checks that `host` lies in a mapped pinned allocation.
    unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_ptr, host as *mut c_void, 0) }
        .result()
        .map_err(|source| Error::GpuUnavailable {
            detail: format!(
                "{what} at {host:#x} is not pinned, GPU-mapped host memory \
                 (cuMemHostGetDevicePointer: {source}); allocate it with \
                 gpu::mapped_nic_region"
            ),
        })?;
    Ok(device_ptr)
}

impl Drop for MappedHostBuffer {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: allocated by cuMemHostAlloc in `new`, freed once; the owner made sure
            // no kernel uses it any more. Errors cannot be reported from Drop.
            let _ = unsafe { result::free_host(self.host.as_ptr() as *mut c_void) };
        }
    }
}

/// Zeroed device memory, freed on drop.
pub struct DeviceBuffer {
    ctx: Arc<GpuContext>,
    device_ptr: u64,
    len: usize,
}

// SAFETY: only a device address and a length; all access is through driver calls.
unsafe impl Send for DeviceBuffer {}
// SAFETY: as above.
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    pub fn zeroed(ctx: &Arc<GpuContext>, len: usize) -> Result<DeviceBuffer> {
        let len = len.max(16);
        ctx.bind()?;
        // SAFETY: plain allocation in the bound context; freed in Drop.
        let device_ptr =
            unsafe { result::malloc_sync(len) }.map_err(|source| Error::GpuDeviceAlloc {
                device: ctx.index(),
                bytes: len,
                source,
            })?;
        let buffer = DeviceBuffer {
            ctx: Arc::clone(ctx),
            device_ptr,
            len,
        };
        // SAFETY: `len` bytes at `device_ptr` were just allocated.
        unsafe { result::memset_d8_sync(device_ptr, 0, len) }
            .map_err(|source| ctx.error("cuMemsetD8", source))?;
        Ok(buffer)
    }

    pub fn device_ptr(&self) -> u64 {
        self.device_ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `words` to the start of the buffer (synchronous; off the hot path: a
    /// parameter block before a launch).
    pub fn write_u64s(&self, words: &[u64]) -> Result<()> {
        assert!(
            std::mem::size_of_val(words) <= self.len,
            "write past a device buffer"
        );
        self.ctx.bind()?;
        // SAFETY: the destination holds the words (checked); `words` is readable.
        unsafe { result::memcpy_htod_sync(self.device_ptr, words) }
            .map_err(|source| self.ctx.error("cuMemcpyHtoD", source))
    }

    /// Copies `bytes` to the buffer at byte `offset` (synchronous).
    pub fn write_bytes(&self, offset: usize, bytes: &[u8]) -> Result<()> {
        assert!(
            offset + bytes.len() <= self.len,
            "write past a device buffer"
        );
        if bytes.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: the destination range lies in the allocation (checked); `bytes` is
        // readable.
        unsafe { result::memcpy_htod_sync(self.device_ptr + offset as u64, bytes) }
            .map_err(|source| self.ctx.error("cuMemcpyHtoD", source))
    }

    /// Copies `out.len()` bytes from byte `offset` of the buffer to the host (synchronous).
    pub fn read_bytes(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        assert!(offset + out.len() <= self.len, "read past a device buffer");
        if out.is_empty() {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: `out` is writable and the source range lies in the allocation (checked).
        unsafe { result::memcpy_dtoh_sync(out, self.device_ptr + offset as u64) }
            .map_err(|source| self.ctx.error("cuMemcpyDtoH", source))
    }

    /// Copies the buffer's first `out.len()` u64 words to the host (synchronous; off the
    /// hot path: counters after a kernel stopped).
    pub fn read_u64s(&self, out: &mut [u64]) -> Result<()> {
        assert!(
            std::mem::size_of_val(out) <= self.len,
            "read past a device buffer"
        );
        self.ctx.bind()?;
        // SAFETY: `out` is writable and no larger than the allocation (checked).
        unsafe { result::memcpy_dtoh_sync(out, self.device_ptr) }
            .map_err(|source| self.ctx.error("cuMemcpyDtoH", source))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: allocated by cuMemAlloc in `zeroed`, freed once, no kernel uses it
            // any more (the owner's contract). Errors cannot be reported from Drop.
            let _ = unsafe { result::free_sync(self.device_ptr) };
        }
    }
}

/// What a host range registered for the GPU is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostMemoryKind {
    /// Ordinary memory someone else allocated (a NIC provider's queues).
    Ram,
    /// A device's MMIO page mapped into this process (a NIC's UAR and BlueFlame
    /// register): registered with `CU_MEMHOSTREGISTER_IOMEMORY`.
    Io,
}

/// A range of host memory a kernel must address, and what it is (for errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRange {
    pub addr: u64,
    pub len: usize,
    pub kind: HostMemoryKind,
    pub what: String,
}

/// The host's page size.
pub fn host_page_size() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// Whole pages covering `ranges`, with ranges that share or touch a page merged: the
/// driver registers a page at most once (`CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`), and
/// a NIC provider packs several doorbell records into one page. A RAM range and an IO range
/// on one page cannot be registered both ways: that is an error.
pub fn page_spans(ranges: &[HostRange], page: usize) -> Result<Vec<HostRange>> {
    let mut spans: Vec<HostRange> = ranges
        .iter()
        .filter(|r| r.len > 0)
        .map(|r| {
            let start = r.addr - r.addr % page as u64;
            let end = (r.addr + r.len as u64).next_multiple_of(page as u64);
            HostRange {
                addr: start,
                len: (end - start) as usize,
                kind: r.kind,
                what: r.what.clone(),
            }
        })
        .collect();
    spans.sort_by_key(|r| r.addr);
    let mut out: Vec<HostRange> = Vec::new();
    for r in spans {
        match out.last_mut() {
            Some(last) if r.addr <= last.addr + last.len as u64 => {
                if last.kind != r.kind {
                    return Err(Error::GpuUnavailable {
                        detail: format!(
                            "{} and {} share a page at {:#x} but one is device memory (MMIO) \
                             and the other is not: they cannot be mapped for the GPU together",
                            last.what, r.what, r.addr
                        ),
                    });
                }
                let end = (last.addr + last.len as u64).max(r.addr + r.len as u64);
                last.len = (end - last.addr) as usize;
                if !last.what.split(" + ").any(|w| w == r.what) {
                    last.what = format!("{} + {}", last.what, r.what);
                }
            }
            _ => out.push(r),
        }
    }
    Ok(out)
}

/// Host memory page-locked and mapped for the GPU with `cuMemHostRegister`, unregistered
/// on drop (the memory itself belongs to whoever allocated it).
pub struct HostRegistration {
    ctx: Arc<GpuContext>,
    host: u64,
    len: usize,
    device_ptr: u64,
}

// SAFETY: a host address, a device address and a length; the driver calls are
// thread-safe.
unsafe impl Send for HostRegistration {}
// SAFETY: as above.
unsafe impl Sync for HostRegistration {}

impl HostRegistration {
    /// Registers `range` (page-aligned: see [`page_spans`]) for GPU `ctx` and looks up its
    /// device address.
    ///
    /// # Safety
    /// `range` must be mapped in this process (RAM, or for [`HostMemoryKind::Io`] an MMIO
    /// mapping such as a NIC's UAR page) and stay mapped until the registration is dropped.
    pub unsafe fn new(ctx: &Arc<GpuContext>, range: &HostRange) -> Result<HostRegistration> {
        ctx.bind()?;
        let mut flags = sys::CU_MEMHOSTREGISTER_DEVICEMAP | sys::CU_MEMHOSTREGISTER_PORTABLE;
        if range.kind == HostMemoryKind::Io {
            flags |= sys::CU_MEMHOSTREGISTER_IOMEMORY;
        }
        let fail = |source| Error::GpuHostRegister {
            device: ctx.index(),
            what: range.what.clone(),
            host: range.addr,
            bytes: range.len,
            source,
        };
        // SAFETY: the caller guarantees the range is mapped until Drop unregisters it.
        unsafe { sys::cuMemHostRegister_v2(range.addr as *mut c_void, range.len, flags) }
            .result()
            .map_err(fail)?;
        let mut reg = HostRegistration {
            ctx: Arc::clone(ctx),
            host: range.addr,
            len: range.len,
            device_ptr: 0,
        };
        let mut device_ptr: sys::CUdeviceptr = 0;
        // SAFETY: the range was just registered with DEVICEMAP in this context.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_ptr, range.addr as *mut c_void, 0) }
            .result()
            .map_err(fail)?;
        reg.device_ptr = device_ptr;
        Ok(reg)
    }

    /// The device address of host address `addr` when `len` bytes from it are registered.
    pub fn device_addr(&self, addr: u64, len: usize) -> Option<u64> {
        let off = addr.checked_sub(self.host)?;
        (off + len as u64 <= self.len as u64).then_some(self.device_ptr + off)
    }
}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: registered in `new`, unregistered once; the owner stopped every kernel
            // that addressed it. Errors cannot be reported from Drop.
            let _ = unsafe { sys::cuMemHostUnregister(self.host as *mut c_void) };
        }
    }
}

/// Another library's memory mapped for one GPU (its ranges merged into page spans), and
/// the device address of any address within it. The memory's owner is kept until the
/// registrations are gone.
pub struct HostRegistrations {
    // Declared in drop order: unregister before the memory may go.
    regs: Vec<HostRegistration>,
    _memory: Arc<dyn ForeignMemory>,
}

impl HostRegistrations {
    /// Registers every range `memory` lists (merged with [`page_spans`]) for GPU `ctx`.
    pub fn map(ctx: &Arc<GpuContext>, memory: Arc<dyn ForeignMemory>) -> Result<HostRegistrations> {
        let ranges: Vec<HostRange> = memory
            .ranges()
            .into_iter()
            .map(|r| HostRange {
                addr: r.addr,
                len: r.len,
                kind: if r.mmio {
                    HostMemoryKind::Io
                } else {
                    HostMemoryKind::Ram
                },
                what: r.what.to_string(),
            })
            .collect();
        let spans = page_spans(&ranges, host_page_size())?;
        let mut regs = Vec::with_capacity(spans.len());
        for span in &spans {
            // SAFETY: `ForeignMemory` guarantees its ranges, rounded out to whole pages,
            // stay mapped while `memory` lives, and `memory` outlives `regs` (field order).
            regs.push(unsafe { HostRegistration::new(ctx, span) }?);
        }
        Ok(HostRegistrations {
            regs,
            _memory: memory,
        })
    }

    /// The device address of `len` bytes at host address `addr`, or an error naming `what`
    /// when they were not registered.
    pub fn device_addr(&self, addr: u64, len: usize, what: &str) -> Result<u64> {
        self.regs
            .iter()
            .find_map(|r| r.device_addr(addr, len))
            .ok_or_else(|| Error::GpuUnavailable {
                detail: format!("{what} at {addr:#x} ({len} bytes) is not mapped for the GPU"),
            })
    }

    /// Registered page spans.
    pub fn spans(&self) -> usize {
        self.regs.len()
    }
}

/// The granularity of GPU memory pages: dma-buf exports start and end on it.
pub const GPU_PAGE: usize = 64 * 1024;

/// Device memory a NIC writes directly (receive buffers in GPU memory): aligned to
/// [`GPU_PAGE`], with `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` set (as GPUDirect RDMA asks for
/// memory a third party writes), exportable as a dma-buf for `ibv_reg_dmabuf_mr`.
pub struct NicWritableDeviceMemory {
    buffer: DeviceBuffer,
    start: u64,
    len: usize,
}

impl NicWritableDeviceMemory {
    /// `len` bytes (rounded up to [`GPU_PAGE`]), zeroed.
    pub fn new(ctx: &Arc<GpuContext>, len: usize) -> Result<NicWritableDeviceMemory> {
        let len = len.max(1).next_multiple_of(GPU_PAGE);
        let buffer = DeviceBuffer::zeroed(ctx, len + GPU_PAGE)?;
        let start = buffer.device_ptr().next_multiple_of(GPU_PAGE as u64);
        let one: u32 = 1;
        // SAFETY: `start` lies in the allocation just made; the attribute takes a u32.
        unsafe {
            sys::cuPointerSetAttribute(
                &one as *const u32 as *const c_void,
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                buffer.device_ptr(),
            )
        }
        .result()
        .map_err(|source| ctx.error("cuPointerSetAttribute(SYNC_MEMOPS)", source))?;
        Ok(NicWritableDeviceMemory { buffer, start, len })
    }

    /// The first byte (a multiple of [`GPU_PAGE`]).
    pub fn device_ptr(&self) -> u64 {
        self.start
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets every byte to `byte` (synchronous; at set-up).
    pub fn fill(&self, byte: u8) -> Result<()> {
        self.buffer.ctx.bind()?;
        // SAFETY: `len` bytes from `start` lie within the allocation (aligned inside the
        // extra page allocated for that).
        unsafe { result::memset_d8_sync(self.start, byte, self.len) }
            .map_err(|source| self.buffer.ctx.error("cuMemsetD8", source))
    }

    /// A dma-buf file descriptor for the whole buffer
    /// (`cuMemGetHandleForAddressRange(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD)`); fails where
    /// the driver has no dma-buf support (the proprietary kernel modules, kernels before
    /// 5.12). The buffer must outlive every registration made from the fd.
    pub fn export_dma_buf(&self) -> Result<std::os::fd::OwnedFd> {
        use std::os::fd::FromRawFd;
        let ctx = &self.buffer.ctx;
        ctx.bind()?;
        let mut fd: libc::c_int = -1;
        // SAFETY: `fd` is a writable int, which is what a DMA_BUF_FD handle is; the range
        // is page-aligned and within the allocation.
        unsafe {
            sys::cuMemGetHandleForAddressRange(
                &mut fd as *mut libc::c_int as *mut c_void,
                self.start,
                self.len,
                sys::CUmemRangeHandleType::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                0,
            )
        }
        .result()
        .map_err(|source| Error::GpuDmaBufExport {
            device: ctx.index(),
            device_ptr: self.start,
            bytes: self.len,
            source,
        })?;
        if fd < 0 {
            return Err(Error::GpuUnavailable {
                detail: format!("cuMemGetHandleForAddressRange returned fd {fd}"),
            });
        }
        // SAFETY: the driver handed us a fresh fd, which nothing else owns.
        Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
    }
}

/// Registering GPU memory with an RDMA device: the NIC then writes the GPU's memory
/// directly (GPUDirect RDMA).
#[cfg(feature = "rdma")]
impl NicWritableDeviceMemory {
    /// Registers the whole buffer in `pd` through a dma-buf (exported here, closed once
    /// registered); the NIC and remote writers address it by its device address. The
    /// registration keeps the memory.
    pub fn register_dmabuf(
        self: Arc<Self>,
        pd: &Arc<crate::rdma::verbs::Pd>,
    ) -> Result<crate::rdma::verbs::Mr> {
        use std::os::fd::AsFd;
        let fd = self.export_dma_buf()?;
        let (len, iova) = (self.len, self.start);
        crate::rdma::verbs::Mr::register_dmabuf(pd, fd.as_fd(), len, iova, Box::new(self))
    }

    /// Registers the whole buffer in `pd` with `ibv_reg_mr` on its device address, which
    /// only the legacy peer-memory client (`nvidia_peermem`) resolves. The registration
    /// keeps the memory.
    pub fn register_peer_memory(
        self: Arc<Self>,
        pd: &Arc<crate::rdma::verbs::Pd>,
    ) -> Result<crate::rdma::verbs::Mr> {
        let (len, addr) = (self.len, self.start);
        // SAFETY: `addr..addr + len` is this allocation, which the registration keeps (it
        // owns `self`) until it is deregistered; the kernel that reads it is stopped before
        // the registration is dropped (the owner's contract).
        unsafe { crate::rdma::verbs::Mr::register_raw(pd, addr, len, Box::new(self)) }
    }
}

/// What a GPU's driver offers a NIC whose queues the GPU serves itself (device attributes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NicMemorySupport {
    /// `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`: device memory can be exported as a dma-buf
    /// (the open kernel modules, Linux 5.12 and later).
    pub dma_buf: bool,
    /// `CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED`: `cuMemHostRegister` works (the NIC's
    /// queue buffers and, with `IOMEMORY`, its UAR page).
    pub host_register: bool,
    /// `CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM`: registered host
    /// memory has the same address on the device.
    pub host_pointer_for_registered: bool,
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED`.
    pub gpu_direct_rdma: bool,
}

/// The [`NicMemorySupport`] of GPU `index`.
pub fn nic_memory_support(index: usize) -> Result<NicMemorySupport> {
    use sys::CUdevice_attribute as A;
    let device = super::context::device_handle(index)?;
    let on = |a| super::context::attribute(index, device, a).map(|v| v != 0);
    Ok(NicMemorySupport {
        dma_buf: on(A::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)?,
        host_register: on(A::CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED)?,
        host_pointer_for_registered: on(
            A::CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
        )?,
        gpu_direct_rdma: on(A::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(addr: u64, len: usize, kind: HostMemoryKind, what: &str) -> HostRange {
        HostRange {
            addr,
            len,
            kind,
            what: what.to_string(),
        }
    }

    #[test]
    fn page_spans_merge_what_shares_a_page() {
        use HostMemoryKind::{Io, Ram};
        let spans = page_spans(
            &[
                range(0x10_0000, 4096 * 2, Ram, "rx cq"),
                range(0x20_0040, 8, Ram, "qp dbrec"),
                range(0x20_0080, 8, Ram, "cq dbrec"),
                range(0x10_2000, 100, Ram, "tx cq"),
                range(0x30_0800, 512, Io, "uar"),
                range(0x40_0000, 0, Ram, "empty"),
            ],
            4096,
        )
        .unwrap();
        assert_eq!(
            spans,
            vec![
                range(0x10_0000, 3 * 4096, Ram, "rx cq + tx cq"),
                range(0x20_0000, 4096, Ram, "qp dbrec + cq dbrec"),
                range(0x30_0000, 4096, Io, "uar"),
            ]
        );
    }

    #[test]
    fn ram_and_mmio_on_one_page_are_refused() {
        let e = page_spans(
            &[
                range(0x1000, 64, HostMemoryKind::Ram, "dbrec"),
                range(0x1800, 256, HostMemoryKind::Io, "bf"),
            ],
            4096,
        )
        .unwrap_err();
        assert!(e.to_string().contains("share a page"), "{e}");
    }

    #[test]
    fn page_size_is_a_power_of_two() {
        assert!(host_page_size().is_power_of_two());
    }
}

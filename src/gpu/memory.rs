//! Memory the kernels use: pinned host memory mapped into the GPU's address space (the
//! mailbox), and plain device memory (claim ticket, counters).
//!
//! Not `CudaContext::alloc_pinned` (docs/architecture.md, "Mailbox rules"): that memory is
//! write-combined and unmapped. The kernels get raw `u64` device addresses, never a
//! `CudaSlice`: a kernel that never ends would make a `CudaSlice`'s drop wait forever.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::context::GpuContext;
use crate::shm::SharedRegion;
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
                "{what} at {host:#x} is not pinned, GPU-mapped host memory                  (cuMemHostGetDevicePointer: {source}); allocate it with                  gpu::mapped_nic_region"
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

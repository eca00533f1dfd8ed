//! The memory the soft NIC shares with its posters: a base pointer and a length, allocated
//! by the caller.
//!
//! For CPU tests it is a zeroed, page-aligned heap allocation ([`SharedRegion::heap`]); on a
//! GPU host it is pinned, GPU-mapped host memory, so the same UAR page, send queue, CQs
//! and doorbell records can be written by a kernel ([`SharedRegion::from_raw_parts`], with an
//! owner that keeps the allocation alive).
//!
//! Every access is an aligned atomic load or store of 1, 4 or 8 bytes (the NIC model's
//! "DMA" and "MMIO"), bounds- and alignment-checked; no Rust reference to the bytes is ever
//! handed out, because other agents (threads, a GPU) write them concurrently. Byte copies
//! are made of such accesses. This file holds the module's only `unsafe` code.

use std::alloc::{self, Layout};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use crate::{Error, Result};

/// Alignment every region must have: a page (the UAR page is page-aligned on hardware).
pub const REGION_ALIGN: usize = 4096;

struct Inner {
    base: NonNull<u8>,
    len: usize,
    /// Keeps the memory alive for as long as any clone of the region exists.
    _owner: Box<dyn Any + Send + Sync>,
}

// SAFETY: the memory is only ever accessed through atomics (see the module docs), which
// may be shared and sent between threads; the owner is Send + Sync.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

/// A shared view of the NIC's memory; clones share it, and it stays allocated until the
/// last clone is dropped (so a thread that has not stopped yet never touches freed memory).
#[derive(Clone)]
pub struct SharedRegion {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SharedRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRegion")
            .field("base", &self.inner.base)
            .field("len", &self.inner.len)
            .finish()
    }
}

/// A page-aligned zeroed heap allocation, freed on drop.
struct HeapAlloc {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: plain owned memory; access goes through SharedRegion's atomics.
unsafe impl Send for HeapAlloc {}
// SAFETY: as above.
unsafe impl Sync for HeapAlloc {}

impl Drop for HeapAlloc {
    fn drop(&mut self) {
        // SAFETY: allocated by `alloc_zeroed` with exactly this layout, freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl SharedRegion {
    /// `len` zeroed bytes on the heap, page-aligned (rounded up to whole pages).
    pub fn heap(len: usize) -> Result<SharedRegion> {
        let len = len.max(REGION_ALIGN).next_multiple_of(REGION_ALIGN);
        let layout =
            Layout::from_size_align(len, REGION_ALIGN).map_err(|e| Error::SoftNicLayout {
                detail: format!("cannot allocate {len} bytes: {e}"),
            })?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(ptr) else {
            alloc::handle_alloc_error(layout);
        };
        let owner = HeapAlloc { ptr, layout };
        Ok(SharedRegion {
            inner: Arc::new(Inner {
                base: ptr,
                len,
                _owner: Box::new(owner),
            }),
        })
    }

    /// A region over memory someone else allocated (mapped pinned host memory for a GPU).
    /// `owner` is dropped when the last clone of the region is; it should free the memory
    /// (or be `()` when the memory outlives everything).
    ///
    /// # Safety
    ///
    /// `base` must be valid for reads and writes of `len` bytes, aligned to
    /// [`REGION_ALIGN`], until `owner` is dropped; and every other agent touching those
    /// bytes meanwhile must use aligned accesses of at most 16 bytes (atomics on the host,
    /// `ld/st.volatile` or vector accesses on a GPU), never hand out Rust references to them.
    pub unsafe fn from_raw_parts(
        base: NonNull<u8>,
        len: usize,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Result<SharedRegion> {
        if base.as_ptr() as usize % REGION_ALIGN != 0 {
            return Err(Error::SoftNicLayout {
                detail: format!("region base {base:p} is not {REGION_ALIGN}-byte aligned"),
            });
        }
        Ok(SharedRegion {
            inner: Arc::new(Inner {
                base,
                len,
                _owner: owner,
            }),
        })
    }

    pub fn len(&self) -> usize {
        self.inner.len
    }

    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The host address of byte `offset`: the "DMA address" data segments carry.
    pub fn host_addr(&self, offset: usize) -> u64 {
        self.inner.base.as_ptr() as u64 + offset as u64
    }

    /// The offset of host address `addr` when `len` bytes from it lie in the region.
    pub fn offset_of(&self, addr: u64, len: usize) -> Option<usize> {
        let base = self.inner.base.as_ptr() as u64;
        let off = addr.checked_sub(base)? as usize;
        (off <= self.inner.len && self.inner.len - off >= len).then_some(off)
    }

    #[inline]
    fn check(&self, offset: usize, size: usize) {
        assert!(
            offset % size == 0 && offset <= self.inner.len && self.inner.len - offset >= size,
            "soft NIC region access of {size} bytes at {offset} is outside 0..{} or misaligned",
            self.inner.len
        );
    }

    #[inline]
    fn u64_at(&self, offset: usize) -> &AtomicU64 {
        self.check(offset, 8);
        // SAFETY: in bounds and 8-aligned (checked; the base is page-aligned); the memory
        // lives as long as `self.inner` (from_raw_parts/heap contract); AtomicU64 has
        // u64's layout and every agent accesses these bytes atomically or with aligned
        // hardware accesses of the same granularity.
        unsafe { &*(self.inner.base.as_ptr().add(offset) as *const AtomicU64) }
    }

    #[inline]
    fn u32_at(&self, offset: usize) -> &AtomicU32 {
        self.check(offset, 4);
        // SAFETY: as in `u64_at`, for 4 bytes at a 4-aligned offset.
        unsafe { &*(self.inner.base.as_ptr().add(offset) as *const AtomicU32) }
    }

    #[inline]
    fn u8_at(&self, offset: usize) -> &AtomicU8 {
        self.check(offset, 1);
        // SAFETY: as in `u64_at`, for one byte.
        unsafe { &*(self.inner.base.as_ptr().add(offset) as *const AtomicU8) }
    }

    #[inline]
    pub fn load_u64(&self, offset: usize, order: Ordering) -> u64 {
        self.u64_at(offset).load(order)
    }

    #[inline]
    pub fn store_u64(&self, offset: usize, value: u64, order: Ordering) {
        self.u64_at(offset).store(value, order)
    }

    /// Atomically replaces the u64 at `offset`, returning the old value.
    #[inline]
    pub fn swap_u64(&self, offset: usize, value: u64, order: Ordering) -> u64 {
        self.u64_at(offset).swap(value, order)
    }

    #[inline]
    pub fn load_u32(&self, offset: usize, order: Ordering) -> u32 {
        self.u32_at(offset).load(order)
    }

    #[inline]
    pub fn store_u32(&self, offset: usize, value: u32, order: Ordering) {
        self.u32_at(offset).store(value, order)
    }

    /// A big-endian u32 (doorbell records).
    #[inline]
    pub fn load_be32(&self, offset: usize, order: Ordering) -> u32 {
        u32::from_be(self.load_u32(offset, order))
    }

    #[inline]
    pub fn store_be32(&self, offset: usize, value: u32, order: Ordering) {
        self.store_u32(offset, value.to_be(), order)
    }

    /// Copies `bytes` to `offset` with Relaxed stores (publish with a later Release).
    pub fn write(&self, offset: usize, bytes: &[u8]) {
        let mut at = offset;
        let mut rest = bytes;
        while at % 8 != 0 && !rest.is_empty() {
            self.u8_at(at).store(rest[0], Ordering::Relaxed);
            at += 1;
            rest = &rest[1..];
        }
        let mut words = rest.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.store_u64(at, u64::from_ne_bytes(b), Ordering::Relaxed);
            at += 8;
        }
        for &b in words.remainder() {
            self.u8_at(at).store(b, Ordering::Relaxed);
            at += 1;
        }
    }

    /// Copies `out.len()` bytes from `offset` with Relaxed loads (after an Acquire that
    /// observed their publication).
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        let mut at = offset;
        let mut i = 0;
        while at % 8 != 0 && i < out.len() {
            out[i] = self.u8_at(at).load(Ordering::Relaxed);
            at += 1;
            i += 1;
        }
        while out.len() - i >= 8 {
            let w = self.load_u64(at, Ordering::Relaxed).to_ne_bytes();
            out[i..i + 8].copy_from_slice(&w);
            at += 8;
            i += 8;
        }
        while i < out.len() {
            out[i] = self.u8_at(at).load(Ordering::Relaxed);
            at += 1;
            i += 1;
        }
    }

    /// Sets `len` bytes at `offset` to zero (Relaxed).
    pub fn zero(&self, offset: usize, len: usize) {
        const ZEROS: [u8; 256] = [0; 256];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(ZEROS.len());
            self.write(offset + done, &ZEROS[..n]);
            done += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_copies_round_trip_and_bounds_are_checked() {
        let r = SharedRegion::heap(100).unwrap();
        assert_eq!(r.len(), 4096);
        assert_eq!(r.host_addr(0) % REGION_ALIGN as u64, 0);
        let data: Vec<u8> = (0..45u8).collect();
        r.write(3, &data);
        let mut back = [0u8; 45];
        r.read(3, &mut back);
        assert_eq!(&back[..], &data[..]);
        r.store_be32(64, 0x0102_0304, Ordering::Release);
        let mut b = [0u8; 4];
        r.read(64, &mut b);
        assert_eq!(b, [1, 2, 3, 4]);
        assert_eq!(r.offset_of(r.host_addr(10), 4086), Some(10));
        assert_eq!(r.offset_of(r.host_addr(10), 4087), None);
        assert_eq!(r.offset_of(r.host_addr(0).wrapping_sub(1), 1), None);
        assert_eq!(
            r.swap_u64(8, 5, Ordering::AcqRel),
            u64::from_ne_bytes([5, 6, 7, 8, 9, 10, 11, 12])
        );
        r.zero(0, 4096);
        assert_eq!(r.load_u64(8, Ordering::Relaxed), 0);
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn out_of_bounds_panics() {
        SharedRegion::heap(4096)
            .unwrap()
            .load_u64(4096, Ordering::Relaxed);
    }
}

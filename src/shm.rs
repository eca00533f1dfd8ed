//! Memory that several agents share: host threads, a NIC (the soft NIC's thread, or a
//! ConnectX's DMA) and a device (a GPU kernel). A [`SharedRegion`] is a base pointer and a
//! length, allocated by the caller and kept alive by the region's last clone.
//!
//! For CPU tests it is a zeroed, page-aligned heap allocation ([`SharedRegion::heap`]); on
//! a GPU host it is pinned, GPU-mapped host memory ([`SharedRegion::from_raw_parts`], with
//! an owner that frees it), so the NIC queues and rings in it can be read and written by a
//! kernel.
//!
//! Every access is an aligned atomic load or store of 1, 4 or 8 bytes, or an aligned
//! 16-byte chunk access that a device reading over PCIe sees whole; all are bounds- and
//! alignment-checked; no Rust reference to the bytes is ever handed out, because other
//! agents write them concurrently. Byte copies are made of such accesses. This file holds
//! the only `unsafe` code of the NIC queue layers and of the mailbox.
//!
//! Why the raw 16-byte store: a device reads a chunk with one 16-byte load and must see
//! either all of the old chunk or all of the new one. Rust's memory model has no 16-byte
//! atomic; x86-64 CPUs with AVX make aligned 16-byte stores and loads single-copy atomic,
//! which is what `_mm_store_si128` (one `movdqa`) gives a GPU over PCIe. Elsewhere the
//! portable fallback writes the data words first and the tag word (the last) with Release,
//! and readers of tagged chunks ([`SharedRegion::load_words`]) load the tag first with
//! Acquire: a reader that sees the new tag sees the new data.

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
    /// This view's first byte within the allocation (a multiple of [`REGION_ALIGN`]).
    start: usize,
    /// This view's length (`start + len` is within the allocation).
    len: usize,
}

impl std::fmt::Debug for SharedRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRegion")
            .field("base", &self.base_ptr())
            .field("len", &self.len)
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
                _owner: Box::new(owner),
            }),
            start: 0,
            len,
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
                _owner: owner,
            }),
            start: 0,
            len,
        })
    }

    /// The `len` bytes at `offset` (a multiple of [`REGION_ALIGN`]) as a region of their
    /// own, sharing this one's memory and keeping it alive (a link's queue set within
    /// several links' memory).
    pub fn view(&self, offset: usize, len: usize) -> Result<SharedRegion> {
        if offset % REGION_ALIGN != 0 || offset > self.len || self.len - offset < len {
            return Err(Error::SoftNicLayout {
                detail: format!(
                    "view of {len} bytes at {offset} is outside 0..{} or not page-aligned",
                    self.len
                ),
            });
        }
        Ok(SharedRegion {
            inner: Arc::clone(&self.inner),
            start: self.start + offset,
            len,
        })
    }

    #[inline]
    fn base_ptr(&self) -> *mut u8 {
        // In bounds of the allocation: `start + len` is within it (constructors, `view`).
        self.inner.base.as_ptr().wrapping_add(self.start)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The host address of byte `offset`: the "DMA address" data segments carry.
    pub fn host_addr(&self, offset: usize) -> u64 {
        self.base_ptr() as u64 + offset as u64
    }

    /// The offset of host address `addr` when `len` bytes from it lie in the region.
    pub fn offset_of(&self, addr: u64, len: usize) -> Option<usize> {
        let base = self.base_ptr() as u64;
        let off = addr.checked_sub(base)? as usize;
        (off <= self.len && self.len - off >= len).then_some(off)
    }

    #[inline]
    fn check(&self, offset: usize, size: usize) {
        assert!(
            offset % size == 0 && offset <= self.len && self.len - offset >= size,
            "shared region access of {size} bytes at {offset} is outside 0..{} or misaligned",
            self.len
        );
    }

    #[inline]
    fn u64_at(&self, offset: usize) -> &AtomicU64 {
        self.check(offset, 8);
        // SAFETY: in bounds and 8-aligned (checked; the base is page-aligned); the memory
        // lives as long as `self.inner` (from_raw_parts/heap contract); AtomicU64 has
        // u64's layout and every agent accesses these bytes atomically or with aligned
        // hardware accesses of the same granularity.
        unsafe { &*(self.base_ptr().add(offset) as *const AtomicU64) }
    }

    #[inline]
    fn u32_at(&self, offset: usize) -> &AtomicU32 {
        self.check(offset, 4);
        // SAFETY: as in `u64_at`, for 4 bytes at a 4-aligned offset.
        unsafe { &*(self.base_ptr().add(offset) as *const AtomicU32) }
    }

    #[inline]
    fn u8_at(&self, offset: usize) -> &AtomicU8 {
        self.check(offset, 1);
        // SAFETY: as in `u64_at`, for one byte.
        unsafe { &*(self.base_ptr().add(offset) as *const AtomicU8) }
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

    /// Stores the 16 bytes at `offset` (16-aligned) so that no reader sees part of them:
    /// one aligned 16-byte store (`movdqa`) on x86-64, which AVX-capable CPUs perform
    /// single-copy atomically and which a device's 16-byte read over PCIe sees whole. The
    /// compiler keeps it after every earlier store (a Release compiler fence), so a
    /// sequence of chunk stores becomes visible in program order (x86 is TSO).
    /// Elsewhere: two u64 stores, the second Release; readers of such targets must not
    /// rely on the chunk being whole.
    #[inline]
    pub fn store_chunk(&self, offset: usize, bytes: [u8; 16]) {
        self.check(offset, 16);
        std::sync::atomic::compiler_fence(Ordering::Release);
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_store_si128};
            // SAFETY: SSE2 is part of the x86-64 baseline. `offset` is in bounds and
            // 16-aligned (checked; the base is page-aligned), so this is one aligned
            // `movdqa`; the region's contract says every other agent uses aligned
            // accesses of at most 16 bytes, never Rust references. The source is a local.
            unsafe {
                let v = _mm_loadu_si128(bytes.as_ptr() as *const __m128i);
                _mm_store_si128(self.base_ptr().add(offset) as *mut __m128i, v);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let mut lo = [0u8; 8];
            let mut hi = [0u8; 8];
            lo.copy_from_slice(&bytes[..8]);
            hi.copy_from_slice(&bytes[8..]);
            self.store_u64(offset, u64::from_ne_bytes(lo), Ordering::Relaxed);
            self.store_u64(offset + 8, u64::from_ne_bytes(hi), Ordering::Release);
        }
    }

    /// Loads the 16 bytes at `offset` (16-aligned) in one aligned 16-byte load on x86-64
    /// (single-copy atomic on AVX-capable CPUs: never half of one store and half of
    /// another), ordered before every later load (an Acquire compiler fence).
    #[inline]
    pub fn load_chunk(&self, offset: usize) -> [u8; 16] {
        self.check(offset, 16);
        let mut out = [0u8; 16];
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__m128i, _mm_load_si128, _mm_storeu_si128};
            // SAFETY: as in `store_chunk`: one aligned `movdqa` load in bounds; the
            // destination is a local array of 16 bytes.
            unsafe {
                let v = _mm_load_si128(self.base_ptr().add(offset) as *const __m128i);
                _mm_storeu_si128(out.as_mut_ptr() as *mut __m128i, v);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let hi = self.load_u64(offset + 8, Ordering::Acquire);
            let lo = self.load_u64(offset, Ordering::Relaxed);
            out[..8].copy_from_slice(&lo.to_ne_bytes());
            out[8..].copy_from_slice(&hi.to_ne_bytes());
        }
        std::sync::atomic::compiler_fence(Ordering::Acquire);
        out
    }

    /// Adds to the u32 at `offset`; returns the previous value.
    #[inline]
    pub fn fetch_add_u32(&self, offset: usize, value: u32, order: Ordering) -> u32 {
        self.u32_at(offset).fetch_add(value, order)
    }

    /// Stores the chunk at `offset` (16-aligned) as four u32 words, `words[3]` the tag word,
    /// so that no reader sees part of it: [`SharedRegion::store_chunk`] on x86-64,
    /// [`SharedRegion::store_words_ordered`] elsewhere.
    #[inline]
    pub fn store_words(&self, offset: usize, words: [u32; 4]) {
        #[cfg(target_arch = "x86_64")]
        {
            let mut bytes = [0u8; 16];
            for (b, w) in bytes.chunks_exact_mut(4).zip(words) {
                b.copy_from_slice(&w.to_ne_bytes());
            }
            self.store_chunk(offset, bytes);
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.store_words_ordered(offset, words);
    }

    /// The portable chunk store: data words (Relaxed), then the tag word `words[3]`
    /// (Release).
    #[inline]
    pub fn store_words_ordered(&self, offset: usize, words: [u32; 4]) {
        self.check(offset, 16);
        for (i, &w) in words[..3].iter().enumerate() {
            self.store_u32(offset + 4 * i, w, Ordering::Relaxed);
        }
        self.store_u32(offset + 12, words[3], Ordering::Release);
    }

    /// Reads the chunk at `offset` (16-aligned) as four u32 words: the tag word (the last)
    /// first, with Acquire, then the data words. If the tag is the one the reader expects,
    /// the data are the ones written with it (in the same 16-byte store, or before the tag
    /// with Release).
    #[inline]
    pub fn load_words(&self, offset: usize) -> [u32; 4] {
        self.check(offset, 16);
        let tag = self.load_u32(offset + 12, Ordering::Acquire);
        [
            self.load_u32(offset, Ordering::Relaxed),
            self.load_u32(offset + 4, Ordering::Relaxed),
            self.load_u32(offset + 8, Ordering::Relaxed),
            tag,
        ]
    }

    /// Hints that the cache lines of `[offset, offset + len)` be moved out of this core's
    /// private caches into the shared L3, where a device's next read finds them without
    /// snooping the writer's core: CLDEMOTE after a request is written, about 0.1 µs off
    /// the GPU's read on the H200 host (`scripts/mailbox-protocol.cu`). A hint only: it
    /// changes no memory contents or ordering, and where the CPU lacks it the instruction
    /// is a no-op (it is encoded in the reserved-NOP space). Nothing on other targets.
    #[inline]
    pub fn demote(&self, offset: usize, len: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            if len == 0 {
                return;
            }
            assert!(
                offset <= self.len && self.len - offset >= len,
                "demote of {len} bytes at {offset} outside 0..{}",
                self.len
            );
            const LINE: usize = 64;
            let start = self.base_ptr() as usize + offset;
            let mut line = start & !(LINE - 1);
            while line < start + len {
                // SAFETY: CLDEMOTE (0F 1C /0, here [rax]) reads and writes no memory,
                // registers or flags; it only moves the line at `line` (inside the region,
                // checked above) within the cache hierarchy, and it is a NOP on CPUs without
                // it. Written as bytes so that no assembler support is assumed.
                unsafe {
                    std::arch::asm!(
                        ".byte 0x0f, 0x1c, 0x00",
                        in("rax") line,
                        options(nostack, preserves_flags, readonly)
                    );
                }
                line += LINE;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (offset, len);
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

/// A range of memory another library allocated, as [`ForeignMemory`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignRange {
    pub addr: u64,
    pub len: usize,
    /// A device's MMIO mapping (a NIC's UAR page), not RAM.
    pub mmio: bool,
    /// What it is, for errors.
    pub what: &'static str,
}

/// Memory another library allocated and this process maps (a NIC provider's queue
/// buffers, doorbell records and UAR page) that a third agent (a GPU) may be given.
///
/// # Safety
///
/// Implementors guarantee that every range [`ranges`](ForeignMemory::ranges) returns,
/// rounded out to whole host pages, stays mapped (RAM, or MMIO where `mmio`) for as long
/// as the value lives, and that every agent touching it uses aligned accesses of at most
/// 16 bytes.
pub unsafe trait ForeignMemory: Send + Sync {
    fn ranges(&self) -> Vec<ForeignRange>;
}

// SAFETY: a region's memory (a page-aligned heap allocation in whole pages, or memory its
// owner keeps) stays allocated while any clone lives, and the holder of this trait object
// holds a clone; the region's contract already has every agent use aligned accesses of at
// most 16 bytes.
unsafe impl ForeignMemory for SharedRegion {
    fn ranges(&self) -> Vec<ForeignRange> {
        vec![ForeignRange {
            addr: self.host_addr(0),
            len: self.len,
            mmio: false,
            what: "a shared region",
        }]
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
        let chunk: [u8; 16] = std::array::from_fn(|i| i as u8 + 1);
        r.store_chunk(32, chunk);
        assert_eq!(r.load_chunk(32), chunk);
        assert_eq!(
            r.load_u64(40, Ordering::Relaxed),
            u64::from_ne_bytes([9, 10, 11, 12, 13, 14, 15, 16])
        );
    }

    #[test]
    fn word_chunks_round_trip_with_both_stores() {
        let r = SharedRegion::heap(64).unwrap();
        r.store_words(16, [1, 2, 3, 4]);
        assert_eq!(r.load_words(16), [1, 2, 3, 4]);
        r.store_words_ordered(32, [5, 6, 7, 8]);
        assert_eq!(r.load_words(32), [5, 6, 7, 8]);
        assert_eq!(r.load_words(0), [0; 4]);
        assert_eq!(r.load_u32(44, Ordering::Acquire), 8);
        assert_eq!(r.fetch_add_u32(0, 3, Ordering::AcqRel), 0);
        assert_eq!(r.load_u32(0, Ordering::Relaxed), 3);
    }

    #[test]
    fn demote_leaves_contents_alone() {
        let r = SharedRegion::heap(256).unwrap();
        r.store_words(16, [1, 2, 3, 4]);
        r.store_words(192, [5, 6, 7, 8]);
        r.demote(16, 192); // lines 0..4, unaligned start
        r.demote(0, 0);
        assert_eq!(r.load_words(16), [1, 2, 3, 4]);
        assert_eq!(r.load_words(192), [5, 6, 7, 8]);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    #[should_panic(expected = "outside")]
    fn out_of_bounds_demote_panics() {
        SharedRegion::heap(4096).unwrap().demote(4032, 128);
    }

    #[test]
    #[should_panic(expected = "misaligned")]
    fn misaligned_chunk_panics() {
        SharedRegion::heap(64).unwrap().store_words(8, [0; 4]);
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn out_of_bounds_panics() {
        SharedRegion::heap(4096)
            .unwrap()
            .load_u64(4096, Ordering::Relaxed);
    }
}

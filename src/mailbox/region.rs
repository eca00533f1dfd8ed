//! The memory the host and the device side share, and the accesses the protocol is made
//! of: 16-byte chunk stores and loads, and single u32 words.
//!
//! A [`Region`] is a borrowed view (base pointer + length) of memory someone else owns:
//! mapped pinned host memory ([`crate::gpu::MappedHostBuffer`]) for the GPU, or a
//! [`HostRegion`] for the CPU double. Every access is bounds- and alignment-checked, and
//! none creates a Rust reference to bytes the other side may be writing except as atomics.
//!
//! Why the raw 16-byte store: the device side reads a chunk with one 16-byte load and must
//! see either all of the old chunk or all of the new one. Rust's memory model has no
//! 16-byte atomic; x86-64 CPUs with AVX make aligned 16-byte stores and loads single-copy
//! atomic, which is what `_mm_store_si128` (one `movdqa`) gives the GPU over PCIe and what
//! the DMA engine honours. Elsewhere the portable fallback writes the data words first and
//! the tag word last with Release ordering, and readers load the tag first with Acquire:
//! a reader that sees the new tag sees the new data.

use std::alloc::{self, Layout as AllocLayout};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::layout::{CHUNK_BYTES, TAG_WORD_OFFSET};

/// Alignment of every region: a page, so slots that start on cache lines stay on them.
pub const REGION_ALIGN: usize = 4096;

/// A view of shared memory: `len` bytes at `base`, valid for `'a`.
#[derive(Clone, Copy, Debug)]
pub struct Region<'a> {
    base: NonNull<u8>,
    len: usize,
    _memory: PhantomData<&'a [AtomicU32]>,
}

// SAFETY: a Region only ever accesses its memory through atomics or single-instruction
// 16-byte accesses (see the module docs); sharing the view between threads is what it
// is for, as sharing `&[AtomicU32]` is.
unsafe impl Send for Region<'_> {}
// SAFETY: as above.
unsafe impl Sync for Region<'_> {}

impl<'a> Region<'a> {
    /// # Safety
    ///
    /// `base` must be valid for reads and writes of `len` bytes for all of `'a`, aligned to
    /// 16 bytes, and every other agent that touches those bytes during `'a` must do so
    /// through the accesses this type provides (atomics, aligned 16-byte chunk accesses)
    /// or the device-side equivalents (`ld/st.volatile.global.v4.u32`).
    pub unsafe fn from_raw_parts(base: NonNull<u8>, len: usize) -> Region<'a> {
        debug_assert_eq!(base.as_ptr() as usize % CHUNK_BYTES, 0);
        Region {
            base,
            len,
            _memory: PhantomData,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The base address (for logs and for handing to a device).
    pub fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    #[inline]
    fn check(&self, offset: usize, size: usize) {
        assert!(
            offset % size == 0 && offset <= self.len && self.len - offset >= size,
            "region access of {size} bytes at {offset} outside 0..{} or misaligned",
            self.len
        );
    }

    #[inline]
    fn word(&self, offset: usize) -> &'a AtomicU32 {
        self.check(offset, 4);
        // SAFETY: `offset` is in bounds and 4-aligned (checked; the base is 16-aligned), the
        // memory is valid for 'a (from_raw_parts contract), AtomicU32 has u32's layout, and
        // every agent accesses these bytes atomically.
        unsafe { &*(self.base.as_ptr().add(offset) as *const AtomicU32) }
    }

    /// Loads the u32 at `offset` (4-aligned).
    #[inline]
    pub fn load_u32(&self, offset: usize, order: Ordering) -> u32 {
        self.word(offset).load(order)
    }

    /// Stores `value` at `offset` (4-aligned).
    #[inline]
    pub fn store_u32(&self, offset: usize, value: u32, order: Ordering) {
        self.word(offset).store(value, order)
    }

    /// Adds to the u32 at `offset`; returns the previous value.
    #[inline]
    pub fn fetch_add_u32(&self, offset: usize, value: u32, order: Ordering) -> u32 {
        self.word(offset).fetch_add(value, order)
    }

    /// Writes the chunk at `offset` (16-aligned) so that no reader sees part of it: one
    /// 16-byte store on x86-64, data-then-tag with Release elsewhere. `words[3]` is the tag.
    #[inline]
    pub fn store_chunk(&self, offset: usize, words: [u32; 4]) {
        #[cfg(target_arch = "x86_64")]
        {
            self.check(offset, CHUNK_BYTES);
            use std::arch::x86_64::{__m128i, _mm_set_epi32, _mm_store_si128};
            // SAFETY: SSE2 is part of the x86-64 baseline. `offset` is in bounds and
            // 16-aligned (checked; the base is 16-aligned), so this is one aligned
            // `movdqa`, which AVX-capable CPUs perform as a single-copy-atomic 16-byte
            // store; the other agents only read these bytes (atomically or with one
            // 16-byte load) while the writer owns the slot.
            unsafe {
                let v = _mm_set_epi32(
                    words[3] as i32,
                    words[2] as i32,
                    words[1] as i32,
                    words[0] as i32,
                );
                _mm_store_si128(self.base.as_ptr().add(offset) as *mut __m128i, v);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.store_chunk_ordered(offset, words);
    }

    /// Hints that the cache lines of `[offset, offset + len)` be moved out of this core's
    /// private caches into the shared L3, where the device's next read finds them without
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
            let start = self.base.as_ptr() as usize + offset;
            let mut line = start & !(LINE - 1);
            while line < start + len {
                // SAFETY: CLDEMOTE (0F 1C /0, here [rax]) reads and writes no memory, registers
                // or flags; it only moves the line at `line` (inside the region, checked above)
                // within the cache hierarchy, and it is a NOP on CPUs without it. Written as
                // bytes so that no assembler support is assumed.
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

    /// The portable chunk store: data words (Relaxed), then the tag word (Release).
    #[inline]
    pub fn store_chunk_ordered(&self, offset: usize, words: [u32; 4]) {
        self.check(offset, CHUNK_BYTES);
        for (i, &w) in words[..3].iter().enumerate() {
            self.store_u32(offset + 4 * i, w, Ordering::Relaxed);
        }
        self.store_u32(offset + TAG_WORD_OFFSET, words[3], Ordering::Release);
    }

    /// Reads the chunk at `offset`: tag first (Acquire), then the data words. If the tag is
    /// the one the reader expects, the data are the ones written with it (the writer wrote
    /// them in the same 16-byte store, or before the tag with Release).
    #[inline]
    pub fn load_chunk(&self, offset: usize) -> [u32; 4] {
        self.check(offset, CHUNK_BYTES);
        let tag = self.load_u32(offset + TAG_WORD_OFFSET, Ordering::Acquire);
        [
            self.load_u32(offset, Ordering::Relaxed),
            self.load_u32(offset + 4, Ordering::Relaxed),
            self.load_u32(offset + 8, Ordering::Relaxed),
            tag,
        ]
    }
}

/// A zeroed, page-aligned heap region: the CPU double's stand-in for mapped pinned memory.
pub struct HostRegion {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: HostRegion owns its allocation; access goes through `Region`, which is Send+Sync.
unsafe impl Send for HostRegion {}
// SAFETY: as above.
unsafe impl Sync for HostRegion {}

impl HostRegion {
    /// `len` zeroed bytes (at least one chunk).
    pub fn zeroed(len: usize) -> HostRegion {
        let len = len.max(CHUNK_BYTES).next_multiple_of(CHUNK_BYTES);
        let layout = Self::alloc_layout(len);
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let Some(base) = NonNull::new(ptr) else {
            alloc::handle_alloc_error(layout);
        };
        HostRegion { base, len }
    }

    fn alloc_layout(len: usize) -> AllocLayout {
        AllocLayout::from_size_align(len, REGION_ALIGN).expect("region size overflows isize")
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A view of the whole region, valid while `self` is.
    pub fn region(&self) -> Region<'_> {
        // SAFETY: the allocation is `len` bytes, page-aligned, lives as long as `self`, and is
        // only accessed through `Region`s.
        unsafe { Region::from_raw_parts(self.base, self.len) }
    }
}

impl Drop for HostRegion {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this very layout, freed once.
        unsafe { alloc::dealloc(self.base.as_ptr(), Self::alloc_layout(self.len)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_round_trip_with_both_stores() {
        let mem = HostRegion::zeroed(64);
        let r = mem.region();
        assert_eq!(r.as_ptr() as usize % REGION_ALIGN, 0);
        r.store_chunk(16, [1, 2, 3, 4]);
        assert_eq!(r.load_chunk(16), [1, 2, 3, 4]);
        r.store_chunk_ordered(32, [5, 6, 7, 8]);
        assert_eq!(r.load_chunk(32), [5, 6, 7, 8]);
        assert_eq!(r.load_chunk(0), [0; 4]);
        assert_eq!(r.load_u32(44, Ordering::Acquire), 8);
        assert_eq!(r.fetch_add_u32(0, 3, Ordering::AcqRel), 0);
        assert_eq!(r.load_u32(0, Ordering::Relaxed), 3);
    }

    #[test]
    fn demote_leaves_contents_alone() {
        let mem = HostRegion::zeroed(256);
        let r = mem.region();
        r.store_chunk(16, [1, 2, 3, 4]);
        r.store_chunk(192, [5, 6, 7, 8]);
        r.demote(16, 192); // lines 0..4, unaligned start
        r.demote(0, 0);
        assert_eq!(r.load_chunk(16), [1, 2, 3, 4]);
        assert_eq!(r.load_chunk(192), [5, 6, 7, 8]);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    #[should_panic(expected = "outside")]
    fn out_of_bounds_demote_panics() {
        let mem = HostRegion::zeroed(128);
        mem.region().demote(64, 128);
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn out_of_bounds_chunk_panics() {
        let mem = HostRegion::zeroed(32);
        mem.region().load_chunk(32);
    }

    #[test]
    #[should_panic(expected = "misaligned")]
    fn misaligned_chunk_panics() {
        let mem = HostRegion::zeroed(64);
        mem.region().store_chunk(8, [0; 4]);
    }
}

//! The mailbox memory layout and its sequence tags.
//!
//! One region holds, in order:
//!
//! ```text
//! request ring   slots x req_slot_bytes    (host writes, device reads)
//! response ring  slots x resp_slot_bytes   (device writes, host reads)
//! control block  CONTROL_BYTES             (word 0: stall-release generation)
//! ```
//!
//! Slot sizes are rounded up to whole cache lines so that two slots never share one.
//! Everything is made of 16-byte chunks of four little-endian u32 words `{w0, w1, w2, tag}`.
//!
//! **Request slot, `inline` mode.** The request stream `[code: u32][arg_len: u32][arg...]`
//! is cut into 12-byte pieces; chunk k carries piece k in `w0..w2` and the slot's tag in
//! `tag`. Each chunk is written with one 16-byte store, so a chunk is either entirely old
//! or entirely new; the device accepts a request only when chunks `0..ceil((8+arg_len)/12)`
//! all carry the expected tag.
//!
//! **Request slot, `buffer` mode.** Chunk 0 is the flag chunk: only its `tag` word is used,
//! as the flag. The stream `[code][arg_len][arg...]` follows from byte 16 as plain bytes.
//! The host writes the stream first, then the flag (Release); the device polls the flag,
//! then reads the stream.
//!
//! **Response slot (both modes).** The stream `[status: i32][result_len: u32][result...]`
//! in tagged 12-byte pieces, exactly like an inline request, written by the device with one
//! vector store per chunk and no system-scope fence. The host accepts it only when every
//! chunk carries the request's tag.
//!
//! **Tags.** Sequence number `s` (the host's count of submissions) uses slot `s % slots`
//! with tag `tag_for(s) = (s / slots) % TAG_PERIOD + 1`: never 0 (zeroed memory is never a
//! request), never [`STOP_TAG`], and different on consecutive uses of a slot, so data left
//! from the previous lap is never accepted after wrap-around. Tags repeat only every
//! `TAG_PERIOD` laps; a chunk untouched for that long could alias, so on the first lap of
//! every tag cycle (tag 1) the writer rewrites every chunk of the slot, request and
//! response alike, which bounds a chunk's age to less than one cycle.
//!
//! **Device answers (`reply` layouts).** When the device side sends each response to the
//! QPU itself (GPU-initiated doorbells, `regular` / `blueflame`), it needs the
//! request's wire identity to build the CUQS header. Then the request stream carries a
//! trailer after the argument, padded to 4 bytes: `[request_id: u32][ptp_timestamp: u64]`
//! ([`REPLY_ID_BYTES`]), so the stream is `[code][arg_len][arg...][pad][request_id][ts lo]
//! [ts hi]`. The handler still sees `arg_len` bytes. After sending, the device publishes a
//! one-chunk completion `{status, DEVICE_SENT | result_len, 0, tag}`
//! ([`DEVICE_SENT`]): the host counts the request answered and sends nothing. (On the
//! first lap of a tag cycle every chunk of the slot is rewritten, as for any response.)
//!
//! **Stop.** Writing [`STOP_TAG`] into the tag word of chunk 0 of every request slot stops
//! every poller wherever it is polling (docs/architecture.md, "Mailbox rules": the sentinel
//! goes where the pollers already look, not into a separate word that costs another read).
#![forbid(unsafe_code)]

use super::RxCompletion;
use crate::{Error, Result};

/// Bytes in a chunk: the unit of every read and write of the protocol.
pub const CHUNK_BYTES: usize = 16;
/// Data bytes in a tagged chunk (three of its four words).
pub const INLINE_DATA_BYTES: usize = 12;
/// Bytes of the request header (`code`, `arg_len`) and of the response header
/// (`status`, `result_len`).
pub const HEADER_BYTES: usize = 8;
/// Offset of the tag word inside a chunk.
pub const TAG_WORD_OFFSET: usize = 12;
/// Bytes of the reply trailer of a `reply` layout's request: request_id (u32) and
/// ptp_timestamp (u64), after the argument padded to 4 bytes.
pub const REPLY_ID_BYTES: usize = 12;
/// Flag in a completion's `result_len` word: the device side already sent the response to
/// the QPU (the low 31 bits say how many result bytes it carried).
pub const DEVICE_SENT: u32 = 0x8000_0000;
/// Reserved tag: "stop polling". Never a sequence tag.
pub const STOP_TAG: u32 = u32::MAX;
/// Distinct sequence tags (1 ..= TAG_PERIOD).
pub const TAG_PERIOD: u64 = u32::MAX as u64 - 1;
/// The kernel reads a request with at most this many chunk loads per lane.
pub const MAX_ROUNDS: usize = 8;
/// Largest request slot: 32 lanes x [`MAX_ROUNDS`] chunks.
pub const MAX_REQ_SLOT_BYTES: usize = 32 * MAX_ROUNDS * CHUNK_BYTES;
/// Largest response slot.
pub const MAX_RESP_SLOT_BYTES: usize = 4096;
/// Slots are rounded up to whole cache lines.
pub const CACHE_LINE: usize = 64;
/// Size of the control block at the end of the region.
pub const CONTROL_BYTES: usize = 64;
/// Control word: stall-release generation (the host bumps it; a stalled handler ends).
pub const CONTROL_RELEASE_OFFSET: usize = 0;
/// Device state (device memory, GPU only): poller group g's claim ticket (u64) at
/// `g * STATE_CLAIM_STRIDE`, each on its own 128-byte line: the ticket itself for a group
/// split over thread blocks, the starting value of the shared-memory copy otherwise.
pub const STATE_CLAIM_STRIDE: usize = 128;
/// Most poller groups.
pub const MAX_GROUPS: usize = 32;
/// Device state: per-poller counters start here.
pub const STATE_COUNTERS_OFFSET: usize = MAX_GROUPS * STATE_CLAIM_STRIDE;
/// Counters per poller in the device state: polls, served, torn reads, lost claims.
pub const COUNTERS_PER_POLLER: usize = 4;
/// Longest a debug stall may last, in microseconds.
pub const MAX_STALL_US: u32 = 10_000_000;

/// Device handler codes: what chunk 0's `w0` asks the device to run.
pub mod device_code {
    /// [`crate::handler::Handler::Parity`].
    pub const PARITY: u32 = 1;
    /// Debug: spin for `arg[0..4]` (u32 LE) microseconds, at most
    /// [`super::MAX_STALL_US`], or until the release word reaches `arg[4..8]` (u32 LE; the
    /// host passes the next generation, so a release that lands before the stall starts
    /// still ends it). Tests the watchdog.
    pub const STALL: u32 = 0xDEB0_0001;
}

/// The tag that sequence number `seq` carries in a ring of `slots` slots.
#[inline]
pub fn tag_for(seq: u64, slots: usize) -> u32 {
    tag_for_lap(seq / slots as u64)
}

/// The tag of a slot's `lap`-th use.
#[inline]
pub fn tag_for_lap(lap: u64) -> u32 {
    (lap % TAG_PERIOD) as u32 + 1
}

/// Tagged chunks that a stream of `bytes` bytes occupies.
#[inline]
pub fn inline_chunks(bytes: usize) -> usize {
    bytes.div_ceil(INLINE_DATA_BYTES)
}

/// Sizes and offsets of one mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    slots: usize,
    req_slot_bytes: usize,
    resp_slot_bytes: usize,
    rx: RxCompletion,
    /// Requests carry the reply trailer (the device side answers the QPU itself).
    reply: bool,
}

impl Layout {
    /// A mailbox of `slots` request and response slots. Slot sizes are rounded up to whole
    /// cache lines; a request slot holds at most [`MAX_REQ_SLOT_BYTES`].
    pub fn new(
        slots: usize,
        req_slot_bytes: usize,
        resp_slot_bytes: usize,
        rx: RxCompletion,
    ) -> Result<Layout> {
        let bad = |detail: String| Err(Error::MailboxLayout { detail });
        if slots == 0 || slots > 1 << 20 {
            return bad(format!("{slots} slots: expected 1 ..= {}", 1 << 20));
        }
        let req = req_slot_bytes.max(CACHE_LINE).next_multiple_of(CACHE_LINE);
        let resp = resp_slot_bytes.max(CACHE_LINE).next_multiple_of(CACHE_LINE);
        if req > MAX_REQ_SLOT_BYTES {
            return bad(format!(
                "request slots of {req_slot_bytes} bytes: at most {MAX_REQ_SLOT_BYTES}"
            ));
        }
        if resp > MAX_RESP_SLOT_BYTES {
            return bad(format!(
                "response slots of {resp_slot_bytes} bytes: at most {MAX_RESP_SLOT_BYTES}"
            ));
        }
        Ok(Layout {
            slots,
            req_slot_bytes: req,
            resp_slot_bytes: resp,
            rx,
            reply: false,
        })
    }

    /// The same layout with (or without) the reply trailer in every request (see the
    /// module docs, "Device answers"). Costs [`REPLY_ID_BYTES`] (+ padding) of argument.
    pub fn with_reply(self, reply: bool) -> Layout {
        Layout { reply, ..self }
    }

    /// Whether requests carry the reply trailer.
    pub fn reply(&self) -> bool {
        self.reply
    }

    /// Bytes of the request stream `[code][arg_len][arg]` (plus, in a reply layout, the
    /// padding and the trailer) for an argument of `arg_len` bytes.
    #[inline]
    pub fn request_stream_bytes(&self, arg_len: usize) -> usize {
        if self.reply {
            HEADER_BYTES + arg_len.next_multiple_of(4) + REPLY_ID_BYTES
        } else {
            HEADER_BYTES + arg_len
        }
    }

    /// Stream word where the reply trailer starts, for an argument of `arg_len` bytes.
    #[inline]
    pub fn reply_word(arg_len: usize) -> usize {
        (HEADER_BYTES + arg_len.next_multiple_of(4)) / 4
    }

    /// The request slot size (before rounding) that holds arguments of `max_arg_len` bytes.
    pub fn req_slot_bytes_for(max_arg_len: usize, rx: RxCompletion) -> usize {
        match rx {
            RxCompletion::Inline => inline_chunks(HEADER_BYTES + max_arg_len) * CHUNK_BYTES,
            RxCompletion::Buffer => CHUNK_BYTES + HEADER_BYTES + max_arg_len,
        }
    }

    /// The response slot size (before rounding) that holds results of `max_result_len` bytes.
    pub fn resp_slot_bytes_for(max_result_len: usize) -> usize {
        inline_chunks(HEADER_BYTES + max_result_len) * CHUNK_BYTES
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    pub fn rx(&self) -> RxCompletion {
        self.rx
    }

    pub fn req_slot_bytes(&self) -> usize {
        self.req_slot_bytes
    }

    pub fn resp_slot_bytes(&self) -> usize {
        self.resp_slot_bytes
    }

    pub fn req_chunks(&self) -> usize {
        self.req_slot_bytes / CHUNK_BYTES
    }

    pub fn resp_chunks(&self) -> usize {
        self.resp_slot_bytes / CHUNK_BYTES
    }

    /// Largest argument a request slot holds.
    pub fn max_arg_len(&self) -> usize {
        let stream = match self.rx {
            RxCompletion::Inline => self.req_chunks() * INLINE_DATA_BYTES,
            RxCompletion::Buffer => self.req_slot_bytes - CHUNK_BYTES,
        };
        // Both capacities are multiples of 4, so the padded argument fits exactly.
        let trailer = if self.reply { REPLY_ID_BYTES } else { 0 };
        stream - HEADER_BYTES - trailer
    }

    /// Largest result a response slot holds.
    pub fn max_result_len(&self) -> usize {
        self.resp_chunks() * INLINE_DATA_BYTES - HEADER_BYTES
    }

    pub fn req_ring_offset(&self) -> usize {
        0
    }

    pub fn resp_ring_offset(&self) -> usize {
        self.slots * self.req_slot_bytes
    }

    pub fn control_offset(&self) -> usize {
        self.resp_ring_offset() + self.slots * self.resp_slot_bytes
    }

    /// Bytes of the whole region.
    pub fn total_bytes(&self) -> usize {
        self.control_offset() + CONTROL_BYTES
    }

    #[inline]
    pub fn req_offset(&self, slot: usize) -> usize {
        debug_assert!(slot < self.slots);
        self.req_ring_offset() + slot * self.req_slot_bytes
    }

    #[inline]
    pub fn resp_offset(&self, slot: usize) -> usize {
        debug_assert!(slot < self.slots);
        self.resp_ring_offset() + slot * self.resp_slot_bytes
    }

    #[inline]
    pub fn release_word_offset(&self) -> usize {
        self.control_offset() + CONTROL_RELEASE_OFFSET
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_never_zero_or_stop_and_change_every_lap() {
        for lap in [
            0,
            1,
            2,
            TAG_PERIOD - 1,
            TAG_PERIOD,
            TAG_PERIOD + 1,
            u64::MAX,
        ] {
            let t = tag_for_lap(lap);
            assert_ne!(t, 0);
            assert_ne!(t, STOP_TAG);
            assert_ne!(t, tag_for_lap(lap.wrapping_add(1)), "lap {lap}");
        }
        assert_eq!(tag_for_lap(0), 1);
        assert_eq!(tag_for_lap(TAG_PERIOD), 1);
        assert_eq!(tag_for(0, 4), 1);
        assert_eq!(tag_for(3, 4), 1);
        assert_eq!(tag_for(4, 4), 2);
    }

    #[test]
    fn default_slot_holds_one_kib_and_offsets_do_not_overlap() {
        let req = Layout::req_slot_bytes_for(1024, RxCompletion::Inline);
        let l = Layout::new(64, req, 64, RxCompletion::Inline).unwrap();
        assert!(l.max_arg_len() >= 1024);
        assert_eq!(l.req_slot_bytes() % CACHE_LINE, 0);
        assert_eq!(l.resp_ring_offset(), 64 * l.req_slot_bytes());
        assert_eq!(l.req_offset(63) + l.req_slot_bytes(), l.resp_ring_offset());
        assert_eq!(l.resp_offset(63) + l.resp_slot_bytes(), l.control_offset());
        assert_eq!(l.max_result_len(), 40);
        let b = Layout::new(
            8,
            Layout::req_slot_bytes_for(1024, RxCompletion::Buffer),
            64,
            RxCompletion::Buffer,
        )
        .unwrap();
        assert!(b.max_arg_len() >= 1024);
    }

    #[test]
    fn reply_layouts_fit_the_trailer_in_every_slot() {
        for rx in RxCompletion::ALL {
            let plain = Layout::new(4, 128, 64, rx).unwrap();
            let l = plain.with_reply(true);
            assert!(l.reply() && !plain.reply());
            assert_eq!(l.max_arg_len() + REPLY_ID_BYTES, plain.max_arg_len());
            let capacity = match rx {
                RxCompletion::Inline => l.req_chunks() * INLINE_DATA_BYTES,
                RxCompletion::Buffer => l.req_slot_bytes() - CHUNK_BYTES,
            };
            for arg_len in 0..=l.max_arg_len() {
                assert!(
                    l.request_stream_bytes(arg_len) <= capacity,
                    "{rx} {arg_len}"
                );
                assert_eq!(
                    Layout::reply_word(arg_len) * 4 + REPLY_ID_BYTES,
                    l.request_stream_bytes(arg_len)
                );
            }
            assert_eq!(plain.request_stream_bytes(5), 13);
            assert_eq!(l.request_stream_bytes(5), 8 + 8 + 12);
        }
    }

    #[test]
    fn layout_refuses_impossible_sizes() {
        assert!(Layout::new(0, 64, 64, RxCompletion::Inline).is_err());
        assert!(Layout::new(4, MAX_REQ_SLOT_BYTES + 1, 64, RxCompletion::Inline).is_err());
        assert!(Layout::new(4, 64, MAX_RESP_SLOT_BYTES + 1, RxCompletion::Inline).is_err());
        assert!(Layout::new(
            4,
            MAX_REQ_SLOT_BYTES,
            MAX_RESP_SLOT_BYTES,
            RxCompletion::Buffer
        )
        .is_ok());
    }
}

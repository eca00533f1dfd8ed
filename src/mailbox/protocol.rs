//! The slot protocol of [`super::layout`], as functions on a [`SharedRegion`]: what the host
//! writes and reads, and what the device side (the CPU double; the kernel mirrors it in
//! `device/forward.cu`) reads and writes.
//!
//! No function here allocates, locks or makes a system call: they are the hot path.
//! The `*_chunks` variants take a filter that says which chunks to write; everything else
//! writes all of them. Tests use the filters to make torn writes on purpose.
#![forbid(unsafe_code)]

use std::sync::atomic::Ordering;

use super::layout::{
    inline_chunks, Layout, CHUNK_BYTES, DEVICE_SENT, HEADER_BYTES, INLINE_DATA_BYTES, STOP_TAG,
    TAG_WORD_OFFSET,
};
use super::RxCompletion;
use crate::shm::SharedRegion;
use crate::wire::status;

/// Word `i` of `bytes` (little-endian), zero-padded past the end.
#[inline]
fn byte_word(bytes: &[u8], i: usize) -> u32 {
    let start = 4 * i;
    if let Some(w) = bytes.get(start..start + 4) {
        u32::from_le_bytes([w[0], w[1], w[2], w[3]])
    } else if start < bytes.len() {
        let mut w = [0u8; 4];
        w[..bytes.len() - start].copy_from_slice(&bytes[start..]);
        u32::from_le_bytes(w)
    } else {
        0
    }
}

/// Word `j` of the stream `[head0][head1][body...]` that requests and responses are.
#[inline]
fn stream_word(head: [u32; 2], body: &[u8], j: usize) -> u32 {
    match j {
        0 => head[0],
        1 => head[1],
        _ => byte_word(body, j - 2),
    }
}

/// The request's wire identity, carried to a device side that answers the QPU itself (a
/// `reply` layout, see [`super::layout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplyTo {
    pub request_id: u32,
    pub ptp_timestamp: u64,
}

impl ReplyTo {
    fn words(&self) -> [u32; 3] {
        [
            self.request_id,
            self.ptp_timestamp as u32,
            (self.ptp_timestamp >> 32) as u32,
        ]
    }
}

/// A request stream: `[code][arg_len][arg...]`, then in a reply layout the padding and the
/// trailer `[request_id][ts lo][ts hi]`.
#[derive(Clone, Copy)]
struct RequestStream<'a> {
    head: [u32; 2],
    arg: &'a [u8],
    /// Stream word of the trailer, and the trailer.
    trailer: Option<(usize, [u32; 3])>,
}

impl RequestStream<'_> {
    #[inline]
    fn word(&self, j: usize) -> u32 {
        if let Some((at, t)) = self.trailer {
            if (at..at + 3).contains(&j) {
                return t[j - at];
            }
        }
        stream_word(self.head, self.arg, j)
    }
}

/// Writes the stream `[head][body]` as tagged chunks at `base`: `chunks` of them (the
/// chunks beyond the stream carry zeros), those for which `write(k)` says so.
#[inline]
fn write_tagged_stream(
    region: &SharedRegion,
    base: usize,
    tag: u32,
    head: [u32; 2],
    body: &[u8],
    chunks: usize,
    write: &mut impl FnMut(usize) -> bool,
) {
    for k in 0..chunks {
        if write(k) {
            let j = 3 * k;
            region.store_words(
                base + k * CHUNK_BYTES,
                [
                    stream_word(head, body, j),
                    stream_word(head, body, j + 1),
                    stream_word(head, body, j + 2),
                    tag,
                ],
            );
        }
    }
}

/// Copies body bytes carried by stream words `j .. j + words.len()` into `out`.
#[inline]
fn copy_body_words(out: &mut [u8], j: usize, words: &[u32]) {
    for (i, w) in words.iter().enumerate() {
        let Some(word) = (j + i).checked_sub(2) else {
            continue;
        };
        let start = 4 * word;
        if start >= out.len() {
            return;
        }
        let n = (out.len() - start).min(4);
        out[start..start + n].copy_from_slice(&w.to_le_bytes()[..n]);
    }
}

// ---- host side -------------------------------------------------------------------------

/// Host: writes the request `(code, arg)` into `slot` for sequence tag `tag`. The caller
/// owns the slot (its previous response was reaped) and checked `arg` fits. In a reply
/// layout the trailer is zero (see [`write_request_to`]).
#[inline]
pub fn write_request(
    region: &SharedRegion,
    layout: &Layout,
    slot: usize,
    tag: u32,
    code: u32,
    arg: &[u8],
) {
    write_request_to(region, layout, slot, tag, code, arg, ReplyTo::default())
}

/// Host: [`write_request`] with the request's wire identity, which a reply layout carries
/// in the trailer (other layouts ignore it).
#[inline]
pub fn write_request_to(
    region: &SharedRegion,
    layout: &Layout,
    slot: usize,
    tag: u32,
    code: u32,
    arg: &[u8],
    reply: ReplyTo,
) {
    write_request_stream(region, layout, slot, tag, code, arg, reply, |_| true)
}

/// [`write_request`], writing only the chunks `write(k)` selects (inline mode: chunk k of
/// the slot; buffer mode: payload chunk k, and `write(usize::MAX)` for the flag).
pub fn write_request_chunks(
    region: &SharedRegion,
    layout: &Layout,
    slot: usize,
    tag: u32,
    code: u32,
    arg: &[u8],
    write: impl FnMut(usize) -> bool,
) {
    write_request_stream(
        region,
        layout,
        slot,
        tag,
        code,
        arg,
        ReplyTo::default(),
        write,
    )
}

#[allow(clippy::too_many_arguments)]
#[inline]
fn write_request_stream(
    region: &SharedRegion,
    layout: &Layout,
    slot: usize,
    tag: u32,
    code: u32,
    arg: &[u8],
    reply: ReplyTo,
    mut write: impl FnMut(usize) -> bool,
) {
    assert!(
        arg.len() <= layout.max_arg_len(),
        "request larger than its slot"
    );
    let base = layout.req_offset(slot);
    let stream = RequestStream {
        head: [code, arg.len() as u32],
        arg,
        trailer: layout
            .reply()
            .then(|| (Layout::reply_word(arg.len()), reply.words())),
    };
    let bytes = layout.request_stream_bytes(arg.len());
    match layout.rx() {
        RxCompletion::Inline => {
            let used = inline_chunks(bytes);
            // First lap of a tag cycle: rewrite the whole slot (see layout.rs, Tags).
            let chunks = if tag == 1 { layout.req_chunks() } else { used };
            for k in 0..chunks {
                if write(k) {
                    let j = 3 * k;
                    region.store_words(
                        base + k * CHUNK_BYTES,
                        [stream.word(j), stream.word(j + 1), stream.word(j + 2), tag],
                    );
                }
            }
            // Out of this core's caches, to where the device's read finds it sooner.
            region.demote(base, chunks * CHUNK_BYTES);
        }
        RxCompletion::Buffer => {
            let payload = base + CHUNK_BYTES;
            let chunks = bytes.div_ceil(CHUNK_BYTES);
            for k in 0..chunks {
                if write(k) {
                    let j = 4 * k;
                    region.store_words(
                        payload + k * CHUNK_BYTES,
                        [
                            stream.word(j),
                            stream.word(j + 1),
                            stream.word(j + 2),
                            stream.word(j + 3),
                        ],
                    );
                }
            }
            if write(usize::MAX) {
                // The flag, after the payload: Release orders it after the payload stores
                // (and x86 keeps stores in program order for the PCIe reader).
                region.store_u32(base + TAG_WORD_OFFSET, tag, Ordering::Release);
            }
            region.demote(base, (chunks + 1) * CHUNK_BYTES);
        }
    }
}

/// Host: the response in `slot` if all its chunks carry `tag`. Returns `(status,
/// result_len)` and leaves the result in `out[..result_len]`; `None` while incomplete.
/// `out` must hold [`Layout::max_result_len`] bytes. A completion the device already sent
/// reads as `(status, 0)` (see [`read_completion`]).
#[inline]
pub fn read_response(
    region: &SharedRegion,
    layout: &Layout,
    slot: usize,
    tag: u32,
    out: &mut [u8],
) -> Option<(i32, usize)> {
    read_completion(region, layout, slot, tag, out).map(|c| (c.status, c.result_len))
}

/// What a response slot says once complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotCompletion {
    pub status: i32,
    /// Result bytes in `out` (0 when the device sent the response itself).
    pub result_len: usize,
    /// The device side already sent the response to the QPU ([`DEVICE_SENT`]); the host
    /// only counts it.
    pub sent_by_device: bool,
}

/// Host: [`read_response`], telling a completion the device already sent (one chunk,
/// [`DEVICE_SENT`] in its length word) from a response the host must send.
#[inline]
pub fn read_completion(
    region: &SharedRegion,
    layout: &Layout,
    slot: usize,
    tag: u32,
    out: &mut [u8],
) -> Option<SlotCompletion> {
    let base = layout.resp_offset(slot);
    let first = region.load_words(base);
    if first[3] != tag {
        return None;
    }
    let status = first[0] as i32;
    if first[1] & DEVICE_SENT != 0 {
        return Some(SlotCompletion {
            status,
            result_len: 0,
            sent_by_device: true,
        });
    }
    let len = first[1] as usize;
    let done = |status, result_len| {
        Some(SlotCompletion {
            status,
            result_len,
            sent_by_device: false,
        })
    };
    if len > layout.max_result_len() || len > out.len() {
        // Complete but impossible: a device-side bug. Answer it rather than wait forever.
        return done(status::LENGTH_MISMATCH, 0);
    }
    let out = &mut out[..len];
    copy_body_words(out, 0, &first[..3]);
    for k in 1..inline_chunks(HEADER_BYTES + len) {
        let chunk = region.load_words(base + k * CHUNK_BYTES);
        if chunk[3] != tag {
            return None;
        }
        copy_body_words(out, 3 * k, &chunk[..3]);
    }
    done(status, len)
}

/// Host: stop sentinel into chunk 0 of every request slot, where every poller looks.
pub fn write_stop(region: &SharedRegion, layout: &Layout) {
    for slot in 0..layout.slots() {
        region.store_u32(
            layout.req_offset(slot) + TAG_WORD_OFFSET,
            STOP_TAG,
            Ordering::Release,
        );
    }
}

/// Host: ends every debug stall in progress (bumps the release generation).
pub fn release_stalls(region: &SharedRegion, layout: &Layout) {
    region.fetch_add_u32(layout.release_word_offset(), 1, Ordering::AcqRel);
}

// ---- device side (the CPU double; the kernel does the same in CUDA) ----------------------

/// Device: the tag word of chunk 0 of `slot` (inline: the first chunk's tag; buffer: the
/// flag). Acquire, so that the payload read after it is the one written before it.
#[inline]
pub fn poll_request_tag(region: &SharedRegion, layout: &Layout, slot: usize) -> u32 {
    region.load_u32(layout.req_offset(slot) + TAG_WORD_OFFSET, Ordering::Acquire)
}

/// What the device side found when it read a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestRead {
    /// Complete: the stream `[code][arg_len][arg]` is in the stage buffer.
    Ready { code: u32, arg_len: usize },
    /// Some chunk does not carry the tag yet: the host is still writing. Read again.
    Torn,
    /// The header claims more than the slot holds (never written by a correct host).
    Oversized { code: u32 },
}

/// Device, inline mode: reads the request in `slot` whose chunk 0 carries `tag`, and
/// rebuilds its stream in `stage` (at least `req_slot_bytes` bytes).
pub fn read_inline_request(
    region: &SharedRegion,
    layout: &Layout,
    slot: usize,
    tag: u32,
    stage: &mut [u8],
) -> RequestRead {
    let base = layout.req_offset(slot);
    let first = region.load_words(base);
    if first[3] != tag {
        return RequestRead::Torn;
    }
    let (code, arg_len) = (first[0], first[1] as usize);
    if arg_len > layout.max_arg_len() {
        return RequestRead::Oversized { code };
    }
    let chunks = inline_chunks(layout.request_stream_bytes(arg_len));
    if chunks > layout.req_chunks() {
        return RequestRead::Oversized { code };
    }
    for k in 0..chunks {
        let chunk = if k == 0 {
            first
        } else {
            region.load_words(base + k * CHUNK_BYTES)
        };
        if chunk[3] != tag {
            return RequestRead::Torn;
        }
        let at = k * INLINE_DATA_BYTES;
        for (i, w) in chunk[..3].iter().enumerate() {
            stage[at + 4 * i..at + 4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
    }
    RequestRead::Ready { code, arg_len }
}

/// Device, buffer mode: reads the payload of `slot` after its flag was seen, into `stage`.
pub fn read_buffer_request(
    region: &SharedRegion,
    layout: &Layout,
    slot: usize,
    stage: &mut [u8],
) -> RequestRead {
    let payload = layout.req_offset(slot) + CHUNK_BYTES;
    let head = region.load_words(payload);
    let (code, arg_len) = (head[0], head[1] as usize);
    if arg_len > layout.max_arg_len() {
        return RequestRead::Oversized { code };
    }
    let chunks = layout.request_stream_bytes(arg_len).div_ceil(CHUNK_BYTES);
    if chunks > layout.req_chunks() - 1 {
        return RequestRead::Oversized { code };
    }
    for k in 0..chunks {
        let chunk = if k == 0 {
            head
        } else {
            region.load_words(payload + k * CHUNK_BYTES)
        };
        for (i, w) in chunk.iter().enumerate() {
            let at = k * CHUNK_BYTES + 4 * i;
            stage[at..at + 4].copy_from_slice(&w.to_le_bytes());
        }
    }
    RequestRead::Ready { code, arg_len }
}

/// Device: the reply trailer of a request read into `stage` (a reply layout).
#[inline]
pub fn staged_reply_to(stage: &[u8], arg_len: usize) -> ReplyTo {
    let at = 4 * Layout::reply_word(arg_len);
    let w = |i: usize| {
        let b = &stage[at + 4 * i..at + 4 * i + 4];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    };
    ReplyTo {
        request_id: w(0),
        ptp_timestamp: w(1) as u64 | (w(2) as u64) << 32,
    }
}

/// Device: publishes the completion of a response the device side already sent to the
/// QPU: one chunk `{status, DEVICE_SENT | result_len, 0, tag}` (every chunk of the slot on
/// the first lap of a tag cycle, as any response).
#[inline]
pub fn write_sent_completion(
    region: &SharedRegion,
    layout: &Layout,
    slot: usize,
    tag: u32,
    status: i32,
    result_len: usize,
) {
    let base = layout.resp_offset(slot);
    let chunks = if tag == 1 { layout.resp_chunks() } else { 1 };
    for k in (0..chunks).rev() {
        let words = if k == 0 {
            [status as u32, DEVICE_SENT | result_len as u32, 0, tag]
        } else {
            [0, 0, 0, tag]
        };
        region.store_words(base + k * CHUNK_BYTES, words);
    }
}

/// Device: publishes a response in `slot` with `tag`: tagged chunks, one 16-byte store each
/// (the kernel's `st.volatile.global.v4.u32`, no fence).
#[inline]
pub fn write_response(
    region: &SharedRegion,
    layout: &Layout,
    slot: usize,
    tag: u32,
    status: i32,
    result: &[u8],
) {
    write_response_chunks(region, layout, slot, tag, status, result, |_| true)
}

/// [`write_response`], writing only the chunks `write(k)` selects.
pub fn write_response_chunks(
    region: &SharedRegion,
    layout: &Layout,
    slot: usize,
    tag: u32,
    status: i32,
    result: &[u8],
    mut write: impl FnMut(usize) -> bool,
) {
    assert!(
        result.len() <= layout.max_result_len(),
        "result larger than its slot"
    );
    let used = inline_chunks(HEADER_BYTES + result.len());
    let chunks = if tag == 1 { layout.resp_chunks() } else { used };
    let head = [status as u32, result.len() as u32];
    write_tagged_stream(
        region,
        layout.resp_offset(slot),
        tag,
        head,
        result,
        chunks,
        &mut write,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mailbox::layout::{device_code, tag_for};
    use crate::shm::SharedRegion;

    fn layout(rx: RxCompletion) -> Layout {
        Layout::new(4, 256, 64, rx).unwrap()
    }

    #[test]
    fn request_round_trips_in_both_modes() {
        for rx in RxCompletion::ALL {
            let l = layout(rx);
            let mem = SharedRegion::heap(l.total_bytes()).unwrap();
            let r = &mem;
            let mut stage = vec![0u8; l.req_slot_bytes()];
            for len in [0usize, 1, 3, 4, 5, 11, 12, 13, 100, l.max_arg_len()] {
                let arg: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
                let tag = tag_for(5, 4);
                write_request(r, &l, 1, tag, device_code::PARITY, &arg);
                assert_eq!(poll_request_tag(r, &l, 1), tag);
                let read = match rx {
                    RxCompletion::Inline => read_inline_request(r, &l, 1, tag, &mut stage),
                    RxCompletion::Buffer => read_buffer_request(r, &l, 1, &mut stage),
                };
                assert_eq!(
                    read,
                    RequestRead::Ready {
                        code: device_code::PARITY,
                        arg_len: len
                    },
                    "{rx} {len}"
                );
                assert_eq!(&stage[HEADER_BYTES..HEADER_BYTES + len], &arg[..]);
            }
        }
    }

    #[test]
    fn response_round_trips_and_partial_ones_are_refused() {
        let l = layout(RxCompletion::Inline);
        let mem = SharedRegion::heap(l.total_bytes()).unwrap();
        let r = &mem;
        let mut out = vec![0u8; l.max_result_len()];
        let result: Vec<u8> = (0..l.max_result_len() as u8).collect();
        assert_eq!(read_response(r, &l, 2, 3, &mut out), None);
        // Every chunk but one: refused, whichever is missing.
        let chunks = inline_chunks(HEADER_BYTES + result.len());
        for missing in 0..chunks {
            write_response_chunks(r, &l, 2, 3 + missing as u32, 7, &result, |k| k != missing);
            assert_eq!(
                read_response(r, &l, 2, 3 + missing as u32, &mut out),
                None,
                "missing chunk {missing}"
            );
        }
        write_response(r, &l, 2, 9, -4, &result);
        assert_eq!(
            read_response(r, &l, 2, 9, &mut out),
            Some((-4, result.len()))
        );
        assert_eq!(out, result);
        assert_eq!(read_response(r, &l, 2, 8, &mut out), None);
    }

    #[test]
    fn first_lap_of_a_cycle_rewrites_the_whole_slot() {
        let l = layout(RxCompletion::Inline);
        let mem = SharedRegion::heap(l.total_bytes()).unwrap();
        let r = &mem;
        write_request(r, &l, 0, 1, device_code::PARITY, &[1]);
        for k in 0..l.req_chunks() {
            assert_eq!(r.load_words(l.req_offset(0) + k * CHUNK_BYTES)[3], 1);
        }
        write_response(r, &l, 0, 1, 0, &[1]);
        for k in 0..l.resp_chunks() {
            assert_eq!(r.load_words(l.resp_offset(0) + k * CHUNK_BYTES)[3], 1);
        }
        // Other laps write only what the stream needs.
        write_request(r, &l, 1, 2, device_code::PARITY, &[1]);
        assert_eq!(r.load_words(l.req_offset(1) + CHUNK_BYTES)[3], 0);
    }

    #[test]
    fn reply_layouts_carry_the_wire_identity_after_the_argument() {
        for rx in RxCompletion::ALL {
            let l = layout(rx).with_reply(true);
            let mem = SharedRegion::heap(l.total_bytes()).unwrap();
            let r = &mem;
            let mut stage = vec![0u8; l.req_slot_bytes()];
            for len in [0usize, 1, 3, 4, 5, 13, l.max_arg_len()] {
                let arg: Vec<u8> = (0..len).map(|i| (i * 5 + 3) as u8).collect();
                let to = ReplyTo {
                    request_id: 0xdead_0000 + len as u32,
                    ptp_timestamp: 0x0123_4567_89ab_cdef ^ len as u64,
                };
                write_request_to(r, &l, 2, 7, device_code::PARITY, &arg, to);
                let read = match rx {
                    RxCompletion::Inline => read_inline_request(r, &l, 2, 7, &mut stage),
                    RxCompletion::Buffer => read_buffer_request(r, &l, 2, &mut stage),
                };
                assert_eq!(
                    read,
                    RequestRead::Ready {
                        code: device_code::PARITY,
                        arg_len: len
                    },
                    "{rx} {len}"
                );
                assert_eq!(&stage[HEADER_BYTES..HEADER_BYTES + len], &arg[..]);
                assert_eq!(staged_reply_to(&stage, len), to, "{rx} {len}");
            }
            // A header claiming more than fits with the trailer is oversized.
            let plain = layout(rx);
            let too_long = vec![0u8; plain.max_arg_len()];
            write_request(r, &plain, 1, 3, device_code::PARITY, &too_long);
            let read = match rx {
                RxCompletion::Inline => read_inline_request(r, &l, 1, 3, &mut stage),
                RxCompletion::Buffer => read_buffer_request(r, &l, 1, &mut stage),
            };
            assert_eq!(
                read,
                RequestRead::Oversized {
                    code: device_code::PARITY
                }
            );
        }
    }

    #[test]
    fn sent_completions_read_as_sent_and_rewrite_the_slot_on_tag_one() {
        let l = layout(RxCompletion::Inline).with_reply(true);
        let mem = SharedRegion::heap(l.total_bytes()).unwrap();
        let r = &mem;
        let mut out = vec![0u8; l.max_result_len()];
        write_response(r, &l, 3, 5, 0, &[1; 20]);
        write_sent_completion(r, &l, 3, 6, status::UNKNOWN_FUNCTION, 0);
        assert_eq!(
            read_completion(r, &l, 3, 6, &mut out),
            Some(SlotCompletion {
                status: status::UNKNOWN_FUNCTION,
                result_len: 0,
                sent_by_device: true
            })
        );
        assert_eq!(
            read_response(r, &l, 3, 6, &mut out),
            Some((status::UNKNOWN_FUNCTION, 0))
        );
        // Only chunk 0 is written on other laps.
        assert_eq!(r.load_words(l.resp_offset(3) + CHUNK_BYTES)[3], 5);
        write_sent_completion(r, &l, 3, 1, 0, 1);
        for k in 0..l.resp_chunks() {
            assert_eq!(r.load_words(l.resp_offset(3) + k * CHUNK_BYTES)[3], 1);
        }
        assert!(
            read_completion(r, &l, 3, 1, &mut out)
                .unwrap()
                .sent_by_device
        );
        write_response(r, &l, 3, 2, 0, &[1]);
        assert_eq!(
            read_completion(r, &l, 3, 2, &mut out),
            Some(SlotCompletion {
                status: 0,
                result_len: 1,
                sent_by_device: false
            })
        );
    }

    #[test]
    fn stop_reaches_every_slot_and_release_bumps() {
        for rx in RxCompletion::ALL {
            let l = layout(rx);
            let mem = SharedRegion::heap(l.total_bytes()).unwrap();
            let r = &mem;
            write_stop(r, &l);
            for s in 0..l.slots() {
                assert_eq!(poll_request_tag(r, &l, s), STOP_TAG);
            }
            release_stalls(r, &l);
            assert_eq!(r.load_u32(l.release_word_offset(), Ordering::Acquire), 1);
        }
    }
}

//! The slot protocol of [`super::layout`], as functions on a [`Region`]: what the host
//! writes and reads, and what the device side (the CPU double; the kernel mirrors it in
//! `device/forward.cu`) reads and writes.
//!
//! No function here allocates, locks or makes a system call: they are the hot path.
//! The `*_chunks` variants take a filter that says which chunks to write; everything else
//! writes all of them. Tests use the filters to make torn writes on purpose.
#![forbid(unsafe_code)]

use std::sync::atomic::Ordering;

use super::layout::{
    inline_chunks, Layout, CHUNK_BYTES, HEADER_BYTES, INLINE_DATA_BYTES, STOP_TAG, TAG_WORD_OFFSET,
};
use super::region::Region;
use super::RxCompletion;
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

/// Writes the stream `[head][body]` as tagged chunks at `base`: `chunks` of them (the
/// chunks beyond the stream carry zeros), those for which `write(k)` says so.
#[inline]
fn write_tagged_stream(
    region: Region<'_>,
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
            region.store_chunk(
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
/// owns the slot (its previous response was reaped) and checked `arg` fits.
#[inline]
pub fn write_request(
    region: Region<'_>,
    layout: &Layout,
    slot: usize,
    tag: u32,
    code: u32,
    arg: &[u8],
) {
    write_request_chunks(region, layout, slot, tag, code, arg, |_| true)
}

/// [`write_request`], writing only the chunks `write(k)` selects (inline mode: chunk k of
/// the slot; buffer mode: payload chunk k, and `write(usize::MAX)` for the flag).
pub fn write_request_chunks(
    region: Region<'_>,
    layout: &Layout,
    slot: usize,
    tag: u32,
    code: u32,
    arg: &[u8],
    mut write: impl FnMut(usize) -> bool,
) {
    assert!(
        arg.len() <= layout.max_arg_len(),
        "request larger than its slot"
    );
    let base = layout.req_offset(slot);
    let head = [code, arg.len() as u32];
    match layout.rx() {
        RxCompletion::Inline => {
            let used = inline_chunks(HEADER_BYTES + arg.len());
            // First lap of a tag cycle: rewrite the whole slot (see layout.rs, Tags).
            let chunks = if tag == 1 { layout.req_chunks() } else { used };
            write_tagged_stream(region, base, tag, head, arg, chunks, &mut write);
        }
        RxCompletion::Buffer => {
            let payload = base + CHUNK_BYTES;
            let chunks = (HEADER_BYTES + arg.len()).div_ceil(CHUNK_BYTES);
            for k in 0..chunks {
                if write(k) {
                    let j = 4 * k;
                    region.store_chunk(
                        payload + k * CHUNK_BYTES,
                        [
                            stream_word(head, arg, j),
                            stream_word(head, arg, j + 1),
                            stream_word(head, arg, j + 2),
                            stream_word(head, arg, j + 3),
                        ],
                    );
                }
            }
            if write(usize::MAX) {
                // The flag, after the payload: Release orders it after the payload stores
                // (and x86 keeps stores in program order for the PCIe reader).
                region.store_u32(base + TAG_WORD_OFFSET, tag, Ordering::Release);
            }
        }
    }
}

/// Host: the response in `slot` if all its chunks carry `tag`. Returns `(status,
/// result_len)` and leaves the result in `out[..result_len]`; `None` while incomplete.
/// `out` must hold [`Layout::max_result_len`] bytes.
#[inline]
pub fn read_response(
    region: Region<'_>,
    layout: &Layout,
    slot: usize,
    tag: u32,
    out: &mut [u8],
) -> Option<(i32, usize)> {
    let base = layout.resp_offset(slot);
    let first = region.load_chunk(base);
    if first[3] != tag {
        return None;
    }
    let status = first[0] as i32;
    let len = first[1] as usize;
    if len > layout.max_result_len() || len > out.len() {
        // Complete but impossible: a device-side bug. Answer it rather than wait forever.
        return Some((status::LENGTH_MISMATCH, 0));
    }
    let out = &mut out[..len];
    copy_body_words(out, 0, &first[..3]);
    for k in 1..inline_chunks(HEADER_BYTES + len) {
        let chunk = region.load_chunk(base + k * CHUNK_BYTES);
        if chunk[3] != tag {
            return None;
        }
        copy_body_words(out, 3 * k, &chunk[..3]);
    }
    Some((status, len))
}

/// Host: stop sentinel into chunk 0 of every request slot, where every poller looks.
pub fn write_stop(region: Region<'_>, layout: &Layout) {
    for slot in 0..layout.slots() {
        region.store_u32(
            layout.req_offset(slot) + TAG_WORD_OFFSET,
            STOP_TAG,
            Ordering::Release,
        );
    }
}

/// Host: ends every debug stall in progress (bumps the release generation).
pub fn release_stalls(region: Region<'_>, layout: &Layout) {
    region.fetch_add_u32(layout.release_word_offset(), 1, Ordering::AcqRel);
}

// ---- device side (the CPU double; the kernel does the same in CUDA) ----------------------

/// Device: the tag word of chunk 0 of `slot` (inline: the first chunk's tag; buffer: the
/// flag). Acquire, so that the payload read after it is the one written before it.
#[inline]
pub fn poll_request_tag(region: Region<'_>, layout: &Layout, slot: usize) -> u32 {
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
    region: Region<'_>,
    layout: &Layout,
    slot: usize,
    tag: u32,
    stage: &mut [u8],
) -> RequestRead {
    let base = layout.req_offset(slot);
    let first = region.load_chunk(base);
    if first[3] != tag {
        return RequestRead::Torn;
    }
    let (code, arg_len) = (first[0], first[1] as usize);
    let chunks = inline_chunks(HEADER_BYTES.saturating_add(arg_len));
    if chunks > layout.req_chunks() {
        return RequestRead::Oversized { code };
    }
    for k in 0..chunks {
        let chunk = if k == 0 {
            first
        } else {
            region.load_chunk(base + k * CHUNK_BYTES)
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
    region: Region<'_>,
    layout: &Layout,
    slot: usize,
    stage: &mut [u8],
) -> RequestRead {
    let payload = layout.req_offset(slot) + CHUNK_BYTES;
    let head = region.load_chunk(payload);
    let (code, arg_len) = (head[0], head[1] as usize);
    let chunks = HEADER_BYTES.saturating_add(arg_len).div_ceil(CHUNK_BYTES);
    if chunks > layout.req_chunks() - 1 {
        return RequestRead::Oversized { code };
    }
    for k in 0..chunks {
        let chunk = if k == 0 {
            head
        } else {
            region.load_chunk(payload + k * CHUNK_BYTES)
        };
        for (i, w) in chunk.iter().enumerate() {
            let at = k * CHUNK_BYTES + 4 * i;
            stage[at..at + 4].copy_from_slice(&w.to_le_bytes());
        }
    }
    RequestRead::Ready { code, arg_len }
}

/// Device: publishes a response in `slot` with `tag`: tagged chunks, one 16-byte store each
/// (the kernel's `st.volatile.global.v4.u32`, no fence).
#[inline]
pub fn write_response(
    region: Region<'_>,
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
    region: Region<'_>,
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
    use crate::mailbox::HostRegion;

    fn layout(rx: RxCompletion) -> Layout {
        Layout::new(4, 256, 64, rx).unwrap()
    }

    #[test]
    fn request_round_trips_in_both_modes() {
        for rx in RxCompletion::ALL {
            let l = layout(rx);
            let mem = HostRegion::zeroed(l.total_bytes());
            let r = mem.region();
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
        let mem = HostRegion::zeroed(l.total_bytes());
        let r = mem.region();
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
        let mem = HostRegion::zeroed(l.total_bytes());
        let r = mem.region();
        write_request(r, &l, 0, 1, device_code::PARITY, &[1]);
        for k in 0..l.req_chunks() {
            assert_eq!(r.load_chunk(l.req_offset(0) + k * CHUNK_BYTES)[3], 1);
        }
        write_response(r, &l, 0, 1, 0, &[1]);
        for k in 0..l.resp_chunks() {
            assert_eq!(r.load_chunk(l.resp_offset(0) + k * CHUNK_BYTES)[3], 1);
        }
        // Other laps write only what the stream needs.
        write_request(r, &l, 1, 2, device_code::PARITY, &[1]);
        assert_eq!(r.load_chunk(l.req_offset(1) + CHUNK_BYTES)[3], 0);
    }

    #[test]
    fn stop_reaches_every_slot_and_release_bumps() {
        for rx in RxCompletion::ALL {
            let l = layout(rx);
            let mem = HostRegion::zeroed(l.total_bytes());
            let r = mem.region();
            write_stop(r, &l);
            for s in 0..l.slots() {
                assert_eq!(poll_request_tag(r, &l, s), STOP_TAG);
            }
            release_stalls(r, &l);
            assert_eq!(r.load_u32(l.release_word_offset(), Ordering::Acquire), 1);
        }
    }
}

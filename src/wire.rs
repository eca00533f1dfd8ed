//! CUDA-Q Realtime RPC wire format: CUQR requests and CUQS responses.
//!
//! Both headers are 24 bytes, packed, little-endian:
//!
//! ```text
//! request  (CUQR): u32 magic | u32 function_id | u32 arg_len    | u32 request_id | u64 ptp_timestamp
//! response (CUQS): u32 magic | i32 status      | u32 result_len | u32 request_id | u64 ptp_timestamp
//! ```
//!
//! Parsing is zero-copy: a [`RequestView`] borrows the received buffer. Writing goes
//! into a caller's buffer; nothing here allocates.
#![forbid(unsafe_code)]

use thiserror::Error;

/// `"CUQR"` read as a little-endian u32.
pub const REQUEST_MAGIC: u32 = 0x4355_5152;
/// `"CUQS"` read as a little-endian u32.
pub const RESPONSE_MAGIC: u32 = 0x4355_5153;
/// Size of either header in bytes.
pub const HEADER_LEN: usize = 24;
/// Largest UDP payload over IPv4: the largest datagram any transport carries.
pub const MAX_DATAGRAM: usize = 65_507;

/// 32-bit FNV-1a of a handler name: the `function_id` that selects it.
pub const fn function_id(name: &str) -> u32 {
    let bytes = name.as_bytes();
    let mut hash: u32 = 0x811c_9dc5;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u32;
        hash = hash.wrapping_mul(0x0100_0193);
        i += 1;
    }
    hash
}

/// Response status codes. 0 is success, >0 a handler's own error, <0 a protocol error.
///
/// Codes marked *never sent* describe datagrams whose header cannot be trusted; those
/// are dropped and counted, not answered, but the codes exist so counters, logs and
/// the emulator name them the same way.
pub mod status {
    /// The handler ran and the result follows.
    pub const OK: i32 = 0;
    /// Handler error: the argument is malformed for this handler (for a decoder: the
    /// event count does not match the loaded model).
    pub const BAD_ARGUMENT: i32 = 1;
    /// Handler error: a decoder request holds more defects (detection events) than the
    /// decoder's budget; it was not decoded (docs/decoder-budget.md). Retrying the same
    /// syndrome gets the same answer.
    pub const OVER_BUDGET: i32 = 2;
    /// Never sent: the first four bytes are not the CUQR magic.
    pub const BAD_MAGIC: i32 = -1;
    /// Never sent: shorter than the 24-byte header.
    pub const TRUNCATED_HEADER: i32 = -2;
    /// `arg_len` disagrees with the number of bytes that follow the header.
    pub const LENGTH_MISMATCH: i32 = -3;
    /// No handler is registered under `function_id`.
    pub const UNKNOWN_FUNCTION: i32 = -4;
    /// The request is larger than this forwarder accepts (`--max-request` / slot size).
    pub const OVERSIZED: i32 = -5;
    /// The forwarder's queue toward the decoder is full; retry later.
    pub const OVERLOAD: i32 = -6;
    /// The decoder did not answer within its deadline (watchdog).
    pub const DECODER_TIMEOUT: i32 = -7;
    /// The forwarder is shutting down and will not run this request.
    pub const SHUTTING_DOWN: i32 = -8;

    /// Short stable name for a status code (CSV columns, logs, counters).
    pub fn name(code: i32) -> &'static str {
        match code {
            OK => "ok",
            BAD_ARGUMENT => "bad_argument",
            OVER_BUDGET => "over_budget",
            BAD_MAGIC => "bad_magic",
            TRUNCATED_HEADER => "truncated_header",
            LENGTH_MISMATCH => "length_mismatch",
            UNKNOWN_FUNCTION => "unknown_function",
            OVERSIZED => "oversized",
            OVERLOAD => "overload",
            DECODER_TIMEOUT => "decoder_timeout",
            SHUTTING_DOWN => "shutting_down",
            c if c > 0 => "handler_error",
            _ => "unknown_status",
        }
    }

    /// Every status code the forwarder can send, for documentation and tests.
    pub const SENT: [i32; 9] = [
        OK,
        BAD_ARGUMENT,
        OVER_BUDGET,
        LENGTH_MISMATCH,
        UNKNOWN_FUNCTION,
        OVERSIZED,
        OVERLOAD,
        DECODER_TIMEOUT,
        SHUTTING_DOWN,
    ];
}

/// Why a datagram is not a well-formed message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum WireError {
    #[error("datagram of {len} bytes is shorter than the {HEADER_LEN}-byte header")]
    TruncatedHeader { len: usize },
    #[error("bad magic {found:#010x}, expected {expected:#010x}")]
    BadMagic { found: u32, expected: u32 },
    #[error("header declares {declared} payload bytes but {actual} follow it")]
    LengthMismatch { declared: u32, actual: usize },
    #[error("output buffer of {capacity} bytes cannot hold {needed}")]
    BufferTooSmall { needed: usize, capacity: usize },
}

impl WireError {
    /// The status code that names this error (see [`status`]).
    pub fn status(&self) -> i32 {
        match self {
            WireError::TruncatedHeader { .. } => status::TRUNCATED_HEADER,
            WireError::BadMagic { .. } => status::BAD_MAGIC,
            WireError::LengthMismatch { .. } => status::LENGTH_MISMATCH,
            WireError::BufferTooSmall { .. } => status::OVERSIZED,
        }
    }

    /// True when the header itself is readable, so the sender can be answered.
    pub fn header_parses(&self) -> bool {
        matches!(self, WireError::LengthMismatch { .. })
    }
}

/// A CUQR request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestHeader {
    pub function_id: u32,
    pub arg_len: u32,
    pub request_id: u32,
    pub ptp_timestamp: u64,
}

/// A CUQS response header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResponseHeader {
    pub status: i32,
    pub result_len: u32,
    pub request_id: u32,
    pub ptp_timestamp: u64,
}

/// A parsed request borrowing its argument bytes from the receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestView<'a> {
    pub header: RequestHeader,
    pub arg: &'a [u8],
}

/// A parsed response borrowing its result bytes from the receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseView<'a> {
    pub header: ResponseHeader,
    pub result: &'a [u8],
}

#[inline]
fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

#[inline]
fn u64_at(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(b)
}

/// The three fields both headers share, after the magic and length checks.
#[inline]
fn split_header(buf: &[u8], magic: u32) -> Result<(u32, u32, u32, u64, &[u8]), WireError> {
    if buf.len() < HEADER_LEN {
        return Err(WireError::TruncatedHeader { len: buf.len() });
    }
    let found = u32_at(buf, 0);
    if found != magic {
        return Err(WireError::BadMagic {
            found,
            expected: magic,
        });
    }
    Ok((
        u32_at(buf, 4),
        u32_at(buf, 8),
        u32_at(buf, 12),
        u64_at(buf, 16),
        &buf[HEADER_LEN..],
    ))
}

/// Parses only the request header, ignoring what follows: enough to answer a request
/// whose body is wrong (length mismatch, oversized).
pub fn parse_request_header(buf: &[u8]) -> Result<RequestHeader, WireError> {
    let (function_id, arg_len, request_id, ptp_timestamp, _) = split_header(buf, REQUEST_MAGIC)?;
    Ok(RequestHeader {
        function_id,
        arg_len,
        request_id,
        ptp_timestamp,
    })
}

/// Parses a whole CUQR datagram. `arg_len` must equal the bytes after the header.
pub fn parse_request(buf: &[u8]) -> Result<RequestView<'_>, WireError> {
    let (function_id, arg_len, request_id, ptp_timestamp, arg) = split_header(buf, REQUEST_MAGIC)?;
    if arg_len as usize != arg.len() {
        return Err(WireError::LengthMismatch {
            declared: arg_len,
            actual: arg.len(),
        });
    }
    Ok(RequestView {
        header: RequestHeader {
            function_id,
            arg_len,
            request_id,
            ptp_timestamp,
        },
        arg,
    })
}

/// Parses a whole CUQS datagram. `result_len` must equal the bytes after the header.
pub fn parse_response(buf: &[u8]) -> Result<ResponseView<'_>, WireError> {
    let (status, result_len, request_id, ptp_timestamp, result) =
        split_header(buf, RESPONSE_MAGIC)?;
    if result_len as usize != result.len() {
        return Err(WireError::LengthMismatch {
            declared: result_len,
            actual: result.len(),
        });
    }
    Ok(ResponseView {
        header: ResponseHeader {
            status: status as i32,
            result_len,
            request_id,
            ptp_timestamp,
        },
        result,
    })
}

#[inline]
fn put_header(out: &mut [u8], words: [u32; 4], ts: u64) {
    for (i, w) in words.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    out[16..24].copy_from_slice(&ts.to_le_bytes());
}

#[inline]
fn check_room(out: &[u8], needed: usize) -> Result<(), WireError> {
    if out.len() < needed {
        return Err(WireError::BufferTooSmall {
            needed,
            capacity: out.len(),
        });
    }
    Ok(())
}

/// Writes a request header (with `arg_len` set from `arg`) and `arg` into `out`;
/// returns the datagram length.
pub fn write_request(
    out: &mut [u8],
    function_id: u32,
    request_id: u32,
    ptp_timestamp: u64,
    arg: &[u8],
) -> Result<usize, WireError> {
    let len = HEADER_LEN + arg.len();
    check_room(out, len)?;
    put_header(
        out,
        [REQUEST_MAGIC, function_id, arg.len() as u32, request_id],
        ptp_timestamp,
    );
    out[HEADER_LEN..len].copy_from_slice(arg);
    Ok(len)
}

/// Writes a response header into `out[..24]`; the result bytes are expected in
/// `out[24..24 + result_len]` already (handlers write them in place).
pub fn write_response_header(out: &mut [u8], header: &ResponseHeader) -> Result<(), WireError> {
    check_room(out, HEADER_LEN + header.result_len as usize)?;
    put_header(
        out,
        [
            RESPONSE_MAGIC,
            header.status as u32,
            header.result_len,
            header.request_id,
        ],
        header.ptp_timestamp,
    );
    Ok(())
}

/// Writes a whole response (header + `result`) into `out`; returns its length.
pub fn write_response(
    out: &mut [u8],
    status: i32,
    request_id: u32,
    ptp_timestamp: u64,
    result: &[u8],
) -> Result<usize, WireError> {
    let len = HEADER_LEN + result.len();
    check_room(out, len)?;
    out[HEADER_LEN..len].copy_from_slice(result);
    write_response_header(
        out,
        &ResponseHeader {
            status,
            result_len: result.len() as u32,
            request_id,
            ptp_timestamp,
        },
    )?;
    Ok(len)
}

/// Writes an error response (no result bytes) echoing `req`'s id and timestamp.
pub fn write_error_response(
    out: &mut [u8],
    req: &RequestHeader,
    status: i32,
) -> Result<usize, WireError> {
    write_response(out, status, req.request_id, req.ptp_timestamp, &[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn magics_spell_their_names() {
        assert_eq!(&REQUEST_MAGIC.to_be_bytes(), b"CUQR");
        assert_eq!(&RESPONSE_MAGIC.to_be_bytes(), b"CUQS");
    }

    #[test]
    fn fnv1a_matches_reference_vectors() {
        // Published FNV-1a 32-bit test vectors.
        assert_eq!(function_id(""), 0x811c_9dc5);
        assert_eq!(function_id("a"), 0xe40c_292c);
        assert_eq!(function_id("foobar"), 0xbf9c_f968);
    }

    #[test]
    fn request_layout_is_little_endian_and_packed() {
        let mut buf = [0u8; 64];
        let n = write_request(
            &mut buf,
            0x0403_0201,
            0x0c0b_0a09,
            0x1817_1615_1413_1211,
            &[0xaa, 0xbb],
        )
        .unwrap();
        assert_eq!(n, 26);
        assert_eq!(
            &buf[..26],
            &[
                0x52, 0x51, 0x55, 0x43, 1, 2, 3, 4, 2, 0, 0, 0, 9, 10, 11, 12, 0x11, 0x12, 0x13,
                0x14, 0x15, 0x16, 0x17, 0x18, 0xaa, 0xbb
            ]
        );
    }

    #[test]
    fn each_malformation_has_its_own_error() {
        let mut buf = [0u8; 64];
        let n = write_request(&mut buf, 7, 1, 2, &[1, 2, 3]).unwrap();
        assert!(matches!(
            parse_request(&buf[..10]),
            Err(WireError::TruncatedHeader { len: 10 })
        ));
        assert!(matches!(
            parse_request(&buf[..n - 1]),
            Err(WireError::LengthMismatch {
                declared: 3,
                actual: 2
            })
        ));
        assert!(matches!(
            parse_request(&buf[..n + 1]),
            Err(WireError::LengthMismatch {
                declared: 3,
                actual: 4
            })
        ));
        let mut bad = buf;
        bad[0] ^= 1;
        assert!(matches!(
            parse_request(&bad[..n]),
            Err(WireError::BadMagic { .. })
        ));
        // A response is not a request.
        let mut resp = [0u8; 32];
        let m = write_response(&mut resp, 0, 1, 2, &[1]).unwrap();
        assert!(matches!(
            parse_request(&resp[..m]),
            Err(WireError::BadMagic { .. })
        ));
        assert!(parse_response(&resp[..m]).is_ok());
    }

    #[test]
    fn writers_refuse_small_buffers() {
        let mut buf = [0u8; 25];
        assert_eq!(
            write_request(&mut buf, 1, 1, 1, &[0, 0]),
            Err(WireError::BufferTooSmall {
                needed: 26,
                capacity: 25
            })
        );
        assert!(write_response(&mut buf, 0, 1, 1, &[0, 0]).is_err());
    }

    #[test]
    fn status_names_are_distinct() {
        let mut names: Vec<_> = status::SENT.iter().map(|&c| status::name(c)).collect();
        names.push(status::name(status::BAD_MAGIC));
        names.push(status::name(status::TRUNCATED_HEADER));
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    proptest! {
        #[test]
        fn request_round_trips(fid: u32, id: u32, ts: u64, arg in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let mut buf = vec![0u8; HEADER_LEN + arg.len()];
            let n = write_request(&mut buf, fid, id, ts, &arg).unwrap();
            let v = parse_request(&buf[..n]).unwrap();
            prop_assert_eq!(v.header, RequestHeader { function_id: fid, arg_len: arg.len() as u32, request_id: id, ptp_timestamp: ts });
            prop_assert_eq!(v.arg, &arg[..]);
            prop_assert_eq!(parse_request_header(&buf[..n]).unwrap(), v.header);
        }

        #[test]
        fn response_round_trips(st: i32, id: u32, ts: u64, res in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut buf = vec![0u8; HEADER_LEN + res.len()];
            let n = write_response(&mut buf, st, id, ts, &res).unwrap();
            let v = parse_response(&buf[..n]).unwrap();
            prop_assert_eq!(v.header, ResponseHeader { status: st, result_len: res.len() as u32, request_id: id, ptp_timestamp: ts });
            prop_assert_eq!(v.result, &res[..]);
        }

        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let r = parse_request(&bytes);
            if let Ok(v) = r {
                prop_assert_eq!(v.arg.len(), bytes.len() - HEADER_LEN);
            }
            let _ = parse_response(&bytes);
            let _ = parse_request_header(&bytes);
        }

        #[test]
        fn header_parses_whenever_magic_and_length_allow(mut bytes in proptest::collection::vec(any::<u8>(), 24..128)) {
            bytes[..4].copy_from_slice(&REQUEST_MAGIC.to_le_bytes());
            let h = parse_request_header(&bytes).unwrap();
            match parse_request(&bytes) {
                Ok(v) => prop_assert_eq!(v.header, h),
                Err(e) => {
                    prop_assert!(e.header_parses());
                    prop_assert_eq!(e.status(), status::LENGTH_MISMATCH);
                }
            }
        }
    }
}

//! The streaming protocol on the CUQR wire: rounds of syndromes in, committed windows out.
//!
//! Three functions, named after CUDA-Q QEC's real-time calls (`function_id` = FNV-1a of the
//! name): [`ENQUEUE_SYNDROMES`] carries rounds of one or more streams (a stream is one
//! logical qubit's decoder, addressed by its `decoder_id`), [`GET_CORRECTIONS`] reads a
//! stream's accumulated flips, [`RESET_DECODER`] starts streams again at round 0. The service
//! answers with CUQS responses whose result is an array of 32-byte [`Record`]s: a commit per
//! decoded window, and a refusal per run of rounds it could not take, each with its
//! [`refusal`] status. Every field is little-endian; every header and record is a multiple of
//! 16 bytes, so a GPU reads them with aligned 16-byte loads. The byte-by-byte layout, the
//! per-stream state machine and the accounting rules are in docs/streaming-protocol.md.
//!
//! This module is wire only: views that borrow the received bytes ([`BatchView`]), a writer
//! into a caller's buffer ([`BatchWriter`]), and the record codec. Nothing here allocates,
//! decodes or touches the network.
#![forbid(unsafe_code)]

use crate::wire::function_id;

/// Rounds of syndromes for one or more streams (CUDA-Q QEC: `enqueue_syndromes`).
pub const ENQUEUE_SYNDROMES: &str = "stream.enqueue_syndromes";
/// A stream's observable flips committed so far (CUDA-Q QEC: `get_corrections`).
pub const GET_CORRECTIONS: &str = "stream.get_corrections";
/// Starts streams again at round 0 (CUDA-Q QEC: `reset_decoder`).
pub const RESET_DECODER: &str = "stream.reset_decoder";

/// `function_id` of [`ENQUEUE_SYNDROMES`].
pub const ENQUEUE_SYNDROMES_ID: u32 = function_id(ENQUEUE_SYNDROMES);
/// `function_id` of [`GET_CORRECTIONS`].
pub const GET_CORRECTIONS_ID: u32 = function_id(GET_CORRECTIONS);
/// `function_id` of [`RESET_DECODER`].
pub const RESET_DECODER_ID: u32 = function_id(RESET_DECODER);

/// The layout version in every batch header.
pub const VERSION: u16 = 1;
/// Bytes of the batch header, of a block header, of the other requests' arguments.
pub const HEADER_BYTES: usize = 16;
/// Bytes of one response record.
pub const RECORD_BYTES: usize = 32;
/// Blocks (their headers and data) start at multiples of this.
pub const ALIGN: usize = 16;

/// Block flag: reset each of the block's streams before its rounds (its first round is then
/// round 0 of a new run).
pub const FLAG_RESET: u8 = 1;
/// Block flag: each stream's last round in the block is its final round (the data qubits'
/// measurement); the stream commits everything left and is finished until reset.
pub const FLAG_FINAL: u8 = 2;
const KNOWN_FLAGS: u8 = FLAG_RESET | FLAG_FINAL;

/// `get_corrections` flag: clear the accumulated flips after reading them.
pub const FLAG_RESET_CORRECTIONS: u32 = 1;

/// Why a stream refused rounds (the `status` of a [`RecordKind::Refused`] record).
pub mod refusal {
    /// `decoder_id` is not a stream this service serves.
    pub const UNKNOWN_STREAM: u16 = 1;
    /// The round was already received (or is older): the stream expects a later one.
    pub const ROUND_REPEATED: u16 = 2;
    /// Rounds between the expected one and this one never arrived: the stream cannot go on
    /// until it is reset.
    pub const ROUNDS_MISSING: u16 = 3;
    /// The stream had its final round: it takes rounds again after a reset.
    pub const STREAM_FINISHED: u16 = 4;
    /// The queue of rounds waiting for this stream's decoder was full: the rounds were not
    /// kept, and the stream still expects the first of them.
    pub const STREAM_BUFFER_FULL: u16 = 5;
    /// A final round before the model's fewest rounds: refused, the stream goes on.
    pub const TOO_SHORT: u16 = 6;

    /// Short stable name (counters, CSV columns, logs).
    pub fn name(code: u16) -> &'static str {
        match code {
            UNKNOWN_STREAM => "unknown_stream",
            ROUND_REPEATED => "round_repeated",
            ROUNDS_MISSING => "rounds_missing",
            STREAM_FINISHED => "stream_finished",
            STREAM_BUFFER_FULL => "stream_buffer_full",
            TOO_SHORT => "too_short",
            _ => "unknown_refusal",
        }
    }

    /// Every refusal code, in order (counter arrays are indexed by `code - 1`).
    pub const ALL: [u16; 6] = [
        UNKNOWN_STREAM,
        ROUND_REPEATED,
        ROUNDS_MISSING,
        STREAM_FINISHED,
        STREAM_BUFFER_FULL,
        TOO_SHORT,
    ];
}

/// Why a request's argument is not a well-formed streaming request: the whole request is
/// answered `BAD_ARGUMENT` and nothing of it is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    #[error("argument of {got} bytes; a {what} needs {need}")]
    Short {
        what: &'static str,
        need: usize,
        got: usize,
    },
    #[error("layout version {0}; this service speaks version {VERSION}")]
    Version(u16),
    #[error("rounds of {got} bytes; this service's rounds are {expected} bytes")]
    RoundBytes { expected: usize, got: usize },
    #[error("a batch needs at least one block")]
    NoBlocks,
    #[error("block {block}: a block needs at least one stream and one round")]
    EmptyBlock { block: u32 },
    #[error("block {block}: unknown flags {flags:#04x}")]
    Flags { block: u32, flags: u8 },
    #[error("block {block}: streams {first}.. run past the last decoder_id")]
    StreamRange { block: u32, first: u32 },
    #[error("block {block}: rounds from {first} run past the last round index")]
    RoundRange { block: u32, first: u64 },
    #[error("reserved field at byte {at} is {value:#x}, not 0")]
    Reserved { at: usize, value: u64 },
    #[error("the header counts {declared} rounds in all, the blocks hold {actual}")]
    EntryCount { declared: u32, actual: u64 },
    #[error("{declared} blocks declared, {actual} bytes left after the last one that fits")]
    Trailing { declared: u32, actual: usize },
    #[error("record of kind {0}: not a record this protocol defines")]
    RecordKind(u16),
    #[error("result of {0} bytes is not a whole number of 32-byte records")]
    RecordLength(usize),
    #[error("output buffer of {capacity} bytes cannot hold {needed}")]
    BufferTooSmall { needed: usize, capacity: usize },
}

#[inline]
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

#[inline]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// `n` rounded up to a multiple of [`ALIGN`].
#[inline]
pub const fn aligned(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// Bytes of a block of `streams` streams of `rounds` rounds each, header and padding
/// included.
#[inline]
pub const fn block_bytes(streams: usize, rounds: usize, round_bytes: usize) -> usize {
    HEADER_BYTES + aligned(streams * rounds * round_bytes)
}

/// One block: consecutive streams, the same rounds for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockView<'a> {
    /// The first stream's `decoder_id`; the block covers `first_stream .. first_stream + streams`.
    pub first_stream: u32,
    pub streams: u16,
    /// Rounds per stream in this block.
    pub rounds: u8,
    /// [`FLAG_RESET`], [`FLAG_FINAL`].
    pub flags: u8,
    /// The index of each stream's first round here; its rounds are `first_round ..
    /// first_round + rounds`.
    pub first_round: u64,
    round_bytes: usize,
    /// `streams * rounds` rounds, stream-major, without the padding.
    data: &'a [u8],
}

impl<'a> BlockView<'a> {
    /// Round `r` (0-based within the block) of the block's stream `s` (0-based).
    #[inline]
    pub fn round(&self, s: usize, r: usize) -> &'a [u8] {
        let at = (s * self.rounds as usize + r) * self.round_bytes;
        &self.data[at..at + self.round_bytes]
    }

    /// The header fields.
    pub fn header(&self) -> BlockHeader {
        BlockHeader {
            first_stream: self.first_stream,
            streams: self.streams,
            rounds: self.rounds,
            flags: self.flags,
            first_round: self.first_round,
        }
    }

    /// The rounds of the block's streams `s0 .. s1` (0-based), back to back.
    #[inline]
    pub fn streams_data(&self, s0: usize, s1: usize) -> &'a [u8] {
        let n = self.rounds as usize * self.round_bytes;
        &self.data[s0 * n..s1 * n]
    }

    /// Stream `s`'s rounds, back to back.
    #[inline]
    pub fn stream_rounds(&self, s: usize) -> &'a [u8] {
        let n = self.rounds as usize * self.round_bytes;
        &self.data[s * n..(s + 1) * n]
    }

    pub fn resets(&self) -> bool {
        self.flags & FLAG_RESET != 0
    }

    pub fn ends_with_final(&self) -> bool {
        self.flags & FLAG_FINAL != 0
    }

    /// Round entries (stream x round) in the block.
    pub fn entries(&self) -> u64 {
        u64::from(self.streams) * u64::from(self.rounds)
    }
}

/// A parsed `stream.enqueue_syndromes` argument, every block checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchView<'a> {
    pub round_bytes: usize,
    pub blocks: u32,
    /// Round entries in all blocks.
    pub entries: u32,
    body: &'a [u8],
}

impl<'a> BatchView<'a> {
    /// Parses and checks a whole batch: `round_bytes` is the service's round size.
    pub fn parse(arg: &'a [u8], round_bytes: usize) -> Result<BatchView<'a>, ProtocolError> {
        if arg.len() < HEADER_BYTES {
            return Err(ProtocolError::Short {
                what: "batch header",
                need: HEADER_BYTES,
                got: arg.len(),
            });
        }
        let version = u16_at(arg, 0);
        if version != VERSION {
            return Err(ProtocolError::Version(version));
        }
        let got = usize::from(u16_at(arg, 2));
        if got != round_bytes {
            return Err(ProtocolError::RoundBytes {
                expected: round_bytes,
                got,
            });
        }
        let blocks = u32_at(arg, 4);
        let entries = u32_at(arg, 8);
        let reserved = u32_at(arg, 12);
        if reserved != 0 {
            return Err(ProtocolError::Reserved {
                at: 12,
                value: reserved.into(),
            });
        }
        if blocks == 0 {
            return Err(ProtocolError::NoBlocks);
        }
        let view = BatchView {
            round_bytes,
            blocks,
            entries,
            body: &arg[HEADER_BYTES..],
        };
        // Walk every block once so that iteration later cannot fail.
        let mut rest = view.body;
        let mut actual = 0u64;
        for b in 0..blocks {
            let (block, next) = split_block(rest, round_bytes, b)?;
            actual += block.entries();
            rest = next;
        }
        if !rest.is_empty() {
            return Err(ProtocolError::Trailing {
                declared: blocks,
                actual: rest.len(),
            });
        }
        if actual != u64::from(entries) {
            return Err(ProtocolError::EntryCount {
                declared: entries,
                actual,
            });
        }
        Ok(view)
    }

    /// The blocks in order.
    pub fn blocks(&self) -> Blocks<'a> {
        Blocks {
            rest: self.body,
            round_bytes: self.round_bytes,
            left: self.blocks,
        }
    }
}

/// Iterator over a checked batch's blocks.
#[derive(Debug, Clone)]
pub struct Blocks<'a> {
    rest: &'a [u8],
    round_bytes: usize,
    left: u32,
}

impl<'a> Iterator for Blocks<'a> {
    type Item = BlockView<'a>;
    fn next(&mut self) -> Option<BlockView<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The batch was checked when parsed.
        let (block, rest) = split_block(self.rest, self.round_bytes, 0).ok()?;
        self.rest = rest;
        Some(block)
    }
}

/// One block from the front of `buf`, and what follows it.
fn split_block(
    buf: &[u8],
    round_bytes: usize,
    index: u32,
) -> Result<(BlockView<'_>, &[u8]), ProtocolError> {
    if buf.len() < HEADER_BYTES {
        return Err(ProtocolError::Short {
            what: "block header",
            need: HEADER_BYTES,
            got: buf.len(),
        });
    }
    let first_stream = u32_at(buf, 0);
    let streams = u16_at(buf, 4);
    let rounds = buf[6];
    let flags = buf[7];
    let first_round = u64_at(buf, 8);
    if streams == 0 || rounds == 0 {
        return Err(ProtocolError::EmptyBlock { block: index });
    }
    if flags & !KNOWN_FLAGS != 0 {
        return Err(ProtocolError::Flags {
            block: index,
            flags,
        });
    }
    if u64::from(first_stream) + u64::from(streams) > 1 << 32 {
        return Err(ProtocolError::StreamRange {
            block: index,
            first: first_stream,
        });
    }
    if first_round.checked_add(u64::from(rounds)).is_none() {
        return Err(ProtocolError::RoundRange {
            block: index,
            first: first_round,
        });
    }
    let data_len = usize::from(streams) * usize::from(rounds) * round_bytes;
    let total = HEADER_BYTES + aligned(data_len);
    if buf.len() < total {
        return Err(ProtocolError::Short {
            what: "block",
            need: total,
            got: buf.len(),
        });
    }
    Ok((
        BlockView {
            first_stream,
            streams,
            rounds,
            flags,
            first_round,
            round_bytes,
            data: &buf[HEADER_BYTES..HEADER_BYTES + data_len],
        },
        &buf[total..],
    ))
}

/// Writes a `stream.enqueue_syndromes` argument into a caller's buffer, block by block.
#[derive(Debug)]
pub struct BatchWriter<'a> {
    out: &'a mut [u8],
    len: usize,
    round_bytes: usize,
    blocks: u32,
    entries: u32,
}

impl<'a> BatchWriter<'a> {
    /// Starts a batch of rounds of `round_bytes` bytes in `out`.
    pub fn new(out: &'a mut [u8], round_bytes: usize) -> Result<BatchWriter<'a>, ProtocolError> {
        if out.len() < HEADER_BYTES {
            return Err(ProtocolError::BufferTooSmall {
                needed: HEADER_BYTES,
                capacity: out.len(),
            });
        }
        Ok(BatchWriter {
            out,
            len: HEADER_BYTES,
            round_bytes,
            blocks: 0,
            entries: 0,
        })
    }

    /// Bytes written so far (with the header).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.blocks == 0
    }

    /// Bytes a block of `streams` x `rounds` would add.
    pub fn block_len(&self, streams: usize, rounds: usize) -> usize {
        block_bytes(streams, rounds, self.round_bytes)
    }

    /// Appends a block; `data` holds `streams * rounds` rounds, stream-major.
    pub fn block(
        &mut self,
        first_stream: u32,
        streams: u16,
        rounds: u8,
        flags: u8,
        first_round: u64,
        data: &[u8],
    ) -> Result<(), ProtocolError> {
        let head = BlockHeader {
            first_stream,
            streams,
            rounds,
            flags,
            first_round,
        };
        self.len += write_block(&mut self.out[self.len..], &head, self.round_bytes, data)?;
        self.blocks += 1;
        self.entries += u32::from(streams) * u32::from(rounds);
        Ok(())
    }

    /// Writes the batch header; returns the argument's length.
    pub fn finish(self) -> usize {
        write_batch_header(self.out, self.round_bytes, self.blocks, self.entries);
        self.len
    }
}

/// A block's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    pub first_stream: u32,
    pub streams: u16,
    pub rounds: u8,
    pub flags: u8,
    pub first_round: u64,
}

/// Writes a block (header, `data`, zero padding) at the start of `out`; returns its length.
pub fn write_block(
    out: &mut [u8],
    h: &BlockHeader,
    round_bytes: usize,
    data: &[u8],
) -> Result<usize, ProtocolError> {
    let data_len = usize::from(h.streams) * usize::from(h.rounds) * round_bytes;
    if data.len() != data_len {
        return Err(ProtocolError::Short {
            what: "block's rounds",
            need: data_len,
            got: data.len(),
        });
    }
    let total = block_bytes(h.streams.into(), h.rounds.into(), round_bytes);
    if out.len() < total {
        return Err(ProtocolError::BufferTooSmall {
            needed: total,
            capacity: out.len(),
        });
    }
    let b = &mut out[..total];
    b[0..4].copy_from_slice(&h.first_stream.to_le_bytes());
    b[4..6].copy_from_slice(&h.streams.to_le_bytes());
    b[6] = h.rounds;
    b[7] = h.flags;
    b[8..16].copy_from_slice(&h.first_round.to_le_bytes());
    b[HEADER_BYTES..HEADER_BYTES + data_len].copy_from_slice(data);
    b[HEADER_BYTES + data_len..].fill(0);
    Ok(total)
}

/// Writes a batch header into `out[..16]` (`out` holds at least 16 bytes).
pub fn write_batch_header(out: &mut [u8], round_bytes: usize, blocks: u32, entries: u32) {
    let h = &mut out[..HEADER_BYTES];
    h[0..2].copy_from_slice(&VERSION.to_le_bytes());
    h[2..4].copy_from_slice(&(round_bytes as u16).to_le_bytes());
    h[4..8].copy_from_slice(&blocks.to_le_bytes());
    h[8..12].copy_from_slice(&entries.to_le_bytes());
    h[12..16].fill(0);
}

/// A `stream.get_corrections` argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GetCorrections {
    pub stream: u32,
    /// [`FLAG_RESET_CORRECTIONS`].
    pub flags: u32,
}

/// A `stream.reset_decoder` argument: streams `first_stream .. first_stream + streams`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResetDecoder {
    pub first_stream: u32,
    pub streams: u32,
}

fn fixed_arg<'a>(arg: &'a [u8], what: &'static str) -> Result<&'a [u8], ProtocolError> {
    if arg.len() != HEADER_BYTES {
        return Err(ProtocolError::Short {
            what,
            need: HEADER_BYTES,
            got: arg.len(),
        });
    }
    let reserved = u64_at(arg, 8);
    if reserved != 0 {
        return Err(ProtocolError::Reserved {
            at: 8,
            value: reserved,
        });
    }
    Ok(arg)
}

impl GetCorrections {
    pub fn parse(arg: &[u8]) -> Result<GetCorrections, ProtocolError> {
        let a = fixed_arg(arg, "get_corrections argument")?;
        let flags = u32_at(a, 4);
        if flags & !FLAG_RESET_CORRECTIONS != 0 {
            return Err(ProtocolError::Reserved {
                at: 4,
                value: flags.into(),
            });
        }
        Ok(GetCorrections {
            stream: u32_at(a, 0),
            flags,
        })
    }

    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..4].copy_from_slice(&self.stream.to_le_bytes());
        b[4..8].copy_from_slice(&self.flags.to_le_bytes());
        b
    }
}

impl ResetDecoder {
    pub fn parse(arg: &[u8]) -> Result<ResetDecoder, ProtocolError> {
        let a = fixed_arg(arg, "reset_decoder argument")?;
        let r = ResetDecoder {
            first_stream: u32_at(a, 0),
            streams: u32_at(a, 4),
        };
        if r.streams == 0 {
            return Err(ProtocolError::EmptyBlock { block: 0 });
        }
        if u64::from(r.first_stream) + u64::from(r.streams) > 1 << 32 {
            return Err(ProtocolError::StreamRange {
                block: 0,
                first: r.first_stream,
            });
        }
        Ok(r)
    }

    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..4].copy_from_slice(&self.first_stream.to_le_bytes());
        b[4..8].copy_from_slice(&self.streams.to_le_bytes());
        b
    }
}

/// What a response record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum RecordKind {
    /// A window's first rounds are final: `value` holds their observable flips.
    Commit = 1,
    /// The final window: every round left, the final round included; the stream is finished.
    CommitFinal = 2,
    /// Rounds not taken; `status` says why ([`refusal`]).
    Refused = 3,
    /// The answer to `get_corrections`.
    Corrections = 4,
    /// The stream was reset (by `reset_decoder` or a block's [`FLAG_RESET`]).
    Reset = 5,
}

impl RecordKind {
    pub fn from_u16(k: u16) -> Option<RecordKind> {
        Some(match k {
            1 => RecordKind::Commit,
            2 => RecordKind::CommitFinal,
            3 => RecordKind::Refused,
            4 => RecordKind::Corrections,
            5 => RecordKind::Reset,
            _ => return None,
        })
    }
}

/// `value` of a refusal whose service part does not know the round the stream expects.
pub const EXPECTED_UNKNOWN: u64 = u64::MAX;

/// One 32-byte response record. The fields' meaning per kind:
///
/// | kind | `first_round` | `value` | `rounds` | `window_rounds` |
/// |---|---|---|---|---|
/// | commit, commit-final | first round committed | observable flips (bit k: Lk) | rounds committed | rounds the window read from `first_round` |
/// | refused | first round refused | round the stream expects next, or [`EXPECTED_UNKNOWN`] | rounds refused | 0 |
/// | corrections | next round to commit | flips accumulated since the last reset | 0 | 0 |
/// | reset | rounds received before the reset | rounds discarded (received, not committed) | 0 | 0 |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Record {
    pub stream: u32,
    pub kind: RecordKind,
    /// 0, or for [`RecordKind::Refused`] a [`refusal`] code.
    pub status: u16,
    pub first_round: u64,
    pub value: u64,
    pub rounds: u32,
    pub window_rounds: u32,
}

impl Record {
    /// The last round the record's window needed (commits only).
    pub fn through_round(&self) -> Option<u64> {
        matches!(self.kind, RecordKind::Commit | RecordKind::CommitFinal)
            .then(|| self.first_round + u64::from(self.window_rounds.max(1)) - 1)
    }

    pub fn encode(&self, out: &mut [u8]) {
        let b = &mut out[..RECORD_BYTES];
        b[0..4].copy_from_slice(&self.stream.to_le_bytes());
        b[4..6].copy_from_slice(&(self.kind as u16).to_le_bytes());
        b[6..8].copy_from_slice(&self.status.to_le_bytes());
        b[8..16].copy_from_slice(&self.first_round.to_le_bytes());
        b[16..24].copy_from_slice(&self.value.to_le_bytes());
        b[24..28].copy_from_slice(&self.rounds.to_le_bytes());
        b[28..32].copy_from_slice(&self.window_rounds.to_le_bytes());
    }

    pub fn decode(b: &[u8]) -> Result<Record, ProtocolError> {
        if b.len() < RECORD_BYTES {
            return Err(ProtocolError::RecordLength(b.len()));
        }
        let k = u16_at(b, 4);
        Ok(Record {
            stream: u32_at(b, 0),
            kind: RecordKind::from_u16(k).ok_or(ProtocolError::RecordKind(k))?,
            status: u16_at(b, 6),
            first_round: u64_at(b, 8),
            value: u64_at(b, 16),
            rounds: u32_at(b, 24),
            window_rounds: u32_at(b, 28),
        })
    }
}

/// The records of a response's result, checked to be whole.
pub fn records(
    result: &[u8],
) -> Result<impl Iterator<Item = Result<Record, ProtocolError>> + '_, ProtocolError> {
    if result.len() % RECORD_BYTES != 0 {
        return Err(ProtocolError::RecordLength(result.len()));
    }
    Ok(result.chunks_exact(RECORD_BYTES).map(Record::decode))
}

#[cfg(test)]
mod tests;

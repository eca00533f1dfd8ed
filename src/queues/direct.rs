//! The receive protocol of the `gpu-direct` data path, as plain functions: what a device
//! side (the GPU kernel in `device/direct.cu`, or the CPU stand-in) does with a link's
//! receive queue, and the checks it makes on each request. The kernel mirrors these
//! functions line for line; `docs/gpu-direct.md` explains why each step is there.
//!
//! - A link's receive WQEs are posted once: WQE i points at receive buffer i. The device
//!   side polls receive CQE number `seq` at its [`RxPosition`]; a CQE is new when its
//!   opcode is not INVALID and its owner bit is the lap's ([`poll_cqe`]).
//! - Messages of at most 32 bytes arrive inside the CQE (`MLX5_INLINE_SCATTER_32`), larger
//!   ones in receive buffer `seq % rx_slots` (a WRITE-with-immediate names it in `imm`).
//! - One read returns the CQE and the first buffer chunks together. Reads made in parallel
//!   may each see an older moment, so every 16-byte chunk the device side consumes is
//!   overwritten with [`POISON`]; a chunk read as poison next to a new CQE is read once more
//!   (the new CQE was written last, so the second read sees the new data).
//! - A receive is recycled (its credit returned through the QP doorbell record, its CQE
//!   through the CQ's consumer index) only when every earlier one has been
//!   ([`CreditWindow`]), after the device side's system fence, so the NIC never overwrites
//!   a buffer whose poison has not landed.
//! - [`check_request`] gives each request the answer the CPU forwarder gives it.
#![forbid(unsafe_code)]

use crate::abi;
use crate::handler::Registry;
use crate::mlx5::layout::cqe as cqel;
use crate::mlx5::CqeOpcode;
use crate::stats::DropKind;
use crate::wire::{self, status, RequestHeader, HEADER_LEN};
use crate::{Error, Result};

/// What a consumed 16-byte chunk holds until the NIC writes it again.
pub const POISON: [u8; 16] = [0xff; 16];

/// Bytes of a message that fit in a 64-byte CQE (`MLX5_INLINE_SCATTER_32`).
pub const CQE_INLINE_BYTES: usize = 32;

/// The last chunk of the stop sentinel CQE (bytes 48..64): a NIC never writes the INVALID
/// opcode, so this cannot be a completion.
pub fn stop_chunk() -> [u8; 16] {
    let mut c = [0u8; 16];
    for w in 0..3 {
        c[4 * w..4 * w + 4].copy_from_slice(&abi::STOP_WORD.to_le_bytes());
    }
    c[15] = (CqeOpcode::Invalid as u8) << 4;
    c
}

/// Where a poller group stands in a link's receive queue: receive number `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxPosition {
    pub seq: u64,
    cqes: u32,
    slots: u32,
}

impl RxPosition {
    /// Receive number `seq` of a link with `cqes` CQEs and `slots` receive buffers (both
    /// powers of two).
    pub fn new(seq: u64, cqes: u32, slots: u32) -> RxPosition {
        debug_assert!(cqes.is_power_of_two() && slots.is_power_of_two());
        RxPosition { seq, cqes, slots }
    }

    /// The CQE slot this receive completes in.
    pub fn cqe_slot(&self) -> u32 {
        (self.seq & (u64::from(self.cqes) - 1)) as u32
    }

    /// The owner bit a new CQE in that slot carries: the lap's parity.
    pub fn owner(&self) -> bool {
        (self.seq / u64::from(self.cqes)) & 1 == 1
    }

    /// The receive buffer a SEND lands in (receive WQE `seq % slots` points at it).
    pub fn rx_slot(&self) -> u32 {
        (self.seq & (u64::from(self.slots) - 1)) as u32
    }

    /// `step` receives further on (a group's next position).
    pub fn advance(&mut self, step: u32) {
        self.seq += u64::from(step);
    }
}

/// A receive completion, from the CQE's last two chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxCompletion {
    pub opcode: u8,
    /// The message is in the CQE's first 32 bytes.
    pub inline32: bool,
    pub byte_cnt: u32,
    pub imm: u32,
}

/// What a poll of a CQE slot found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CqePoll {
    /// No new CQE (an older lap's, or never written).
    Empty,
    /// The stop sentinel.
    Stop,
    /// A new CQE whose chunk 2 (byte count, immediate) was read before the NIC wrote it:
    /// read chunk 2 again.
    Torn,
    Ready(RxCompletion),
}

/// Reads CQE chunks 2 (bytes 32..48) and 3 (48..64) as the device side does; `owner` is
/// the position's lap parity.
pub fn poll_cqe(chunk2: &[u8; 16], chunk3: &[u8; 16], owner: bool) -> CqePoll {
    let op_own = chunk3[15];
    let opcode = op_own >> 4;
    if opcode == CqeOpcode::Invalid as u8 {
        let stop = stop_chunk();
        return if chunk3[..12] == stop[..12] {
            CqePoll::Stop
        } else {
            CqePoll::Empty
        };
    }
    if (op_own & cqel::OWNER_MASK == 1) != owner {
        return CqePoll::Empty;
    }
    if *chunk2 == POISON {
        return CqePoll::Torn;
    }
    CqePoll::Ready(completion(chunk2, chunk3))
}

/// The completion a new CQE describes (after [`poll_cqe`] said it is new, or after chunk
/// 2 was read again following [`CqePoll::Torn`]).
pub fn completion(chunk2: &[u8; 16], chunk3: &[u8; 16]) -> RxCompletion {
    let op_own = chunk3[15];
    let be = |at: usize| u32::from_be_bytes(chunk2[at..at + 4].try_into().expect("4 bytes"));
    RxCompletion {
        opcode: op_own >> 4,
        inline32: (op_own >> 2) & 3 == abi::CQE_FORMAT_INLINE_32 as u8,
        imm: be(cqel::IMM_INVAL_PKEY - 32),
        byte_cnt: be(cqel::BYTE_CNT - 32),
    }
}

/// The device's function table: function_id -> index of the handler (at most
/// [`abi::MAX_FUNCTIONS`] entries), built from a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionTable {
    ids: Vec<u32>,
    codes: Vec<u32>,
}

impl FunctionTable {
    pub fn new(registry: &Registry) -> Result<FunctionTable> {
        let entries = registry.entries();
        if entries.len() > abi::MAX_FUNCTIONS as usize {
            return Err(Error::InvalidSetting {
                key: "handlers",
                detail: format!(
                    "gpu-direct serves at most {} functions; {} are registered",
                    abi::MAX_FUNCTIONS,
                    entries.len()
                ),
            });
        }
        Ok(FunctionTable {
            ids: entries.iter().map(|r| r.function_id).collect(),
            codes: entries.iter().map(|r| r.handler.device_code()).collect(),
        })
    }

    /// The index of `function_id`'s entry.
    pub fn lookup(&self, function_id: u32) -> Option<usize> {
        self.ids.iter().position(|&id| id == function_id)
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The table as the kernel's parameters hold it.
    pub fn fill(&self, params: &mut abi::DirectParams) {
        params.nfunctions = self.ids.len() as u32;
        params.function_ids[..self.ids.len()].copy_from_slice(&self.ids);
        params.function_codes[..self.codes.len()].copy_from_slice(&self.codes);
    }
}

/// What the device side does with one received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No answer: dropped and counted.
    Drop(DropKind),
    /// Answer with this error status (no handler runs).
    Answer(RequestHeader, i32),
    /// Run function-table entry `index` on the argument.
    Serve(RequestHeader, usize),
}

/// The CPU forwarder's rules for a received message of `byte_cnt` bytes whose first bytes
/// are `head` (at least the header's 24 when `byte_cnt` has them): shorter than a header
/// or not CUQR is dropped; a length that disagrees with `arg_len` is `LENGTH_MISMATCH`
/// (`OVERSIZED` when `arg_len` is over the limit); an argument over `max_request_bytes` is
/// `OVERSIZED`; an unknown function is `UNKNOWN_FUNCTION`.
pub fn check_request(
    head: &[u8],
    byte_cnt: u32,
    max_request_bytes: u32,
    table: &FunctionTable,
) -> Verdict {
    if (byte_cnt as usize) < HEADER_LEN || head.len() < HEADER_LEN {
        return Verdict::Drop(DropKind::TruncatedHeader);
    }
    let header = match wire::parse_request_header(head) {
        Ok(h) => h,
        Err(_) => return Verdict::Drop(DropKind::BadMagic),
    };
    let oversized = header.arg_len > max_request_bytes;
    if header.arg_len as u64 != u64::from(byte_cnt) - HEADER_LEN as u64 {
        let code = if oversized {
            status::OVERSIZED
        } else {
            status::LENGTH_MISMATCH
        };
        return Verdict::Answer(header, code);
    }
    if oversized {
        return Verdict::Answer(header, status::OVERSIZED);
    }
    match table.lookup(header.function_id) {
        Some(index) => Verdict::Serve(header, index),
        None => Verdict::Answer(header, status::UNKNOWN_FUNCTION),
    }
}

/// The counter a verdict's outcome goes to (`abi::CTR_*`): drops by kind, answers by
/// status.
pub fn outcome_counter(drop: Option<DropKind>, answer_status: i32) -> u32 {
    match drop {
        Some(DropKind::TruncatedHeader) => abi::CTR_TRUNCATED_HEADER,
        Some(DropKind::BadMagic) => abi::CTR_BAD_MAGIC,
        Some(DropKind::RxError) => abi::CTR_RX_ERROR,
        Some(_) => abi::CTR_SEND_FAILED,
        None => match answer_status {
            status::OK => abi::CTR_OK,
            status::BAD_ARGUMENT => abi::CTR_BAD_ARGUMENT,
            status::LENGTH_MISMATCH => abi::CTR_LENGTH_MISMATCH,
            status::UNKNOWN_FUNCTION => abi::CTR_UNKNOWN_FUNCTION,
            status::OVERSIZED => abi::CTR_OVERSIZED,
            _ => abi::CTR_OTHER_ERROR,
        },
    }
}

/// Receives completed out of order, returned to the NIC in order: the credit for receive
/// `seq` goes back only when every earlier receive has completed too.
#[derive(Debug, Clone)]
pub struct CreditWindow {
    done: Vec<u64>,
    next: u64,
    slots: u32,
}

impl CreditWindow {
    /// A window over `slots` receive buffers, all posted, none consumed.
    pub fn new(slots: u32) -> CreditWindow {
        CreditWindow {
            done: vec![0; (slots as usize).div_ceil(64)],
            next: 0,
            slots,
        }
    }

    /// Marks receive `seq` complete; returns whether the contiguous prefix grew. A `seq`
    /// outside the window (already returned, or more than `slots` ahead) is a caller bug
    /// and is ignored.
    pub fn complete(&mut self, seq: u64) -> bool {
        if seq < self.next || seq >= self.next + u64::from(self.slots) {
            debug_assert!(false, "receive {seq} outside the window at {}", self.next);
            return false;
        }
        let bit = (seq % u64::from(self.slots)) as usize;
        self.done[bit / 64] |= 1 << (bit % 64);
        let start = self.next;
        loop {
            let b = (self.next % u64::from(self.slots)) as usize;
            if self.done[b / 64] & (1 << (b % 64)) == 0 {
                break;
            }
            self.done[b / 64] &= !(1 << (b % 64));
            self.next += 1;
        }
        self.next != start
    }

    /// Receives completed in order: the CQ's consumer index.
    pub fn consumed(&self) -> u64 {
        self.next
    }

    /// The receive queue's producer counter that returns every completed receive.
    pub fn posted(&self) -> u64 {
        self.next + u64::from(self.slots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::Handler;
    use crate::mlx5::Cqe;

    fn chunks(c: &Cqe, owner: bool) -> ([u8; 16], [u8; 16]) {
        let b = c.encode(owner);
        (b[32..48].try_into().unwrap(), b[48..64].try_into().unwrap())
    }

    #[test]
    fn polls_see_new_cqes_by_owner_and_the_stop_sentinel() {
        let mut c = Cqe::new(CqeOpcode::RespWrImm, 7, 3);
        c.imm = 5;
        c.byte_cnt = 100;
        let (c2, c3) = chunks(&c, true);
        assert_eq!(poll_cqe(&c2, &c3, false), CqePoll::Empty);
        let CqePoll::Ready(r) = poll_cqe(&c2, &c3, true) else {
            panic!("not ready")
        };
        assert_eq!(
            (r.opcode, r.inline32, r.imm, r.byte_cnt),
            (1, false, 5, 100)
        );
        assert_eq!(poll_cqe(&POISON, &c3, true), CqePoll::Torn);
        let mut scattered = c3;
        scattered[15] = ((CqeOpcode::RespSend as u8) << 4) | 0x04 | 1;
        let CqePoll::Ready(r) = poll_cqe(&c2, &scattered, true) else {
            panic!("not ready")
        };
        assert!(r.inline32);
        assert_eq!(poll_cqe(&c2, &stop_chunk(), false), CqePoll::Stop);
        assert_eq!(poll_cqe(&c2, &stop_chunk(), true), CqePoll::Stop);
        let (e2, e3) = chunks(&Cqe::new(CqeOpcode::Invalid, 0, 0), false);
        assert_eq!(poll_cqe(&e2, &e3, false), CqePoll::Empty);
    }

    #[test]
    fn positions_wrap_cqes_and_slots_with_the_lap_parity() {
        let mut p = RxPosition::new(0, 8, 4);
        assert_eq!((p.cqe_slot(), p.owner(), p.rx_slot()), (0, false, 0));
        p.advance(9);
        assert_eq!((p.cqe_slot(), p.owner(), p.rx_slot()), (1, true, 1));
        p.advance(7);
        assert_eq!((p.cqe_slot(), p.owner(), p.rx_slot()), (0, false, 0));
    }

    fn request(function: &str, arg: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_LEN + arg.len()];
        wire::write_request(&mut b, wire::function_id(function), 9, 77, arg).unwrap();
        b
    }

    #[test]
    fn requests_get_the_forwarders_verdicts() {
        let mut reg = Registry::default();
        reg.register("parity", Handler::Parity).unwrap();
        let t = FunctionTable::new(&reg).unwrap();
        let ok = request("parity", &[1, 2, 3]);
        let n = ok.len() as u32;
        assert!(matches!(check_request(&ok, n, 64, &t), Verdict::Serve(h, 0) if h.request_id == 9));
        assert_eq!(
            check_request(&ok[..10], 10, 64, &t),
            Verdict::Drop(DropKind::TruncatedHeader)
        );
        let mut bad = ok.clone();
        bad[0] ^= 1;
        assert_eq!(
            check_request(&bad, n, 64, &t),
            Verdict::Drop(DropKind::BadMagic)
        );
        let answer = |b: &[u8], n: u32, max: u32| match check_request(b, n, max, &t) {
            Verdict::Answer(_, s) => s,
            v => panic!("{v:?}"),
        };
        assert_eq!(answer(&ok, n + 1, 64), status::LENGTH_MISMATCH);
        assert_eq!(answer(&ok, n, 2), status::OVERSIZED);
        assert_eq!(answer(&ok, n + 1, 2), status::OVERSIZED);
        assert_eq!(
            answer(&request("nope", &[1]), 25, 64),
            status::UNKNOWN_FUNCTION
        );
    }

    #[test]
    fn credits_return_in_order() {
        let mut w = CreditWindow::new(4);
        assert_eq!((w.consumed(), w.posted()), (0, 4));
        assert!(!w.complete(1));
        assert!(!w.complete(2));
        assert!(w.complete(0));
        assert_eq!((w.consumed(), w.posted()), (3, 7));
        assert!(w.complete(3));
        for s in 4..100 {
            assert!(w.complete(s));
        }
        assert_eq!(w.consumed(), 100);
    }
}

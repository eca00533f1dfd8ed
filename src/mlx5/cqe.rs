//! Completion queue entries (64 bytes) and the owner-bit protocol of a CQ.
//!
//! The NIC writes CQE number `pi` into slot `pi % cqe_cnt` with owner bit
//! `(pi / cqe_cnt) & 1`; the consumer at index `ci` takes the CQE in slot `ci % cqe_cnt`
//! only when its opcode is not `INVALID` and its owner bit is `(ci / cqe_cnt) & 1`, so a
//! CQE left from the previous lap is never mistaken for a new one. A fresh CQ has every
//! slot's `op_own` set to `INVALID << 4` (owner 0).
#![forbid(unsafe_code)]

use super::layout::cqe;

/// The CQE opcode (`op_own >> 4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CqeOpcode {
    /// Requester: a send WQE completed.
    Req = 0,
    /// Responder: an RDMA WRITE with immediate arrived (consumed a receive WQE).
    RespWrImm = 1,
    /// Responder: a SEND arrived.
    RespSend = 2,
    /// Responder: a SEND with immediate arrived.
    RespSendImm = 3,
    /// Requester: a send WQE failed (see the syndrome).
    ReqErr = 13,
    /// Responder: a receive failed (see the syndrome).
    RespErr = 14,
    /// Not written by the NIC (yet).
    Invalid = 15,
}

impl CqeOpcode {
    pub fn from_nibble(n: u8) -> Option<CqeOpcode> {
        Some(match n {
            0 => CqeOpcode::Req,
            1 => CqeOpcode::RespWrImm,
            2 => CqeOpcode::RespSend,
            3 => CqeOpcode::RespSendImm,
            13 => CqeOpcode::ReqErr,
            14 => CqeOpcode::RespErr,
            15 => CqeOpcode::Invalid,
            _ => return None,
        })
    }

    pub fn is_error(&self) -> bool {
        matches!(self, CqeOpcode::ReqErr | CqeOpcode::RespErr)
    }
}

/// `MLX5_CQE_SYNDROME_*`: why an error CQE was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum Syndrome {
    LocalLength = 0x01,
    LocalQpOp = 0x02,
    LocalProt = 0x04,
    WrFlush = 0x05,
    MwBind = 0x06,
    BadResp = 0x10,
    LocalAccess = 0x11,
    RemoteInvalReq = 0x12,
    RemoteAccess = 0x13,
    RemoteOp = 0x14,
    TransportRetryExc = 0x15,
    RnrRetryExc = 0x16,
    RemoteAborted = 0x22,
}

impl Syndrome {
    pub const ALL: [Syndrome; 13] = [
        Syndrome::LocalLength,
        Syndrome::LocalQpOp,
        Syndrome::LocalProt,
        Syndrome::WrFlush,
        Syndrome::MwBind,
        Syndrome::BadResp,
        Syndrome::LocalAccess,
        Syndrome::RemoteInvalReq,
        Syndrome::RemoteAccess,
        Syndrome::RemoteOp,
        Syndrome::TransportRetryExc,
        Syndrome::RnrRetryExc,
        Syndrome::RemoteAborted,
    ];

    pub fn from_u8(v: u8) -> Option<Syndrome> {
        Syndrome::ALL.into_iter().find(|s| *s as u8 == v)
    }

    /// The name rdma-core gives it, less the `MLX5_CQE_SYNDROME_` prefix.
    pub fn name(&self) -> &'static str {
        match self {
            Syndrome::LocalLength => "LOCAL_LENGTH_ERR",
            Syndrome::LocalQpOp => "LOCAL_QP_OP_ERR",
            Syndrome::LocalProt => "LOCAL_PROT_ERR",
            Syndrome::WrFlush => "WR_FLUSH_ERR",
            Syndrome::MwBind => "MW_BIND_ERR",
            Syndrome::BadResp => "BAD_RESP_ERR",
            Syndrome::LocalAccess => "LOCAL_ACCESS_ERR",
            Syndrome::RemoteInvalReq => "REMOTE_INVAL_REQ_ERR",
            Syndrome::RemoteAccess => "REMOTE_ACCESS_ERR",
            Syndrome::RemoteOp => "REMOTE_OP_ERR",
            Syndrome::TransportRetryExc => "TRANSPORT_RETRY_EXC_ERR",
            Syndrome::RnrRetryExc => "RNR_RETRY_EXC_ERR",
            Syndrome::RemoteAborted => "REMOTE_ABORTED_ERR",
        }
    }
}

/// A decoded CQE. Fields that do not apply to its opcode are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cqe {
    pub opcode: CqeOpcode,
    /// Raw opcode nibble (kept for opcodes [`CqeOpcode`] does not name).
    pub opcode_raw: u8,
    pub owner: bool,
    pub solicited: bool,
    /// Immediate data (host order) of a responder CQE.
    pub imm: u32,
    pub byte_cnt: u32,
    pub timestamp: u64,
    /// QP number (24 bits).
    pub qpn: u32,
    /// Send opcode (requester CQEs) or WQE opcode (error CQEs): the top byte at 56.
    pub sop: u8,
    /// The WQE's index (send queue) or the receive WQE counter.
    pub wqe_counter: u16,
    /// Error CQEs: `MLX5_CQE_SYNDROME_*`.
    pub syndrome: u8,
    pub vendor_err_synd: u8,
}

impl Cqe {
    /// A success CQE.
    pub fn new(opcode: CqeOpcode, qpn: u32, wqe_counter: u16) -> Cqe {
        Cqe {
            opcode,
            opcode_raw: opcode as u8,
            owner: false,
            solicited: false,
            imm: 0,
            byte_cnt: 0,
            timestamp: 0,
            qpn,
            sop: 0,
            wqe_counter,
            syndrome: 0,
            vendor_err_synd: 0,
        }
    }

    /// An error CQE with `syndrome`.
    pub fn error(
        opcode: CqeOpcode,
        qpn: u32,
        wqe_counter: u16,
        wqe_opcode: u8,
        syndrome: Syndrome,
    ) -> Cqe {
        Cqe {
            sop: wqe_opcode,
            syndrome: syndrome as u8,
            ..Cqe::new(opcode, qpn, wqe_counter)
        }
    }

    /// The 64 bytes the NIC writes, with the owner bit of the lap it writes in.
    /// `op_own` is byte 63: written last by a writer that cares (see the soft NIC).
    pub fn encode(&self, owner: bool) -> [u8; cqe::SIZE] {
        let mut b = [0u8; cqe::SIZE];
        b[cqe::IMM_INVAL_PKEY..][..4].copy_from_slice(&self.imm.to_be_bytes());
        b[cqe::BYTE_CNT..][..4].copy_from_slice(&self.byte_cnt.to_be_bytes());
        if self.opcode.is_error() {
            b[cqe::VENDOR_ERR_SYND] = self.vendor_err_synd;
            b[cqe::SYNDROME] = self.syndrome;
        } else {
            b[cqe::TIMESTAMP..][..8].copy_from_slice(&self.timestamp.to_be_bytes());
        }
        let w = (self.sop as u32) << 24 | (self.qpn & 0x00ff_ffff);
        b[cqe::SOP_DROP_QPN..][..4].copy_from_slice(&w.to_be_bytes());
        b[cqe::WQE_COUNTER..][..2].copy_from_slice(&self.wqe_counter.to_be_bytes());
        b[cqe::OP_OWN] = self.opcode_raw << 4 | (self.solicited as u8) << 1 | owner as u8;
        b
    }

    /// Decodes any 64 bytes (ownership is the [`CqCursor`]'s business).
    pub fn parse(b: &[u8; cqe::SIZE]) -> Cqe {
        let be32 = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let op_own = b[cqe::OP_OWN];
        let raw = op_own >> 4;
        let opcode = CqeOpcode::from_nibble(raw).unwrap_or(CqeOpcode::Invalid);
        let w = be32(cqe::SOP_DROP_QPN);
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&b[cqe::TIMESTAMP..cqe::TIMESTAMP + 8]);
        let is_err = opcode.is_error();
        Cqe {
            opcode,
            opcode_raw: raw,
            owner: op_own & cqe::OWNER_MASK != 0,
            solicited: op_own & 2 != 0,
            imm: be32(cqe::IMM_INVAL_PKEY),
            byte_cnt: be32(cqe::BYTE_CNT),
            timestamp: if is_err { 0 } else { u64::from_be_bytes(ts) },
            qpn: w & 0x00ff_ffff,
            sop: (w >> 24) as u8,
            wqe_counter: u16::from_be_bytes([b[cqe::WQE_COUNTER], b[cqe::WQE_COUNTER + 1]]),
            syndrome: if is_err { b[cqe::SYNDROME] } else { 0 },
            vendor_err_synd: if is_err { b[cqe::VENDOR_ERR_SYND] } else { 0 },
        }
    }

    pub fn syndrome(&self) -> Option<Syndrome> {
        if self.opcode.is_error() {
            Syndrome::from_u8(self.syndrome)
        } else {
            None
        }
    }
}

/// The `op_own` byte of a slot nobody has written yet.
pub const EMPTY_OP_OWN: u8 = (CqeOpcode::Invalid as u8) << 4;

/// Owner bit of CQE number `index` in a CQ of `cqe_cnt` (a power of two) entries.
#[inline]
pub const fn owner_for(index: u32, cqe_cnt: u32) -> bool {
    index & cqe_cnt != 0
}

/// The consumer's position in a CQ of `cqe_cnt` entries (a power of two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqCursor {
    ci: u32,
    cqe_cnt: u32,
}

impl CqCursor {
    /// # Panics
    /// When `cqe_cnt` is not a power of two of at least 2.
    pub fn new(cqe_cnt: u32) -> CqCursor {
        assert!(
            cqe_cnt >= 2 && cqe_cnt.is_power_of_two(),
            "cqe_cnt {cqe_cnt} must be a power of two >= 2"
        );
        CqCursor { ci: 0, cqe_cnt }
    }

    /// Consumer index (24 bits go to the CQ doorbell record).
    pub fn ci(&self) -> u32 {
        self.ci
    }

    /// Slot the next CQE will be in.
    pub fn slot(&self) -> usize {
        (self.ci & (self.cqe_cnt - 1)) as usize
    }

    /// Owner bit the next CQE must carry.
    pub fn expected_owner(&self) -> bool {
        owner_for(self.ci, self.cqe_cnt)
    }

    /// Whether the `op_own` byte of the current slot says the CQE is new: checked before
    /// reading the rest (the NIC writes `op_own` last).
    pub fn owns(&self, op_own: u8) -> bool {
        op_own >> 4 != CqeOpcode::Invalid as u8
            && (op_own & cqe::OWNER_MASK != 0) == self.expected_owner()
    }

    /// Takes the CQE in `bytes` (the current slot) if it is new, advancing the cursor.
    pub fn take(&mut self, bytes: &[u8; cqe::SIZE]) -> Option<Cqe> {
        if !self.owns(bytes[cqe::OP_OWN]) {
            return None;
        }
        self.ci = self.ci.wrapping_add(1);
        Some(Cqe::parse(bytes))
    }

    /// Value for the CQ doorbell record's consumer index (host order; store big-endian).
    pub fn dbrec_value(&self) -> u32 {
        self.ci & 0x00ff_ffff
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn opcode_strategy() -> impl Strategy<Value = CqeOpcode> {
        prop_oneof![
            Just(CqeOpcode::Req),
            Just(CqeOpcode::RespWrImm),
            Just(CqeOpcode::RespSend),
            Just(CqeOpcode::RespSendImm),
            Just(CqeOpcode::ReqErr),
            Just(CqeOpcode::RespErr),
        ]
    }

    #[test]
    fn error_cqe_layout() {
        let c = Cqe::error(
            CqeOpcode::ReqErr,
            0x12_3456,
            0xbeef,
            0x0a,
            Syndrome::LocalQpOp,
        );
        let b = c.encode(true);
        assert_eq!(b[55], 0x02);
        assert_eq!(&b[56..60], &[0x0a, 0x12, 0x34, 0x56]);
        assert_eq!(&b[60..62], &[0xbe, 0xef]);
        assert_eq!(b[63], 0xd1);
        assert_eq!(Cqe::parse(&b).syndrome(), Some(Syndrome::LocalQpOp));
    }

    #[test]
    fn stale_and_empty_slots_are_not_taken_and_parity_flips_per_lap() {
        let n = 4;
        let mut cq = vec![[0u8; 64]; n as usize];
        for s in cq.iter_mut() {
            s[63] = EMPTY_OP_OWN;
        }
        let mut cur = CqCursor::new(n);
        assert!(cur.take(&cq[0]).is_none(), "fresh CQ is empty");
        for pi in 0..3 * n {
            let slot = (pi % n) as usize;
            let before = cur.take(&cq[slot]);
            assert!(
                before.is_none(),
                "slot {slot} holds last lap's CQE at pi {pi}"
            );
            cq[slot] = Cqe::new(CqeOpcode::Req, 1, pi as u16).encode(owner_for(pi, n));
            let got = cur.take(&cq[slot]).expect("new CQE");
            assert_eq!(got.wqe_counter, pi as u16);
            assert_eq!(got.owner, (pi / n) % 2 == 1);
        }
        assert_eq!(cur.ci(), 3 * n);
    }

    proptest! {
        #[test]
        fn cqe_round_trips(op in opcode_strategy(), owner: bool, se: bool, imm: u32, bc: u32, ts: u64,
                           qpn in 0u32..1 << 24, sop: u8, wc: u16, syn: u8, vend: u8) {
            let mut c = Cqe::new(op, qpn, wc);
            c.solicited = se;
            c.imm = imm;
            c.byte_cnt = bc;
            c.sop = sop;
            if op.is_error() {
                c.syndrome = syn;
                c.vendor_err_synd = vend;
            } else {
                c.timestamp = ts;
            }
            let mut back = Cqe::parse(&c.encode(owner));
            prop_assert_eq!(back.owner, owner);
            back.owner = false;
            prop_assert_eq!(back, c);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::array::uniform32(any::<u8>()), tail in proptest::array::uniform32(any::<u8>())) {
            let mut b = [0u8; 64];
            b[..32].copy_from_slice(&bytes);
            b[32..].copy_from_slice(&tail);
            let _ = Cqe::parse(&b);
        }
    }
}

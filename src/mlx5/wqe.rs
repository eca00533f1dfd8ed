//! Send work queue entries: segment codecs, typed builders, and the parser a NIC uses.
//!
//! Build a WQE with one of the [`opcode`] builders, then let the send queue stamp its
//! position and QP number on it when it posts it:
//!
//! ```
//! use qfwd::mlx5::opcode;
//! let wqe = opcode::SendInline::new(b"hello")
//!     .build()
//!     .unwrap()
//!     .with_index(7)
//!     .with_qpn(0x1234);
//! assert_eq!(wqe.ds(), 2); // ctrl + inline header and 5 bytes, padded
//! assert_eq!(wqe.wqebbs(), 1);
//! ```
//!
//! The raw layout stays in here: callers see operations, the soft NIC sees a
//! [`ParsedWqe`], and [`Wqe::as_bytes`] is what goes into the SQ or the BlueFlame
//! register. [`Wqe::from_raw`] exists for tests and fuzzing that need malformed WQEs.
#![forbid(unsafe_code)]

use super::layout::{self, ctrl, data, inline, opcodes, raddr, OCTOWORD, WQEBB};

/// Largest WQE the builders produce: four WQEBBs, one BlueFlame half.
pub const MAX_WQE_BYTES: usize = 4 * WQEBB;
/// Largest `ds` the builders produce.
pub const MAX_DS: u8 = (MAX_WQE_BYTES / OCTOWORD) as u8;
/// Largest inline payload of a SEND: one BlueFlame half less the ctrl and inline headers.
pub const MAX_SEND_INLINE: usize = MAX_WQE_BYTES - ctrl::SIZE - inline::HEADER;
/// Largest inline payload of a WRITE (a raddr segment more).
pub const MAX_WRITE_INLINE: usize = MAX_SEND_INLINE - raddr::SIZE;
/// Most data segments a WQE may gather from.
pub const MAX_SGE: usize = 4;

#[inline]
fn be32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
fn be64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(w)
}

/// The control segment, decoded (host order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CtrlSeg {
    pub opmod: u8,
    /// Position of the WQE's first WQEBB in the SQ, modulo 2^16.
    pub wqe_index: u16,
    pub opcode: u8,
    /// QP (SQ) number, 24 bits.
    pub qpn: u32,
    /// WQE size in 16-byte units.
    pub ds: u8,
    pub signature: u8,
    pub fm_ce_se: u8,
    /// Immediate data as the application sees it (stored big-endian).
    pub imm: u32,
}

impl CtrlSeg {
    /// The 16 bytes, as `mlx5dv_set_ctrl_seg` writes them (with `imm` passed as
    /// `htobe32(imm)`).
    pub fn encode(&self) -> [u8; ctrl::SIZE] {
        let mut b = [0u8; ctrl::SIZE];
        let w0 = (self.opmod as u32) << 24 | (self.wqe_index as u32) << 8 | self.opcode as u32;
        b[ctrl::OPMOD_IDX_OPCODE..][..4].copy_from_slice(&w0.to_be_bytes());
        let w1 = (self.qpn & 0x00ff_ffff) << 8 | self.ds as u32;
        b[ctrl::QPN_DS..][..4].copy_from_slice(&w1.to_be_bytes());
        b[ctrl::SIGNATURE] = self.signature;
        b[ctrl::FM_CE_SE] = self.fm_ce_se;
        b[ctrl::IMM..][..4].copy_from_slice(&self.imm.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; ctrl::SIZE]) -> CtrlSeg {
        let w0 = be32_at(b, ctrl::OPMOD_IDX_OPCODE);
        let w1 = be32_at(b, ctrl::QPN_DS);
        CtrlSeg {
            opmod: (w0 >> 24) as u8,
            wqe_index: (w0 >> 8) as u16,
            opcode: w0 as u8,
            qpn: w1 >> 8,
            ds: w1 as u8,
            signature: b[ctrl::SIGNATURE],
            fm_ce_se: b[ctrl::FM_CE_SE],
            imm: be32_at(b, ctrl::IMM),
        }
    }

    /// Whether the WQE asks for a CQE on success.
    pub fn signaled(&self) -> bool {
        self.fm_ce_se & ctrl::CQ_UPDATE != 0
    }
}

/// A remote address segment (RDMA WRITE target).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RaddrSeg {
    pub raddr: u64,
    pub rkey: u32,
}

impl RaddrSeg {
    pub fn encode(&self) -> [u8; raddr::SIZE] {
        let mut b = [0u8; raddr::SIZE];
        b[raddr::RADDR..][..8].copy_from_slice(&self.raddr.to_be_bytes());
        b[raddr::RKEY..][..4].copy_from_slice(&self.rkey.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; raddr::SIZE]) -> RaddrSeg {
        RaddrSeg {
            raddr: be64_at(b, raddr::RADDR),
            rkey: be32_at(b, raddr::RKEY),
        }
    }
}

/// A data (gather/scatter) segment: `byte_count` bytes at `addr` under `lkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataSeg {
    pub byte_count: u32,
    pub lkey: u32,
    pub addr: u64,
}

impl DataSeg {
    /// The 16 bytes, as `mlx5dv_set_data_seg` writes them.
    pub fn encode(&self) -> [u8; data::SIZE] {
        let mut b = [0u8; data::SIZE];
        b[data::BYTE_COUNT..][..4].copy_from_slice(&self.byte_count.to_be_bytes());
        b[data::LKEY..][..4].copy_from_slice(&self.lkey.to_be_bytes());
        b[data::ADDR..][..8].copy_from_slice(&self.addr.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; data::SIZE]) -> DataSeg {
        DataSeg {
            byte_count: be32_at(b, data::BYTE_COUNT),
            lkey: be32_at(b, data::LKEY),
            addr: be64_at(b, data::ADDR),
        }
    }
}

/// Why a builder refused to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WqeError {
    #[error("inline payload of {len} bytes exceeds the {max}-byte limit of one BlueFlame half")]
    InlineTooLarge { len: usize, max: usize },
    #[error("raw WQE of {len} bytes: must be 16..={MAX_WQE_BYTES} bytes, a multiple of 16")]
    RawSize { len: usize },
}

/// A built send WQE: up to [`MAX_WQE_BYTES`] bytes, `ds` octowords long.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Wqe {
    bytes: [u8; MAX_WQE_BYTES],
    ds: u8,
}

impl std::fmt::Debug for Wqe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wqe")
            .field("ctrl", &self.ctrl())
            .field("ds", &self.ds)
            .finish()
    }
}

impl Wqe {
    fn with_ctrl(opcode: u8, fm_ce_se: u8, imm: u32) -> Wqe {
        let mut w = Wqe {
            bytes: [0; MAX_WQE_BYTES],
            ds: 1,
        };
        w.put_ctrl(CtrlSeg {
            opcode,
            fm_ce_se,
            imm,
            ds: 1,
            ..Default::default()
        });
        w
    }

    fn put_ctrl(&mut self, c: CtrlSeg) {
        self.bytes[..ctrl::SIZE].copy_from_slice(&c.encode());
    }

    fn push_seg(&mut self, seg: &[u8; 16]) {
        let at = self.ds as usize * OCTOWORD;
        self.bytes[at..at + OCTOWORD].copy_from_slice(seg);
        self.ds += 1;
        self.sync_ds();
    }

    fn push_inline(&mut self, payload: &[u8]) {
        let at = self.ds as usize * OCTOWORD;
        let header = (payload.len() as u32 | inline::FLAG).to_be_bytes();
        self.bytes[at..at + inline::HEADER].copy_from_slice(&header);
        self.bytes[at + inline::HEADER..at + inline::HEADER + payload.len()]
            .copy_from_slice(payload);
        self.ds += (inline::HEADER + payload.len()).div_ceil(OCTOWORD) as u8;
        self.sync_ds();
    }

    fn sync_ds(&mut self) {
        let mut c = self.ctrl();
        c.ds = self.ds;
        self.put_ctrl(c);
    }

    /// A WQE from raw bytes (16..=256, a multiple of 16), `ds` taken from the length; the
    /// control segment is kept as given. For tests and fuzzing that need malformed WQEs.
    pub fn from_raw(raw: &[u8]) -> Result<Wqe, WqeError> {
        if raw.is_empty() || raw.len() > MAX_WQE_BYTES || raw.len() % OCTOWORD != 0 {
            return Err(WqeError::RawSize { len: raw.len() });
        }
        let mut w = Wqe {
            bytes: [0; MAX_WQE_BYTES],
            ds: (raw.len() / OCTOWORD) as u8,
        };
        w.bytes[..raw.len()].copy_from_slice(raw);
        Ok(w)
    }

    /// Sets the position of the WQE in the SQ (the poster does this when posting).
    pub fn with_index(mut self, wqe_index: u16) -> Wqe {
        let mut c = self.ctrl();
        c.wqe_index = wqe_index;
        self.put_ctrl(c);
        self
    }

    /// Sets the QP number (the poster does this when posting).
    pub fn with_qpn(mut self, qpn: u32) -> Wqe {
        let mut c = self.ctrl();
        c.qpn = qpn & 0x00ff_ffff;
        self.put_ctrl(c);
        self
    }

    /// Asks for (or stops asking for) a CQE on success. Errors always complete.
    pub fn with_signaled(mut self, signaled: bool) -> Wqe {
        let mut c = self.ctrl();
        if signaled {
            c.fm_ce_se |= ctrl::CQ_UPDATE;
        } else {
            c.fm_ce_se &= !ctrl::CQ_UPDATE;
        }
        self.put_ctrl(c);
        self
    }

    /// The decoded control segment.
    pub fn ctrl(&self) -> CtrlSeg {
        let mut c = [0u8; ctrl::SIZE];
        c.copy_from_slice(&self.bytes[..ctrl::SIZE]);
        CtrlSeg::decode(&c)
    }

    /// Size in octowords (as the WQE occupies the SQ; `from_raw` WQEs may claim otherwise
    /// in their control segment).
    pub fn ds(&self) -> u8 {
        self.ds
    }

    /// WQEBBs the WQE occupies in the SQ.
    pub fn wqebbs(&self) -> u16 {
        layout::wqebbs_for_ds(self.ds)
    }

    /// The WQE's bytes (`ds * 16`).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.ds as usize * OCTOWORD]
    }

    /// The WQE padded with zeros to whole WQEBBs: what is written into the SQ and what a
    /// BlueFlame copy sends (64-byte chunks).
    pub fn as_wqebbs(&self) -> &[u8] {
        &self.bytes[..self.wqebbs() as usize * WQEBB]
    }

    /// The first 8 bytes of the control segment as one native-endian u64: the value a
    /// regular doorbell writes to the UAR register (its bytes in memory order).
    pub fn doorbell_word(&self) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.bytes[..8]);
        u64::from_ne_bytes(w)
    }
}

/// Declares one builder per operation, io-uring style: required fields in `new`, optional
/// ones as chained setters with defaults, the opcode as `CODE`, and a `build`.
macro_rules! opcode {
    (
        $( #[$outer:meta] )*
        pub struct $name:ident $(<$lt:lifetime>)? {
            $( #[$new_meta:meta] )*
            $( $field:ident : $fty:ty ),* $(,)?
            ;;
            $(
                $( #[$opt_meta:meta] )*
                $opt_field:ident : $opt_ty:ty = $default:expr
            ),* $(,)?
        }

        pub const CODE = $code:expr;

        $( #[$build_meta:meta] )*
        pub fn build($self:ident) -> $ret:ty $body:block
    ) => {
        $( #[$outer] )*
        #[derive(Debug, Clone, Copy)]
        pub struct $name $(<$lt>)? {
            $( $field : $fty, )*
            $( $opt_field : $opt_ty, )*
        }

        impl $(<$lt>)? $name $(<$lt>)? {
            /// The mlx5 opcode this builder emits.
            pub const CODE: u8 = $code;

            $( #[$new_meta] )*
            #[inline]
            #[allow(clippy::new_without_default)]
            pub const fn new($( $field : $fty ),*) -> Self {
                $name {
                    $( $field, )*
                    $( $opt_field: $default, )*
                }
            }

            $(
                $( #[$opt_meta] )*
                #[inline]
                pub const fn $opt_field(mut self, $opt_field: $opt_ty) -> Self {
                    self.$opt_field = $opt_field;
                    self
                }
            )*

            $( #[$build_meta] )*
            #[inline]
            pub fn build($self) -> $ret $body
        }
    };
}

/// `fm_ce_se` from the common optional flags.
fn flags(signaled: bool, solicited: bool, fence: bool) -> u8 {
    let mut f = 0;
    if signaled {
        f |= ctrl::CQ_UPDATE;
    }
    if solicited {
        f |= ctrl::SOLICITED;
    }
    if fence {
        f |= ctrl::FENCE;
    }
    f
}

/// The typed builders, one per operation.
pub mod opcode {
    use super::*;

    opcode! {
        /// No operation: completes (with a CQE if signaled) and does nothing else.
        pub struct Nop {
            ;;
            /// Ask for a CQE (default: yes).
            signaled: bool = true,
        }

        pub const CODE = opcodes::NOP;

        pub fn build(self) -> Wqe {
            Wqe::with_ctrl(Self::CODE, flags(self.signaled, false, false), 0)
        }
    }

    opcode! {
        /// SEND of `len` bytes gathered from `addr` (under `lkey`).
        pub struct Send {
            addr: u64, lkey: u32, len: u32
            ;;
            /// Ask for a CQE (default: yes).
            signaled: bool = true,
            /// Solicited event at the receiver.
            solicited: bool = false,
            /// Wait for earlier WQEs to complete first.
            fence: bool = false,
        }

        pub const CODE = opcodes::SEND;

        pub fn build(self) -> Wqe {
            let mut w = Wqe::with_ctrl(Self::CODE, flags(self.signaled, self.solicited, self.fence), 0);
            w.push_seg(&DataSeg { byte_count: self.len, lkey: self.lkey, addr: self.addr }.encode());
            w
        }
    }

    opcode! {
        /// SEND with the payload inline in the WQE: no DMA read of a buffer, and small
        /// enough for one BlueFlame copy (at most [`MAX_SEND_INLINE`] bytes).
        pub struct SendInline<'a> {
            payload: &'a [u8]
            ;;
            /// Ask for a CQE (default: yes).
            signaled: bool = true,
            /// Solicited event at the receiver.
            solicited: bool = false,
            /// Send with immediate data (`SEND_IMM`) when set.
            imm: Option<u32> = None,
        }

        pub const CODE = opcodes::SEND;

        pub fn build(self) -> Result<Wqe, WqeError> {
            if self.payload.len() > MAX_SEND_INLINE {
                return Err(WqeError::InlineTooLarge { len: self.payload.len(), max: MAX_SEND_INLINE });
            }
            let (code, imm) = match self.imm {
                Some(imm) => (opcodes::SEND_IMM, imm),
                None => (Self::CODE, 0),
            };
            let mut w = Wqe::with_ctrl(code, flags(self.signaled, self.solicited, false), imm);
            w.push_inline(self.payload);
            Ok(w)
        }
    }

    opcode! {
        /// RDMA WRITE of `len` bytes from `addr`/`lkey` to `raddr`/`rkey`.
        pub struct Write {
            raddr: u64, rkey: u32, addr: u64, lkey: u32, len: u32
            ;;
            /// Ask for a CQE (default: yes).
            signaled: bool = true,
            /// Wait for earlier WQEs to complete first.
            fence: bool = false,
        }

        pub const CODE = opcodes::RDMA_WRITE;

        pub fn build(self) -> Wqe {
            let mut w = Wqe::with_ctrl(Self::CODE, flags(self.signaled, false, self.fence), 0);
            w.push_seg(&RaddrSeg { raddr: self.raddr, rkey: self.rkey }.encode());
            w.push_seg(&DataSeg { byte_count: self.len, lkey: self.lkey, addr: self.addr }.encode());
            w
        }
    }

    opcode! {
        /// RDMA WRITE with immediate: the receiver consumes a receive WQE and gets a CQE
        /// carrying `imm` (the NVQLink request path: `imm` = ring slot index).
        pub struct WriteImm {
            raddr: u64, rkey: u32, addr: u64, lkey: u32, len: u32, imm: u32
            ;;
            /// Ask for a CQE (default: yes).
            signaled: bool = true,
            /// Solicited event at the receiver.
            solicited: bool = false,
        }

        pub const CODE = opcodes::RDMA_WRITE_IMM;

        pub fn build(self) -> Wqe {
            let mut w = Wqe::with_ctrl(Self::CODE, flags(self.signaled, self.solicited, false), self.imm);
            w.push_seg(&RaddrSeg { raddr: self.raddr, rkey: self.rkey }.encode());
            w.push_seg(&DataSeg { byte_count: self.len, lkey: self.lkey, addr: self.addr }.encode());
            w
        }
    }

    opcode! {
        /// RDMA WRITE with immediate, payload inline (at most [`MAX_WRITE_INLINE`] bytes).
        pub struct WriteImmInline<'a> {
            raddr: u64, rkey: u32, payload: &'a [u8], imm: u32
            ;;
            /// Ask for a CQE (default: yes).
            signaled: bool = true,
        }

        pub const CODE = opcodes::RDMA_WRITE_IMM;

        pub fn build(self) -> Result<Wqe, WqeError> {
            if self.payload.len() > MAX_WRITE_INLINE {
                return Err(WqeError::InlineTooLarge { len: self.payload.len(), max: MAX_WRITE_INLINE });
            }
            let mut w = Wqe::with_ctrl(Self::CODE, flags(self.signaled, false, false), self.imm);
            w.push_seg(&RaddrSeg { raddr: self.raddr, rkey: self.rkey }.encode());
            w.push_inline(self.payload);
            Ok(w)
        }
    }
}

// ---- parsing (what the NIC does) -------------------------------------------------------

/// Where a WQE's payload comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// `len` bytes inside the WQE, starting at byte `offset` of it.
    Inline { offset: usize, len: usize },
    /// Gathered from `count` data segments.
    Gather {
        segs: [DataSeg; MAX_SGE],
        count: usize,
    },
}

impl Payload {
    /// Total bytes.
    pub fn len(&self) -> usize {
        match self {
            Payload::Inline { len, .. } => *len,
            Payload::Gather { segs, count } => {
                segs[..*count].iter().map(|s| s.byte_count as usize).sum()
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The operation a parsed WQE asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WqeOp {
    Nop,
    Send {
        payload: Payload,
        imm: Option<u32>,
    },
    Write {
        remote: RaddrSeg,
        payload: Payload,
        imm: Option<u32>,
    },
}

/// A WQE as the NIC understands it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedWqe {
    pub ctrl: CtrlSeg,
    pub op: WqeOp,
}

/// Why a NIC refuses a WQE; each maps to the syndrome of its error CQE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WqeFault {
    #[error("unsupported opcode {opcode:#04x}")]
    UnknownOpcode { opcode: u8 },
    #[error("ds {ds} is outside 1..={max}")]
    BadDs { ds: u8, max: u8 },
    #[error("wqe_index {found} where the SQ is at {expected}")]
    IndexMismatch { expected: u16, found: u16 },
    #[error("qpn {found:#x} on a WQE of QP {expected:#x}")]
    QpnMismatch { expected: u32, found: u32 },
    #[error("reserved bits set in fm_ce_se {fm_ce_se:#04x}")]
    BadFlags { fm_ce_se: u8 },
    #[error("segments do not fit in ds {ds}: {detail}")]
    Malformed { ds: u8, detail: &'static str },
    #[error("inline length {len} overruns the WQE ({room} bytes left)")]
    InlineOverrun { len: usize, room: usize },
    #[error("message of {len} bytes exceeds the {max}-byte limit")]
    TooLong { len: usize, max: usize },
    #[error(
        "data segment of {len} bytes at {addr:#x} (lkey {lkey:#x}) is outside the memory region"
    )]
    Protection { addr: u64, lkey: u32, len: u32 },
}

impl WqeFault {
    /// The `MLX5_CQE_SYNDROME_*` an mlx5 device reports for this fault.
    pub fn syndrome(&self) -> super::Syndrome {
        use super::Syndrome;
        match self {
            WqeFault::InlineOverrun { .. } | WqeFault::TooLong { .. } => Syndrome::LocalLength,
            WqeFault::Protection { .. } => Syndrome::LocalProt,
            _ => Syndrome::LocalQpOp,
        }
    }
}

/// Decodes the WQE in `bytes` (`ds * 16` bytes for the whole WQE; fewer than the ctrl
/// segment is malformed), checking what a NIC checks: opcode, ds, the index the SQ
/// expects, the QP number, reserved flags, and that segments fit. Memory checks (lkey,
/// address) are the caller's.
pub fn parse(
    bytes: &[u8],
    expected_index: u16,
    qpn: u32,
    max_ds: u8,
) -> Result<ParsedWqe, WqeFault> {
    let Some(head) = bytes.get(..ctrl::SIZE) else {
        return Err(WqeFault::Malformed {
            ds: 0,
            detail: "shorter than a control segment",
        });
    };
    let mut c = [0u8; ctrl::SIZE];
    c.copy_from_slice(head);
    let ctrl = CtrlSeg::decode(&c);
    if ctrl.ds == 0 || ctrl.ds > max_ds {
        return Err(WqeFault::BadDs {
            ds: ctrl.ds,
            max: max_ds,
        });
    }
    if ctrl.wqe_index != expected_index {
        return Err(WqeFault::IndexMismatch {
            expected: expected_index,
            found: ctrl.wqe_index,
        });
    }
    if ctrl.qpn != qpn & 0x00ff_ffff {
        return Err(WqeFault::QpnMismatch {
            expected: qpn,
            found: ctrl.qpn,
        });
    }
    if ctrl.fm_ce_se & !ctrl::FM_CE_SE_VALID != 0 {
        return Err(WqeFault::BadFlags {
            fm_ce_se: ctrl.fm_ce_se,
        });
    }
    let size = ctrl.ds as usize * OCTOWORD;
    if bytes.len() < size {
        return Err(WqeFault::Malformed {
            ds: ctrl.ds,
            detail: "WQE shorter than its ds",
        });
    }
    let body = &bytes[ctrl::SIZE..size];
    let op = match ctrl.opcode {
        opcodes::NOP => {
            if ctrl.ds != 1 {
                return Err(WqeFault::Malformed {
                    ds: ctrl.ds,
                    detail: "NOP carries segments",
                });
            }
            WqeOp::Nop
        }
        opcodes::SEND | opcodes::SEND_IMM => {
            let payload = parse_payload(body, ctrl::SIZE, ctrl.ds)?;
            let imm = (ctrl.opcode == opcodes::SEND_IMM).then_some(ctrl.imm);
            WqeOp::Send { payload, imm }
        }
        opcodes::RDMA_WRITE | opcodes::RDMA_WRITE_IMM => {
            if body.len() < raddr::SIZE {
                return Err(WqeFault::Malformed {
                    ds: ctrl.ds,
                    detail: "WRITE without a raddr segment",
                });
            }
            let mut r = [0u8; raddr::SIZE];
            r.copy_from_slice(&body[..raddr::SIZE]);
            let remote = RaddrSeg::decode(&r);
            let payload = parse_payload(&body[raddr::SIZE..], ctrl::SIZE + raddr::SIZE, ctrl.ds)?;
            let imm = (ctrl.opcode == opcodes::RDMA_WRITE_IMM).then_some(ctrl.imm);
            WqeOp::Write {
                remote,
                payload,
                imm,
            }
        }
        other => return Err(WqeFault::UnknownOpcode { opcode: other }),
    };
    Ok(ParsedWqe { ctrl, op })
}

/// The payload segments: one inline segment, or 1..=MAX_SGE data segments (a zero-length
/// list is allowed for a SEND of nothing only as an inline segment).
fn parse_payload(body: &[u8], body_offset: usize, ds: u8) -> Result<Payload, WqeFault> {
    if body.len() < inline::HEADER {
        return Err(WqeFault::Malformed {
            ds,
            detail: "no payload segment",
        });
    }
    let first = be32_at(body, 0);
    if first & inline::FLAG != 0 {
        let len = (first & !inline::FLAG) as usize;
        let room = body.len() - inline::HEADER;
        if len > room {
            return Err(WqeFault::InlineOverrun { len, room });
        }
        if (inline::HEADER + len).div_ceil(OCTOWORD) * OCTOWORD != body.len() {
            return Err(WqeFault::Malformed {
                ds,
                detail: "bytes after the inline segment",
            });
        }
        return Ok(Payload::Inline {
            offset: body_offset + inline::HEADER,
            len,
        });
    }
    if body.len() % data::SIZE != 0 {
        return Err(WqeFault::Malformed {
            ds,
            detail: "partial data segment",
        });
    }
    let count = body.len() / data::SIZE;
    if count > MAX_SGE {
        return Err(WqeFault::Malformed {
            ds,
            detail: "more data segments than the QP allows",
        });
    }
    let mut segs = [DataSeg::default(); MAX_SGE];
    for (i, chunk) in body.chunks_exact(data::SIZE).enumerate() {
        let mut s = [0u8; data::SIZE];
        s.copy_from_slice(chunk);
        segs[i] = DataSeg::decode(&s);
    }
    Ok(Payload::Gather { segs, count })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ctrl_segment_bytes_match_the_c_helper_by_hand() {
        // mlx5dv_set_ctrl_seg(seg, pi=0x1234, SEND, opmod=0, qpn=0xabcdef, CQ_UPDATE, ds=3, 0, htobe32(7))
        let c = CtrlSeg {
            opmod: 0,
            wqe_index: 0x1234,
            opcode: opcodes::SEND,
            qpn: 0xab_cdef,
            ds: 3,
            signature: 0,
            fm_ce_se: ctrl::CQ_UPDATE,
            imm: 7,
        };
        assert_eq!(
            c.encode(),
            [0x00, 0x12, 0x34, 0x0a, 0xab, 0xcd, 0xef, 0x03, 0, 0, 0, 0x08, 0, 0, 0, 7]
        );
    }

    #[test]
    fn a_wqe_shorter_than_its_control_segment_is_malformed_not_a_panic() {
        // Found by the softnic_queues fuzz target: 15 bytes panicked on a slice index.
        let w = opcode::Nop::new()
            .build()
            .with_index(0x1234)
            .with_qpn(0xabcdef);
        let b = w.as_bytes();
        for len in 0..ctrl::SIZE {
            assert!(matches!(
                parse(&b[..len], 0x1234, 0xabcdef, MAX_DS),
                Err(WqeFault::Malformed { .. })
            ));
        }
        assert!(parse(&b[..ctrl::SIZE], 0x1234, 0xabcdef, MAX_DS).is_ok());
    }

    #[test]
    fn send_inline_layout() {
        let w = opcode::SendInline::new(&[0xaa; 13])
            .build()
            .unwrap()
            .with_index(5)
            .with_qpn(9);
        let b = w.as_bytes();
        assert_eq!(
            w.ds(),
            3,
            "ctrl + 4 + 13 = 17 bytes -> 2 octowords of segment"
        );
        assert_eq!(&b[16..20], &(13u32 | 0x8000_0000).to_be_bytes());
        assert_eq!(&b[20..33], &[0xaa; 13]);
        assert!(b[33..48].iter().all(|&x| x == 0), "zero padding");
        assert_eq!(w.as_wqebbs().len(), 64);
        let p = parse(b, 5, 9, MAX_DS).unwrap();
        assert_eq!(
            p.op,
            WqeOp::Send {
                payload: Payload::Inline {
                    offset: 20,
                    len: 13
                },
                imm: None
            }
        );
        assert!(p.ctrl.signaled());
    }

    #[test]
    fn largest_inline_send_fills_one_bf_half() {
        let w = opcode::SendInline::new(&[1; MAX_SEND_INLINE])
            .build()
            .unwrap();
        assert_eq!(w.ds(), MAX_DS);
        assert_eq!(w.wqebbs(), 4);
        assert_eq!(
            opcode::SendInline::new(&[1; MAX_SEND_INLINE + 1])
                .build()
                .unwrap_err(),
            WqeError::InlineTooLarge {
                len: MAX_SEND_INLINE + 1,
                max: MAX_SEND_INLINE
            }
        );
    }

    #[test]
    fn faults_map_to_syndromes() {
        use crate::mlx5::Syndrome;
        let good = opcode::Nop::new().build().with_index(3).with_qpn(1);
        assert!(parse(good.as_bytes(), 3, 1, MAX_DS).is_ok());
        let e = parse(good.as_bytes(), 4, 1, MAX_DS).unwrap_err();
        assert_eq!(
            e,
            WqeFault::IndexMismatch {
                expected: 4,
                found: 3
            }
        );
        assert_eq!(e.syndrome(), Syndrome::LocalQpOp);
        let mut raw = good.as_bytes().to_vec();
        raw[3] = 0x1f; // opcode
        let e = parse(&raw, 3, 1, MAX_DS).unwrap_err();
        assert_eq!(e, WqeFault::UnknownOpcode { opcode: 0x1f });
        // Inline length larger than the WQE.
        let mut w = opcode::SendInline::new(b"abcd")
            .build()
            .unwrap()
            .as_bytes()
            .to_vec();
        w[16..20].copy_from_slice(&(100u32 | inline::FLAG).to_be_bytes());
        let e = parse(&w, 0, 0, MAX_DS).unwrap_err();
        assert_eq!(e, WqeFault::InlineOverrun { len: 100, room: 12 });
        assert_eq!(e.syndrome(), Syndrome::LocalLength);
        // ds 0.
        let mut z = good.as_bytes().to_vec();
        z[7] = 0;
        assert!(matches!(
            parse(&z, 3, 1, MAX_DS),
            Err(WqeFault::BadDs { ds: 0, .. })
        ));
    }

    proptest! {
        #[test]
        fn ctrl_round_trips(opmod: u8, idx: u16, op: u8, qpn in 0u32..1 << 24, ds: u8, sig: u8, f: u8, imm: u32) {
            let c = CtrlSeg { opmod, wqe_index: idx, opcode: op, qpn, ds, signature: sig, fm_ce_se: f, imm };
            prop_assert_eq!(CtrlSeg::decode(&c.encode()), c);
        }

        #[test]
        fn data_and_raddr_round_trip(bc: u32, lkey: u32, addr: u64, rkey: u32) {
            let d = DataSeg { byte_count: bc, lkey, addr };
            prop_assert_eq!(DataSeg::decode(&d.encode()), d);
            let r = RaddrSeg { raddr: addr, rkey };
            prop_assert_eq!(RaddrSeg::decode(&r.encode()), r);
        }

        /// Whatever a builder emits, the parser reads back the same operation.
        #[test]
        fn builders_and_parser_agree(payload in proptest::collection::vec(any::<u8>(), 0..=MAX_WRITE_INLINE),
                                     idx: u16, qpn in 0u32..1 << 24, imm: Option<u32>, signaled: bool,
                                     raddr: u64, rkey: u32, addr: u64, lkey: u32) {
            let w = opcode::SendInline::new(&payload).imm(imm).signaled(signaled).build().unwrap()
                .with_index(idx).with_qpn(qpn);
            let p = parse(w.as_bytes(), idx, qpn, MAX_DS).unwrap();
            prop_assert_eq!(p.ctrl.signaled(), signaled);
            match p.op {
                WqeOp::Send { payload: Payload::Inline { offset, len }, imm: got } => {
                    prop_assert_eq!(&w.as_bytes()[offset..offset + len], &payload[..]);
                    prop_assert_eq!(got, imm);
                }
                other => prop_assert!(false, "unexpected {:?}", other),
            }
            let len = payload.len() as u32;
            let w = opcode::WriteImm::new(raddr, rkey, addr, lkey, len, imm.unwrap_or(0)).build()
                .with_index(idx).with_qpn(qpn);
            let p = parse(w.as_bytes(), idx, qpn, MAX_DS).unwrap();
            let mut segs = [DataSeg::default(); MAX_SGE];
            segs[0] = DataSeg { byte_count: len, lkey, addr };
            prop_assert_eq!(p.op, WqeOp::Write {
                remote: RaddrSeg { raddr, rkey },
                payload: Payload::Gather { segs, count: 1 },
                imm: Some(imm.unwrap_or(0)),
            });
            let w = opcode::WriteImmInline::new(raddr, rkey, &payload, 5).build().unwrap();
            let p = parse(w.as_bytes(), 0, 0, MAX_DS).unwrap();
            let ok = matches!(p.op, WqeOp::Write { payload: Payload::Inline { len: l, .. }, imm: Some(5), .. } if l == payload.len());
            prop_assert!(ok, "WriteImmInline parsed as {:?}", p.op);
        }

        /// The parser never panics, whatever the bytes.
        #[test]
        fn parser_never_panics(raw in proptest::collection::vec(any::<u8>(), 16..=MAX_WQE_BYTES), idx: u16, qpn: u32) {
            let _ = parse(&raw, idx, qpn, MAX_DS);
        }
    }
}

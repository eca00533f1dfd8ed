//! Where everything lives in the soft NIC's region, and the settings that size it.
//!
//! ```text
//! 0x0000  UAR page (4 KiB): BlueFlame halves at 0x800 and 0x900 (256 B each)
//! 0x1000  doorbell records: QP {rcv, snd} @0, TX CQ {ci, arm} @64, RX CQ {ci, arm} @128,
//!         response-ring consumer index @192 (cpu-assisted)
//! ....    SQ          sq_wqebbs x 64 B
//! ....    RQ          rx_slots x 16 B (one data segment per receive WQE)
//! ....    TX CQ       tx_cqes x 64 B
//! ....    RX CQ       rx_cqes x 64 B
//! ....    RX ring     rx_slots x rx_slot_bytes  (requests land here, WRITE-with-imm style)
//! ....    TX buffers  sq_wqebbs x tx_buf_bytes  (payloads too large to send inline)
//! ....    response ring (cpu-assisted) resp_slots x resp_slot_bytes, tagged 16 B chunks
//! ```
//!
//! Each area starts on a page. A GPU maps the whole region and adds these offsets to its
//! device pointer; the soft NIC adds them to the host pointer.
#![forbid(unsafe_code)]

use std::time::Duration;

use crate::abi::DoorbellSendsParams;
use crate::idle::IdlePolicy;
use crate::mlx5::layout::{cqe, uar, WQEBB};
use crate::mlx5::Doorbell;
use crate::shm::SharedRegion;
use crate::wire::HEADER_LEN;
use crate::{Error, Result};

/// What the soft NIC does after a WQE fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorPolicy {
    /// Write the error CQE and go on with the next WQE (for tests and soak runs).
    #[default]
    Continue,
    /// As a ConnectX does: the QP enters the error state and every later WQE completes
    /// with `WR_FLUSH_ERR`.
    Flush,
}

/// Settings of one soft NIC (one QP, its CQs and rings).
#[derive(Debug, Clone, PartialEq)]
pub struct SoftNicConfig {
    /// How the forwarder's responses reach the NIC.
    pub doorbell: Doorbell,
    /// QP number stamped on WQEs and CQEs (24 bits).
    pub qpn: u32,
    /// Key of the memory region covering the whole NIC region (lkey = rkey).
    pub mkey: u32,
    /// Send queue size in WQEBBs (a power of two).
    pub sq_wqebbs: u32,
    /// Send completion queue entries (a power of two).
    pub tx_cqes: u32,
    /// Request ring slots = receive WQEs (a power of two).
    pub rx_slots: u32,
    /// Receive completion queue entries (a power of two, >= `rx_slots`).
    pub rx_cqes: u32,
    /// Bytes per request slot (a multiple of 64).
    pub rx_slot_bytes: u32,
    /// Largest response, in bytes (sizes the TX buffers and the response ring slots).
    pub max_response_bytes: u32,
    /// Response ring slots for `cpu-assisted` (a power of two).
    pub resp_slots: u32,
    /// Ask for a CQE every this many WQEs (1..=sq_wqebbs/2): selective signaling.
    pub signal_every: u32,
    /// Messages of at most 32 bytes land in the receive CQE itself
    /// (`MLX5_INLINE_SCATTER_32`, a SEND completion) instead of a receive buffer: the
    /// `gpu-direct` data path reads them with the CQE, in one PCIe read.
    pub cqe_inline_scatter: bool,
    /// What the NIC and proxy threads do when idle (`yield` on small machines).
    pub idle: IdlePolicy,
    pub error_policy: ErrorPolicy,
    /// How long a poster waits for room in the SQ or the response ring.
    pub send_timeout: Duration,
    /// How long a reader of the tagged response ring waits for the rest of a response
    /// whose first chunk it has seen.
    pub bf_wait: Duration,
    /// How long dropping the NIC waits for its threads to stop.
    pub stop_timeout: Duration,
    /// Cores for the NIC thread and the `cpu-assisted` proxy thread (`None`: wherever the
    /// starting thread may run; pin them when other threads spin on pinned cores).
    pub nic_core: Option<usize>,
    pub proxy_core: Option<usize>,
}

impl Default for SoftNicConfig {
    fn default() -> Self {
        let msg = (HEADER_LEN + crate::handler::MAX_RESULT_LEN).next_multiple_of(WQEBB) as u32;
        SoftNicConfig {
            doorbell: Doorbell::Regular,
            qpn: 0x0001c0,
            mkey: 0x0005_eed0,
            sq_wqebbs: 64,
            tx_cqes: 64,
            rx_slots: 64,
            rx_cqes: 64,
            rx_slot_bytes: msg,
            max_response_bytes: msg,
            resp_slots: 64,
            signal_every: 16,
            cqe_inline_scatter: false,
            idle: IdlePolicy::Yield,
            error_policy: ErrorPolicy::Continue,
            send_timeout: Duration::from_millis(200),
            bf_wait: Duration::from_millis(5),
            stop_timeout: Duration::from_secs(2),
            nic_core: None,
            proxy_core: None,
        }
    }
}

impl SoftNicConfig {
    /// Defaults with the given doorbell mode.
    pub fn new(doorbell: Doorbell) -> SoftNicConfig {
        SoftNicConfig {
            doorbell,
            ..Default::default()
        }
    }
}

/// Offsets of the UAR page's BlueFlame halves.
pub const BF_HALVES: [usize; 2] = [uar::BF_OFFSET, uar::BF_OFFSET + uar::BF_SIZE];
/// Offset of the doorbell-record page.
pub const DBREC_PAGE: usize = uar::PAGE;
/// QP doorbell record (`{rcv, snd}` big-endian u32).
pub const QP_DBREC: usize = DBREC_PAGE;
/// TX CQ doorbell record.
pub const TX_CQ_DBREC: usize = DBREC_PAGE + 64;
/// RX CQ doorbell record.
pub const RX_CQ_DBREC: usize = DBREC_PAGE + 128;
/// Consumer index of the cpu-assisted response ring (native-endian u32).
pub const RESP_CI: usize = DBREC_PAGE + 192;
/// Bytes of payload carried by each 16 B chunk of a response-ring slot (4 B are the tag).
pub const RESP_CHUNK_DATA: usize = 12;
/// Payload bytes in a response slot's first chunk (after the u32 length).
pub const RESP_FIRST_CHUNK_DATA: usize = 8;
/// The value every 8-byte word of an unwritten BlueFlame half holds (see `nic.rs`): byte
/// 7 (the ctrl segment's `ds`) is 0 and byte 11 (`fm_ce_se`) has reserved bits set, so a
/// valid control segment never looks like it.
pub const BF_POISON: u64 = u64::from_ne_bytes(*b"QFWD-BF\0");
/// Poison of the second word of a half: `fm_ce_se` (byte 3 of it) = 0xff.
pub const BF_POISON_HI: u64 = u64::from_ne_bytes(*b"bf-\xffidle");

/// Offsets and sizes, from a validated [`SoftNicConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NicLayout {
    pub qpn: u32,
    pub mkey: u32,
    pub sq_wqebbs: u32,
    pub tx_cqes: u32,
    pub rx_slots: u32,
    pub rx_cqes: u32,
    pub rx_slot_bytes: usize,
    pub tx_buf_bytes: usize,
    pub resp_slots: u32,
    pub resp_slot_bytes: usize,
    pub sq: usize,
    pub rq: usize,
    pub tx_cq: usize,
    pub rx_cq: usize,
    pub rx_ring: usize,
    pub tx_bufs: usize,
    pub resp_ring: usize,
    /// Total bytes the region needs.
    pub len: usize,
}

fn pow2(key: &str, v: u32, min: u32) -> Result<()> {
    if v < min || !v.is_power_of_two() || v > 1 << 15 {
        return Err(Error::SoftNicLayout {
            detail: format!("{key} = {v}: must be a power of two in {min}..=32768"),
        });
    }
    Ok(())
}

fn page(n: usize) -> usize {
    n.next_multiple_of(uar::PAGE)
}

impl NicLayout {
    pub fn new(cfg: &SoftNicConfig) -> Result<NicLayout> {
        pow2("sq_wqebbs", cfg.sq_wqebbs, 4)?;
        pow2("tx_cqes", cfg.tx_cqes, 2)?;
        pow2("rx_slots", cfg.rx_slots, 1)?;
        pow2("rx_cqes", cfg.rx_cqes, 2)?;
        pow2("resp_slots", cfg.resp_slots, 1)?;
        let bad = |detail: String| Err(Error::SoftNicLayout { detail });
        if cfg.rx_cqes < cfg.rx_slots {
            return bad(format!(
                "rx_cqes {} < rx_slots {}",
                cfg.rx_cqes, cfg.rx_slots
            ));
        }
        if cfg.rx_slot_bytes == 0 || cfg.rx_slot_bytes % WQEBB as u32 != 0 {
            return bad(format!(
                "rx_slot_bytes {} must be a positive multiple of 64",
                cfg.rx_slot_bytes
            ));
        }
        if (cfg.max_response_bytes as usize) < HEADER_LEN {
            return bad(format!(
                "max_response_bytes {} < the {HEADER_LEN}-byte header",
                cfg.max_response_bytes
            ));
        }
        if cfg.signal_every == 0 || cfg.signal_every > cfg.sq_wqebbs / 2 {
            return bad(format!(
                "signal_every {} must be in 1..={} (half the SQ), or the SQ never frees",
                cfg.signal_every,
                cfg.sq_wqebbs / 2
            ));
        }
        if cfg.qpn > 0x00ff_ffff {
            return bad(format!("qpn {:#x} does not fit 24 bits", cfg.qpn));
        }
        let tx_buf_bytes = (cfg.max_response_bytes as usize).next_multiple_of(WQEBB);
        let chunks = 1
            + (cfg.max_response_bytes as usize)
                .saturating_sub(RESP_FIRST_CHUNK_DATA)
                .div_ceil(RESP_CHUNK_DATA);
        let resp_slot_bytes = chunks * 16;
        let sq = 2 * uar::PAGE;
        let rq = sq + page(cfg.sq_wqebbs as usize * WQEBB);
        let tx_cq = rq + page(cfg.rx_slots as usize * 16);
        let rx_cq = tx_cq + page(cfg.tx_cqes as usize * cqe::SIZE);
        let rx_ring = rx_cq + page(cfg.rx_cqes as usize * cqe::SIZE);
        let tx_bufs = rx_ring + page(cfg.rx_slots as usize * cfg.rx_slot_bytes as usize);
        let resp_ring = tx_bufs + page(cfg.sq_wqebbs as usize * tx_buf_bytes);
        let len = resp_ring + page(cfg.resp_slots as usize * resp_slot_bytes);
        Ok(NicLayout {
            qpn: cfg.qpn,
            mkey: cfg.mkey,
            sq_wqebbs: cfg.sq_wqebbs,
            tx_cqes: cfg.tx_cqes,
            rx_slots: cfg.rx_slots,
            rx_cqes: cfg.rx_cqes,
            rx_slot_bytes: cfg.rx_slot_bytes as usize,
            tx_buf_bytes,
            resp_slots: cfg.resp_slots,
            resp_slot_bytes,
            sq,
            rq,
            tx_cq,
            rx_cq,
            rx_ring,
            tx_bufs,
            resp_ring,
            len,
        })
    }

    /// Offset of WQEBB `index` (wrapping) in the SQ.
    pub fn sq_bb(&self, index: u16) -> usize {
        self.sq + (index as usize & (self.sq_wqebbs as usize - 1)) * WQEBB
    }

    /// Offset of CQE slot for CQE number `n` of the TX CQ.
    pub fn tx_cqe(&self, n: u32) -> usize {
        self.tx_cq + (n & (self.tx_cqes - 1)) as usize * cqe::SIZE
    }

    pub fn rx_cqe(&self, n: u32) -> usize {
        self.rx_cq + (n & (self.rx_cqes - 1)) as usize * cqe::SIZE
    }

    pub fn rx_slot(&self, slot: u32) -> usize {
        self.rx_ring + (slot & (self.rx_slots - 1)) as usize * self.rx_slot_bytes
    }

    pub fn tx_buf(&self, index: u16) -> usize {
        self.tx_bufs + (index as usize & (self.sq_wqebbs as usize - 1)) * self.tx_buf_bytes
    }

    pub fn resp_slot(&self, seq: u32) -> usize {
        self.resp_ring + (seq & (self.resp_slots - 1)) as usize * self.resp_slot_bytes
    }

    /// Puts a fresh region in the state a NIC expects before anything is posted: every
    /// CQE invalid (owner 0), both BlueFlame halves poisoned, doorbell records zero.
    pub fn init(&self, region: &SharedRegion) -> Result<()> {
        use std::sync::atomic::Ordering;
        if region.len() < self.len {
            return Err(Error::SoftNicLayout {
                detail: format!(
                    "region of {} bytes is smaller than the {} the layout needs",
                    region.len(),
                    self.len
                ),
            });
        }
        region.zero(0, 2 * uar::PAGE);
        for half in BF_HALVES {
            for w in (0..uar::BF_SIZE).step_by(8) {
                let v = if w == 8 { BF_POISON_HI } else { BF_POISON };
                region.store_u64(half + w, v, Ordering::Relaxed);
            }
        }
        let empty = u64::from_ne_bytes([0, 0, 0, 0, 0, 0, 0, crate::mlx5::cqe::EMPTY_OP_OWN]);
        for n in 0..self.tx_cqes {
            region.zero(self.tx_cqe(n), cqe::SIZE);
            region.store_u64(self.tx_cqe(n) + 56, empty, Ordering::Relaxed);
        }
        for n in 0..self.rx_cqes {
            region.zero(self.rx_cqe(n), cqe::SIZE);
            region.store_u64(self.rx_cqe(n) + 56, empty, Ordering::Relaxed);
        }
        region.zero(
            self.resp_ring,
            self.resp_slots as usize * self.resp_slot_bytes,
        );
        std::sync::atomic::fence(Ordering::SeqCst);
        Ok(())
    }
}

/// The parameters of `device/doorbell.cu`'s test kernel `qfwd_doorbell_post_sends` for a
/// soft NIC whose region the GPU sees at `device_base`: `n` SENDs of `payload_len` bytes
/// with doorbell `mode`; `scratch` is device memory of at least
/// [`crate::abi::MAX_INLINE`] bytes, `result` of 4 u32.
pub fn device_params(
    layout: &NicLayout,
    device_base: u64,
    mode: Doorbell,
    n: u32,
    payload_len: u32,
    scratch: u64,
    result: u64,
) -> DoorbellSendsParams {
    let at = |off: usize| device_base + off as u64;
    DoorbellSendsParams {
        sq: at(layout.sq),
        qp_dbrec: at(QP_DBREC),
        bf: at(BF_HALVES[0]),
        cq: at(layout.tx_cq),
        cq_dbrec: at(TX_CQ_DBREC),
        resp_ring: at(layout.resp_ring),
        resp_ci: at(RESP_CI),
        scratch,
        result,
        wqe_cnt: layout.sq_wqebbs,
        cqe_cnt: layout.tx_cqes,
        qpn: layout.qpn,
        bf_size: uar::BF_SIZE as u32,
        mode: mode.device_code(),
        n,
        payload_len,
        resp_slots: layout.resp_slots,
        resp_slot_bytes: layout.resp_slot_bytes as u32,
        reserved: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doorbell_test_params_describe_the_queues() {
        let l = NicLayout::new(&SoftNicConfig::default()).unwrap();
        let p = device_params(&l, 0x1000_0000, Doorbell::BlueFlame, 5, 32, 0x42, 0x80);
        assert_eq!(p.bf, 0x1000_0000 + 0x800);
        assert_eq!(p.mode, crate::abi::DB_MODE_BLUEFLAME);
        assert_eq!((p.scratch, p.result, p.n), (0x42, 0x80, 5));
    }

    #[test]
    fn default_layout_is_page_aligned_and_validates() {
        let l = NicLayout::new(&SoftNicConfig::default()).unwrap();
        for off in [
            l.sq,
            l.rq,
            l.tx_cq,
            l.rx_cq,
            l.rx_ring,
            l.tx_bufs,
            l.resp_ring,
            l.len,
        ] {
            assert_eq!(off % 4096, 0);
        }
        assert_eq!(l.sq_bb(64), l.sq);
        assert_eq!(l.tx_cqe(65), l.tx_cq + 64);
        assert!(NicLayout::new(&SoftNicConfig {
            sq_wqebbs: 48,
            ..Default::default()
        })
        .is_err());
        assert!(NicLayout::new(&SoftNicConfig {
            signal_every: 33,
            ..Default::default()
        })
        .is_err());
        assert!(NicLayout::new(&SoftNicConfig {
            rx_cqes: 32,
            ..Default::default()
        })
        .is_err());
    }

    #[test]
    fn poison_is_never_a_valid_ctrl_word() {
        let b = BF_POISON.to_ne_bytes();
        assert_eq!(b[7], 0, "ds byte of the poison is 0");
        let hi = BF_POISON_HI.to_ne_bytes();
        assert_ne!(hi[3] & !crate::mlx5::layout::ctrl::FM_CE_SE_VALID, 0);
    }
}

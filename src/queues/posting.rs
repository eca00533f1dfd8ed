//! Handing the soft NIC's send queue to a device side that posts its own responses
//! (GPU-initiated doorbells, `regular` / `blueflame`: docs/architecture.md).
//!
//! The persistent kernel (or the CPU double standing in for it) then owns the SQ: it
//! writes each response as an inline SEND WQE, updates the doorbell record and rings the
//! UAR, as `device/doorbell.cu`'s `qfwd_db_nic_post` does. The host no longer posts on that
//! SQ; what the forwarder itself answers (malformed requests, overload, watchdog) goes
//! through the NIC's host path instead (see [`super::SoftNicTransport::start_device_posted`]).
//!
//! The kernel's view of the SQ is a block of device memory ([`BLOCK_BYTES`]): the
//! description ([`DevicePosting::desc`], an [`abi::PostingDesc`]) then the posters' shared
//! state (lock,
//! producer counter, BlueFlame half, CQ consumer index) and counters
//! ([`DevicePostCounters`]); `device/doorbell.cu` gets the offsets from `qfwd_abi.h`
//! ([`crate::abi`]).
#![forbid(unsafe_code)]

use super::host::SendQueue;
use super::layout::{NicLayout, SoftNicConfig, BF_HALVES, QP_DBREC, TX_CQ_DBREC};
use crate::abi::PostingDesc;
use crate::mlx5::layout::uar;
use crate::mlx5::Doorbell;
use crate::shm::SharedRegion;
use crate::{Error, Result};

/// Byte offset of the posting lock (u32) in the device block (`QFWD_POSTING_LOCK`).
pub const LOCK_OFFSET: usize = 256;
/// Byte offset of the posters' state: u32 pi, half, ci, done, posts (`QFWD_POSTING_STATE`).
pub const STATE_OFFSET: usize = 384;
/// Byte offset of the u64 counters (`QFWD_POSTING_COUNTERS`).
pub const COUNTERS_OFFSET: usize = 512;
/// Number of u64 counters.
pub const COUNTERS: usize = 6;
/// Bytes of the whole device block (`QFWD_POSTING_BYTES`).
pub const BLOCK_BYTES: usize = 640;

const _: () = assert!(std::mem::size_of::<PostingDesc>() <= LOCK_OFFSET);
const _: () = assert!(COUNTERS_OFFSET + COUNTERS * 8 <= BLOCK_BYTES);

/// A soft NIC whose send queue a device side posts to: its memory and settings.
#[derive(Debug, Clone)]
pub struct DevicePosting {
    region: SharedRegion,
    config: SoftNicConfig,
    layout: NicLayout,
}

impl DevicePosting {
    /// The SQ of the NIC in `region` laid out by `config`, whose doorbell mode must be
    /// `regular` or `blueflame`.
    pub fn new(region: SharedRegion, config: &SoftNicConfig) -> Result<DevicePosting> {
        if config.doorbell == Doorbell::CpuAssisted {
            return Err(Error::InvalidSetting {
                key: "doorbell",
                detail: "a device side posts with a regular or blueflame doorbell; with \
                         cpu-assisted the host posts"
                    .into(),
            });
        }
        let layout = NicLayout::new(config)?;
        Ok(DevicePosting {
            region,
            config: config.clone(),
            layout,
        })
    }

    pub fn region(&self) -> &SharedRegion {
        &self.region
    }

    pub fn config(&self) -> &SoftNicConfig {
        &self.config
    }

    pub fn layout(&self) -> &NicLayout {
        &self.layout
    }

    pub fn doorbell(&self) -> Doorbell {
        self.config.doorbell
    }

    /// The description at the start of the device block, for a device that addresses the
    /// region at `device_base` (a GPU: the mapped pointer of the pinned memory).
    pub fn desc(&self, device_base: u64) -> PostingDesc {
        let at = |off: usize| device_base + off as u64;
        let l = &self.layout;
        PostingDesc {
            sq: at(l.sq),
            qp_dbrec: at(QP_DBREC),
            bf: at(BF_HALVES[0]),
            cq: at(l.tx_cq),
            cq_dbrec: at(TX_CQ_DBREC),
            wqe_cnt: l.sq_wqebbs,
            cqe_cnt: l.tx_cqes,
            qpn: l.qpn,
            bf_size: uar::BF_SIZE as u32,
            mode: self.config.doorbell.device_code(),
            signal_every: self.config.signal_every,
        }
    }

    /// A host poster on this SQ with the configured doorbell: what the CPU double posts
    /// with (one at a time, as the kernel's lock makes its warps do).
    pub fn send_queue(&self) -> Result<SendQueue> {
        SendQueue::new(&self.region, &self.config, self.config.doorbell)
    }
}

/// What the device's posters counted (the block's counters, read after the kernel
/// stopped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DevicePostCounters {
    /// Responses posted (WQE written, doorbell rung).
    pub posted: u64,
    /// Responses the device could not post (too long for one inline WQE, no lock or SQ
    /// room in time): published for the host to send instead.
    pub fallbacks: u64,
    /// Failed attempts to take the posting lock (another warp was posting).
    pub lock_spins: u64,
    /// Posts that found the SQ short of room and reaped completions first.
    pub room_waits: u64,
    /// Send CQEs reaped.
    pub cqes: u64,
    /// Of which error CQEs.
    pub error_cqes: u64,
}

impl DevicePostCounters {
    /// From the block's counter words (`COUNTERS` of them, in `QFWD_POST_CTR_*` order).
    pub fn from_words(w: &[u64]) -> DevicePostCounters {
        let at = |i: usize| w.get(i).copied().unwrap_or(0);
        DevicePostCounters {
            posted: at(0),
            fallbacks: at(1),
            lock_spins: at(2),
            room_waits: at(3),
            cqes: at(4),
            error_cqes: at(5),
        }
    }

    /// `(name, value)` pairs, for logs.
    pub fn pairs(&self) -> [(&'static str, u64); COUNTERS] {
        [
            ("posted", self.posted),
            ("fallbacks", self.fallbacks),
            ("lock_spins", self.lock_spins),
            ("room_waits", self.room_waits),
            ("cqes", self.cqes),
            ("error_cqes", self.error_cqes),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_come_in_the_device_order() {
        let c = DevicePostCounters::from_words(&[1, 2, 3, 4, 5, 6]);
        assert_eq!(c.pairs()[5], ("error_cqes", 6));
        assert_eq!(c.fallbacks, 2);
        assert_eq!(crate::abi::POST_CTR_FALLBACKS, 1);
        assert_eq!(crate::abi::POST_CTR_ERROR_CQES as usize, COUNTERS - 1);
    }

    #[test]
    fn block_describes_the_sq_and_refuses_cpu_assisted() {
        let cfg = SoftNicConfig::new(Doorbell::BlueFlame);
        let l = NicLayout::new(&cfg).unwrap();
        let region = SharedRegion::heap(l.len).unwrap();
        let p = DevicePosting::new(region.clone(), &cfg).unwrap();
        let d = p.desc(0x7000_0000);
        assert_eq!(d.sq, 0x7000_0000 + l.sq as u64);
        assert_eq!(d.bf, 0x7000_0000 + 0x800);
        assert_eq!(d.mode, crate::abi::DB_MODE_BLUEFLAME);
        assert_eq!(d.signal_every, cfg.signal_every);
        assert_eq!(
            d.to_u64_words().len() * 8,
            std::mem::size_of::<PostingDesc>()
        );
        assert!(p.send_queue().is_ok());
        assert!(DevicePosting::new(region, &SoftNicConfig::new(Doorbell::CpuAssisted)).is_err());
    }
}

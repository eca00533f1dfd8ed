//! Several QPU links in one shared region: one queue set per link, then the device side's
//! counters, set up for the `gpu-direct` receive protocol ([`super::direct`]).
//!
//! ```text
//! 0                 link 0's queue set (NicLayout::len bytes, page-aligned)
//! stride            link 1's queue set
//! ...
//! counters          links x MAX_WARPS_PER_LINK x 128 B: each poller warp's u64 counters
//! ```
//!
//! [`LinkSet::init`] leaves every link as a device side expects to find it: every receive
//! WQE posted (WQE i points at receive buffer i; the receive counter = `rx_slots`), every
//! receive CQE empty with its first three chunks poisoned, every receive buffer poisoned,
//! the counters zero.
#![forbid(unsafe_code)]

use std::sync::atomic::Ordering;

use super::direct::{stop_chunk, POISON};
use super::layout::{NicLayout, SoftNicConfig, QP_DBREC, RESP_CI, RX_CQ_DBREC, TX_CQ_DBREC};
use crate::abi::{self, LinkDesc};
use crate::mlx5::layout::{data, qp_dbrec, uar};
use crate::shm::SharedRegion;
use crate::{Error, Result};

/// Bytes of one warp's counter block.
pub const WARP_COUNTER_BYTES: usize = 256;
/// Counter blocks per link: one per poller warp, and the poster's
/// (`abi::MAX_WARPS_PER_LINK`).
pub const COUNTER_BLOCKS_PER_LINK: u32 = abi::MAX_WARPS_PER_LINK + 1;

const _: () = assert!(abi::WARP_COUNTERS as usize * 8 <= WARP_COUNTER_BYTES);

/// Where each link's queues and counters sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkSet {
    pub layout: NicLayout,
    pub links: u32,
    pub warps_per_link: u32,
    /// Bytes between two links' queue sets.
    pub stride: usize,
    /// Offset of the counters.
    pub counters: usize,
    /// Bytes of the whole region.
    pub len: usize,
}

impl LinkSet {
    /// `links` queue sets laid out by `config`, served by `warps_per_link` poller warps
    /// each.
    pub fn new(config: &SoftNicConfig, links: u32, warps_per_link: u32) -> Result<LinkSet> {
        let bad = |detail: String| {
            Err(Error::InvalidSetting {
                key: "links",
                detail,
            })
        };
        if links == 0 || links > abi::MAX_LINKS {
            return bad(format!("links = {links}: must be 1..={}", abi::MAX_LINKS));
        }
        if warps_per_link == 0 || warps_per_link > abi::MAX_WARPS_PER_LINK {
            return bad(format!(
                "pollers per link = {warps_per_link}: must be 1..={}",
                abi::MAX_WARPS_PER_LINK
            ));
        }
        let layout = NicLayout::new(config)?;
        if layout.rx_slots > abi::MAX_RX_SLOTS {
            return bad(format!(
                "rx_slots = {}: gpu-direct takes at most {}",
                layout.rx_slots,
                abi::MAX_RX_SLOTS
            ));
        }
        if layout.rx_cqes < 2 * layout.rx_slots {
            return bad(format!(
                "rx_cqes = {} must be at least twice rx_slots = {}: a CQE slot is written \
                 again only after its receive buffer has been returned and reused",
                layout.rx_cqes, layout.rx_slots
            ));
        }
        let stride = layout.len.next_multiple_of(uar::PAGE);
        let counters = stride * links as usize;
        let counter_bytes = (links * COUNTER_BLOCKS_PER_LINK) as usize * WARP_COUNTER_BYTES;
        Ok(LinkSet {
            layout,
            links,
            warps_per_link,
            stride,
            counters,
            len: (counters + counter_bytes).next_multiple_of(uar::PAGE),
        })
    }

    /// Link `i`'s queue set as a region of its own (its offsets are the layout's).
    pub fn link(&self, region: &SharedRegion, i: u32) -> Result<SharedRegion> {
        region.view(i as usize * self.stride, self.layout.len)
    }

    /// Offset of counter block `block` of link `link` (a poller warp's, or the poster's).
    pub fn counters_of(&self, link: u32, block: u32) -> usize {
        self.counters + (link * COUNTER_BLOCKS_PER_LINK + block) as usize * WARP_COUNTER_BYTES
    }

    /// Prepares a fresh region for the direct protocol (see the module docs).
    pub fn init(&self, region: &SharedRegion) -> Result<()> {
        if region.len() < self.len {
            return Err(Error::SoftNicLayout {
                detail: format!(
                    "region of {} bytes is smaller than the {} {} links need",
                    region.len(),
                    self.len,
                    self.links
                ),
            });
        }
        for i in 0..self.links {
            let link = self.link(region, i)?;
            let l = &self.layout;
            l.init(&link)?;
            for n in 0..l.rx_cqes {
                for c in 0..3 {
                    link.store_chunk(l.rx_cqe(n) + 16 * c, POISON);
                }
            }
            for s in 0..l.rx_slots {
                for at in (0..l.rx_slot_bytes).step_by(16) {
                    link.store_chunk(l.rx_slot(s) + at, POISON);
                }
                let wqe = l.rq + s as usize * data::SIZE;
                link.store_be32(
                    wqe + data::BYTE_COUNT,
                    l.rx_slot_bytes as u32,
                    Ordering::Relaxed,
                );
                link.store_be32(wqe + data::LKEY, l.mkey, Ordering::Relaxed);
                link.write(
                    wqe + data::ADDR,
                    &link.host_addr(l.rx_slot(s)).to_be_bytes(),
                );
            }
            link.store_be32(QP_DBREC + 4 * qp_dbrec::RCV, l.rx_slots, Ordering::Release);
        }
        region.zero(self.counters, self.len - self.counters);
        std::sync::atomic::fence(Ordering::SeqCst);
        Ok(())
    }

    /// Writes the stop sentinel into every receive CQE of every link (after the NICs have
    /// stopped writing them): each poller warp finds it where it polls.
    pub fn write_stop(&self, region: &SharedRegion) -> Result<()> {
        for i in 0..self.links {
            let link = self.link(region, i)?;
            for n in 0..self.layout.rx_cqes {
                link.store_chunk(self.layout.rx_cqe(n) + 48, stop_chunk());
            }
        }
        Ok(())
    }

    /// Link `i`'s description for a device that sees the region at `device_base`.
    pub fn desc(
        &self,
        i: u32,
        device_base: u64,
        doorbell: crate::mlx5::Doorbell,
        signal_every: u32,
    ) -> LinkDesc {
        let l = &self.layout;
        let base = device_base + (i as usize * self.stride) as u64;
        let at = |off: usize| base + off as u64;
        LinkDesc {
            rx_cq: at(l.rx_cq),
            rx_cq_dbrec: at(RX_CQ_DBREC),
            qp_dbrec: at(QP_DBREC),
            rx_ring: at(l.rx_ring),
            sq: at(l.sq),
            bf: at(uar::BF_OFFSET),
            tx_cq: at(l.tx_cq),
            tx_cq_dbrec: at(TX_CQ_DBREC),
            resp_ring: at(l.resp_ring),
            resp_ci: at(RESP_CI),
            counters: device_base + self.counters_of(i, 0) as u64,
            rx_cqes: l.rx_cqes,
            rx_slots: l.rx_slots,
            rx_slot_bytes: l.rx_slot_bytes as u32,
            sq_wqebbs: l.sq_wqebbs,
            tx_cqes: l.tx_cqes,
            qpn: l.qpn,
            bf_size: uar::BF_SIZE as u32,
            signal_every,
            resp_slots: l.resp_slots,
            resp_slot_bytes: l.resp_slot_bytes as u32,
            doorbell: doorbell.device_code(),
            reserved: 0,
        }
    }

    /// The counters of every warp of link `link` (its pollers' and its poster's), summed.
    pub fn read_counters(
        &self,
        region: &SharedRegion,
        link: u32,
    ) -> [u64; abi::WARP_COUNTERS as usize] {
        let mut sum = [0u64; abi::WARP_COUNTERS as usize];
        for w in (0..self.warps_per_link).chain([abi::MAX_WARPS_PER_LINK]) {
            let at = self.counters_of(link, w);
            for (k, s) in sum.iter_mut().enumerate() {
                *s += region.load_u64(at + 8 * k, Ordering::Relaxed);
            }
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlx5::Doorbell;

    fn config() -> SoftNicConfig {
        SoftNicConfig {
            rx_cqes: 128,
            ..SoftNicConfig::default()
        }
    }

    #[test]
    fn links_are_page_aligned_and_initialised_for_the_device() {
        let set = LinkSet::new(&config(), 3, 2).unwrap();
        let region = SharedRegion::heap(set.len).unwrap();
        set.init(&region).unwrap();
        for i in 0..3 {
            let link = set.link(&region, i).unwrap();
            assert_eq!(link.host_addr(0) % 4096, 0);
            assert_eq!(
                link.load_be32(QP_DBREC, Ordering::Relaxed),
                set.layout.rx_slots
            );
            assert_eq!(link.load_chunk(set.layout.rx_cqe(5)), POISON);
            assert_eq!(link.load_chunk(set.layout.rx_slot(3) + 16), POISON);
            let d = set.desc(i, 0x1000_0000, Doorbell::BlueFlame, 16);
            assert_eq!(
                d.rx_cq,
                0x1000_0000 + (i as usize * set.stride + set.layout.rx_cq) as u64
            );
            assert_eq!(d.doorbell, 2);
        }
        assert!(set.counters_of(2, abi::MAX_WARPS_PER_LINK) + WARP_COUNTER_BYTES <= set.len);
        set.write_stop(&region).unwrap();
        let link = set.link(&region, 1).unwrap();
        assert_eq!(link.load_chunk(set.layout.rx_cqe(7) + 48), stop_chunk());
    }

    #[test]
    fn bad_sizes_are_refused_with_the_reason() {
        assert!(LinkSet::new(&config(), 0, 1).is_err());
        assert!(LinkSet::new(&config(), 65, 1).is_err());
        assert!(LinkSet::new(&config(), 1, 17).is_err());
        let e = LinkSet::new(&SoftNicConfig::default(), 1, 1).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
    }
}

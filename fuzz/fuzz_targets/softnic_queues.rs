//! Any bytes as the soft NIC reads them from its queues: a send WQE (what a poster, a GPU
//! kernel included, wrote into the SQ or a BlueFlame register) and a CQE (what a
//! completion queue slot holds). Never a panic; a WQE that parses describes only bytes
//! inside it (inline payload) or at most `MAX_SGE` data segments, and keeps its
//! control segment's fields through a round trip; a CQE decodes to the same value after a round
//! trip through its encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qfwd::mlx5::cqe::Cqe;
use qfwd::mlx5::layout::cqe as cqel;
use qfwd::mlx5::wqe::{self, Payload, WqeOp, MAX_DS, MAX_SGE};
use qfwd::mlx5::{CqCursor, CtrlSeg};

fuzz_target!(|data: &[u8]| {
    // First 6 bytes: the SQ index and QP number the NIC expects; the rest is the WQE.
    if data.len() < 6 {
        return;
    }
    let index = u16::from_le_bytes([data[0], data[1]]);
    let qpn = u32::from_le_bytes([data[2], data[3], data[4], data[5]]);
    let bytes = &data[6..];
    if let Ok(p) = wqe::parse(bytes, index, qpn, MAX_DS) {
        let size = p.ctrl.ds as usize * 16;
        assert!(size <= bytes.len(), "parsed past the WQE");
        assert_eq!(p.ctrl.wqe_index, index);
        // Reserved bytes are ignored, as a NIC ignores them: the decoded fields survive a
        // round trip.
        assert_eq!(
            CtrlSeg::decode(&p.ctrl.encode()),
            p.ctrl,
            "ctrl segment round trip"
        );
        let payload = match p.op {
            WqeOp::Nop => None,
            WqeOp::Send { payload, .. } | WqeOp::Write { payload, .. } => Some(payload),
        };
        match payload {
            Some(Payload::Inline { offset, len }) => {
                assert!(offset + len <= size, "inline payload past the WQE");
            }
            Some(Payload::Gather { count, .. }) => assert!(count <= MAX_SGE),
            None => {}
        }
    }
    // Every 64-byte chunk as a CQE slot.
    for chunk in bytes.chunks_exact(cqel::SIZE) {
        let mut b = [0u8; cqel::SIZE];
        b.copy_from_slice(chunk);
        let c = Cqe::parse(&b);
        assert_eq!(Cqe::parse(&c.encode(c.owner)), c, "CQE round trip");
        let _ = c.syndrome();
        let mut cursor = CqCursor::new(2);
        if let Some(t) = cursor.take(&b) {
            assert_eq!(t, c);
            assert_eq!(cursor.ci(), 1);
        }
    }
});

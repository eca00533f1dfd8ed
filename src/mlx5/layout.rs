//! Sizes and byte offsets of the mlx5 structures we read and write, from
//! `infiniband/mlx5dv.h` (rdma-core). Every multi-byte field is big-endian.
//!
//! `tests/mlx5_layout.rs` compiles a C probe against the real header and checks each
//! constant here, so a drift in rdma-core fails CI instead of corrupting WQEs.
#![forbid(unsafe_code)]

/// A send WQE basic block: the SQ is an array of these and wraps per block.
pub const WQEBB: usize = 64;
/// log2 of [`WQEBB`].
pub const WQEBB_SHIFT: u32 = 6;
/// The unit of the `ds` field: one "octoword".
pub const OCTOWORD: usize = 16;

/// `struct mlx5_wqe_ctrl_seg` (16 B, packed).
pub mod ctrl {
    pub const SIZE: usize = 16;
    /// `opmod << 24 | wqe_index << 8 | opcode`.
    pub const OPMOD_IDX_OPCODE: usize = 0;
    /// `qpn << 8 | ds` (ds: WQE size in 16-byte units).
    pub const QPN_DS: usize = 4;
    pub const SIGNATURE: usize = 8;
    pub const DCI_STREAM_CHANNEL_ID: usize = 9;
    pub const FM_CE_SE: usize = 11;
    pub const IMM: usize = 12;
    /// `MLX5_WQE_CTRL_CQ_UPDATE`: write a CQE when this WQE completes.
    pub const CQ_UPDATE: u8 = 2 << 2;
    /// `MLX5_WQE_CTRL_SOLICITED`.
    pub const SOLICITED: u8 = 1 << 1;
    /// `MLX5_WQE_CTRL_FENCE` (strong fence).
    pub const FENCE: u8 = 4 << 5;
    /// Bits of `fm_ce_se` that a valid WQE may set (fence mode 7:5, CE 3:2, SE 1).
    pub const FM_CE_SE_VALID: u8 = 0b1110_1110;
}

/// `struct mlx5_wqe_raddr_seg` (16 B).
pub mod raddr {
    pub const SIZE: usize = 16;
    pub const RADDR: usize = 0;
    pub const RKEY: usize = 8;
    pub const RESERVED: usize = 12;
}

/// `struct mlx5_wqe_data_seg` (16 B).
pub mod data {
    pub const SIZE: usize = 16;
    pub const BYTE_COUNT: usize = 0;
    pub const LKEY: usize = 4;
    pub const ADDR: usize = 8;
    /// `MLX5_INVALID_LKEY`: terminates a scatter list.
    pub const INVALID_LKEY: u32 = 0x100;
}

/// `struct mlx5_wqe_inl_data_seg`: a 4-byte header, then the bytes, padded to 16.
pub mod inline {
    pub const HEADER: usize = 4;
    pub const BYTE_COUNT: usize = 0;
    /// `MLX5_INLINE_SEG`, or-ed into `byte_count`.
    pub const FLAG: u32 = 0x8000_0000;
}

/// `struct mlx5_cqe64` and `struct mlx5_err_cqe` (64 B each, the same memory).
pub mod cqe {
    pub const SIZE: usize = 64;
    pub const SRQN_UIDX: usize = 32;
    pub const IMM_INVAL_PKEY: usize = 36;
    pub const APP: usize = 40;
    pub const APP_OP: usize = 41;
    pub const APP_INFO: usize = 42;
    pub const BYTE_CNT: usize = 44;
    pub const TIMESTAMP: usize = 48;
    /// Top byte: the send opcode of a requester CQE; low 24 bits: the QP number.
    pub const SOP_DROP_QPN: usize = 56;
    pub const WQE_COUNTER: usize = 60;
    pub const SIGNATURE: usize = 62;
    /// High nibble: CQE opcode; bits 3:2 format; bit 1 solicited event; bit 0 owner.
    pub const OP_OWN: usize = 63;
    /// `mlx5_err_cqe.vendor_err_synd`.
    pub const VENDOR_ERR_SYND: usize = 54;
    /// `mlx5_err_cqe.syndrome`.
    pub const SYNDROME: usize = 55;
    /// `mlx5_err_cqe.s_wqe_opcode_qpn`: top byte the WQE opcode, low 24 bits the QP.
    pub const S_WQE_OPCODE_QPN: usize = 56;
    /// `MLX5_CQE_OWNER_MASK`.
    pub const OWNER_MASK: u8 = 1;
    /// `op_own` bits 3:2 (`mlx5dv_get_cqe_format`) when a received message of at most 32
    /// bytes was scattered into the CQE's first 32 bytes (`MLX5_INLINE_SCATTER_32`).
    pub const INLINE_SCATTER_32: u8 = 0x4;
    /// The same for at most 64 bytes in a 128-byte CQE (`MLX5_INLINE_SCATTER_64`).
    pub const INLINE_SCATTER_64: u8 = 0x8;
}

/// A QP's doorbell record: two big-endian u32 (`MLX5_RCV_DBR`, `MLX5_SND_DBR`).
pub mod qp_dbrec {
    /// Receive queue producer counter (16 bits used).
    pub const RCV: usize = 0;
    /// Send queue producer counter, in WQEBBs (16 bits used).
    pub const SND: usize = 1;
}

/// A CQ's doorbell record: two big-endian u32.
pub mod cq_dbrec {
    /// Consumer index (24 bits used): the NIC never overwrites CQEs past it.
    pub const SET_CI: usize = 0;
    /// Arm word (event notification; unused when polling).
    pub const ARM: usize = 1;
}

/// The UAR page: one 4 KiB MMIO page per user context; the BlueFlame register (two
/// halves of `bf.size` bytes) starts at `MLX5_BF_OFFSET`.
pub mod uar {
    pub const PAGE: usize = 4096;
    /// Offset of the first BlueFlame half (`MLX5_BF_OFFSET`).
    pub const BF_OFFSET: usize = 0x800;
    /// Size of one BlueFlame half on ConnectX-4 and later (`mlx5dv_qp.bf.size`).
    pub const BF_SIZE: usize = 256;
}

/// `MLX5_OPCODE_*`: the operation a send WQE asks for.
pub mod opcodes {
    pub const NOP: u8 = 0x00;
    pub const RDMA_WRITE: u8 = 0x08;
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    pub const SEND: u8 = 0x0a;
    pub const SEND_IMM: u8 = 0x0b;
}

/// Number of WQEBBs a WQE of `ds` octowords occupies.
#[inline]
pub const fn wqebbs_for_ds(ds: u8) -> u16 {
    ((ds as usize * OCTOWORD).div_ceil(WQEBB)) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wqebb_math() {
        assert_eq!(wqebbs_for_ds(1), 1);
        assert_eq!(wqebbs_for_ds(4), 1);
        assert_eq!(wqebbs_for_ds(5), 2);
        assert_eq!(wqebbs_for_ds(16), 4);
        assert_eq!(1usize << WQEBB_SHIFT, WQEBB);
    }
}

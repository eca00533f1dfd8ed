//! mlx5 direct verbs: our own small FFI, because `rdma-sys` binds only `ibv_*`/`rdma_*`.
//!
//! Three layers, as everywhere: the `#[repr(C)]` mirrors of `struct mlx5dv_qp`,
//! `struct mlx5dv_cq`, `struct mlx5dv_obj` and the `extern` declaration (raw); [`init_obj`]
//! and [`init_cq`] (one call each, a `Result`); [`Mlx5Direct`] (what a poster needs: SQ
//! buffer, doorbell record, BlueFlame register and size, CQ buffer and size) and
//! [`QpView`] / [`CqView`] (both work queues and any CQ, for a device side that owns the
//! whole queue set: `rdma::direct`). `tests/mlx5_layout.rs` checks the mirrors against
//! `infiniband/mlx5dv.h`.
//!
//! The pointers in [`Mlx5Direct`] belong to the QP and CQ they came from and are valid
//! while those live; `bf_reg` is MMIO (the UAR page): on a GPU host it is registered with
//! `cuMemHostRegister(..., CU_MEMHOSTREGISTER_IOMEMORY)` so a kernel can ring it
//! (`device/doorbell.cu`).
#![allow(non_camel_case_types)]

use std::os::raw::{c_int, c_void};

use rdma_sys::{ibv_cq, ibv_qp};

/// `struct { void *buf; uint32_t wqe_cnt; uint32_t stride; }` of `mlx5dv_qp`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_wq {
    pub buf: *mut c_void,
    pub wqe_cnt: u32,
    pub stride: u32,
}

/// `struct { void *reg; uint32_t size; }` of `mlx5dv_qp`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_bf {
    pub reg: *mut c_void,
    pub size: u32,
}

/// `struct mlx5dv_qp`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_qp {
    pub dbrec: *mut u32,
    pub sq: mlx5dv_wq,
    pub rq: mlx5dv_wq,
    pub bf: mlx5dv_bf,
    pub comp_mask: u64,
    pub uar_mmap_offset: libc::off_t,
    pub tirn: u32,
    pub tisn: u32,
    pub rqn: u32,
    pub sqn: u32,
    pub tir_icm_addr: u64,
}

/// `struct mlx5dv_cq`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_cq {
    pub buf: *mut c_void,
    pub dbrec: *mut u32,
    pub cqe_cnt: u32,
    pub cqe_size: u32,
    pub cq_uar: *mut c_void,
    pub cqn: u32,
    pub comp_mask: u64,
}

/// `struct { in; out; }`, one per object kind of `mlx5dv_obj`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_obj_pair {
    pub input: *mut c_void,
    pub output: *mut c_void,
}

/// `struct mlx5dv_obj`: qp, cq, srq, rwq, dm, ah, pd, in that order.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mlx5dv_obj {
    pub qp: mlx5dv_obj_pair,
    pub cq: mlx5dv_obj_pair,
    pub srq: mlx5dv_obj_pair,
    pub rwq: mlx5dv_obj_pair,
    pub dm: mlx5dv_obj_pair,
    pub ah: mlx5dv_obj_pair,
    pub pd: mlx5dv_obj_pair,
}

/// `MLX5DV_OBJ_QP`.
pub const MLX5DV_OBJ_QP: u64 = 1 << 0;
/// `MLX5DV_OBJ_CQ`.
pub const MLX5DV_OBJ_CQ: u64 = 1 << 1;

#[link(name = "mlx5")]
extern "C" {
    /// `int mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t obj_type)`.
    pub fn mlx5dv_init_obj(obj: *mut mlx5dv_obj, obj_type: u64) -> c_int;
}

/// What `mlx5dv_init_obj` says about a QP and its send CQ.
///
/// # Safety
/// `qp` and `cq` must be live verbs objects of an mlx5 device.
pub unsafe fn init_obj(qp: *mut ibv_qp, cq: *mut ibv_cq) -> Result<(mlx5dv_qp, mlx5dv_cq), c_int> {
    // SAFETY: plain C structs; all-zero is valid (null pointers, zero sizes).
    let mut dv_qp: mlx5dv_qp = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut dv_cq: mlx5dv_cq = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut obj: mlx5dv_obj = unsafe { std::mem::zeroed() };
    obj.qp.input = qp as *mut c_void;
    obj.qp.output = &mut dv_qp as *mut mlx5dv_qp as *mut c_void;
    obj.cq.input = cq as *mut c_void;
    obj.cq.output = &mut dv_cq as *mut mlx5dv_cq as *mut c_void;
    // SAFETY: `obj` points at live objects (caller) and at our out-structs for the call.
    let ret = unsafe { mlx5dv_init_obj(&mut obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ) };
    if ret == 0 {
        Ok((dv_qp, dv_cq))
    } else {
        Err(ret)
    }
}

/// What `mlx5dv_init_obj` says about one CQ (a QP's receive CQ, which `init_obj` does not
/// cover: `mlx5dv_obj` has one CQ slot).
///
/// # Safety
/// `cq` must be a live verbs CQ of an mlx5 device.
pub unsafe fn init_cq(cq: *mut ibv_cq) -> Result<mlx5dv_cq, c_int> {
    // SAFETY: plain C structs; all-zero is valid (null pointers, zero sizes).
    let mut dv_cq: mlx5dv_cq = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut obj: mlx5dv_obj = unsafe { std::mem::zeroed() };
    obj.cq.input = cq as *mut c_void;
    obj.cq.output = &mut dv_cq as *mut mlx5dv_cq as *mut c_void;
    // SAFETY: `obj` points at a live CQ (caller) and at our out-struct for the call.
    let ret = unsafe { mlx5dv_init_obj(&mut obj, MLX5DV_OBJ_CQ) };
    if ret == 0 {
        Ok(dv_cq)
    } else {
        Err(ret)
    }
}

/// One work queue of a QP as `mlx5dv_qp` describes it: buffer, entries, bytes per entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WqView {
    pub buf: u64,
    pub wqe_cnt: u32,
    pub stride: u32,
}

/// A whole QP as `mlx5dv_init_obj` describes it, as plain numbers (addresses in this
/// process): both work queues, the doorbell record, the BlueFlame register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpView {
    pub qpn: u32,
    /// `dbrec[0]` receive counter, `dbrec[1]` send counter (big-endian).
    pub dbrec: u64,
    pub sq: WqView,
    pub rq: WqView,
    /// BlueFlame register (UAR MMIO) and the size of one half (0: none).
    pub bf_reg: u64,
    pub bf_size: u32,
}

impl QpView {
    pub fn new(qpn: u32, qp: &mlx5dv_qp) -> QpView {
        let wq = |w: &mlx5dv_wq| WqView {
            buf: w.buf as u64,
            wqe_cnt: w.wqe_cnt,
            stride: w.stride,
        };
        QpView {
            qpn,
            dbrec: qp.dbrec as u64,
            sq: wq(&qp.sq),
            rq: wq(&qp.rq),
            bf_reg: qp.bf.reg as u64,
            bf_size: qp.bf.size,
        }
    }
}

/// A CQ as `mlx5dv_init_obj` describes it, as plain numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqView {
    pub cqn: u32,
    pub buf: u64,
    /// `dbrec[0]` consumer index (24 bits, big-endian).
    pub dbrec: u64,
    pub cqe_cnt: u32,
    /// Bytes per CQE: 64, or 128 (`MLX5_CQE_SIZE=128`).
    pub cqe_size: u32,
}

impl CqView {
    pub fn new(cq: &mlx5dv_cq) -> CqView {
        CqView {
            cqn: cq.cqn,
            buf: cq.buf as u64,
            dbrec: cq.dbrec as u64,
            cqe_cnt: cq.cqe_cnt,
            cqe_size: cq.cqe_size,
        }
    }
}

/// The direct-access view of a QP's send side, for a poster that writes WQEs and rings
/// the doorbell itself (a GPU kernel, or a host poster in place of `ibv_post_send`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mlx5Direct {
    pub qpn: u32,
    /// SQ buffer address and size in WQEBBs (stride 64).
    pub sq_buf: u64,
    pub sq_wqe_cnt: u32,
    pub sq_stride: u32,
    /// QP doorbell record (`dbrec[1]` is the send counter).
    pub dbrec: u64,
    /// BlueFlame register (UAR MMIO) and the size of one half; `bf_size` 0: no BlueFlame.
    pub bf_reg: u64,
    pub bf_size: u32,
    /// Send CQ buffer, entries, entry size, doorbell record.
    pub cq_buf: u64,
    pub cqe_cnt: u32,
    pub cqe_size: u32,
    pub cq_dbrec: u64,
}

impl Mlx5Direct {
    pub fn new(qpn: u32, qp: &mlx5dv_qp, cq: &mlx5dv_cq) -> Mlx5Direct {
        Mlx5Direct {
            qpn,
            sq_buf: qp.sq.buf as u64,
            sq_wqe_cnt: qp.sq.wqe_cnt,
            sq_stride: qp.sq.stride,
            dbrec: qp.dbrec as u64,
            bf_reg: qp.bf.reg as u64,
            bf_size: qp.bf.size,
            cq_buf: cq.buf as u64,
            cqe_cnt: cq.cqe_cnt,
            cqe_size: cq.cqe_size,
            cq_dbrec: cq.dbrec as u64,
        }
    }

    /// Whether a poster can use BlueFlame (a UAR with a BlueFlame register).
    pub fn has_blueflame(&self) -> bool {
        self.bf_size > 0 && self.bf_reg != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes on x86-64 Linux (rdma-core 44+); `tests/mlx5_layout.rs` checks them against
    /// the header itself.
    #[test]
    fn mirror_sizes() {
        assert_eq!(std::mem::size_of::<mlx5dv_qp>(), 96);
        assert_eq!(std::mem::size_of::<mlx5dv_cq>(), 48);
        assert_eq!(std::mem::size_of::<mlx5dv_obj>(), 7 * 16);
        assert_eq!(std::mem::offset_of!(mlx5dv_qp, bf), 40);
        assert_eq!(std::mem::offset_of!(mlx5dv_cq, cqe_size), 20);
    }
}

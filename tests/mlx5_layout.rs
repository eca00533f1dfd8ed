//! The Rust mlx5 layouts, byte for byte against rdma-core's `infiniband/mlx5dv.h`.
//!
//! A C probe is compiled against the real header at test time: it prints `sizeof` and
//! `offsetof` of every structure and field qfwd touches, and the bytes that the header's
//! own helpers (`mlx5dv_set_ctrl_seg`, `mlx5dv_set_data_seg`, and the inline/raddr
//! segments as libmlx5's `qp.c` fills them) write for a few WQEs. The Rust constants and
//! builders must agree exactly.
//!
//! Where `cc` or the header is missing (no `libibverbs-dev`) the test prints why and
//! passes, unless `QFWD_REQUIRE_MLX5DV=1` (CI sets it), where it fails.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

use qfwd::mlx5::layout::{self, cq_dbrec, cqe, ctrl, data, inline, opcodes, qp_dbrec, raddr};
use qfwd::mlx5::{opcode, Cqe, CqeOpcode, CtrlSeg, DataSeg, RaddrSeg, Syndrome};

const PROBE: &str = r#"
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/mlx5dv.h>

#define P(name, value) printf("%s %lu\n", name, (unsigned long)(value))
#define OFF(type, field) P(#type "." #field, offsetof(struct type, field))

static void hex(const char *name, const void *p, size_t n)
{
    const unsigned char *b = p;
    printf("%s ", name);
    for (size_t i = 0; i < n; i++)
        printf("%02x", b[i]);
    printf("\n");
}

int main(void)
{
    P("sizeof.mlx5_wqe_ctrl_seg", sizeof(struct mlx5_wqe_ctrl_seg));
    OFF(mlx5_wqe_ctrl_seg, opmod_idx_opcode);
    OFF(mlx5_wqe_ctrl_seg, qpn_ds);
    OFF(mlx5_wqe_ctrl_seg, signature);
    OFF(mlx5_wqe_ctrl_seg, dci_stream_channel_id);
    OFF(mlx5_wqe_ctrl_seg, fm_ce_se);
    OFF(mlx5_wqe_ctrl_seg, imm);
    P("sizeof.mlx5_wqe_raddr_seg", sizeof(struct mlx5_wqe_raddr_seg));
    OFF(mlx5_wqe_raddr_seg, raddr);
    OFF(mlx5_wqe_raddr_seg, rkey);
    OFF(mlx5_wqe_raddr_seg, reserved);
    P("sizeof.mlx5_wqe_data_seg", sizeof(struct mlx5_wqe_data_seg));
    OFF(mlx5_wqe_data_seg, byte_count);
    OFF(mlx5_wqe_data_seg, lkey);
    OFF(mlx5_wqe_data_seg, addr);
    P("sizeof.mlx5_wqe_inl_data_seg", sizeof(struct mlx5_wqe_inl_data_seg));
    OFF(mlx5_wqe_inl_data_seg, byte_count);
    P("sizeof.mlx5_cqe64", sizeof(struct mlx5_cqe64));
    OFF(mlx5_cqe64, srqn_uidx);
    OFF(mlx5_cqe64, imm_inval_pkey);
    OFF(mlx5_cqe64, app);
    OFF(mlx5_cqe64, app_op);
    OFF(mlx5_cqe64, app_info);
    OFF(mlx5_cqe64, byte_cnt);
    OFF(mlx5_cqe64, timestamp);
    OFF(mlx5_cqe64, sop_drop_qpn);
    OFF(mlx5_cqe64, wqe_counter);
    OFF(mlx5_cqe64, signature);
    OFF(mlx5_cqe64, op_own);
    P("sizeof.mlx5_err_cqe", sizeof(struct mlx5_err_cqe));
    OFF(mlx5_err_cqe, vendor_err_synd);
    OFF(mlx5_err_cqe, syndrome);
    OFF(mlx5_err_cqe, s_wqe_opcode_qpn);
    OFF(mlx5_err_cqe, wqe_counter);
    OFF(mlx5_err_cqe, op_own);
    P("MLX5_SEND_WQE_BB", MLX5_SEND_WQE_BB);
    P("MLX5_SEND_WQE_SHIFT", MLX5_SEND_WQE_SHIFT);
    P("MLX5_INLINE_SEG", MLX5_INLINE_SEG);
    P("MLX5_INVALID_LKEY", MLX5_INVALID_LKEY);
    P("MLX5_WQE_CTRL_CQ_UPDATE", MLX5_WQE_CTRL_CQ_UPDATE);
    P("MLX5_WQE_CTRL_SOLICITED", MLX5_WQE_CTRL_SOLICITED);
    P("MLX5_WQE_CTRL_FENCE", MLX5_WQE_CTRL_FENCE);
    P("MLX5_OPCODE_NOP", MLX5_OPCODE_NOP);
    P("MLX5_OPCODE_RDMA_WRITE", MLX5_OPCODE_RDMA_WRITE);
    P("MLX5_OPCODE_RDMA_WRITE_IMM", MLX5_OPCODE_RDMA_WRITE_IMM);
    P("MLX5_OPCODE_SEND", MLX5_OPCODE_SEND);
    P("MLX5_OPCODE_SEND_IMM", MLX5_OPCODE_SEND_IMM);
    P("MLX5_CQE_OWNER_MASK", MLX5_CQE_OWNER_MASK);
    P("MLX5_CQE_REQ", MLX5_CQE_REQ);
    P("MLX5_CQE_RESP_WR_IMM", MLX5_CQE_RESP_WR_IMM);
    P("MLX5_CQE_RESP_SEND", MLX5_CQE_RESP_SEND);
    P("MLX5_CQE_RESP_SEND_IMM", MLX5_CQE_RESP_SEND_IMM);
    P("MLX5_CQE_REQ_ERR", MLX5_CQE_REQ_ERR);
    P("MLX5_CQE_RESP_ERR", MLX5_CQE_RESP_ERR);
    P("MLX5_CQE_INVALID", MLX5_CQE_INVALID);
    P("MLX5_INLINE_SCATTER_32", MLX5_INLINE_SCATTER_32);
    P("MLX5_INLINE_SCATTER_64", MLX5_INLINE_SCATTER_64);
    P("MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR", MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
    P("MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR", MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
    P("MLX5_CQE_SYNDROME_LOCAL_PROT_ERR", MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
    P("MLX5_CQE_SYNDROME_WR_FLUSH_ERR", MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
    P("MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR", MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
    P("MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR", MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR);
    P("sizeof.mlx5dv_qp", sizeof(struct mlx5dv_qp));
    OFF(mlx5dv_qp, dbrec);
    OFF(mlx5dv_qp, sq.buf);
    OFF(mlx5dv_qp, sq.wqe_cnt);
    OFF(mlx5dv_qp, sq.stride);
    OFF(mlx5dv_qp, rq.buf);
    OFF(mlx5dv_qp, rq.wqe_cnt);
    OFF(mlx5dv_qp, rq.stride);
    OFF(mlx5dv_qp, bf.reg);
    OFF(mlx5dv_qp, bf.size);
    OFF(mlx5dv_qp, comp_mask);
    OFF(mlx5dv_qp, uar_mmap_offset);
    OFF(mlx5dv_qp, sqn);
    OFF(mlx5dv_qp, tir_icm_addr);
    P("sizeof.mlx5dv_cq", sizeof(struct mlx5dv_cq));
    OFF(mlx5dv_cq, buf);
    OFF(mlx5dv_cq, dbrec);
    OFF(mlx5dv_cq, cqe_cnt);
    OFF(mlx5dv_cq, cqe_size);
    OFF(mlx5dv_cq, cq_uar);
    OFF(mlx5dv_cq, cqn);
    OFF(mlx5dv_cq, comp_mask);
    P("sizeof.mlx5dv_obj", sizeof(struct mlx5dv_obj));
    OFF(mlx5dv_obj, qp.in);
    OFF(mlx5dv_obj, qp.out);
    OFF(mlx5dv_obj, cq.in);
    OFF(mlx5dv_obj, cq.out);
    OFF(mlx5dv_obj, pd.out);
    P("MLX5DV_OBJ_QP", MLX5DV_OBJ_QP);
    P("MLX5DV_OBJ_CQ", MLX5DV_OBJ_CQ);
    P("MLX5_RCV_DBR", MLX5_RCV_DBR);
    P("MLX5_SND_DBR", MLX5_SND_DBR);

    /* A SEND with one data segment, as the header's helpers write it. */
    unsigned char send[32];
    memset(send, 0, sizeof send);
    mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)send, 0x1234, MLX5_OPCODE_SEND, 0,
                        0xabcdef, MLX5_WQE_CTRL_CQ_UPDATE, 2, 0, 0);
    mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)(send + 16), 4120, 0x5eed0,
                        (uintptr_t)0x00007f0012345678ull);
    hex("wqe.send_data", send, sizeof send);

    /* A WRITE_IMM: ctrl, raddr, data (libmlx5 qp.c set_raddr_seg). */
    unsigned char wimm[48];
    memset(wimm, 0, sizeof wimm);
    mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)wimm, 0xfffe, MLX5_OPCODE_RDMA_WRITE_IMM, 0,
                        0x1c0, MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED, 3, 0,
                        htobe32(0x2a));
    struct mlx5_wqe_raddr_seg *r = (struct mlx5_wqe_raddr_seg *)(wimm + 16);
    r->raddr = htobe64(0x1122334455667788ull);
    r->rkey = htobe32(0xdeadbeef);
    r->reserved = 0;
    mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)(wimm + 32), 64, 0x77, (uintptr_t)0x1000);
    hex("wqe.write_imm", wimm, sizeof wimm);

    /* A SEND with 13 bytes inline (libmlx5 qp.c set_data_inl_seg): ds = 3. */
    unsigned char inl[48];
    memset(inl, 0, sizeof inl);
    mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)inl, 7, MLX5_OPCODE_SEND, 0, 9,
                        MLX5_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
    struct mlx5_wqe_inl_data_seg *is = (struct mlx5_wqe_inl_data_seg *)(inl + 16);
    is->byte_count = htobe32(13 | MLX5_INLINE_SEG);
    memcpy(inl + 16 + sizeof *is, "hello, mlx5!!", 13);
    hex("wqe.send_inline", inl, sizeof inl);

    /* A requester CQE and an error CQE, as the device writes them. */
    struct mlx5_cqe64 c;
    memset(&c, 0, sizeof c);
    c.imm_inval_pkey = htobe32(0x01020304);
    c.byte_cnt = htobe32(25);
    c.timestamp = htobe64(0x0a0b0c0d0e0f1011ull);
    c.sop_drop_qpn = htobe32((MLX5_OPCODE_SEND << 24) | 0x1c0);
    c.wqe_counter = htobe16(0xbeef);
    c.op_own = (MLX5_CQE_REQ << 4) | 1;
    hex("cqe.req", &c, sizeof c);
    struct mlx5_err_cqe e;
    memset(&e, 0, sizeof e);
    e.syndrome = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
    e.vendor_err_synd = 0x77;
    e.s_wqe_opcode_qpn = htobe32((MLX5_OPCODE_SEND << 24) | 0x1c0);
    e.wqe_counter = htobe16(5);
    e.op_own = (MLX5_CQE_REQ_ERR << 4);
    hex("cqe.req_err", &e, sizeof e);

    /* A SEND of at most 32 bytes scattered into the CQE: the format mlx5dv reads. */
    memset(&c, 0, sizeof c);
    c.op_own = (MLX5_CQE_RESP_SEND << 4) | MLX5_INLINE_SCATTER_32 | 1;
    P("cqe_format.inline_scatter_32", mlx5dv_get_cqe_format(&c));
    return 0;
}
"#;

fn skip_or_fail(why: &str) {
    if std::env::var("QFWD_REQUIRE_MLX5DV").as_deref() == Ok("1") {
        panic!("QFWD_REQUIRE_MLX5DV=1 but the mlx5dv probe cannot run: {why}");
    }
    eprintln!("SKIP mlx5 layout probe: {why} (install libibverbs-dev and a C compiler to run it)");
}

/// The probe's output, compiled and run once per test process.
fn probe() -> Option<HashMap<String, String>> {
    static OUT: std::sync::OnceLock<Option<HashMap<String, String>>> = std::sync::OnceLock::new();
    OUT.get_or_init(run_probe).clone()
}

/// Compiles and runs the probe; `None` (after printing why) when it cannot.
fn run_probe() -> Option<HashMap<String, String>> {
    let header = PathBuf::from("/usr/include/infiniband/mlx5dv.h");
    let dir = std::env::temp_dir().join(format!("qfwd-mlx5-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    std::fs::write(&src, PROBE).expect("write probe");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = match Command::new(&cc)
        .arg("-std=gnu11")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            skip_or_fail(&format!("cannot run the C compiler {cc:?}: {e}"));
            return None;
        }
    };
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("mlx5dv.h") && !header.exists() {
            skip_or_fail(&format!("{} not found", header.display()));
            return None;
        }
        panic!("the probe does not compile against mlx5dv.h:\n{stderr}");
    }
    let out = Command::new(&exe).output().expect("run probe");
    assert!(out.status.success(), "probe failed: {out:?}");
    let _ = std::fs::remove_dir_all(&dir);
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn rust_layouts_match_mlx5dv_h() {
    let Some(c) = probe() else { return };
    let num = |k: &str| -> usize {
        c.get(k)
            .unwrap_or_else(|| panic!("probe printed no {k}"))
            .parse()
            .unwrap()
    };
    let checks: &[(&str, usize)] = &[
        ("sizeof.mlx5_wqe_ctrl_seg", ctrl::SIZE),
        ("mlx5_wqe_ctrl_seg.opmod_idx_opcode", ctrl::OPMOD_IDX_OPCODE),
        ("mlx5_wqe_ctrl_seg.qpn_ds", ctrl::QPN_DS),
        ("mlx5_wqe_ctrl_seg.signature", ctrl::SIGNATURE),
        (
            "mlx5_wqe_ctrl_seg.dci_stream_channel_id",
            ctrl::DCI_STREAM_CHANNEL_ID,
        ),
        ("mlx5_wqe_ctrl_seg.fm_ce_se", ctrl::FM_CE_SE),
        ("mlx5_wqe_ctrl_seg.imm", ctrl::IMM),
        ("sizeof.mlx5_wqe_raddr_seg", raddr::SIZE),
        ("mlx5_wqe_raddr_seg.raddr", raddr::RADDR),
        ("mlx5_wqe_raddr_seg.rkey", raddr::RKEY),
        ("mlx5_wqe_raddr_seg.reserved", raddr::RESERVED),
        ("sizeof.mlx5_wqe_data_seg", data::SIZE),
        ("mlx5_wqe_data_seg.byte_count", data::BYTE_COUNT),
        ("mlx5_wqe_data_seg.lkey", data::LKEY),
        ("mlx5_wqe_data_seg.addr", data::ADDR),
        ("sizeof.mlx5_wqe_inl_data_seg", inline::HEADER),
        ("mlx5_wqe_inl_data_seg.byte_count", inline::BYTE_COUNT),
        ("sizeof.mlx5_cqe64", cqe::SIZE),
        ("mlx5_cqe64.srqn_uidx", cqe::SRQN_UIDX),
        ("mlx5_cqe64.imm_inval_pkey", cqe::IMM_INVAL_PKEY),
        ("mlx5_cqe64.app", cqe::APP),
        ("mlx5_cqe64.app_op", cqe::APP_OP),
        ("mlx5_cqe64.app_info", cqe::APP_INFO),
        ("mlx5_cqe64.byte_cnt", cqe::BYTE_CNT),
        ("mlx5_cqe64.timestamp", cqe::TIMESTAMP),
        ("mlx5_cqe64.sop_drop_qpn", cqe::SOP_DROP_QPN),
        ("mlx5_cqe64.wqe_counter", cqe::WQE_COUNTER),
        ("mlx5_cqe64.signature", cqe::SIGNATURE),
        ("mlx5_cqe64.op_own", cqe::OP_OWN),
        ("sizeof.mlx5_err_cqe", cqe::SIZE),
        ("mlx5_err_cqe.vendor_err_synd", cqe::VENDOR_ERR_SYND),
        ("mlx5_err_cqe.syndrome", cqe::SYNDROME),
        ("mlx5_err_cqe.s_wqe_opcode_qpn", cqe::S_WQE_OPCODE_QPN),
        ("mlx5_err_cqe.wqe_counter", cqe::WQE_COUNTER),
        ("mlx5_err_cqe.op_own", cqe::OP_OWN),
        ("MLX5_SEND_WQE_BB", layout::WQEBB),
        ("MLX5_SEND_WQE_SHIFT", layout::WQEBB_SHIFT as usize),
        ("MLX5_INLINE_SEG", inline::FLAG as usize),
        ("MLX5_INVALID_LKEY", data::INVALID_LKEY as usize),
        ("MLX5_WQE_CTRL_CQ_UPDATE", ctrl::CQ_UPDATE as usize),
        ("MLX5_WQE_CTRL_SOLICITED", ctrl::SOLICITED as usize),
        ("MLX5_WQE_CTRL_FENCE", ctrl::FENCE as usize),
        ("MLX5_OPCODE_NOP", opcodes::NOP as usize),
        ("MLX5_OPCODE_RDMA_WRITE", opcodes::RDMA_WRITE as usize),
        (
            "MLX5_OPCODE_RDMA_WRITE_IMM",
            opcodes::RDMA_WRITE_IMM as usize,
        ),
        ("MLX5_OPCODE_SEND", opcodes::SEND as usize),
        ("MLX5_OPCODE_SEND_IMM", opcodes::SEND_IMM as usize),
        ("MLX5_CQE_OWNER_MASK", cqe::OWNER_MASK as usize),
        ("MLX5_CQE_REQ", CqeOpcode::Req as usize),
        ("MLX5_CQE_RESP_WR_IMM", CqeOpcode::RespWrImm as usize),
        ("MLX5_CQE_RESP_SEND", CqeOpcode::RespSend as usize),
        ("MLX5_CQE_RESP_SEND_IMM", CqeOpcode::RespSendImm as usize),
        ("MLX5_CQE_REQ_ERR", CqeOpcode::ReqErr as usize),
        ("MLX5_CQE_RESP_ERR", CqeOpcode::RespErr as usize),
        ("MLX5_CQE_INVALID", CqeOpcode::Invalid as usize),
        ("MLX5_INLINE_SCATTER_32", cqe::INLINE_SCATTER_32 as usize),
        ("MLX5_INLINE_SCATTER_64", cqe::INLINE_SCATTER_64 as usize),
        (
            "cqe_format.inline_scatter_32",
            qfwd::abi::CQE_FORMAT_INLINE_32 as usize,
        ),
        (
            "MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR",
            Syndrome::LocalLength as usize,
        ),
        (
            "MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR",
            Syndrome::LocalQpOp as usize,
        ),
        (
            "MLX5_CQE_SYNDROME_LOCAL_PROT_ERR",
            Syndrome::LocalProt as usize,
        ),
        ("MLX5_CQE_SYNDROME_WR_FLUSH_ERR", Syndrome::WrFlush as usize),
        (
            "MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR",
            Syndrome::RemoteAccess as usize,
        ),
        (
            "MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR",
            Syndrome::RemoteAborted as usize,
        ),
        ("MLX5_RCV_DBR", qp_dbrec::RCV),
        ("MLX5_SND_DBR", qp_dbrec::SND),
    ];
    let mut wrong = vec![];
    for &(k, rust) in checks {
        if num(k) != rust {
            wrong.push(format!("{k}: C {} vs Rust {rust}", num(k)));
        }
    }
    assert!(wrong.is_empty(), "layout drift:\n{}", wrong.join("\n"));
    assert_eq!(cq_dbrec::SET_CI, 0);
}

#[test]
fn rust_builders_write_the_bytes_the_c_helpers_write() {
    let Some(c) = probe() else { return };
    let want = |k: &str| {
        c.get(k)
            .unwrap_or_else(|| panic!("probe printed no {k}"))
            .clone()
    };

    let send = opcode::Send::new(0x0000_7f00_1234_5678, 0x5eed0, 4120)
        .build()
        .with_index(0x1234)
        .with_qpn(0xab_cdef);
    assert_eq!(hex(send.as_bytes()), want("wqe.send_data"));

    let wimm = opcode::WriteImm::new(0x1122_3344_5566_7788, 0xdead_beef, 0x1000, 0x77, 64, 0x2a)
        .solicited(true)
        .build()
        .with_index(0xfffe)
        .with_qpn(0x1c0);
    assert_eq!(hex(wimm.as_bytes()), want("wqe.write_imm"));

    let inl = opcode::SendInline::new(b"hello, mlx5!!")
        .build()
        .unwrap()
        .with_index(7)
        .with_qpn(9);
    assert_eq!(hex(inl.as_bytes()), want("wqe.send_inline"));

    // Segment codecs on their own agree with the same bytes.
    let bytes = send.as_bytes();
    let mut s = [0u8; 16];
    s.copy_from_slice(&bytes[16..32]);
    assert_eq!(
        DataSeg::decode(&s),
        DataSeg {
            byte_count: 4120,
            lkey: 0x5eed0,
            addr: 0x0000_7f00_1234_5678
        }
    );
    s.copy_from_slice(&wimm.as_bytes()[16..32]);
    assert_eq!(
        RaddrSeg::decode(&s),
        RaddrSeg {
            raddr: 0x1122_3344_5566_7788,
            rkey: 0xdead_beef
        }
    );
    s.copy_from_slice(&bytes[..16]);
    assert_eq!(CtrlSeg::decode(&s).wqe_index, 0x1234);

    let mut req = Cqe::new(CqeOpcode::Req, 0x1c0, 0xbeef);
    req.imm = 0x0102_0304;
    req.byte_cnt = 25;
    req.timestamp = 0x0a0b_0c0d_0e0f_1011;
    req.sop = opcodes::SEND;
    assert_eq!(hex(&req.encode(true)), want("cqe.req"));
    let mut err = Cqe::error(
        CqeOpcode::ReqErr,
        0x1c0,
        5,
        opcodes::SEND,
        Syndrome::LocalQpOp,
    );
    err.vendor_err_synd = 0x77;
    assert_eq!(hex(&err.encode(false)), want("cqe.req_err"));
}

/// Our own FFI mirrors of the direct-verbs structs (feature `rdma`).
#[cfg(feature = "rdma")]
#[test]
fn dv_ffi_structs_match_mlx5dv_h() {
    use qfwd::mlx5::dv::{mlx5dv_cq, mlx5dv_obj, mlx5dv_qp, MLX5DV_OBJ_CQ, MLX5DV_OBJ_QP};
    use std::mem::{offset_of, size_of};
    let Some(c) = probe() else { return };
    let num = |k: &str| -> usize {
        c.get(k)
            .unwrap_or_else(|| panic!("probe printed no {k}"))
            .parse()
            .unwrap()
    };
    let checks: &[(&str, usize)] = &[
        ("sizeof.mlx5dv_qp", size_of::<mlx5dv_qp>()),
        ("mlx5dv_qp.dbrec", offset_of!(mlx5dv_qp, dbrec)),
        ("mlx5dv_qp.sq.buf", offset_of!(mlx5dv_qp, sq.buf)),
        ("mlx5dv_qp.sq.wqe_cnt", offset_of!(mlx5dv_qp, sq.wqe_cnt)),
        ("mlx5dv_qp.sq.stride", offset_of!(mlx5dv_qp, sq.stride)),
        ("mlx5dv_qp.rq.buf", offset_of!(mlx5dv_qp, rq.buf)),
        ("mlx5dv_qp.rq.wqe_cnt", offset_of!(mlx5dv_qp, rq.wqe_cnt)),
        ("mlx5dv_qp.rq.stride", offset_of!(mlx5dv_qp, rq.stride)),
        ("mlx5dv_qp.bf.reg", offset_of!(mlx5dv_qp, bf.reg)),
        ("mlx5dv_qp.bf.size", offset_of!(mlx5dv_qp, bf.size)),
        ("mlx5dv_qp.comp_mask", offset_of!(mlx5dv_qp, comp_mask)),
        (
            "mlx5dv_qp.uar_mmap_offset",
            offset_of!(mlx5dv_qp, uar_mmap_offset),
        ),
        ("mlx5dv_qp.sqn", offset_of!(mlx5dv_qp, sqn)),
        (
            "mlx5dv_qp.tir_icm_addr",
            offset_of!(mlx5dv_qp, tir_icm_addr),
        ),
        ("sizeof.mlx5dv_cq", size_of::<mlx5dv_cq>()),
        ("mlx5dv_cq.buf", offset_of!(mlx5dv_cq, buf)),
        ("mlx5dv_cq.dbrec", offset_of!(mlx5dv_cq, dbrec)),
        ("mlx5dv_cq.cqe_cnt", offset_of!(mlx5dv_cq, cqe_cnt)),
        ("mlx5dv_cq.cqe_size", offset_of!(mlx5dv_cq, cqe_size)),
        ("mlx5dv_cq.cq_uar", offset_of!(mlx5dv_cq, cq_uar)),
        ("mlx5dv_cq.cqn", offset_of!(mlx5dv_cq, cqn)),
        ("mlx5dv_cq.comp_mask", offset_of!(mlx5dv_cq, comp_mask)),
        ("sizeof.mlx5dv_obj", size_of::<mlx5dv_obj>()),
        ("mlx5dv_obj.qp.in", offset_of!(mlx5dv_obj, qp.input)),
        ("mlx5dv_obj.qp.out", offset_of!(mlx5dv_obj, qp.output)),
        ("mlx5dv_obj.cq.in", offset_of!(mlx5dv_obj, cq.input)),
        ("mlx5dv_obj.cq.out", offset_of!(mlx5dv_obj, cq.output)),
        ("mlx5dv_obj.pd.out", offset_of!(mlx5dv_obj, pd.output)),
        ("MLX5DV_OBJ_QP", MLX5DV_OBJ_QP as usize),
        ("MLX5DV_OBJ_CQ", MLX5DV_OBJ_CQ as usize),
    ];
    let wrong: Vec<String> = checks
        .iter()
        .filter(|(k, rust)| num(k) != *rust)
        .map(|(k, rust)| format!("{k}: C {} vs Rust {rust}", num(k)))
        .collect();
    assert!(wrong.is_empty(), "dv FFI drift:\n{}", wrong.join("\n"));
}

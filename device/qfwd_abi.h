// Generated from src/abi.rs by qfwd: the constants and parameter structs that the
// host and the kernels share. Do not edit: change src/abi.rs, then run
// `QFWD_BLESS=1 cargo test -p qfwd --lib abi` to rewrite this file.
#pragma once

// ---- wire ----
#define QFWD_REQUEST_MAGIC 0x43555152u
#define QFWD_RESPONSE_MAGIC 0x43555153u
#define QFWD_WIRE_HEADER_BYTES 24u
#define QFWD_STATUS_OK (0)
#define QFWD_STATUS_BAD_ARGUMENT (1)
#define QFWD_STATUS_LENGTH_MISMATCH (-3)
#define QFWD_STATUS_UNKNOWN_FUNCTION (-4)
#define QFWD_STATUS_OVERSIZED (-5)
#define QFWD_CODE_PARITY 1u
#define QFWD_CODE_LUT 2u
#define QFWD_CODE_UF 3u

// ---- mlx5 ----
#define QFWD_WQEBB 64u
#define QFWD_CQE_BYTES 64u
#define QFWD_OPCODE_SEND 10u
#define QFWD_CTRL_CQ_UPDATE 8u
#define QFWD_INLINE_SEG 0x80000000u
#define QFWD_MAX_INLINE 236u
#define QFWD_CQE_OPCODE_REQ 0u
#define QFWD_CQE_OPCODE_RESP_WR_IMM 1u
#define QFWD_CQE_OPCODE_RESP_SEND 2u
#define QFWD_CQE_OPCODE_REQ_ERR 13u
#define QFWD_CQE_OPCODE_RESP_ERR 14u
#define QFWD_CQE_OPCODE_INVALID 15u
#define QFWD_CQE_FORMAT_INLINE_32 1u
#define QFWD_DB_MODE_CPU_ASSISTED 0u
#define QFWD_DB_MODE_REGULAR 1u
#define QFWD_DB_MODE_BLUEFLAME 2u

// ---- gpu-direct ----
#define QFWD_POISON_WORD 0xffffffffu
#define QFWD_STOP_WORD 0x53544f50u
#define QFWD_MAX_LINKS 64u
#define QFWD_MAX_WARPS_PER_LINK 16u
#define QFWD_MAX_FUNCTIONS 32u
#define QFWD_MAX_RX_SLOTS 1024u
#define QFWD_WARP_COUNTERS 16u
#define QFWD_HEARTBEAT_POLLS 4096u
#define QFWD_CREDIT_BATCH 16u
#define QFWD_CTR_POLLS 0u
#define QFWD_CTR_RECEIVED 1u
#define QFWD_CTR_OK 2u
#define QFWD_CTR_BAD_ARGUMENT 3u
#define QFWD_CTR_LENGTH_MISMATCH 4u
#define QFWD_CTR_UNKNOWN_FUNCTION 5u
#define QFWD_CTR_OVERSIZED 6u
#define QFWD_CTR_OTHER_ERROR 7u
#define QFWD_CTR_TRUNCATED_HEADER 8u
#define QFWD_CTR_BAD_MAGIC 9u
#define QFWD_CTR_RX_ERROR 10u
#define QFWD_CTR_SEND_FAILED 11u
#define QFWD_CTR_TORN 12u
#define QFWD_CTR_POSTED 13u
#define QFWD_CTR_TX_ERRORS 14u
#define QFWD_CTR_LOST_CLAIMS 15u

struct QfwdLinkDesc {
    unsigned long long rx_cq;
    unsigned long long rx_cq_dbrec;
    unsigned long long qp_dbrec;
    unsigned long long rx_ring;
    unsigned long long sq;
    unsigned long long bf;
    unsigned long long tx_cq;
    unsigned long long tx_cq_dbrec;
    unsigned long long resp_ring;
    unsigned long long resp_ci;
    unsigned long long counters;
    unsigned int rx_cqes;
    unsigned int rx_slots;
    unsigned int rx_slot_bytes;
    unsigned int sq_wqebbs;
    unsigned int tx_cqes;
    unsigned int qpn;
    unsigned int bf_size;
    unsigned int signal_every;
    unsigned int resp_slots;
    unsigned int resp_slot_bytes;
    unsigned int doorbell;
    unsigned int reserved;
};
static_assert(sizeof(struct QfwdLinkDesc) == 136, "QfwdLinkDesc size");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, rx_cq) == 0, "QfwdLinkDesc.rx_cq");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, rx_cq_dbrec) == 8, "QfwdLinkDesc.rx_cq_dbrec");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, qp_dbrec) == 16, "QfwdLinkDesc.qp_dbrec");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, rx_ring) == 24, "QfwdLinkDesc.rx_ring");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, sq) == 32, "QfwdLinkDesc.sq");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, bf) == 40, "QfwdLinkDesc.bf");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, tx_cq) == 48, "QfwdLinkDesc.tx_cq");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, tx_cq_dbrec) == 56, "QfwdLinkDesc.tx_cq_dbrec");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, resp_ring) == 64, "QfwdLinkDesc.resp_ring");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, resp_ci) == 72, "QfwdLinkDesc.resp_ci");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, counters) == 80, "QfwdLinkDesc.counters");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, rx_cqes) == 88, "QfwdLinkDesc.rx_cqes");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, rx_slots) == 92, "QfwdLinkDesc.rx_slots");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, rx_slot_bytes) == 96, "QfwdLinkDesc.rx_slot_bytes");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, sq_wqebbs) == 100, "QfwdLinkDesc.sq_wqebbs");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, tx_cqes) == 104, "QfwdLinkDesc.tx_cqes");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, qpn) == 108, "QfwdLinkDesc.qpn");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, bf_size) == 112, "QfwdLinkDesc.bf_size");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, signal_every) == 116, "QfwdLinkDesc.signal_every");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, resp_slots) == 120, "QfwdLinkDesc.resp_slots");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, resp_slot_bytes) == 124, "QfwdLinkDesc.resp_slot_bytes");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, doorbell) == 128, "QfwdLinkDesc.doorbell");
static_assert(__builtin_offsetof(struct QfwdLinkDesc, reserved) == 132, "QfwdLinkDesc.reserved");

struct QfwdDirectParams {
    unsigned long long links;
    unsigned int nlinks;
    unsigned int warps_per_link;
    unsigned int pollers_per_slot;
    unsigned int max_request_bytes;
    unsigned int poll_chunks;
    unsigned int nfunctions;
    unsigned int function_ids[32];
    unsigned int function_codes[32];
};
static_assert(sizeof(struct QfwdDirectParams) == 288, "QfwdDirectParams size");
static_assert(__builtin_offsetof(struct QfwdDirectParams, links) == 0, "QfwdDirectParams.links");
static_assert(__builtin_offsetof(struct QfwdDirectParams, nlinks) == 8, "QfwdDirectParams.nlinks");
static_assert(__builtin_offsetof(struct QfwdDirectParams, warps_per_link) == 12, "QfwdDirectParams.warps_per_link");
static_assert(__builtin_offsetof(struct QfwdDirectParams, pollers_per_slot) == 16, "QfwdDirectParams.pollers_per_slot");
static_assert(__builtin_offsetof(struct QfwdDirectParams, max_request_bytes) == 20, "QfwdDirectParams.max_request_bytes");
static_assert(__builtin_offsetof(struct QfwdDirectParams, poll_chunks) == 24, "QfwdDirectParams.poll_chunks");
static_assert(__builtin_offsetof(struct QfwdDirectParams, nfunctions) == 28, "QfwdDirectParams.nfunctions");
static_assert(__builtin_offsetof(struct QfwdDirectParams, function_ids) == 32, "QfwdDirectParams.function_ids");
static_assert(__builtin_offsetof(struct QfwdDirectParams, function_codes) == 160, "QfwdDirectParams.function_codes");

// Generated from src/abi.rs by qfwd: the constants and parameter structs that the
// host and the kernels share. Do not edit: change src/abi.rs, then run
// `QFWD_BLESS=1 cargo test -p qfwd --lib abi` to rewrite this file.
#ifndef QFWD_ABI_H
#define QFWD_ABI_H

// ---- wire ----
#define QFWD_REQUEST_MAGIC 0x43555152u
#define QFWD_RESPONSE_MAGIC 0x43555153u
#define QFWD_WIRE_HEADER_BYTES 24u
#define QFWD_STATUS_OK (0)
#define QFWD_STATUS_BAD_ARGUMENT (1)
#define QFWD_STATUS_LENGTH_MISMATCH (-3)
#define QFWD_STATUS_UNKNOWN_FUNCTION (-4)
#define QFWD_STATUS_OVERSIZED (-5)
#define QFWD_STATUS_OVER_BUDGET (2)
#define QFWD_CODE_PARITY 1u
#define QFWD_CODE_LUT 2u
#define QFWD_CODE_UF 3u
#define QFWD_CODE_MATCHING 4u
#define QFWD_CODE_STALL 0xdeb00001u

// ---- mailbox (device/forward.cu) ----
#define QFWD_CHUNK_BYTES 16u
#define QFWD_INLINE_DATA_BYTES 12u
#define QFWD_HEADER_BYTES 8u
#define QFWD_REPLY_ID_BYTES 12u
#define QFWD_DEVICE_SENT 0x80000000u
#define QFWD_STOP_TAG 0xffffffffu
#define QFWD_TAG_PERIOD 0xfffffffeull
#define QFWD_MAX_ROUNDS 8u
#define QFWD_CONTROL_RELEASE_OFFSET 0u
#define QFWD_STATE_CLAIM_STRIDE 128u
#define QFWD_MAX_GROUPS 32u
#define QFWD_STATE_COUNTERS_OFFSET 4096u
#define QFWD_COUNTERS_PER_POLLER 4u
#define QFWD_MAX_STALL_US 0x989680u

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

// ---- GPU-initiated doorbells (device/doorbell.cu) ----
#define QFWD_RESP_FIRST_DATA 8u
#define QFWD_RESP_CHUNK_DATA 12u
#define QFWD_POSTING_LOCK 256u
#define QFWD_POSTING_STATE 384u
#define QFWD_POSTING_COUNTERS 512u
#define QFWD_POSTING_BYTES 640u
#define QFWD_POST_CTR_POSTED 0u
#define QFWD_POST_CTR_FALLBACKS 1u
#define QFWD_POST_CTR_LOCK_SPINS 2u
#define QFWD_POST_CTR_ROOM_WAITS 3u
#define QFWD_POST_CTR_CQES 4u
#define QFWD_POST_CTR_ERROR_CQES 5u

// ---- decoders (device/decode.cu) ----
#define QFWD_DEC_NO_ID 65535u
#define QFWD_DEC_NO_TREE 0xffffffffu
#define QFWD_DEC_ODD 1u
#define QFWD_DEC_BOUNDARY 2u
#define QFWD_DEC_UNROLL 12u
#define QFWD_DEC_MAX_DEGREE 60u
#define QFWD_DEC_LOADED_LUT 1u
#define QFWD_DEC_LOADED_UF 2u
#define QFWD_DEC_MAX_RESULT_BYTES 8u
#define QFWD_DEC_LANE_SLOTS 8u

// ---- gpu-direct (device/direct.cu) ----
#define QFWD_POISON_WORD 0xffffffffu
#define QFWD_STOP_WORD 0x53544f50u
#define QFWD_MAX_LINKS 64u
#define QFWD_MAX_WARPS_PER_LINK 8u
#define QFWD_MAX_FUNCTIONS 32u
#define QFWD_MAX_RX_SLOTS 1024u
#define QFWD_WARP_COUNTERS 24u
#define QFWD_HANDOFF_SLOTS 64u
#define QFWD_HANDOFF_SLOT_BYTES 128u
#define QFWD_HANDOFF_HEADER_BYTES 256u
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
#define QFWD_CTR_FENCE_CYCLES 16u
#define QFWD_CTR_FENCES 17u
#define QFWD_CTR_ANSWER_CYCLES 18u
#define QFWD_CTR_ANSWERS 19u
#define QFWD_CTR_STAGE_CYCLES 20u
#define QFWD_CTR_SERVE_CYCLES 21u
#define QFWD_CTR_CREDIT_CYCLES 22u
#define QFWD_CTR_CREDIT_FENCES 23u

struct QfwdPersistentParams {
    unsigned long long req_ring;
    unsigned long long resp_ring;
    unsigned long long control;
    unsigned long long state;
    unsigned long long nic;
    unsigned int slots;
    unsigned int req_slot_bytes;
    unsigned int resp_slot_bytes;
    unsigned int rx_inline;
    unsigned int poll_chunks;
    unsigned int pollers;
    unsigned int pollers_per_slot;
    unsigned int claim_in_block;
};
static_assert(sizeof(struct QfwdPersistentParams) == 72, "QfwdPersistentParams size");
static_assert(sizeof(((struct QfwdPersistentParams*)0)->req_ring) == 8, "QfwdPersistentParams.req_ring");
static_assert(sizeof(((struct QfwdPersistentParams*)0)->resp_ring) == 8, "QfwdPersistentParams.resp_ring");
static_assert(sizeof(((struct QfwdPersistentParams*)0)->control) == 8, "QfwdPersistentParams.control");
static_assert(sizeof(((struct QfwdPersistentParams*)0)->state) == 8, "QfwdPersistentParams.state");
static_assert(sizeof(((struct QfwdPersistentParams*)0)->nic) == 8, "QfwdPersistentParams.nic");
static_assert(sizeof(((struct QfwdPersistentParams*)0)->slots) == 4, "QfwdPersistentParams.slots");
static_assert(sizeof(((struct QfwdPersistentParams*)0)->req_slot_bytes) == 4, "QfwdPersistentParams.req_slot_bytes");
static_assert(sizeof(((struct QfwdPersistentParams*)0)->resp_slot_bytes) == 4, "QfwdPersistentParams.resp_slot_bytes");
static_assert(sizeof(((struct QfwdPersistentParams*)0)->rx_inline) == 4, "QfwdPersistentParams.rx_inline");
static_assert(sizeof(((struct QfwdPersistentParams*)0)->poll_chunks) == 4, "QfwdPersistentParams.poll_chunks");
static_assert(sizeof(((struct QfwdPersistentParams*)0)->pollers) == 4, "QfwdPersistentParams.pollers");
static_assert(sizeof(((struct QfwdPersistentParams*)0)->pollers_per_slot) == 4, "QfwdPersistentParams.pollers_per_slot");
static_assert(sizeof(((struct QfwdPersistentParams*)0)->claim_in_block) == 4, "QfwdPersistentParams.claim_in_block");

struct QfwdServeOnceParams {
    unsigned long long req;
    unsigned long long resp;
    unsigned long long control;
    unsigned int req_slot_bytes;
    unsigned int resp_slot_bytes;
    unsigned int poll_chunks;
    unsigned int reserved;
};
static_assert(sizeof(struct QfwdServeOnceParams) == 40, "QfwdServeOnceParams size");
static_assert(sizeof(((struct QfwdServeOnceParams*)0)->req) == 8, "QfwdServeOnceParams.req");
static_assert(sizeof(((struct QfwdServeOnceParams*)0)->resp) == 8, "QfwdServeOnceParams.resp");
static_assert(sizeof(((struct QfwdServeOnceParams*)0)->control) == 8, "QfwdServeOnceParams.control");
static_assert(sizeof(((struct QfwdServeOnceParams*)0)->req_slot_bytes) == 4, "QfwdServeOnceParams.req_slot_bytes");
static_assert(sizeof(((struct QfwdServeOnceParams*)0)->resp_slot_bytes) == 4, "QfwdServeOnceParams.resp_slot_bytes");
static_assert(sizeof(((struct QfwdServeOnceParams*)0)->poll_chunks) == 4, "QfwdServeOnceParams.poll_chunks");
static_assert(sizeof(((struct QfwdServeOnceParams*)0)->reserved) == 4, "QfwdServeOnceParams.reserved");

struct QfwdPostingDesc {
    unsigned long long sq;
    unsigned long long qp_dbrec;
    unsigned long long bf;
    unsigned long long cq;
    unsigned long long cq_dbrec;
    unsigned int wqe_cnt;
    unsigned int cqe_cnt;
    unsigned int qpn;
    unsigned int bf_size;
    unsigned int mode;
    unsigned int signal_every;
};
static_assert(sizeof(struct QfwdPostingDesc) == 64, "QfwdPostingDesc size");
static_assert(sizeof(((struct QfwdPostingDesc*)0)->sq) == 8, "QfwdPostingDesc.sq");
static_assert(sizeof(((struct QfwdPostingDesc*)0)->qp_dbrec) == 8, "QfwdPostingDesc.qp_dbrec");
static_assert(sizeof(((struct QfwdPostingDesc*)0)->bf) == 8, "QfwdPostingDesc.bf");
static_assert(sizeof(((struct QfwdPostingDesc*)0)->cq) == 8, "QfwdPostingDesc.cq");
static_assert(sizeof(((struct QfwdPostingDesc*)0)->cq_dbrec) == 8, "QfwdPostingDesc.cq_dbrec");
static_assert(sizeof(((struct QfwdPostingDesc*)0)->wqe_cnt) == 4, "QfwdPostingDesc.wqe_cnt");
static_assert(sizeof(((struct QfwdPostingDesc*)0)->cqe_cnt) == 4, "QfwdPostingDesc.cqe_cnt");
static_assert(sizeof(((struct QfwdPostingDesc*)0)->qpn) == 4, "QfwdPostingDesc.qpn");
static_assert(sizeof(((struct QfwdPostingDesc*)0)->bf_size) == 4, "QfwdPostingDesc.bf_size");
static_assert(sizeof(((struct QfwdPostingDesc*)0)->mode) == 4, "QfwdPostingDesc.mode");
static_assert(sizeof(((struct QfwdPostingDesc*)0)->signal_every) == 4, "QfwdPostingDesc.signal_every");

struct QfwdDoorbellSendsParams {
    unsigned long long sq;
    unsigned long long qp_dbrec;
    unsigned long long bf;
    unsigned long long cq;
    unsigned long long cq_dbrec;
    unsigned long long resp_ring;
    unsigned long long resp_ci;
    unsigned long long scratch;
    unsigned long long result;
    unsigned int wqe_cnt;
    unsigned int cqe_cnt;
    unsigned int qpn;
    unsigned int bf_size;
    unsigned int mode;
    unsigned int n;
    unsigned int payload_len;
    unsigned int resp_slots;
    unsigned int resp_slot_bytes;
    unsigned int reserved;
};
static_assert(sizeof(struct QfwdDoorbellSendsParams) == 112, "QfwdDoorbellSendsParams size");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->sq) == 8, "QfwdDoorbellSendsParams.sq");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->qp_dbrec) == 8, "QfwdDoorbellSendsParams.qp_dbrec");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->bf) == 8, "QfwdDoorbellSendsParams.bf");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->cq) == 8, "QfwdDoorbellSendsParams.cq");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->cq_dbrec) == 8, "QfwdDoorbellSendsParams.cq_dbrec");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->resp_ring) == 8, "QfwdDoorbellSendsParams.resp_ring");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->resp_ci) == 8, "QfwdDoorbellSendsParams.resp_ci");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->scratch) == 8, "QfwdDoorbellSendsParams.scratch");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->result) == 8, "QfwdDoorbellSendsParams.result");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->wqe_cnt) == 4, "QfwdDoorbellSendsParams.wqe_cnt");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->cqe_cnt) == 4, "QfwdDoorbellSendsParams.cqe_cnt");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->qpn) == 4, "QfwdDoorbellSendsParams.qpn");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->bf_size) == 4, "QfwdDoorbellSendsParams.bf_size");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->mode) == 4, "QfwdDoorbellSendsParams.mode");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->n) == 4, "QfwdDoorbellSendsParams.n");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->payload_len) == 4, "QfwdDoorbellSendsParams.payload_len");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->resp_slots) == 4, "QfwdDoorbellSendsParams.resp_slots");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->resp_slot_bytes) == 4, "QfwdDoorbellSendsParams.resp_slot_bytes");
static_assert(sizeof(((struct QfwdDoorbellSendsParams*)0)->reserved) == 4, "QfwdDoorbellSendsParams.reserved");

struct QfwdNicPostsParams {
    unsigned long long nic;
    unsigned long long result;
    unsigned int n;
    unsigned int len;
};
static_assert(sizeof(struct QfwdNicPostsParams) == 24, "QfwdNicPostsParams size");
static_assert(sizeof(((struct QfwdNicPostsParams*)0)->nic) == 8, "QfwdNicPostsParams.nic");
static_assert(sizeof(((struct QfwdNicPostsParams*)0)->result) == 8, "QfwdNicPostsParams.result");
static_assert(sizeof(((struct QfwdNicPostsParams*)0)->n) == 4, "QfwdNicPostsParams.n");
static_assert(sizeof(((struct QfwdNicPostsParams*)0)->len) == 4, "QfwdNicPostsParams.len");

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
static_assert(sizeof(((struct QfwdLinkDesc*)0)->rx_cq) == 8, "QfwdLinkDesc.rx_cq");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->rx_cq_dbrec) == 8, "QfwdLinkDesc.rx_cq_dbrec");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->qp_dbrec) == 8, "QfwdLinkDesc.qp_dbrec");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->rx_ring) == 8, "QfwdLinkDesc.rx_ring");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->sq) == 8, "QfwdLinkDesc.sq");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->bf) == 8, "QfwdLinkDesc.bf");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->tx_cq) == 8, "QfwdLinkDesc.tx_cq");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->tx_cq_dbrec) == 8, "QfwdLinkDesc.tx_cq_dbrec");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->resp_ring) == 8, "QfwdLinkDesc.resp_ring");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->resp_ci) == 8, "QfwdLinkDesc.resp_ci");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->counters) == 8, "QfwdLinkDesc.counters");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->rx_cqes) == 4, "QfwdLinkDesc.rx_cqes");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->rx_slots) == 4, "QfwdLinkDesc.rx_slots");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->rx_slot_bytes) == 4, "QfwdLinkDesc.rx_slot_bytes");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->sq_wqebbs) == 4, "QfwdLinkDesc.sq_wqebbs");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->tx_cqes) == 4, "QfwdLinkDesc.tx_cqes");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->qpn) == 4, "QfwdLinkDesc.qpn");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->bf_size) == 4, "QfwdLinkDesc.bf_size");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->signal_every) == 4, "QfwdLinkDesc.signal_every");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->resp_slots) == 4, "QfwdLinkDesc.resp_slots");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->resp_slot_bytes) == 4, "QfwdLinkDesc.resp_slot_bytes");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->doorbell) == 4, "QfwdLinkDesc.doorbell");
static_assert(sizeof(((struct QfwdLinkDesc*)0)->reserved) == 4, "QfwdLinkDesc.reserved");

struct QfwdDirectParams {
    unsigned long long links;
    unsigned long long handoff;
    unsigned int nlinks;
    unsigned int warps_per_link;
    unsigned int pollers_per_slot;
    unsigned int max_request_bytes;
    unsigned int poll_chunks;
    unsigned int nfunctions;
    unsigned int function_ids[32];
    unsigned int function_codes[32];
};
static_assert(sizeof(struct QfwdDirectParams) == 296, "QfwdDirectParams size");
static_assert(sizeof(((struct QfwdDirectParams*)0)->links) == 8, "QfwdDirectParams.links");
static_assert(sizeof(((struct QfwdDirectParams*)0)->handoff) == 8, "QfwdDirectParams.handoff");
static_assert(sizeof(((struct QfwdDirectParams*)0)->nlinks) == 4, "QfwdDirectParams.nlinks");
static_assert(sizeof(((struct QfwdDirectParams*)0)->warps_per_link) == 4, "QfwdDirectParams.warps_per_link");
static_assert(sizeof(((struct QfwdDirectParams*)0)->pollers_per_slot) == 4, "QfwdDirectParams.pollers_per_slot");
static_assert(sizeof(((struct QfwdDirectParams*)0)->max_request_bytes) == 4, "QfwdDirectParams.max_request_bytes");
static_assert(sizeof(((struct QfwdDirectParams*)0)->poll_chunks) == 4, "QfwdDirectParams.poll_chunks");
static_assert(sizeof(((struct QfwdDirectParams*)0)->nfunctions) == 4, "QfwdDirectParams.nfunctions");
static_assert(sizeof(((struct QfwdDirectParams*)0)->function_ids) == 128, "QfwdDirectParams.function_ids");
static_assert(sizeof(((struct QfwdDirectParams*)0)->function_codes) == 128, "QfwdDirectParams.function_codes");

struct QfwdDecoderParams {
    unsigned long long lut_table;
    unsigned long long uf_adj_offset;
    unsigned long long uf_adj;
    unsigned long long uf_edges;
    unsigned long long uf_edge_obs;
    unsigned long long uf_boundary;
    unsigned long long uf_scratch;
    unsigned long long uf_table;
    unsigned long long uf_table_index;
    unsigned int lut_detectors;
    unsigned int lut_entry_bytes;
    unsigned int uf_detectors;
    unsigned int uf_result_bytes;
    unsigned int uf_scratch_bytes;
    unsigned int uf_scratch_warps;
    unsigned int uf_smem_offset;
    unsigned int uf_off_visited;
    unsigned int uf_off_defect;
    unsigned int uf_off_vbits;
    unsigned int uf_off_growth;
    unsigned int uf_clear_bytes;
    unsigned int uf_off_tree;
    unsigned int uf_off_verts;
    unsigned int uf_off_frontier;
    unsigned int uf_off_order;
    unsigned int uf_off_levels;
    unsigned int uf_off_cand;
    unsigned int uf_table_defects;
    unsigned int uf_table_entries;
    unsigned int uf_max_degree;
    unsigned int loaded;
    unsigned long long uf_dist;
    unsigned long long uf_table_times;
    unsigned long long uf_stage;
    unsigned int uf_stage_bytes;
    unsigned int uf_stage_offset;
    unsigned int uf_stage_index;
    unsigned int uf_stage_obs;
    unsigned int uf_stage_times;
    unsigned int uf_stage_entries;
    unsigned int uf_graph_bytes;
    unsigned int uf_graph_offset;
    unsigned int uf_off_phi;
    unsigned int uf_split_max_defects;
    unsigned long long uf_keep;
    unsigned int uf_wire_detectors;
    unsigned int uf_max_defects;
    unsigned int lut_max_defects;
    unsigned int dec_reserved;
};
static_assert(sizeof(struct QfwdDecoderParams) == 248, "QfwdDecoderParams size");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->lut_table) == 8, "QfwdDecoderParams.lut_table");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_adj_offset) == 8, "QfwdDecoderParams.uf_adj_offset");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_adj) == 8, "QfwdDecoderParams.uf_adj");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_edges) == 8, "QfwdDecoderParams.uf_edges");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_edge_obs) == 8, "QfwdDecoderParams.uf_edge_obs");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_boundary) == 8, "QfwdDecoderParams.uf_boundary");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_scratch) == 8, "QfwdDecoderParams.uf_scratch");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_table) == 8, "QfwdDecoderParams.uf_table");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_table_index) == 8, "QfwdDecoderParams.uf_table_index");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->lut_detectors) == 4, "QfwdDecoderParams.lut_detectors");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->lut_entry_bytes) == 4, "QfwdDecoderParams.lut_entry_bytes");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_detectors) == 4, "QfwdDecoderParams.uf_detectors");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_result_bytes) == 4, "QfwdDecoderParams.uf_result_bytes");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_scratch_bytes) == 4, "QfwdDecoderParams.uf_scratch_bytes");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_scratch_warps) == 4, "QfwdDecoderParams.uf_scratch_warps");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_smem_offset) == 4, "QfwdDecoderParams.uf_smem_offset");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_off_visited) == 4, "QfwdDecoderParams.uf_off_visited");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_off_defect) == 4, "QfwdDecoderParams.uf_off_defect");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_off_vbits) == 4, "QfwdDecoderParams.uf_off_vbits");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_off_growth) == 4, "QfwdDecoderParams.uf_off_growth");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_clear_bytes) == 4, "QfwdDecoderParams.uf_clear_bytes");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_off_tree) == 4, "QfwdDecoderParams.uf_off_tree");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_off_verts) == 4, "QfwdDecoderParams.uf_off_verts");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_off_frontier) == 4, "QfwdDecoderParams.uf_off_frontier");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_off_order) == 4, "QfwdDecoderParams.uf_off_order");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_off_levels) == 4, "QfwdDecoderParams.uf_off_levels");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_off_cand) == 4, "QfwdDecoderParams.uf_off_cand");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_table_defects) == 4, "QfwdDecoderParams.uf_table_defects");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_table_entries) == 4, "QfwdDecoderParams.uf_table_entries");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_max_degree) == 4, "QfwdDecoderParams.uf_max_degree");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->loaded) == 4, "QfwdDecoderParams.loaded");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_dist) == 8, "QfwdDecoderParams.uf_dist");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_table_times) == 8, "QfwdDecoderParams.uf_table_times");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_stage) == 8, "QfwdDecoderParams.uf_stage");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_stage_bytes) == 4, "QfwdDecoderParams.uf_stage_bytes");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_stage_offset) == 4, "QfwdDecoderParams.uf_stage_offset");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_stage_index) == 4, "QfwdDecoderParams.uf_stage_index");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_stage_obs) == 4, "QfwdDecoderParams.uf_stage_obs");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_stage_times) == 4, "QfwdDecoderParams.uf_stage_times");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_stage_entries) == 4, "QfwdDecoderParams.uf_stage_entries");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_graph_bytes) == 4, "QfwdDecoderParams.uf_graph_bytes");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_graph_offset) == 4, "QfwdDecoderParams.uf_graph_offset");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_off_phi) == 4, "QfwdDecoderParams.uf_off_phi");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_split_max_defects) == 4, "QfwdDecoderParams.uf_split_max_defects");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_keep) == 8, "QfwdDecoderParams.uf_keep");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_wire_detectors) == 4, "QfwdDecoderParams.uf_wire_detectors");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->uf_max_defects) == 4, "QfwdDecoderParams.uf_max_defects");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->lut_max_defects) == 4, "QfwdDecoderParams.lut_max_defects");
static_assert(sizeof(((struct QfwdDecoderParams*)0)->dec_reserved) == 4, "QfwdDecoderParams.dec_reserved");

// ---- stream windows (device/window.cu) ----
#define QFWD_WINDOW_NONE 0xffffffffu
#define QFWD_WINDOW_ODD 1u
#define QFWD_WINDOW_BOUNDARY 2u
#define QFWD_WINDOW_INF 0xffffffu
#define QFWD_WINDOW_DIST_BITS 24u
#define QFWD_WINDOW_SCALARS 16u
#define QFWD_WINDOW_LANE_CLUSTER 4u
#define QFWD_SCR_DEFECTS 0u
#define QFWD_SCR_BOUND 1u
#define QFWD_SCR_RAD 2u
#define QFWD_SCR_PARENT 3u
#define QFWD_SCR_FLAGS 4u
#define QFWD_SCR_SIZE 5u
#define QFWD_SCR_CAND 6u
#define QFWD_SCR_MEMBERS 7u
#define QFWD_SCR_LEFT 8u
#define QFWD_SCR_PICKS 9u
#define QFWD_SCR_CROSS 10u
#define QFWD_SCR_SCALARS 11u
#define QFWD_SCR_COST 12u
#define QFWD_SCR_CHOICE 13u
#define QFWD_SCR_COUNT 14u
#define QFWD_CACHE_PAIRS 0u
#define QFWD_CACHE_BOUNDS 1u
#define QFWD_CACHE_EXITS 2u
#define QFWD_CACHE_COUNT 3u
#define QFWD_WINDOW_MAX_THREADS 1024u
#define QFWD_STREAM_NO_COMMIT (0)
#define QFWD_STREAM_COMMIT (1)
#define QFWD_STREAM_ROUND_REPEATED (-1)
#define QFWD_STREAM_ROUNDS_MISSING (-2)
#define QFWD_STREAM_FINISHED (-3)
#define QFWD_STREAM_TOO_SHORT (-4)

struct QfwdWindowGraph {
    unsigned int vertices;
    unsigned int edges;
    unsigned int rounds;
    unsigned int commit_rounds;
    unsigned int adj_offset;
    unsigned int adj_pairs;
    unsigned int weight;
    unsigned int obs;
    unsigned int bounds;
    unsigned int exits;
    unsigned int present;
    unsigned int from_start;
    unsigned int is_final;
    unsigned int reserved;
};
static_assert(sizeof(struct QfwdWindowGraph) == 56, "QfwdWindowGraph size");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->vertices) == 4, "QfwdWindowGraph.vertices");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->edges) == 4, "QfwdWindowGraph.edges");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->rounds) == 4, "QfwdWindowGraph.rounds");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->commit_rounds) == 4, "QfwdWindowGraph.commit_rounds");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->adj_offset) == 4, "QfwdWindowGraph.adj_offset");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->adj_pairs) == 4, "QfwdWindowGraph.adj_pairs");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->weight) == 4, "QfwdWindowGraph.weight");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->obs) == 4, "QfwdWindowGraph.obs");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->bounds) == 4, "QfwdWindowGraph.bounds");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->exits) == 4, "QfwdWindowGraph.exits");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->present) == 4, "QfwdWindowGraph.present");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->from_start) == 4, "QfwdWindowGraph.from_start");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->is_final) == 4, "QfwdWindowGraph.is_final");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->reserved) == 4, "QfwdWindowGraph.reserved");

struct QfwdStreamModel {
    unsigned long long data;
    unsigned int graphs;
    unsigned int graph_count;
    unsigned int rounds_per_window;
    unsigned int commit_rounds;
    unsigned int slots;
    unsigned int kept_slots;
    unsigned int round_bytes;
    unsigned int row_words;
    unsigned int min_rounds;
    unsigned int first_final_from_start;
    unsigned int first_final_from_bulk;
    unsigned int max_defects;
    unsigned int scratch_words;
    unsigned int scratch[14];
    unsigned int scratch_hot_words;
    unsigned int match_defects;
    unsigned int pairs;
    unsigned int span;
    unsigned int head_rounds;
    unsigned int tail_rounds;
    unsigned int masks;
    unsigned int bulk_graph;
    unsigned int cache_words;
    unsigned int cache[3];
    unsigned int reserved;
};
static_assert(sizeof(struct QfwdStreamModel) == 168, "QfwdStreamModel size");
static_assert(sizeof(((struct QfwdStreamModel*)0)->data) == 8, "QfwdStreamModel.data");
static_assert(sizeof(((struct QfwdStreamModel*)0)->graphs) == 4, "QfwdStreamModel.graphs");
static_assert(sizeof(((struct QfwdStreamModel*)0)->graph_count) == 4, "QfwdStreamModel.graph_count");
static_assert(sizeof(((struct QfwdStreamModel*)0)->rounds_per_window) == 4, "QfwdStreamModel.rounds_per_window");
static_assert(sizeof(((struct QfwdStreamModel*)0)->commit_rounds) == 4, "QfwdStreamModel.commit_rounds");
static_assert(sizeof(((struct QfwdStreamModel*)0)->slots) == 4, "QfwdStreamModel.slots");
static_assert(sizeof(((struct QfwdStreamModel*)0)->kept_slots) == 4, "QfwdStreamModel.kept_slots");
static_assert(sizeof(((struct QfwdStreamModel*)0)->round_bytes) == 4, "QfwdStreamModel.round_bytes");
static_assert(sizeof(((struct QfwdStreamModel*)0)->row_words) == 4, "QfwdStreamModel.row_words");
static_assert(sizeof(((struct QfwdStreamModel*)0)->min_rounds) == 4, "QfwdStreamModel.min_rounds");
static_assert(sizeof(((struct QfwdStreamModel*)0)->first_final_from_start) == 4, "QfwdStreamModel.first_final_from_start");
static_assert(sizeof(((struct QfwdStreamModel*)0)->first_final_from_bulk) == 4, "QfwdStreamModel.first_final_from_bulk");
static_assert(sizeof(((struct QfwdStreamModel*)0)->max_defects) == 4, "QfwdStreamModel.max_defects");
static_assert(sizeof(((struct QfwdStreamModel*)0)->scratch_words) == 4, "QfwdStreamModel.scratch_words");
static_assert(sizeof(((struct QfwdStreamModel*)0)->scratch) == 56, "QfwdStreamModel.scratch");
static_assert(sizeof(((struct QfwdStreamModel*)0)->scratch_hot_words) == 4, "QfwdStreamModel.scratch_hot_words");
static_assert(sizeof(((struct QfwdStreamModel*)0)->match_defects) == 4, "QfwdStreamModel.match_defects");
static_assert(sizeof(((struct QfwdStreamModel*)0)->pairs) == 4, "QfwdStreamModel.pairs");
static_assert(sizeof(((struct QfwdStreamModel*)0)->span) == 4, "QfwdStreamModel.span");
static_assert(sizeof(((struct QfwdStreamModel*)0)->head_rounds) == 4, "QfwdStreamModel.head_rounds");
static_assert(sizeof(((struct QfwdStreamModel*)0)->tail_rounds) == 4, "QfwdStreamModel.tail_rounds");
static_assert(sizeof(((struct QfwdStreamModel*)0)->masks) == 4, "QfwdStreamModel.masks");
static_assert(sizeof(((struct QfwdStreamModel*)0)->bulk_graph) == 4, "QfwdStreamModel.bulk_graph");
static_assert(sizeof(((struct QfwdStreamModel*)0)->cache_words) == 4, "QfwdStreamModel.cache_words");
static_assert(sizeof(((struct QfwdStreamModel*)0)->cache) == 12, "QfwdStreamModel.cache");
static_assert(sizeof(((struct QfwdStreamModel*)0)->reserved) == 4, "QfwdStreamModel.reserved");

struct QfwdStreamState {
    unsigned long long next_round;
    unsigned long long window_start;
    unsigned int finished;
    unsigned int reserved;
};
static_assert(sizeof(struct QfwdStreamState) == 24, "QfwdStreamState size");
static_assert(sizeof(((struct QfwdStreamState*)0)->next_round) == 8, "QfwdStreamState.next_round");
static_assert(sizeof(((struct QfwdStreamState*)0)->window_start) == 8, "QfwdStreamState.window_start");
static_assert(sizeof(((struct QfwdStreamState*)0)->finished) == 4, "QfwdStreamState.finished");
static_assert(sizeof(((struct QfwdStreamState*)0)->reserved) == 4, "QfwdStreamState.reserved");

struct QfwdCommit {
    unsigned long long first_round;
    unsigned long long flips;
    unsigned int rounds;
    int status;
};
static_assert(sizeof(struct QfwdCommit) == 24, "QfwdCommit size");
static_assert(sizeof(((struct QfwdCommit*)0)->first_round) == 8, "QfwdCommit.first_round");
static_assert(sizeof(((struct QfwdCommit*)0)->flips) == 8, "QfwdCommit.flips");
static_assert(sizeof(((struct QfwdCommit*)0)->rounds) == 4, "QfwdCommit.rounds");
static_assert(sizeof(((struct QfwdCommit*)0)->status) == 4, "QfwdCommit.status");

struct QfwdWindowBatch {
    unsigned long long model;
    unsigned long long states;
    unsigned long long rows;
    unsigned long long events;
    unsigned long long commits;
    unsigned long long counts;
    unsigned long long scratch;
    unsigned long long dp;
    unsigned long long cycles;
    unsigned long long first_round;
    unsigned int streams;
    unsigned int rounds;
    unsigned int finish;
    unsigned int commits_per_stream;
    unsigned int group_threads;
    unsigned int cached;
};
static_assert(sizeof(struct QfwdWindowBatch) == 104, "QfwdWindowBatch size");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->model) == 8, "QfwdWindowBatch.model");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->states) == 8, "QfwdWindowBatch.states");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->rows) == 8, "QfwdWindowBatch.rows");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->events) == 8, "QfwdWindowBatch.events");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->commits) == 8, "QfwdWindowBatch.commits");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->counts) == 8, "QfwdWindowBatch.counts");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->scratch) == 8, "QfwdWindowBatch.scratch");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->dp) == 8, "QfwdWindowBatch.dp");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->cycles) == 8, "QfwdWindowBatch.cycles");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->first_round) == 8, "QfwdWindowBatch.first_round");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->streams) == 4, "QfwdWindowBatch.streams");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->rounds) == 4, "QfwdWindowBatch.rounds");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->finish) == 4, "QfwdWindowBatch.finish");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->commits_per_stream) == 4, "QfwdWindowBatch.commits_per_stream");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->group_threads) == 4, "QfwdWindowBatch.group_threads");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->cached) == 4, "QfwdWindowBatch.cached");

// ---- the persistent stream kernel (device/stream.cu) ----
#define QFWD_SERVE_SEQ_WORD 0u
#define QFWD_SERVE_STOP_WORD 1u
#define QFWD_SERVE_ENTRIES_WORD 2u
#define QFWD_SERVE_JOBS_WORD 4u
#define QFWD_SERVE_CLAIM_WORD 3u
#define QFWD_SERVE_COUNT_WORD 5u
#define QFWD_SERVE_FINISHED_WORD 6u
#define QFWD_SERVE_BUFFERS 2u
#define QFWD_SERVE_CONTROL_BYTES 64u
#define QFWD_SERVE_RESET 1u
#define QFWD_SERVE_FINISH 2u
#define QFWD_SERVE_NO_NEXT 0xffffffffu
#define QFWD_SERVE_PROF_IDLE 0u
#define QFWD_SERVE_PROF_STAGE 1u
#define QFWD_SERVE_PROF_DECODE 2u
#define QFWD_SERVE_PROF_ENTRIES 3u
#define QFWD_SERVE_PROF_ROUNDS 4u
#define QFWD_SERVE_PROF_ANSWERS 5u
#define QFWD_SERVE_PROF_WINDOWS 6u
#define QFWD_SERVE_PROFILE_WORDS 8u

struct QfwdServeEntry {
    unsigned long long first_round;
    unsigned int stream;
    unsigned int flags;
    unsigned int rounds;
    unsigned int events_offset;
    unsigned int commit_offset;
    unsigned int commit_capacity;
    unsigned int next;
    unsigned int reserved;
};
static_assert(sizeof(struct QfwdServeEntry) == 40, "QfwdServeEntry size");
static_assert(sizeof(((struct QfwdServeEntry*)0)->first_round) == 8, "QfwdServeEntry.first_round");
static_assert(sizeof(((struct QfwdServeEntry*)0)->stream) == 4, "QfwdServeEntry.stream");
static_assert(sizeof(((struct QfwdServeEntry*)0)->flags) == 4, "QfwdServeEntry.flags");
static_assert(sizeof(((struct QfwdServeEntry*)0)->rounds) == 4, "QfwdServeEntry.rounds");
static_assert(sizeof(((struct QfwdServeEntry*)0)->events_offset) == 4, "QfwdServeEntry.events_offset");
static_assert(sizeof(((struct QfwdServeEntry*)0)->commit_offset) == 4, "QfwdServeEntry.commit_offset");
static_assert(sizeof(((struct QfwdServeEntry*)0)->commit_capacity) == 4, "QfwdServeEntry.commit_capacity");
static_assert(sizeof(((struct QfwdServeEntry*)0)->next) == 4, "QfwdServeEntry.next");
static_assert(sizeof(((struct QfwdServeEntry*)0)->reserved) == 4, "QfwdServeEntry.reserved");

struct QfwdStreamServe {
    unsigned long long model;
    unsigned long long states;
    unsigned long long rows;
    unsigned long long scratch;
    unsigned long long stage;
    unsigned long long relay;
    unsigned long long control;
    unsigned long long done;
    unsigned long long entries;
    unsigned long long events;
    unsigned long long commits;
    unsigned long long counts;
    unsigned long long profile;
    unsigned long long buffer_stride;
    unsigned int streams;
    unsigned int max_entries;
    unsigned int stage_bytes;
    unsigned int poll_ns;
};
static_assert(sizeof(struct QfwdStreamServe) == 128, "QfwdStreamServe size");
static_assert(sizeof(((struct QfwdStreamServe*)0)->model) == 8, "QfwdStreamServe.model");
static_assert(sizeof(((struct QfwdStreamServe*)0)->states) == 8, "QfwdStreamServe.states");
static_assert(sizeof(((struct QfwdStreamServe*)0)->rows) == 8, "QfwdStreamServe.rows");
static_assert(sizeof(((struct QfwdStreamServe*)0)->scratch) == 8, "QfwdStreamServe.scratch");
static_assert(sizeof(((struct QfwdStreamServe*)0)->stage) == 8, "QfwdStreamServe.stage");
static_assert(sizeof(((struct QfwdStreamServe*)0)->relay) == 8, "QfwdStreamServe.relay");
static_assert(sizeof(((struct QfwdStreamServe*)0)->control) == 8, "QfwdStreamServe.control");
static_assert(sizeof(((struct QfwdStreamServe*)0)->done) == 8, "QfwdStreamServe.done");
static_assert(sizeof(((struct QfwdStreamServe*)0)->entries) == 8, "QfwdStreamServe.entries");
static_assert(sizeof(((struct QfwdStreamServe*)0)->events) == 8, "QfwdStreamServe.events");
static_assert(sizeof(((struct QfwdStreamServe*)0)->commits) == 8, "QfwdStreamServe.commits");
static_assert(sizeof(((struct QfwdStreamServe*)0)->counts) == 8, "QfwdStreamServe.counts");
static_assert(sizeof(((struct QfwdStreamServe*)0)->profile) == 8, "QfwdStreamServe.profile");
static_assert(sizeof(((struct QfwdStreamServe*)0)->buffer_stride) == 8, "QfwdStreamServe.buffer_stride");
static_assert(sizeof(((struct QfwdStreamServe*)0)->streams) == 4, "QfwdStreamServe.streams");
static_assert(sizeof(((struct QfwdStreamServe*)0)->max_entries) == 4, "QfwdStreamServe.max_entries");
static_assert(sizeof(((struct QfwdStreamServe*)0)->stage_bytes) == 4, "QfwdStreamServe.stage_bytes");
static_assert(sizeof(((struct QfwdStreamServe*)0)->poll_ns) == 4, "QfwdStreamServe.poll_ns");

#endif // QFWD_ABI_H

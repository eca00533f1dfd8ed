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
#define QFWD_MAX_WARPS_PER_LINK 8u
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
static_assert(sizeof(((struct QfwdDirectParams*)0)->links) == 8, "QfwdDirectParams.links");
static_assert(sizeof(((struct QfwdDirectParams*)0)->nlinks) == 4, "QfwdDirectParams.nlinks");
static_assert(sizeof(((struct QfwdDirectParams*)0)->warps_per_link) == 4, "QfwdDirectParams.warps_per_link");
static_assert(sizeof(((struct QfwdDirectParams*)0)->pollers_per_slot) == 4, "QfwdDirectParams.pollers_per_slot");
static_assert(sizeof(((struct QfwdDirectParams*)0)->max_request_bytes) == 4, "QfwdDirectParams.max_request_bytes");
static_assert(sizeof(((struct QfwdDirectParams*)0)->poll_chunks) == 4, "QfwdDirectParams.poll_chunks");
static_assert(sizeof(((struct QfwdDirectParams*)0)->nfunctions) == 4, "QfwdDirectParams.nfunctions");
static_assert(sizeof(((struct QfwdDirectParams*)0)->function_ids) == 128, "QfwdDirectParams.function_ids");
static_assert(sizeof(((struct QfwdDirectParams*)0)->function_codes) == 128, "QfwdDirectParams.function_codes");

// ---- stream windows ----
#define QFWD_WINDOW_NONE 0xffffffffu
#define QFWD_WINDOW_ODD 1u
#define QFWD_WINDOW_BOUNDARY 2u
#define QFWD_WINDOW_SCALARS 16u
#define QFWD_SCR_PARENT 0u
#define QFWD_SCR_FLAGS 1u
#define QFWD_SCR_DEFECT 2u
#define QFWD_SCR_LEVEL 3u
#define QFWD_SCR_PEDGE 4u
#define QFWD_SCR_REGION 5u
#define QFWD_SCR_LOCAL 6u
#define QFWD_SCR_RDEF 7u
#define QFWD_SCR_RMEM 8u
#define QFWD_SCR_RLIST 9u
#define QFWD_SCR_GROWTH 10u
#define QFWD_SCR_FUSED 11u
#define QFWD_SCR_MEMBERS 12u
#define QFWD_SCR_DEFECTS 13u
#define QFWD_SCR_DSORT 14u
#define QFWD_SCR_REDGES 15u
#define QFWD_SCR_DIST 16u
#define QFWD_SCR_DISTB 17u
#define QFWD_SCR_MATCHES 18u
#define QFWD_SCR_COST 19u
#define QFWD_SCR_CHOICE 20u
#define QFWD_SCR_SCALARS 21u
#define QFWD_SCR_COUNT 22u
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
    unsigned int ends;
    unsigned int weight;
    unsigned int obs;
    unsigned int adj_pairs;
    unsigned int boundary_edge;
};
static_assert(sizeof(struct QfwdWindowGraph) == 40, "QfwdWindowGraph size");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->vertices) == 4, "QfwdWindowGraph.vertices");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->edges) == 4, "QfwdWindowGraph.edges");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->rounds) == 4, "QfwdWindowGraph.rounds");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->commit_rounds) == 4, "QfwdWindowGraph.commit_rounds");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->adj_offset) == 4, "QfwdWindowGraph.adj_offset");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->ends) == 4, "QfwdWindowGraph.ends");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->weight) == 4, "QfwdWindowGraph.weight");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->obs) == 4, "QfwdWindowGraph.obs");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->adj_pairs) == 4, "QfwdWindowGraph.adj_pairs");
static_assert(sizeof(((struct QfwdWindowGraph*)0)->boundary_edge) == 4, "QfwdWindowGraph.boundary_edge");

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
    unsigned int max_vertices;
    unsigned int max_edges;
    unsigned int scratch_words;
    unsigned int scratch[22];
    unsigned int match_defects;
    unsigned int match_members;
    unsigned int match_edges;
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
static_assert(sizeof(((struct QfwdStreamModel*)0)->max_vertices) == 4, "QfwdStreamModel.max_vertices");
static_assert(sizeof(((struct QfwdStreamModel*)0)->max_edges) == 4, "QfwdStreamModel.max_edges");
static_assert(sizeof(((struct QfwdStreamModel*)0)->scratch_words) == 4, "QfwdStreamModel.scratch_words");
static_assert(sizeof(((struct QfwdStreamModel*)0)->scratch) == 88, "QfwdStreamModel.scratch");
static_assert(sizeof(((struct QfwdStreamModel*)0)->match_defects) == 4, "QfwdStreamModel.match_defects");
static_assert(sizeof(((struct QfwdStreamModel*)0)->match_members) == 4, "QfwdStreamModel.match_members");
static_assert(sizeof(((struct QfwdStreamModel*)0)->match_edges) == 4, "QfwdStreamModel.match_edges");
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
    unsigned long long first_round;
    unsigned int streams;
    unsigned int rounds;
    unsigned int finish;
    unsigned int commits_per_stream;
};
static_assert(sizeof(struct QfwdWindowBatch) == 80, "QfwdWindowBatch size");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->model) == 8, "QfwdWindowBatch.model");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->states) == 8, "QfwdWindowBatch.states");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->rows) == 8, "QfwdWindowBatch.rows");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->events) == 8, "QfwdWindowBatch.events");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->commits) == 8, "QfwdWindowBatch.commits");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->counts) == 8, "QfwdWindowBatch.counts");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->scratch) == 8, "QfwdWindowBatch.scratch");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->first_round) == 8, "QfwdWindowBatch.first_round");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->streams) == 4, "QfwdWindowBatch.streams");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->rounds) == 4, "QfwdWindowBatch.rounds");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->finish) == 4, "QfwdWindowBatch.finish");
static_assert(sizeof(((struct QfwdWindowBatch*)0)->commits_per_stream) == 4, "QfwdWindowBatch.commits_per_stream");

// Part of the QEC decoders' device code, included by device/decode.cu in order (see its
// header): the types, constants and parameter block the host mirrors, the stage trace, warp
// helpers and the graph's loads.
#ifndef QFWD_DECODE_COMMON_CUH
#define QFWD_DECODE_COMMON_CUH

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;
typedef unsigned char u8;

// ---- constants (mirror src/gpu/decoder.rs; a unit test there reads this file) ----------
#define QFWD_CODE_LUT 2u
#define QFWD_CODE_UF 3u
#define QFWD_DEC_STATUS_OK 0
#define QFWD_DEC_STATUS_BAD_ARGUMENT 1
#define QFWD_DEC_STATUS_OVER_BUDGET 2
#define QFWD_DEC_STATUS_UNKNOWN_FUNCTION (-4)
#define QFWD_DEC_NO_ID 0xFFFFu
#define QFWD_DEC_NO_TREE 0xFFFFFFFFu
#define QFWD_DEC_ODD 1u
#define QFWD_DEC_BOUNDARY 2u
#define QFWD_DEC_UNROLL 12u
#define QFWD_DEC_MAX_DEGREE 60u
#define QFWD_DEC_LOADED_LUT 1u
#define QFWD_DEC_LOADED_UF 2u
#define QFWD_DEC_MAX_RESULT_BYTES 8u

#define QFWD_DEC_WARP 32u
#define QFWD_DEC_FULL 0xFFFFFFFFu

// The decoders' parameters (mirror `DecoderParams` in src/gpu/decoder.rs, #[repr(C)]).
struct QfwdDecoderParams {
    u64 lut_table;      // u8[2^n * lut_entry_bytes]: wire result of syndrome s at s * entry_bytes
    u64 uf_adj_offset;  // u32[n + 2]: CSR row offsets (vertex n is the boundary)
    u64 uf_adj;         // uint2[2E]: {edge | neighbour << 16, weight} per CSR entry
    u64 uf_edges;       // uint2[E]: {u | v << 16, weight}
    u64 uf_edge_obs;    // u64[E]: observable mask
    u64 uf_boundary;    // u32[n]: boundary edge | its weight << 16 (edge QFWD_DEC_NO_ID: none)
    u64 uf_scratch;     // global scratch (uf_scratch_warps areas), or 0: in shared memory
    u64 uf_table;       // u8[uf_table_entries * uf_result_bytes]: low-weight syndrome table
    u64 uf_table_index; // u32: base[k] (k = 0..K), then C(v, j) at K + 1 + (j - 1) * n + v
    u32 lut_detectors;
    u32 lut_entry_bytes;
    u32 uf_detectors;
    u32 uf_result_bytes;
    u32 uf_scratch_bytes;  // one warp's area, a multiple of 16
    u32 uf_scratch_warps;  // global scratch: areas, indexed by the warp's global index
    u32 uf_smem_offset;    // shared scratch: dynamic shared byte offset of the block's warp 0
    u32 uf_off_visited;    // u32[n + 1]   (cl: u32[n + 1] at offset 0)
    u32 uf_off_defect;     // u32[n + 1]
    u32 uf_off_vbits;      // u32[ceil((n + 1) / 32)]: cluster vertices as a bitmap
    u32 uf_off_growth;     // u16[E]
    u32 uf_clear_bytes;    // [0, clear_bytes) is zeroed per decode
    u32 uf_off_tree;       // u32[n + 1]: forest edge | parent << 16
    u32 uf_off_verts;      // u16[n + 1]: cluster vertices (sorted in step 3)
    u32 uf_off_frontier;   // u16[n + 1]
    u32 uf_off_order;      // u16[n + 1]: the forest in BFS order
    u32 uf_off_levels;     // u16[n + 2]: where each BFS level starts in `order`
    u32 uf_off_cand;       // u32[E]: frontier edges (edge | k << 16), then the fused edges
    u32 uf_table_defects;  // K: requests of 1..K defects are answered from uf_table (0: none)
    u32 uf_table_entries;
    u32 uf_max_degree;     // most incident edges of a detector
    u32 loaded;            // QFWD_DEC_LOADED_*
    u64 uf_dist;           // u16[n * n]: boundary-free distances (0: no split path, step 1d)
    u64 uf_table_times;    // u16[uf_table_entries]: each entry's growth time
    u64 uf_stage;          // the split path's image (qfwd_dec_stage_model), or 0
    u32 uf_stage_bytes;    // its bytes, a multiple of 16; 0: the kernel does not stage it
    u32 uf_stage_offset;   // dynamic shared byte offset of the block's copy
    u32 uf_stage_index;    // offsets in the image: the distance matrix at 0, the index,
    u32 uf_stage_obs;      //   the first uf_stage_entries entries' results,
    u32 uf_stage_times;    //   and their times
    u32 uf_stage_entries;
    u32 uf_graph_bytes;    // the graph (uf_adj_offset .. uf_boundary, one region) staged: its
    u32 uf_graph_offset;   //   bytes, and the block's copy's dynamic shared offset; 0: not
    u32 uf_off_phi;        // u64[n + 1]: each cluster vertex's potential
    u32 uf_split_max_defects; // step 1d is tried for at most this many defects (<= 32)
    u64 uf_keep;           // uint2 per wire word: {kept detectors, the part's index of the
                           //   first}, then {0, uf_detectors} (step 0); 0: decoded whole
    u32 uf_wire_detectors; // a request's detectors (the payload check)
    u32 uf_max_defects;    // budget (decode/src/budget.rs): a request of more defects is
    u32 lut_max_defects;   //   answered OVER_BUDGET, not decoded; 0xFFFFFFFF: no budget
    u32 dec_reserved;      // unused (keeps the block a multiple of 8 bytes)
};

// Field offsets (the Rust test parses these lines and compares with `DecoderParams`).
// No device-side static_assert: NVRTC 13.0 (the H200 host's) has no offsetof builtin, and
// a kernel that does not compile there takes every GPU topology down with it.
#define QFWD_DEC_FIELD(name, offset)
QFWD_DEC_FIELD(lut_table, 0)
QFWD_DEC_FIELD(uf_adj_offset, 8)
QFWD_DEC_FIELD(uf_adj, 16)
QFWD_DEC_FIELD(uf_edges, 24)
QFWD_DEC_FIELD(uf_edge_obs, 32)
QFWD_DEC_FIELD(uf_boundary, 40)
QFWD_DEC_FIELD(uf_scratch, 48)
QFWD_DEC_FIELD(uf_table, 56)
QFWD_DEC_FIELD(uf_table_index, 64)
QFWD_DEC_FIELD(lut_detectors, 72)
QFWD_DEC_FIELD(lut_entry_bytes, 76)
QFWD_DEC_FIELD(uf_detectors, 80)
QFWD_DEC_FIELD(uf_result_bytes, 84)
QFWD_DEC_FIELD(uf_scratch_bytes, 88)
QFWD_DEC_FIELD(uf_scratch_warps, 92)
QFWD_DEC_FIELD(uf_smem_offset, 96)
QFWD_DEC_FIELD(uf_off_visited, 100)
QFWD_DEC_FIELD(uf_off_defect, 104)
QFWD_DEC_FIELD(uf_off_vbits, 108)
QFWD_DEC_FIELD(uf_off_growth, 112)
QFWD_DEC_FIELD(uf_clear_bytes, 116)
QFWD_DEC_FIELD(uf_off_tree, 120)
QFWD_DEC_FIELD(uf_off_verts, 124)
QFWD_DEC_FIELD(uf_off_frontier, 128)
QFWD_DEC_FIELD(uf_off_order, 132)
QFWD_DEC_FIELD(uf_off_levels, 136)
QFWD_DEC_FIELD(uf_off_cand, 140)
QFWD_DEC_FIELD(uf_table_defects, 144)
QFWD_DEC_FIELD(uf_table_entries, 148)
QFWD_DEC_FIELD(uf_max_degree, 152)
QFWD_DEC_FIELD(loaded, 156)
QFWD_DEC_FIELD(uf_dist, 160)
QFWD_DEC_FIELD(uf_table_times, 168)
QFWD_DEC_FIELD(uf_stage, 176)
QFWD_DEC_FIELD(uf_stage_bytes, 184)
QFWD_DEC_FIELD(uf_stage_offset, 188)
QFWD_DEC_FIELD(uf_stage_index, 192)
QFWD_DEC_FIELD(uf_stage_obs, 196)
QFWD_DEC_FIELD(uf_stage_times, 200)
QFWD_DEC_FIELD(uf_stage_entries, 204)
QFWD_DEC_FIELD(uf_graph_bytes, 208)
QFWD_DEC_FIELD(uf_graph_offset, 212)
QFWD_DEC_FIELD(uf_off_phi, 216)
QFWD_DEC_FIELD(uf_split_max_defects, 220)
QFWD_DEC_FIELD(uf_keep, 224)
QFWD_DEC_FIELD(uf_wire_detectors, 232)
QFWD_DEC_FIELD(uf_max_defects, 236)
QFWD_DEC_FIELD(lut_max_defects, 240)
QFWD_DEC_FIELD(dec_reserved, 244)
static_assert(sizeof(QfwdDecoderParams) == 248, "QfwdDecoderParams size");

// Written by the host (cuModuleGetGlobal + a copy) before the kernels start.
__constant__ QfwdDecoderParams qfwd_decoders;

// The dynamic shared memory of the block (the same bytes as forward.cu's `smem`).
extern __shared__ __align__(16) u8 qfwd_dec_smem[];

// ---- Stage trace (compiled with QFWD_DEC_TRACE: QFWD_UF_TRACE=1 on the host) ------------
// A measuring tool for work on this file. Lane 0 of the decoding warp (the persistent
// kernel's shared-state copy) prints one line per traced decode, flushed when the kernel
// stops:
//   QT <path> <defects> <passes> <stamps> <total> | <stamp 1> ... <stamp 20>
// path 0 empty, 1 table, 2 isolated, 3 split, 4 full, 5 lanes; cycles (clock64, the SM's
// clock) from the start of the decode (after the payload checks). Stamps, in order: defects
// counted; the table's answer, or the defect list; per split pass its start, its look-ups
// done and its test done, and the split path done, for each grouping tried (`passes`: the
// last one's); the isolated step done; the lanes' set-up,
// list builds, steps and merges (each summed over the rounds) and their end; the full
// decoder's state set up, growth done, forest done, peeled.
// Every split and full decode is printed, and about one in 8 of the others (the device's
// printf buffer holds ~1 MB). scripts/uf-trace.py summarizes the lines per path. With the
// sampled ones, a "QL" line: the L1 and L2 load latencies in this kernel's context (H200:
// ~65 and ~310 cycles, results/h200-split-group-sum.txt).
#ifdef QFWD_DEC_TRACE
#define QFWD_TRACE_STAMPS 20u
struct QfwdTrace {
    long long t0;
    u32 n, path, defects, passes;
    u32 c[QFWD_TRACE_STAMPS];
};
#define QFWD_STAMP(tr)                                                                      \
    do {                                                                                    \
        if ((tr).n < QFWD_TRACE_STAMPS) {                                                   \
            (tr).c[(tr).n++] = (u32)(clock64() - (tr).t0);                                  \
        }                                                                                   \
    } while (0)
#define QFWD_TRACE_SET(tr, field, value) ((tr).field = (value))
#else
struct QfwdTrace {};
#define QFWD_STAMP(tr) ((void)(tr))
#define QFWD_TRACE_SET(tr, field, value) ((void)(tr))
#endif

// ---- warp helpers ------------------------------------------------------------------------

static __device__ __forceinline__ u32 qfwd_dec_min(u32 a, u32 b) { return a < b ? a : b; }

// Exclusive prefix sum over the lanes of `x` (x < 2^BITS), and the warp total: one ballot
// per bit, no shuffle chain.
template <u32 BITS>
static __device__ __forceinline__ u32 qfwd_dec_scan(u32 x, u32 lane, u32* total)
{
    const u32 lt = (1u << lane) - 1u;
    u32 ex = 0u, tot = 0u;
#pragma unroll
    for (u32 b = 0; b < BITS; ++b) {
        const u32 m = __ballot_sync(QFWD_DEC_FULL, (x >> b) & 1u);
        ex += (u32)__popc(m & lt) << b;
        tot += (u32)__popc(m) << b;
    }
    *total = tot;
    return ex;
}

// Word `i` of a bit-packed syndrome of `n` detectors, bits past `n` cleared.
static __device__ __forceinline__ u32 qfwd_dec_word(const u32* arg, u32 i, u32 n)
{
    u32 w = arg[i];
    const u32 rest = n - 32u * i;
    if (rest < 32u) {
        w &= (1u << rest) - 1u;
    }
    return w;
}

// The defects of a syndrome of `n` detectors (bits past `n` ignored), on every lane: the
// request's budget count (decode/src/budget.rs `count_defects`).
static __device__ __forceinline__ u32 qfwd_dec_defects(const u32* arg, u32 n, u32 lane)
{
    const u32 nwords = (n + 31u) / 32u;
    u32 ndef = 0u;
#pragma unroll 1
    for (u32 wb = 0; wb < nwords; wb += QFWD_DEC_WARP) {
        const u32 i = wb + lane;
        const u32 w = i < nwords ? qfwd_dec_word(arg, i, n) : 0u;
        ndef += __reduce_add_sync(QFWD_DEC_FULL, (u32)__popc(w));
    }
    return ndef;
}

// The u32 little-endian count after `nb` syndrome bytes.
static __device__ __forceinline__ u32 qfwd_dec_count(const u32* arg, u32 nb)
{
    const u8* b = (const u8*)arg;
    return (u32)b[nb] | ((u32)b[nb + 1u] << 8) | ((u32)b[nb + 2u] << 16) |
           ((u32)b[nb + 3u] << 24);
}

static __device__ __forceinline__ u32 qfwd_dec_cluster(u32 root, u32 flags)
{
    return (root + 1u) | (flags << 16);
}

// The XOR of every lane's `x`: each lane gets the warp's observable flips.
static __device__ __forceinline__ u64 qfwd_dec_xor_warp(u64 x)
{
    const u32 lo = __reduce_xor_sync(QFWD_DEC_FULL, (u32)x);
    const u32 hi = __reduce_xor_sync(QFWD_DEC_FULL, (u32)(x >> 32));
    return ((u64)hi << 32) | lo;
}

// Zeroes the first `n16` 16-byte words at `s`, lanes striding.
static __device__ __forceinline__ void qfwd_dec_zero(u8* s, u32 n16, u32 lane)
{
    uint4* z = (uint4*)s;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll 1
    for (u32 i = lane; i < n16; i += QFWD_DEC_WARP) {
        z[i] = zero;
    }
}

// ---- The graph: the block's copy or global memory -------------------------------------
// The persistent kernel copies the graph's arrays (one region of the model's blob, from
// `uf_adj_offset` to the end of `uf_boundary`) into its shared memory when they fit
// (qfwd_dec_stage_model; d = 7: 52 KB). The growth rounds, the isolated step and the forest
// load from them in dependent chains, ~30 cycles a step from shared memory against ~65
// (L1) or ~310 (L2): and the split path's global loads (d = 7's 225 KB distance matrix and
// its table) leave little of the graph in L1. GS: the block's copy. The one-block kernel
// and the tests' kernels read global memory.
template <bool GS, class T>
static __device__ __forceinline__ T qfwd_gld(const T* a)
{
    return GS ? *a : __ldg(a);
}

struct QfwdGraph {
    const u32* adj_off; // u32[n + 2]
    const uint2* adj;   // uint2[2E]
    const uint2* edges; // uint2[E]
    const u64* edge_obs; // u64[E]
    const u32* bnd;     // u32[n]
};

template <bool GS>
static __device__ __forceinline__ const u8* qfwd_graph_at(u64 a)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    return GS ? qfwd_dec_smem + p.uf_graph_offset + (u32)(a - p.uf_adj_offset) : (const u8*)a;
}

template <bool GS>
static __device__ __forceinline__ QfwdGraph qfwd_graph()
{
    const QfwdDecoderParams& p = qfwd_decoders;
    QfwdGraph g;
    g.adj_off = (const u32*)qfwd_graph_at<GS>(p.uf_adj_offset);
    g.adj = (const uint2*)qfwd_graph_at<GS>(p.uf_adj);
    g.edges = (const uint2*)qfwd_graph_at<GS>(p.uf_edges);
    g.edge_obs = (const u64*)qfwd_graph_at<GS>(p.uf_edge_obs);
    g.bnd = (const u32*)qfwd_graph_at<GS>(p.uf_boundary);
    return g;
}

// Entries [base, base + UNROLL) of a CSR row ending at `end`: edge, neighbour, weight
// (past the row: edge 0, vertex 0 and an impossible weight). The loads are issued together.
template <bool GS>
static __device__ __forceinline__ void qfwd_dec_row(const uint2* adj, u32 base, u32 end,
                                                    u32 (&es)[QFWD_DEC_UNROLL],
                                                    u32 (&ys)[QFWD_DEC_UNROLL],
                                                    u32 (&ws)[QFWD_DEC_UNROLL])
{
#pragma unroll
    for (u32 j = 0; j < QFWD_DEC_UNROLL; ++j) {
        const uint2 a = base + j < end ? qfwd_gld<GS>(adj + base + j) : make_uint2(0u, 0u);
        es[j] = a.x & 0xFFFFu;
        ys[j] = a.x >> 16;
        ws[j] = base + j < end ? a.y : QFWD_DEC_FULL;
    }
}

#endif // QFWD_DECODE_COMMON_CUH

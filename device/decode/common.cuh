// Part of the QEC decoders' device code, included by device/decode.cu in order (see its
// header): the types, the parameter block in constant memory, the stage trace, warp helpers
// and the graph's loads.
#ifndef QFWD_DECODE_COMMON_CUH
#define QFWD_DECODE_COMMON_CUH

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;
typedef unsigned char u8;

// The constants (QFWD_DEC_*, QFWD_CODE_*, QFWD_STATUS_*) and the parameter block
// (struct QfwdDecoderParams, the host's abi::DecoderParams) come from qfwd_abi.h, included
// by device/decode.cu before this file.

#define QFWD_DEC_WARP 32u
#define QFWD_DEC_FULL 0xFFFFFFFFu

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

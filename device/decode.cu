// qfwd device code: the QEC decoders `lut` and `uf` (handler device codes 2 and 3), run by
// qfwd_dispatch in device/forward.cu, bit-identical to the CPU references decode/src/lut.rs
// and decode/src/uf.rs (`UfScratch::decode_reference`; docs/uf-specification.md is the
// specification followed here step by step).
//
// Included by device/forward.cu (an NVRTC named header, src/gpu/nvrtc.rs), so the decoders
// and the mailbox kernels are one program; also compiled on its own by
// tests/nvrtc_kernels.rs. Self-contained but for qfwd_abi.h (generated from src/abi.rs: the
// constants and the parameter block the host shares with it): NVRTC has no system headers.
//
// The code is in device/decode/, one header per part, included below in this order (each
// an NVRTC named header too): common.cuh (types, the parameter block in constant memory,
// the stage trace, warp helpers), lut.cuh, and uf's steps:
// uf_fast.cuh (1e, the isolated defects), uf_split.cuh (1b the table, 1d the split path),
// uf_lanes.cuh (2'), uf_settle.cuh (1e and 2-4, the full decoder), uf.cuh (0, and the run
// of the steps). This file keeps the design notes and the entry point.
//
// ---- Shape: one warp per request ------------------------------------------------------
// The persistent kernel's unit of work is a poller warp: it already holds the request in
// its shared-memory stage and publishes the response as a warp, and several poller groups
// serve requests in parallel. A decoder that took a whole block would need a hand-off
// between warps (a queue in shared memory and block barriers, or poller warps that stop
// polling), while at d = 3..7 a growth round has little parallel work: the frontier of a
// d=7, p=0.001 shot holds ~20 vertex-edge pairs per round on average and ~70 at the 99th
// percentile (d=5: ~15 / ~30), one or two warps' worth. What a round costs is its chain of
// dependent shared-memory accesses (~30 cycles each), not its arithmetic, so extra warps
// would idle while every round paid block barriers (`bar.sync`) instead of `__syncwarp`.
// So each poller warp decodes its own request: lanes split the work of a round (frontier
// vertices x incident edges, clusters' members, syndrome words), reductions are single
// `redux.sync` instructions, and the few truly sequential steps (merging the clusters that
// one round fused) run with the whole warp in lockstep.
//
// ---- Data -------------------------------------------------------------------------------
// The model (read-only, device global memory, loaded once at backend start by
// src/gpu/decoder.rs; read through the non-coherent cache, `__ldg`, and L1-resident once
// warm) and the parameters (`qfwd_decoders`, constant memory, same file). Vertex and edge
// ids are 16 bits (models up to 65534 vertices and edges; the host refuses larger ones), so
// one 8-byte load gives an incident edge, its other end and its weight. With it, the
// low-weight syndrome table (decode/src/uf_table.rs, built by the host with the CPU uf):
// the result of every syndrome of at most K defects, indexed by the combinatorial number
// system; a request with 1..K defects is answered by one load from it (step 1b). With the
// table, for the split path (step 1d): each entry's growth time (u16) and the boundary-free
// distance matrix of the model (u16, n x n; both saturated at 65535, decode/src/uf_split.rs).
//
// Per-warp state ("scratch", offsets in the parameters): in dynamic shared memory after the
// kernel's request/response staging, or, when that does not fit, in a global buffer (one
// area per warp). The area is zeroed at the start of every decode that has a defect (16-byte
// stores, a few per lane), so no reset bookkeeping is needed and garbage left in shared
// memory by a previous launch is harmless. A syndrome without defects touches nothing.
//
// ---- How the specification maps onto a warp -------------------------------------------
// Clusters: `cl[v]` = (root + 1) | flags << 16 (0: in no cluster), kept *flat*: every member
// holds its cluster's root and flags, so "which cluster, is it active" is one read. A union
// relabels both clusters' members (lanes over the cluster vertices). The root is the
// cluster's smallest vertex, as in the specification (which the output never depends on).
//   0. Where the model has an observable part (decode/src/observable_part.rs; the host
//      uploads the part's graph): the kept bits of the request's syndrome, packed in order
//      over the request's own words (lanes over words), with the defects counted.
//   1. Defects: lanes over syndrome words.
//   1b. At most K defects: rank = sum of C(d_pos, pos + 1) (lanes over syndrome words, the
//       binomials from the table's index array), one load of the result. Nothing touched.
//   1c. The defects in index order into `verts` (lanes over syndrome words).
//   1d. At most 32 defects (one per lane) that fall into groups of at most K defects which
//       provably never interact (decode/src/uf_split.rs `split`, whose module docs have the
//       proof): every cross pair of defects a, b has distance d(a, b) > T_a + T_b, the
//       groups' growth times from the table. The answer is the XOR of the groups' entries.
//       Reads `verts` and the table; writes nothing.
//   1e. Where 1d was not tried (no table, or above 32 defects): isolated defects
//       (decode/src/uf.rs `UfScratch::isolated`): lanes over the defects,
//       each scans its row for its least-key edge (its partner); when every defect and its
//       partner settle in one step without touching any other edge, the answer is the XOR
//       of the partner edges' observables. Writes `visited` only (before the zeroing
//       below; the full decoder writes `verts` before reading it).
//   2'. Growth in the lanes' registers (qfwd_uf_lanes; decode/src/uf_lanes.rs, its
//       sequential mirror, tested against the specification): one cluster vertex per lane,
//       the edges still able to grow in QFWD_DEC_LANE_SLOTS slots per lane. A round reads two
//       cluster words per listed edge, takes the step, grows, and merges the filled edges
//       one at a time from the lanes' registers; the potentials (step 3') as below. Where
//       it gives up (a 33rd vertex, a list above the slots, an odd cycle), steps 2-4 below
//       start over from the syndrome in shared memory.
//   2a. Lanes over frontier vertices, each over its incident edges (12 at a time, loads
//       issued together): frontier edges, `need`, the step `delta` = warp minimum. A
//       frontier edge is listed once (from its lower end when both ends are active).
//   2b. Lanes over the listed edges: grow by k * delta (k = active ends), collect `fused`.
//   2c. For each fused edge in turn (the warp together): endpoints in no cluster join, the
//       two clusters merge (the relabel pass skipped when it would change nothing). The
//       partition after the round does not depend on the order. With them, each cluster
//       vertex's potential (decode/src/uf_potential.rs): the observables of a path of full
//       edges from its cluster's reference vertex.
//   3'. No cycle of full edges with odd observables (a full edge within one cluster is
//       checked when it fills): the answer is the XOR of the defects' potentials (and of
//       the roots' of odd clusters away from the boundary), whatever forest step 3 would
//       build. Else steps 3 and 4, as the specification does them.
//   3. Spanning forest: the BFS of the specification, level-synchronous. The trees are
//      disjoint and each one's shape depends only on its own vertices' order, so all trees
//      grow together: level 0 = the children of the boundary (full boundary edge) and the
//      roots of the clusters that do not touch the boundary (each such cluster is one tree,
//      and its smallest vertex, the cluster root, is the vertex step 3b would pick), in
//      index order. A vertex reached by several vertices of a level takes the first of them
//      in queue order (an atomicMax claim keyed by lane, windows in order), and each level
//      is appended in (parent position, CSR position) order: the sequential BFS order.
//   4. Peel, deepest level first: an edge is in the correction iff the subtree below it
//      holds an odd number of defects, exactly what the sequential peel computes.
//
// ---- Code size ----------------------------------------------------------------------------
// One warp issues every instruction of a decode, and the H200 profile of the one-request
// kernel shows instruction-fetch stalls ("No Instruction") as the largest share of its
// stalls: the straight-line body of a round must stay small. So only the batches of
// QFWD_DEC_UNROLL independent loads (and the bit loops of qfwd_dec_scan) are unrolled;
// every loop with a run-time trip count (syndrome words, windows of 32, chunks of a row,
// fused edges, BFS levels) carries `#pragma unroll 1`, or the compiler unrolls it by 4 with
// remainder copies that are rarely or never executed (d <= 7: one window, one chunk).
// Annotations only: the same operations in the same order.

// ---- The parts, in order (each an NVRTC named header, src/gpu/nvrtc.rs) -------------
#include "qfwd_abi.h"
#include "decode/common.cuh"
#include "decode/lut.cuh"
#include "decode/uf_fast.cuh"
#include "decode/uf_split.cuh"
#include "decode/uf_lanes.cuh"
#include "decode/uf_settle.cuh"
#include "decode/uf.cuh"

// ---- entry point -------------------------------------------------------------------------

// Decoder `code` (QFWD_CODE_LUT or QFWD_CODE_UF) on the request argument `arg` (the
// warp's own stage in the block's dynamic shared memory: every kernel stages its requests
// there; uf rewrites its syndrome words, step 0, so no caller may read them after): its status,
// and its answer as a value on every lane (`*result_len` bytes of flips, at most 8, LSB
// first), which the caller stores from registers or writes into its response. (External
// linkage: this file compiled alone has no caller.)
__device__ __forceinline__ int qfwd_decode_value(u32 code, const u32* arg, u32 arg_len,
                                                 u32 out_cap, u32* result_len, u64* flips,
                                                 u32 lane)
{
    if (code == QFWD_CODE_LUT) {
        return qfwd_decode_lut_value(arg, arg_len, out_cap, result_len, flips, lane);
    }
    return qfwd_decode_uf_value(arg, arg_len, out_cap, result_len, flips, lane);
}

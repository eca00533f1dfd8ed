// Part of the QEC decoders' device code, included by device/decode.cu in order (see its
// header): `uf`: row loads, the defect list, step 1e (isolated defects) and the table's
// entries.
#ifndef QFWD_DECODE_UF_FAST_CUH
#define QFWD_DECODE_UF_FAST_CUH

// ---- uf ----------------------------------------------------------------------------------

// CSR entries [base, base + UNROLL) of a row ending at `end` (past it: {0, 0}, growth 0 and
// cluster word 0), with the growth of each edge and the cluster word of its other end.
template <bool GS>
static __device__ __forceinline__ void qfwd_uf_load_row(const uint2* adj, const u16* growth,
                                                        const u32* cl, u32 base, u32 end,
                                                        uint2 (&a)[QFWD_DEC_UNROLL],
                                                        u32 (&g)[QFWD_DEC_UNROLL],
                                                        u32 (&cu)[QFWD_DEC_UNROLL])
{
#pragma unroll
    for (u32 j = 0; j < QFWD_DEC_UNROLL; ++j) {
        a[j] = base + j < end ? qfwd_gld<GS>(adj + base + j) : make_uint2(0u, 0u);
    }
#pragma unroll
    for (u32 j = 0; j < QFWD_DEC_UNROLL; ++j) {
        g[j] = 0u;
        cu[j] = 0u;
        if (base + j < end) {
            g[j] = growth[a[j].x & 0xFFFFu];
            cu[j] = cl[a[j].x >> 16];
        }
    }
}

// Step 2a's test of one CSR entry `a` of a vertex in the active cluster `r1` (root + 1):
// k = active ends of the edge if it is a frontier edge (the other end's cluster word `cu`),
// else 0. Past the row (weight 0) never.
static __device__ __forceinline__ u32 qfwd_uf_frontier_k(uint2 a, u32 g, u32 cu, u32 r1)
{
    if (g < a.y && (cu == 0u || (cu & 0xFFFFu) != r1)) {
        return (cu >> 16) == QFWD_DEC_ODD ? 2u : 1u;
    }
    return 0u;
}

// Whether vertex `z` is a defect of the syndrome in `arg` (the boundary, z == n, never).
static __device__ __forceinline__ bool qfwd_uf_is_defect(const u32* arg, u32 z, u32 n)
{
    return z < n && ((arg[z >> 5] >> (z & 31u)) & 1u) != 0u;
}

// The defects in index order into `verts`, for the split and isolated steps: word by word
// (each lane reads every word: a shared-memory broadcast), lane l stores bit l of the word
// at its rank among the word's defects, so a word costs one store per lane whatever its
// defects (a loop per lane over its word's bits diverged: ~800 cycles at d=5). Returns
// after the warp's writes are visible to every lane.
static __device__ __forceinline__ void qfwd_uf_defect_list(u8* s, const u32* arg, u32 lane)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    const u32 n = p.uf_detectors;
    const u32 nwords = (n + 31u) / 32u;
    const u32 lt = (1u << lane) - 1u;
    u16* list = (u16*)(s + p.uf_off_verts);
    constexpr u32 W = 8u; // words read together
    u32 base = 0u;
#pragma unroll 1
    for (u32 i0 = 0; i0 < nwords; i0 += W) {
        u32 w[W];
        // Branch-free: every load in bounds (a word past the last reads the last again),
        // then the words past the syndrome and its bits past n masked off.
#pragma unroll
        for (u32 k = 0; k < W; ++k) {
            const u32 i = i0 + k;
            const u32 raw = arg[i < nwords ? i : nwords - 1u];
            const u32 rest = n - 32u * i; // bits of word i, when i < nwords
            const u32 keep = rest >= 32u ? QFWD_DEC_FULL : (1u << rest) - 1u;
            w[k] = i < nwords ? raw & keep : 0u;
        }
#pragma unroll
        for (u32 k = 0; k < W; ++k) {
            if (((w[k] >> lane) & 1u) != 0u) {
                list[base + (u32)__popc(w[k] & lt)] = (u16)(32u * (i0 + k) + lane);
            }
            base += (u32)__popc(w[k]);
        }
    }
    __syncwarp();
}

// Step 1e: the isolated-defects fast path, decode/src/uf.rs `UfScratch::isolated` (whose doc
// comment has the proof; proptested there against the specification). Each defect x takes
// as partner its least-key incident edge, key ceil(w / 2) to another defect and w to
// anything else (the boundary included), t_x = that key. It applies when every defect's
// least key is held by one edge only, every partner is the boundary or a defect that chose
// x back, and every other edge from x to a defect z has w > t_x + t_z; then the
// specification's output is the XOR of the observables of the partner edges, each pair
// once (from its lower end). Returns false, with `*out` untouched, when it does not apply.
// Lanes over the defects (windows of 32) of the list in `verts` (qfwd_uf_defect_list);
// writes only `visited` (iso[x] = t_x | partner << 16, defects only), before the full
// decoder's zeroing, so nothing the full decoder reads is left changed.
template <bool GS>
static __device__ __forceinline__ bool qfwd_uf_isolated(u8* s, const u32* arg, u32 lane,
                                                         u32 ndef, u64* out)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    const u32 n = p.uf_detectors;
    const u32 bv = n;
    constexpr u32 U = QFWD_DEC_UNROLL;
    u32* iso = (u32*)(s + p.uf_off_visited);
    u16* list = (u16*)(s + p.uf_off_verts);
    const QfwdGraph gr = qfwd_graph<GS>();
    const u32* adj_off = gr.adj_off;
    const uint2* adj = gr.adj;
    const u64* edge_obs = gr.edge_obs;

    // Partners. `chk`: bit (window mod 32) set when this lane's defect of that window has a
    // defect neighbour besides its partner (aliased windows are checked both: harmless).
    u64 obs = 0ull;
    bool bad = false;
    u32 chk = 0u;
#pragma unroll 1
    for (u32 db = 0, win = 0; db < ndef; db += QFWD_DEC_WARP, ++win) {
        const u32 i = db + lane;
        const bool has = i < ndef;
        const u32 x = has ? (u32)list[i] : 0u;
        u32 lo = 0u, hi = 0u;
        if (has) {
            lo = qfwd_gld<GS>(adj_off + x);
            hi = qfwd_gld<GS>(adj_off + x + 1u);
        }
        const u32 chunks = __reduce_max_sync(QFWD_DEC_FULL, (hi - lo + U - 1u) / U);
        u32 best = QFWD_DEC_FULL, be = 0u, by = 0u, ndn = 0u;
        bool tied = false;
#pragma unroll 1
        for (u32 ch = 0; ch < chunks; ++ch) {
            u32 es[U], ys[U], ws[U];
            qfwd_dec_row<GS>(adj, lo + ch * U, hi, es, ys, ws);
#pragma unroll
            for (u32 j = 0; j < U; ++j) {
                // Past the row: weight QFWD_DEC_FULL (real weights are at most 0xFFFF), the
                // key of no edge (a row without edges leaves `best` there: no fast path).
                const bool d = ws[j] != QFWD_DEC_FULL && qfwd_uf_is_defect(arg, ys[j], n);
                ndn += d ? 1u : 0u;
                const u32 key = d ? (ws[j] + 1u) >> 1 : ws[j];
                tied |= key == best;
                if (key < best) {
                    best = key;
                    be = es[j];
                    by = ys[j];
                    tied = false;
                }
            }
        }
        if (has) {
            const bool dy = qfwd_uf_is_defect(arg, by, n);
            const bool b = best == QFWD_DEC_FULL || tied || (!dy && by != bv);
            bad |= b;
            iso[x] = best | (by << 16);
            if (ndn > (dy ? 1u : 0u)) {
                chk |= 1u << (win & 31u);
            }
            if (!b && (by == bv || x < by)) {
                obs ^= qfwd_gld<GS>(edge_obs + be);
            }
        }
    }
    if (__any_sync(QFWD_DEC_FULL, bad)) {
        __syncwarp();
        return false;
    }
    __syncwarp(); // every `iso` entry is written
    // Mutual partners, and w > t_x + t_z for every other edge from x to a defect z.
#pragma unroll 1
    for (u32 db = 0, win = 0; db < ndef; db += QFWD_DEC_WARP, ++win) {
        const u32 i = db + lane;
        const bool has = i < ndef;
        const u32 x = has ? (u32)list[i] : 0u;
        const u32 ix = has ? iso[x] : 0u;
        const u32 tx = ix & 0xFFFFu, y = ix >> 16;
        if (has && y != bv && (iso[y] >> 16) != x) {
            bad = true;
        }
        u32 lo = 0u, hi = 0u;
        if (has && ((chk >> (win & 31u)) & 1u) != 0u) {
            lo = qfwd_gld<GS>(adj_off + x);
            hi = qfwd_gld<GS>(adj_off + x + 1u);
        }
        const u32 chunks = __reduce_max_sync(QFWD_DEC_FULL, (hi - lo + U - 1u) / U);
#pragma unroll 1
        for (u32 ch = 0; ch < chunks; ++ch) {
            u32 es[U], ys[U], ws[U];
            qfwd_dec_row<GS>(adj, lo + ch * U, hi, es, ys, ws);
#pragma unroll
            for (u32 j = 0; j < U; ++j) {
                const u32 z = ys[j];
                if (ws[j] != QFWD_DEC_FULL && z != y && qfwd_uf_is_defect(arg, z, n) &&
                    ws[j] <= tx + (iso[z] & 0xFFFFu)) {
                    bad = true;
                }
            }
        }
    }
    const bool ok = __all_sync(QFWD_DEC_FULL, !bad);
    __syncwarp(); // every lane is done with `iso` and `list` before the full decoder's writes
    if (!ok) {
        return false;
    }
    *out = qfwd_dec_xor_warp(obs);
    return true;
}

// The observable flips stored at table index `at` (the wire result, LSB first).
// The result at `e` (uf_result_bytes bytes): in shared memory (SHARED) or global memory
// through the non-coherent cache.
template <bool SHARED>
static __device__ __forceinline__ u64 qfwd_uf_result(const u8* e)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    u64 obs = 0ull;
#pragma unroll
    for (u32 j = 0; j < QFWD_DEC_MAX_RESULT_BYTES; ++j) {
        if (j < p.uf_result_bytes) {
            obs |= (u64)(SHARED ? e[j] : __ldg(e + j)) << (8u * j);
        }
    }
    return obs;
}

static __device__ __forceinline__ u64 qfwd_uf_entry(u32 at)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    return qfwd_uf_result<false>((const u8*)p.uf_table + (u64)at * p.uf_result_bytes);
}

#endif // QFWD_DECODE_UF_FAST_CUH

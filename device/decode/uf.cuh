// Part of the QEC decoders' device code, included by device/decode.cu in order (see its
// header): `uf`: step 0 (the observable part), the run of the steps, and the entry point's
// value.
#ifndef QFWD_DECODE_UF_CUH
#define QFWD_DECODE_UF_CUH

// 0. The observable part (decode/src/observable_part.rs): the model's components whose
// edges flip no observable are not in the decoder's graph, and their defects change no
// answer. The kept bits of the wire's syndrome are packed in order over the request's own
// words (`arg`, the warp's stage, which nothing reads after the decode; the dispatch
// trace's repeat restores it), lanes over the wire's words, 32 at a time: word `w` packs
// its kept bits (`keep[w].x`) to start at the part's index `keep[w].y`. A chunk's bits
// land at or below its own words, so each word of the part is zeroed just before the
// first chunk that writes it, after every lane has read its word. Returns the part's
// defects; with none, nothing is written when the syndrome is one chunk (up to 1024
// detectors).
static __device__ __forceinline__ u32 qfwd_uf_compact(u32* arg, u32 lane)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    const u32 wn = p.uf_wire_detectors;
    const u32 nwords = (wn + 31u) / 32u;
    const uint2* keep = (const uint2*)p.uf_keep;
    u32 ndef = 0u;
    u32 ready = 0u; // words of the part below it are zeroed or written
#pragma unroll 1
    for (u32 wb = 0; wb < nwords; wb += QFWD_DEC_WARP) {
        const u32 i = wb + lane;
        const uint2 k = i < nwords ? __ldg(keep + i) : make_uint2(0u, 0u);
        const u32 w = i < nwords ? qfwd_dec_word(arg, i, wn) & k.x : 0u;
        u32 packed = 0u;
#pragma unroll 1
        for (u32 x = w; x != 0u; x &= x - 1u) {
            const u32 b = (u32)__ffs(x) - 1u;
            packed |= 1u << __popc(k.x & ((1u << b) - 1u));
        }
        ndef += __reduce_add_sync(QFWD_DEC_FULL, (u32)__popc(w));
        const u32 last = qfwd_dec_min(wb + QFWD_DEC_WARP, nwords);
        if (ndef == 0u && last == nwords) {
            break;
        }
        const u32 end_word = (__ldg(&keep[last].y) + 31u) / 32u;
        __syncwarp();
#pragma unroll 1
        for (u32 j = ready + lane; j < end_word; j += QFWD_DEC_WARP) {
            arg[j] = 0u;
        }
        ready = ready > end_word ? ready : end_word;
        __syncwarp();
        if (packed != 0u) {
            const u32 at = k.y / 32u, sh = k.y % 32u;
            atomicOr(arg + at, packed << sh);
            if (sh != 0u && (packed >> (32u - sh)) != 0u) {
                atomicOr(arg + at + 1u, packed >> (32u - sh));
            }
        }
    }
    __syncwarp();
    return ndef;
}

// Decodes the syndrome in `arg` (validated) with the per-warp state at `s`; returns the
// observable flips. All 32 lanes call it; every collective below is reached by all lanes.
template <bool SS>
static __device__ __forceinline__ u64 qfwd_uf_run(u8* s, const u32* arg, u32 lane, QfwdTrace& tr)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    const u32 n = p.uf_detectors;
    const u32 nwords = (n + 31u) / 32u;

    // 1. Defects (of the observable part, step 0, where the model has one). None: no
    // flip, and nothing was touched.
    u32 ndef = 0u;
    if (p.uf_keep != 0ull) {
        // The stage is the warp's own shared memory (qfwd_decode_value's contract).
        ndef = qfwd_uf_compact(const_cast<u32*>(arg), lane);
    } else {
#pragma unroll 1
        for (u32 wb = 0; wb < nwords; wb += QFWD_DEC_WARP) {
            const u32 i = wb + lane;
            const u32 w = i < nwords ? qfwd_dec_word(arg, i, n) : 0u;
            ndef += __reduce_add_sync(QFWD_DEC_FULL, (u32)__popc(w));
        }
    }
    QFWD_TRACE_SET(tr, defects, ndef);
    QFWD_STAMP(tr);
    if (ndef == 0u) {
        QFWD_TRACE_SET(tr, path, 0u);
        return 0ull;
    }
    // 1b. At most K defects: the answer is in the low-weight syndrome table.
    if (ndef <= p.uf_table_defects) {
        u64 obs;
        // Two copies, so each knows where its index and entries are.
        const bool hit = p.uf_stage_bytes != 0u ? qfwd_uf_table<true>(arg, lane, ndef, &obs)
                                                : qfwd_uf_table<false>(arg, lane, ndef, &obs);
        if (hit) {
            QFWD_TRACE_SET(tr, path, 1u);
            QFWD_STAMP(tr);
            return obs;
        }
    }
    // 1c. The defects in index order (`verts`), for 1d and 1e.
    qfwd_uf_defect_list(s, arg, lane);
    QFWD_STAMP(tr);
    // 1d. Independent groups of at most K defects: one table entry per group. (`uf_dist`
    // is set only with a table, K >= 1.) First: it also answers all but a few of the
    // shots 1e does (d=5, K=4: 1 346 of 1 354 fixture shots), at fewer cycles. Only up to
    // `uf_split_max_defects` (<= 32, the host's estimate of where it stops paying): above
    // it most attempts fail, and a failed one delays the growth by ~3 800 cycles (d=7).
    if (p.uf_dist != 0ull && ndef <= QFWD_DEC_WARP && ndef <= p.uf_split_max_defects) {
        u64 obs;
        const bool split = p.uf_stage_bytes != 0u
                               ? qfwd_uf_split<true>(s, lane, ndef, &obs, tr)
                               : qfwd_uf_split<false>(s, lane, ndef, &obs, tr);
        QFWD_STAMP(tr);
        if (split) {
            QFWD_TRACE_SET(tr, path, 3u);
            return obs;
        }
    }
    // The rest reads the graph: from the block's copy when staged there.
    const u32 s_shared = SS ? (u32)(s - qfwd_dec_smem) : 0u;
    const u32 arg_shared = (u32)((const u8*)arg - qfwd_dec_smem);
    return p.uf_graph_bytes != 0u
               ? qfwd_uf_settle<true, SS>(s, s_shared, arg_shared, lane, ndef, tr)
               : qfwd_uf_settle<false, SS>(s, s_shared, arg_shared, lane, ndef, tr);
}

// Union-find (decode/src/uf.rs): validates the payload as `Decoder::run_payload` does, and
// returns the observable flips in `*flips` (every lane), `*result_len` bytes of them on the
// wire, LSB first.
static __device__ __forceinline__ int qfwd_decode_uf_value(const u32* arg, u32 arg_len,
                                                           u32 out_cap, u32* result_len,
                                                           u64* flips, u32 lane)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    *result_len = 0u;
    if ((p.loaded & QFWD_DEC_LOADED_UF) == 0u) {
        return QFWD_STATUS_UNKNOWN_FUNCTION;
    }
    const u32 n = p.uf_wire_detectors;
    const u32 nb = (n + 7u) / 8u;
    if (arg_len != nb + 4u || out_cap < p.uf_result_bytes || qfwd_dec_count(arg, nb) != n) {
        return QFWD_STATUS_BAD_ARGUMENT;
    }
    // The budget: the wire syndrome's defects, counted before anything is touched (a
    // budget of n or more cannot bind).
    if (p.uf_max_defects < n && qfwd_dec_defects(arg, n, lane) > p.uf_max_defects) {
        return QFWD_STATUS_OVER_BUDGET;
    }
    const u32 warp_in_block = threadIdx.x / QFWD_DEC_WARP;
    u64 obs;
    // Two call sites, so each inlined copy knows its state space (shared or global).
    if (p.uf_scratch != 0ull) {
        const u32 warp = blockIdx.x * (blockDim.x / QFWD_DEC_WARP) + warp_in_block;
        if (warp >= p.uf_scratch_warps) {
            return QFWD_STATUS_UNKNOWN_FUNCTION;
        }
        QfwdTrace untraced{};
        obs = qfwd_uf_run<false>((u8*)p.uf_scratch + (u64)warp * p.uf_scratch_bytes, arg, lane,
                          untraced);
    } else {
        QfwdTrace tr{};
#ifdef QFWD_DEC_TRACE
        tr.t0 = clock64();
#endif
        obs = qfwd_uf_run<true>(qfwd_dec_smem + p.uf_smem_offset + warp_in_block * p.uf_scratch_bytes,
                          arg, lane, tr);
#ifdef QFWD_DEC_TRACE
        const u32 total = (u32)(clock64() - tr.t0);
        if (lane == 0u && (tr.path >= 3u || (tr.t0 & 0x700ll) == 0ll)) {
            const u32* c = tr.c;
            printf("QT %u %u %u %u %u | %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u "
                   "%u %u\n",
                   tr.path, tr.defects, tr.passes, tr.n, total, c[0], c[1], c[2], c[3], c[4], c[5],
                   c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15], c[16],
                   c[17], c[18], c[19]);
        }
        // Load latencies in this kernel's context, after the decode (so it is not slowed):
        // 16 dependent loads of adj_offset[0] (always 0, unknown to the compiler) through
        // the L1 (`__ldg`), then 16 that skip it (`__ldcg`, L2). "QL <l1 cycles> <l2 cycles>".
        if ((tr.t0 & 0x700ll) == 0ll) {
            const u32* ao = (const u32*)p.uf_adj_offset;
            u32 j = __ldg(ao);
            const long long a = clock64();
#pragma unroll
            for (u32 k = 0; k < 16u; ++k) {
                j = __ldg(ao + j);
            }
            const long long b = clock64();
#pragma unroll
            for (u32 k = 0; k < 16u; ++k) {
                j = __ldcg(ao + j);
            }
            const long long c2 = clock64();
            if (lane == 0u) {
                printf("QL %u %u %u\n", (u32)(b - a), (u32)(c2 - b), j);
            }
        }
#endif
    }
    *flips = obs;
    *result_len = p.uf_result_bytes;
    return QFWD_STATUS_OK;
}

#endif // QFWD_DECODE_UF_CUH

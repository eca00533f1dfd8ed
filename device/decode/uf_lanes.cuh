// Part of the QEC decoders' device code, included by device/decode.cu in order (see its
// header): `uf`: step 2' (growth in the lanes' registers).
#ifndef QFWD_DECODE_UF_LANES_CUH
#define QFWD_DECODE_UF_LANES_CUH

// ---- Step 2': growth in the lanes' registers (decode/src/uf_lanes.rs) --------------------
// The cluster vertices, one per lane (its vertex, cluster word, potential, whether it is a
// defect; the boundary's word in every lane), and the list of edges still able to grow,
// QFWD_DEC_LANE_SLOTS per lane (entry 32 s + lane in slot s): ends x | y << 16 (x a cluster
// vertex), edge | weight << 16, growth. A round reads the two cluster words of each listed
// edge (`cl`, published by the lanes at the round's start), takes the step, grows, and
// merges the edges that filled, one at a time, from the lanes' registers (ballots and
// shuffles; a relabel is a compare in each lane, not a pass over shared memory; a join
// relabels nothing, the word carrying a label, not the least vertex: uf_lanes.rs). In a
// round where a vertex joined, the list is rebuilt through `cand`: its live entries, then
// the joiners' new edges (the join rule of uf_lanes.rs), eight joiners at a time (four
// lanes each; rows of at most 12 at d <= 7).
// Returns false, having changed only scratch that the full decoder clears or writes before
// reading, when a vertex would join with every lane taken, the list outgrows the slots, or
// a full edge closes a cycle with odd observables; the full decoder then starts over.
// State used: `cl` and, as each vertex's lane + 1, `visited` (both zeroed here), `growth`
// (the live entries' growth across a rebuild), `cand` (the stage), the defect list in
// `verts` (qfwd_uf_defect_list, read first). QFWD_DEC_LANE_SLOTS: qfwd_abi.h.

// Cycles of the lanes' growth by part, for the stage trace: set-up, rebuilds, steps, merges.
#ifdef QFWD_DEC_TRACE
struct QfwdLaps {
    long long last;
    u32 t[4];
};
#define QFWD_LAP_START(l) ((l).last = clock64())
#define QFWD_LAP(l, i)                                                                      \
    do {                                                                                    \
        const long long now_ = clock64();                                                   \
        (l).t[i] += (u32)(now_ - (l).last);                                                 \
        (l).last = now_;                                                                    \
    } while (0)
// Four stamps after the last one, the parts' cycles added to it in turn.
#define QFWD_STAMP_LAPS(tr, l)                                                              \
    do {                                                                                    \
        u32 at_ = (tr).n > 0u ? (tr).c[(tr).n - 1u] : 0u;                                   \
        for (u32 i_ = 0; i_ < 4u && (tr).n < QFWD_TRACE_STAMPS; ++i_) {                     \
            at_ += (l).t[i_];                                                               \
            (tr).c[(tr).n++] = at_;                                                         \
        }                                                                                   \
    } while (0)
#else
struct QfwdLaps {};
#define QFWD_LAP_START(l) ((void)(l))
#define QFWD_LAP(l, i) ((void)(l))
#define QFWD_STAMP_LAPS(tr, l) ((void)(tr))
#endif

// One round of the lanes' growth over the first NS slots: the step (k = active ends of
// each listed edge between two clusters, or one and none, with room to grow; an edge inside
// one cluster is marked full), then, unless nothing can grow (`*delta` = QFWD_DEC_FULL), the
// growth, the filled edges written to `stage` in list order. Returns how many filled.
template <u32 NS>
static __device__ __forceinline__ u32 qfwd_lanes_round(const u32* cl, uint2* stage, u32 lane,
                                                        u32 nl, const u32 (&sxy)[QFWD_DEC_LANE_SLOTS],
                                                        const u32 (&sew)[QFWD_DEC_LANE_SLOTS],
                                                        u32 (&sg)[QFWD_DEC_LANE_SLOTS], u32* delta)
{
    const u32 lt = (1u << lane) - 1u;
    u32 cx[NS], cy[NS], kk[NS];
#pragma unroll
    for (u32 k = 0; k < NS; ++k) {
        cx[k] = 0u;
        cy[k] = 0u;
        if (32u * k + lane < nl) {
            cx[k] = cl[sxy[k] & 0xFFFFu];
            cy[k] = cl[sxy[k] >> 16];
        }
    }
    u32 d = QFWD_DEC_FULL;
#pragma unroll
    for (u32 k = 0; k < NS; ++k) {
        kk[k] = 0u;
        const u32 w = sew[k] >> 16;
        if (32u * k + lane < nl && sg[k] < w) {
            if ((cx[k] & 0xFFFFu) != (cy[k] & 0xFFFFu)) {
                const u32 kn = ((cx[k] >> 16) == QFWD_DEC_ODD ? 1u : 0u) +
                               ((cy[k] >> 16) == QFWD_DEC_ODD ? 1u : 0u);
                kk[k] = kn;
                if (kn != 0u) {
                    d = qfwd_dec_min(d, (w - sg[k] + kn - 1u) >> (kn - 1u));
                }
            } else {
                sg[k] = w;
            }
        }
    }
    d = __reduce_min_sync(QFWD_DEC_FULL, d);
    *delta = d;
    if (d == QFWD_DEC_FULL) {
        return 0u;
    }
    u32 nf = 0u;
#pragma unroll
    for (u32 k = 0; k < NS; ++k) {
        bool fills = false;
        if (kk[k] != 0u) {
            const u32 w = sew[k] >> 16;
            const u32 ng = qfwd_dec_min(sg[k] + kk[k] * d, w);
            sg[k] = ng;
            fills = ng == w;
        }
        const u32 m = __ballot_sync(QFWD_DEC_FULL, fills);
        if (fills) {
            stage[nf + (u32)__popc(m & lt)] = make_uint2(sxy[k], sew[k]);
        }
        nf += (u32)__popc(m);
    }
    __syncwarp();
    return nf;
}

template <bool GS>
static __device__ __forceinline__ bool qfwd_uf_lanes(u8* s, const QfwdGraph& gr, u32 lane,
                                                      u32 ndef, u64* out, QfwdLaps& laps)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    const u32 bv = p.uf_detectors;
    const u32 lt = (1u << lane) - 1u;
    constexpr u32 S = QFWD_DEC_LANE_SLOTS;
    u32* cl = (u32*)s;
    u32* lane_of = (u32*)(s + p.uf_off_visited);
    u16* growth = (u16*)(s + p.uf_off_growth);
    uint2* stage = (uint2*)(s + p.uf_off_cand);
    QFWD_LAP_START(laps);

    // The defects, one per lane (ndef <= 32), before `cl` and `visited` are zeroed (they
    // are contiguous: `visited` starts where `cl` ends).
    const bool in_use = lane < ndef;
    u32 myv = in_use ? (u32)((const u16*)(s + p.uf_off_verts))[lane] : 0u;
    qfwd_dec_zero(s, (2u * p.uf_off_visited + 15u) / 16u, lane);
    __syncwarp();
    // Cluster words: a label (+ 1) and the flags. The label is any member's vertex, not
    // the least one: a joiner takes its cluster's word as it is, so no member changes.
    // Only the answer needs the least vertex (of an odd cluster away from the boundary),
    // found at the end.
    u32 cw = 0u;
    u64 ph = 0ull;
    bool is_defect = in_use;
    if (in_use) {
        cw = qfwd_dec_cluster(myv, QFWD_DEC_ODD);
        lane_of[myv] = lane + 1u;
    }
    u32 bcw = qfwd_dec_cluster(bv, QFWD_DEC_BOUNDARY);
    u32 nv = ndef, nvb = 0u, nl = 0u;
    u32 sxy[S], sew[S], sg[S];
#pragma unroll
    for (u32 k = 0; k < S; ++k) {
        sxy[k] = 0u;
        sew[k] = 0u;
        sg[k] = 0u;
    }
    QFWD_LAP(laps, 0);

    // One filled edge (x a cluster vertex; y one, the boundary, or in no cluster: a join),
    // the warp together. False: it closes a cycle of odd potential, or no lane is free.
    auto merge = [&](u32 x, u32 y, u64 oe) -> bool {
        const u32 mx = __ballot_sync(QFWD_DEC_FULL, lane < nv && myv == x);
        const u32 my = __ballot_sync(QFWD_DEC_FULL, lane < nv && myv == y);
        const u32 lx = ((u32)__ffs(mx) - 1u) & 31u, ly = ((u32)__ffs(my) - 1u) & 31u;
        const u32 cx = __shfl_sync(QFWD_DEC_FULL, cw, lx);
        const u32 cy0 = __shfl_sync(QFWD_DEC_FULL, cw, ly);
        const u64 px = __shfl_sync(QFWD_DEC_FULL, ph, lx);
        const u64 py0 = __shfl_sync(QFWD_DEC_FULL, ph, ly);
        if (y != bv && my == 0u) {
            if (nv == QFWD_DEC_WARP) {
                return false;
            }
            if (lane == nv) {
                myv = y;
                cw = cx;
                ph = px ^ oe;
                is_defect = false;
                lane_of[y] = lane + 1u;
            }
            ++nv;
            return true;
        }
        const u32 cy = y == bv ? bcw : cy0;
        // The shift, or the cycle's potential (the boundary's is 0).
        const u64 pot = px ^ (y == bv ? 0ull : py0) ^ oe;
        const u32 rx = cx & 0xFFFFu, ry = cy & 0xFFFFu;
        if (rx == ry) {
            return pot == 0ull;
        }
        const u32 fx = cx >> 16, fy = cy >> 16;
        const u32 fl = ((fx ^ fy) & QFWD_DEC_ODD) | ((fx | fy) & QFWD_DEC_BOUNDARY);
        const u32 nc = (rx < ry ? rx : ry) | (fl << 16);
        // The cluster whose potentials shift: the one without the boundary (neither has
        // it: the one whose label goes).
        const u32 rs = (fx & QFWD_DEC_BOUNDARY) != 0u   ? ry
                       : (fy & QFWD_DEC_BOUNDARY) != 0u ? rx
                                                        : (rx < ry ? ry : rx);
        if (lane < nv) {
            const u32 r = cw & 0xFFFFu;
            if (r == rx || r == ry) {
                cw = nc;
            }
            if (r == rs) {
                ph ^= pot;
            }
        }
        const u32 br = bcw & 0xFFFFu;
        if (br == rx || br == ry) {
            bcw = nc;
        }
        return true;
    };

#pragma unroll 1
    for (;;) {
        if (lane < nv) {
            cl[myv] = cw;
        }
        if (lane == 0u) {
            cl[bv] = bcw;
        }
        __syncwarp();
        if (nv > nvb) {
            // Rebuild: the live entries (the last step marked the dead ones full), then the
            // joiners' new edges, into the stage; their growth into `growth`.
            u32 base = 0u;
            if (nl != 0u) { // (the first rebuild has none)
#pragma unroll
                for (u32 k = 0; k < S; ++k) {
                    if (32u * k < nl) {
                        const bool live = 32u * k + lane < nl && sg[k] < (sew[k] >> 16);
                        const u32 m = __ballot_sync(QFWD_DEC_FULL, live);
                        if (live) {
                            stage[base + (u32)__popc(m & lt)] = make_uint2(sxy[k], sew[k]);
                            growth[sew[k] & 0xFFFFu] = (u16)sg[k];
                        }
                        base += (u32)__popc(m);
                    }
                }
            }
            // Eight joiners at a time, four lanes each, four entries a lane (rows of up to
            // 16 in one chunk: d <= 7 has at most 12).
#pragma unroll 1
            for (u32 j0 = nvb; j0 < nv; j0 += 8u) {
                const u32 jl = j0 + (lane >> 2);
                const u32 x = __shfl_sync(QFWD_DEC_FULL, myv, jl & 31u);
                const u32 rx = __shfl_sync(QFWD_DEC_FULL, cw, jl & 31u) & 0xFFFFu;
                u32 lo = 0u, hi = 0u;
                if (jl < nv) {
                    lo = qfwd_gld<GS>(gr.adj_off + x);
                    hi = qfwd_gld<GS>(gr.adj_off + x + 1u);
                }
                const u32 chunks = __reduce_max_sync(QFWD_DEC_FULL, (hi - lo + 15u) >> 4);
#pragma unroll 1
                for (u32 ch = 0; ch < chunks; ++ch) {
                    uint2 a[4];
#pragma unroll
                    for (u32 j = 0; j < 4u; ++j) {
                        const u32 t = lo + 16u * ch + 4u * j + (lane & 3u);
                        a[j] = t < hi ? qfwd_gld<GS>(gr.adj + t) : make_uint2(0u, 0u);
                    }
                    u32 add = 0u;
#pragma unroll
                    for (u32 j = 0; j < 4u; ++j) {
                        const u32 t = lo + 16u * ch + 4u * j + (lane & 3u);
                        if (t < hi) {
                            const u32 y = a[j].x >> 16;
                            const u32 cy = cl[y];
                            const u32 ly = lane_of[y];
                            // In no cluster; or in another one and never listed from y's
                            // side: the boundary, or a joiner of this round (from the lower
                            // end).
                            if (cy == 0u ||
                                ((cy & 0xFFFFu) != rx && (y == bv || (ly > nvb && x < y)))) {
                                add |= 1u << j;
                            }
                        }
                    }
                    u32 tot;
                    u32 at = base + qfwd_dec_scan<3>((u32)__popc(add), lane, &tot);
#pragma unroll
                    for (u32 j = 0; j < 4u; ++j) {
                        if ((add >> j) & 1u) {
                            if (at < 32u * S) {
                                stage[at] = make_uint2(x | (a[j].x & 0xFFFF0000u),
                                                       (a[j].x & 0xFFFFu) | (a[j].y << 16));
                                growth[a[j].x & 0xFFFFu] = 0u;
                            }
                            ++at;
                        }
                    }
                    base += tot;
                }
            }
            if (base > 32u * S) {
                return false;
            }
            __syncwarp();
#pragma unroll
            for (u32 k = 0; k < S; ++k) {
                if (32u * k < base && 32u * k + lane < base) {
                    const uint2 st = stage[32u * k + lane];
                    sxy[k] = st.x;
                    sew[k] = st.y;
                }
            }
#pragma unroll
            for (u32 k = 0; k < S; ++k) {
                if (32u * k < base && 32u * k + lane < base) {
                    sg[k] = growth[sew[k] & 0xFFFFu];
                }
            }
            nl = base;
            nvb = nv;
            __syncwarp(); // the stage is read before the fused edges are written to it
            QFWD_LAP(laps, 1);
        }

        // The step and the growth, for the slots in use (2, 3, 4 or 8: one copy each, so
        // that unused slots issue nothing; d = 7 lists ~80 edges, 3 slots).
        const u32 ns = (nl + 31u) / 32u;
        u32 delta, nf;
        if (ns <= 2u) {
            nf = qfwd_lanes_round<2>(cl, stage, lane, nl, sxy, sew, sg, &delta);
        } else if (ns == 3u) {
            nf = qfwd_lanes_round<3>(cl, stage, lane, nl, sxy, sew, sg, &delta);
        } else if (ns == 4u) {
            nf = qfwd_lanes_round<4>(cl, stage, lane, nl, sxy, sew, sg, &delta);
        } else {
            nf = qfwd_lanes_round<8>(cl, stage, lane, nl, sxy, sew, sg, &delta);
        }
        QFWD_LAP(laps, 2);
        if (delta == QFWD_DEC_FULL) {
            break;
        }
        // Merge, one filled edge at a time, in list order.
#pragma unroll 1
        for (u32 f = 0; f < nf; ++f) {
            const uint2 st = stage[f];
            const u64 oe = qfwd_gld<GS>(gr.edge_obs + (st.y & 0xFFFFu));
            if (!merge(st.x & 0xFFFFu, st.x >> 16, oe)) {
                return false;
            }
        }
        QFWD_LAP(laps, 3);
    }

    // Step 3': the defects' potentials, and for each odd cluster away from the boundary
    // (an impossible syndrome's), its least vertex's.
    u64 obs = 0ull;
    if (lane < nv && is_defect) {
        obs ^= ph;
    }
    u32 odd = __ballot_sync(QFWD_DEC_FULL, lane < nv && (cw >> 16) == QFWD_DEC_ODD);
#pragma unroll 1
    while (odd != 0u) {
        const u32 label = __shfl_sync(QFWD_DEC_FULL, cw, (u32)__ffs(odd) - 1u) & 0xFFFFu;
        const bool member = lane < nv && (cw & 0xFFFFu) == label;
        const u32 members = __ballot_sync(QFWD_DEC_FULL, member);
        const u32 least = __reduce_min_sync(QFWD_DEC_FULL, member ? myv : QFWD_DEC_FULL);
        if (member && myv == least) {
            obs ^= ph;
        }
        odd &= ~members;
    }
    *out = qfwd_dec_xor_warp(obs);
    return true;
}

#endif // QFWD_DECODE_UF_LANES_CUH

// Part of the QEC decoders' device code, included by device/decode.cu in order (see its
// header): `uf`: steps 1e and 2-4 (the full decoder).
#ifndef QFWD_DECODE_UF_SETTLE_CUH
#define QFWD_DECODE_UF_SETTLE_CUH

// Steps 1e (isolated defects) and 2-4 (the full decoder) of qfwd_uf_run, for `ndef` > 0
// defects, the graph read from the block's copy (GS) or global memory. Not inlined: the
// rare path (d = 7: 13 % of shots, d = 5: under 1 %) then leaves the kernel body, and the
// common paths' code, compact (measured on an H200: inlined, the d = 5
// split path's p50 was 0.2 us slower).
// SS: the state `s` is in shared memory, at `s_shared` bytes into the block's dynamic
// shared memory (else at `s_global`); the request `arg` is, at `arg_shared`. Offsets, not
// pointers, so that the compiler knows the state space of every access here (LDS / STS,
// not generic loads and stores).
template <bool GS, bool SS>
static __device__ __noinline__ u64 qfwd_uf_settle(u8* s_global, u32 s_shared, u32 arg_shared,
                                                  u32 lane, u32 ndef, QfwdTrace& tr)
{
    u8* s = SS ? qfwd_dec_smem + s_shared : s_global;
    const u32* arg = (const u32*)(qfwd_dec_smem + arg_shared);
    const QfwdDecoderParams& p = qfwd_decoders;
    const u32 n = p.uf_detectors;
    const u32 bv = n; // the boundary vertex
    const u32 nwords = (n + 31u) / 32u;
    const u32 lt = (1u << lane) - 1u;
    constexpr u32 U = QFWD_DEC_UNROLL;

    u32* cl = (u32*)s;
    u32* visited = (u32*)(s + p.uf_off_visited);
    u32* defect = (u32*)(s + p.uf_off_defect);
    u32* vbits = (u32*)(s + p.uf_off_vbits);
    u16* growth = (u16*)(s + p.uf_off_growth);
    u32* tree = (u32*)(s + p.uf_off_tree);
    u16* verts = (u16*)(s + p.uf_off_verts);
    u16* frontier = (u16*)(s + p.uf_off_frontier);
    u16* order = (u16*)(s + p.uf_off_order);
    u16* levels = (u16*)(s + p.uf_off_levels);
    u32* cand = (u32*)(s + p.uf_off_cand);
    u64* phi = (u64*)(s + p.uf_off_phi);
    const QfwdGraph gr = qfwd_graph<GS>();
    const u32* adj_off = gr.adj_off;
    const uint2* adj = gr.adj;
    const uint2* edges = gr.edges;
    const u64* edge_obs = gr.edge_obs;
    const u32* bnd = gr.bnd;

    // 1e. Every defect settles in one step: the answer without the growth rounds. Only
    // where the split path was not tried (no table, or above 32 defects): after it, the
    // step answers few shots (d = 5: 8 of the 1 354 it answers alone) and costs every shot
    // that goes on to the full decoder ~4 600 cycles (d = 7), the tail of the latency.
    {
        u64 obs;
        // (Warp-uniform condition: every lane calls the collective step or none.)
        const bool isolated = (p.uf_dist == 0ull || ndef > QFWD_DEC_WARP) &&
                              qfwd_uf_isolated<GS>(s, arg, lane, ndef, &obs);
        QFWD_STAMP(tr);
        if (isolated) {
            QFWD_TRACE_SET(tr, path, 2u);
            return obs;
        }
    }
    // 2'. Growth in the lanes' registers; where they give up, the full decoder below.
    {
        u64 obs;
        QfwdLaps laps{};
        const bool lanes =
            ndef <= QFWD_DEC_WARP && qfwd_uf_lanes<GS>(s, gr, lane, ndef, &obs, laps);
        QFWD_STAMP_LAPS(tr, laps);
        QFWD_STAMP(tr);
        if (lanes) {
            QFWD_TRACE_SET(tr, path, 5u);
            return obs;
        }
    }
    qfwd_dec_zero(s, p.uf_clear_bytes / 16u, lane);
    __syncwarp();
    u32 n_verts = 0u;
#pragma unroll 1
    for (u32 wb = 0; wb < nwords; wb += QFWD_DEC_WARP) {
        const u32 i = wb + lane;
        u32 w = i < nwords ? qfwd_dec_word(arg, i, n) : 0u;
        u32 tot;
        u32 pos = n_verts + qfwd_dec_scan<6>((u32)__popc(w), lane, &tot);
        if (i < nwords) {
            vbits[i] = w;
        }
#pragma unroll 1
        while (w != 0u) {
            const u32 v = 32u * i + (u32)(__ffs(w) - 1);
            w &= w - 1u;
            cl[v] = qfwd_dec_cluster(v, QFWD_DEC_ODD);
            defect[v] = 1u;
            phi[v] = 0ull;
            verts[pos] = (u16)v;
            frontier[pos] = (u16)v;
            ++pos;
        }
        n_verts += tot;
    }
    if (lane == 0u) {
        cl[bv] = qfwd_dec_cluster(bv, QFWD_DEC_BOUNDARY);
        phi[bv] = 0ull;
    }
    u32 n_front = n_verts;
    // A full edge that closes a cycle of odd potential: the forest's shape decides the
    // answer, which step 3 then builds as the specification does.
    bool exact = false;
    __syncwarp();
    QFWD_TRACE_SET(tr, path, 4u);
    QFWD_STAMP(tr);

    // 2. Growth rounds.
#pragma unroll 1
    for (;;) {
        u32 delta = QFWD_DEC_FULL;
        u32 n_fused = 0u;
        // 2a. Frontier edges, the step, and the frontier without its spent vertices.
        u32 n_cand = 0u, n_keep = 0u;
#pragma unroll 1
        for (u32 fb = 0; fb < n_front; fb += QFWD_DEC_WARP) {
            const u32 i = fb + lane;
            const bool has = i < n_front;
            const u32 v = has ? (u32)frontier[i] : 0u;
            const u32 c = has ? cl[v] : 0u;
            const bool active = has && (c >> 16) == QFWD_DEC_ODD;
            u32 lo = 0u, hi = 0u;
            if (active) {
                lo = qfwd_gld<GS>(adj_off + v);
                hi = qfwd_gld<GS>(adj_off + v + 1u);
            }
            const u32 chunks = __reduce_max_sync(QFWD_DEC_FULL, (hi - lo + U - 1u) / U);
            bool any = false;
#pragma unroll 1
            for (u32 ch = 0; ch < chunks; ++ch) {
                uint2 a[U];
                u32 g[U], cu[U];
                qfwd_uf_load_row<GS>(adj, growth, cl, lo + ch * U, hi, a, g, cu);
                u32 entry[U];
                u32 cnt = 0u;
#pragma unroll
                for (u32 j = 0; j < U; ++j) {
                    entry[j] = 0u;
                    const u32 k = qfwd_uf_frontier_k(a[j], g[j], cu[j], c & 0xFFFFu);
                    if (k != 0u) {
                        delta = qfwd_dec_min(delta, (a[j].y - g[j] + k - 1u) >> (k - 1u));
                        any = true;
                        // Listed once: from its lower end when both ends are active.
                        if (k == 1u || v < (a[j].x >> 16)) {
                            entry[j] = (a[j].x & 0xFFFFu) | (k << 16);
                            ++cnt;
                        }
                    }
                }
                u32 tot;
                u32 pos = n_cand + qfwd_dec_scan<4>(cnt, lane, &tot);
#pragma unroll
                for (u32 j = 0; j < U; ++j) {
                    if (entry[j] != 0u) {
                        cand[pos++] = entry[j];
                    }
                }
                n_cand += tot;
            }
            const bool keep = has && (!active || any);
            const u32 km = __ballot_sync(QFWD_DEC_FULL, keep);
            __syncwarp();
            if (keep) {
                frontier[n_keep + (u32)__popc(km & lt)] = (u16)v;
            }
            n_keep += (u32)__popc(km);
        }
        n_front = n_keep;
        delta = __reduce_min_sync(QFWD_DEC_FULL, delta);
        if (n_cand == 0u) {
            break;
        }
        __syncwarp();

        // 2b. Grow; the edges that fill form `fused` (written over the consumed entries).
#pragma unroll 1
        for (u32 cb = 0; cb < n_cand; cb += QFWD_DEC_WARP) {
            const u32 i = cb + lane;
            bool fused = false;
            u32 e = 0u;
            if (i < n_cand) {
                const u32 ce = cand[i];
                e = ce & 0xFFFFu;
                const uint2 ed = qfwd_gld<GS>(edges + e);
                const u32 ng = qfwd_dec_min((u32)growth[e] + (ce >> 16) * delta, ed.y);
                growth[e] = (u16)ng;
                fused = ng == ed.y;
            }
            const u32 fm = __ballot_sync(QFWD_DEC_FULL, fused);
            __syncwarp();
            if (fused) {
                cand[n_fused + (u32)__popc(fm & lt)] = e;
            }
            n_fused += (u32)__popc(fm);
        }
        __syncwarp();

        // 2c. Merge, one fused edge at a time. With the clusters, the potentials (step 3):
        // a vertex joining takes its partner's potential across the edge; of two clusters,
        // the one without the boundary (neither has it: the one whose root goes) shifts
        // its members' potentials to the other's reference; an edge within one cluster
        // closes a cycle, whose potential must be even.
#pragma unroll 1
        for (u32 f = 0; f < n_fused; ++f) {
            const u32 e = cand[f];
            const u32 uv = qfwd_gld<GS>(edges + e).x;
            const u32 x = uv & 0xFFFFu, y = uv >> 16;
            const u64 oe = qfwd_gld<GS>(edge_obs + e);
            u32 cx = cl[x], cy = cl[y];
            const u64 px = phi[x], py = phi[y];
            const u32 jx = cx == 0u ? 1u : 0u;
            const u32 jy = cy == 0u ? 1u : 0u;
            // A joiner's potential, the shift, or the cycle's (a joiner's own is stale: 0).
            const u64 pot = (jx != 0u ? 0ull : px) ^ (jy != 0u ? 0ull : py) ^ oe;
            if (jx) {
                cx = qfwd_dec_cluster(x, 0u);
            }
            if (jy) {
                cy = qfwd_dec_cluster(y, 0u);
            }
            const u32 rx = cx & 0xFFFFu, ry = cy & 0xFFFFu;
            __syncwarp(); // every lane has read cl[x], cl[y] before any lane writes
            if (rx == ry) {
                exact |= pot != 0ull;
            } else {
                const u32 fx = cx >> 16, fy = cy >> 16;
                const u32 fl = ((fx ^ fy) & QFWD_DEC_ODD) | ((fx | fy) & QFWD_DEC_BOUNDARY);
                const u32 nc = (rx < ry ? rx : ry) | (fl << 16);
                // The cluster whose potentials shift (root + 1; 0, none, with a joiner).
                u32 rs = (fx & QFWD_DEC_BOUNDARY) != 0u   ? ry
                         : (fy & QFWD_DEC_BOUNDARY) != 0u ? rx
                                                          : (rx < ry ? ry : rx);
                if (jx | jy) {
                    rs = 0u;
                }
                exact |= (jx & jy) != 0u; // never: a fused edge has an end in a cluster
                // A vertex joining a cluster whose word the union leaves as it is (its root
                // is the smaller one; a singleton adds no flags): no member has the joiner's
                // root and every member already holds `nc`, so the relabel pass would
                // rewrite each word with itself. Skip it (the common step of a growing
                // cluster whose root is below the vertices it reaches).
                const bool noop = (jx != 0u && cy == nc) || (jy != 0u && cx == nc);
#pragma unroll 1
                for (u32 i = lane; !noop && i <= n_verts; i += QFWD_DEC_WARP) {
                    const u32 v = i < n_verts ? (u32)verts[i] : bv;
                    const u32 r = cl[v] & 0xFFFFu;
                    if (r == rx || r == ry) {
                        cl[v] = nc;
                    }
                    if (r == rs) {
                        phi[v] ^= pot;
                    }
                }
                if (lane == 0u) {
                    u32 at = 0u;
                    if (jx) {
                        cl[x] = nc;
                        phi[x] = pot;
                        verts[n_verts] = (u16)x;
                        frontier[n_front] = (u16)x;
                        vbits[x >> 5] |= 1u << (x & 31u);
                        at = 1u;
                    }
                    if (jy) {
                        cl[y] = nc;
                        phi[y] = pot;
                        verts[n_verts + at] = (u16)y;
                        frontier[n_front + at] = (u16)y;
                        vbits[y >> 5] |= 1u << (y & 31u);
                    }
                }
                n_verts += jx + jy;
                n_front += jx + jy;
            }
            __syncwarp();
        }
    }

    QFWD_STAMP(tr);
    // 3'. Without an odd cycle, every spanning forest of the full edges gives the
    // specification's answer, and the potentials give it at once (decode/src/uf.rs
    // `potential_obs`, whose doc comment has the proof): the XOR of the potentials of the
    // defects, and of the root of each odd cluster away from the boundary.
    if (!exact) {
        u64 obs = 0ull;
#pragma unroll 1
        for (u32 i = lane; i < n_verts; i += QFWD_DEC_WARP) {
            const u32 v = verts[i];
            const u32 c = cl[v];
            const u64 f = phi[v];
            if (defect[v] != 0u) {
                obs ^= f;
            }
            if ((c & 0xFFFFu) == v + 1u && (c >> 16) == QFWD_DEC_ODD) {
                obs ^= f;
            }
        }
        obs = qfwd_dec_xor_warp(obs);
        QFWD_STAMP(tr);
        QFWD_STAMP(tr);
        return obs;
    }
    // 3. Spanning forest. Cluster vertices in index order (over `verts`), from the bitmap.
    {
        u32 ns = 0u;
#pragma unroll 1
        for (u32 wb = 0; wb < nwords; wb += QFWD_DEC_WARP) {
            const u32 i = wb + lane;
            u32 w = i < nwords ? vbits[i] : 0u;
            u32 tot;
            u32 pos = ns + qfwd_dec_scan<6>((u32)__popc(w), lane, &tot);
            __syncwarp();
#pragma unroll 1
            while (w != 0u) {
                verts[pos++] = (u16)(32u * i + (u32)(__ffs(w) - 1));
                w &= w - 1u;
            }
            ns += tot;
        }
    }
    if (lane == 0u) {
        visited[bv] = 1u;
    }
    __syncwarp();
    // Level 0: children of the boundary, and roots of the clusters away from it.
    u32 n_order = 0u;
#pragma unroll 1
    for (u32 sb = 0; sb < n_verts; sb += QFWD_DEC_WARP) {
        const u32 i = sb + lane;
        bool take = false;
        u32 v = 0u, t = QFWD_DEC_NO_TREE;
        if (i < n_verts) {
            v = verts[i];
            const u32 c = cl[v];
            const u32 bd = qfwd_gld<GS>(bnd + v);
            const u32 be = bd & 0xFFFFu;
            if (be != QFWD_DEC_NO_ID && (u32)growth[be] == (bd >> 16)) {
                take = true;
                t = be | (bv << 16);
            } else if (((c >> 16) & QFWD_DEC_BOUNDARY) == 0u && (c & 0xFFFFu) == v + 1u) {
                take = true;
            }
        }
        const u32 m = __ballot_sync(QFWD_DEC_FULL, take);
        if (take) {
            const u32 at = n_order + (u32)__popc(m & lt);
            order[at] = (u16)v;
            visited[v] = 1u;
            tree[v] = t;
        }
        n_order += (u32)__popc(m);
    }
    __syncwarp();
    // BFS, a level at a time.
    u32 n_levels = 0u;
    {
        u32 lo = 0u, hi = n_order;
#pragma unroll 1
        while (lo < hi) {
            if (lane == 0u) {
                levels[n_levels] = (u16)lo;
            }
            ++n_levels;
            u32 next = hi;
#pragma unroll 1
            for (u32 xb = lo; xb < hi; xb += QFWD_DEC_WARP) {
                const u32 i = xb + lane;
                const bool has = i < hi;
                const u32 x = has ? (u32)order[i] : 0u;
                u32 a0 = 0u, a1 = 0u;
                if (has) {
                    a0 = qfwd_gld<GS>(adj_off + x);
                    a1 = qfwd_gld<GS>(adj_off + x + 1u);
                }
                const u32 chunks = __reduce_max_sync(QFWD_DEC_FULL, (a1 - a0 + U - 1u) / U);
                const u32 key = QFWD_DEC_WARP - lane;
                u32 ys[U], es[U];
                // Candidates: full edges to vertices unvisited before this window.
                u64 candmask = 0ull;
#pragma unroll 1
                for (u32 ch = 0; ch < chunks; ++ch) {
                    u32 w[U];
                    qfwd_dec_row<GS>(adj, a0 + ch * U, a1, es, ys, w);
                    u32 g[U], vis[U];
#pragma unroll
                    for (u32 j = 0; j < U; ++j) {
                        g[j] = growth[es[j]];
                        vis[j] = visited[ys[j]];
                    }
#pragma unroll
                    for (u32 j = 0; j < U; ++j) {
                        if (vis[j] == 0u && g[j] == w[j]) {
                            candmask |= 1ull << (ch * U + j);
                        }
                    }
                }
                __syncwarp();
                // Claims: a vertex goes to the smallest lane (the first x in queue order).
#pragma unroll 1
                for (u32 ch = 0; ch < chunks; ++ch) {
                    if (chunks > 1u) {
                        u32 w[U];
                        qfwd_dec_row<GS>(adj, a0 + ch * U, a1, es, ys, w);
                    }
#pragma unroll
                    for (u32 j = 0; j < U; ++j) {
                        if (((candmask >> (ch * U + j)) & 1ull) != 0ull) {
                            atomicMax(visited + ys[j], key);
                        }
                    }
                }
                __syncwarp();
                // Winners, appended in (lane, CSR) order.
                u32 cnt = 0u;
                u64 winmask = 0ull;
#pragma unroll 1
                for (u32 ch = 0; ch < chunks; ++ch) {
                    if (chunks > 1u) {
                        u32 w[U];
                        qfwd_dec_row<GS>(adj, a0 + ch * U, a1, es, ys, w);
                    }
#pragma unroll
                    for (u32 j = 0; j < U; ++j) {
                        const u32 b = ch * U + j;
                        if (((candmask >> b) & 1ull) != 0ull && visited[ys[j]] == key) {
                            winmask |= 1ull << b;
                            ++cnt;
                        }
                    }
                }
                u32 tot;
                u32 pos = next + qfwd_dec_scan<6>(cnt, lane, &tot);
#pragma unroll 1
                for (u32 ch = 0; ch < chunks; ++ch) {
                    if (chunks > 1u) {
                        u32 w[U];
                        qfwd_dec_row<GS>(adj, a0 + ch * U, a1, es, ys, w);
                    }
#pragma unroll
                    for (u32 j = 0; j < U; ++j) {
                        if (((winmask >> (ch * U + j)) & 1ull) != 0ull) {
                            order[pos++] = (u16)ys[j];
                            tree[ys[j]] = es[j] | (x << 16);
                        }
                    }
                }
                next += tot;
                __syncwarp();
            }
            lo = hi;
            hi = next;
        }
        if (lane == 0u) {
            levels[n_levels] = (u16)hi;
        }
    }
    __syncwarp();

    QFWD_STAMP(tr);
    // 4. Peel, deepest level first: a vertex's defect bit is its subtree's parity by then.
    u64 obs = 0ull;
#pragma unroll 1
    for (u32 l = n_levels; l-- > 0u;) {
        const u32 first = levels[l], end = levels[l + 1u];
#pragma unroll 1
        for (u32 i = first + lane; i < end; i += QFWD_DEC_WARP) {
            const u32 v = order[i];
            const u32 t = tree[v];
            if (t != QFWD_DEC_NO_TREE && (defect[v] & 1u) != 0u) {
                obs ^= qfwd_gld<GS>(edge_obs + (t & 0xFFFFu));
                const u32 parent = t >> 16;
                if (parent != bv) {
                    atomicXor(defect + parent, 1u);
                }
            }
        }
        __syncwarp();
    }
    obs = qfwd_dec_xor_warp(obs);
    QFWD_STAMP(tr);
    return obs;
}

#endif // QFWD_DECODE_UF_SETTLE_CUH

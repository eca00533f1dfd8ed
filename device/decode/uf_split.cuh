// Part of the QEC decoders' device code, included by device/decode.cu in order (see its
// header): `uf`: the split path's staged image, step 1b (the low-weight syndrome table) and
// step 1d (the split path).
#ifndef QFWD_DECODE_UF_SPLIT_CUH
#define QFWD_DECODE_UF_SPLIT_CUH

// ---- The split path's image in shared memory -------------------------------------------
// The persistent kernel copies `uf_stage` (src/gpu/decoder.rs `StageImage`: the distance
// matrix, the table's index, and the entries and times of the groups of at most S
// defects) into each block's dynamic shared memory before its first barrier, so that the
// split path's dependent loads cost ~30 cycles instead of ~65 (L1) or ~310 (L2) and more.
// Every thread of the block calls it. (External linkage: this file compiled alone has no
// caller.)
static __device__ __forceinline__ void qfwd_dec_copy(u64 src, u32 offset, u32 bytes, u32 tid,
                                                     u32 nthreads)
{
    const uint4* from = (const uint4*)src;
    uint4* to = (uint4*)(qfwd_dec_smem + offset);
#pragma unroll 1
    for (u32 i = tid; i < bytes / 16u; i += nthreads) {
        to[i] = __ldg(from + i);
    }
}

// With it, the graph (QfwdGraph), when its bytes are set.
__device__ __forceinline__ void qfwd_dec_stage_model(u32 tid, u32 nthreads)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    if (p.uf_stage_bytes != 0u) {
        qfwd_dec_copy(p.uf_stage, p.uf_stage_offset, p.uf_stage_bytes, tid, nthreads);
    }
    if (p.uf_graph_bytes != 0u) {
        qfwd_dec_copy(p.uf_adj_offset, p.uf_graph_offset, p.uf_graph_bytes, tid, nthreads);
    }
}

// Loads of the split path's read-only arrays: from the block's copy (STAGED) or global
// memory through the non-coherent cache.
template <bool STAGED>
static __device__ __forceinline__ u32 qfwd_split_ld(const u32* a)
{
    return STAGED ? *a : __ldg(a);
}
template <bool STAGED>
static __device__ __forceinline__ u32 qfwd_split_ld(const u16* a)
{
    return STAGED ? (u32)*a : (u32)__ldg(a);
}

// The table's index (qfwd_uf_table's base and rank terms): the block's copy when STAGED.
template <bool STAGED>
static __device__ __forceinline__ const u32* qfwd_table_index()
{
    const QfwdDecoderParams& p = qfwd_decoders;
    return STAGED ? (const u32*)(qfwd_dec_smem + p.uf_stage_offset + p.uf_stage_index)
                  : (const u32*)p.uf_table_index;
}

// Entry `at`'s result: from the block's copy when staged there.
template <bool STAGED>
static __device__ __forceinline__ u64 qfwd_table_obs(u32 at)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    if (STAGED && at < p.uf_stage_entries) {
        const u8* sb = qfwd_dec_smem + p.uf_stage_offset;
        return qfwd_uf_result<true>(sb + p.uf_stage_obs + at * p.uf_result_bytes);
    }
    return qfwd_uf_entry(at);
}

// Entry `at`'s result and time: from the block's copy when staged there. One branch for
// both loads, so that they issue together.
template <bool STAGED>
static __device__ __forceinline__ void qfwd_split_entry(u32 at, u64* obs, u32* t)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    if (STAGED && at < p.uf_stage_entries) {
        *obs = qfwd_table_obs<STAGED>(at);
        *t = (u32)((const u16*)(qfwd_dec_smem + p.uf_stage_offset + p.uf_stage_times))[at];
    } else {
        *obs = qfwd_table_obs<false>(at);
        *t = (u32)__ldg((const u16*)p.uf_table_times + at);
    }
}

// Step 1b: the flips of a syndrome of `ndef` <= K defects from the low-weight syndrome
// table (decode/src/uf_table.rs: the CPU uf's output, so identical by construction), at
// base[ndef] + sum over the sorted defects d_0 < d_1 < ... of C(d_pos, pos + 1). STAGED:
// the index, and the entries of the smallest groups, from the block's copy (the split
// path's image): a first request's loads then hit shared memory (~30 cycles) where the
// global copy's were cold (the dispatch trace: a table-path call ~2 300-3 000 cycles,
// its repeat ~1 250-1 500, measured on an H200). False when the index is out of
// the table (never: the host sizes it), `*out` untouched.
template <bool STAGED>
static __device__ __forceinline__ bool qfwd_uf_table(const u32* arg, u32 lane, u32 ndef,
                                                      u64* out)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    const u32 n = p.uf_detectors;
    const u32 nwords = (n + 31u) / 32u;
    const u32 kmax = p.uf_table_defects;
    const u32* ix = qfwd_table_index<STAGED>();
    const u32 base = qfwd_split_ld<STAGED>(ix + ndef);
    u32 r = 0u, seen = 0u;
#pragma unroll 1
    for (u32 wb = 0; wb < nwords; wb += QFWD_DEC_WARP) {
        const u32 i = wb + lane;
        u32 w = i < nwords ? qfwd_dec_word(arg, i, n) : 0u;
        u32 tot;
        u32 pos = seen + qfwd_dec_scan<6>((u32)__popc(w), lane, &tot);
#pragma unroll 1
        while (w != 0u) {
            const u32 v = 32u * i + (u32)(__ffs(w) - 1);
            w &= w - 1u;
            r += qfwd_split_ld<STAGED>(ix + kmax + 1u + pos * n + v);
            ++pos;
        }
        seen += tot;
    }
    const u32 at = base + __reduce_add_sync(QFWD_DEC_FULL, r);
    if (at >= p.uf_table_entries) {
        return false;
    }
    *out = qfwd_table_obs<STAGED>(at);
    return true;
}

// Step 1d: the split path, decode/src/uf_split.rs `split` step for step (its module docs
// have the proof), for 1..32 defects: lane i holds the i-th defect in index order (the list
// in `verts`). Every defect starts as its own group; a group's label is its least lane (its
// leader), so the lanes of a group hold its members in sorted order. Each pass:
//   - the leaders look up their group's (obs, T) in the table (a group above K: give up,
//     or see below). In the first pass every group is one defect x, whose rank is
//     C(x, 1) = x; later the group's lanes (`__match_any_sync` on the label) add their
//     terms C(d_pos, pos + 1);
//   - each lane tests its defect a against every defect b of another group, d(a, b) >
//     T_a + T_b (exactly the CPU's test: strict, on the saturated u16 values), and links to
//     the nearest failing b (least distance, then least lane);
//   - no link anywhere: the answer is the XOR of the leaders' entries; else the linked
//     groups merge: the new groups are the connected components of the old groups and the
//     links, labelled by their least lane, the partition the CPU's merge makes.
// That is the CPU's `Grouping::Links`, except that a component of more than K defects
// merges along its returned links only (`Grouping::Chains`). Where a group above K forms
// all the same, `Grouping::Mutual`
// follows: the first pass's merge again, along the returned links only (its entries and
// links are those already found: kept, not looked up again), and the passes after it.
// At most `ndef` passes each (each merges two groups at least). The grouping is the CPU's,
// so a shot takes the same path on both; only the final test matters for the answer. Returns
// false, with `*out` untouched, when it does not apply. Reads only; every lane returns
// together (the loop's bounds and exits are warp-uniform).
//
// Latency: one warp runs this alone, so a pass costs its chain of dependent steps; an L1
// hit costs ~65 cycles in this kernel, an L2 hit ~310, a table entry more (stage traces on
// the H200: results/h200-uf-trace*.txt, h200-split-group-sum.txt). Hence:
//   - the first pass's entries (the one-defect entries, hot) and the distances between
//     the defects (at most QFWD_SPLIT_HELD of them, held in registers for every pass: they
//     do not change) are loaded together, every load unconditional (lanes and columns past
//     the defects read defect 0's row and entry, never used) so that they issue back to
//     back;
//   - a group's rank terms are gathered by shuffles over its lanes (at most K): a
//     `__reduce_add_sync` whose mask is the group differs between lanes (lanes past the
//     defects are groups of their own) and compiles to a collective run once per distinct
//     mask (~3 000 cycles of a d=5 pass at aa606da);
//   - the merge closes a bit mask of lanes per lane (its group, its link, the lanes that
//     link to it) under union by shuffles: a few rounds whatever the number of links,
//     where a merge link after link cost ~800 cycles at d=5; a first pass whose links
//     are all returned (pairs: most d=5 shots) needs no round at all, and the next pass
//     ranks those pairs by arithmetic, C(y, 2) = y (y - 1) / 2, with no group match or sum;
//   - the defect list is built without a per-lane loop (qfwd_uf_defect_list), and the
//     table's start of each group size is in a register (a shuffle, not a load).
#define QFWD_SPLIT_HELD 16u
template <bool STAGED>
static __device__ __forceinline__ bool qfwd_uf_split(const u8* s, u32 lane, u32 ndef, u64* out,
                                                      QfwdTrace& tr)
{
    const QfwdDecoderParams& p = qfwd_decoders;
    const u32 n = p.uf_detectors;
    const u32 kmax = p.uf_table_defects;
    const u8* sb = qfwd_dec_smem + p.uf_stage_offset;
    const u32* ix = qfwd_table_index<STAGED>();
    const u16* dist = STAGED ? (const u16*)sb : (const u16*)p.uf_dist;
    constexpr u32 B = 8u; // distance loads issued together
    constexpr u32 H = QFWD_SPLIT_HELD;
    const u32 lt = (1u << lane) - 1u;
    const bool has = lane < ndef;
    const u32 x = has ? (u32)((const u16*)(s + p.uf_off_verts))[lane] : 0u;
    const u16* row = dist + x * n;
    // The first pass's look-ups: the one-defect entry of x (lanes past the defects: of
    // defect 0, discarded below).
    const u32 at1 = qfwd_split_ld<STAGED>(ix + 1u) + x;
    // Where the entries of m defects start, for the later passes: lane m holds it.
    const u32 base_m = lane <= kmax ? qfwd_split_ld<STAGED>(ix + lane) : 0u;
    u64 obs;
    u32 t;
    qfwd_split_entry<STAGED>(at1, &obs, &t);
    // The grouping: every link; where that gives up, the returned links, replayed from the
    // first pass's merge (its links are the same: kept here; its entries are loaded again
    // then, not copied now, which would wait for the loads above before the distances'
    // loads issue).
    bool mutual = false;
    u32 link1 = QFWD_DEC_FULL;
    // Held distances: d(x, defect u) in bits 16 (u & 1) of held[u / 2] (lanes past the
    // defects and u past them: loaded, never read as a cross pair).
    const bool hold = ndef <= H; // warp-uniform
    u32 held[H / 2u];
#pragma unroll
    for (u32 u = 0; u < H / 2u; ++u) {
        held[u] = 0u;
    }
    if (hold) {
#pragma unroll
        for (u32 u = 0; u < H; ++u) {
            if (u % B == 0u && u >= ndef) {
                break; // warp-uniform
            }
            const u32 xu = __shfl_sync(QFWD_DEC_FULL, x, u);
            held[u / 2u] |= qfwd_split_ld<STAGED>(row + xu) << (16u * (u & 1u));
        }
    }
    u32 label = lane; // lanes past the defects: groups of their own, never merged
    u32 gm = 1u << lane; // the lanes of this lane's group
    u32 partner = QFWD_DEC_FULL; // after a first pass that paired: the other lane, if any
    // At most 2 ndef passes: the replay sets `pass` back to 0 once.
#pragma unroll 1
    for (u32 pass = 0; pass < ndef; ++pass) {
        QFWD_TRACE_SET(tr, passes, pass + 1u);
        QFWD_STAMP(tr);
        u32 at = 0u;
        bool lookup = false;
        bool replay = false; // warp-uniform
        if (pass == 1u && __any_sync(QFWD_DEC_FULL, partner != QFWD_DEC_FULL)) {
            // The groups are the first pass's pairs and lone defects (warp-uniform: only
            // that first pass sets `partner`). A pair {x < y} is at base[2] + x + C(y, 2),
            // C(y, 2) = y (y - 1) / 2; a lone defect keeps its first-pass entry.
            if (kmax < 2u) {
                return false; // a pair is above K
            }
            const u32 y = __shfl_sync(QFWD_DEC_FULL, x, partner & 31u);
            const u32 base2 = __shfl_sync(QFWD_DEC_FULL, base_m, 2u);
            gm = (1u << lane) | (partner != QFWD_DEC_FULL ? 1u << partner : 0u);
            if (has && partner != QFWD_DEC_FULL) {
                if (label == lane) {
                    at = base2 + x + y * (y - 1u) / 2u; // the leader: x < y
                    lookup = true;
                } else {
                    obs = 0ull;
                }
            }
        } else if (pass > 0u) {
            // Look-ups: the group's lanes, its size, this lane's place in it.
            gm = __match_any_sync(QFWD_DEC_FULL, label);
            const u32 m = (u32)__popc(gm);
            if (__any_sync(QFWD_DEC_FULL, has && m > kmax)) {
                if (mutual) {
                    return false;
                }
                mutual = true;
                replay = true;
                label = lane;
                gm = 1u << lane;
                partner = QFWD_DEC_FULL;
                qfwd_split_entry<STAGED>(at1, &obs, &t);
            } else {
                const u32 c = has ? qfwd_split_ld<STAGED>(ix + kmax + 1u +
                                                          (u32)__popc(gm & lt) * n + x)
                                  : 0u;
                // The group's rank, the sum of its members' terms.
                const u32 mmax = __reduce_max_sync(QFWD_DEC_FULL, m); // warp-uniform, <= K
                u32 r = 0u, rest = gm;
#pragma unroll 1
                for (u32 k = 0; k < mmax; ++k) {
                    const u32 src = rest != 0u ? (u32)(__ffs(rest) - 1) : lane;
                    const u32 v = __shfl_sync(QFWD_DEC_FULL, c, src);
                    if (rest != 0u) {
                        r += v;
                        rest &= rest - 1u;
                    }
                }
                at = __shfl_sync(QFWD_DEC_FULL, base_m, m) + r; // m <= K < 32
                obs = 0ull;
                t = 0u;
                lookup = has && label == lane;
            }
        }
        if (pass > 0u && !replay) {
            // The leaders' look-ups (a lone defect after a pairing pass keeps its entry).
            bool bad = false;
            if (lookup) {
                bad = at >= p.uf_table_entries; // never (the host sizes the table); insurance
                if (!bad) {
                    qfwd_split_entry<STAGED>(at, &obs, &t);
                }
            }
            if (__any_sync(QFWD_DEC_FULL, bad)) {
                return false;
            }
            t = __shfl_sync(QFWD_DEC_FULL, t, label); // the group's time
        }
        QFWD_STAMP(tr);
        // The test against every defect of another group; the nearest failing one.
        u32 best = QFWD_DEC_FULL, link = QFWD_DEC_FULL;
        if (replay) {
            link = link1;
        } else if (hold) {
#pragma unroll
            for (u32 u = 0; u < H; ++u) {
                if (u % B == 0u && u >= ndef) {
                    break; // warp-uniform: the rest are past the defects
                }
                const u32 tu = __shfl_sync(QFWD_DEC_FULL, t, u);
                const bool other = ((gm >> u) & 1u) == 0u;
                const u32 d = (held[u / 2u] >> (16u * (u & 1u))) & 0xFFFFu;
                if (has && u < ndef && other && d <= t + tu && d < best) {
                    best = d;
                    link = u;
                }
            }
        } else {
#pragma unroll 1
            for (u32 jb = 0; jb < ndef; jb += B) {
                u32 d[B], tj[B];
#pragma unroll
                for (u32 u = 0; u < B; ++u) {
                    const u32 j = (jb + u) & 31u;
                    const u32 xj = __shfl_sync(QFWD_DEC_FULL, x, j);
                    tj[u] = __shfl_sync(QFWD_DEC_FULL, t, j);
                    // Not a cross pair: a distance no sum of two u16 times reaches.
                    d[u] = has && jb + u < ndef && ((gm >> j) & 1u) == 0u
                               ? qfwd_split_ld<STAGED>(row + xj)
                               : QFWD_DEC_FULL;
                }
#pragma unroll
                for (u32 u = 0; u < B; ++u) {
                    if (d[u] <= t + tj[u] && d[u] < best) {
                        best = d[u];
                        link = jb + u;
                    }
                }
            }
        }
        if (pass == 0u) {
            link1 = link;
        }
        const u32 lm = __ballot_sync(QFWD_DEC_FULL, link != QFWD_DEC_FULL);
        QFWD_STAMP(tr);
        if (lm == 0u) {
            if (!has || label != lane) {
                obs = 0ull; // a member's entry (first pass) or another lane's: not a group's
            }
            *out = qfwd_dec_xor_warp(obs);
            return true;
        }
        // Merge: the components of the groups and the links (both directions; `mutual`:
        // only the returned links), closed by doubling: each round ORs in the masks of the
        // lanes already in this lane's mask. The common first pass: every link is returned
        // (the groups are single defects; always so with `mutual`): the new groups are
        // those pairs and the defects without a link.
        const u32 back = __shfl_sync(QFWD_DEC_FULL, link, link & 31u);
        if (mutual && back != lane) {
            link = QFWD_DEC_FULL;
        }
        if (replay) {
            pass = 0u; // the replayed first pass: the next is pass 1
        }
        if (pass == 0u) {
            if (__all_sync(QFWD_DEC_FULL, link == QFWD_DEC_FULL || back == lane)) {
                label = link == QFWD_DEC_FULL ? lane : qfwd_dec_min(lane, link);
                partner = link;
                continue;
            }
        }
        // The first grouping (`Chains`): a component of more than K defects is closed again
        // along its returned links only (a second round; lanes past the defects are
        // components of one).
        u32 mask;
#pragma unroll 1
        for (u32 round = 0;; ++round) {
            mask = gm | (link != QFWD_DEC_FULL ? 1u << link : 0u);
#pragma unroll
            for (u32 u = 0; u < QFWD_DEC_WARP; ++u) {
                if (u % B == 0u && u >= ndef) {
                    break; // warp-uniform: lanes past the defects never link
                }
                if (__shfl_sync(QFWD_DEC_FULL, link, u) == lane) {
                    mask |= 1u << u;
                }
            }
            bool grew;
            do {
                u32 next = mask;
#pragma unroll
                for (u32 u = 0; u < QFWD_DEC_WARP; ++u) {
                    if (u % B == 0u && u >= ndef) {
                        break; // warp-uniform: lanes past the defects are in no other mask
                    }
                    const u32 mu = __shfl_sync(QFWD_DEC_FULL, mask, u);
                    if (((mask >> u) & 1u) != 0u) {
                        next |= mu;
                    }
                }
                grew = next != mask;
                mask = next;
            } while (__any_sync(QFWD_DEC_FULL, grew)); // at most ~log2(ndef) + 1 rounds
            const bool big = (u32)__popc(mask) > kmax;
            if (mutual || round != 0u || !__any_sync(QFWD_DEC_FULL, big)) {
                break; // warp-uniform
            }
            if (big && back != lane) {
                link = QFWD_DEC_FULL;
            }
        }
        label = (u32)(__ffs(mask) - 1);
    }
    return false;
}

#endif // QFWD_DECODE_UF_SPLIT_CUH

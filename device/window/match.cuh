// qfwd device code: the window decoder's matching inside clusters (decode/src/window/
// matching.rs; docs/streaming.md, "The window decoder"). Included by window.cu, whose
// scratch, tables and warp helpers it uses.
//
// A cluster of at most WINDOW_LANE_CLUSTER defects (at low p nearly all: a lone error's
// pair, or a defect by the boundary) is matched by one lane, the exact matching over its
// at most 16 subsets in registers. The others are listed and matched one at a time by the
// whole warp: its members compacted by ballots, the exact matching's subsets of one size
// a step (up to the limit), else (or when no matching reaches every defect) greedily, a
// warp minimum per pair. A cluster's matches are the CPU's whichever way: the same
// subsets' costs, the same choices.
#ifndef QFWD_WINDOW_MATCH_CUH
#define QFWD_WINDOW_MATCH_CUH

#define QW_LANE_CLUSTER QFWD_WINDOW_LANE_CLUSTER

// Lists a match of defects a < b (b = NONE: a with the boundary).
QW_DEV void qw_emit(const QwScratch& s, u32 a, u32 b) {
    const u32 i = qw_add(s.sc + QW_SC_PICKS, 1);
    s.picks[2 * i] = a;
    s.picks[2 * i + 1] = b;
}

// f(set) of the exact matching (matching.rs): the least defect i of `set` to the
// boundary, tried first, or paired with the others in increasing order, the first least
// kept; `dist(i, j)` a member pair's distance (INF: not a candidate), `cost` the subsets'
// costs so far. Returns the cost; the choice (j, or `md` for the boundary) in *choice.
template <typename Dist>
QW_DEV u32 qw_subset(u32 set, u32 md, const u32* bound, const u32* cost, Dist dist, u32* choice) {
    const u32 i = qw_ctz(set), rest = set & ~(1u << i);
    u32 best = qw_addd(cost[rest], bound[i]);
    *choice = md;
    for (u32 r = rest; r; r &= r - 1) {
        const u32 j = qw_ctz(r);
        const u32 c = qw_addd(cost[rest & ~(1u << j)], dist(i, j));
        if (c < best) {
            best = c;
            *choice = j;
        }
    }
    return best;
}

// Reads the matches back from the choices (members[i] with members[choice] or the
// boundary).
template <typename Choice>
QW_DEV void qw_read_back(const QwScratch& s, const u32* members, u32 md, Choice choice) {
    for (u32 set = (1u << md) - 1; set;) {
        const u32 i = qw_ctz(set), c = choice(set);
        set &= ~(1u << i);
        u32 b = QW_NONE;
        if (c != md) {
            set &= ~(1u << c);
            b = members[c];
        }
        qw_emit(s, members[i], b);
    }
}

// Root r's cluster of sz <= WINDOW_LANE_CLUSTER defects, matched exactly by this lane;
// false (nothing listed) when no matching reaches every defect.
QW_DEV bool qw_match_lane(const QfwdStreamModel& m, const QwWin& w, const QwScratch& s, u32 nd, u32 r,
                          u32 sz) {
    u32 mem[QW_LANE_CLUSTER], bound[QW_LANE_CLUSTER], d[QW_LANE_CLUSTER][QW_LANE_CLUSTER];
    u32 cost[1u << QW_LANE_CLUSTER];
    u8 ch[1u << QW_LANE_CLUSTER];
    u32 k = 0;
    for (u32 a = r; a < nd && k < sz; a++)
        if (s.parent[a] == r) mem[k++] = a;
    for (u32 i = 0; i < sz; i++) {
        bound[i] = s.bound[mem[i]];
        d[i][i] = QW_INF;
        for (u32 j = i + 1; j < sz; j++) {
            u32 x;
            d[i][j] = d[j][i] = qw_candidate(m, w, s, nd, mem[i], mem[j], &x) ? x : QW_INF;
        }
    }
    cost[0] = 0;
    const u32 full = (1u << sz) - 1;
    for (u32 set = 1; set <= full; set++) {
        u32 c;
        cost[set] = qw_subset(set, sz, bound, cost, [&](u32 i, u32 j) { return d[i][j]; }, &c);
        ch[set] = (u8)c;
    }
    if (cost[full] == QW_INF) return false;
    qw_read_back(s, mem, sz, [&](u32 set) { return (u32)ch[set]; });
    return true;
}

// The warp's exact matching of the sz members in s.members (subsets of one size a step);
// false (nothing listed) when no matching reaches every defect.
QW_DEV bool qw_match_warp(const QwGroup& g, const QfwdStreamModel& m, const QwWin& w, const QwScratch& s,
                          u32 nd, u32 sz) {
    const u32 lane = g.tid % 32, full = (1u << sz) - 1;
    // Boundary distances by member, in the list's spare words (s.left).
    for (u32 i = lane; i < sz; i += 32) s.left[i] = s.bound[s.members[i]];
    if (lane == 0) s.cost[0] = 0;
    qw_wsync(g);
    auto dist = [&](u32 i, u32 j) {
        u32 x;
        return qw_candidate(m, w, s, nd, s.members[i < j ? i : j], s.members[i < j ? j : i], &x) ? x : QW_INF;
    };
    for (u32 level = 1; level <= sz; level++) {
        for (u32 set = lane; set <= full; set += 32) {
            if (qw_popc(set) != level) continue;
            u32 c;
            s.cost[set] = qw_subset(set, sz, s.left, s.cost, dist, &c);
            s.choice[set] = (u8)c;
        }
        qw_wsync(g);
    }
    if (s.cost[full] == QW_INF) return false;
    if (lane == 0) qw_read_back(s, s.members, sz, [&](u32 set) { return (u32)s.choice[set]; });
    return true;
}

// The warp's greedy matching of the sz members in s.members (matching.rs): the pair left
// that saves the most against the boundary (least D - B(i) - B(j), then i, then j), a
// warp minimum each, while one saves anything; then every defect left to the boundary.
QW_DEV void qw_match_greedy(const QwGroup& g, const QfwdStreamModel& m, const QwWin& w,
                            const QwScratch& s, u32 nd, u32 sz) {
    const u32 lane = g.tid % 32;
    for (u32 i = lane; i < sz; i += 32) s.left[i] = 1;
    qw_wsync(g);
    for (;;) {
        // (saving + 2 INF) << 32 | i << 16 | j: savings fit 26 bits, members 16.
        u64 best = ~0ull;
        for (u32 i = lane; i < sz; i += 32) {
            if (!s.left[i]) continue;
            const u32 a = s.members[i];
            for (u32 j = i + 1; j < sz; j++) {
                u32 d;
                if (!s.left[j] || !qw_candidate(m, w, s, nd, a, s.members[j], &d) || d == QW_INF) continue;
                const u64 save = (u64)d + 2ull * QW_INF - s.bound[a] - s.bound[s.members[j]];
                if (save >= 2ull * QW_INF) continue;
                const u64 key = save << 32 | (u64)i << 16 | j;
                best = key < best ? key : best;
            }
        }
        const u64 win = qw_wmin64(g, best);
        if (win == ~0ull) break;
        const u32 i = (u32)(win >> 16) & 0xFFFFu, j = (u32)win & 0xFFFFu;
        qw_wsync(g);
        if (lane == 0) {
            s.left[i] = 0;
            s.left[j] = 0;
            qw_emit(s, s.members[i], s.members[j]);
        }
        qw_wsync(g);
    }
    for (u32 i = lane; i < sz; i += 32)
        if (s.left[i] && s.bound[s.members[i]] != QW_INF) qw_emit(s, s.members[i], QW_NONE);
    qw_wsync(g);
}

// Step 4: every cluster's matches into the picks.
QW_DEV void qw_match(const QwGroup& g, const QfwdStreamModel& m, const QwWin& w, const QwScratch& s,
                     u32 nd) {
    const u32 lane = g.tid % 32;
    const u32 by_lane = m.match_defects < QW_LANE_CLUSTER ? m.match_defects : QW_LANE_CLUSTER;
    for (u32 r = lane; r < nd; r += 32) {
        if (s.parent[r] != r) continue;
        const u32 sz = s.size[r];
        if (sz <= by_lane && qw_match_lane(m, w, s, nd, r, sz)) continue;
        s.list[qw_add(s.sc + QW_SC_LIST, 1)] = r;
    }
    qw_wsync(g);
    const u32 listed = s.sc[QW_SC_LIST];
    for (u32 c = 0; c < listed; c++) {
        const u32 r = s.list[c], sz = s.size[r];
        // The members, in increasing order (the last cluster's read back first).
        qw_wsync(g);
        u32 at = 0;
        for (u32 a0 = r; a0 < nd; a0 += 32) {
            const u32 a = a0 + lane;
            const bool in = a < nd && s.parent[a] == r;
            const u32 bits = qw_ballot(g, in);
            if (in) s.members[at + qw_popc(bits & ((1u << lane) - 1u))] = a;
            at += qw_popc(bits);
        }
        qw_wsync(g);
        // A small cluster listed had no exact matching (or none was allowed).
        if (sz > by_lane && sz <= m.match_defects && qw_match_warp(g, m, w, s, nd, sz)) continue;
        qw_match_greedy(g, m, w, s, nd, sz);
    }
    qw_wsync(g);
    if (lane == 0) s.sc[QW_SC_LIST] = 0;
    qw_wsync(g);
}

#endif  // QFWD_WINDOW_MATCH_CUH

// qfwd device code: the window decoder's step 2', exact matching in regions
// (decode/src/window/matching.rs; docs/streaming.md, "The window decoder"). Included by
// window.cu, whose scratch, group and list helpers it uses.
//
// Regions are the components of the full edges between detectors (least-vertex roots, by
// a second lock-free union-find, merged as the edges fill: window.cu's qw_fill). The
// regions within the limits are matched in *batches*, all of a batch's regions in the
// same passes: thread 0
// admits regions in list order while their arrays fit the pool (each region's members,
// defects, distances, subsets' costs and edges in a segment of its own; the first always
// fits) and places their items, then the group lists every admitted region's members,
// defects and edges, runs Bellman-Ford over all their edges for all their defects at once
// (a flat item space, a region found by binary search over its items' offsets; boundary
// distances kept on the way), the subsets' costs level by level, each region's matches (a
// thread per region) and each match's path (a thread per match). A region's answer is
// the one it would get alone: regions are disjoint, and each reads only its own segment
// and members. A window's regions thus cost one batch of passes, not one per region; and
// regions of one or two members, the commonest, are known from their full edges and
// matched in the pass that counts the regions (qw_match_tiny), so a window of only those
// takes neither the regions' list nor a batch.
#ifndef QFWD_WINDOW_MATCH_CUH
#define QFWD_WINDOW_MATCH_CUH

#define QW_MATCHED 0x80000000u  // rdef[root]: the region is in the batch (its index below)
// Table entry words.
#define QW_T_ROOT 0u
#define QW_T_MEMBERS 1u
#define QW_T_DEFECTS 2u
#define QW_T_BASE 3u
#define QW_T_NMEM 4u
#define QW_T_NDEF 5u
#define QW_T_NEDGES 6u
#define QW_T_NMATCH 7u
#define QW_T_ITEMS 8u    // the region's first Bellman-Ford item
#define QW_T_SUBSETS 9u  // the region's first subset item
#define QW_T_OK 10u
#define QW_T_ECAP 11u
// Batch scalars.
#define QW_SC_NQ 9u
#define QW_SC_ITEMS 10u
#define QW_SC_SUBSETS 11u
#define QW_SC_MDMAX 15u
#define QW_SC_NEXT 20u

// A batch region's table entry and the arrays of its pool segment.
struct QwRegion {
    u32* t;
    u32 root, k, md;
    u32* members;
    u32* defects;  // in increasing index
    u32* dsort;    // as listed
    u32* distb;
    u32* matches;
    u32* dist;  // dist[a * k + local]
    u32* cost;
    u8* choice;
    u32* redges;
};

QW_DEV u32 qw_region_words(u32 k, u32 md, u32 ecap) {
    const u32 subsets = 1u << md;
    return k + 4 * md + md * k + subsets + (subsets + 3) / 4 + ecap;
}

// The most edges with both ends among k vertices, capped at the matching's limit (a
// region with more is not matched).
QW_DEV u32 qw_edge_cap(const QfwdStreamModel& m, u32 k) {
    const u32 bound = (k << m.degree_shift) / 2 + 1;
    return bound < m.match_edges ? bound : m.match_edges;
}

QW_DEV QwRegion qw_region(const QwScratch& s, u32 q) {
    QwRegion r;
    r.t = s.table + q * QFWD_MATCH_ENTRY_WORDS;
    r.root = r.t[QW_T_ROOT];
    r.k = r.t[QW_T_MEMBERS];
    r.md = r.t[QW_T_DEFECTS];
    u32* p = s.pool + r.t[QW_T_BASE];
    r.members = p;
    r.defects = p + r.k;
    r.dsort = r.defects + r.md;
    r.distb = r.dsort + r.md;
    r.matches = r.distb + r.md;
    r.dist = r.matches + r.md;
    r.cost = r.dist + r.md * r.k;
    r.choice = (u8*)(r.cost + (1u << r.md));
    r.redges = r.cost + (1u << r.md) + ((1u << r.md) + 3) / 4;
    return r;
}

// The batch region of vertex v's region, or NONE.
QW_DEV u32 qw_batch_index(const QwScratch& s, u32 v) {
    const u32 mark = s.rdef[s.region[v]];
    return (mark & QW_MATCHED) ? mark & ~QW_MATCHED : QW_NONE;
}

// The region whose items (from table word `field`) hold flat item t: the last with a
// first item at or below t.
QW_DEV u32 qw_region_of(const QwScratch& s, u32 nq, u32 field, u32 t) {
    u32 lo = 0, hi = nq;
    while (hi - lo > 1) {
        const u32 mid = (lo + hi) / 2;
        if (s.table[mid * QFWD_MATCH_ENTRY_WORDS + field] <= t) lo = mid;
        else hi = mid;
    }
    return lo;
}

// Thread 0: admits the regions from rlist[next] on while they fit the pool (the first
// always does), at most MATCH_BATCH_REGIONS; marks their roots.
QW_DEV void qw_admit(const QfwdStreamModel& m, const QwScratch& s) {
    const u32 next = s.sc[QW_SC_NEXT], regions = s.sc[QW_SC_NREG];
    u32 used = 0, q = 0, mdmax = 0, items = 0, subsets = 0;
    for (; next + q < regions && q < QFWD_MATCH_BATCH_REGIONS; q++) {
        const u32 R = s.rlist[next + q], k = s.rmem[R], md = s.rdef[R];
        const u32 ecap = qw_edge_cap(m, k), words = qw_region_words(k, md, ecap);
        if (used + words > m.match_pool_words) break;
        u32* t = s.table + q * QFWD_MATCH_ENTRY_WORDS;
        for (u32 i = 0; i < QFWD_MATCH_ENTRY_WORDS; i++) t[i] = 0;
        t[QW_T_ROOT] = R;
        t[QW_T_MEMBERS] = k;
        t[QW_T_DEFECTS] = md;
        t[QW_T_BASE] = used;
        t[QW_T_ECAP] = ecap;
        // Bellman-Ford items: each defect against every edge slot the region may fill.
        t[QW_T_ITEMS] = items;
        t[QW_T_SUBSETS] = subsets;
        s.rdef[R] = QW_MATCHED | q;
        qw_region(s, q).cost[0] = 0;
        used += words;
        items += md * ecap;
        subsets += 1u << md;
        mdmax = md > mdmax ? md : mdmax;
    }
    s.sc[QW_SC_NQ] = q;
    s.sc[QW_SC_MDMAX] = mdmax;
    s.sc[QW_SC_ITEMS] = items;
    s.sc[QW_SC_SUBSETS] = subsets;
    s.sc[QW_SC_CHANGED] = 0;
    s.sc[QW_SC_CHANGED + 1] = 0;
    s.sc[QW_SC_CHANGED + 2] = 0;
}

// Lists the batch regions' members (local indices) and defects.
QW_DEV void qw_batch_members(const QwGroup& g, const QwScratch& s) {
    const u32 nverts = s.sc[QW_SC_NVERTS];
    for (u32 i = g.tid; i < nverts; i += g.size) {
        const u32 v = s.verts[i], q = qw_batch_index(s, v);
        if (q == QW_NONE) continue;
        const QwRegion r = qw_region(s, q);
        const u32 x = qw_add(r.t + QW_T_NMEM, 1);
        r.members[x] = v;
        s.local[v] = x;
        if (s.defect[v]) r.dsort[qw_add(r.t + QW_T_NDEF, 1)] = v;
    }
}

// Lists the batch regions' edges (both ends in the region, from the lower end); sorts
// their defects; distances start at infinity, 0 at each defect, and each defect's distance
// to the boundary at its own boundary edge's weight.
QW_DEV void qw_batch_edges(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G,
                           const QwScratch& s) {
    const u32 n = G.n, nverts = s.sc[QW_SC_NVERTS], shift = m.degree_shift;
    for (u32 t = g.tid; t < (nverts << shift); t += g.size) {
        const u32 v = s.verts[t >> shift], q = qw_batch_index(s, v), slot = t & ((1u << shift) - 1);
        if (q == QW_NONE) continue;
        const QwRegion r = qw_region(s, q);
        const u32 o = qw_ro(G.adj_offset + v) + slot;
        if (o < qw_ro(G.adj_offset + v + 1)) {
            const u32 e = qw_ro(G.adj_pairs + 2 * o), y = qw_ro(G.adj_pairs + 2 * o + 1);
            if (y != n && y > v && s.region[y] == r.root) {
                const u32 j = qw_add(r.t + QW_T_NEDGES, 1);
                if (j < r.t[QW_T_ECAP]) r.redges[j] = e;
            }
        }
        if (slot != 0) continue;
        u32 rank = QW_NONE;
        if (s.defect[v]) {
            rank = 0;
            for (u32 j = 0; j < r.md; j++) rank += r.dsort[j] < v;
            r.defects[rank] = v;
            const u32 be = qw_ro(G.bedge + v);
            r.distb[rank] = be == QW_NONE ? QW_NONE : qw_ro(G.weight + be);
        }
        const u32 x = s.local[v];
        for (u32 a = 0; a < r.md; a++) r.dist[a * r.k + x] = a == rank ? 0 : QW_NONE;
    }
}

// Offers defect a of region r the boundary through vertex x at distance d from it.
QW_DEV void qw_offer_boundary(const QwGraph& G, const QwRegion& r, u32 a, u32 x, u32 d) {
    const u32 be = qw_ro(G.bedge + x);
    if (be != QW_NONE) qw_min(r.distb + a, d + qw_ro(G.weight + be));
}

// Distances from every defect inside its region: Bellman-Ford over every region's edges
// for all its defects at once (each defect's items cover its region's edge slots; a region
// with more edges than the limit is skipped), until a pass changes nothing (pass p raises
// flag p % 3 and clears flag (p + 1) % 3, last read two barriers ago). Every distance a pass
// sets is a path's length and every final one is set by some pass, so offering each to the
// boundary through its vertex leaves each defect's least boundary distance.
QW_DEV void qw_batch_distances(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G,
                               const QwScratch& s) {
    const u32 nq = s.sc[QW_SC_NQ], items = s.sc[QW_SC_ITEMS];
    for (u32 pass = 0;; pass++) {
        u32* changed = s.sc + QW_SC_CHANGED + pass % 3;
        for (u32 t = g.tid; t < items; t += g.size) {
            const QwRegion r = qw_region(s, qw_region_of(s, nq, QW_T_ITEMS, t));
            const u32 i = t - r.t[QW_T_ITEMS], ne = r.t[QW_T_NEDGES], ecap = r.t[QW_T_ECAP];
            const u32 a = i / ecap, j = i % ecap;
            if (ne > m.match_edges || j >= ne) continue;
            const u32 e = r.redges[j], w = qw_ro(G.weight + e);
            const u32 u = qw_ro(G.ends + 2 * e), v = qw_ro(G.ends + 2 * e + 1);
            u32* row = r.dist + a * r.k;
            const u32 lu = s.local[u], lv = s.local[v];
            const u32 du = qw_ld(row + lu), dv = qw_ld(row + lv);
            if (du != QW_NONE && du + w < dv) {
                qw_min(row + lv, du + w);
                qw_offer_boundary(G, r, a, v, du + w);
                qw_st(changed, 1);
            }
            if (dv != QW_NONE && dv + w < du) {
                qw_min(row + lu, dv + w);
                qw_offer_boundary(G, r, a, u, dv + w);
                qw_st(changed, 1);
            }
        }
        if (g.tid == 0) s.sc[QW_SC_CHANGED + (pass + 1) % 3] = 0;
        qw_sync(g);
        if (!*changed) break;
    }
}

// The subsets' costs by number of defects (f(S): the least defect of S to the boundary,
// tried first, or paired with the others in increasing order, the first least kept), all
// regions' subsets of one size in one pass; then each region's matches (a thread each). A
// region is matched when its edges are within the limit and all its defects can be.
QW_DEV void qw_batch_subsets(const QwGroup& g, const QfwdStreamModel& m, const QwScratch& s) {
    const u32 nq = s.sc[QW_SC_NQ], subsets = s.sc[QW_SC_SUBSETS], mdmax = s.sc[QW_SC_MDMAX];
    for (u32 level = 1; level <= mdmax; level++) {
        for (u32 t = g.tid; t < subsets; t += g.size) {
            const QwRegion r = qw_region(s, qw_region_of(s, nq, QW_T_SUBSETS, t));
            const u32 set = t - r.t[QW_T_SUBSETS];
            if ((u32)qw_popc(set) != level || r.t[QW_T_NEDGES] > m.match_edges) continue;
            const u32 i = qw_ctz(set), rest = set & ~(1u << i);
            const u32* row = r.dist + i * r.k;
            u32 best = r.cost[rest], choice = r.md;
            best = (best == QW_NONE || r.distb[i] == QW_NONE) ? QW_NONE : best + r.distb[i];
            for (u32 x = rest; x; x &= x - 1) {
                const u32 j = qw_ctz(x);
                const u32 f = r.cost[rest & ~(1u << j)], d = row[s.local[r.defects[j]]];
                const u32 c = (f == QW_NONE || d == QW_NONE) ? QW_NONE : f + d;
                if (c < best) {
                    best = c;
                    choice = j;
                }
            }
            r.cost[set] = best;
            r.choice[set] = (u8)choice;
        }
        qw_sync(g);
    }
    for (u32 q = g.tid; q < nq; q += g.size) {
        const QwRegion r = qw_region(s, q);
        const u32 all = (1u << r.md) - 1;
        if (r.t[QW_T_NEDGES] > m.match_edges || r.cost[all] == QW_NONE) continue;
        r.t[QW_T_OK] = 1;
        u32 nm = 0;
        for (u32 set = all; set;) {
            const u32 i = qw_ctz(set), c = r.choice[set];
            set &= ~(1u << i);
            if (c != r.md) set &= ~(1u << c);
            r.matches[nm++] = i | c << 8;
        }
        r.t[QW_T_NMATCH] = nm;
    }
    qw_sync(g);
}

// Match `a` of region r: its path back to its first defect, least edges first (see
// matching.rs), toggled into the correction.
QW_DEV void qw_match_path(const QwGraph& G, const QwScratch& s, const QwRegion& r, u32 match) {
    const u32 n = G.n, a = match & 0xFFu, c = match >> 8;
    const u32* row = r.dist + a * r.k;
    u32 at;
    if (c == r.md) {
        u32 best = QW_NONE;
        at = 0;
        for (u32 x = 0; x < r.k; x++) {
            const u32 v = r.members[x], be = qw_ro(G.bedge + v);
            if (be != QW_NONE && row[x] != QW_NONE && row[x] + qw_ro(G.weight + be) == r.distb[a] &&
                v < best) {
                best = v;
                at = x;
            }
        }
        // (A finite boundary distance is always attained: an invariant, kept safe as on
        // the CPU.)
        if (best == QW_NONE) return;
        qw_toggle(s, qw_ro(G.bedge + best));
    } else {
        at = s.local[r.defects[c]];
    }
    const u32 from = s.local[r.defects[a]];
    while (at != from) {
        const u32 y = r.members[at];
        u32 pick = QW_NONE, next = 0;
        for (u32 p = qw_ro(G.adj_offset + y); p < qw_ro(G.adj_offset + y + 1); p++) {
            const u32 e = qw_ro(G.adj_pairs + 2 * p), x = qw_ro(G.adj_pairs + 2 * p + 1);
            if (x == n || s.region[x] != r.root) continue;
            const u32 dx = row[s.local[x]];
            if (dx != QW_NONE && dx + qw_ro(G.weight + e) == row[at] && e < pick) {
                pick = e;
                next = s.local[x];
            }
        }
        if (pick == QW_NONE) return;  // never: exact distances have a tight edge
        qw_toggle(s, pick);
        at = next;
    }
}

// Every matched region's paths (a thread per match), its defects cleared; then, unless this
// batch was the last (the window's reset cleans up after it), the batch's marks undone and
// the next batch starts after it. Returns whether it was the last.
QW_DEV bool qw_batch_finish(const QwGroup& g, const QwGraph& G, const QwScratch& s) {
    const u32 nq = s.sc[QW_SC_NQ], mdmax = s.sc[QW_SC_MDMAX], nverts = s.sc[QW_SC_NVERTS];
    const bool last = s.sc[QW_SC_NEXT] + nq >= s.sc[QW_SC_NREG];
    for (u32 t = g.tid; t < nq * mdmax; t += g.size) {
        const QwRegion r = qw_region(s, t / mdmax);
        if (r.t[QW_T_OK] && t % mdmax < r.t[QW_T_NMATCH]) qw_match_path(G, s, r, r.matches[t % mdmax]);
    }
    for (u32 q = g.tid; q < nq; q += g.size) {
        const QwRegion r = qw_region(s, q);
        if (!r.t[QW_T_OK]) continue;
        for (u32 a = 0; a < r.md; a++) s.defect[r.defects[a]] = 0;
        qw_add(s.sc + QW_SC_COUNT, 0u - r.md);
    }
    qw_sync(g);
    if (last) return true;
    for (u32 i = g.tid; i < nverts; i += g.size) s.local[s.verts[i]] = QW_NONE;
    for (u32 q = g.tid; q < nq; q += g.size) s.rdef[s.table[q * QFWD_MATCH_ENTRY_WORDS + QW_T_ROOT]] = 0;
    if (g.tid == 0) s.sc[QW_SC_NEXT] += nq;
    qw_sync(g);
    return false;
}

// A region of one or two members (`root`, the least, and `other` or NONE) within the
// limits (at low p the commonest: a lone error's two defects, or a defect beside the
// boundary), matched by one thread as the batch would match it: distances are the least
// weight between the two members, choices the least vertex and edge. Returns false, with
// nothing changed, where it has too many edges or no finite matching (the batch would
// skip it too: it is left to the peeling).
QW_DEV bool qw_match_tiny(const QfwdStreamModel& m, const QwGraph& G, const QwScratch& s,
                          u32 root, u32 other) {
    // The least weight between the two members and its least edge.
    u32 d = QW_NONE, edge = QW_NONE, edges = 0;
    for (u32 p = qw_ro(G.adj_offset + root); p < qw_ro(G.adj_offset + root + 1); p++) {
        const u32 e = qw_ro(G.adj_pairs + 2 * p), y = qw_ro(G.adj_pairs + 2 * p + 1);
        if (other == QW_NONE || y != other) continue;
        const u32 w = qw_ro(G.weight + e);
        edges++;
        if (w < d || (w == d && e < edge)) {
            d = w;
            edge = e;
        }
    }
    if (edges > m.match_edges) return false;
    // Each defect's distance to the boundary: through its own boundary edge, or across to
    // the other member and through its boundary edge.
    const u32 members[2] = {root, other};
    const u32 k = other == QW_NONE ? 1u : 2u;
    u32 distb[2] = {QW_NONE, QW_NONE};
    for (u32 a = 0; a < k; a++) {
        for (u32 x = 0; x < k; x++) {
            const u32 be = qw_ro(G.bedge + members[x]);
            if (be == QW_NONE) continue;
            const u32 via = (x == a ? 0u : d) + qw_ro(G.weight + be);
            distb[a] = via < distb[a] ? via : distb[a];
        }
    }
    const bool def[2] = {s.defect[root] != 0, k == 2 && s.defect[other] != 0};
    // Two defects: both to the boundary (tried first, kept on a tie) or paired.
    const bool pair = def[0] && def[1] &&
        (distb[0] == QW_NONE || distb[1] == QW_NONE || distb[0] + distb[1] > d);
    if (!pair) {
        for (u32 a = 0; a < k; a++)
            if (def[a] && distb[a] == QW_NONE) return false;
    }
    if (pair) {
        qw_toggle(s, edge);
    } else {
        for (u32 a = 0; a < k; a++) {
            if (!def[a]) continue;
            // The least member that attains the boundary distance, its boundary edge, and
            // the path back from it.
            // The root is the region's least vertex.
            for (u32 x = 0; x < k; x++) {
                const u32 be = qw_ro(G.bedge + members[x]);
                if (be == QW_NONE || (x == a ? 0u : d) + qw_ro(G.weight + be) != distb[a]) continue;
                qw_toggle(s, be);
                if (x != a) qw_toggle(s, edge);
                break;
            }
        }
    }
    for (u32 a = 0; a < k; a++) s.defect[members[a]] = 0;
    qw_add(s.sc + QW_SC_COUNT, 0u - (u32)def[0] - (u32)def[1]);
    return true;
}

// The detector other than x at the end of x's full edges between detectors: NONE where
// there is none, QW_MANY where there are two or more.
QW_DEV u32 qw_full_neighbour(const QwGraph& G, const QwScratch& s, u32 x) {
    u32 found = QW_NONE;
    for (u32 p = qw_ro(G.adj_offset + x); p < qw_ro(G.adj_offset + x + 1); p++) {
        const u32 e = qw_ro(G.adj_pairs + 2 * p), y = qw_ro(G.adj_pairs + 2 * p + 1);
        if (y == G.n || y == x || s.growth[e] != qw_ro(G.weight + e)) continue;
        if (found != QW_NONE && found != y) return QW_MANY;
        found = y;
    }
    return found;
}

// Vertex v's region when it has one or two members (the growth is final, so its full
// edges say): `*other` the second member or NONE; false when it has more.
QW_DEV bool qw_small_region(const QwGraph& G, const QwScratch& s, u32 v, u32* other) {
    const u32 y = qw_full_neighbour(G, s, v);
    *other = y;
    return y == QW_NONE || (y != QW_MANY && qw_full_neighbour(G, s, y) == v);
}

// Step 2': regions from the cluster vertices and the full edges, their defects and
// members counted at their roots; the regions of one or two members matched as they are
// listed, the others within the limits in batches.
QW_DEV void qw_match_regions(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G,
                             const QwScratch& s) {
    if (m.match_defects == 0) return;
    const u32 nverts = s.sc[QW_SC_NVERTS];
    // The regions were merged as their edges filled (qw_fill): compressed and counted at
    // their roots. A region of one or two members is known from its full edges alone and
    // matched here by its least member; a larger one raises the flag for the lists.
    for (u32 i = g.tid; i < nverts; i += g.size) {
        const u32 v = s.verts[i], r = qw_find(s.region, v);
        qw_st(s.region + v, r);
        qw_add(s.rmem + r, 1);
        if (s.defect[v]) qw_add(s.rdef + r, 1);
        u32 other;
        if (!qw_small_region(G, s, v, &other)) {
            qw_st(s.sc + QW_SC_LARGE, 1);
            continue;
        }
        const u32 k = other == QW_NONE ? 1u : 2u;
        const u32 md = (s.defect[v] != 0) + (other != QW_NONE && s.defect[other] != 0);
        if ((other == QW_NONE || v < other) && md >= 1 && md <= m.match_defects &&
            k <= m.match_members)
            qw_match_tiny(m, G, s, v, other);
    }
    qw_sync(g);
    if (!s.sc[QW_SC_LARGE]) return;
    for (u32 i = g.tid; i < nverts; i += g.size) {
        const u32 v = s.verts[i];
        if (s.region[v] == v && s.rmem[v] > 2 && s.rdef[v] >= 1 && s.rdef[v] <= m.match_defects &&
            s.rmem[v] <= m.match_members) {
            s.rlist[qw_add(s.sc + QW_SC_NREG, 1)] = v;
        }
    }
    qw_sync(g);
    while (s.sc[QW_SC_NEXT] < s.sc[QW_SC_NREG]) {
        if (g.tid == 0) qw_admit(m, s);
        qw_sync(g);
        // The host sizes the pool for the largest region the limits allow
        // (match_region_words in src/gpu/window.rs), so a batch is never empty; were it,
        // the regions left are peeled rather than the loop spinning.
        if (s.sc[QW_SC_NQ] == 0) break;
        qw_batch_members(g, s);
        qw_sync(g);
        qw_batch_edges(g, m, G, s);
        qw_sync(g);
        qw_batch_distances(g, m, G, s);
        qw_batch_subsets(g, m, s);
        if (qw_batch_finish(g, G, s)) break;
    }
}

#endif  // QFWD_WINDOW_MATCH_CUH

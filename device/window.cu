// qfwd device code: the sliding-window stream decoder (docs/streaming.md), giving the same
// commits as the CPU's decode/src/window (StreamDecoder; the window decoder specified in
// decode/src/window/uf.rs and matching.rs, its distances in metric.rs).
//
// ---- Shape: one warp per window, working on the defects ---------------------------------
// A window is decoded by one warp, lane a holding defects a, a + 32, ...: a window of 32
// defects or fewer (at p = 0.001 a d = 7 window holds about 11) is one item per lane in
// every step, and steps meet at __syncwarp, never at a block barrier. Distances come from
// the model's tables (a pair's distance and observables by (context, slots, rounds
// apart); each vertex's boundary distance, observables and exit round), so no step walks
// the window graph: the graph is read only where a match crosses the commit round. A
// block holds several warps, each its own window, and one copy of the bulk window's
// tables in shared memory (QwGroup::cache; null: the tables are read from the blob).
//
// A group (QwGroup) may be more than a warp (the persistent stream kernel gives a block to
// a stream): its first warp decodes, the others wait at the group's barrier.
//
// ---- Steps (decode/src/window/uf.rs) ----------------------------------------------------
//   1. Defects, in increasing vertex order: a row word a lane, popcounts scanned.
//   2. Each defect's boundary distance B; candidate pairs, D <= B(a) + B(b) (a bit mask a
//      defect when the window has at most 32, else tested again where needed).
//   3. Growth rounds: the least need (warp minimum), radii grow, touching candidate pairs
//      merge their clusters (lock-free least-root unions), then every defect's root is
//      compressed and each root's parity, boundary bit and size gathered (atomics).
//   4. Matching: clusters of at most WINDOW_LANE_CLUSTER defects by one lane each (the
//      exact matching over at most 16 subsets); larger ones one at a time by the warp
//      (subsets of one size a step), greedily above the limit.
//   5. Commit: each match's mask where it lies below the commit round; a match that
//      crosses it, one at a time, its crossing vertex by a lane per slot of the commit
//      round (warp minimum of (distance, vertex)), an event carried there.
// Every choice is a least index or an order-free count, so the commits are the CPU's.
//
// Entry points: qfwd_stream_scratch_init, qfwd_window_cache_fill, qfwd_stream_push_rounds,
// qfwd_stream_finish and qfwd_stream_reset (group functions: every thread of the group
// calls them with the same arguments; usable from a persistent kernel, which `#include
// "window.cu"`s this file, with QFWD_WINDOW_NO_BATCH defined to leave the batch kernel
// out), and the batch kernel qfwd_window_batch (tests, benchmarks).
//
// Built by NVRTC (src/gpu/nvrtc.rs; `qfwd_abi.h` is the header src/abi.rs generates), and
// by g++ for the host check (tests/window_host.rs), which defines QFWD_WINDOW_HOST and the
// platform layer below (barriers, atomics, the warp's ballot, scans and reductions) for
// std::thread groups: the same code runs on both.
#ifndef QFWD_WINDOW_CU
#define QFWD_WINDOW_CU

#ifndef QFWD_WINDOW_HOST
#include "qfwd_abi.h"

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;
typedef unsigned char u8;

#define QW_DEV __device__ __forceinline__
#define QW_FULL 0xFFFFFFFFu

// The threads that decode one window together: `size` (a multiple of 32) threads, this
// one `tid`, synchronised by named barrier `barrier` (1..15; 0 is __syncthreads'); a group
// of one warp syncs as a warp. `cache`: the block's copy of the bulk window's tables
// (qfwd_window_cache_fill), or null; `dp`: the group's exact-matching tables apart from
// its scratch (m.scratch_words - m.scratch_hot_words words), or null: in the scratch.
struct QwGroup {
    u32 tid;
    u32 size;
    u32 barrier;
    const u32* cache;
    u32* dp;
};

QW_DEV void qw_sync(const QwGroup& g) {
    if (g.size == 32) __syncwarp();
    else asm volatile("bar.sync %0, %1;" ::"r"(g.barrier), "r"(g.size) : "memory");
}
// The decoding warp's own step.
QW_DEV void qw_wsync(const QwGroup&) { __syncwarp(); }
QW_DEV u32 qw_ld(const u32* p) { return *(const volatile u32*)p; }
QW_DEV void qw_st(u32* p, u32 v) { *(volatile u32*)p = v; }
QW_DEV u32 qw_cas(u32* p, u32 cmp, u32 v) { return atomicCAS(p, cmp, v); }
QW_DEV void qw_xor(u32* p, u32 v) { atomicXor(p, v); }
QW_DEV void qw_or(u32* p, u32 v) { atomicOr(p, v); }
QW_DEV u32 qw_add(u32* p, u32 v) { return atomicAdd(p, v); }
QW_DEV u32 qw_popc(u32 x) { return __popc(x); }
QW_DEV u32 qw_ctz(u32 x) { return __ffs(x) - 1; }
// Over the 32 lanes of the calling thread's warp (every lane calls): lane i's predicate as
// bit i; the least value; the XOR; the sum; the sum over the lanes below (exclusive scan).
QW_DEV u32 qw_ballot(const QwGroup&, u32 pred) { return __ballot_sync(QW_FULL, pred); }
QW_DEV u32 qw_wmin(const QwGroup&, u32 v) { return __reduce_min_sync(QW_FULL, v); }
QW_DEV u64 qw_wmin64(const QwGroup&, u64 v) {
    for (u32 o = 16; o; o >>= 1) {
        const u64 x = __shfl_xor_sync(QW_FULL, v, o);
        v = x < v ? x : v;
    }
    return v;
}
QW_DEV u32 qw_wxor(const QwGroup&, u32 v) { return __reduce_xor_sync(QW_FULL, v); }
QW_DEV u32 qw_wsum(const QwGroup&, u32 v) { return __reduce_add_sync(QW_FULL, v); }
QW_DEV u32 qw_wscan(const QwGroup& g, u32 v) {
    const u32 lane = g.tid % 32;
    u32 x = v;
    for (u32 o = 1; o < 32; o <<= 1) {
        const u32 y = __shfl_up_sync(QW_FULL, x, o);
        if (lane >= o) x += y;
    }
    return x - v;
}
#endif

// Hooks: nothing on the device; the host check counts a window's warp steps and the
// table reads on its critical path with them (tests/window_host.rs, `window_steps`).
#ifndef QW_WINDOW_BEGIN
#define QW_WINDOW_BEGIN(g)
#define QW_WINDOW_END(g)
#define QW_READ()
#endif

#define QW_NONE QFWD_WINDOW_NONE
#define QW_INF QFWD_WINDOW_INF
#define QW_ODD QFWD_WINDOW_ODD
#define QW_BOUNDARY QFWD_WINDOW_BOUNDARY
// Scalars.
#define QW_SC_M 0u       // defects
#define QW_SC_PICKS 1u   // matches listed
#define QW_SC_LIST 2u    // clusters for the warp, then matches that cross the commit round
#define QW_SC_ROUNDS 3u  // growth rounds

QW_DEV u32 qw_dist(u32 entry) { return entry & QW_INF; }
QW_DEV u32 qw_mask(u32 entry) { return entry >> QFWD_WINDOW_DIST_BITS; }
// A sum of distances, unreachable when either is (matching.rs `add`).
QW_DEV u32 qw_addd(u32 x, u32 y) {
    if (x == QW_INF || y == QW_INF) return QW_INF;
    const u32 s = x + y;
    return s < QW_INF - 1 ? s : QW_INF - 1;
}

// A window graph and its tables, where this group reads them.
struct QwWin {
    u32 n, rounds, commit, from_start, is_final;
    const u32* adj_offset;
    const u32* adj_pairs;
    const u32* weight;
    const u32* obs;
    const u32* bounds;
    const u32* exits;
    const u32* present;
    const u32* pairs;  // the model's pair tables
    const u32* bulk;   // the bulk context's table (the cache's copy, or the blob's)
    const u32* masks;
};

QW_DEV QwWin qw_window(const QfwdStreamModel& m, u32 index, const u32* cache) {
    const u32* blob = (const u32*)m.data;
    const QfwdWindowGraph* d = (const QfwdWindowGraph*)(blob + m.graphs) + index;
    QwWin w;
    w.n = d->vertices;
    w.rounds = d->rounds;
    w.commit = d->commit_rounds;
    w.from_start = d->from_start;
    w.is_final = d->is_final;
    w.adj_offset = blob + d->adj_offset;
    w.adj_pairs = blob + d->adj_pairs;
    w.weight = blob + d->weight;
    w.obs = blob + d->obs;
    w.present = blob + d->present;
    w.pairs = blob + m.pairs;
    w.masks = blob + m.masks;
    const u32 contexts = (m.head_rounds + 1) * (m.tail_rounds + 1);
    const u32 span_words = m.span * m.slots * m.slots;
    if (cache && index == m.bulk_graph) {
        w.bounds = cache + m.cache[QFWD_CACHE_BOUNDS];
        w.exits = cache + m.cache[QFWD_CACHE_EXITS];
    } else {
        w.bounds = blob + d->bounds;
        w.exits = blob + d->exits;
    }
    w.bulk = cache ? cache + m.cache[QFWD_CACHE_PAIRS] : w.pairs + (contexts - 1) * span_words;
    return w;
}

// The entry of window vertices a and b (metric.rs `pair`).
QW_DEV u32 qw_pair(const QfwdStreamModel& m, const QwWin& w, u32 a, u32 b) {
    QW_READ();
    const u32 K = m.slots, H = m.head_rounds, T = m.tail_rounds;
    const u32 lo = a < b ? a : b, hi = a < b ? b : a;
    const u32 ja = lo / K, jb = hi / K;
    const u32 bottom = (w.from_start && ja < H) ? ja : H;
    const u32 top = (w.is_final && jb + T >= w.rounds) ? jb + T - w.rounds : T;
    const u32 at = ((jb - ja) * K + lo % K) * K + hi % K;
    if (bottom == H && top == T) return w.bulk[at];
    return w.pairs[(bottom * (T + 1) + top) * m.span * K * K + at];
}

QW_DEV u32 qw_bound(const QwWin& w, u32 v) {
    QW_READ();
    return w.bounds[v];
}

QW_DEV u64 qw_mask64(const QwWin& w, u32 entry) {
    const u32 i = qw_mask(entry);
    return (u64)w.masks[2 * i] | (u64)w.masks[2 * i + 1] << 32;
}

// A group's working memory, carved from `base` (m.scratch_words words) where the model's
// scratch offsets say (src/gpu/window.rs `scratch_layout`; QFWD_SCR_* in src/abi.rs).
struct QwScratch {
    u32* dv;  // per defect: its vertex
    u32* bound;
    u32* rad;
    u32* parent;
    u32* flags;
    u32* size;
    u32* cand;  // per defect: its candidate partners (windows of at most 32 defects)
    u32* members;
    u32* left;
    u32* picks;  // {a, b} per match, defect indices, b = NONE: the boundary
    u32* list;
    u32* cost;
    u8* choice;
    u32* sc;
};

QW_DEV QwScratch qw_scratch(const QfwdStreamModel& m, u32* base, u32* dp) {
    QwScratch s;
    s.dv = base + m.scratch[QFWD_SCR_DEFECTS];
    s.bound = base + m.scratch[QFWD_SCR_BOUND];
    s.rad = base + m.scratch[QFWD_SCR_RAD];
    s.parent = base + m.scratch[QFWD_SCR_PARENT];
    s.flags = base + m.scratch[QFWD_SCR_FLAGS];
    s.size = base + m.scratch[QFWD_SCR_SIZE];
    s.cand = base + m.scratch[QFWD_SCR_CAND];
    s.members = base + m.scratch[QFWD_SCR_MEMBERS];
    s.left = base + m.scratch[QFWD_SCR_LEFT];
    s.picks = base + m.scratch[QFWD_SCR_PICKS];
    s.list = base + m.scratch[QFWD_SCR_CROSS];
    // The tables apart keep their places relative to each other.
    const u32 hot = m.scratch_hot_words;
    s.cost = dp ? dp + (m.scratch[QFWD_SCR_COST] - hot) : base + m.scratch[QFWD_SCR_COST];
    s.choice = (u8*)(dp ? dp + (m.scratch[QFWD_SCR_CHOICE] - hot) : base + m.scratch[QFWD_SCR_CHOICE]);
    s.sc = base + m.scratch[QFWD_SCR_SCALARS];
    return s;
}

QW_DEV bool qw_active(u32 flags) { return (flags & (QW_ODD | QW_BOUNDARY)) == QW_ODD; }

QW_DEV u32 qw_find(u32* parent, u32 x) {
    u32 p = qw_ld(parent + x);
    while (p != x) {
        x = p;
        p = qw_ld(parent + x);
    }
    return x;
}

// Merges the clusters of a and b: the larger root goes under the smaller, by CAS, until
// the two finds agree (so every root is its cluster's least defect, whatever the order).
QW_DEV void qw_union(u32* parent, u32 a, u32 b) {
    for (;;) {
        const u32 ra = qw_find(parent, a), rb = qw_find(parent, b);
        if (ra == rb) return;
        const u32 lo = ra < rb ? ra : rb, hi = ra < rb ? rb : ra;
        if (qw_cas(parent + hi, hi, lo) == hi) return;
    }
}

// Whether defects a and b are a candidate pair, and their distance in *d.
QW_DEV bool qw_candidate(const QfwdStreamModel& m, const QwWin& w, const QwScratch& s, u32 nd,
                         u32 a, u32 b, u32* d) {
    if (nd <= 32 && !((s.cand[a] >> b) & 1u)) return false;
    *d = qw_dist(qw_pair(m, w, s.dv[a], s.dv[b]));
    if (nd <= 32) return true;
    const u32 bb = s.bound[a] + s.bound[b];
    return *d != QW_INF && *d <= bb;
}

// The defects after a that may pair with it: the bits of its candidate mask (windows of
// at most 32 defects), else every later defect (qw_candidate tests them).
struct QwPartners {
    u32 bits, next, nd;
};
QW_DEV QwPartners qw_partners(const QwScratch& s, u32 nd, u32 a) {
    QwPartners p = {0u, a + 1, nd};
    if (nd <= 32) p.bits = s.cand[a] & ~((2u << a) - 1u);
    return p;
}
QW_DEV bool qw_next_partner(QwPartners& p, u32* b) {
    if (p.nd <= 32) {
        if (!p.bits) return false;
        *b = qw_ctz(p.bits);
        p.bits &= p.bits - 1;
        return true;
    }
    if (p.next >= p.nd) return false;
    *b = p.next++;
    return true;
}

// The group's scratch before its first window: nothing needs clean values (every window
// sets what it reads), so only the barrier that orders it after the caller's writes.
QW_DEV void qfwd_stream_scratch_init(const QwGroup& g, const QfwdStreamModel&, u32*) { qw_sync(g); }

// A block's copy of the bulk window's tables (`threads` threads, this one `tid`; the
// caller synchronises the block after it): the bulk context's pair table and the bulk
// window's boundary entries and exit rounds.
QW_DEV void qfwd_window_cache_fill(u32 tid, u32 threads, const QfwdStreamModel& m, u32* cache) {
    const u32* blob = (const u32*)m.data;
    const QfwdWindowGraph* d = (const QfwdWindowGraph*)(blob + m.graphs) + m.bulk_graph;
    const u32 contexts = (m.head_rounds + 1) * (m.tail_rounds + 1);
    const u32 span_words = m.span * m.slots * m.slots;
    const u32* pairs = blob + m.pairs + (contexts - 1) * span_words;
    for (u32 i = tid; i < span_words; i += threads) cache[m.cache[QFWD_CACHE_PAIRS] + i] = pairs[i];
    for (u32 i = tid; i < d->vertices; i += threads) {
        cache[m.cache[QFWD_CACHE_BOUNDS] + i] = blob[d->bounds + i];
        cache[m.cache[QFWD_CACHE_EXITS] + i] = blob[d->exits + i];
    }
}

// Step 1: the window's defects in increasing vertex order (events where a round has no
// detector ignored); returns their number.
QW_DEV u32 qw_defects(const QwGroup& g, const QfwdStreamModel& m, const QwWin& w, const u32* rows,
                      u64 start, const QwScratch& s) {
    const u32 K = m.slots, W = m.rounds_per_window, RW = m.row_words;
    const u32 words = w.rounds * RW, lane = g.tid % 32;
    u32 base = 0;
    for (u32 t0 = 0; t0 < words; t0 += 32) {
        const u32 t = t0 + lane;
        u32 bits = 0;
        if (t < words) bits = rows[(u32)((start + t / RW) % W) * RW + t % RW] & w.present[t];
        u32 at = base + qw_wscan(g, qw_popc(bits));
        base += qw_wsum(g, qw_popc(bits));
        while (bits) {
            s.dv[at++] = (t / RW) * K + (t % RW) * 32 + qw_ctz(bits);
            bits &= bits - 1;
        }
    }
    qw_wsync(g);
    return base;
}

// Step 2: boundary distances, the clusters' start, the candidate pairs.
QW_DEV void qw_start(const QwGroup& g, const QfwdStreamModel& m, const QwWin& w, const QwScratch& s,
                     u32 nd) {
    const u32 lane = g.tid % 32;
    for (u32 a = lane; a < nd; a += 32) {
        s.bound[a] = qw_dist(qw_bound(w, s.dv[a]));
        s.rad[a] = 0;
        s.parent[a] = a;
        s.flags[a] = QW_ODD;
        s.size[a] = 1;
    }
    qw_wsync(g);
    if (nd > 32) return;
    if (lane < nd) {
        u32 mask = 0;
        for (u32 b = 0; b < nd; b++) {
            if (b == lane) continue;
            const u32 d = qw_dist(qw_pair(m, w, s.dv[lane], s.dv[b]));
            if (d != QW_INF && d <= s.bound[lane] + s.bound[b]) mask |= 1u << b;
        }
        s.cand[lane] = mask;
    }
    qw_wsync(g);
}

// Step 3: growth rounds until no cluster is active. `parent` holds each defect's root and
// `flags` / `size` each root's, between rounds.
QW_DEV void qw_grow(const QwGroup& g, const QfwdStreamModel& m, const QwWin& w, const QwScratch& s,
                    u32 nd) {
    const u32 lane = g.tid % 32;
    u32 rounds = 0;
    for (;;) {
        u32 need = QW_INF;
        for (u32 a = lane; a < nd; a += 32) {
            const u32 ra = s.parent[a];
            const bool act_a = qw_active(s.flags[ra]);
            if (act_a) {
                const u32 left = s.bound[a] > s.rad[a] ? s.bound[a] - s.rad[a] : 0;
                need = left < need ? left : need;
            }
            QwPartners it = qw_partners(s, nd, a);
            for (u32 b; qw_next_partner(it, &b);) {
                u32 d;
                if (!qw_candidate(m, w, s, nd, a, b, &d)) continue;
                const u32 rb = s.parent[b];
                if (ra == rb) continue;
                const u32 k = (u32)act_a + (u32)qw_active(s.flags[rb]);
                if (k == 0) continue;
                const u32 gap = d - s.rad[a] - s.rad[b];
                const u32 x = (gap + k - 1) / k;
                need = x < need ? x : need;
            }
        }
        const u32 delta = qw_wmin(g, need);
        if (delta == QW_INF) break;
        rounds++;
        for (u32 a = lane; a < nd; a += 32)
            if (qw_active(s.flags[s.parent[a]])) s.rad[a] += delta;
        qw_wsync(g);
        for (u32 a = lane; a < nd; a += 32) {
            QwPartners it = qw_partners(s, nd, a);
            for (u32 b; qw_next_partner(it, &b);) {
                u32 d;
                if (qw_candidate(m, w, s, nd, a, b, &d) && s.rad[a] + s.rad[b] >= d) qw_union(s.parent, a, b);
            }
        }
        qw_wsync(g);
        for (u32 a = lane; a < nd; a += 32) {
            qw_st(s.parent + a, qw_find(s.parent, a));
            s.flags[a] = 0;
            s.size[a] = 0;
        }
        qw_wsync(g);
        for (u32 a = lane; a < nd; a += 32) {
            const u32 r = s.parent[a];
            qw_xor(s.flags + r, QW_ODD);
            if (s.rad[a] >= s.bound[a]) qw_or(s.flags + r, QW_BOUNDARY);
            qw_add(s.size + r, 1);
        }
        qw_wsync(g);
    }
    if (lane == 0) s.sc[QW_SC_ROUNDS] = rounds;
}

#include "window/match.cuh"

// Step 5: commits the matches; returns the flips (every lane of the decoding warp).
QW_DEV u64 qw_commit(const QwGroup& g, const QfwdStreamModel& m, const QwWin& w, u32* rows, u64 start,
                     const QwScratch& s) {
    const u32 lane = g.tid % 32, K = m.slots, C = w.commit;
    const u32 npicks = s.sc[QW_SC_PICKS];
    u64 flips = 0;
    for (u32 i = lane; i < npicks; i += 32) {
        const u32 av = s.dv[s.picks[2 * i]], b = s.picks[2 * i + 1];
        if (av / K >= C) continue;
        if (b == QW_NONE) {
            if (w.exits[av] < C) {
                flips ^= qw_mask64(w, qw_bound(w, av));
                continue;
            }
        } else if (s.dv[b] / K < C) {
            flips ^= qw_mask64(w, qw_pair(m, w, av, s.dv[b]));
            continue;
        }
        s.list[qw_add(s.sc + QW_SC_LIST, 1)] = i;
    }
    qw_wsync(g);
    const u32 ncross = s.sc[QW_SC_LIST];
    const u32 W = m.rounds_per_window, RW = m.row_words;
    for (u32 c = 0; c < ncross; c++) {
        const u32 i = s.list[c];
        const u32 av = s.dv[s.picks[2 * i]], b = s.picks[2 * i + 1];
        const u32 far = b == QW_NONE ? QW_NONE : s.dv[b];
        // A lane per slot of the commit round: the least way up to it from round C - 1
        // plus the rest to `far`; the warp's least (distance, vertex) wins.
        u64 best = ~0ull, mine = 0;
        for (u32 k = lane; k < K; k += 32) {
            const u32 x = C * K + k;
            const u32 rest = qw_dist(far == QW_NONE ? qw_bound(w, x) : qw_pair(m, w, x, far));
            if (rest == QW_INF) continue;
            u32 up = QW_INF;
            u64 upmask = 0;
            for (u32 o = w.adj_offset[x]; o < w.adj_offset[x + 1]; o++) {
                const u32 e = w.adj_pairs[2 * o], y = w.adj_pairs[2 * o + 1];
                if (y == w.n || y / K + 1 != C) continue;
                const u32 ay = qw_pair(m, w, av, y);
                if (qw_dist(ay) == QW_INF) continue;
                const u32 d = qw_dist(ay) + w.weight[e];
                if (d < up) {
                    up = d;
                    upmask = qw_mask64(w, ay) ^ ((u64)w.obs[2 * e] | (u64)w.obs[2 * e + 1] << 32);
                }
            }
            if (up == QW_INF) continue;
            const u64 key = ((u64)up + rest) << 32 | x;
            if (key < best) {
                best = key;
                mine = upmask;
            }
        }
        const u64 win = qw_wmin64(g, best);
        if (win != ~0ull && win == best) {
            // One lane holds it (vertices differ).
            flips ^= mine;
            const u32 x = (u32)win, k = x % K;
            qw_xor(rows + (u32)((start + C) % W) * RW + k / 32, 1u << (k % 32));
        }
    }
    const u32 lo = qw_wxor(g, (u32)flips), hi = qw_wxor(g, (u32)(flips >> 32));
    return (u64)lo | (u64)hi << 32;
}

// Decodes the window of graph `index` starting at round `start` (its rows in the ring):
// its committed flips (thread 0's is the answer), and the carried events XORed into the
// ring. The decoding warp only; the caller synchronises the group around it.
QW_DEV u64 qw_decode_window(const QwGroup& g, const QfwdStreamModel& m, u32 index, u32* rows, u64 start,
                            u32* scratch) {
    if (g.tid >= 32) return 0;
    const QwWin w = qw_window(m, index, g.cache);
    const QwScratch s = qw_scratch(m, scratch, g.dp);
    QW_WINDOW_BEGIN(g);
    const u32 nd = qw_defects(g, m, w, rows, start, s);
    u64 flips = 0;
    if (nd != 0) {
        if (g.tid == 0) {
            s.sc[QW_SC_M] = nd;
            s.sc[QW_SC_PICKS] = 0;
            s.sc[QW_SC_LIST] = 0;
        }
        qw_start(g, m, w, s, nd);
        qw_grow(g, m, w, s, nd);
        qw_match(g, m, w, s, nd);
        flips = qw_commit(g, m, w, rows, start, s);
    }
    QW_WINDOW_END(g);
    return flips;
}

// Stores `n` rounds' events (every slot, bit-packed; round_bytes apart) as the kept slots'
// rows of rounds `first` .. `first + n`, all in one pass: each row word is one warp's
// ballot over 32 kept slots, and the rounds' rows are distinct (a run between two windows
// is at most W rounds). The caller synchronises the group before they are read.
QW_DEV void qw_store_rows(const QwGroup& g, const QfwdStreamModel& m, u32* rows, u64 first, u32 n,
                          const u8* events) {
    const u32* kept = (const u32*)m.data + m.kept_slots;
    const u32 RW = m.row_words, W = m.rounds_per_window;
    // Every lane of a warp runs the same iterations: the items are a multiple of 32, and
    // so is the group.
    for (u32 t = g.tid; t < n * RW * 32; t += g.size) {
        const u32 j = t / (RW * 32), k = t % (RW * 32);
        u32 bit = 0;
        if (k < m.slots) {
            const u32 slot = kept[k];
            bit = (events[(u64)j * m.round_bytes + slot / 8] >> (slot % 8)) & 1u;
        }
        const u32 word = qw_ballot(g, bit);
        if (k % 32 == 0) rows[(u32)((first + j) % W) * RW + k / 32] = word;
    }
}

#ifndef QFWD_WINDOW_HOST
QW_DEV u64 qw_clock() { return clock64(); }
#else
QW_DEV u64 qw_clock() { return 0; }
#endif

// Rounds first_round .. first_round + n of a stream (events: n rounds of round_bytes, every
// slot bit-packed). Each answer (a commit, or why a round was refused) goes to
// answers[count] while count < capacity (thread 0 writes); returns count plus the answers.
// The state is read once and written back at the end. The accepted rounds between two
// windows form a run, stored when it completes a window (then the window is decoded) or
// when the call ends. `window_cycles` (thread 0's, may be null) adds the cycles of the
// windows' decodes. A group function.
QW_DEV u32 qfwd_stream_push_rounds(const QwGroup& g, const QfwdStreamModel& m,
                                   QfwdStreamState* st, u32* rows, u64 first_round,
                                   const u8* events, u32 n, u32* scratch, QfwdCommit* answers,
                                   u32 capacity, u32 count, u64* window_cycles) {
    u64 next = st->next_round, start = st->window_start;
    const bool finished = st->finished != 0;
    // The accepted rounds whose rows are not stored yet: inputs run_from .. run_from + run,
    // rounds run_round .. run_round + run. The inputs are consecutive rounds, so once one is
    // accepted every later one is: a run has no refused input inside it.
    u32 run_from = 0, run = 0;
    u64 run_round = next;
    for (u32 i = 0; i < n; i++) {
        const u64 round = first_round + i;
        int status = QFWD_STREAM_NO_COMMIT;
        if (finished) status = QFWD_STREAM_FINISHED;
        else if (round < next) status = QFWD_STREAM_ROUND_REPEATED;
        else if (round > next) status = QFWD_STREAM_ROUNDS_MISSING;
        QfwdCommit c = {start, 0, 0, status};
        if (status == QFWD_STREAM_NO_COMMIT) {
            if (run == 0) {
                run_from = i;
                run_round = next;
            }
            run += 1;
            if (next + 1 - start == m.rounds_per_window) {
                qw_store_rows(g, m, rows, run_round, run, events + (u64)run_from * m.round_bytes);
                run = 0;
                qw_sync(g);
                const u64 t = qw_clock();
                c.flips = qw_decode_window(g, m, start == 0 ? 0u : 1u, rows, start, scratch);
                if (g.tid == 0 && window_cycles) *window_cycles += qw_clock() - t;
                // The window's rows are read, and its carried events written, before the
                // group stores the next rounds over its first rows.
                qw_sync(g);
                c.rounds = m.commit_rounds;
                c.status = QFWD_STREAM_COMMIT;
                start += m.commit_rounds;
            }
            next += 1;
        }
        if (c.status != QFWD_STREAM_NO_COMMIT) {
            if (g.tid == 0 && count < capacity) answers[count] = c;
            count++;
        }
    }
    if (run != 0) qw_store_rows(g, m, rows, run_round, run, events + (u64)run_from * m.round_bytes);
    // Every thread read the state above before thread 0 writes it (a thread that read the
    // new state would refuse every round as repeated).
    qw_sync(g);
    if (g.tid == 0) {
        st->next_round = next;
        st->window_start = start;
    }
    // The state, the rows and the carried events are written before any thread reads
    // them again.
    qw_sync(g);
    return count;
}

// The final round of a stream: decodes the last window and commits every round left.
// Returns STREAM_COMMIT (the commit in *out), STREAM_FINISHED or STREAM_TOO_SHORT.
QW_DEV int qfwd_stream_finish(const QwGroup& g, const QfwdStreamModel& m, QfwdStreamState* st,
                              u32* rows, const u8* events, u32* scratch, QfwdCommit* out) {
    const u64 next = st->next_round, start = st->window_start;
    int status = QFWD_STREAM_COMMIT;
    if (st->finished) status = QFWD_STREAM_FINISHED;
    else if (next < m.min_rounds) status = QFWD_STREAM_TOO_SHORT;
    if (status == QFWD_STREAM_COMMIT) {
        qw_store_rows(g, m, rows, next, 1, events);
        qw_sync(g);
        const u32 syndrome_rounds = (u32)(next - start);
        const u32 index = start == 0
            ? m.first_final_from_start + (syndrome_rounds - m.min_rounds)
            : m.first_final_from_bulk + (syndrome_rounds - (m.rounds_per_window - m.commit_rounds));
        const u64 flips = qw_decode_window(g, m, index, rows, start, scratch);
        if (g.tid == 0) {
            out->first_round = start;
            out->rounds = syndrome_rounds + 1;
            out->flips = flips;
            st->finished = 1;
        }
    }
    if (g.tid == 0) out->status = status;
    qw_sync(g);
    return status;
}

// Starts a stream again at round 0 (its rows are rewritten as rounds arrive).
QW_DEV void qfwd_stream_reset(const QwGroup& g, QfwdStreamState* st) {
    if (g.tid == 0) {
        st->next_round = 0;
        st->window_start = 0;
        st->finished = 0;
    }
    qw_sync(g);
}

#if !defined(QFWD_WINDOW_HOST) && !defined(QFWD_WINDOW_NO_BATCH)
// The batch kernel: the block's groups of p.group_threads threads (32: a warp a window)
// serve streams blockIdx.x * groups + group, then every gridDim.x * groups further; each
// pushes p.rounds rounds (from p.first_round) and, when p.finish, its final round; commits
// and refusals go to its slice of p.commits, their number to p.counts, its windows'
// decode cycles to p.cycles. With p.cached, dynamic shared memory starts with the block's
// copy of the bulk tables; the groups' scratch follows it (their exact-matching tables at
// p.dp) unless p.scratch is global.
extern "C" __global__ void qfwd_window_batch(const QfwdWindowBatch p) {
    extern __shared__ u32 qw_shared[];
    const QfwdStreamModel& m = *(const QfwdStreamModel*)p.model;
    const u32 groups = blockDim.x / p.group_threads, group = threadIdx.x / p.group_threads;
    u32* cache = p.cached ? qw_shared : 0;
    if (cache) {
        qfwd_window_cache_fill(threadIdx.x, blockDim.x, m, cache);
        __syncthreads();
    }
    const u64 slot = (u64)blockIdx.x * groups + group;
    u32* dp = p.scratch ? 0 : (u32*)p.dp + slot * (m.scratch_words - m.scratch_hot_words);
    const QwGroup g = {threadIdx.x % p.group_threads, p.group_threads, 1, cache, dp};
    u32* scratch = p.scratch ? (u32*)p.scratch + slot * m.scratch_words
                             : qw_shared + (cache ? m.cache_words : 0) + group * m.scratch_hot_words;
    qfwd_stream_scratch_init(g, m, scratch);
    const u32 row_words = m.rounds_per_window * m.row_words;
    const u32 inputs = p.rounds + p.finish;
    for (u64 i = slot; i < p.streams; i += (u64)gridDim.x * groups) {
        QfwdStreamState* st = (QfwdStreamState*)p.states + i;
        u32* rows = (u32*)p.rows + i * row_words;
        QfwdCommit* out = (QfwdCommit*)p.commits + i * p.commits_per_stream;
        const u8* events = (const u8*)p.events + i * inputs * m.round_bytes;
        u64 cycles = 0;
        u32 count = qfwd_stream_push_rounds(g, m, st, rows, p.first_round, events, p.rounds, scratch,
                                            out, p.commits_per_stream, 0, &cycles);
        if (p.finish) {
            QfwdCommit* slot_out = out + (count < p.commits_per_stream ? count : p.commits_per_stream - 1);
            const u8* ev = events + (u64)p.rounds * m.round_bytes;
            const u64 t = clock64();
            if (qfwd_stream_finish(g, m, st, rows, ev, scratch, slot_out) != QFWD_STREAM_NO_COMMIT) count++;
            cycles += clock64() - t;
        }
        if (g.tid == 0) {
            ((u32*)p.counts)[i] = count;
            if (p.cycles) ((u64*)p.cycles)[i] += cycles;
        }
    }
}
#endif

#endif  // QFWD_WINDOW_CU

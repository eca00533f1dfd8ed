// qfwd device code: the sliding-window stream decoder (docs/streaming.md), giving the same
// commits as the CPU's decode/src/window (StreamDecoder; the window decoder specified on
// sets in decode/src/window/uf.rs).
//
// ---- Shape: a group of threads per window, working on lists -------------------------------
// One window is decoded by a *group*: the threads of a block, or some whole warps of one
// (QwGroup: the thread's index in the group, the group's size, a named barrier of its own).
// Every step of the specification is a pass of the group over a *list* between barriers:
// the cluster vertices (each with 2^degree_shift items, one per adjacency slot), the
// round's candidate edges, the full edges. The lists hold what the clusters touch, not
// the window, so a pass costs about the same at d = 15 as at d = 5 when the defects are
// few. Many windows decode at once as many groups.
//
// ---- Data ------------------------------------------------------------------------------
// The model (read-only, global memory, src/gpu/window.rs packs it): a QfwdStreamModel and a
// u32 blob holding its window graphs (QfwdWindowGraph) and the kept slots. A stream: a
// QfwdStreamState and a ring of W rows, round r in row r % W, each row the round's
// kept-slot events; the carried events of a commit are XORed into the row of their round.
// A group's scratch (QFWD_SCR_*, in shared memory or a global area) holds per-vertex and
// per-edge arrays that are *clean* between windows (qfwd_stream_scratch_init once, then
// every window resets what it touched), the lists, and QFWD_WINDOW_SCALARS scalars.
//
// ---- The steps (decode/src/window/uf.rs) --------------------------------------------------
// Clusters are kept *compressed*: after every round, parent[v] is v's root (the cluster's
// least vertex) or NONE, and flags[root] its parity and boundary bit.
//   1. Defects: the set bits of the window's rows, one item per row word.
//   2. Growth rounds, three passes each: (a) the cluster vertices' edges: growing ones are
//      listed once (from the lower end when both ends are active) with their k, and the
//      least need goes to a scalar (atomicMin; the first round's in step 1's pass); (b)
//      candidates grow by k * delta; full ones are listed, their ends join (CAS from
//      NONE, listed) and their clusters merge lock-free: the larger root is hooked under
//      the smaller with a CAS, retried until both finds agree, so every root is its
//      cluster's least vertex whatever the order;
//      (c) vertices: compress; parity and boundary into the roots' flags in the *other*
//      flag buffer (cleared two rounds before), so no pass is needed to clear them.
//   2'. Regions of few defects matched exactly (window/match.cuh); the regions, the
//      components of the full edges between detectors, merge in (b) as their edges fill.
//   3. Forest, two passes per level: full edges offer themselves to unreached ends
//      (atomicMin: the least edge wins); vertices with an offer join the next level.
//   4. Peel, one pass per level from the deepest.
//   5. Commit: the correction's edges below the commit round give the flips; those that
//      cross into the commit round flip that round's event in the ring. The same pass
//      puts back the clean values of what it reads, the boundary and the grown edges.
// Every choice is a least index or an order-free count, so the commits are the CPU's.
//
// Entry points: qfwd_stream_scratch_init, qfwd_stream_push_rounds, qfwd_stream_finish and
// qfwd_stream_reset (group functions: every thread of the group calls them with the same
// arguments; usable from a persistent kernel, which `#include "window.cu"`s this file, with
// QFWD_WINDOW_NO_BATCH defined to leave the batch kernel out), and the batch kernel
// qfwd_window_batch (tests, benchmarks).
//
// Built by NVRTC (src/gpu/nvrtc.rs; `qfwd_abi.h` is the header src/abi.rs generates), and
// by g++ for the host check (tests/window_host.rs), which defines QFWD_WINDOW_HOST and the
// platform layer below (barriers, atomics, the warp's ballot) for std::thread groups: the
// same code runs on both.
#ifndef QFWD_WINDOW_CU
#define QFWD_WINDOW_CU

#ifndef QFWD_WINDOW_HOST
#include "qfwd_abi.h"

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short u16;
typedef unsigned char u8;

#define QW_DEV __device__ __forceinline__

// The threads that decode one window together: `size` (a multiple of 32) threads, this
// one `tid`, synchronised by named barrier `barrier` (1..15; 0 is __syncthreads'); a group
// of one warp syncs as a warp.
struct QwGroup {
    u32 tid;
    u32 size;
    u32 barrier;
};

QW_DEV void qw_sync(const QwGroup& g) {
    if (g.size == 32) __syncwarp();
    else asm volatile("bar.sync %0, %1;" ::"r"(g.barrier), "r"(g.size) : "memory");
}
QW_DEV u32 qw_ld(const u32* p) { return *(const volatile u32*)p; }
QW_DEV void qw_st(u32* p, u32 v) { *(volatile u32*)p = v; }
// A model word: in global memory, or in the scratch's copy of the bulk graph (shared).
QW_DEV u32 qw_ro(const u32* p) { return *p; }
QW_DEV u32 qw_cas(u32* p, u32 cmp, u32 v) { return atomicCAS(p, cmp, v); }
QW_DEV void qw_min(u32* p, u32 v) { atomicMin(p, v); }
QW_DEV void qw_xor(u32* p, u32 v) { atomicXor(p, v); }
QW_DEV u32 qw_or(u32* p, u32 v) { return atomicOr(p, v); }
QW_DEV u32 qw_add(u32* p, u32 v) { return atomicAdd(p, v); }
QW_DEV u32 qw_popc(u32 x) { return __popc(x); }
QW_DEV u32 qw_ctz(u32 x) { return __ffs(x) - 1; }
// The predicates of the 32 lanes of the calling thread's warp, lane i's as bit i (every
// lane calls it).
QW_DEV u32 qw_ballot(const QwGroup&, u32 pred) { return __ballot_sync(0xFFFFFFFFu, pred); }
#endif

// Hooks around one window's decode: nothing on the device; the host check counts the
// barriers a window takes with them (tests/window_host.rs, `window_barriers`).
#ifndef QW_WINDOW_BEGIN
#define QW_WINDOW_BEGIN(g)
#define QW_WINDOW_END(g)
#endif

#define QW_NONE QFWD_WINDOW_NONE
#define QW_MANY (QFWD_WINDOW_NONE - 1)  // "more than one", where NONE means "none"
#define QW_ODD QFWD_WINDOW_ODD
#define QW_BOUNDARY QFWD_WINDOW_BOUNDARY
// Scalars at the end of the scratch (zeroed at the start of every window).
#define QW_SC_COUNT 0u  // defects not yet resolved by the matching
#define QW_SC_DELTA 1u
#define QW_SC_NFULL 2u
#define QW_SC_MORE 3u  // and 4: one per level parity
#define QW_SC_FLIPS_LO 5u
#define QW_SC_FLIPS_HI 6u
#define QW_SC_LARGE 7u  // a region of three members or more was found (window/match.cuh)
#define QW_SC_NREG 8u
#define QW_SC_CHANGED 12u  // and 13, 14: one per pass, in turn
#define QW_SC_NVERTS 16u
#define QW_SC_NTOUCHED 17u
#define QW_SC_NCAND 18u
#define QW_SC_NMARKS 19u
// 9-11, 15 and 20: the matching's batch (window/match.cuh).

// A window graph's arrays.
struct QwGraph {
    u32 n;  // detectors; vertex n is the boundary
    u32 edges;
    u32 rounds;
    u32 commit;
    const u32* adj_offset;
    const u32* ends;
    const u32* weight;
    const u32* obs;
    const u32* adj_pairs;  // {edge, other end} per CSR entry
    const u32* bedge;      // per detector: its boundary edge, or NONE
};

// Graph `index`'s arrays: in the scratch's copy when it is the cached one.
QW_DEV QwGraph qw_graph(const QfwdStreamModel& m, u32 index, const u32* scratch) {
    const u32* blob = (const u32*)m.data;
    const QfwdWindowGraph* d = (const QfwdWindowGraph*)(blob + m.graphs) + index;
    // Word offsets from `blob`, or (the cached graph) from its copy's first word.
    u32 from = 0;
    if (m.cache_words != 0 && index == m.cache_graph) {
        blob = scratch + m.scratch[QFWD_SCR_CACHE];
        from = m.cache_from;
    }
    QwGraph g;
    g.n = d->vertices;
    g.edges = d->edges;
    g.rounds = d->rounds;
    g.commit = d->commit_rounds;
    g.adj_offset = blob + (d->adj_offset - from);
    g.ends = blob + (d->ends - from);
    g.weight = blob + (d->weight - from);
    g.obs = blob + (d->obs - from);
    g.adj_pairs = blob + (d->adj_pairs - from);
    g.bedge = blob + (d->boundary_edge - from);
    return g;
}

// A group's working memory, carved from `base` (m.scratch_words words) where the model's
// scratch offsets say (src/gpu/window.rs `scratch_layout`; QFWD_SCR_* in src/abi.rs).
struct QwScratch {
    u32* parent;
    u32* flags;  // the flag buffer of the current growth round
    u32* flags_next;
    u32* defect;
    u32* level;
    u32* pedge;
    u32* region;
    u32* local;
    u32* rdef;
    u32* rmem;
    u32* rlist;
    u32* verts;    // cluster vertices (the boundary excluded)
    u16* growth;  // at most a weight, and weights fit 16 bits
    u32* mark;     // per edge: bit 0 in the matching's correction, bit 1 listed in marks
    u32* touched;  // edges grown at all
    u32* cand;     // the round's growing edges (e | (k - 1) << 31)
    u32* marks;    // the edges the matching marked (the candidates' space, after growth)
    u32* full;
    u32* pool;   // the matching's batch regions' arrays (window/match.cuh)
    u32* table;  // their entries
    u32* sc;       // this window's scalars: one of two banks, by the bank word
    u32* sc_next;  // the other bank: the next window's, cleaned during this one
    u32* bank;     // which bank this window uses (0 or 1)
};

QW_DEV QwScratch qw_scratch(const QfwdStreamModel& m, u32* base) {
    QwScratch s;
    s.parent = base + m.scratch[QFWD_SCR_PARENT];
    s.flags = base + m.scratch[QFWD_SCR_FLAGS];
    s.flags_next = base + m.scratch[QFWD_SCR_FLAGS_NEXT];
    s.defect = base + m.scratch[QFWD_SCR_DEFECT];
    s.level = base + m.scratch[QFWD_SCR_LEVEL];
    s.pedge = base + m.scratch[QFWD_SCR_PEDGE];
    s.region = base + m.scratch[QFWD_SCR_REGION];
    s.local = base + m.scratch[QFWD_SCR_LOCAL];
    s.rdef = base + m.scratch[QFWD_SCR_RDEF];
    s.rmem = base + m.scratch[QFWD_SCR_RMEM];
    s.rlist = base + m.scratch[QFWD_SCR_RLIST];
    s.verts = base + m.scratch[QFWD_SCR_VERTS];
    s.growth = (u16*)(base + m.scratch[QFWD_SCR_GROWTH]);
    s.mark = base + m.scratch[QFWD_SCR_MARK];
    s.touched = base + m.scratch[QFWD_SCR_TOUCHED];
    s.cand = base + m.scratch[QFWD_SCR_CAND];
    s.marks = s.cand;
    s.full = base + m.scratch[QFWD_SCR_FULL];
    s.pool = base + m.scratch[QFWD_SCR_POOL];
    s.table = base + m.scratch[QFWD_SCR_TABLE];
    u32* scalars = base + m.scratch[QFWD_SCR_SCALARS];
    s.bank = scalars + 2 * QFWD_WINDOW_SCALARS;
    const u32 b = qw_ld(s.bank) & 1u;
    s.sc = scalars + b * QFWD_WINDOW_SCALARS;
    s.sc_next = scalars + (b ^ 1u) * QFWD_WINDOW_SCALARS;
    return s;
}

QW_DEV bool qw_active(const u32* flags, u32 r) {
    return r != QW_NONE && (flags[r] & (QW_ODD | QW_BOUNDARY)) == QW_ODD;
}

QW_DEV u32 qw_find(u32* parent, u32 x) {
    u32 p = qw_ld(parent + x);
    while (p != x) {
        x = p;
        p = qw_ld(parent + x);
    }
    return x;
}

// Merges the clusters of a and b (both in clusters): the larger root goes under the
// smaller, by CAS, until the two finds agree.
QW_DEV void qw_union(u32* parent, u32 a, u32 b) {
    for (;;) {
        const u32 ra = qw_find(parent, a), rb = qw_find(parent, b);
        if (ra == rb) return;
        const u32 lo = ra < rb ? ra : rb, hi = ra < rb ? rb : ra;
        if (qw_cas(parent + hi, hi, lo) == hi) return;
    }
}

// Vertex x joins a cluster of its own unless it is in one; a newcomer is listed.
QW_DEV void qw_join(const QwScratch& s, u32 x) {
    if (qw_cas(s.parent + x, QW_NONE, x) == QW_NONE) s.verts[qw_add(s.sc + QW_SC_NVERTS, 1)] = x;
}

// Puts edge e in the matching's correction once more (mod 2), listing it the first time.
QW_DEV void qw_toggle(const QwScratch& s, u32 e) {
    if (!(qw_or(s.mark + e, 2u) & 2u)) s.marks[qw_add(s.sc + QW_SC_NMARKS, 1)] = e;
    qw_xor(s.mark + e, 1u);
}

// Vertex v's clean values in every per-vertex array.
QW_DEV void qw_clean_vertex(const QwScratch& s, u32 v) {
    s.parent[v] = QW_NONE;
    s.flags[v] = 0;
    s.flags_next[v] = 0;
    s.defect[v] = 0;
    s.level[v] = QW_NONE;
    s.pedge[v] = QW_NONE;
    s.region[v] = v;
    s.local[v] = QW_NONE;
    s.rdef[v] = 0;
    s.rmem[v] = 0;
}

// A bank of scalars as a window starts with them.
QW_DEV void qw_clean_scalars(u32* sc) {
    for (u32 i = 0; i < QFWD_WINDOW_SCALARS; i++) sc[i] = 0;
    sc[QW_SC_DELTA] = QW_NONE;
}

// The clean values of every per-vertex and per-edge array, once per group and scratch
// (each window resets what it touches), both banks of scalars, and the copy of the bulk
// graph.
QW_DEV void qfwd_stream_scratch_init(const QwGroup& g, const QfwdStreamModel& m, u32* scratch) {
    QwScratch s = qw_scratch(m, scratch);
    for (u32 v = g.tid; v <= m.max_vertices; v += g.size) qw_clean_vertex(s, v);
    for (u32 e = g.tid; e < m.max_edges; e += g.size) {
        s.growth[e] = 0;
        s.mark[e] = 0;
    }
    const u32* blob = (const u32*)m.data + m.cache_from;
    u32* cache = scratch + m.scratch[QFWD_SCR_CACHE];
    for (u32 i = g.tid; i < m.cache_words; i += g.size) cache[i] = blob[i];
    if (g.tid == 0) {
        *s.bank = 0;
        qw_clean_scalars(s.sc);
        qw_clean_scalars(s.sc_next);
    }
    qw_sync(g);
}

// The rounds a run just pushed that are not in the ring yet: from round `from` on, their
// events (every slot, bit-packed, round_bytes apart) at `events`. The window's decode
// reads them from there and stores their rows (step 1), so the decode needs no barrier
// between the run's stores and its reads. `from` = QW_NO_ROUND: none.
struct QwFresh {
    u64 from;
    const u8* events;
};
#define QW_NO_ROUND 0xFFFFFFFFFFFFFFFFull

// Kept slot k's event in fresh round `round`.
QW_DEV u32 qw_fresh_bit(const QfwdStreamModel& m, const QwFresh& f, u64 round, u32 k) {
    const u32 slot = ((const u32*)m.data + m.kept_slots)[k];
    const u8* ev = f.events + (round - f.from) * m.round_bytes;
    return (ev[slot / 8] >> (slot % 8)) & 1u;
}

// Whether detector y has an event in the window starting at round `start`.
QW_DEV bool qw_event(const QfwdStreamModel& m, const u32* rows, u64 start, const QwFresh& f,
                     u32 y) {
    const u32 j = y / m.slots, k = y % m.slots;
    if (start + j >= f.from) return qw_fresh_bit(m, f, start + j, k);
    const u32 word = rows[(u32)((start + j) % m.rounds_per_window) * m.row_words + k / 32];
    return (word >> (k % 32)) & 1u;
}

// Step 2a of the first growth round for defect x, done as x is listed: every cluster is
// then a lone defect, so a neighbour is active exactly when it has an event, which the
// rows (or the fresh rounds' events) say before any other defect is listed. Returns the
// least need.
QW_DEV u32 qw_first_candidates(const QfwdStreamModel& m, const QwGraph& G, const u32* rows,
                               u64 start, const QwFresh& f, const QwScratch& s, u32 x) {
    u32 least = QW_NONE;
    for (u32 o = qw_ro(G.adj_offset + x); o < qw_ro(G.adj_offset + x + 1); o++) {
        const u32 e = qw_ro(G.adj_pairs + 2 * o), y = qw_ro(G.adj_pairs + 2 * o + 1);
        if (y == x) continue;
        u32 k = 1;
        if (y != G.n && qw_event(m, rows, start, f, y)) {
            // Both ends active: listed once, from the lower end.
            if (y < x) continue;
            k = 2;
        }
        const u32 need = (qw_ro(G.weight + e) + k - 1) / k;
        least = need < least ? need : least;
        s.cand[qw_add(s.sc + QW_SC_NCAND, 1)] = e | (k - 1) << 31;
    }
    return least;
}

// Detector v of the window, if it has edges, made a defect and listed with its first
// growth round's candidates; the least need into `least`.
QW_DEV void qw_list_defect(const QfwdStreamModel& m, const QwGraph& G, const u32* rows,
                           u64 start, const QwFresh& f, const QwScratch& s, u32 v, u32* least) {
    if (qw_ro(G.adj_offset + v + 1) == qw_ro(G.adj_offset + v)) return;
    s.defect[v] = 1;
    s.parent[v] = v;
    s.flags[v] = QW_ODD;
    s.verts[qw_add(s.sc + QW_SC_NVERTS, 1)] = v;
    const u32 need = qw_first_candidates(m, G, rows, start, f, s, v);
    *least = need < *least ? need : *least;
}

// Step 1: the window's defects (vertices without edges ignored), listed, with the first
// growth round's candidates. Returns their number. Each word of the window's rows is
// read from the ring, or built from a fresh round's events and stored into the ring; no
// barrier comes before, since the window's scalars were cleaned during the window before
// (two banks: after this pass's barrier, thread 0 cleans the other bank, whose last
// readers are past it, and makes it the next window's).
QW_DEV u32 qw_defects(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G, u32* rows,
                      u64 start, const QwFresh& f, const QwScratch& s) {
    const u32 n = G.n, K = m.slots, W = m.rounds_per_window, RW = m.row_words;
    if (g.tid == 0) {
        s.parent[n] = n;
        s.flags[n] = QW_BOUNDARY;
    }
    // Every fresh round's row is stored, past the graph's rounds too.
    u32 rounds = (n + K - 1) / K;
    if (f.from < start + W && rounds < W) rounds = W;
    const u32 words = rounds * RW;
    u32 least = QW_NONE;
    // The ring's words a thread each; the fresh rounds' a warp each (one ballot), a lane a
    // bit. Every lane of a warp runs the same iterations of the second loop.
    const u32 first_fresh =
        f.from <= start ? 0u : (f.from - start < rounds ? (u32)(f.from - start) : rounds);
    for (u32 t = g.tid; t < first_fresh * RW; t += g.size) {
        const u32 j = t / RW, wi = t % RW;
        u32 bits = rows[(u32)((start + j) % W) * RW + wi];
        while (bits) {
            const u32 k = wi * 32 + qw_ctz(bits), v = j * K + k;
            bits &= bits - 1;
            if (k < K && v < n) qw_list_defect(m, G, rows, start, f, s, v, &least);
        }
    }
    const u32 lane = g.tid % 32;
    for (u32 t = first_fresh * RW + g.tid / 32; t < words; t += g.size / 32) {
        const u32 j = t / RW, wi = t % RW, k = wi * 32 + lane, v = j * K + k;
        const u32 bits = qw_ballot(g, k < K ? qw_fresh_bit(m, f, start + j, k) : 0u);
        if (lane == 0) rows[(u32)((start + j) % W) * RW + wi] = bits;
        if (((bits >> lane) & 1u) && k < K && v < n) qw_list_defect(m, G, rows, start, f, s, v, &least);
    }
    if (least != QW_NONE) qw_min(s.sc + QW_SC_DELTA, least);
    qw_sync(g);
    const u32 defects = s.sc[QW_SC_NVERTS];
    if (g.tid == 0) {
        s.sc[QW_SC_COUNT] = defects;
        qw_clean_scalars(s.sc_next);
        *s.bank ^= 1u;
    }
    return defects;
}

// Step 2a: lists the growing edges of the cluster vertices with their k, the least need
// into the delta scalar.
QW_DEV void qw_candidates(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G,
                          const QwScratch& s, const u32* flags) {
    const u32 nverts = s.sc[QW_SC_NVERTS], shift = m.degree_shift;
    u32 least = QW_NONE;
    for (u32 t = g.tid; t < (nverts << shift); t += g.size) {
        const u32 x = s.verts[t >> shift], rx = s.parent[x];
        if (!qw_active(flags, rx)) continue;
        const u32 o = qw_ro(G.adj_offset + x) + (t & ((1u << shift) - 1));
        if (o >= qw_ro(G.adj_offset + x + 1)) continue;
        const u32 e = qw_ro(G.adj_pairs + 2 * o), y = qw_ro(G.adj_pairs + 2 * o + 1);
        const u32 w = qw_ro(G.weight + e), grown = s.growth[e];
        if (grown == w) continue;
        const u32 ry = s.parent[y];
        if (ry == rx) continue;
        u32 k = 1;
        if (qw_active(flags, ry)) {
            // Both ends active: listed once, from the lower end.
            if (y < x) continue;
            k = 2;
        }
        const u32 need = (w - grown + k - 1) / k;
        least = need < least ? need : least;
        s.cand[qw_add(s.sc + QW_SC_NCAND, 1)] = e | (k - 1) << 31;
    }
    if (least != QW_NONE) qw_min(s.sc + QW_SC_DELTA, least);
}

// Step 2b: the candidates grow by k * delta; the full ones are listed, their ends join
// and their clusters merge, and so do their regions (step 2': the components of the full
// edges between detectors, by a union-find of their own whose clean state is every
// vertex its own region), so the matching needs no pass to build them.
QW_DEV void qw_fill(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G, const QwScratch& s,
                    u32 delta) {
    const u32 ncand = s.sc[QW_SC_NCAND];
    for (u32 c = g.tid; c < ncand; c += g.size) {
        const u32 e = s.cand[c] & 0x7FFFFFFFu, k = (s.cand[c] >> 31) + 1;
        const u32 w = qw_ro(G.weight + e), grown = s.growth[e];
        if (grown == 0) s.touched[qw_add(s.sc + QW_SC_NTOUCHED, 1)] = e;
        const u32 now = grown + k * delta < w ? grown + k * delta : w;
        s.growth[e] = (u16)now;
        if (now != w) continue;
        s.full[qw_add(s.sc + QW_SC_NFULL, 1)] = e;
        const u32 u = qw_ro(G.ends + 2 * e), v = qw_ro(G.ends + 2 * e + 1);
        qw_join(s, u);
        qw_join(s, v);
        qw_union(s.parent, u, v);
        if (m.match_defects != 0 && v != G.n) qw_union(s.region, u, v);
    }
}

// Step 2c: compresses every cluster vertex (and the boundary) onto its root, and gathers
// the roots' parity and boundary bit into `next` (clean there); clears `cur` for the round
// after next.
QW_DEV void qw_settle(const QwGroup& g, const QwGraph& G, const QwScratch& s, u32* cur, u32* next) {
    const u32 nverts = s.sc[QW_SC_NVERTS];
    for (u32 i = g.tid; i <= nverts; i += g.size) {
        const u32 v = i < nverts ? s.verts[i] : G.n;
        const u32 r = qw_find(s.parent, v);
        qw_st(s.parent + v, r);
        if (s.defect[v]) qw_xor(next + r, QW_ODD);
        if (v == G.n) qw_or(next + r, QW_BOUNDARY);
        cur[v] = 0;
    }
}

// Step 2: growth rounds until no edge grows. Returns the flag buffer that holds the
// final clusters' flags.
// The first round's candidates were listed with the defects (qw_defects).
QW_DEV u32* qw_grow(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G, QwScratch& s) {
    u32 *cur = s.flags, *next = s.flags_next;
    for (;;) {
        const u32 delta = s.sc[QW_SC_DELTA];
        if (delta == QW_NONE) break;
        qw_fill(g, m, G, s, delta);
        qw_sync(g);
        qw_settle(g, G, s, cur, next);
        // Every thread read delta and the candidates' count before the first barrier.
        if (g.tid == 0) {
            s.sc[QW_SC_DELTA] = QW_NONE;
            s.sc[QW_SC_NCAND] = 0;
        }
        qw_sync(g);
        u32* t = cur;
        cur = next;
        next = t;
        qw_candidates(g, m, G, s, cur);
        qw_sync(g);
    }
    return cur;
}

#include "window/match.cuh"

QW_DEV u64 qw_commit_reset(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G,
                           u32* rows, u64 start, const QwScratch& s);

// Steps 3-5: forest, peel, then commit and reset. Returns the committed flips.
QW_DEV u64 qw_correct(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G, u32* rows,
                      u64 start, QwScratch& s, const u32* flags) {
    const u32 n = G.n;
    const u32 nverts = s.sc[QW_SC_NVERTS], nfull = s.sc[QW_SC_NFULL];
    // 3. Level 0: the boundary and the roots of clusters without it. When the matching
    // resolved every defect, there is nothing to peel: no level is built.
    const bool peel = s.sc[QW_SC_COUNT] != 0;
    if (peel) {
        for (u32 i = g.tid; i < nverts; i += g.size) {
            const u32 v = s.verts[i];
            if (s.parent[v] == v && !(flags[v] & QW_BOUNDARY)) s.level[v] = 0;
        }
        if (g.tid == 0) s.level[n] = 0;
        qw_sync(g);
    }
    u32 level = 0;
    while (peel) {
        for (u32 i = g.tid; i < nfull; i += g.size) {
            const u32 e = s.full[i];
            const u32 u = qw_ro(G.ends + 2 * e), v = qw_ro(G.ends + 2 * e + 1);
            const u32 lu = s.level[u], lv = s.level[v];
            if (lu == level && lv == QW_NONE) qw_min(s.pedge + v, e);
            else if (lv == level && lu == QW_NONE) qw_min(s.pedge + u, e);
        }
        if (g.tid == 0) s.sc[QW_SC_MORE + ((level + 1) & 1)] = 0;
        qw_sync(g);
        for (u32 i = g.tid; i < nverts; i += g.size) {
            const u32 v = s.verts[i];
            if (s.level[v] == QW_NONE && s.pedge[v] != QW_NONE) {
                s.level[v] = level + 1;
                qw_st(s.sc + QW_SC_MORE + ((level + 1) & 1), 1);
            }
        }
        qw_sync(g);
        if (!s.sc[QW_SC_MORE + ((level + 1) & 1)]) break;
        level++;
    }
    // 4. Peel, deepest level first.
    for (u32 l = level; l >= 1; l--) {
        for (u32 i = g.tid; i < nverts; i += g.size) {
            const u32 v = s.verts[i];
            if (s.level[v] == l && qw_ld(s.defect + v) == 1) {
                const u32 e = s.pedge[v];
                s.defect[v] = 2;
                const u32 x = qw_ro(G.ends + 2 * e) ^ qw_ro(G.ends + 2 * e + 1) ^ v;
                if (x != n) qw_xor(s.defect + x, 1);
            }
        }
        qw_sync(g);
    }
    return qw_commit_reset(g, m, G, rows, start, s);
}

// Step 5, and the window's reset, in one pass: commit the edges below the commit round
// and carry those that cross it (the correction: the peeled vertices' parent edges, and
// the matching's marked edges), each item cleaned by the thread that reads it (no item
// reads another's entries), with the boundary and the edges grown. Returns the flips.
QW_DEV u64 qw_commit_reset(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G,
                           u32* rows, u64 start, const QwScratch& s) {
    const u32 n = G.n, K = m.slots, W = m.rounds_per_window, RW = m.row_words;
    const u32 nverts = s.sc[QW_SC_NVERTS], ntouched = s.sc[QW_SC_NTOUCHED];
    const u32 items = nverts + 1 + ntouched + s.sc[QW_SC_NMARKS];
    u32 lo = 0, hi = 0;
    for (u32 i = g.tid; i < items; i += g.size) {
        u32 e = QW_NONE;
        if (i < nverts) {
            const u32 v = s.verts[i];
            if (s.defect[v] == 2) e = s.pedge[v];
            qw_clean_vertex(s, v);
        } else if (i == nverts) {
            qw_clean_vertex(s, n);
        } else if (i <= nverts + ntouched) {
            s.growth[s.touched[i - nverts - 1]] = 0;
        } else {
            const u32 f = s.marks[i - nverts - 1 - ntouched];
            if (s.mark[f] & 1u) e = f;
            s.mark[f] = 0;
        }
        if (e == QW_NONE) continue;
        const u32 a = qw_ro(G.ends + 2 * e), b = qw_ro(G.ends + 2 * e + 1);
        if (a / K >= G.commit) continue;
        lo ^= qw_ro(G.obs + 2 * e);
        hi ^= qw_ro(G.obs + 2 * e + 1);
        if (b != n && b / K >= G.commit) {
            const u32 j = b / K, k = b % K;
            const u32 row = (u32)((start + j) % W);
            qw_xor(rows + row * RW + k / 32, 1u << (k % 32));
        }
    }
    if (lo) qw_xor(s.sc + QW_SC_FLIPS_LO, lo);
    if (hi) qw_xor(s.sc + QW_SC_FLIPS_HI, hi);
    qw_sync(g);
    return (u64)s.sc[QW_SC_FLIPS_LO] | ((u64)s.sc[QW_SC_FLIPS_HI] << 32);
}

// Puts back the clean values of everything a window without defects touched (the
// boundary; a window with defects is reset as it commits, qw_commit_reset).
QW_DEV void qw_reset(const QwGroup& g, const QwGraph& G, const QwScratch& s) {
    const u32 nverts = s.sc[QW_SC_NVERTS];
    for (u32 i = g.tid; i <= nverts; i += g.size) qw_clean_vertex(s, i < nverts ? s.verts[i] : G.n);
    for (u32 i = g.tid; i < s.sc[QW_SC_NTOUCHED]; i += g.size) s.growth[s.touched[i]] = 0;
    for (u32 i = g.tid; i < s.sc[QW_SC_NMARKS]; i += g.size) s.mark[s.marks[i]] = 0;
    qw_sync(g);
}

// Decodes the window of graph `index` starting at round `start`: its committed flips, and
// the carried events XORed into the ring.
QW_DEV u64 qw_decode_window(const QwGroup& g, const QfwdStreamModel& m, u32 index, u32* rows,
                            u64 start, const QwFresh& fresh, u32* scratch) {
    const QwGraph G = qw_graph(m, index, scratch);
    QwScratch s = qw_scratch(m, scratch);
    u64 flips = 0;
    QW_WINDOW_BEGIN(g);
    if (qw_defects(g, m, G, rows, start, fresh, s) != 0) {
        const u32* flags = qw_grow(g, m, G, s);
        qw_match_regions(g, m, G, s);
        flips = qw_correct(g, m, G, rows, start, s, flags);
    } else {
        qw_reset(g, G, s);
    }
    QW_WINDOW_END(g);
    return flips;
}

// Stores `n` rounds' events (every slot, bit-packed; round_bytes apart) as the kept slots'
// rows of rounds `first` .. `first + n`, all in one pass: each row word is one warp's
// ballot over 32 kept slots, and the rounds' rows are distinct (a run between two windows
// is at most W rounds). No barrier: the rows stored here are read after a later one (the
// run's last, or the finish's).
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

// Rounds first_round .. first_round + n of a stream (events: n rounds of round_bytes, every
// slot bit-packed). Each answer (a commit, or why a round was refused) goes to
// answers[count] while count < capacity (thread 0 writes); returns count plus the answers.
// The state is read once and written back at the end. The accepted rounds between two
// windows form a run: a run that completes a window goes to the decode as its fresh
// rounds (their rows stored as the window's first pass reads them, with no barrier
// between), and one that ends with the call is stored in one pass. `window_cycles`
// (thread 0's, may be null) adds the cycles of the windows' decodes. A group function.
QW_DEV u32 qfwd_stream_push_rounds(const QwGroup& g, const QfwdStreamModel& m,
                                   QfwdStreamState* st, u32* rows, u64 first_round,
                                   const u8* events, u32 n, u32* scratch, QfwdCommit* answers,
                                   u32 capacity, u32 count, u64* window_cycles) {
#ifdef QFWD_WINDOW_HOST
    (void)window_cycles;
#endif
    u64 next = st->next_round, start = st->window_start;
    const bool finished = st->finished != 0;
    // The accepted rounds whose rows are not stored yet: inputs run_from .. run_from + run,
    // rounds run_round .. run_round + run. The inputs are consecutive rounds, so once one is
    // accepted every later one is: a run has no refused input inside it.
    u32 run_from = 0, run = 0;
    u64 run_round = next;
    bool decoded = false;
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
                // The run's rows are stored by the decode, which reads them first.
                const QwFresh fresh = {run_round, events + (u64)run_from * m.round_bytes};
                run = 0;
#ifndef QFWD_WINDOW_HOST
                const u64 t = clock64();
#endif
                c.flips = qw_decode_window(g, m, start == 0 ? 0u : 1u, rows, start, fresh, scratch);
#ifndef QFWD_WINDOW_HOST
                if (g.tid == 0 && window_cycles) *window_cycles += clock64() - t;
#endif
                c.rounds = m.commit_rounds;
                c.status = QFWD_STREAM_COMMIT;
                start += m.commit_rounds;
                decoded = true;
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
    // new state would refuse every round as repeated): a decode's barriers see to it, and
    // a call that decoded no window needs one here.
    if (!decoded) qw_sync(g);
    if (g.tid == 0) {
        st->next_round = next;
        st->window_start = start;
    }
    // The state and the rows are written before any thread reads them again.
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
        const QwFresh none = {QW_NO_ROUND, events};
        const u64 flips = qw_decode_window(g, m, index, rows, start, none, scratch);
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
// The batch kernel: block b serves streams b, b + gridDim.x, ...; each pushes p.rounds
// rounds (from p.first_round) and, when p.finish, its final round; commits and refusals
// go to its slice of p.commits, their number to p.counts.
extern "C" __global__ void qfwd_window_batch(const QfwdWindowBatch p) {
    extern __shared__ u32 qw_shared[];
    const QfwdStreamModel& m = *(const QfwdStreamModel*)p.model;
    const QwGroup g = {threadIdx.x, blockDim.x, 1};
    u32* scratch = p.scratch ? (u32*)p.scratch + (u64)blockIdx.x * m.scratch_words : qw_shared;
    qfwd_stream_scratch_init(g, m, scratch);
    const u32 row_words = m.rounds_per_window * m.row_words;
    const u32 inputs = p.rounds + p.finish;
    for (u32 i = blockIdx.x; i < p.streams; i += gridDim.x) {
        QfwdStreamState* st = (QfwdStreamState*)p.states + i;
        u32* rows = (u32*)p.rows + (u64)i * row_words;
        QfwdCommit* out = (QfwdCommit*)p.commits + (u64)i * p.commits_per_stream;
        const u8* events = (const u8*)p.events + (u64)i * inputs * m.round_bytes;
        u32 count = qfwd_stream_push_rounds(g, m, st, rows, p.first_round, events, p.rounds, scratch,
                                            out, p.commits_per_stream, 0, 0);
        if (p.finish) {
            QfwdCommit* slot = out + (count < p.commits_per_stream ? count : p.commits_per_stream - 1);
            const u8* ev = events + (u64)p.rounds * m.round_bytes;
            if (qfwd_stream_finish(g, m, st, rows, ev, scratch, slot) != QFWD_STREAM_NO_COMMIT) count++;
        }
        if (g.tid == 0) ((u32*)p.counts)[i] = count;
    }
}
#endif

#endif  // QFWD_WINDOW_CU

// qfwd device code: the sliding-window stream decoder (docs/streaming.md), giving the same
// commits as the CPU's decode/src/window (StreamDecoder; the window decoder specified on
// sets in decode/src/window/uf.rs).
//
// ---- Shape: a group of threads per window -------------------------------------------------
// One window is decoded by a *group*: the threads of a block, or some whole warps of one
// (QwGroup: the thread's index in the group, the group's size, a named barrier of its own,
// so a persistent kernel can run several groups per block). Every step of the
// specification is a pass of the group over the window's edges or vertices, between
// barriers, so the work per thread shrinks as the group grows and the cost grows with the
// window's size divided by the group's, not with the distance. Many windows decode at once
// as many groups (the batch kernel: one block per stream, grid-stride over the streams).
//
// ---- Data ------------------------------------------------------------------------------
// The model (read-only, global memory, src/gpu/window.rs packs it): a QfwdStreamModel and a
// u32 blob holding its window graphs (QfwdWindowGraph: degrees, edge ends, weights,
// observables) and the kept slots. A stream: a QfwdStreamState and a ring of W rows, round
// r in row r % W, each row the round's kept-slot events (K bits in row_words words); the
// carried events of a commit are XORed into the row of the round they belong to.
// A group's scratch (u32 words, in shared memory or in a global area): per vertex parent,
// flags, defect, level, parent edge; per edge growth, and the list of the round's filled
// edges; QFWD_WINDOW_SCALARS scalars.
//
// ---- The steps (decode/src/window/uf.rs) --------------------------------------------------
// Clusters are kept *compressed*: after every round, parent[v] is v's root (the cluster's
// least vertex) or NONE, and flags[root] its parity and boundary bit, so an edge learns
// both its ends' clusters with two reads.
//   1. Defects: vertices over the window's rows (vertices without edges ignored).
//   2. Growth rounds, five passes each: (a) edges: the least need, atomicMin; (b) edges:
//      grow by k * delta, list the filled ones; (c) filled edges: their ends join (CAS
//      from NONE) and their clusters merge, lock-free: the larger root is hooked under the
//      smaller with a CAS, retried until both finds agree, so the root of every cluster
//      is its least vertex whatever the order; (d) vertices: compress, clear roots' flags;
//      (e) vertices: parity and boundary into the roots' flags (atomicXor / atomicOr).
//   3. Forest, two passes per level: edges: a full edge from level L to an unreached end
//      offers itself as that end's parent (atomicMin: the least edge wins); vertices: an
//      end with an offer is at level L + 1.
//   4. Peel, one pass per level from the deepest: a vertex holding a defect marks its
//      parent edge (defect = 2) and flips its parent's defect (atomicXor).
//   5. Commit: marked edges whose lower end lies below the commit round give the flips
//      (atomicXor into two scalars); those that cross into the commit round flip that
//      round's event in the ring (atomicXor).
// Every choice is a least index or an order-free count, so the commits are the CPU's.
//
// Entry points: qfwd_stream_push_round / qfwd_stream_finish / qfwd_stream_reset (group
// functions: every thread of the group calls them with the same arguments; usable from a
// persistent kernel, which `#include "window.cu"`s this file, with QFWD_WINDOW_NO_BATCH
// defined to leave the batch kernel out), and the batch kernel qfwd_window_batch (tests,
// benchmarks).
//
// Built by NVRTC (src/gpu/nvrtc.rs; `qfwd_abi.h` is the header src/abi.rs generates), and
// by g++ for the host check (tests/window_host.rs), which defines QFWD_WINDOW_HOST and the
// platform layer below for std::thread groups.
#ifndef QFWD_WINDOW_CU
#define QFWD_WINDOW_CU

#ifndef QFWD_WINDOW_HOST
#include "qfwd_abi.h"

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned char u8;

#define QW_DEV __device__ __forceinline__

// The threads that decode one window together: `size` (a multiple of 32) threads, this
// one `tid`, synchronised by named barrier `barrier` (1..15; 0 is __syncthreads').
struct QwGroup {
    u32 tid;
    u32 size;
    u32 barrier;
};

QW_DEV void qw_sync(const QwGroup& g) {
    asm volatile("bar.sync %0, %1;" ::"r"(g.barrier), "r"(g.size) : "memory");
}
QW_DEV u32 qw_ld(const u32* p) { return *(const volatile u32*)p; }
QW_DEV void qw_st(u32* p, u32 v) { *(volatile u32*)p = v; }
QW_DEV u32 qw_ro(const u32* p) { return __ldg(p); }
QW_DEV u32 qw_cas(u32* p, u32 cmp, u32 v) { return atomicCAS(p, cmp, v); }
QW_DEV void qw_min(u32* p, u32 v) { atomicMin(p, v); }
QW_DEV void qw_xor(u32* p, u32 v) { atomicXor(p, v); }
QW_DEV void qw_or(u32* p, u32 v) { atomicOr(p, v); }
QW_DEV u32 qw_add(u32* p, u32 v) { return atomicAdd(p, v); }
QW_DEV u32 qw_popc(u32 x) { return __popc(x); }
QW_DEV u32 qw_ctz(u32 x) { return __ffs(x) - 1; }
#endif

#define QW_NONE QFWD_WINDOW_NONE
// Scalars at the end of the scratch.
#define QW_SC_COUNT 0u
#define QW_SC_DELTA 1u
#define QW_SC_NFUSED 2u
#define QW_SC_MORE 3u  // and 4: one per level parity
#define QW_SC_FLIPS_LO 5u
#define QW_SC_FLIPS_HI 6u
#define QW_SC_ROUNDS 7u
#define QW_SC_NREG 8u
#define QW_SC_NMEM 9u
#define QW_SC_NDEF 10u
#define QW_SC_NRE 11u
#define QW_SC_CHANGED 12u  // and 13, 14: one per pass, in turn
#define QW_SC_NMATCH 15u

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

QW_DEV QwGraph qw_graph(const QfwdStreamModel& m, u32 index) {
    const u32* blob = (const u32*)m.data;
    const QfwdWindowGraph* d = (const QfwdWindowGraph*)(blob + m.graphs) + index;
    QwGraph g;
    g.n = d->vertices;
    g.edges = d->edges;
    g.rounds = d->rounds;
    g.commit = d->commit_rounds;
    g.adj_offset = blob + d->adj_offset;
    g.ends = blob + d->ends;
    g.weight = blob + d->weight;
    g.obs = blob + d->obs;
    g.adj_pairs = blob + d->adj_pairs;
    g.bedge = blob + d->boundary_edge;
    return g;
}

// A group's working memory, carved from `base` (m.scratch_words words) where the model's
// scratch offsets say (src/gpu/window.rs `scratch_layout`; QFWD_SCR_* in src/abi.rs).
struct QwScratch {
    u32* parent;
    u32* flags;
    u32* defect;
    u32* level;
    u32* pedge;
    u32* region;
    u32* local;
    u32* rdef;
    u32* rmem;
    u32* rlist;
    u32* growth;
    u32* fused;  // then: per edge, in the matching's correction (mod 2)
    u32* members;
    u32* defects;
    u32* dsort;
    u32* redges;
    u32* dist;
    u32* distb;
    u32* matches;
    u32* cost;
    u8* choice;
    u32* sc;
};

QW_DEV QwScratch qw_scratch(const QfwdStreamModel& m, u32* base) {
    QwScratch s;
    s.parent = base + m.scratch[QFWD_SCR_PARENT];
    s.flags = base + m.scratch[QFWD_SCR_FLAGS];
    s.defect = base + m.scratch[QFWD_SCR_DEFECT];
    s.level = base + m.scratch[QFWD_SCR_LEVEL];
    s.pedge = base + m.scratch[QFWD_SCR_PEDGE];
    s.region = base + m.scratch[QFWD_SCR_REGION];
    s.local = base + m.scratch[QFWD_SCR_LOCAL];
    s.rdef = base + m.scratch[QFWD_SCR_RDEF];
    s.rmem = base + m.scratch[QFWD_SCR_RMEM];
    s.rlist = base + m.scratch[QFWD_SCR_RLIST];
    s.growth = base + m.scratch[QFWD_SCR_GROWTH];
    s.fused = base + m.scratch[QFWD_SCR_FUSED];
    s.members = base + m.scratch[QFWD_SCR_MEMBERS];
    s.defects = base + m.scratch[QFWD_SCR_DEFECTS];
    s.dsort = base + m.scratch[QFWD_SCR_DSORT];
    s.redges = base + m.scratch[QFWD_SCR_REDGES];
    s.dist = base + m.scratch[QFWD_SCR_DIST];
    s.distb = base + m.scratch[QFWD_SCR_DISTB];
    s.matches = base + m.scratch[QFWD_SCR_MATCHES];
    s.cost = base + m.scratch[QFWD_SCR_COST];
    s.choice = (u8*)(base + m.scratch[QFWD_SCR_CHOICE]);
    s.sc = base + m.scratch[QFWD_SCR_SCALARS];
    return s;
}

// How many active ends edge e has if it grows this round (0: it does not grow). Reads the
// compressed clusters: parent[x] is x's root or NONE.
QW_DEV u32 qw_edge_k(const QwGraph& G, const QwScratch& s, u32 e) {
    const u32 w = qw_ro(G.weight + e);
    if (s.growth[e] == w) return 0;
    const u32 ru = s.parent[qw_ro(G.ends + 2 * e)], rv = s.parent[qw_ro(G.ends + 2 * e + 1)];
    if (ru == rv) return 0;
    u32 k = 0;
    if (ru != QW_NONE && (s.flags[ru] & (QFWD_WINDOW_ODD | QFWD_WINDOW_BOUNDARY)) == QFWD_WINDOW_ODD) k++;
    if (rv != QW_NONE && (s.flags[rv] & (QFWD_WINDOW_ODD | QFWD_WINDOW_BOUNDARY)) == QFWD_WINDOW_ODD) k++;
    return k;
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

// Steps 1-2. Returns the number of defects (0: nothing was grown).
QW_DEV u32 qw_grow(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G, const u32* rows,
                   u64 start, QwScratch& s) {
    const u32 n = G.n, nv = n + 1, K = m.slots, W = m.rounds_per_window, RW = m.row_words;
    for (u32 v = g.tid; v < nv; v += g.size) {
        s.parent[v] = QW_NONE;
        s.flags[v] = 0;
        s.defect[v] = 0;
        s.level[v] = QW_NONE;
        s.pedge[v] = QW_NONE;
    }
    for (u32 e = g.tid; e < G.edges; e += g.size) s.growth[e] = 0;
    if (g.tid == 0) {
        for (u32 i = 0; i < QFWD_WINDOW_SCALARS; i++) s.sc[i] = 0;
        s.sc[QW_SC_DELTA] = QW_NONE;
    }
    qw_sync(g);
    // 1. Defects.
    for (u32 v = g.tid; v < n; v += g.size) {
        const u32 j = v / K, k = v % K;
        const u32 row = (u32)((start + j) % W);
        const u32 bit = (rows[row * RW + k / 32] >> (k % 32)) & 1u;
        if (bit && qw_ro(G.adj_offset + v + 1) != qw_ro(G.adj_offset + v)) {
            s.defect[v] = 1;
            s.parent[v] = v;
            s.flags[v] = QFWD_WINDOW_ODD;
            qw_add(s.sc + QW_SC_COUNT, 1);
        }
    }
    if (g.tid == 0) {
        s.parent[n] = n;
        s.flags[n] = QFWD_WINDOW_BOUNDARY;
    }
    qw_sync(g);
    const u32 defects = s.sc[QW_SC_COUNT];
    if (defects == 0) return 0;
    // 2. Growth rounds.
    for (;;) {
        // (a) The least need.
        u32 least = QW_NONE;
        for (u32 e = g.tid; e < G.edges; e += g.size) {
            const u32 k = qw_edge_k(G, s, e);
            if (k) {
                const u32 need = (qw_ro(G.weight + e) - s.growth[e] + k - 1) / k;
                least = need < least ? need : least;
            }
        }
        if (least != QW_NONE) qw_min(s.sc + QW_SC_DELTA, least);
        qw_sync(g);
        const u32 delta = s.sc[QW_SC_DELTA];
        if (delta == QW_NONE) break;
        // (b) Grow; list the filled edges.
        for (u32 e = g.tid; e < G.edges; e += g.size) {
            const u32 k = qw_edge_k(G, s, e);
            if (k) {
                const u32 w = qw_ro(G.weight + e);
                u32 grown = s.growth[e] + k * delta;
                grown = grown < w ? grown : w;
                s.growth[e] = grown;
                if (grown == w) s.fused[qw_add(s.sc + QW_SC_NFUSED, 1)] = e;
            }
        }
        qw_sync(g);
        // (c) The filled edges' ends join; their clusters merge.
        const u32 nf = s.sc[QW_SC_NFUSED];
        for (u32 i = g.tid; i < nf; i += g.size) {
            const u32 e = s.fused[i];
            const u32 u = qw_ro(G.ends + 2 * e), v = qw_ro(G.ends + 2 * e + 1);
            qw_cas(s.parent + u, QW_NONE, u);
            qw_cas(s.parent + v, QW_NONE, v);
            qw_union(s.parent, u, v);
        }
        if (g.tid == 0) {
            s.sc[QW_SC_DELTA] = QW_NONE;
            s.sc[QW_SC_ROUNDS] += 1;
        }
        qw_sync(g);
        // (d) Compress; clear the roots' flags.
        for (u32 v = g.tid; v < nv; v += g.size) {
            if (qw_ld(s.parent + v) != QW_NONE) {
                const u32 r = qw_find(s.parent, v);
                qw_st(s.parent + v, r);
                if (r == v) s.flags[v] = 0;
            }
        }
        if (g.tid == 0) s.sc[QW_SC_NFUSED] = 0;
        qw_sync(g);
        // (e) Parity and boundary into the roots' flags.
        for (u32 v = g.tid; v < nv; v += g.size) {
            const u32 r = s.parent[v];
            if (r != QW_NONE) {
                if (s.defect[v]) qw_xor(s.flags + r, QFWD_WINDOW_ODD);
                if (v == n) qw_or(s.flags + r, QFWD_WINDOW_BOUNDARY);
            }
        }
        qw_sync(g);
    }
    return defects;
}

// ---- Step 2': exact matching in regions (decode/src/window/matching.rs) ----------------

// Matches region `R` (a root) if it is within the limits: members and defects listed
// (defects sorted), distances by Bellman-Ford passes over the region's edges, the subsets'
// costs by popcount levels, then one thread per match toggles its path.
QW_DEV void qw_match_one(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G,
                         QwScratch& s, u32 R) {
    const u32 n = G.n;
    if (g.tid == 0) {
        s.sc[QW_SC_NMEM] = 0;
        s.sc[QW_SC_NDEF] = 0;
        s.sc[QW_SC_NRE] = 0;
        s.sc[QW_SC_NMATCH] = 0;
    }
    qw_sync(g);
    for (u32 v = g.tid; v < n; v += g.size) {
        if (s.region[v] != R) continue;
        const u32 i = qw_add(s.sc + QW_SC_NMEM, 1);
        s.members[i] = v;
        s.local[v] = i;
        if (s.defect[v]) s.dsort[qw_add(s.sc + QW_SC_NDEF, 1)] = v;
    }
    for (u32 e = g.tid; e < G.edges; e += g.size) {
        const u32 u = qw_ro(G.ends + 2 * e), v = qw_ro(G.ends + 2 * e + 1);
        if (v != n && s.region[u] == R && s.region[v] == R) {
            const u32 j = qw_add(s.sc + QW_SC_NRE, 1);
            if (j < m.match_edges) s.redges[j] = e;
        }
    }
    qw_sync(g);
    const u32 k = s.sc[QW_SC_NMEM], md = s.sc[QW_SC_NDEF], nre = s.sc[QW_SC_NRE];
    bool ok = nre <= m.match_edges;
    if (ok) {
        // Defects in increasing index; distances start at infinity, 0 at each source.
        for (u32 t = g.tid; t < md; t += g.size) {
            const u32 v = s.dsort[t];
            u32 rank = 0;
            for (u32 j = 0; j < md; j++) rank += s.dsort[j] < v;
            s.defects[rank] = v;
        }
        for (u32 i = g.tid; i < md * k; i += g.size) s.dist[i] = QW_NONE;
        for (u32 a = g.tid; a < md; a += g.size) s.distb[a] = QW_NONE;
        if (g.tid == 0) {
            s.cost[0] = 0;
            s.sc[QW_SC_CHANGED] = 0;
            s.sc[QW_SC_CHANGED + 1] = 0;
            s.sc[QW_SC_CHANGED + 2] = 0;
        }
        qw_sync(g);
        for (u32 a = g.tid; a < md; a += g.size) s.dist[a * k + s.local[s.defects[a]]] = 0;
        qw_sync(g);
        // Bellman-Ford, every source at once, until a pass changes nothing. Pass p raises
        // flag p % 3 and clears flag (p + 1) % 3, last read two barriers ago.
        for (u32 pass = 0;; pass++) {
            u32* changed = s.sc + QW_SC_CHANGED + pass % 3;
            for (u32 i = g.tid; i < md * nre; i += g.size) {
                const u32 a = i / nre, e = s.redges[i % nre];
                const u32 w = qw_ro(G.weight + e);
                u32* row = s.dist + a * k;
                const u32 lu = s.local[qw_ro(G.ends + 2 * e)], lv = s.local[qw_ro(G.ends + 2 * e + 1)];
                const u32 du = qw_ld(row + lu), dv = qw_ld(row + lv);
                if (du != QW_NONE && du + w < dv) {
                    qw_min(row + lv, du + w);
                    qw_st(changed, 1);
                }
                if (dv != QW_NONE && dv + w < du) {
                    qw_min(row + lu, dv + w);
                    qw_st(changed, 1);
                }
            }
            if (g.tid == 0) s.sc[QW_SC_CHANGED + (pass + 1) % 3] = 0;
            qw_sync(g);
            if (!*changed) break;
        }
        // Boundary distances.
        for (u32 i = g.tid; i < md * k; i += g.size) {
            const u32 a = i / k, x = i % k;
            const u32 be = qw_ro(G.bedge + s.members[x]);
            const u32 d = s.dist[i];
            if (be != QW_NONE && d != QW_NONE) qw_min(s.distb + a, d + qw_ro(G.weight + be));
        }
        qw_sync(g);
        // The subsets' costs, by number of defects.
        const u32 all = (1u << md) - 1;
        for (u32 level = 1; level <= md; level++) {
            for (u32 set = g.tid; set <= all; set += g.size) {
                if ((u32)qw_popc(set) != level) continue;
                const u32 i = qw_ctz(set), rest = set & ~(1u << i);
                const u32* row = s.dist + i * k;
                u32 best = s.cost[rest], choice = md;
                best = (best == QW_NONE || s.distb[i] == QW_NONE) ? QW_NONE : best + s.distb[i];
                for (u32 r = rest; r; r &= r - 1) {
                    const u32 j = qw_ctz(r);
                    const u32 f = s.cost[rest & ~(1u << j)], d = row[s.local[s.defects[j]]];
                    const u32 c = (f == QW_NONE || d == QW_NONE) ? QW_NONE : f + d;
                    if (c < best) {
                        best = c;
                        choice = j;
                    }
                }
                s.cost[set] = best;
                s.choice[set] = (u8)choice;
            }
            qw_sync(g);
        }
        ok = s.cost[all] != QW_NONE;
        if (ok && g.tid == 0) {
            u32 nm = 0;
            for (u32 set = all; set;) {
                const u32 i = qw_ctz(set), c = s.choice[set];
                set &= ~(1u << i);
                if (c != md) set &= ~(1u << c);
                s.matches[nm++] = i | c << 8;
            }
            s.sc[QW_SC_NMATCH] = nm;
        }
        qw_sync(g);
        // One thread per match: its path, least edges first (see matching.rs).
        const u32 nm = s.sc[QW_SC_NMATCH];
        for (u32 t = g.tid; t < nm; t += g.size) {
            const u32 a = s.matches[t] & 0xFFu, c = s.matches[t] >> 8;
            const u32* row = s.dist + a * k;
            u32 at;
            if (c == md) {
                u32 best = QW_NONE;
                at = 0;
                for (u32 x = 0; x < k; x++) {
                    const u32 v = s.members[x], be = qw_ro(G.bedge + v);
                    if (be != QW_NONE && row[x] != QW_NONE &&
                        row[x] + qw_ro(G.weight + be) == s.distb[a] && v < best) {
                        best = v;
                        at = x;
                    }
                }
                // (A finite boundary distance is always attained: an invariant, kept
                // safe as on the CPU.)
                if (best == QW_NONE) continue;
                qw_xor(s.fused + qw_ro(G.bedge + best), 1);
            } else {
                at = s.local[s.defects[c]];
            }
            const u32 from = s.local[s.defects[a]];
            while (at != from) {
                const u32 y = s.members[at];
                u32 pick = QW_NONE, next = 0;
                for (u32 p = qw_ro(G.adj_offset + y); p < qw_ro(G.adj_offset + y + 1); p++) {
                    const u32 e = qw_ro(G.adj_pairs + 2 * p), x = qw_ro(G.adj_pairs + 2 * p + 1);
                    if (x == n || s.local[x] == QW_NONE) continue;
                    const u32 dx = row[s.local[x]];
                    if (dx != QW_NONE && dx + qw_ro(G.weight + e) == row[at] && e < pick) {
                        pick = e;
                        next = s.local[x];
                    }
                }
                if (pick == QW_NONE) break;  // never: exact distances have a tight edge
                qw_xor(s.fused + pick, 1);
                at = next;
            }
        }
        for (u32 t = g.tid; ok && t < md; t += g.size) s.defect[s.defects[t]] = 0;
        if (ok && g.tid == 0) s.sc[QW_SC_COUNT] -= md;
    }
    qw_sync(g);
    for (u32 i = g.tid; i < k; i += g.size) s.local[s.members[i]] = QW_NONE;
    qw_sync(g);
}

// Step 2': regions (components of full edges between detectors, least-vertex roots, by a
// second lock-free union-find), their defects, members and boundary edges counted; each
// region within the limits matched (qw_match_one, one region after another: regions are
// disjoint, so their order does not matter).
QW_DEV void qw_match_regions(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G,
                             QwScratch& s) {
    if (m.match_defects == 0) return;
    const u32 n = G.n;
    for (u32 v = g.tid; v < n; v += g.size) {
        s.region[v] = s.parent[v] != QW_NONE ? v : QW_NONE;
        s.local[v] = QW_NONE;
        s.rdef[v] = 0;
        s.rmem[v] = 0;
    }
    for (u32 e = g.tid; e < G.edges; e += g.size) s.fused[e] = 0;
    if (g.tid == 0) s.sc[QW_SC_NREG] = 0;
    qw_sync(g);
    for (u32 e = g.tid; e < G.edges; e += g.size) {
        const u32 u = qw_ro(G.ends + 2 * e), v = qw_ro(G.ends + 2 * e + 1);
        if (v != n && s.growth[e] == qw_ro(G.weight + e)) qw_union(s.region, u, v);
    }
    qw_sync(g);
    for (u32 v = g.tid; v < n; v += g.size) {
        if (qw_ld(s.region + v) != QW_NONE) qw_st(s.region + v, qw_find(s.region, v));
    }
    qw_sync(g);
    for (u32 v = g.tid; v < n; v += g.size) {
        const u32 r = s.region[v];
        if (r == QW_NONE) continue;
        qw_add(s.rmem + r, 1);
        if (s.defect[v]) qw_add(s.rdef + r, 1);
    }
    qw_sync(g);
    for (u32 v = g.tid; v < n; v += g.size) {
        if (s.region[v] == v && s.rdef[v] >= 1 && s.rdef[v] <= m.match_defects &&
            s.rmem[v] <= m.match_members) {
            s.rlist[qw_add(s.sc + QW_SC_NREG, 1)] = v;
        }
    }
    qw_sync(g);
    const u32 regions = s.sc[QW_SC_NREG];
    for (u32 i = 0; i < regions; i++) qw_match_one(g, m, G, s, s.rlist[i]);
}

// Steps 3-5: forest, peel, commit. Returns the committed flips.
QW_DEV u64 qw_correct(const QwGroup& g, const QfwdStreamModel& m, const QwGraph& G, u32* rows,
                      u64 start, QwScratch& s) {
    const u32 n = G.n, nv = n + 1, K = m.slots, W = m.rounds_per_window, RW = m.row_words;
    // 3. Level 0: the boundary and the roots of clusters without it. When the matching
    // resolved every defect, there is nothing to peel: no level is built (level stays 0).
    const bool peel = s.sc[QW_SC_COUNT] != 0;
    for (u32 v = g.tid; peel && v < n; v += g.size) {
        if (s.parent[v] == v && !(s.flags[v] & QFWD_WINDOW_BOUNDARY)) s.level[v] = 0;
    }
    if (g.tid == 0) s.level[n] = 0;
    qw_sync(g);
    u32 level = 0;
    while (peel) {
        for (u32 e = g.tid; e < G.edges; e += g.size) {
            if (s.growth[e] != qw_ro(G.weight + e)) continue;
            const u32 u = qw_ro(G.ends + 2 * e), v = qw_ro(G.ends + 2 * e + 1);
            const u32 lu = s.level[u], lv = s.level[v];
            if (lu == level && lv == QW_NONE) qw_min(s.pedge + v, e);
            else if (lv == level && lu == QW_NONE) qw_min(s.pedge + u, e);
        }
        if (g.tid == 0) s.sc[QW_SC_MORE + ((level + 1) & 1)] = 0;
        qw_sync(g);
        for (u32 v = g.tid; v < nv; v += g.size) {
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
        for (u32 v = g.tid; v < n; v += g.size) {
            if (s.level[v] == l && qw_ld(s.defect + v) == 1) {
                const u32 e = s.pedge[v];
                s.defect[v] = 2;
                const u32 x = qw_ro(G.ends + 2 * e) ^ qw_ro(G.ends + 2 * e + 1) ^ v;
                if (x != n) qw_xor(s.defect + x, 1);
            }
        }
        qw_sync(g);
    }
    // 5. Commit the edges below the commit round; carry those that cross it. The
    // correction: the peeled vertices' parent edges, and the matching's edges.
    u32 lo = 0, hi = 0;
    const u32 items = n + (m.match_defects ? G.edges : 0);
    for (u32 i = g.tid; i < items; i += g.size) {
        u32 e;
        if (i < n) {
            if (s.defect[i] != 2) continue;
            e = s.pedge[i];
        } else {
            e = i - n;
            if (!(s.fused[e] & 1u)) continue;
        }
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

// Decodes the window of graph `index` starting at round `start`: its committed flips, and
// the carried events XORed into the ring.
QW_DEV u64 qw_decode_window(const QwGroup& g, const QfwdStreamModel& m, u32 index, u32* rows,
                            u64 start, u32* scratch) {
    const QwGraph G = qw_graph(m, index);
    QwScratch s = qw_scratch(m, scratch);
    u64 flips = 0;
    if (qw_grow(g, m, G, rows, start, s) != 0) {
        qw_match_regions(g, m, G, s);
        flips = qw_correct(g, m, G, rows, start, s);
    }
    // Everyone has read the scalars before the next window rewrites them.
    qw_sync(g);
    return flips;
}

// Stores round events (every slot, bit-packed) as the kept slots' row `row`: the row
// cleared, then one thread per kept slot sets its bit (a thread reading the slots of a
// whole word in turn made every round cost a chain of dependent loads).
QW_DEV void qw_store_row(const QwGroup& g, const QfwdStreamModel& m, u32* rows, u32 row,
                         const u8* events) {
    const u32* kept = (const u32*)m.data + m.kept_slots;
    u32* to = rows + row * m.row_words;
    for (u32 wi = g.tid; wi < m.row_words; wi += g.size) qw_st(to + wi, 0);
    qw_sync(g);
    for (u32 k = g.tid; k < m.slots; k += g.size) {
        const u32 slot = qw_ro(kept + k);
        if ((events[slot / 8] >> (slot % 8)) & 1u) qw_or(to + k / 32, 1u << (k % 32));
    }
}

// Round `round` of a stream (events: every slot, bit-packed). Returns STREAM_* and, for
// STREAM_COMMIT, the commit in *out (written by thread 0). A group function.
QW_DEV int qfwd_stream_push_round(const QwGroup& g, const QfwdStreamModel& m,
                                  QfwdStreamState* st, u32* rows, u64 round, const u8* events,
                                  u32* scratch, QfwdCommit* out) {
    const u64 next = st->next_round, start = st->window_start;
    int status = QFWD_STREAM_NO_COMMIT;
    if (st->finished) status = QFWD_STREAM_FINISHED;
    else if (round < next) status = QFWD_STREAM_ROUND_REPEATED;
    else if (round > next) status = QFWD_STREAM_ROUNDS_MISSING;
    if (status == QFWD_STREAM_NO_COMMIT) {
        qw_store_row(g, m, rows, (u32)(next % m.rounds_per_window), events);
        qw_sync(g);
        if (next + 1 - start == m.rounds_per_window) {
            const u64 flips = qw_decode_window(g, m, start == 0 ? 0u : 1u, rows, start, scratch);
            if (g.tid == 0) {
                out->first_round = start;
                out->rounds = m.commit_rounds;
                out->flips = flips;
                st->window_start = start + m.commit_rounds;
            }
            status = QFWD_STREAM_COMMIT;
        }
        if (g.tid == 0) st->next_round = next + 1;
    }
    if (g.tid == 0) out->status = status;
    // The state is written before any thread reads it again.
    qw_sync(g);
    return status;
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
        qw_store_row(g, m, rows, (u32)(next % m.rounds_per_window), events);
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
// The batch kernel: block b serves streams b, b + gridDim.x, ...; each pushes p.rounds
// rounds (from p.first_round) and, when p.finish, its final round; commits and refusals
// go to its slice of p.commits, their number to p.counts.
extern "C" __global__ void qfwd_window_batch(const QfwdWindowBatch p) {
    extern __shared__ u32 qw_shared[];
    const QfwdStreamModel& m = *(const QfwdStreamModel*)p.model;
    const QwGroup g = {threadIdx.x, blockDim.x, 1};
    u32* scratch = p.scratch ? (u32*)p.scratch + (u64)blockIdx.x * m.scratch_words : qw_shared;
    const u32 row_words = m.rounds_per_window * m.row_words;
    const u32 inputs = p.rounds + p.finish;
    for (u32 i = blockIdx.x; i < p.streams; i += gridDim.x) {
        QfwdStreamState* st = (QfwdStreamState*)p.states + i;
        u32* rows = (u32*)p.rows + (u64)i * row_words;
        QfwdCommit* out = (QfwdCommit*)p.commits + (u64)i * p.commits_per_stream;
        const u8* events = (const u8*)p.events + (u64)i * inputs * m.round_bytes;
        u32 count = 0;
        for (u32 r = 0; r < inputs; r++) {
            QfwdCommit* slot = out + (count < p.commits_per_stream ? count : p.commits_per_stream - 1);
            const u8* ev = events + (u64)r * m.round_bytes;
            const int status = r < p.rounds
                ? qfwd_stream_push_round(g, m, st, rows, p.first_round + r, ev, scratch, slot)
                : qfwd_stream_finish(g, m, st, rows, ev, scratch, slot);
            if (status != QFWD_STREAM_NO_COMMIT) count++;
        }
        if (g.tid == 0) ((u32*)p.counts)[i] = count;
    }
}
#endif

#endif  // QFWD_WINDOW_CU

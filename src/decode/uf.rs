//! Union-find decoder (Delfosse–Nickerson) with weighted growth and peeling, on the matching
//! graph, specified so that a CUDA port can follow it line for line and give bit-identical
//! output.
//!
//! Two implementations of one specification live here: [`UfScratch::decode_reference`]
//! follows the steps below literally, round by round (the shape a GPU block runs, one
//! thread per frontier vertex); [`UfScratch::decode`] is an event-driven equivalent for the
//! CPU that touches only the clusters that change. Their outputs are identical (tested on
//! every fixture shot and on random graphs). The specification's output depends only on
//! *sets* (which edges fill in a round, which vertices form a cluster), never on the order
//! a loop visits them, so a parallel port may visit in any order.
//!
//! # State (flat, fixed-width, sized once per decoder instance)
//!
//! Read-only, from [`MatchingGraph`]: `n` detectors, boundary vertex `B = n`, per edge
//! `edge_u`, `edge_v`, `edge_weight` (u32, `1..=65535`), `edge_obs` (u64); CSR `adj_offset`,
//! `adj_edge`, `adj_nbr`; `boundary_edge[v]`.
//!
//! Per decoder instance ([`UfScratch`]; on a GPU, per block):
//!
//! | array | type | size | meaning | reset value |
//! |---|---|---|---|---|
//! | `parent` | u32 | n+1 | union-find parent; `NONE` = vertex in no cluster | `NONE` |
//! | `flags` | u8 | n+1 | at roots: bit 0 `ODD` parity, bit 1 `BOUNDARY` touched | 0 |
//! | `defect` | u8 | n+1 | syndrome bit, consumed by peeling | 0 |
//! | `visited` | u8 | n+1 | vertex is in the peeling forest | 0 |
//! | `parent_edge` | u32 | n+1 | forest edge to the parent (`NO_EDGE` at a root) | (set on visit) |
//! | `growth` | u32 | E | how far edge `e` has grown; full when `growth[e] == edge_weight[e]` | 0 |
//! | `verts` | u32 list | ≤ n | vertices in clusters | empty |
//! | `frontier` | u32 list | ≤ n | cluster vertices that may still have a growing edge | empty |
//! | `cand` | u32 list | ≤ 2E | frontier edges of the current round | empty |
//! | `touched` | u32 list | ≤ E | edges with `growth > 0` (to reset them) | empty |
//! | `fused` | u32 list | ≤ E | edges that became full in the current round | empty |
//! | `order` | u32 list | ≤ n | peeling forest in BFS order | empty |
//!
//! Every list has a fixed bound, so a GPU version uses fixed arrays plus a counter.
//! A cluster is *active* when its root's flags are exactly `ODD` (odd parity, no boundary).
//! `find(x)`: follow `parent` to the root with path halving
//! (`while parent[x] != x { parent[x] = parent[parent[x]]; x = parent[x] }`).
//! `union(a, b)` of two different roots: the smaller index becomes the root of both (so the
//! root of a cluster is its smallest vertex, whatever the order of unions), and its flags
//! become `ODD` xor, `BOUNDARY` or, of the two.
//!
//! # Algorithm, step by step
//!
//! 1. **Defects.** For every set bit `v < n` of the bit-packed syndrome (LSB first):
//!    `parent[v] = v`, `flags[v] = ODD`, `defect[v] = 1`; add `v` to `verts` and
//!    `frontier`. No defect: return 0 (no flip). Then make the boundary a cluster:
//!    `parent[B] = B`, `flags[B] = BOUNDARY` (`B` is never in `verts` and never grows).
//! 2. **Growth rounds**, until step 2a finds no frontier edge.
//!    A *frontier edge* of a vertex `v` in `frontier` is an incident edge `e` with `v` in an
//!    active cluster (root `r = find(v)`), `growth[e] < edge_weight[e]`, and whose other
//!    endpoint `u` is in another cluster or in none (`parent[u] == NONE` or
//!    `find(u) != r`). Cluster states are those at the start of the round throughout 2a
//!    and 2b.
//!    - **2a, step size.** For every frontier edge: `k = 2` if `u` is in an active cluster,
//!      else 1; `need = ceil((edge_weight[e] - growth[e]) / k)`; add `e` to `cand`.
//!      `delta` = the least `need`. A frontier vertex without frontier edges whose cluster
//!      is active may leave `frontier` (full and internal edges stay so). If `cand` is
//!      empty, stop growing (every cluster is even or touches the boundary, or an odd
//!      cluster cannot grow: the syndrome is impossible, and decoding goes on with what
//!      there is).
//!    - **2b, grow.** Every frontier edge grows by `delta` per active endpoint:
//!      `growth[e] = min(growth[e] + k * delta, edge_weight[e])` (the half-edge growth of
//!      Delfosse–Nickerson in integer units); the edges that reach `edge_weight[e]` form
//!      `fused` (at least one per round). Record first-time growth in `touched`.
//!    - **2c, merge.** For each `e` in `fused`: each endpoint in no cluster joins as a
//!      singleton (`parent[x] = x`, `flags[x] = 0`, add to `verts` and `frontier`); then
//!      `union(find(edge_u[e]), find(edge_v[e]))` if the roots differ.
//! 3. **Spanning forest** of the full edges (`growth[e] == edge_weight[e]`), in BFS order,
//!    with `verts` sorted by index and `visited[B] = 1` from the start (no BFS enters `B`):
//!    - 3a: every `v` in `verts` whose `boundary_edge[v]` is full becomes a child of `B`
//!      (`visited[v] = 1`, `parent_edge[v] = boundary_edge[v]`, append to `order`); then
//!      BFS: for each `x` in `order` from the front, for each full incident edge `e` (CSR
//!      order) to an unvisited `y`: `visited[y] = 1`, `parent_edge[y] = e`, append `y`.
//!    - 3b: the first vertex of `verts` not yet visited becomes a root (`visited = 1`,
//!      `parent_edge = NO_EDGE`, append), BFS as in 3a; repeat until all are visited.
//! 4. **Peel**, leaves first: for `i` from `len(order) - 1` down to 0, `v = order[i]`: if
//!    `defect[v] == 1` and `e = parent_edge[v] != NO_EDGE`: `obs ^= edge_obs[e]`,
//!    `defect[v] = 0`, and with `u = edge_u[e] ^ edge_v[e] ^ v`, `defect[u] ^= 1` unless
//!    `u == B` (the boundary absorbs parity). Roots of trees without `B` end with
//!    `defect = 0` because their clusters have even parity.
//! 5. **Reset** only what was touched: every `v` in `verts` and `B`: `parent = NONE`,
//!    `flags = defect = visited = 0`; every `e` in `touched`: `growth = 0`.
//!    Return `obs` (bit k = observable `Lk` flipped by the correction).
//!
//! No recursion, no allocation after [`UfScratch::new`], no hashing; an empty syndrome
//! returns at step 1.
//!
//! # The event-driven CPU version
//!
//! Between two changes of the clusters at its ends, an edge grows at a constant rate `k`,
//! so its *fill time* `t0 + ceil((w - g0) / k)` (growth `g0` at time `t0`) does not move
//! while the rounds pass: `need` drops by exactly `delta` each round. [`UfScratch::decode`]
//! therefore keeps, per edge, one 16-byte record `(growth, since, fill, weight, rate,
//! seen)`, and per active cluster a lower bound `cmin` of its edges' fill times. A round
//! jumps to the least `cmin` of the active roots, scans only the clusters due then for the
//! edges whose fill time it is (the specification's `fused` set), merges them, and
//! re-rates (brings growth up to now, then recomputes rate and fill time) only the edges
//! of the clusters whose activity changed, or that merged with another active cluster:
//! every edge whose rate can change, or that becomes internal, has an endpoint in such a
//! cluster. Clusters keep member lists and `parent[v]` always names the root (the smaller
//! cluster is relabelled on union), so there is no `find` in this version. The clusters,
//! the full edges and so the output are those of the specification; root identities may
//! differ, which the output never depends on.
//!
#![forbid(unsafe_code)]

use super::graph::{MatchingGraph, NO_EDGE};

/// "Not in any cluster" in `parent`; "no vertex" in lists.
pub const NONE: u32 = u32::MAX;
/// Root flag: the cluster holds an odd number of defects.
pub const ODD: u8 = 1;
/// Root flag: the cluster touches the boundary.
pub const BOUNDARY: u8 = 2;
/// Root flag (event-driven version, within a round): the cluster took part in a merge.
const PART: u8 = 4;
/// Root flag (event-driven version, within a round): the root is in the new `roots` list.
const LISTED: u8 = 8;
/// "Never" as a fill time.
const NEVER: u32 = u32::MAX;

/// `EdgeState::rate` of a full edge.
const FULL: u8 = 3;

/// The event-driven version's state of one edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EdgeState {
    /// Growth at time `since`.
    growth: u32,
    since: u32,
    /// Fill time (`NEVER` if not growing).
    fill: u32,
    /// The edge's weight, copied when first rated.
    weight: u16,
    /// Growth per time unit: 0, 1, 2; `FULL` once full.
    rate: u8,
    /// Rated at least once in this shot (and so listed in `touched`).
    seen: u8,
}

impl EdgeState {
    const RESET: EdgeState = EdgeState {
        growth: 0,
        since: 0,
        fill: NEVER,
        weight: 0,
        rate: 0,
        seen: 0,
    };
}

/// Per-instance working memory of the union-find decoder (see the module docs).
#[derive(Debug, Clone)]
pub struct UfScratch {
    // Specification state.
    parent: Vec<u32>,
    flags: Vec<u8>,
    defect: Vec<u8>,
    visited: Vec<u8>,
    parent_edge: Vec<u32>,
    growth: Vec<u32>,
    verts: Vec<u32>,
    frontier: Vec<u32>,
    cand: Vec<u32>,
    touched: Vec<u32>,
    fused: Vec<u32>,
    order: Vec<u32>,
    // Event-driven version only.
    /// Cluster sizes at roots; member lists: `next[v]`, and `head`/`tail` at roots. In
    /// this version `parent[v]` is always the root itself (members are relabelled on
    /// union), so no find is needed.
    csize: Vec<u32>,
    next: Vec<u32>,
    head: Vec<u32>,
    tail: Vec<u32>,
    /// At active roots: a lower bound of the fill times of the cluster's growing edges.
    cmin: Vec<u32>,
    /// Per edge, in one 16-byte record (one cache access per edge).
    edges: Vec<EdgeState>,
    /// Active roots, and the next round's list.
    roots: Vec<u32>,
    roots_next: Vec<u32>,
    /// Clusters taking part in this round's merges: (head, tail, was active) at round start.
    part_head: Vec<u32>,
    part_tail: Vec<u32>,
    part_active: Vec<u8>,
}

#[inline]
fn find(parent: &mut [u32], mut x: u32) -> u32 {
    loop {
        let p = parent[x as usize];
        if p == x {
            return x;
        }
        let gp = parent[p as usize];
        parent[x as usize] = gp;
        x = gp;
    }
}

/// Steps 3 (forest), 4 (peel) and 5 (reset of the vertex state); shared by both versions.
/// `full(e)`: edge `e` is full. Returns the observable flips.
#[allow(clippy::too_many_arguments)]
fn forest_peel_reset(
    g: &MatchingGraph,
    verts: &mut [u32],
    order: &mut [u32],
    parent: &mut [u32],
    flags: &mut [u8],
    defect: &mut [u8],
    visited: &mut [u8],
    parent_edge: &mut [u32],
    full: impl Fn(usize) -> bool,
) -> u64 {
    let b = g.boundary();
    let boundary_edge = g.boundary_edge();
    let (adj_offset, adj) = (g.adj_offset(), g.adj_pairs());
    let (edge_u, edge_v, edge_obs) = (g.edge_u(), g.edge_v(), g.edge_obs());

    // 3. Spanning forest of the full edges, BFS, from vertices in index order.
    verts.sort_unstable();
    visited[b as usize] = 1;
    let mut n_order = 0;
    for &v in verts.iter() {
        let e = boundary_edge[v as usize];
        if e != NO_EDGE && full(e as usize) && visited[v as usize] == 0 {
            visited[v as usize] = 1;
            parent_edge[v as usize] = e;
            order[n_order] = v;
            n_order += 1;
        }
    }
    let (mut head, mut next_root) = (0, 0);
    loop {
        while head < n_order {
            let x = order[head] as usize;
            head += 1;
            for &[e, y] in &adj[adj_offset[x] as usize..adj_offset[x + 1] as usize] {
                let y = y as usize;
                if visited[y] != 0 || !full(e as usize) {
                    continue;
                }
                visited[y] = 1;
                parent_edge[y] = e;
                order[n_order] = y as u32;
                n_order += 1;
            }
        }
        while next_root < verts.len() && visited[verts[next_root] as usize] != 0 {
            next_root += 1;
        }
        if next_root == verts.len() {
            break;
        }
        let v = verts[next_root];
        visited[v as usize] = 1;
        parent_edge[v as usize] = NO_EDGE;
        order[n_order] = v;
        n_order += 1;
    }

    // 4. Peel, leaves first.
    let mut obs = 0u64;
    for &v in order[..n_order].iter().rev() {
        let e = parent_edge[v as usize];
        if defect[v as usize] == 0 || e == NO_EDGE {
            continue;
        }
        let e = e as usize;
        obs ^= edge_obs[e];
        defect[v as usize] = 0;
        let u = edge_u[e] ^ edge_v[e] ^ v;
        if u != b {
            defect[u as usize] ^= 1;
        }
    }

    // 5. Reset what was touched.
    for &v in verts.iter().chain(std::iter::once(&b)) {
        let v = v as usize;
        parent[v] = NONE;
        flags[v] = 0;
        defect[v] = 0;
        visited[v] = 0;
    }
    obs
}

impl UfScratch {
    /// Working memory for `graph` (and any smaller graph).
    pub fn new(graph: &MatchingGraph) -> UfScratch {
        let mut s = UfScratch::empty();
        s.ensure(graph);
        s
    }

    /// Working memory for no graph yet (see [`UfScratch::ensure`]).
    pub fn empty() -> UfScratch {
        UfScratch {
            parent: Vec::new(),
            flags: Vec::new(),
            defect: Vec::new(),
            visited: Vec::new(),
            parent_edge: Vec::new(),
            growth: Vec::new(),
            verts: Vec::new(),
            frontier: Vec::new(),
            cand: Vec::new(),
            touched: Vec::new(),
            fused: Vec::new(),
            order: Vec::new(),
            csize: Vec::new(),
            next: Vec::new(),
            head: Vec::new(),
            tail: Vec::new(),
            cmin: Vec::new(),
            edges: Vec::new(),
            roots: Vec::new(),
            roots_next: Vec::new(),
            part_head: Vec::new(),
            part_tail: Vec::new(),
            part_active: Vec::new(),
        }
    }

    /// Grows the buffers to fit `graph`; allocates only if they are too small.
    pub fn ensure(&mut self, graph: &MatchingGraph) {
        let nv = graph.num_detectors() + 1;
        let ne = graph.num_edges();
        if self.parent.len() < nv {
            self.parent.resize(nv, NONE);
            self.flags.resize(nv, 0);
            self.defect.resize(nv, 0);
            self.visited.resize(nv, 0);
            self.parent_edge.resize(nv, NO_EDGE);
            self.csize.resize(nv, 0);
            self.next.resize(nv, NONE);
            self.head.resize(nv, NONE);
            self.tail.resize(nv, NONE);
            self.cmin.resize(nv, NEVER);
            // Lists of vertices or clusters: each enters each list at most once per round.
            self.verts.resize(nv, 0);
            self.frontier.resize(nv, 0);
            self.order.resize(nv, 0);
            self.roots.resize(nv, 0);
            self.roots_next.resize(nv, 0);
            self.part_head.resize(nv, 0);
            self.part_tail.resize(nv, 0);
            self.part_active.resize(nv, 0);
        }
        if self.growth.len() < ne {
            self.growth.resize(ne, 0);
            self.edges.resize(ne, EdgeState::RESET);
            // Lists of edges: an edge is touched and fills once; it is a candidate at most
            // twice per round (once from each endpoint).
            self.touched.resize(ne, 0);
            self.fused.resize(ne, 0);
            self.cand.resize(2 * ne, 0);
        }
    }

    fn check(&self, g: &MatchingGraph) {
        assert!(
            self.parent.len() > g.num_detectors() && self.growth.len() >= g.num_edges(),
            "UfScratch too small for this graph"
        );
    }

    /// Decodes one bit-packed syndrome (`ceil(n/8)` bytes, LSB first; bits past `n` are
    /// ignored) and returns the observable flips of the correction (bit k = `Lk`).
    /// Event-driven; identical output to [`UfScratch::decode_reference`].
    ///
    /// # Panics
    /// If this scratch was not sized for `g` ([`UfScratch::new`] / [`UfScratch::ensure`]).
    pub fn decode(&mut self, g: &MatchingGraph, dets: &[u8]) -> u64 {
        self.check(g);
        let n = g.num_detectors();
        let b = g.boundary();
        let weight = g.edge_weight();
        let (adj_offset, adj) = (g.adj_offset(), g.adj_pairs());
        let (edge_u, edge_v) = (g.edge_u(), g.edge_v());
        let UfScratch {
            parent,
            flags,
            defect,
            visited,
            parent_edge,
            csize,
            verts,
            touched,
            fused,
            order,
            next,
            head,
            tail,
            cmin,
            edges,
            roots,
            roots_next,
            part_head,
            part_tail,
            part_active,
            ..
        } = self;
        // Slices, not vectors: bounds and base pointers stay in registers.
        let (parent, flags, defect, visited, parent_edge) = (
            &mut parent[..],
            &mut flags[..],
            &mut defect[..],
            &mut visited[..],
            &mut parent_edge[..],
        );
        let (verts, touched, fused, order) = (
            &mut verts[..],
            &mut touched[..],
            &mut fused[..],
            &mut order[..],
        );
        let (csize, next, head, tail, cmin, edges) = (
            &mut csize[..],
            &mut next[..],
            &mut head[..],
            &mut tail[..],
            &mut cmin[..],
            &mut edges[..],
        );
        let (mut roots, mut roots_next) = (&mut roots[..], &mut roots_next[..]);
        let (part_head, part_tail, part_active) =
            (&mut part_head[..], &mut part_tail[..], &mut part_active[..]);
        let (mut n_verts, mut n_touched, mut n_roots) = (0, 0, 0);

        // 1. Defects: singleton active clusters.
        let nbytes = n.div_ceil(8).min(dets.len());
        for (i, &byte) in dets[..nbytes].iter().enumerate() {
            let mut m = byte;
            while m != 0 {
                let v = i * 8 + m.trailing_zeros() as usize;
                m &= m - 1;
                if v >= n {
                    break;
                }
                parent[v] = v as u32;
                csize[v] = 1;
                flags[v] = ODD;
                defect[v] = 1;
                next[v] = NONE;
                head[v] = v as u32;
                tail[v] = v as u32;
                cmin[v] = NEVER;
                verts[n_verts] = v as u32;
                n_verts += 1;
                roots[n_roots] = v as u32;
                n_roots += 1;
            }
        }
        if n_verts == 0 {
            return 0;
        }
        let bu = b as usize;
        parent[bu] = b;
        csize[bu] = 1;
        flags[bu] = BOUNDARY;
        next[bu] = NONE;
        head[bu] = b;
        tail[bu] = b;

        // (Re)computes the rate and fill time of every not-full edge of `v` (root `r`) at
        // time `t`, first bringing its growth up to `t`.
        macro_rules! rate_vertex {
            ($v:expr, $r:expr, $t:expr) => {{
                let (v, r, t) = ($v as usize, $r, $t);
                let r_active = flags[r as usize] & (ODD | BOUNDARY) == ODD;
                for &[e, u] in &adj[adj_offset[v] as usize..adj_offset[v + 1] as usize] {
                    let e = e as usize;
                    let es = &mut edges[e];
                    if es.rate == FULL {
                        continue;
                    }
                    if es.seen == 0 {
                        es.seen = 1;
                        es.weight = weight[e] as u16;
                        touched[n_touched] = e as u32;
                        n_touched += 1;
                    }
                    let w = u32::from(es.weight);
                    let gr = (es.growth + u32::from(es.rate) * (t - es.since)).min(w);
                    es.growth = gr;
                    es.since = t;
                    let ru = parent[u as usize];
                    let es = &mut edges[e];
                    if ru == r {
                        es.rate = 0;
                        es.fill = NEVER;
                        continue;
                    }
                    let u_active = ru != NONE && flags[ru as usize] & (ODD | BOUNDARY) == ODD;
                    let k = u8::from(r_active) + u8::from(u_active);
                    es.rate = k;
                    if k == 0 {
                        es.fill = NEVER;
                        continue;
                    }
                    // ceil((w - gr) / k) for k in {1, 2}, without a division.
                    let f = t + ((w - gr + u32::from(k) - 1) >> (k - 1));
                    es.fill = f;
                    if r_active {
                        cmin[r as usize] = cmin[r as usize].min(f);
                    }
                    if u_active {
                        cmin[ru as usize] = cmin[ru as usize].min(f);
                    }
                }
            }};
        }

        let mut t: u32 = 0;
        for &v in &verts[..n_verts] {
            rate_vertex!(v, v, t);
        }

        // 2. Rounds: jump to the next fill time.
        loop {
            let mut tn = NEVER;
            for &r in &roots[..n_roots] {
                tn = tn.min(cmin[r as usize]);
            }
            if tn == NEVER {
                break;
            }
            debug_assert!(tn >= t, "time went back from {t} to {tn}");
            t = tn;
            // The edges that fill now, from the clusters due now; refresh their bound.
            let mut n_fused = 0;
            for &r in &roots[..n_roots] {
                if cmin[r as usize] != t {
                    continue;
                }
                let mut m = NEVER;
                let mut v = head[r as usize];
                while v != NONE {
                    if v != b {
                        let (lo, hi) = (
                            adj_offset[v as usize] as usize,
                            adj_offset[v as usize + 1] as usize,
                        );
                        for &[e, _] in &adj[lo..hi] {
                            let e = e as usize;
                            let es = &mut edges[e];
                            let f = es.fill;
                            if f == t {
                                es.rate = FULL;
                                es.fill = NEVER;
                                fused[n_fused] = e as u32;
                                n_fused += 1;
                            } else {
                                m = m.min(f);
                            }
                        }
                    }
                    v = next[v as usize];
                }
                cmin[r as usize] = m;
            }
            // Clusters taking part in merges, as they were before this round's unions.
            let mut n_part = 0;
            for &e in &fused[..n_fused] {
                for z in [edge_u[e as usize], edge_v[e as usize]] {
                    let zu = z as usize;
                    if parent[zu] == NONE {
                        parent[zu] = z;
                        csize[zu] = 1;
                        flags[zu] = PART;
                        next[zu] = NONE;
                        head[zu] = z;
                        tail[zu] = z;
                        cmin[zu] = NEVER;
                        verts[n_verts] = z;
                        n_verts += 1;
                        part_head[n_part] = z;
                        part_tail[n_part] = z;
                        part_active[n_part] = 0;
                        n_part += 1;
                    } else {
                        let r = parent[zu] as usize;
                        if flags[r] & PART == 0 {
                            part_head[n_part] = head[r];
                            part_tail[n_part] = tail[r];
                            part_active[n_part] = u8::from(flags[r] & (ODD | BOUNDARY) == ODD);
                            flags[r] |= PART;
                            n_part += 1;
                        }
                    }
                }
            }
            // Unions: the larger cluster wins (on a tie the smaller root) and relabels the
            // other's members, so `parent` always points at the root; lists concatenate.
            for &e in &fused[..n_fused] {
                let rx = parent[edge_u[e as usize] as usize];
                let ry = parent[edge_v[e as usize] as usize];
                if rx == ry {
                    continue;
                }
                let (sx, sy) = (csize[rx as usize], csize[ry as usize]);
                let (win, lose) = if sx > sy || (sx == sy && rx < ry) {
                    (rx as usize, ry as usize)
                } else {
                    (ry as usize, rx as usize)
                };
                let mut m = head[lose];
                while m != NONE {
                    parent[m as usize] = win as u32;
                    m = next[m as usize];
                }
                csize[win] = sx + sy;
                let fl = flags[lose];
                flags[win] = (flags[win] ^ (fl & ODD)) | (fl & BOUNDARY);
                next[tail[win] as usize] = head[lose];
                tail[win] = tail[lose];
                cmin[win] = cmin[win].min(cmin[lose]);
            }
            // Re-rate the members of every participant whose activity changed, and of
            // active participants merged with another active one (their shared edges are
            // internal now). `visited` (zero until step 3) counts active participants.
            for p in 0..n_part {
                if part_active[p] == 1 {
                    let r = parent[part_head[p] as usize] as usize;
                    visited[r] = visited[r].saturating_add(1);
                }
            }
            for p in 0..n_part {
                let r = parent[part_head[p] as usize];
                let now = u8::from(flags[r as usize] & (ODD | BOUNDARY) == ODD);
                if now == 0 {
                    // Inactive roots hold no bound, so a later merge cannot carry a stale
                    // time from before `t` into an active cluster.
                    cmin[r as usize] = NEVER;
                }
                if now != part_active[p] || (now == 1 && visited[r as usize] > 1) {
                    let (mut v, last) = (part_head[p], part_tail[p]);
                    loop {
                        if v != b {
                            rate_vertex!(v, r, t);
                        }
                        if v == last {
                            break;
                        }
                        v = next[v as usize];
                    }
                }
            }
            for &h in &part_head[..n_part] {
                let r = parent[h as usize];
                visited[r as usize] = 0;
            }
            // The next list of active roots.
            let mut nn = 0;
            for i in 0..n_roots + n_part {
                let x = if i < n_roots {
                    roots[i]
                } else {
                    part_head[i - n_roots]
                };
                let r = parent[x as usize] as usize;
                flags[r] &= !PART;
                if flags[r] & (ODD | BOUNDARY | LISTED) == ODD {
                    flags[r] |= LISTED;
                    roots_next[nn] = r as u32;
                    nn += 1;
                }
            }
            for &r in &roots_next[..nn] {
                flags[r as usize] &= !LISTED;
            }
            std::mem::swap(&mut roots, &mut roots_next);
            n_roots = nn;
        }

        let obs = forest_peel_reset(
            g,
            &mut verts[..n_verts],
            order,
            parent,
            flags,
            defect,
            visited,
            parent_edge,
            |e| edges[e].rate == FULL,
        );
        for &e in &touched[..n_touched] {
            edges[e as usize] = EdgeState::RESET;
        }
        obs
    }

    /// The specification, round by round, exactly as the module docs list the steps: the
    /// version a GPU port follows. Same output as [`UfScratch::decode`].
    ///
    /// # Panics
    /// If this scratch was not sized for `g`.
    pub fn decode_reference(&mut self, g: &MatchingGraph, dets: &[u8]) -> u64 {
        self.check(g);
        let n = g.num_detectors();
        let b = g.boundary();
        let weight = g.edge_weight();
        let (adj_offset, adj_edge, adj_nbr) = (g.adj_offset(), g.adj_edge(), g.adj_nbr());
        let (edge_u, edge_v) = (g.edge_u(), g.edge_v());
        let UfScratch {
            parent,
            flags,
            defect,
            visited,
            parent_edge,
            growth,
            verts,
            frontier,
            cand,
            touched,
            fused,
            order,
            ..
        } = self;
        let (parent, flags, defect, visited, parent_edge, growth) = (
            &mut parent[..],
            &mut flags[..],
            &mut defect[..],
            &mut visited[..],
            &mut parent_edge[..],
            &mut growth[..],
        );
        let (verts, frontier, cand, touched, fused, order) = (
            &mut verts[..],
            &mut frontier[..],
            &mut cand[..],
            &mut touched[..],
            &mut fused[..],
            &mut order[..],
        );
        let (mut n_verts, mut n_touched, mut n_frontier) = (0, 0, 0);

        // 1. Defects.
        let nbytes = n.div_ceil(8).min(dets.len());
        for (i, &byte) in dets[..nbytes].iter().enumerate() {
            let mut m = byte;
            while m != 0 {
                let v = i * 8 + m.trailing_zeros() as usize;
                m &= m - 1;
                if v >= n {
                    break;
                }
                parent[v] = v as u32;
                flags[v] = ODD;
                defect[v] = 1;
                verts[n_verts] = v as u32;
                n_verts += 1;
                frontier[n_frontier] = v as u32;
                n_frontier += 1;
            }
        }
        if n_verts == 0 {
            return 0;
        }
        parent[b as usize] = b;
        flags[b as usize] = BOUNDARY;

        // 2. Growth rounds.
        loop {
            // 2a. Step size and candidate edges; drop frontier vertices with nothing to grow.
            let mut delta = u32::MAX;
            let mut keep = 0;
            let mut n_cand = 0;
            for i in 0..n_frontier {
                let v = frontier[i];
                let r = find(parent, v);
                if flags[r as usize] != ODD {
                    frontier[keep] = v;
                    keep += 1;
                    continue;
                }
                let first_cand = n_cand;
                for a in adj_offset[v as usize] as usize..adj_offset[v as usize + 1] as usize {
                    let e = adj_edge[a];
                    let (w, gr) = (weight[e as usize], growth[e as usize]);
                    if gr >= w {
                        continue;
                    }
                    let u = adj_nbr[a];
                    let mut k = 1;
                    if parent[u as usize] != NONE {
                        let ru = find(parent, u);
                        if ru == r {
                            continue;
                        }
                        if flags[ru as usize] == ODD {
                            k = 2;
                        }
                    }
                    cand[n_cand] = e;
                    n_cand += 1;
                    // ceil((w - gr) / k) for k in {1, 2}, without a division.
                    delta = delta.min((w - gr + k - 1) >> (k - 1));
                }
                if n_cand > first_cand {
                    frontier[keep] = v;
                    keep += 1;
                }
            }
            n_frontier = keep;
            if n_cand == 0 {
                break;
            }
            // 2b. Grow: each visit of an edge from an active endpoint adds `delta`.
            let mut n_fused = 0;
            for &e in &cand[..n_cand] {
                let e = e as usize;
                let (w, gr) = (weight[e], growth[e]);
                if gr >= w {
                    continue;
                }
                if gr == 0 {
                    touched[n_touched] = e as u32;
                    n_touched += 1;
                }
                let ng = gr.saturating_add(delta).min(w);
                growth[e] = ng;
                if ng == w {
                    fused[n_fused] = e as u32;
                    n_fused += 1;
                }
            }
            // 2c. Merge.
            for &e in &fused[..n_fused] {
                let (x, y) = (edge_u[e as usize], edge_v[e as usize]);
                for z in [x, y] {
                    if parent[z as usize] == NONE {
                        parent[z as usize] = z;
                        flags[z as usize] = 0;
                        verts[n_verts] = z;
                        n_verts += 1;
                        frontier[n_frontier] = z;
                        n_frontier += 1;
                    }
                }
                let rx = find(parent, x);
                let ry = find(parent, y);
                if rx != ry {
                    let (win, lose) = (rx.min(ry) as usize, rx.max(ry) as usize);
                    parent[lose] = win as u32;
                    let fl = flags[lose];
                    flags[win] = (flags[win] ^ (fl & ODD)) | (fl & BOUNDARY);
                }
            }
        }

        let obs = forest_peel_reset(
            g,
            &mut verts[..n_verts],
            order,
            parent,
            flags,
            defect,
            visited,
            parent_edge,
            |e| growth[e] == weight[e],
        );
        for &e in &touched[..n_touched] {
            growth[e as usize] = 0;
        }
        obs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::graph::EdgeSpec;

    fn edge(u: u32, v: Option<u32>, p: f64, obs: u64) -> EdgeSpec {
        EdgeSpec {
            u,
            v,
            p,
            observables: obs,
        }
    }

    /// Repetition code of 5 data bits: detectors 0..4 between neighbours, boundary at both
    /// ends, observable on the left boundary edge.
    fn chain() -> MatchingGraph {
        let mut e = vec![edge(0, None, 0.1, 1)];
        for d in 0..3 {
            e.push(edge(d, Some(d + 1), 0.1, 0));
        }
        e.push(edge(3, None, 0.1, 0));
        MatchingGraph::from_edges(4, 1, &e).unwrap()
    }

    type DecodeFn = fn(&mut UfScratch, &MatchingGraph, &[u8]) -> u64;
    const BOTH: [(&str, DecodeFn); 2] = [
        ("event-driven", UfScratch::decode),
        ("reference", UfScratch::decode_reference),
    ];

    #[test]
    fn decodes_a_chain_and_resets_between_shots() {
        let g = chain();
        for (name, decode) in BOTH {
            let mut s = UfScratch::new(&g);
            for (syndrome, flips) in [
                // No defect.
                (0b0000, 0),
                // Defect at 0 alone: matched to the left boundary (flips L0).
                (0b0001, 1),
                // Defect at 3 alone: right boundary, no flip.
                (0b1000, 0),
                // Defects 0 and 1: the edge between them.
                (0b0011, 0),
                // Defects 0 and 3: both to their own boundaries.
                (0b1001, 1),
                // Same answers again (state fully reset).
                (0b0001, 1),
                (0b0011, 0),
            ] {
                assert_eq!(
                    decode(&mut s, &g, &[syndrome]),
                    flips,
                    "{name} {syndrome:#b}"
                );
            }
            assert!(s.parent.iter().all(|&p| p == NONE), "{name}");
            assert!(s.flags.iter().all(|&f| f == 0), "{name}");
            assert!(s.growth.iter().all(|&x| x == 0), "{name}");
            assert!(s.edges.iter().all(|e| *e == EdgeState::RESET), "{name}");
        }
    }

    #[test]
    fn impossible_syndrome_terminates() {
        // Detector 1 has no edges at all.
        let g = MatchingGraph::from_edges(2, 1, &[edge(0, None, 0.1, 1)]).unwrap();
        for (name, decode) in BOTH {
            let mut s = UfScratch::new(&g);
            assert_eq!(decode(&mut s, &g, &[0b10]), 0, "{name}");
            assert_eq!(decode(&mut s, &g, &[0b01]), 1, "{name}");
        }
    }

    #[test]
    fn three_odd_clusters_merging_stay_odd_and_stop_growing_inside() {
        // 0 - 1 - 2 in a line, all defects, equal weights, plus a far boundary: 0-1 and 1-2
        // fill together, the merged cluster is odd (3 defects) and must not grow its
        // internal edge 0-2 any further; it then reaches the boundary through 2.
        let e = [
            edge(0, Some(1), 0.1, 0),
            edge(1, Some(2), 0.1, 0),
            edge(0, Some(2), 0.01, 0b10),
            edge(2, None, 0.001, 1),
        ];
        // (Were 0-2 grown full, the forest would peel through it and flip L1 too.)
        let g = MatchingGraph::from_edges(3, 2, &e).unwrap();
        let mut s = UfScratch::new(&g);
        let fast = s.decode(&g, &[0b111]);
        assert_eq!(fast, s.decode_reference(&g, &[0b111]));
        assert_eq!(fast, 1);
    }
}

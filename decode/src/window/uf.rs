//! The window decoder: union-find with weighted growth, a level-synchronous spanning forest
//! and peeling, specified on *sets* so that a thread block can run each step in parallel
//! and give the same correction (docs/streaming.md, "The window decoder").
//!
//! 1. Every defect is a cluster; so is the boundary `B` (flag `BOUNDARY`). A cluster is a
//!    connected component of full edges; its root is its least vertex; it is *active*
//!    when it holds an odd number of defects and not `B`.
//! 2. Growth rounds. A *growing* edge is one that is not full and whose ends lie in
//!    different clusters (or one in none), at least one of them active; `k` = its number
//!    of active ends. `delta` = the least `ceil((weight - growth) / k)` over growing edges;
//!    none: stop. Every growing edge grows by `k * delta` (capped at its weight); those
//!    that reach it are full, their ends join clusters, clusters they connect merge.
//!
//!    Then (step 2') regions, the components of full edges between detectors, of few
//!    defects are matched exactly with shortest paths inside them ([`super::matching`]);
//!    their defects are cleared, so steps 3-4 correct the other regions only.
//! 3. Forest, level by level: level 0 is `B` and the root of every cluster without `B`;
//!    a vertex of level `L + 1` is one not yet reached with a full edge to level `L`, and
//!    its parent edge is the least such edge (by index).
//! 4. Peel, deepest level first: a vertex holding a defect puts its parent edge in the
//!    correction and hands the defect to its parent (the boundary absorbs it). The
//!    correction is the peeled edges and the matching's (their sets are disjoint).
//!
//! Every choice (the root, the parent edge) is a least index over a set, and every count
//! is order-free, so a parallel version that computes the same sets gives the same edges.
#![forbid(unsafe_code)]

use super::matching::{MatchLimits, RegionMatcher};
use crate::graph::MatchingGraph;

/// "No vertex / no cluster / not reached".
pub const NONE: u32 = u32::MAX;
const ODD: u8 = 1;
const BOUNDARY: u8 = 2;

/// Working memory of the window decoder, sized for the largest window of a model.
#[derive(Debug, Clone, Default)]
pub struct WindowScratch {
    /// Union-find parent per vertex (`B` included); `NONE` outside clusters.
    parent: Vec<u32>,
    /// Per root: `ODD`, `BOUNDARY`.
    flags: Vec<u8>,
    defect: Vec<u8>,
    growth: Vec<u32>,
    /// Vertices in clusters, `B` excluded.
    verts: Vec<u32>,
    /// Edges grown at all (to reset them).
    touched: Vec<u32>,
    cand: Vec<(u32, u32)>,
    fused: Vec<u32>,
    level: Vec<u32>,
    parent_edge: Vec<u32>,
    /// The forest's vertices, level by level (level 0 excluded).
    order: Vec<u32>,
    /// Growth rounds of the last decode.
    pub rounds: u32,
    /// Step 2': exact matching in small regions.
    pub limits: MatchLimits,
    pub matcher: RegionMatcher,
}

impl WindowScratch {
    /// Scratch for graphs of at most `vertices` detectors and `edges` edges, matching
    /// regions within `limits` exactly (step 2').
    pub fn new(vertices: usize, edges: usize, limits: MatchLimits) -> WindowScratch {
        let mut s = WindowScratch {
            limits,
            ..WindowScratch::default()
        };
        s.ensure(vertices, edges);
        s
    }

    /// Grows the scratch to hold graphs of `vertices` detectors and `edges` edges.
    pub fn ensure(&mut self, vertices: usize, edges: usize) {
        let nv = vertices + 1;
        if self.parent.len() < nv {
            self.parent.resize(nv, NONE);
            self.flags.resize(nv, 0);
            self.defect.resize(nv, 0);
            self.level.resize(nv, NONE);
            self.parent_edge.resize(nv, NONE);
        }
        if self.growth.len() < edges {
            self.growth.resize(edges, 0);
        }
    }

    fn find(&mut self, mut x: u32) -> u32 {
        loop {
            let p = self.parent[x as usize];
            if p == x {
                return x;
            }
            let gp = self.parent[p as usize];
            self.parent[x as usize] = gp;
            x = gp;
        }
    }

    /// The root of `x`'s cluster, or `NONE`.
    fn root(&mut self, x: u32) -> u32 {
        if self.parent[x as usize] == NONE {
            NONE
        } else {
            self.find(x)
        }
    }

    fn active(&self, r: u32) -> bool {
        r != NONE && self.flags[r as usize] & (ODD | BOUNDARY) == ODD
    }

    fn join(&mut self, x: u32, b: u32) {
        if self.parent[x as usize] == NONE {
            self.parent[x as usize] = x;
            self.flags[x as usize] = 0;
            if x != b {
                self.verts.push(x);
            }
        }
    }

    fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return;
        }
        let (lo, hi) = (ra.min(rb), ra.max(rb));
        self.parent[hi as usize] = lo;
        let f = self.flags[hi as usize];
        self.flags[lo as usize] =
            ((self.flags[lo as usize] ^ f) & ODD) | ((self.flags[lo as usize] | f) & BOUNDARY);
    }

    /// Decodes the defects `defects` (distinct detectors of `g`) and appends the
    /// correction's edges to `correction`, in no particular order.
    pub fn decode(&mut self, g: &MatchingGraph, defects: &[u32], correction: &mut Vec<u32>) {
        self.rounds = 0;
        if defects.is_empty() {
            return;
        }
        self.ensure(g.num_detectors(), g.num_edges());
        let b = g.boundary();
        for &v in defects {
            self.parent[v as usize] = v;
            self.flags[v as usize] = ODD;
            self.defect[v as usize] = 1;
            self.verts.push(v);
        }
        self.parent[b as usize] = b;
        self.flags[b as usize] = BOUNDARY;
        self.grow(g);
        let (growth, w) = (&self.growth, g.edge_weight());
        self.matcher.run(
            g,
            self.limits,
            &self.verts,
            |e| growth[e] == w[e],
            &mut self.defect,
            correction,
        );
        self.forest(g);
        self.peel(g, correction);
        self.reset(b);
    }

    /// Step 2: growth rounds until no edge grows.
    fn grow(&mut self, g: &MatchingGraph) {
        let (off, adj, w) = (g.adj_offset(), g.adj_pairs(), g.edge_weight());
        let b = g.boundary();
        loop {
            self.cand.clear();
            let mut delta = u32::MAX;
            for i in 0..self.verts.len() {
                let x = self.verts[i];
                let rx = self.find(x);
                if !self.active(rx) {
                    continue;
                }
                for &[e, y] in &adj[off[x as usize] as usize..off[x as usize + 1] as usize] {
                    let (grown, weight) = (self.growth[e as usize], w[e as usize]);
                    if grown == weight {
                        continue;
                    }
                    let ry = self.root(y);
                    if ry == rx {
                        continue;
                    }
                    let k = if self.active(ry) {
                        // Both ends active: listed once, from the lower end.
                        if y < x {
                            continue;
                        }
                        2
                    } else {
                        1
                    };
                    delta = delta.min((weight - grown).div_ceil(k));
                    self.cand.push((e, k));
                }
            }
            if self.cand.is_empty() {
                return;
            }
            self.rounds += 1;
            self.fused.clear();
            for i in 0..self.cand.len() {
                let (e, k) = self.cand[i];
                let grown = self.growth[e as usize];
                if grown == 0 {
                    self.touched.push(e);
                }
                let now = (grown + k * delta).min(w[e as usize]);
                self.growth[e as usize] = now;
                if now == w[e as usize] {
                    self.fused.push(e);
                }
            }
            for i in 0..self.fused.len() {
                let e = self.fused[i] as usize;
                let (u, v) = (g.edge_u()[e], g.edge_v()[e]);
                self.join(u, b);
                self.join(v, b);
                self.union(u, v);
            }
        }
    }

    /// Step 3: the forest of full edges, level by level.
    fn forest(&mut self, g: &MatchingGraph) {
        let b = g.boundary();
        self.order.clear();
        // Level 0 first (the boundary, the roots of clusters without it), then level 1
        // from all of it.
        self.level[b as usize] = 0;
        for i in 0..self.verts.len() {
            let v = self.verts[i];
            if self.find(v) == v && self.flags[v as usize] & BOUNDARY == 0 {
                self.level[v as usize] = 0;
            }
        }
        self.expand(g, b, 0);
        for i in 0..self.verts.len() {
            let v = self.verts[i];
            if self.level[v as usize] == 0 {
                self.expand(g, v, 0);
            }
        }
        // `order` grows while it is read: each vertex is expanded after every vertex of
        // the level before it (the order lists levels in turn).
        let mut i = 0;
        while i < self.order.len() {
            let x = self.order[i];
            let l = self.level[x as usize];
            self.expand(g, x, l);
            i += 1;
        }
    }

    /// Reaches, from `x` at level `l`, the unreached ends of its full edges (level `l + 1`),
    /// keeping each one's least edge to level `l`.
    fn expand(&mut self, g: &MatchingGraph, x: u32, l: u32) {
        let (off, adj, w) = (g.adj_offset(), g.adj_pairs(), g.edge_weight());
        for &[e, y] in &adj[off[x as usize] as usize..off[x as usize + 1] as usize] {
            if self.growth[e as usize] != w[e as usize] {
                continue;
            }
            let ly = self.level[y as usize];
            if ly == NONE {
                self.level[y as usize] = l + 1;
                self.parent_edge[y as usize] = e;
                self.order.push(y);
            } else if ly == l + 1 && e < self.parent_edge[y as usize] {
                self.parent_edge[y as usize] = e;
            }
        }
    }

    /// Step 4: peel, deepest level first.
    fn peel(&mut self, g: &MatchingGraph, correction: &mut Vec<u32>) {
        let b = g.boundary();
        for i in (0..self.order.len()).rev() {
            let y = self.order[i];
            if self.defect[y as usize] == 0 {
                continue;
            }
            let e = self.parent_edge[y as usize];
            correction.push(e);
            self.defect[y as usize] = 0;
            let x = g.edge_u()[e as usize] ^ g.edge_v()[e as usize] ^ y;
            if x != b {
                self.defect[x as usize] ^= 1;
            }
        }
    }

    fn reset(&mut self, b: u32) {
        for &v in self.verts.iter().chain(std::iter::once(&b)) {
            let v = v as usize;
            self.parent[v] = NONE;
            self.flags[v] = 0;
            self.defect[v] = 0;
            self.level[v] = NONE;
            self.parent_edge[v] = NONE;
        }
        for &e in &self.touched {
            self.growth[e as usize] = 0;
        }
        self.verts.clear();
        self.touched.clear();
    }
}

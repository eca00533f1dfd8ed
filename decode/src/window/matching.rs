//! Exact matching inside the union-find's regions: the window decoder's step 2' (module
//! docs of [`super::uf`]; docs/streaming.md, "Matching in regions").
//!
//! A *region* is a connected component of the full edges between detectors once growth
//! stops (boundary edges left out); its root is its least vertex. A region of at most
//! [`MatchLimits::defects`] defects, [`MatchLimits::members`] vertices and
//! [`MatchLimits::edges`] edges (both ends in the region) is matched exactly:
//!
//! 1. distances from each defect to every member along the region's edges (full or not),
//!    and to the boundary: the least `d(a, x) + w(boundary edge of x)` over members `x`
//!    that have a boundary edge (none: infinite);
//! 2. with the defects in increasing index `0..m`, `f(S)` over subsets: `f(∅) = 0`, and for
//!    `i` the least of `S`, the least of `f(S - i) + d_B(i)` (tried first) and
//!    `f(S - i - j) + d(i, j)` for `j` in `S` ascending, the first least kept;
//! 3. if `f(all)` is finite, each pair `(i, j)` of the choices becomes the path from `j`
//!    back to `i` that takes, at each vertex `y`, the least-index region edge `(x, y)` with
//!    `d(i, x) + w = d(i, y)`; a boundary match of `i` the least-index member `x` with
//!    `d(i, x) + w_B(x) = d_B(i)`, its boundary edge, and the path from `x` back to `i`.
//!    The correction takes the paths' edges mod 2; the region's defects are cleared.
//!
//! Other regions (more defects or vertices, or odd without a boundary edge) are left to the
//! forest and the peeling. Distances are integers and every choice a least index, so the
//! GPU's parallel version (device/window.cu) finds the same edges.
#![forbid(unsafe_code)]

use crate::graph::{MatchingGraph, NO_EDGE};

/// "None" in the matcher's arrays.
const NONE: u32 = u32::MAX;
/// An unreachable distance (sums saturate).
pub const INF: u32 = u32::MAX;

/// The largest regions matched exactly (default: [`MatchLimits::DEFAULT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatchLimits {
    /// Defects (the matching tries `2^defects` subsets); 0 turns matching off.
    pub defects: u32,
    /// Vertices of a region.
    pub members: u32,
    /// Edges with both ends in a region.
    pub edges: u32,
}

impl MatchLimits {
    /// Most defects a region may have to be matched: the subsets table has `2^MAX` entries.
    pub const MAX_DEFECTS: u32 = 16;

    /// Matching off: every region is peeled (union-find alone).
    pub const OFF: MatchLimits = MatchLimits {
        defects: 0,
        members: 0,
        edges: 0,
    };

    /// Regions of up to 12 defects, 128 vertices and 512 edges.
    pub const DEFAULT: MatchLimits = MatchLimits {
        defects: 12,
        members: 128,
        edges: 512,
    };
}

impl Default for MatchLimits {
    fn default() -> MatchLimits {
        MatchLimits::DEFAULT
    }
}

/// The matcher's working memory.
#[derive(Debug, Clone, Default)]
pub struct RegionMatcher {
    /// Per vertex: its region's root (`NONE` outside regions).
    region: Vec<u32>,
    /// Per vertex: its index among its region's members while the region is matched.
    local: Vec<u32>,
    members: Vec<u32>,
    defects: Vec<u32>,
    /// `dist[a * members + x]`, then the boundary distance of `a` at `dist_b[a]`.
    dist: Vec<u32>,
    dist_b: Vec<u32>,
    done: Vec<bool>,
    f: Vec<u32>,
    choice: Vec<u8>,
    /// Per edge: in the correction (mod 2); and the edges set.
    toggled: Vec<u8>,
    toggled_list: Vec<u32>,
    /// The regions of a call: members of each, one after the other, and where each ends.
    all_members: Vec<u32>,
    ends: Vec<usize>,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(u32, u32)>>,
    /// Regions matched in the last call.
    pub matched: u32,
}

impl RegionMatcher {
    fn ensure(&mut self, vertices: usize, edges: usize) {
        if self.region.len() < vertices + 1 {
            self.region.resize(vertices + 1, NONE);
            self.local.resize(vertices + 1, NONE);
        }
        if self.toggled.len() < edges {
            self.toggled.resize(edges, 0);
        }
    }

    fn toggle(&mut self, e: u32) {
        if self.toggled[e as usize] == 0 {
            self.toggled_list.push(e);
        }
        self.toggled[e as usize] ^= 1;
    }

    /// Matches every region within `limits` among the cluster vertices `verts` (`full(e)`:
    /// edge `e` is full); clears those regions' defects in `defect` and appends their
    /// correction's edges to `correction`.
    pub fn run(
        &mut self,
        g: &MatchingGraph,
        limits: MatchLimits,
        verts: &[u32],
        full: impl Fn(usize) -> bool,
        defect: &mut [u8],
        correction: &mut Vec<u32>,
    ) {
        self.matched = 0;
        if limits.defects == 0 {
            return;
        }
        let b = g.boundary();
        self.ensure(g.num_detectors(), g.num_edges());
        let (off, adj) = (g.adj_offset(), g.adj_pairs());
        // Regions: BFS over full edges between detectors, each from its least vertex.
        self.all_members.clear();
        self.ends.clear();
        self.members.clear();
        self.members.extend_from_slice(verts);
        self.members.sort_unstable();
        for i in 0..self.members.len() {
            let start = self.members[i];
            if self.region[start as usize] != NONE {
                continue;
            }
            self.region[start as usize] = start;
            let first = self.all_members.len();
            self.all_members.push(start);
            let mut at = first;
            while at < self.all_members.len() {
                let x = self.all_members[at] as usize;
                at += 1;
                for &[e, y] in &adj[off[x] as usize..off[x + 1] as usize] {
                    if y != b && self.region[y as usize] == NONE && full(e as usize) {
                        self.region[y as usize] = start;
                        self.all_members.push(y);
                    }
                }
            }
            self.ends.push(self.all_members.len());
        }
        let mut first = 0;
        for r in 0..self.ends.len() {
            let end = self.ends[r];
            self.members.clear();
            self.members
                .extend_from_slice(&self.all_members[first..end]);
            first = end;
            self.defects.clear();
            self.defects.extend(
                self.members
                    .iter()
                    .copied()
                    .filter(|&v| defect[v as usize] != 0),
            );
            self.defects.sort_unstable();
            if self.within(g, limits) && self.match_region(g) {
                for &v in &self.defects {
                    defect[v as usize] = 0;
                }
                self.matched += 1;
            }
        }
        for &v in &self.all_members {
            self.region[v as usize] = NONE;
        }
        for &e in &self.toggled_list {
            if self.toggled[e as usize] != 0 {
                correction.push(e);
            }
            self.toggled[e as usize] = 0;
        }
        self.toggled_list.clear();
    }

    /// Whether the current region (`members`, `defects`) is matched exactly.
    fn within(&self, g: &MatchingGraph, limits: MatchLimits) -> bool {
        let m = self.defects.len();
        if m == 0 || m > limits.defects as usize || self.members.len() > limits.members as usize {
            return false;
        }
        let (off, adj) = (g.adj_offset(), g.adj_pairs());
        let b = g.boundary();
        let root = self.region[self.members[0] as usize];
        // Each region edge is seen from both ends.
        let ends: usize = self
            .members
            .iter()
            .map(|&x| {
                adj[off[x as usize] as usize..off[x as usize + 1] as usize]
                    .iter()
                    .filter(|&&[_, y]| y != b && self.region[y as usize] == root)
                    .count()
            })
            .sum();
        ends / 2 <= limits.edges as usize
    }

    /// Steps 1-3 on the current region; false (nothing changed) when `f(all)` is infinite.
    fn match_region(&mut self, g: &MatchingGraph) -> bool {
        let (k, m) = (self.members.len(), self.defects.len());
        for (i, &v) in self.members.iter().enumerate() {
            self.local[v as usize] = i as u32;
        }
        self.distances(g);
        let full = (1usize << m) - 1;
        self.f.clear();
        self.f.resize(full + 1, INF);
        self.choice.clear();
        self.choice.resize(full + 1, 0);
        self.f[0] = 0;
        for set in 1..=full {
            let i = set.trailing_zeros() as usize;
            let rest = set & !(1 << i);
            let row = &self.dist[i * k..(i + 1) * k];
            let mut best = self.f[rest].saturating_add(self.dist_b[i]);
            let mut choice = m as u8;
            let mut r = rest;
            while r != 0 {
                let j = r.trailing_zeros() as usize;
                r &= r - 1;
                let d = row[self.local[self.defects[j] as usize] as usize];
                let c = self.f[rest & !(1 << j)].saturating_add(d);
                if c < best {
                    best = c;
                    choice = j as u8;
                }
            }
            self.f[set] = best;
            self.choice[set] = choice;
        }
        let ok = self.f[full] != INF;
        if ok {
            let mut set = full;
            while set != 0 {
                let i = set.trailing_zeros() as usize;
                let c = self.choice[set] as usize;
                set &= !(1 << i);
                if c == m {
                    self.boundary_path(g, i);
                } else {
                    set &= !(1 << c);
                    let to = self.local[self.defects[c] as usize] as usize;
                    self.path(g, i, to);
                }
            }
        }
        for &v in &self.members {
            self.local[v as usize] = NONE;
        }
        ok
    }

    /// Step 1: Dijkstra from each defect over the region's edges.
    fn distances(&mut self, g: &MatchingGraph) {
        let (k, m) = (self.members.len(), self.defects.len());
        let (off, adj, w) = (g.adj_offset(), g.adj_pairs(), g.edge_weight());
        let bedge = g.boundary_edge();
        let b = g.boundary();
        self.dist.clear();
        self.dist.resize(m * k, INF);
        self.dist_b.clear();
        self.dist_b.resize(m, INF);
        for a in 0..m {
            self.done.clear();
            self.done.resize(k, false);
            let row = a * k;
            let src = self.local[self.defects[a] as usize];
            self.dist[row + src as usize] = 0;
            self.heap.clear();
            self.heap.push(std::cmp::Reverse((0, src)));
            while let Some(std::cmp::Reverse((dx, i))) = self.heap.pop() {
                if std::mem::replace(&mut self.done[i as usize], true) {
                    continue;
                }
                let x = self.members[i as usize] as usize;
                for &[e, y] in &adj[off[x] as usize..off[x + 1] as usize] {
                    if y == b || self.local[y as usize] == NONE {
                        continue;
                    }
                    let ly = self.local[y as usize];
                    let at = row + ly as usize;
                    let d = dx.saturating_add(w[e as usize]);
                    if d < self.dist[at] {
                        self.dist[at] = d;
                        self.heap.push(std::cmp::Reverse((d, ly)));
                    }
                }
            }
            for (i, &x) in self.members.iter().enumerate() {
                let be = bedge[x as usize];
                if be != NO_EDGE {
                    let d = self.dist[row + i].saturating_add(w[be as usize]);
                    self.dist_b[a] = self.dist_b[a].min(d);
                }
            }
        }
    }

    /// Toggles the path from member `to` back to defect `a` (step 3).
    fn path(&mut self, g: &MatchingGraph, a: usize, mut to: usize) {
        let k = self.members.len();
        let (off, adj, w) = (g.adj_offset(), g.adj_pairs(), g.edge_weight());
        let b = g.boundary();
        let row = a * k;
        let from = self.local[self.defects[a] as usize] as usize;
        while to != from {
            let y = self.members[to] as usize;
            let dy = self.dist[row + to];
            let mut pick = (NONE, 0usize);
            for &[e, x] in &adj[off[y] as usize..off[y + 1] as usize] {
                if x == b || self.local[x as usize] == NONE {
                    continue;
                }
                let lx = self.local[x as usize] as usize;
                if self.dist[row + lx].saturating_add(w[e as usize]) == dy && e < pick.0 {
                    pick = (e, lx);
                }
            }
            // Exact distances always have a tight edge; kept safe as on the GPU.
            if pick.0 == NONE {
                debug_assert!(false, "no tight edge into a member at a finite distance");
                break;
            }
            self.toggle(pick.0);
            to = pick.1;
        }
    }

    /// Toggles defect `a`'s match to the boundary (step 3).
    fn boundary_path(&mut self, g: &MatchingGraph, a: usize) {
        let k = self.members.len();
        let (w, bedge) = (g.edge_weight(), g.boundary_edge());
        let mut pick = (NONE, 0usize);
        for (i, &x) in self.members.iter().enumerate() {
            let be = bedge[x as usize];
            if be != NO_EDGE
                && self.dist[a * k + i].saturating_add(w[be as usize]) == self.dist_b[a]
                && x < pick.0
            {
                pick = (x, i);
            }
        }
        // A finite boundary distance is always attained; kept safe as on the GPU.
        if pick.0 == NONE {
            debug_assert!(false, "no member attains the boundary distance");
            return;
        }
        self.toggle(bedge[pick.0 as usize]);
        self.path(g, a, pick.1);
    }
}

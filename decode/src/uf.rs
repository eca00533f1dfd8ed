//! Union-find decoder (Delfosse–Nickerson) with weighted growth and peeling, on the matching
//! graph, specified so that a CUDA port can follow it line for line and give bit-identical
//! output.
//!
//! Two implementations of one specification live here: [`UfScratch::decode_reference`]
//! follows the specification literally, round by round (the shape a GPU block runs, one
//! thread per frontier vertex); [`UfScratch::decode`] is an event-driven equivalent for the
//! CPU that touches only the clusters that change. Their outputs are identical (tested on
//! every fixture shot and on random graphs). The specification's output depends only on
//! *sets* (which edges fill in a round, which vertices form a cluster), never on the order
//! a loop visits them, so a parallel port may visit in any order.
//!
//! The specification (the state and its reset values, the steps of a decode, and how the
//! event-driven version keeps to it) is `docs/uf-specification.md`.
#![forbid(unsafe_code)]

use super::graph::{MatchingGraph, NO_EDGE};

mod reference;
mod shot;
use shot::Shot;

/// "Not in any cluster" in `parent`; "no vertex" in lists.
pub const NONE: u32 = u32::MAX;
/// Root flag: the cluster holds an odd number of defects.
pub const ODD: u8 = 1;
/// Root flag: the cluster touches the boundary.
pub const BOUNDARY: u8 = 2;
/// Root flag (event-driven version, within a round): the cluster took part in a merge.
const PART: u8 = 4;
/// Root flag (event-driven version): the root is in the `roots` list.
const LISTED: u8 = 8;
/// Flag (event-driven version): no longer a root (it lost a union).
const DEAD: u8 = 16;
/// "Never" as a fill time.
const NEVER: u32 = u32::MAX;
/// `Cluster::hot`: active neighbours in more than one cluster.
const MULTI: u32 = u32::MAX - 1;

/// The event-driven version's state of one vertex (8 bytes: one access per neighbour).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Vtx {
    /// Root of the vertex's cluster; `NONE` outside clusters.
    root: u32,
    /// Growth offset: the vertex's own growth is `A(root) - off` (wrapping arithmetic).
    off: u32,
}

impl Vtx {
    const RESET: Vtx = Vtx { root: NONE, off: 0 };
}

/// The event-driven version's state of one cluster, valid at its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cluster {
    /// Active time accumulated by time `t`: `a0 + (t & mask)` (wrapping), `mask` all ones
    /// while the cluster is active, 0 while not; kept continuous when it changes.
    a0: u32,
    mask: u32,
    /// While active: a lower bound of the fill times of the cluster's growing edges.
    cmin: u32,
    size: u32,
    /// The least member.
    minv: u32,
    /// Member list: `head`, then `next[..]` up to `tail`.
    head: u32,
    tail: u32,
    /// A vertex of every active cluster that is (or was, since) a neighbour across a
    /// growing edge: `NONE` (none), a vertex whose cluster holds them all, or `MULTI`.
    hot: u32,
    /// `ODD`, `BOUNDARY`, and within a round `PART` and `LISTED`.
    flags: u8,
}

impl Cluster {
    const UNUSED: Cluster = Cluster {
        a0: 0,
        mask: 0,
        cmin: NEVER,
        size: 0,
        minv: NONE,
        head: NONE,
        tail: NONE,
        hot: NONE,
        flags: 0,
    };

    /// A new cluster of the one vertex `v` at time `t`.
    #[inline]
    fn singleton(v: u32, t: u32, flags: u8) -> Cluster {
        let mut c = Cluster {
            a0: 0,
            mask: 0,
            cmin: NEVER,
            size: 1,
            minv: v,
            head: v,
            tail: v,
            hot: NONE,
            flags: 0,
        };
        c.set_flags(flags, t);
        c
    }

    /// Sets the flags at time `t`, and the growth rate with them, keeping `at(t)`.
    #[inline]
    fn set_flags(&mut self, flags: u8, t: u32) {
        let a = self.at(t);
        self.flags = flags;
        self.mask = if self.active() { u32::MAX } else { 0 };
        self.a0 = a.wrapping_sub(t & self.mask);
    }

    /// Odd parity and no boundary.
    #[inline]
    fn active(&self) -> bool {
        self.flags & (ODD | BOUNDARY) == ODD
    }

    /// Accumulated active time at time `t` (at or after the last change of activity).
    #[inline]
    fn at(&self, t: u32) -> u32 {
        self.a0.wrapping_add(t & self.mask)
    }
}

/// The event-driven version's bound of one vertex in an active cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Vm {
    /// A lower bound of the fill times of the vertex's growing edges.
    vmin: u32,
    /// When `c0 != NONE`: the fill time of the vertex's other growing edges (a lower bound).
    second: u32,
    /// CSR position of the one edge that fills at `vmin` (`NONE`: not known, scan them all).
    c0: u32,
}

impl Vm {
    const UNUSED: Vm = Vm {
        vmin: NEVER,
        second: NEVER,
        c0: NONE,
    };
}

/// Per-instance working memory of the union-find decoder (see the module docs).
#[derive(Debug, Clone)]
pub struct UfScratch {
    // Specification state (`decode_reference`).
    parent: Vec<u32>,
    flags: Vec<u8>,
    growth: Vec<u32>,
    frontier: Vec<u32>,
    cand: Vec<u32>,
    touched: Vec<u32>,
    // Shared by both versions (all reset after each shot).
    defect: Vec<u8>,
    visited: Vec<u8>,
    parent_edge: Vec<u32>,
    verts: Vec<u32>,
    /// The reference: edges fused in the current round. The event-driven version: every
    /// edge fused so far in the shot (the full edges).
    fused: Vec<u32>,
    order: Vec<u32>,
    // Event-driven version only.
    vtx: Vec<Vtx>,
    /// Per vertex in an active cluster (not reset: written before it is read).
    vm: Vec<Vm>,
    /// Per vertex index, valid at roots.
    clusters: Vec<Cluster>,
    /// Member lists (see `Cluster::head`).
    next: Vec<u32>,
    /// Per vertex: 1 once seen across a growing edge from or to an active cluster while
    /// its own cluster was active (a rate-2 edge).
    hotv: Vec<u8>,
    /// Forest: per vertex the first of its full-edge slots (`NONE`: none); a slot is
    /// `[edge, other end, next slot]`.
    fhead: Vec<u32>,
    fslot: Vec<[u32; 3]>,
    /// Forest: vertices with a full boundary edge.
    bseed: Vec<u32>,
    /// Active roots (`LISTED`; at a round's start it may still hold roots that went
    /// inactive or lost a union, which that round drops).
    roots: Vec<u32>,
    /// Clusters taking part in this round's merges, as at round start: member sublist
    /// (head, tail), bound, and whether active.
    part_head: Vec<u32>,
    part_tail: Vec<u32>,
    part_cmin: Vec<u32>,
    part_hot: Vec<u32>,
    part_active: Vec<bool>,
    /// Isolated-pairs fast path, per defect (not reset: written before it is read):
    /// `[fill time, partner, CSR position of the partner edge]`.
    iso: Vec<[u32; 3]>,
}

/// Step 4 of the specification: peel the forest listed in BFS `order`, leaves first; an
/// edge is in the correction iff the subtree below it holds an odd number of defects.
/// Clears `defect` along the way and returns the observable flips; `correction` is given
/// each edge of the correction (a no-op but for models of more than 64 observables).
fn peel(
    g: &MatchingGraph,
    order: &[u32],
    defect: &mut [u8],
    parent_edge: &[u32],
    correction: &mut impl FnMut(u32),
) -> u64 {
    let b = g.boundary();
    let (edge_u, edge_v, edge_obs) = (g.edge_u(), g.edge_v(), g.edge_obs());
    let mut obs = 0u64;
    for &v in order.iter().rev() {
        let e = parent_edge[v as usize];
        if defect[v as usize] == 0 || e == NO_EDGE {
            continue;
        }
        correction(e);
        let e = e as usize;
        obs ^= edge_obs[e];
        defect[v as usize] = 0;
        let u = edge_u[e] ^ edge_v[e] ^ v;
        if u != b {
            defect[u as usize] ^= 1;
        }
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
            growth: Vec::new(),
            frontier: Vec::new(),
            cand: Vec::new(),
            touched: Vec::new(),
            defect: Vec::new(),
            visited: Vec::new(),
            parent_edge: Vec::new(),
            verts: Vec::new(),
            fused: Vec::new(),
            order: Vec::new(),
            vtx: Vec::new(),
            vm: Vec::new(),
            clusters: Vec::new(),
            next: Vec::new(),
            hotv: Vec::new(),
            fhead: Vec::new(),
            fslot: Vec::new(),
            bseed: Vec::new(),
            roots: Vec::new(),
            part_head: Vec::new(),
            part_tail: Vec::new(),
            part_cmin: Vec::new(),
            part_hot: Vec::new(),
            part_active: Vec::new(),
            iso: Vec::new(),
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
            self.vtx.resize(nv, Vtx::RESET);
            self.vm.resize(nv, Vm::UNUSED);
            // One more: the sentinel that `Vtx::root == NONE` reads as (inactive, no growth).
            self.clusters.resize(nv + 1, Cluster::UNUSED);
            self.next.resize(nv, NONE);
            self.fhead.resize(nv, NONE);
            self.hotv.resize(nv, 0);
            // Lists of vertices or clusters: each enters each list at most once per round.
            self.verts.resize(nv, 0);
            self.frontier.resize(nv, 0);
            self.order.resize(nv, 0);
            self.bseed.resize(nv, 0);
            self.roots.resize(nv, 0);
            self.part_head.resize(nv, 0);
            self.part_tail.resize(nv, 0);
            self.part_cmin.resize(nv, NEVER);
            self.part_hot.resize(nv, NONE);
            self.part_active.resize(nv, false);
            self.iso.resize(nv, [0; 3]);
        }
        if self.growth.len() < ne {
            self.growth.resize(ne, 0);
            // Lists of edges: an edge is touched and fills once; it is a candidate at most
            // twice per round (once from each endpoint); a full edge has two forest slots.
            self.touched.resize(ne, 0);
            self.fused.resize(2 * ne, 0);
            self.cand.resize(2 * ne, 0);
            self.fslot.resize(2 * ne, [0; 3]);
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
        self.decode_timed(g, dets).0
    }

    /// [`UfScratch::decode`], with the time growth stopped: the specification's sum of the
    /// rounds' `delta` (0 without defects), which [`UfScratch::decode_reference_timed`]
    /// also returns. The split fast path ([`super::uf_split`]) bounds a cluster's reach by
    /// it.
    ///
    /// # Panics
    /// If this scratch was not sized for `g`.
    pub fn decode_timed(&mut self, g: &MatchingGraph, dets: &[u8]) -> (u64, u32) {
        self.decode_with(g, dets, &mut |_| {})
    }

    /// [`UfScratch::decode`], with the edges of the correction appended to `correction`
    /// (cleared first): for models of more than 64 observables, whose flips from `L64` on
    /// are those of these edges ([`MatchingGraph::edge_high_observables`]).
    ///
    /// # Panics
    /// If this scratch was not sized for `g`.
    pub fn decode_correction(
        &mut self,
        g: &MatchingGraph,
        dets: &[u8],
        correction: &mut Vec<u32>,
    ) -> u64 {
        correction.clear();
        self.decode_with(g, dets, &mut |e| correction.push(e)).0
    }

    #[inline]
    fn decode_with(
        &mut self,
        g: &MatchingGraph,
        dets: &[u8],
        correction: &mut impl FnMut(u32),
    ) -> (u64, u32) {
        self.check(g);
        let n = g.num_detectors();
        let dets = &dets[..n.div_ceil(8).min(dets.len())];
        // No defect (most shots at low noise): return before touching any state.
        let whole = dets.len().min(n / 8);
        let tail_mask = if n % 8 == 0 { 0 } else { (1u8 << (n % 8)) - 1 };
        let tail = dets.get(whole).map_or(0, |&byte| byte & tail_mask);
        if tail == 0 && dets[..whole].iter().fold(0u8, |a, &byte| a | byte) == 0 {
            return (0, 0);
        }
        if let Some(done) = self.isolated_with(g, dets, correction) {
            return done;
        }
        let mut shot = Shot::new(self, g);
        // 1. Defects: singleton active clusters.
        shot.seed(dets, n);
        // 2. Rounds: jump to the next fill time.
        shot.grow();
        // 3. Spanning forest of the full edges (the fused ones).
        shot.forest_lists();
        let n_order = shot.forest_order();
        // 4. Peel, leaves first.
        let obs = peel(
            g,
            &shot.order[..n_order],
            &mut *shot.defect,
            &*shot.parent_edge,
            correction,
        );
        // 5. Reset what was touched.
        shot.reset();
        (obs, shot.t_fill)
    }

    /// The fast path for syndromes whose defects settle in one step each (most shots at low
    /// noise): `Some(obs)` when it applies, and then `obs` is [`UfScratch::decode`]'s (and
    /// the specification's) output; `None` otherwise. Touches no per-shot state that needs
    /// a reset.
    ///
    /// Each defect `x` takes as *partner* the incident edge that fills first if every
    /// cluster stayed a singleton: to another defect at `ceil(w / 2)` (both ends grow), to
    /// anything else (the boundary included) at `w`; `t_x` is that time. It applies when
    /// every defect's least time is held by one edge only, every partner is a defect that
    /// chose `x` back or the boundary, and every other edge from `x` to a defect `z` has
    /// `w > t_x + t_z`. Then no other edge ever fills: an edge from `x` to a vertex in no
    /// cluster grows at rate 1 until `t_x` (to `t_x < w`), one to a defect `z` at rate 2
    /// until `min(t_x, t_z)` and at rate 1 until `max(t_x, t_z)` (to `t_x + t_z < w`), and
    /// nothing but defects and the boundary is ever in a cluster. So the specification's
    /// rounds end exactly at the partners' times, each fills its partner edge and nothing
    /// else; a pair becomes an even cluster, a defect with its boundary edge a boundary
    /// one, and both stop. The forest is the partner edges (a pair is a tree rooted at its
    /// least vertex, a boundary partner a child of `B`), and peeling flips the observables
    /// of every partner edge once. Growth stops at the last partner time, the greatest
    /// `t_x`, returned with `obs`.
    pub fn isolated(&mut self, g: &MatchingGraph, dets: &[u8]) -> Option<(u64, u32)> {
        self.isolated_with(g, dets, &mut |_| {})
    }

    /// [`UfScratch::isolated`], giving `correction` the partner edges when it answers.
    #[inline]
    fn isolated_with(
        &mut self,
        g: &MatchingGraph,
        dets: &[u8],
        correction: &mut impl FnMut(u32),
    ) -> Option<(u64, u32)> {
        let n = g.num_detectors();
        let b = g.boundary();
        let (adj_offset, adj) = (g.adj_offset(), g.adj_nbr_weight());
        let (adj_edge, edge_obs) = (g.adj_edge(), g.edge_obs());
        let is_defect = |z: u32| {
            (z as usize) < n
                && dets
                    .get(z as usize >> 3)
                    .is_some_and(|&m| m >> (z & 7) & 1 != 0)
        };
        let iso = &mut self.iso[..];
        // Defects, then those with a defect neighbour besides the partner (checked after).
        let (list, check) = (&mut self.verts[..], &mut self.order[..]);
        let (mut n_list, mut n_check) = (0, 0);
        for (i, &byte) in dets.iter().enumerate() {
            let mut m = byte;
            while m != 0 {
                let x = i * 8 + m.trailing_zeros() as usize;
                m &= m - 1;
                if x >= n {
                    break;
                }
                let lo = adj_offset[x] as usize;
                let row = &adj[lo..adj_offset[x + 1] as usize];
                // Least key, its position, whether it is tied, defect neighbours.
                let (mut best, mut at, mut tied, mut n_def) = (NEVER, 0, false, 0u32);
                for (j, &[y, w]) in row.iter().enumerate() {
                    let d = is_defect(y);
                    n_def += u32::from(d);
                    let key = if d { (w + 1) >> 1 } else { w };
                    tied |= key == best;
                    if key < best {
                        (best, at, tied) = (key, j, false);
                    }
                }
                if best == NEVER || tied {
                    return None;
                }
                let y = row[at][0];
                let d = is_defect(y);
                // A partner already seen must have chosen `x` back (checked for all below).
                if (!d && y != b) || (d && (y as usize) < x && iso[y as usize][1] != x as u32) {
                    return None;
                }
                iso[x] = [best, y, (lo + at) as u32];
                list[n_list] = x as u32;
                n_list += 1;
                if n_def > u32::from(d) {
                    check[n_check] = x as u32;
                    n_check += 1;
                }
            }
        }
        let (mut obs, mut t_end) = (0u64, 0u32);
        for &x in &list[..n_list] {
            let [t_x, y, pos] = iso[x as usize];
            if y != b && iso[y as usize][1] != x {
                return None;
            }
            t_end = t_end.max(t_x);
            if y == b || x < y {
                obs ^= edge_obs[adj_edge[pos as usize] as usize];
            }
        }
        for &x in &check[..n_check] {
            let xu = x as usize;
            let [t_x, y, _] = iso[xu];
            let row = &adj[adj_offset[xu] as usize..adj_offset[xu + 1] as usize];
            for &[z, w] in row {
                if z != y && is_defect(z) && w <= t_x + iso[z as usize][0] {
                    return None;
                }
            }
        }
        // It answers: the partner edges are the correction.
        for &x in &list[..n_list] {
            let [_, y, pos] = iso[x as usize];
            if y == b || x < y {
                correction(adj_edge[pos as usize]);
            }
        }
        Some((obs, t_end))
    }
}

#[cfg(test)]
pub(crate) mod tests;

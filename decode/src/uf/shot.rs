//! The event-driven version's growth of one shot ([`UfScratch::decode_timed`] past its
//! fast exits), step by step as the module docs of [`super`] give them, and the vertex
//! scan the steps are built on.
#![forbid(unsafe_code)]

use super::{Cluster, UfScratch, Vm, Vtx, BOUNDARY, DEAD, LISTED, MULTI, NEVER, NONE, ODD, PART};
use crate::graph::{MatchingGraph, NO_EDGE};

/// Records in cluster `r` that the cluster of vertex `y` (another one, active) is a
/// neighbour.
#[inline]
fn hot_add(cl: &mut [Cluster], vtx: &[Vtx], r: u32, y: u32) {
    let h = cl[r as usize].hot;
    if h == NONE {
        cl[r as usize].hot = y;
    } else if h != MULTI && (y == MULTI || vtx[h as usize].root != vtx[y as usize].root) {
        cl[r as usize].hot = MULTI;
    }
}

/// Records that `x` (cluster `r`) and `y` (cluster `ry`), both active, are neighbours across
/// a growing edge.
#[inline(never)]
fn note_active_pair(
    cl: &mut [Cluster],
    vtx: &[Vtx],
    hotv: &mut [u8],
    (r, x): (u32, u32),
    (ry, y): (u32, u32),
) {
    hot_add(cl, vtx, r, y);
    hot_add(cl, vtx, ry, x);
    hotv[x as usize] = 1;
    hotv[y as usize] = 1;
}

/// Scans every edge of vertex `x` (in the active cluster `r`, whose accumulated active time
/// is `a_r`) at time `t`: appends the edges that fill at `t` to `fused` (a due scan; an
/// edge may be appended twice in a round, once from each end); returns the least fill time
/// of the others, with the edge that has it if only one does (and then the next fill
/// time). Reads cluster states only, so every scan of a round sees the round's start;
/// records active neighbours (`hot_add`, `hotv`). Not inlined: its loop gets the registers.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn scan_vertex(
    (adj, adj_edge, adj_offset): (&[[u32; 2]], &[u32], &[u32]),
    vtx: &[Vtx],
    cl: &mut [Cluster],
    hotv: &mut [u8],
    (fused, n_full): (&mut [u32], &mut usize),
    x: u32,
    r: u32,
    a_r: u32,
    t: u32,
) -> Vm {
    let xu = x as usize;
    // `cl` ends with the sentinel: `min(root, solo)` is always in range.
    let Some(solo) = cl.len().checked_sub(1) else {
        return Vm::UNUSED;
    };
    let s_x = a_r.wrapping_sub(vtx[xu].off);
    let (lo, hi) = (adj_offset[xu] as usize, adj_offset[xu + 1] as usize);
    let row = &adj[lo..hi];
    let edges = &adj_edge[lo..hi];
    // The two least (fill time, row position) keys, without branches.
    let (mut k1, mut k2) = (u64::MAX, u64::MAX);
    // Positions (modulo 64) of growing edges to active clusters, handled after the loop.
    let (mut pairs, mut bit) = (0u64, 1u64);
    let mut nf = *n_full;
    for (i, &[y, w]) in row.iter().enumerate() {
        let vy = vtx[y as usize];
        // Outside clusters: the sentinel cluster (inactive, no growth).
        let q = &cl[(vy.root as usize).min(solo)];
        let (a0, mask) = (q.a0, q.mask);
        let grown = s_x
            .wrapping_add(a0.wrapping_add(t & mask))
            .wrapping_sub(vy.off);
        // Internal edges (full ones included, once merged) do not grow: all ones when
        // growing, else 0.
        let g = u32::from(vy.root != r).wrapping_neg();
        // All ones when growing towards an active cluster (sign-extended), else 0.
        pairs |= bit & ((mask & g) as i32 as u64);
        bit = bit.rotate_left(1);
        if u32::from(grown >= w) & g != 0 {
            fused[nf] = edges[i];
            nf += 1;
            continue;
        }
        // ceil((w - grown) / rate) for rate 1 or 2, without a division.
        let shift = mask & 1;
        let f = t.wrapping_add(w.wrapping_sub(grown).wrapping_add(shift) >> shift);
        // Not growing: all ones (never least).
        let key = (u64::from(f) << 32 | i as u64) | (!g as i32 as u64);
        k2 = k2.min(k1.max(key));
        k1 = k1.min(key);
    }
    *n_full = nf;
    // Active neighbours: the positions flagged (modulo 64), checked again.
    let mut note = |y: u32| {
        let ry = vtx[y as usize].root;
        if ry != r && ry != NONE && cl[ry as usize].mask != 0 {
            note_active_pair(cl, vtx, hotv, (r, x), (ry, y));
        }
    };
    while pairs != 0 {
        let i = pairs.trailing_zeros() as usize;
        pairs &= pairs - 1;
        note(row[i][0]);
    }
    for &[y, _] in row.get(64..).unwrap_or(&[]) {
        note(y);
    }
    let (m1, m2) = ((k1 >> 32) as u32, (k2 >> 32) as u32);
    Vm {
        vmin: m1,
        second: m2,
        // Cached only when one edge fills first (its CSR position).
        c0: if m1 != NEVER && m2 != m1 {
            (k1 as u32).wrapping_add(lo as u32)
        } else {
            NONE
        },
    }
}

/// One shot of the event-driven version ([`UfScratch::decode_timed`], past its fast
/// exits): the scratch's arrays and the graph's as slices (bounds and base pointers stay in
/// registers), and the growth's counts and times. Its methods are the steps, in order.
pub(super) struct Shot<'a> {
    b: u32,
    adj_offset: &'a [u32],
    adj: &'a [[u32; 2]],
    adj_edge: &'a [u32],
    edge_u: &'a [u32],
    edge_v: &'a [u32],
    boundary_edge: &'a [u32],
    pub(super) defect: &'a mut [u8],
    visited: &'a mut [u8],
    pub(super) parent_edge: &'a mut [u32],
    verts: &'a mut [u32],
    fused: &'a mut [u32],
    pub(super) order: &'a mut [u32],
    vtx: &'a mut [Vtx],
    vm: &'a mut [Vm],
    cl: &'a mut [Cluster],
    next: &'a mut [u32],
    hotv: &'a mut [u8],
    fhead: &'a mut [u32],
    fslot: &'a mut [[u32; 3]],
    bseed: &'a mut [u32],
    roots: &'a mut [u32],
    part_head: &'a mut [u32],
    part_tail: &'a mut [u32],
    part_cmin: &'a mut [u32],
    part_hot: &'a mut [u32],
    part_active: &'a mut [bool],
    n_verts: usize,
    n_roots: usize,
    n_full: usize,
    /// Clusters taking part in the current round's merges (step 2c).
    n_part: usize,
    /// Seeds of the forest's boundary tree (step 3).
    n_seed: usize,
    /// The sentinel cluster, `cl`'s last.
    solo: usize,
    t: u32,
    /// The last round that filled an edge: the specification's rounds are the rounds
    /// here that fill (each of its rounds fills one at least), so this is its sum of
    /// `delta`. (A round here may fill nothing: a bound was only a lower bound.)
    pub(super) t_fill: u32,
}

impl<'a> Shot<'a> {
    #[inline]
    pub(super) fn new(s: &'a mut UfScratch, g: &'a MatchingGraph) -> Shot<'a> {
        let UfScratch {
            defect,
            visited,
            parent_edge,
            verts,
            fused,
            order,
            vtx,
            vm,
            clusters,
            next,
            hotv,
            fhead,
            fslot,
            bseed,
            roots,
            part_head,
            part_tail,
            part_cmin,
            part_hot,
            part_active,
            ..
        } = s;
        let solo = clusters.len() - 1;
        debug_assert_eq!(clusters[solo], Cluster::UNUSED);
        Shot {
            b: g.boundary(),
            adj_offset: g.adj_offset(),
            adj: g.adj_nbr_weight(),
            adj_edge: g.adj_edge(),
            edge_u: g.edge_u(),
            edge_v: g.edge_v(),
            boundary_edge: g.boundary_edge(),
            defect,
            visited,
            parent_edge,
            verts,
            fused,
            order,
            vtx,
            vm,
            cl: clusters,
            next,
            hotv,
            fhead,
            fslot,
            bseed,
            roots,
            part_head,
            part_tail,
            part_cmin,
            part_hot,
            part_active,
            n_verts: 0,
            n_roots: 0,
            n_full: 0,
            n_part: 0,
            n_seed: 0,
            solo,
            t: 0,
            t_fill: 0,
        }
    }

    /// Step 1: each defect of `dets` (the first `n` bits) a singleton active cluster,
    /// listed, and the boundary's cluster; then every root's first scan.
    #[inline]
    pub(super) fn seed(&mut self, dets: &[u8], n: usize) {
        for (i, &byte) in dets.iter().enumerate() {
            let mut m = byte;
            while m != 0 {
                let v = i * 8 + m.trailing_zeros() as usize;
                m &= m - 1;
                if v >= n {
                    break;
                }
                self.vtx[v] = Vtx {
                    root: v as u32,
                    off: 0,
                };
                self.cl[v] = Cluster::singleton(v as u32, 0, ODD | LISTED);
                self.next[v] = NONE;
                self.defect[v] = 1;
                self.verts[self.n_verts] = v as u32;
                self.n_verts += 1;
                self.roots[self.n_roots] = v as u32;
                self.n_roots += 1;
            }
        }
        let (b, bu) = (self.b, self.b as usize);
        self.vtx[bu] = Vtx { root: b, off: 0 };
        self.cl[bu] = Cluster::singleton(b, 0, BOUNDARY);
        self.next[bu] = NONE;
        for i in 0..self.n_roots {
            let r = self.roots[i];
            self.cl[r as usize].cmin = self.scan_vertex(r, r, 0, false);
        }
    }

    /// Scans vertex `x` of the active cluster `r` (see [`scan_vertex`]; `fuse`: a due
    /// scan, which may fill edges); records its bound in `vm` and returns it.
    #[inline(always)]
    fn scan_vertex(&mut self, x: u32, r: u32, a_r: u32, fuse: bool) -> u32 {
        let before = self.n_full;
        let v = scan_vertex(
            (self.adj, self.adj_edge, self.adj_offset),
            self.vtx,
            self.cl,
            self.hotv,
            (self.fused, &mut self.n_full),
            x,
            r,
            a_r,
            self.t,
        );
        debug_assert!(
            fuse || self.n_full == before,
            "an edge filled outside a due scan"
        );
        self.vm[x as usize] = v;
        v.vmin
    }

    /// Scans the members `first..=last` (a sublist) of the active cluster `r`; returns
    /// their least fill time.
    #[inline]
    fn scan_part(&mut self, r: u32, first: u32, last: u32) -> u32 {
        let a_r = self.cl[r as usize].at(self.t);
        let mut m = NEVER;
        let mut x = first;
        loop {
            m = m.min(self.scan_vertex(x, r, a_r, false));
            if x == last {
                break;
            }
            x = self.next[x as usize];
        }
        m
    }

    /// Step 2: rounds, each at the next fill time, until no cluster is active.
    #[inline]
    pub(super) fn grow(&mut self) {
        loop {
            let tn = self.least_bound();
            if tn == NEVER {
                break;
            }
            debug_assert!(tn > self.t, "time went from {} to {tn}", self.t);
            self.t = tn;
            let first = self.n_full;
            self.fill_due();
            if self.n_full == first {
                continue;
            }
            self.t_fill = self.t;
            self.freeze_parts(first);
            self.unite(first);
            self.bound_parts();
            self.slow_down();
            self.list_new_roots();
        }
    }

    /// The least bound of the listed roots; drops the roots that went inactive or lost a
    /// union.
    #[inline]
    fn least_bound(&mut self) -> u32 {
        let mut tn = NEVER;
        let mut kept = 0;
        for i in 0..self.n_roots {
            let r = self.roots[i];
            let c = &mut self.cl[r as usize];
            let keep = c.flags & (ODD | BOUNDARY | DEAD) == ODD;
            if keep {
                tn = tn.min(c.cmin);
            } else {
                c.flags &= !LISTED;
            }
            self.roots[kept] = r;
            kept += usize::from(keep);
        }
        self.n_roots = kept;
        tn
    }

    /// Steps 2a/2b: the edges that fill now, from the clusters due now; exact bounds
    /// there.
    #[inline]
    fn fill_due(&mut self) {
        let t = self.t;
        for i in 0..self.n_roots {
            let r = self.roots[i];
            let c = self.cl[r as usize];
            if c.cmin != t {
                continue;
            }
            let a_r = c.at(t);
            let mut m = NEVER;
            let mut x = c.head;
            loop {
                let xu = x as usize;
                let v = self.vm[xu];
                debug_assert!(v.vmin >= t);
                if v.vmin > t {
                    m = m.min(v.vmin);
                } else if v.c0 != NONE && self.fill_first(xu, v.c0, r, a_r) {
                    self.vm[xu] = Vm {
                        vmin: v.second,
                        second: NEVER,
                        c0: NONE,
                    };
                    m = m.min(v.second);
                } else {
                    m = m.min(self.scan_vertex(x, r, a_r, true));
                }
                if x == c.tail {
                    break;
                }
                x = self.next[xu];
            }
            self.cl[r as usize].cmin = m;
        }
    }

    /// The one edge (CSR position `c0`) found to fill first at the last scan of `x`
    /// (cluster `r`) fills now, unless internal since; either way the rest fill from
    /// `second` on: true. If it has not grown to its weight (bounds moved): false, scan.
    #[inline(always)]
    fn fill_first(&mut self, xu: usize, c0: u32, r: u32, a_r: u32) -> bool {
        let [y, w] = self.adj[c0 as usize];
        let vy = self.vtx[y as usize];
        let q = &self.cl[(vy.root as usize).min(self.solo)];
        let grown = a_r
            .wrapping_sub(self.vtx[xu].off)
            .wrapping_add(q.at(self.t).wrapping_sub(vy.off));
        if vy.root == r {
            true
        } else if grown >= w {
            self.fused[self.n_full] = self.adj_edge[c0 as usize];
            self.n_full += 1;
            true
        } else {
            false
        }
    }

    /// Step 2c: the clusters taking part in the merges of the edges filled from `first`
    /// on, frozen at `t`, as before the unions.
    #[inline]
    fn freeze_parts(&mut self, first: usize) {
        let t = self.t;
        let mut n_part = 0;
        for i in first..self.n_full {
            let e = self.fused[i] as usize;
            for z in [self.edge_u[e], self.edge_v[e]] {
                let zu = z as usize;
                let r = self.vtx[zu].root;
                if r == NONE {
                    self.vtx[zu] = Vtx { root: z, off: 0 };
                    self.cl[zu] = Cluster::singleton(z, t, PART);
                    self.next[zu] = NONE;
                    self.verts[self.n_verts] = z;
                    self.n_verts += 1;
                    self.part_head[n_part] = z;
                    self.part_tail[n_part] = z;
                    self.part_cmin[n_part] = NEVER;
                    self.part_hot[n_part] = NONE;
                    self.part_active[n_part] = false;
                    n_part += 1;
                } else {
                    let c = &mut self.cl[r as usize];
                    if c.flags & PART == 0 {
                        let active = c.active();
                        self.part_head[n_part] = c.head;
                        self.part_tail[n_part] = c.tail;
                        self.part_cmin[n_part] = c.cmin;
                        self.part_hot[n_part] = c.hot;
                        self.part_active[n_part] = active;
                        n_part += 1;
                        c.flags |= PART;
                    }
                }
            }
        }
        self.n_part = n_part;
    }

    /// Unions along the edges filled from `first` on: the larger cluster wins (on a tie
    /// the smaller root) and relabels the other's members, keeping their growth; lists
    /// concatenate.
    #[inline]
    fn unite(&mut self, first: usize) {
        let (t, vtx, next, cl) = (self.t, &mut *self.vtx, &mut *self.next, &mut *self.cl);
        for &e in &self.fused[first..self.n_full] {
            let rx = vtx[self.edge_u[e as usize] as usize].root;
            let ry = vtx[self.edge_v[e as usize] as usize].root;
            if rx == ry {
                continue;
            }
            let (cx, cy) = (cl[rx as usize], cl[ry as usize]);
            let (win, cw, cs) = if cx.size > cy.size || (cx.size == cy.size && rx < ry) {
                (rx, cx, cy)
            } else {
                (ry, cy, cx)
            };
            let (a_w, a_s) = (cw.at(t), cs.at(t));
            let shift = a_w.wrapping_sub(a_s);
            let mut m = cs.head;
            while m != NONE {
                let v = &mut vtx[m as usize];
                v.root = win;
                v.off = v.off.wrapping_add(shift);
                m = next[m as usize];
            }
            next[cw.tail as usize] = cs.head;
            cl[if win == rx { ry } else { rx } as usize].flags |= DEAD;
            let c = &mut cl[win as usize];
            c.size = cw.size + cs.size;
            c.minv = cw.minv.min(cs.minv);
            c.set_flags((cw.flags ^ (cs.flags & ODD)) | (cs.flags & BOUNDARY), t);
            c.tail = cs.tail;
        }
    }

    /// New bounds after the unions: inactive clusters hold none; an active one keeps the
    /// bounds (and hot neighbours) of its parts that were active and scans the parts that
    /// were not.
    #[inline]
    fn bound_parts(&mut self) {
        let n_part = self.n_part;
        for &h in &self.part_head[..n_part] {
            let c = &mut self.cl[self.vtx[h as usize].root as usize];
            c.cmin = NEVER;
            c.hot = NONE;
        }
        for p in 0..n_part {
            let r = self.vtx[self.part_head[p] as usize].root;
            if self.part_active[p] && self.cl[r as usize].active() {
                let c = &mut self.cl[r as usize];
                c.cmin = c.cmin.min(self.part_cmin[p]);
                if self.part_hot[p] != NONE {
                    hot_add(self.cl, self.vtx, r, self.part_hot[p]);
                }
            }
        }
        for p in 0..n_part {
            let r = self.vtx[self.part_head[p] as usize].root;
            if !self.part_active[p] && self.cl[r as usize].active() {
                let m = self.scan_part(r, self.part_head[p], self.part_tail[p]);
                let c = &mut self.cl[r as usize];
                c.cmin = c.cmin.min(m);
            }
        }
    }

    /// A part that went inactive slows its edges to active clusters from rate 2 to 1, so
    /// their fill times come later than those clusters' bounds assumed: lower those
    /// bounds, unless the part had no active neighbour outside its new cluster.
    #[inline]
    fn slow_down(&mut self) {
        let t = self.t;
        let (adj_offset, adj) = (self.adj_offset, self.adj);
        let (vtx, cl, vm, hotv, next) = (
            &*self.vtx,
            &mut *self.cl,
            &mut *self.vm,
            &*self.hotv,
            &*self.next,
        );
        for p in 0..self.n_part {
            let r = vtx[self.part_head[p] as usize].root;
            let h = self.part_hot[p];
            if !self.part_active[p] || cl[r as usize].active() || h == NONE {
                continue;
            }
            if h != MULTI {
                let rh = vtx[h as usize].root;
                if rh == r || !cl[rh as usize].active() {
                    continue;
                }
            }
            let a_r = cl[r as usize].at(t);
            let (mut x, last) = (self.part_head[p], self.part_tail[p]);
            loop {
                let xu = x as usize;
                let s_x = a_r.wrapping_sub(vtx[xu].off);
                let (lo, hi) = if hotv[xu] == 0 {
                    (0, 0)
                } else {
                    (adj_offset[xu] as usize, adj_offset[xu + 1] as usize)
                };
                for &[y, w] in &adj[lo..hi] {
                    let vy = vtx[y as usize];
                    if vy.root == r || vy.root == NONE {
                        continue;
                    }
                    let q = &mut cl[vy.root as usize];
                    if !q.active() {
                        continue;
                    }
                    let grown = s_x.wrapping_add(q.at(t).wrapping_sub(vy.off));
                    debug_assert!(grown < w, "an edge full outside a due scan");
                    let f = t + w.saturating_sub(grown);
                    q.cmin = q.cmin.min(f);
                    let v = &mut vm[y as usize];
                    v.vmin = v.vmin.min(f);
                    v.c0 = NONE;
                }
                if x == last {
                    break;
                }
                x = next[xu];
            }
        }
    }

    /// Active roots that are new to the list join it (the next round's first loop drops
    /// those that went inactive or lost a union).
    #[inline]
    fn list_new_roots(&mut self) {
        for &h in &self.part_head[..self.n_part] {
            let r = self.vtx[h as usize].root;
            let c = &mut self.cl[r as usize];
            c.flags &= !PART;
            if c.flags & (ODD | BOUNDARY | LISTED) == ODD {
                c.flags |= LISTED;
                self.roots[self.n_roots] = r;
                self.n_roots += 1;
            }
        }
    }

    /// Step 3, the lists: per vertex, its full edges in increasing edge index (the CSR
    /// order); the vertices whose boundary edge is full, in increasing order.
    #[inline]
    pub(super) fn forest_lists(&mut self) {
        let b = self.b;
        let (fhead, fslot, bseed) = (&mut *self.fhead, &mut *self.fslot, &mut *self.bseed);
        let (mut n_slot, mut n_seed) = (0u32, 0);
        for &e in &self.fused[..self.n_full] {
            let (u, v) = (self.edge_u[e as usize], self.edge_v[e as usize]);
            if v == b {
                if bseed[..n_seed].contains(&u) {
                    continue;
                }
                let mut i = n_seed;
                while i > 0 && bseed[i - 1] > u {
                    bseed[i] = bseed[i - 1];
                    i -= 1;
                }
                bseed[i] = u;
                n_seed += 1;
                continue;
            }
            for (x, y) in [(u, v), (v, u)] {
                // Insert after the slots of lower edges (once: `fused` may hold an edge
                // twice).
                let (mut prev, mut s) = (NONE, fhead[x as usize]);
                while s != NONE && fslot[s as usize][0] < e {
                    prev = s;
                    s = fslot[s as usize][2];
                }
                if s != NONE && fslot[s as usize][0] == e {
                    continue;
                }
                fslot[n_slot as usize] = [e, y, s];
                if prev == NONE {
                    fhead[x as usize] = n_slot;
                } else {
                    fslot[prev as usize][2] = n_slot;
                }
                n_slot += 1;
            }
        }
        self.n_seed = n_seed;
    }

    /// Step 3, the order: 3a. children of the boundary, then BFS; this reaches every
    /// vertex of the boundary's cluster. 3b. Every other cluster is a tree of its own,
    /// rooted at its least vertex (the first of `verts` in index order that 3a left
    /// unvisited); the order of the trees does not matter, as each peels on its own.
    /// Returns the vertices in `order`.
    #[inline]
    pub(super) fn forest_order(&mut self) -> usize {
        let (visited, parent_edge, order) =
            (&mut *self.visited, &mut *self.parent_edge, &mut *self.order);
        visited[self.b as usize] = 1;
        let mut n_order = 0;
        for &v in &self.bseed[..self.n_seed] {
            visited[v as usize] = 1;
            parent_edge[v as usize] = self.boundary_edge[v as usize];
            order[n_order] = v;
            n_order += 1;
        }
        let (mut head, mut next_root) = (0, 0);
        loop {
            while head < n_order {
                let mut s = self.fhead[order[head] as usize];
                head += 1;
                while s != NONE {
                    let [e, y, after] = self.fslot[s as usize];
                    s = after;
                    let y = y as usize;
                    if visited[y] == 0 {
                        visited[y] = 1;
                        parent_edge[y] = e;
                        order[n_order] = y as u32;
                        n_order += 1;
                    }
                }
            }
            let mut root = NONE;
            while next_root < self.n_verts {
                let v = self.verts[next_root];
                next_root += 1;
                let c = &self.cl[v as usize];
                if self.vtx[v as usize].root == v && c.flags & BOUNDARY == 0 {
                    root = c.minv;
                    break;
                }
            }
            if root == NONE {
                break;
            }
            visited[root as usize] = 1;
            parent_edge[root as usize] = NO_EDGE;
            order[n_order] = root;
            n_order += 1;
        }
        n_order
    }

    /// Step 5: resets what was touched.
    #[inline]
    pub(super) fn reset(&mut self) {
        for &v in self.verts[..self.n_verts]
            .iter()
            .chain(std::iter::once(&self.b))
        {
            let v = v as usize;
            self.vtx[v] = Vtx::RESET;
            self.defect[v] = 0;
            self.visited[v] = 0;
            self.fhead[v] = NONE;
            self.hotv[v] = 0;
        }
    }
}

//! The specification of the module docs of [`super`], round by round
//! ([`UfScratch::decode_reference`]): the version a GPU port follows, and the one the
//! event-driven [`UfScratch::decode`] is tested against. [`Rounds`] holds one shot's state;
//! its methods are the steps, in order.
#![forbid(unsafe_code)]

use super::{peel, UfScratch, BOUNDARY, NONE, ODD};
use crate::graph::{MatchingGraph, NO_EDGE};

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

/// Steps 3 (forest), 4 (peel) and 5 (reset of the vertex state) of the specification, as
/// [`UfScratch::decode_reference`] runs them.
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
    let obs = peel(g, &order[..n_order], defect, parent_edge, &mut |_| {});

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
    /// The specification, round by round, exactly as the module docs list the steps: the
    /// version a GPU port follows. Same output as [`UfScratch::decode`].
    ///
    /// # Panics
    /// If this scratch was not sized for `g`.
    pub fn decode_reference(&mut self, g: &MatchingGraph, dets: &[u8]) -> u64 {
        self.decode_reference_timed(g, dets).0
    }

    /// [`UfScratch::decode_reference`], with the sum of the rounds' `delta` (the time
    /// growth stopped; 0 without defects).
    ///
    /// # Panics
    /// If this scratch was not sized for `g`.
    pub fn decode_reference_timed(&mut self, g: &MatchingGraph, dets: &[u8]) -> (u64, u32) {
        self.reference(g, dets, None)
    }

    /// [`UfScratch::decode_reference`], with the full edges appended to `full` in the order
    /// they filled (step 2c's order), for [`crate::uf_potential`].
    ///
    /// # Panics
    /// If this scratch was not sized for `g`.
    pub fn decode_reference_logged(
        &mut self,
        g: &MatchingGraph,
        dets: &[u8],
        full: &mut Vec<u32>,
    ) -> u64 {
        self.reference(g, dets, Some(full)).0
    }

    fn reference(
        &mut self,
        g: &MatchingGraph,
        dets: &[u8],
        mut log: Option<&mut Vec<u32>>,
    ) -> (u64, u32) {
        self.check(g);
        let mut shot = Rounds::new(self, g);
        // 1. Defects.
        if !shot.seed(dets) {
            return (0, 0);
        }
        // 2. Growth rounds.
        let mut time = 0u32;
        while let Some((delta, n_cand)) = shot.step_size() {
            time += delta;
            let n_fused = shot.grow(delta, n_cand);
            if let Some(log) = log.as_deref_mut() {
                log.extend_from_slice(&shot.s.fused[..n_fused]);
            }
            shot.merge(n_fused);
        }
        // 3, 4 and 5: forest, peel, reset.
        (shot.finish(), time)
    }
}

/// One shot of the specification: the scratch, and the lengths of its lists. Its methods
/// are the steps, in order.
struct Rounds<'a> {
    g: &'a MatchingGraph,
    s: &'a mut UfScratch,
    n_verts: usize,
    n_touched: usize,
    n_frontier: usize,
}

impl<'a> Rounds<'a> {
    fn new(s: &'a mut UfScratch, g: &'a MatchingGraph) -> Rounds<'a> {
        Rounds {
            g,
            s,
            n_verts: 0,
            n_touched: 0,
            n_frontier: 0,
        }
    }

    /// Step 1: each defect of `dets` a singleton odd cluster, in `verts` and `frontier`;
    /// then the boundary's cluster. `false` (nothing set) when there is no defect.
    fn seed(&mut self, dets: &[u8]) -> bool {
        let n = self.g.num_detectors();
        let b = self.g.boundary();
        let nbytes = n.div_ceil(8).min(dets.len());
        for (i, &byte) in dets[..nbytes].iter().enumerate() {
            let mut m = byte;
            while m != 0 {
                let v = i * 8 + m.trailing_zeros() as usize;
                m &= m - 1;
                if v >= n {
                    break;
                }
                self.s.parent[v] = v as u32;
                self.s.flags[v] = ODD;
                self.s.defect[v] = 1;
                self.s.verts[self.n_verts] = v as u32;
                self.n_verts += 1;
                self.s.frontier[self.n_frontier] = v as u32;
                self.n_frontier += 1;
            }
        }
        if self.n_verts == 0 {
            return false;
        }
        self.s.parent[b as usize] = b;
        self.s.flags[b as usize] = BOUNDARY;
        true
    }

    /// Step 2a: the round's frontier edges into `cand` and the step size `delta`, their
    /// least `need`; frontier vertices of active clusters with nothing to grow leave.
    /// Returns `(delta, cand's length)`, or `None` when there is no frontier edge (growth
    /// stops).
    fn step_size(&mut self) -> Option<(u32, usize)> {
        let g = self.g;
        let weight = g.edge_weight();
        let (adj_offset, adj_edge, adj_nbr) = (g.adj_offset(), g.adj_edge(), g.adj_nbr());
        let UfScratch {
            parent,
            flags,
            growth,
            frontier,
            cand,
            ..
        } = &mut *self.s;
        let mut delta = u32::MAX;
        let mut keep = 0;
        let mut n_cand = 0;
        for i in 0..self.n_frontier {
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
        self.n_frontier = keep;
        if n_cand == 0 {
            return None;
        }
        Some((delta, n_cand))
    }

    /// Step 2b: each visit of a candidate edge from an active endpoint adds `delta`; the
    /// edges that reach their weight go to `fused`, whose length it returns.
    fn grow(&mut self, delta: u32, n_cand: usize) -> usize {
        let weight = self.g.edge_weight();
        let mut n_fused = 0;
        let UfScratch {
            growth,
            cand,
            touched,
            fused,
            ..
        } = &mut *self.s;
        for &e in &cand[..n_cand] {
            let e = e as usize;
            let (w, gr) = (weight[e], growth[e]);
            if gr >= w {
                continue;
            }
            if gr == 0 {
                touched[self.n_touched] = e as u32;
                self.n_touched += 1;
            }
            let ng = gr.saturating_add(delta).min(w);
            growth[e] = ng;
            if ng == w {
                fused[n_fused] = e as u32;
                n_fused += 1;
            }
        }
        n_fused
    }

    /// Step 2c: the ends of each fused edge join clusters (as singletons if in none), and
    /// their clusters unite.
    fn merge(&mut self, n_fused: usize) {
        let (edge_u, edge_v) = (self.g.edge_u(), self.g.edge_v());
        let UfScratch {
            parent,
            flags,
            verts,
            frontier,
            fused,
            ..
        } = &mut *self.s;
        for &e in &fused[..n_fused] {
            let (x, y) = (edge_u[e as usize], edge_v[e as usize]);
            for z in [x, y] {
                if parent[z as usize] == NONE {
                    parent[z as usize] = z;
                    flags[z as usize] = 0;
                    verts[self.n_verts] = z;
                    self.n_verts += 1;
                    frontier[self.n_frontier] = z;
                    self.n_frontier += 1;
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

    /// Steps 3, 4 and 5: the forest of the full edges, peeling, and the reset of all that
    /// was touched. Returns the observable flips.
    fn finish(self) -> u64 {
        let Rounds {
            g,
            s,
            n_verts,
            n_touched,
            ..
        } = self;
        let UfScratch {
            parent,
            flags,
            defect,
            visited,
            parent_edge,
            growth,
            verts,
            touched,
            order,
            ..
        } = s;
        let weight = g.edge_weight();
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

//! The regions on the graph: which region owns each vertex, how far it reaches past it, and
//! when the next edge becomes tight (docs/matching-specification.md, "Growth").
//!
//! A vertex `v` owned by the top region `R` lies `L(v) = r(R) + offset(v)` inside `R`'s
//! edge (0: on it). An edge `(v, u)` of weight `w` (doubled) is tight when
//! - `u` is free or the boundary, `R` grows and `L(v) = w`: `R` claims `u` (or hits the
//!   boundary);
//! - `u` is owned by another top region `S` and `L(v) + L(u) = w`: `R` hits `S`.
//!
//! Every vertex of a region whose slope rose, and every vertex a region claims, computes
//! the earliest such time over its edges and queues it; a shrinking region queues the time
//! its outermost vertex leaves it. A queued time is a hint, checked when it comes up: a
//! change that can only make an event later leaves the queue alone.
#![forbid(unsafe_code)]

use std::cmp::Reverse;

use super::{Edge, MatchingScratch, NEVER, NONE, REGION_EVENT};
use crate::graph::MatchingGraph;

/// The earliest tight edge of a vertex: its time, the edge and the neighbour.
#[derive(Debug, Clone, Copy)]
struct Tight {
    at: i64,
    edge: u32,
    nbr: u32,
}

impl MatchingScratch {
    pub(super) fn radius(&self, r: u32) -> i64 {
        self.regions[r as usize].radius(self.now)
    }

    fn slope(&self, r: u32) -> i64 {
        self.regions[r as usize].slope
    }

    /// How far the owned vertex `v` lies inside its region.
    fn depth(&self, v: u32) -> i64 {
        self.radius(self.top[v as usize]) + self.offset[v as usize]
    }

    /// The earliest time an edge of the owned vertex `v` becomes tight (first in the
    /// graph's order among equal times), if any.
    fn next_tight(&self, g: &MatchingGraph, v: u32) -> Option<Tight> {
        let r = self.top[v as usize];
        let s = self.slope(r);
        let lv = self.depth(v);
        let (off, adj) = (g.adj_offset(), g.adj_nbr_weight());
        let b = g.boundary();
        let mut best: Option<Tight> = None;
        let row = off[v as usize] as usize..off[v as usize + 1] as usize;
        for (i, &[u, weight]) in adj[row.clone()].iter().enumerate() {
            let w = 2 * i64::from(weight);
            let owner = if u == b { NONE } else { self.top[u as usize] };
            let dt = if owner == NONE {
                if s != 1 {
                    continue;
                }
                w - lv
            } else {
                if owner == r {
                    continue;
                }
                let rate = s + self.slope(owner);
                if rate <= 0 {
                    continue;
                }
                let slack = w - lv - self.depth(u);
                debug_assert!(slack >= 0, "regions overlap at {v}-{u}: slack {slack}");
                debug_assert!(rate == 1 || slack % 2 == 0, "odd slack {slack} at rate 2");
                slack / rate
            };
            debug_assert!(dt >= 0, "an edge of vertex {v} was tight in the past");
            let at = self.now + dt.max(0);
            if best.is_none_or(|t| at < t.at) {
                best = Some(Tight {
                    at,
                    edge: (row.start + i) as u32,
                    nbr: u,
                });
            }
        }
        // The CSR position found, the edge id looked up once.
        best.map(|t| Tight {
            edge: g.adj_edge()[t.edge as usize],
            ..t
        })
    }

    /// Queues the owned vertex `v`'s next tight edge, unless an earlier hint is queued.
    pub(super) fn schedule_vertex(&mut self, g: &MatchingGraph, v: u32) {
        if let Some(t) = self.next_tight(g, v) {
            if t.at < self.next_at[v as usize] {
                self.next_at[v as usize] = t.at;
                self.queue.push(Reverse((t.at, v)));
            }
        }
    }

    /// Queues every vertex in the area of region `r` (its shell and its children's).
    pub(super) fn schedule_area(&mut self, g: &MatchingGraph, r: u32) {
        let mut verts = std::mem::take(&mut self.nodes);
        verts.clear();
        self.collect_area(r, &mut verts);
        for &v in &verts {
            self.schedule_vertex(g, v);
        }
        self.nodes = verts;
    }

    /// Appends the vertices in the area of region `r` to `out`.
    pub(super) fn collect_area(&mut self, r: u32, out: &mut Vec<u32>) {
        let mut stack = std::mem::take(&mut self.stack);
        stack.clear();
        stack.push(r);
        while let Some(x) = stack.pop() {
            let reg = &self.regions[x as usize];
            out.extend_from_slice(&reg.shell);
            stack.extend(reg.cycle.iter().map(|&(c, _)| c));
        }
        self.stack = stack;
    }

    /// Queues region `r`'s next shrink step: its outermost own vertex leaving, or its
    /// radius reaching 0.
    pub(super) fn schedule_shrink(&mut self, r: u32) {
        let reg = &self.regions[r as usize];
        let radius = reg.radius(self.now);
        let first = usize::from(reg.is_trivial());
        let dt = match reg.shell.get(first..).and_then(|s| s.last()) {
            Some(&v) => radius + self.offset[v as usize],
            None => radius,
        };
        let at = self.now + dt.max(0);
        let reg = &mut self.regions[r as usize];
        if at < reg.shrink_at {
            reg.shrink_at = at;
            self.queue.push(Reverse((at, r | REGION_EVENT)));
        }
    }

    /// A vertex's queued time has come: handle its tight edges due now.
    pub(super) fn vertex_event(&mut self, g: &MatchingGraph, v: u32) {
        if self.next_at[v as usize] != self.now {
            return; // superseded by an earlier event of this vertex
        }
        self.next_at[v as usize] = NEVER;
        loop {
            if self.top[v as usize] == NONE {
                return;
            }
            let Some(t) = self.next_tight(g, v) else {
                return;
            };
            if t.at > self.now {
                if t.at < self.next_at[v as usize] {
                    self.next_at[v as usize] = t.at;
                    self.queue.push(Reverse((t.at, v)));
                }
                return;
            }
            self.tight(g, v, t);
        }
    }

    /// The tight edge `t` of the owned vertex `v`: a claim, a boundary or a collision.
    fn tight(&mut self, g: &MatchingGraph, v: u32, t: Tight) {
        let (vi, u, e) = (v as usize, t.nbr, t.edge as usize);
        let r = self.top[vi];
        let w = u64::from(g.edge_weight()[e]);
        let obs = self.obs[vi] ^ g.edge_obs()[e];
        if u == g.boundary() {
            let edge = Edge {
                a: self.src[vi],
                b: NONE,
                obs,
                weight: self.dist[vi] + w,
            };
            self.hit_boundary(g, r, edge);
            return;
        }
        let ui = u as usize;
        let other = self.top[ui];
        if other == NONE {
            self.top[ui] = r;
            self.offset[ui] = -self.radius(r);
            self.src[ui] = self.src[vi];
            self.obs[ui] = obs;
            self.dist[ui] = self.dist[vi] + w;
            self.regions[r as usize].shell.push(u);
            self.touched.push(u);
            self.schedule_vertex(g, u);
            return;
        }
        let edge = Edge {
            a: self.src[vi],
            b: self.src[ui],
            obs: obs ^ self.obs[ui],
            weight: self.dist[vi] + w + self.dist[ui],
        };
        // The growing side hits the other.
        if self.slope(r) == 1 {
            self.hit_region(g, r, other, edge);
        } else {
            self.hit_region(g, other, r, edge.reversed());
        }
    }

    /// A shrinking region's queued time has come: its outer vertices leave; at radius 0 a
    /// blossom shatters and a single defect's region implodes.
    pub(super) fn region_event(&mut self, g: &MatchingGraph, r: u32) {
        let reg = &mut self.regions[r as usize];
        if reg.shrink_at != self.now {
            return;
        }
        reg.shrink_at = NEVER;
        if !reg.alive || reg.blossom != NONE || reg.slope != -1 {
            return;
        }
        let radius = reg.radius(self.now);
        let first = usize::from(reg.is_trivial());
        loop {
            let shell = &mut self.regions[r as usize].shell;
            match shell.last() {
                Some(&v) if shell.len() > first && radius + self.offset[v as usize] <= 0 => {
                    shell.pop();
                    self.release(g, v);
                }
                _ => break,
            }
        }
        let reg = &self.regions[r as usize];
        if reg.shell.len() > first || radius > 0 {
            self.schedule_shrink(r);
        } else if reg.is_trivial() {
            self.implode(g, r);
        } else {
            self.shatter(g, r);
        }
    }

    /// Vertex `v` leaves its (shrinking) region: the growing regions beside it may take it.
    fn release(&mut self, g: &MatchingGraph, v: u32) {
        self.top[v as usize] = NONE;
        let (off, adj) = (g.adj_offset(), g.adj_pairs());
        let b = g.boundary();
        for &[_, u] in &adj[off[v as usize] as usize..off[v as usize + 1] as usize] {
            if u != b {
                let owner = self.top[u as usize];
                if owner != NONE && self.slope(owner) == 1 {
                    self.schedule_vertex(g, u);
                }
            }
        }
    }
}

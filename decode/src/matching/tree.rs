//! The matching: alternating trees of regions, blossoms, augmentation and shattering, as
//! Edmonds' algorithm runs them (docs/matching-specification.md, "Matching").
//!
//! An unmatched region is the root of a tree and grows (outer); a region it hits that is
//! matched joins the tree and shrinks (inner), its partner grows below it (outer). Two
//! outer regions of different trees meeting (or one meeting the boundary, or a region
//! matched to the boundary) match along the trees' paths to their roots and the trees
//! dissolve; two of the same tree close an odd cycle, which becomes a blossom, an outer
//! region of its own. An inner blossom whose radius reaches 0 shatters back into its
//! children; an inner single defect whose radius reaches 0 closes a blossom with its
//! parent and child, which now touch through it.
#![forbid(unsafe_code)]

use super::{Edge, Label, MatchingScratch, Partner, NONE};
use crate::graph::MatchingGraph;

impl MatchingScratch {
    /// Sets region `r`'s slope from now on; a rise requeues its vertices (their edges may
    /// now be tight sooner), a shrink queues its shrink step.
    fn set_slope(&mut self, g: &MatchingGraph, r: u32, slope: i64) {
        let now = self.now;
        let reg = &mut self.regions[r as usize];
        let old = reg.slope;
        reg.r0 = reg.radius(now);
        reg.t0 = now;
        reg.slope = slope;
        if slope == -1 {
            self.schedule_shrink(r);
        }
        if slope > old {
            self.schedule_area(g, r);
        }
    }

    fn set_match(&mut self, a: u32, b: u32, e: Edge) {
        let ra = &mut self.regions[a as usize];
        ra.partner = Partner::Region(b);
        ra.match_edge = e;
        let rb = &mut self.regions[b as usize];
        rb.partner = Partner::Region(a);
        rb.match_edge = e.reversed();
    }

    fn tree_root(&self, mut r: u32) -> u32 {
        while self.regions[r as usize].tree_parent != NONE {
            r = self.regions[r as usize].tree_parent;
        }
        r
    }

    /// Outer region `x` reached the boundary along `edge`.
    pub(super) fn hit_boundary(&mut self, g: &MatchingGraph, x: u32, edge: Edge) {
        debug_assert_eq!(self.regions[x as usize].label, Label::Outer);
        let root = self.tree_root(x);
        self.augment_to_root(x);
        let reg = &mut self.regions[x as usize];
        reg.partner = Partner::Boundary;
        reg.match_edge = edge;
        self.dissolve(g, root);
    }

    /// Outer region `x` reached region `y` along `edge` (`a` in `x`).
    pub(super) fn hit_region(&mut self, g: &MatchingGraph, x: u32, y: u32, edge: Edge) {
        debug_assert_eq!(self.regions[x as usize].label, Label::Outer);
        match (
            self.regions[y as usize].label,
            self.regions[y as usize].partner,
        ) {
            (Label::Outer, _) => {
                let (rx, ry) = (self.tree_root(x), self.tree_root(y));
                if rx == ry {
                    self.form_blossom(g, x, y, edge);
                } else {
                    self.augment_to_root(x);
                    self.augment_to_root(y);
                    self.set_match(x, y, edge);
                    self.dissolve(g, rx);
                    self.dissolve(g, ry);
                }
            }
            (Label::Free, Partner::Boundary) => {
                let root = self.tree_root(x);
                self.augment_to_root(x);
                self.set_match(x, y, edge);
                self.dissolve(g, root);
            }
            (Label::Free, Partner::Region(z)) => {
                let ry = &mut self.regions[y as usize];
                ry.label = Label::Inner;
                ry.tree_parent = x;
                ry.tree_edge = edge.reversed();
                ry.tree_children.clear();
                ry.tree_children.push(z);
                self.regions[x as usize].tree_children.push(y);
                let rz = &mut self.regions[z as usize];
                rz.label = Label::Outer;
                rz.tree_parent = y;
                rz.tree_edge = rz.match_edge;
                rz.tree_children.clear();
                self.set_slope(g, y, -1);
                self.set_slope(g, z, 1);
            }
            // An inner region never becomes tight with an outer one (their rates cancel);
            // a free region is always matched.
            (Label::Inner, _) | (Label::Free, Partner::None) => {
                debug_assert!(
                    false,
                    "outer region {x} hit region {y} that is inner or unmatched"
                );
            }
        }
    }

    /// Matches the path from outer region `x` to its tree's root the other way round:
    /// every inner region on it to its tree parent. `x` is left to be matched by the caller.
    fn augment_to_root(&mut self, x: u32) {
        let mut cur = x;
        loop {
            let inner = self.regions[cur as usize].tree_parent;
            if inner == NONE {
                return;
            }
            let reg = &self.regions[inner as usize];
            let (parent, edge) = (reg.tree_parent, reg.tree_edge);
            self.set_match(inner, parent, edge);
            cur = parent;
        }
    }

    /// Every region of the tree rooted at `root` leaves it, matched and frozen.
    fn dissolve(&mut self, g: &MatchingGraph, root: u32) {
        let mut members = std::mem::take(&mut self.members);
        members.clear();
        members.push(root);
        let mut i = 0;
        while i < members.len() {
            let r = members[i] as usize;
            members.extend_from_slice(&self.regions[r].tree_children);
            i += 1;
        }
        for &r in &members {
            let reg = &mut self.regions[r as usize];
            reg.label = Label::Free;
            reg.tree_parent = NONE;
            reg.tree_children.clear();
        }
        for &r in &members {
            self.set_slope(g, r, 0);
        }
        self.members = members;
    }

    /// Outer regions `x` and `y` of one tree met along `edge`: the cycle through their
    /// lowest common ancestor becomes a blossom, an outer region in the ancestor's place.
    fn form_blossom(&mut self, g: &MatchingGraph, x: u32, y: u32, edge: Edge) {
        self.mark_stamp = self.mark_stamp.wrapping_add(1).max(1);
        let stamp = self.mark_stamp;
        if self.mark.len() < self.live {
            self.mark.resize(self.live, 0);
        }
        let mut a = x;
        loop {
            self.mark[a as usize] = stamp;
            a = self.regions[a as usize].tree_parent;
            if a == NONE {
                break;
            }
        }
        // Cycle: the ancestor, down to x, across to y, up to the ancestor's child.
        let mut cycle_y = Vec::new();
        let mut b = y;
        while self.mark[b as usize] != stamp {
            cycle_y.push(b);
            b = self.regions[b as usize].tree_parent;
        }
        let lca = b;
        let mut nodes = vec![lca];
        let mut a = x;
        let at = nodes.len();
        while a != lca {
            nodes.insert(at, a);
            a = self.regions[a as usize].tree_parent;
        }
        let x_at = nodes.len() - 1;
        nodes.extend_from_slice(&cycle_y);
        let k = nodes.len();
        let mut cycle = Vec::with_capacity(k);
        for i in 0..k {
            let (c, next) = (nodes[i], nodes[(i + 1) % k]);
            let e = if i == x_at {
                edge
            } else if self.regions[next as usize].tree_parent == c {
                self.regions[next as usize].tree_edge.reversed()
            } else {
                debug_assert_eq!(self.regions[c as usize].tree_parent, next);
                self.regions[c as usize].tree_edge
            };
            cycle.push((c, e));
        }
        self.stats.blossoms += 1;
        let blossom = self.new_region();
        let top = self.regions[lca as usize].clone_tree_place();
        {
            let reg = &mut self.regions[blossom as usize];
            reg.r0 = 0;
            reg.t0 = self.now;
            reg.slope = 0;
            reg.label = Label::Outer;
            (reg.tree_parent, reg.tree_edge, reg.partner, reg.match_edge) = top;
        }
        let parent = top.0;
        if parent != NONE {
            let reg = &mut self.regions[parent as usize];
            for c in reg.tree_children.iter_mut() {
                if *c == lca {
                    *c = blossom;
                }
            }
            reg.partner = Partner::Region(blossom);
        }
        // Mark the cycle, then adopt the members' children that are not on it.
        self.mark_stamp = self.mark_stamp.wrapping_add(1).max(1);
        let stamp = self.mark_stamp;
        if self.mark.len() < self.live {
            self.mark.resize(self.live, 0);
        }
        for &c in &nodes {
            self.mark[c as usize] = stamp;
        }
        let mut adopted = Vec::new();
        for &c in &nodes {
            for &ch in &self.regions[c as usize].tree_children {
                if self.mark[ch as usize] != stamp {
                    adopted.push(ch);
                }
            }
        }
        for &ch in &adopted {
            self.regions[ch as usize].tree_parent = blossom;
        }
        self.regions[blossom as usize].tree_children = adopted;
        let now = self.now;
        let mut verts = Vec::new();
        for &c in &nodes {
            let reg = &mut self.regions[c as usize];
            let r = reg.radius(now);
            reg.r0 = r;
            reg.t0 = now;
            reg.slope = 0;
            reg.blossom = blossom;
            reg.label = Label::Free;
            reg.partner = Partner::None;
            reg.tree_parent = NONE;
            reg.tree_children.clear();
            verts.clear();
            self.collect_area(c, &mut verts);
            for &v in &verts {
                self.top[v as usize] = blossom;
                self.offset[v as usize] += r;
            }
        }
        self.regions[blossom as usize].cycle = cycle;
        self.set_slope(g, blossom, 1);
    }

    /// Inner blossom `b` shrank to radius 0: its children return to the top. The even side
    /// of its cycle, between the child its tree parent reaches and the child matched to its
    /// tree child, joins the tree (inner, outer, ..., inner); the others match in pairs
    /// along the cycle.
    pub(super) fn shatter(&mut self, g: &MatchingGraph, b: u32) {
        let reg = &self.regions[b as usize];
        let (parent, up) = (reg.tree_parent, reg.tree_edge);
        let (child, down) = match reg.partner {
            Partner::Region(c) => (c, reg.match_edge),
            _ => unreachable!("an inner region is matched to its tree child"),
        };
        self.stats.shatters += 1;
        let ip = self.child_holding(b, up.a);
        let ic = self.child_holding(b, down.a);
        let cycle = std::mem::take(&mut self.regions[b as usize].cycle);
        let k = cycle.len();
        let forward = (ic + k - ip) % k;
        // The path q_0 .. q_L with q_j -> q_{j+1} along edge g_j.
        let mut path: Vec<(u32, Edge)> = Vec::new();
        let rest_from = if forward % 2 == 0 {
            for j in 0..=forward {
                path.push(cycle[(ip + j) % k]);
            }
            ic + 1
        } else {
            for j in 0..=(k - forward) {
                let i = (ip + k - j) % k;
                let prev = cycle[(i + k - 1) % k];
                path.push((cycle[i].0, prev.1.reversed()));
            }
            ip + 1
        };
        let now = self.now;
        let mut verts = Vec::new();
        for &(c, _) in &cycle {
            let reg = &mut self.regions[c as usize];
            let r = reg.radius(now);
            reg.blossom = NONE;
            reg.tree_children.clear();
            verts.clear();
            self.collect_area(c, &mut verts);
            for &v in &verts {
                self.top[v as usize] = c;
                self.offset[v as usize] -= r;
            }
        }
        // The tree side.
        let last = path.len() - 1;
        for (j, &(q, e)) in path.iter().enumerate() {
            if j % 2 == 0 {
                self.regions[q as usize].label = Label::Inner;
                if j < last {
                    let next = path[j + 1].0;
                    self.set_match(q, next, e);
                    let rn = &mut self.regions[next as usize];
                    rn.tree_parent = q;
                    rn.tree_edge = e.reversed();
                    self.regions[q as usize].tree_children.push(next);
                }
            } else {
                self.regions[q as usize].label = Label::Outer;
                let next = path[j + 1].0;
                let rn = &mut self.regions[next as usize];
                rn.tree_parent = q;
                rn.tree_edge = e.reversed();
                self.regions[q as usize].tree_children.push(next);
            }
        }
        let (q0, ql) = (path[0].0, path[last].0);
        {
            let r0 = &mut self.regions[q0 as usize];
            r0.tree_parent = parent;
            r0.tree_edge = up;
        }
        for c in self.regions[parent as usize].tree_children.iter_mut() {
            if *c == b {
                *c = q0;
            }
        }
        self.set_match(ql, child, down);
        self.regions[ql as usize].tree_children.push(child);
        self.regions[child as usize].tree_parent = ql;
        // The other side, in pairs.
        let rest = k - path.len();
        for t in (0..rest).step_by(2) {
            let (c, e) = cycle[(rest_from + t) % k];
            let next = cycle[(rest_from + t + 1) % k].0;
            self.set_match(c, next, e);
            for r in [c, next] {
                let reg = &mut self.regions[r as usize];
                reg.label = Label::Free;
                reg.tree_parent = NONE;
            }
        }
        let reg = &mut self.regions[b as usize];
        reg.alive = false;
        reg.cycle = cycle;
        let cycle = std::mem::take(&mut reg.cycle);
        for &(c, _) in &cycle {
            match self.regions[c as usize].label {
                Label::Inner => self.set_slope(g, c, -1),
                Label::Outer => self.set_slope(g, c, 1),
                // From the blossom's -1 to 0: its edges to growing regions tighten again.
                Label::Free => self.schedule_area(g, c),
            }
        }
        self.regions[b as usize].cycle = cycle;
    }

    /// Inner single-defect region `i` shrank to radius 0: its tree parent and child touch
    /// through its defect, closing a blossom of the three.
    pub(super) fn implode(&mut self, g: &MatchingGraph, i: u32) {
        let reg = &self.regions[i as usize];
        let (parent, up) = (reg.tree_parent, reg.tree_edge);
        let (child, down) = match reg.partner {
            Partner::Region(c) => (c, reg.match_edge),
            _ => unreachable!("an inner region is matched to its tree child"),
        };
        self.stats.implosions += 1;
        let link = Edge {
            a: up.b,
            b: down.b,
            obs: up.obs ^ down.obs,
            weight: up.weight + down.weight,
        };
        self.form_blossom(g, parent, child, link);
    }
}

impl super::Region {
    /// The tree parent, tree edge, partner and match edge, which a blossom formed at this
    /// region's place takes over.
    fn clone_tree_place(&self) -> (u32, Edge, Partner, Edge) {
        (
            self.tree_parent,
            self.tree_edge,
            self.partner,
            self.match_edge,
        )
    }
}

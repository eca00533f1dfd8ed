//! The union-find growth as the device runs it first (device/decode.cu, step 2'): the
//! cluster vertices and the frontier edges live in the registers of the decoding warp's
//! lanes, not in shared memory, and each round touches only the edges still able to grow.
//! This module is its sequential mirror: the same list, the same join rule, the same
//! reasons to give up, tested against the specification (decode/src/uf.rs
//! `UfScratch::decode_reference`). The device gives up to its shared-memory decoder, which
//! starts again from the syndrome.
//!
//! # Why
//! A lone warp issues one instruction every ~7 cycles (results/archive/h200-ncu-uf.txt), so a
//! growth round costs what it executes. The shared-memory round rescans every frontier
//! vertex's whole row (12 entries at a time, each a chain of three loads) and then walks
//! its candidates and its fused edges through shared memory again: ~2 700 cycles a round
//! at d = 7 (results/archive/h200-uf-trace.txt). Here a round reads two cluster words per
//! listed edge, and the merges compare registers.
//!
//! # The list
//! `list` holds every edge that is not full and joins a cluster vertex (not the boundary)
//! to a vertex of another cluster or of none. It is kept so by the join rule: when `x`
//! joins a cluster (a defect at the start, or an end of a fused edge), its row's edge to
//! `y` is added iff `y` is in no cluster, or `y` is in another cluster and is the boundary
//! (whose row is never listed) or joined in the same round with `x < y` (listed once).
//! Every other edge of the row is either listed already, from `y`'s side when `y` joined
//! (then `x` was in no cluster, and it has not filled: `x` would have joined through it),
//! or inside `x`'s cluster, where it never grows again. An edge that has never had an end
//! in a cluster has never grown, so an added edge starts at growth 0.
//!
//! A round: each listed edge with ends in different clusters and room to grow has
//! `k` = its active ends (0: it waits for one of its clusters to become active again); the
//! step is the least `ceil((w - g) / k)`; the edges grow; those that fill merge, in list
//! order (the partition and the potentials do not depend on it:
//! decode/src/uf_potential.rs). Full and inner edges leave the list when it is rebuilt,
//! in each round where a vertex joined.
//!
//! A cluster's word carries a label (a member's vertex + 1) rather than its least vertex,
//! so that a joining vertex takes its cluster's word as it is and no other vertex changes;
//! two clusters merging keep the smaller label. The answer needs the least vertex only for
//! an odd cluster away from the boundary (an impossible syndrome's), found at the end.
//!
//! # Giving up
//! More than [`MAX_LANE_VERTS`] cluster vertices (one per lane), a list longer than the
//! lanes' slots after a rebuild, or a cycle of full edges with odd observables (the forest
//! decides: steps 3 and 4).
#![forbid(unsafe_code)]

use super::graph::MatchingGraph;
use super::uf::{BOUNDARY, ODD};

/// Cluster vertices the warp holds, one per lane (the boundary is held by every lane).
pub const MAX_LANE_VERTS: usize = 32;

/// Listed edges the warp holds: 8 slots per lane (device/decode.cu `QFWD_LANE_SLOTS`).
/// At d = 7, p = 0.001 the longest list of a fixture shot is 240 edges, the 99.9th
/// percentile 199 (`lane_figures` below).
pub const LANE_SLOTS: usize = 256;

/// Why the lanes gave the decode to the shared-memory decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    /// A vertex would join with every lane taken.
    Vertices,
    /// The rebuilt list would not fit the slots.
    List,
    /// A full edge closed a cycle with odd observables.
    OddCycle,
}

/// What the lanes' growth did with one syndrome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneRun {
    /// The observables, or why the lanes gave up.
    pub result: Result<u64, GiveUp>,
    /// Growth rounds run (the last one finds nothing to grow).
    pub rounds: u32,
    /// The longest list after a rebuild.
    pub max_list: usize,
    /// Cluster vertices at the end (or when it gave up).
    pub verts: usize,
    /// Vertices that joined after the defects (the device loads each one's row).
    pub joins: usize,
}

/// A cluster word's label: a member's vertex + 1 (0: in no cluster).
fn label(word: u32) -> u32 {
    word & 0xFFFF
}

fn active(word: u32) -> bool {
    word >> 16 == u32::from(ODD)
}

fn cluster_word(v: u32, flags: u8) -> u32 {
    (v + 1) | u32::from(flags) << 16
}

#[derive(Clone, Copy)]
struct Listed {
    x: u32,
    y: u32,
    e: u32,
    g: u32,
    w: u32,
}

/// Runs the device's lane growth on `dets` with room for `slots` listed edges.
pub fn lane_growth(g: &MatchingGraph, dets: &[u8], slots: usize) -> LaneRun {
    let mut run = LaneRun {
        result: Ok(0),
        rounds: 0,
        max_list: 0,
        verts: 0,
        joins: 0,
    };
    let mut lanes = Lanes::new(g);
    if let Err(why) = lanes.seed(dets) {
        run.result = Err(why);
        return run;
    }
    if lanes.vert.is_empty() {
        return run;
    }
    let grown = lanes.grow(slots, &mut run);
    run.result = grown.map(|()| lanes.observables());
    run.verts = lanes.vert.len();
    run
}

/// The warp during one decode: per lane, its vertex, cluster word, potential, whether it
/// is a defect; the boundary's word; shared memory; the list.
struct Lanes<'g> {
    g: &'g MatchingGraph,
    vert: Vec<u32>,
    word: Vec<u32>,
    phi: Vec<u64>,
    defect: Vec<bool>,
    bword: u32,
    /// Shared memory: cluster words (as of the last round's end) and lane + 1 by vertex.
    cl: Vec<u32>,
    lane_of: Vec<u32>,
    list: Vec<Listed>,
    /// The first lane whose vertex joined since the last rebuild of the list.
    first_joiner: usize,
}

impl<'g> Lanes<'g> {
    fn new(g: &'g MatchingGraph) -> Lanes<'g> {
        let n = g.num_detectors();
        Lanes {
            g,
            vert: Vec::with_capacity(MAX_LANE_VERTS),
            word: Vec::with_capacity(MAX_LANE_VERTS),
            phi: Vec::with_capacity(MAX_LANE_VERTS),
            defect: Vec::with_capacity(MAX_LANE_VERTS),
            bword: cluster_word(g.boundary(), BOUNDARY),
            cl: vec![0u32; n + 1],
            lane_of: vec![0u32; n + 1],
            list: Vec::new(),
            first_joiner: 0,
        }
    }

    /// Gives vertex `v` the next lane, or gives up when every lane is taken.
    fn take_lane(&mut self, v: u32, word: u32, phi: u64, defect: bool) -> Result<(), GiveUp> {
        if self.vert.len() == MAX_LANE_VERTS {
            return Err(GiveUp::Vertices);
        }
        self.vert.push(v);
        self.word.push(word);
        self.phi.push(phi);
        self.defect.push(defect);
        Ok(())
    }

    /// Each defect of `dets` a lane, as an odd cluster of its own.
    fn seed(&mut self, dets: &[u8]) -> Result<(), GiveUp> {
        for v in 0..self.g.num_detectors() {
            if dets.get(v / 8).is_some_and(|x| x >> (v % 8) & 1 == 1) {
                self.take_lane(v as u32, cluster_word(v as u32, ODD), 0, true)?;
            }
        }
        Ok(())
    }

    /// The growth rounds, until no listed edge can grow or the lanes give up.
    fn grow(&mut self, slots: usize, run: &mut LaneRun) -> Result<(), GiveUp> {
        loop {
            self.publish();
            if self.first_joiner < self.vert.len() {
                self.rebuild_list();
                run.max_list = run.max_list.max(self.list.len());
                if self.list.len() > slots {
                    return Err(GiveUp::List);
                }
                self.first_joiner = self.vert.len();
            }
            run.rounds += 1;
            let Some((delta, ks)) = self.step_size() else {
                return Ok(());
            };
            let fused = self.grow_listed(delta, &ks);
            self.merge(fused, run)?;
        }
    }

    /// Publishes the words and the joiners' lanes to shared memory.
    fn publish(&mut self) {
        for (l, (&v, &w)) in self.vert.iter().zip(&self.word).enumerate() {
            self.cl[v as usize] = w;
            self.lane_of[v as usize] = l as u32 + 1;
        }
        self.cl[self.g.boundary() as usize] = self.bword;
    }

    /// Rebuilds the list after vertices joined: drops what the last step found full or
    /// inside one cluster (marked full), and adds the joiners' edges by the join rule.
    fn rebuild_list(&mut self) {
        let g = self.g;
        let b = g.boundary();
        let (adj_offset, adj_edge, adj_nbr) = (g.adj_offset(), g.adj_edge(), g.adj_nbr());
        let weight = g.edge_weight();
        let (cl, lane_of, first_joiner) = (&self.cl, &self.lane_of, self.first_joiner);
        let list = &mut self.list;
        list.retain(|s| s.g < s.w);
        for &x in &self.vert[first_joiner..] {
            let cx = cl[x as usize];
            for a in adj_offset[x as usize] as usize..adj_offset[x as usize + 1] as usize {
                let y = adj_nbr[a];
                let cy = cl[y as usize];
                let joined_now = lane_of[y as usize] > first_joiner as u32;
                if cy == 0 || (label(cy) != label(cx) && (y == b || (joined_now && x < y))) {
                    let e = adj_edge[a];
                    list.push(Listed {
                        x,
                        y,
                        e,
                        g: 0,
                        w: weight[e as usize],
                    });
                }
            }
        }
    }

    /// The step: each listed edge's `k` (its active ends; 0 when it waits or lies inside
    /// one cluster, which marks it full for the rebuild) and the least
    /// `ceil((w - g) / k)`. `None` when nothing can grow.
    fn step_size(&mut self) -> Option<(u32, Vec<u32>)> {
        let cl = &self.cl;
        let mut delta = u32::MAX;
        let mut ks = Vec::with_capacity(self.list.len());
        for s in &mut self.list {
            let (cx, cy) = (cl[s.x as usize], cl[s.y as usize]);
            let mut k = 0;
            if s.g < s.w && label(cx) != label(cy) {
                k = u32::from(active(cx)) + u32::from(active(cy));
                if k > 0 {
                    delta = delta.min((s.w - s.g + k - 1) >> (k - 1));
                }
            } else {
                // Inside one cluster: never grows again. Marked full, for the rebuild.
                s.g = s.w;
            }
            ks.push(k);
        }
        if delta == u32::MAX {
            return None;
        }
        Some((delta, ks))
    }

    /// Grows each listed edge by `k * delta`; returns those that filled `(x, y, e)`.
    fn grow_listed(&mut self, delta: u32, ks: &[u32]) -> Vec<(u32, u32, u32)> {
        let mut fused = Vec::new();
        for (s, &k) in self.list.iter_mut().zip(ks) {
            if k > 0 {
                s.g = (s.g + k * delta).min(s.w);
                if s.g == s.w {
                    fused.push((s.x, s.y, s.e));
                }
            }
        }
        fused
    }

    fn lane(&self, z: u32) -> Option<usize> {
        self.vert.iter().position(|&v| v == z)
    }

    /// Merges, from the lanes' words (x is a cluster vertex; y one, the boundary, or in no
    /// cluster: a join).
    fn merge(&mut self, fused: Vec<(u32, u32, u32)>, run: &mut LaneRun) -> Result<(), GiveUp> {
        let (b, eobs) = (self.g.boundary(), self.g.edge_obs());
        for (x, y, e) in fused {
            let lx = self.lane(x).expect("a listed edge's x is a cluster vertex");
            let (cx, px) = (self.word[lx], self.phi[lx]);
            let (cy, py) = match self.lane(y) {
                _ if y == b => (self.bword, 0),
                Some(ly) => (self.word[ly], self.phi[ly]),
                None => {
                    // A join: y takes x's cluster word as it is; no other vertex changes.
                    self.take_lane(y, cx, px ^ eobs[e as usize], false)?;
                    run.joins += 1;
                    continue;
                }
            };
            let pot = px ^ py ^ eobs[e as usize];
            if label(cx) == label(cy) {
                if pot != 0 {
                    return Err(GiveUp::OddCycle);
                }
                continue;
            }
            self.unite(cx, cy, pot);
        }
        Ok(())
    }

    /// Unites the different clusters of words `cx` and `cy` across an edge whose potential
    /// difference is `pot`.
    fn unite(&mut self, cx: u32, cy: u32, pot: u64) {
        let (rx, ry) = (label(cx), label(cy));
        let (fx, fy) = (cx >> 16, cy >> 16);
        let odd = u32::from(ODD);
        let bnd = u32::from(BOUNDARY);
        let fl = ((fx ^ fy) & odd) | ((fx | fy) & bnd);
        let nc = rx.min(ry) | fl << 16;
        // The cluster whose potentials shift: the one without the boundary (neither has
        // it: the one whose label goes).
        let shifts = if fx & bnd != 0 {
            ry
        } else if fy & bnd != 0 {
            rx
        } else {
            rx.max(ry)
        };
        for (w, p) in self.word.iter_mut().zip(self.phi.iter_mut()) {
            let r = label(*w);
            if r == rx || r == ry {
                *w = nc;
            }
            if r == shifts {
                *p ^= pot;
            }
        }
        if label(self.bword) == rx || label(self.bword) == ry {
            self.bword = nc;
        }
    }

    /// Step 3': the defects' potentials, and for each odd cluster away from the boundary
    /// (an impossible syndrome's), its least vertex's.
    fn observables(&self) -> u64 {
        let (vert, word, phi) = (&self.vert, &self.word, &self.phi);
        let mut obs = 0;
        for l in 0..vert.len() {
            if self.defect[l] {
                obs ^= phi[l];
            }
            let least = (0..vert.len())
                .filter(|&m| label(word[m]) == label(word[l]))
                .all(|m| vert[m] >= vert[l]);
            if word[l] >> 16 == u32::from(ODD) && least {
                obs ^= phi[l];
            }
        }
        obs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uf::tests::{edge, fixture_shots, narrow_graph, syndrome_of};
    use crate::UfScratch;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        /// Whenever the lanes answer, they answer like the specification; they give up only
        /// for the reasons they may.
        #[test]
        fn lanes_answer_like_the_specification(
            g in narrow_graph(40, 90),
            shots in proptest::collection::vec(proptest::collection::vec(any::<usize>(), 1..12), 1..10),
            slots in 8usize..200,
        ) {
            let mut s = UfScratch::new(&g);
            for errors in shots {
                let dets = syndrome_of(&g, &errors);
                let want = s.decode_reference(&g, &dets);
                let run = lane_growth(&g, &dets, slots);
                match run.result {
                    Ok(obs) => prop_assert_eq!(obs, want, "{:?}", errors),
                    Err(GiveUp::List) => prop_assert!(run.max_list > slots),
                    Err(GiveUp::Vertices) => prop_assert!(run.verts == MAX_LANE_VERTS),
                    Err(GiveUp::OddCycle) => {}
                }
            }
        }
    }

    /// An odd cluster away from the boundary (an impossible syndrome) answers from its least
    /// vertex, which is not its label: the defect 2 labels it, 1 and then 0 join.
    #[test]
    fn an_odd_cluster_answers_from_its_least_vertex_not_its_label() {
        let e = |u, v, obs| edge(u, Some(v), 0.1, obs);
        let g = MatchingGraph::from_edges(3, 2, &[e(0, 1, 1), e(1, 2, 2)]).unwrap();
        let dets = [0b100u8];
        let run = lane_growth(&g, &dets, LANE_SLOTS);
        assert_eq!(run.joins, 2);
        let want = UfScratch::new(&g).decode_reference(&g, &dets);
        assert_eq!(want, 3);
        assert_eq!(run.result, Ok(want));
    }

    /// Every shot of the d = 5 and d = 7 surface-code fixtures with the device's slots:
    /// the specification's answer, and at p = 0.001 all but a few shots answered (at
    /// p = 0.005, d = 7, 36 % of the shots need a 33rd cluster vertex or more slots).
    #[test]
    fn fixture_shots_answer_in_lanes() {
        for (name, most_given_up) in [
            ("surface_d5_r5_z_p001", 5),
            ("surface_d7_r7_z_p001", 20),
            ("surface_d7_r7_x_p001", 20),
            ("surface_d5_r5_x_p005", 2000),
            ("surface_d7_r7_z_p005", 4000),
        ] {
            let (g, shots) = fixture_shots(name);
            let mut s = UfScratch::new(&g);
            let mut given_up = 0;
            for i in 0..shots.len() {
                let run = lane_growth(&g, shots.row(i), LANE_SLOTS);
                match run.result {
                    Ok(obs) => {
                        assert_eq!(obs, s.decode_reference(&g, shots.row(i)), "{name} shot {i}")
                    }
                    Err(_) => given_up += 1,
                }
            }
            assert!(given_up <= most_given_up, "{name}: {given_up} given up");
        }
    }

    /// The figures behind the device's slot count: run with
    /// `cargo test --release --lib uf_lanes -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn lane_figures() {
        for name in [
            "surface_d5_r5_z_p001",
            "surface_d7_r7_z_p001",
            "surface_d7_r7_x_p001",
            "surface_d5_r5_x_p005",
            "surface_d7_r7_z_p005",
        ] {
            let (g, shots) = fixture_shots(name);
            let deg: Vec<u32> = g.adj_offset()[..=g.num_detectors()]
                .windows(2)
                .map(|w| w[1] - w[0])
                .collect();
            let mut degs = deg.clone();
            let (mut lists, mut verts, mut rounds, mut joins) = (vec![], vec![], vec![], vec![]);
            let mut why = [0usize; 3];
            for i in 0..shots.len() {
                let run = lane_growth(&g, shots.row(i), usize::MAX);
                if run.verts == 0 {
                    continue;
                }
                lists.push(run.max_list);
                verts.push(run.verts);
                rounds.push(run.rounds as usize);
                joins.push(run.joins);
                if let Err(w) = run.result {
                    why[w as usize] += 1;
                }
            }
            // p50 / p99 / p99.9 / max.
            let spread = |v: &mut Vec<usize>| {
                v.sort_unstable();
                let at = |f: f64| v[((v.len() - 1) as f64 * f) as usize];
                format!("{}/{}/{}/{}", at(0.5), at(0.99), at(0.999), at(1.0))
            };
            degs.sort_unstable();
            let max_degree = deg.iter().max().unwrap();
            let median_degree = degs[degs.len() / 2];
            println!(
                "{name}: n {}, degree max {max_degree} (median {median_degree}) | {} shots with \
                 defects, p50/p99/p99.9/max: list {}, vertices {}, rounds {}, joins {}; \
                 gave up (vertices, list, odd cycle) {why:?}",
                g.num_detectors(),
                lists.len(),
                spread(&mut lists),
                spread(&mut verts),
                spread(&mut rounds),
                spread(&mut joins),
            );
        }
    }
}

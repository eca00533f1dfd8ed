//! Minimum-weight matching: the exact minimum-weight correction of a syndrome, found by
//! growing regions on the matching graph itself (docs/matching-specification.md).
//!
//! Edmonds' primal-dual blossom algorithm, run on the detector graph as sparse blossom
//! (Higgott and Gidney, 2023) runs it: every defect is a region whose radius is its dual
//! variable; regions grow along the edges, and a region touching another one, or the
//! boundary, is an edge of the defects' graph that just became tight. Alternating trees,
//! blossoms, augmentations and blossom shattering are Edmonds'; the distances between
//! defects are never computed. The answer is the observables flipped by a minimum-weight
//! perfect matching of the defects (each one to another or to the boundary), which is a
//! least-weight edge set with the syndrome: what `lut` stores and PyMatching returns.
//!
//! - [`flood`]: the regions on the graph (which vertex each owns, the event queue);
//! - [`tree`]: the matching (alternating trees, blossoms, augmentation);
//! - this file: the scratch, the entry points and reading the matching out.
//!
//! Integer weights (twice the graph's, so every event falls on an integer time), events in
//! a fixed order: the same syndrome always gives the same answer. Nothing allocates once
//! the scratch has grown to a model's largest shots.
#![forbid(unsafe_code)]

mod flood;
mod tree;

#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::graph::MatchingGraph;

/// "No vertex / no region".
const NONE: u32 = u32::MAX;
/// "No event queued".
const NEVER: i64 = i64::MAX;
/// Marks a region's key in the event queue (vertex keys are below it).
const REGION_EVENT: u32 = 1 << 31;

/// A path between two defects (or a defect and the boundary) found by the growth: its
/// ends' source defects, the observables it flips and its weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Edge {
    /// The defect at this end (inside the region that stores the edge).
    a: u32,
    /// The defect at the other end; `NONE`: the boundary.
    b: u32,
    obs: u64,
    weight: u64,
}

impl Edge {
    const EMPTY: Edge = Edge {
        a: NONE,
        b: NONE,
        obs: 0,
        weight: 0,
    };

    fn reversed(self) -> Edge {
        Edge {
            a: self.b,
            b: self.a,
            ..self
        }
    }
}

/// A region's place in the matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    /// Matched (to a region or the boundary) and in no tree: frozen.
    Free,
    /// An even node of an alternating tree (its root, or the match of an inner node): grows.
    Outer,
    /// An odd node of an alternating tree: shrinks.
    Inner,
}

/// What a region is matched to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Partner {
    None,
    Region(u32),
    Boundary,
}

/// A region: one defect (trivial) or a blossom of an odd cycle of regions.
#[derive(Debug, Clone)]
struct Region {
    /// Radius `r0 + slope * (t - t0)`; slope +1 growing, 0 frozen, -1 shrinking.
    r0: i64,
    t0: i64,
    slope: i64,
    /// The blossom holding this region, `NONE` at the top.
    blossom: u32,
    /// A blossom's children in cycle order, each with the edge to the next one.
    cycle: Vec<(u32, Edge)>,
    /// Vertices this region claimed itself, in order (a trivial region's defect first).
    shell: Vec<u32>,
    label: Label,
    partner: Partner,
    /// The matching edge (`a` inside this region).
    match_edge: Edge,
    /// Alternating tree: the parent and the edge to it (`a` inside this region).
    tree_parent: u32,
    tree_edge: Edge,
    tree_children: Vec<u32>,
    /// The queued shrink event's time.
    shrink_at: i64,
    alive: bool,
}

impl Region {
    fn new() -> Region {
        Region {
            r0: 0,
            t0: 0,
            slope: 0,
            blossom: NONE,
            cycle: Vec::new(),
            shell: Vec::new(),
            label: Label::Free,
            partner: Partner::None,
            match_edge: Edge::EMPTY,
            tree_parent: NONE,
            tree_edge: Edge::EMPTY,
            tree_children: Vec::new(),
            shrink_at: NEVER,
            alive: true,
        }
    }

    fn radius(&self, t: i64) -> i64 {
        self.r0 + self.slope * (t - self.t0)
    }

    fn is_trivial(&self) -> bool {
        self.cycle.is_empty()
    }
}

/// The result of one decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Matched {
    /// Observables flipped by the correction (bit k = `Lk`).
    pub obs: u64,
    /// The correction's total weight (the graph's quantized weights).
    pub weight: u64,
    /// Whether every defect was matched (false: some component holds an odd number of
    /// defects and no boundary, an impossible syndrome; the rest is still corrected).
    pub complete: bool,
}

/// Per-thread working memory of the matching decoder, sized to a graph.
#[derive(Debug, Clone, Default)]
pub struct MatchingScratch {
    /// Per vertex: the top region owning it (`NONE`: none).
    top: Vec<u32>,
    /// Per vertex: its distance inside its region, `r(top) + offset` (0 at the edge).
    offset: Vec<i64>,
    /// Per vertex: the defect its region reached it from, the observables and the weight of
    /// that path.
    src: Vec<u32>,
    obs: Vec<u64>,
    dist: Vec<u64>,
    /// Per vertex: its queued event's time.
    next_at: Vec<i64>,
    /// Per vertex: the trivial region of its defect (`NONE`: not a defect).
    defect_region: Vec<u32>,
    /// Vertices owned at some time this shot (to reset them).
    touched: Vec<u32>,
    regions: Vec<Region>,
    /// Regions in use this shot (`regions` keeps the rest for their capacity).
    live: usize,
    queue: BinaryHeap<Reverse<(i64, u32)>>,
    now: i64,
    /// Scratch for area walks and tree walks.
    stack: Vec<u32>,
    nodes: Vec<u32>,
    members: Vec<u32>,
    mark: Vec<u32>,
    mark_stamp: u32,
    defects: Vec<u32>,
    /// What the last decode did (a measure of its work).
    pub stats: MatchStats,
}

/// Counts of one decode's steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MatchStats {
    /// Events taken from the queue (vertices' and shrinking regions').
    pub events: u64,
    pub blossoms: u32,
    pub shatters: u32,
    /// Inner single defects that shrank to radius 0.
    pub implosions: u32,
}

impl MatchingScratch {
    /// Scratch for `g` (grows later with [`MatchingScratch::ensure`]).
    pub fn new(g: &MatchingGraph) -> MatchingScratch {
        let mut s = MatchingScratch::default();
        s.ensure(g);
        s
    }

    /// Grows the per-vertex arrays to hold `g`.
    pub fn ensure(&mut self, g: &MatchingGraph) {
        let n = g.num_detectors();
        if self.top.len() < n {
            self.top.resize(n, NONE);
            self.offset.resize(n, 0);
            self.src.resize(n, NONE);
            self.obs.resize(n, 0);
            self.dist.resize(n, 0);
            self.next_at.resize(n, NEVER);
            self.defect_region.resize(n, NONE);
        }
    }

    /// Decodes a bit-packed syndrome of `g` (LSB first; bits past its detectors ignored,
    /// missing bytes read as 0): the observables a minimum-weight correction flips.
    pub fn decode(&mut self, g: &MatchingGraph, dets: &[u8]) -> u64 {
        self.decode_bits(g, dets).obs
    }

    /// [`MatchingScratch::decode`] with the correction's weight and completeness.
    pub fn decode_bits(&mut self, g: &MatchingGraph, dets: &[u8]) -> Matched {
        self.defects.clear();
        let n = g.num_detectors();
        for (i, &byte) in dets.iter().enumerate().take(n.div_ceil(8)) {
            let mut bits = byte;
            while bits != 0 {
                let v = 8 * i + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if v < n {
                    self.defects.push(v as u32);
                }
            }
        }
        if self.defects.is_empty() {
            return Matched {
                obs: 0,
                weight: 0,
                complete: true,
            };
        }
        let defects = std::mem::take(&mut self.defects);
        let out = self.decode_defects(g, &defects);
        self.defects = defects;
        out
    }

    /// Decodes the defects `defects` (distinct detectors of `g`, any order): the
    /// observables, weight and completeness of a minimum-weight perfect matching.
    ///
    /// # Panics
    /// If a defect is not a detector of `g`, or appears twice.
    pub fn decode_defects(&mut self, g: &MatchingGraph, defects: &[u32]) -> Matched {
        self.ensure(g);
        self.start(g, defects);
        self.run(g);
        let out = self.read_out();
        self.reset();
        out
    }

    /// One trivial region per defect, growing from time 0.
    fn start(&mut self, g: &MatchingGraph, defects: &[u32]) {
        self.now = 0;
        self.stats = MatchStats::default();
        self.live = 0;
        for &v in defects {
            let vi = v as usize;
            assert!(vi < g.num_detectors(), "defect {v} is not a detector");
            assert_eq!(self.top[vi], NONE, "defect {v} appears twice");
            let r = self.new_region();
            let reg = &mut self.regions[r as usize];
            reg.slope = 1;
            reg.label = Label::Outer;
            reg.shell.push(v);
            self.top[vi] = r;
            self.offset[vi] = 0;
            self.src[vi] = v;
            self.obs[vi] = 0;
            self.dist[vi] = 0;
            self.defect_region[vi] = r;
            self.touched.push(v);
        }
        for &v in defects {
            self.schedule_vertex(g, v);
        }
    }

    /// A fresh region (reusing a slot and its lists' capacity).
    fn new_region(&mut self) -> u32 {
        if self.live == self.regions.len() {
            self.regions.push(Region::new());
        } else {
            let reg = &mut self.regions[self.live];
            let (mut cycle, mut shell, mut kids) = (
                std::mem::take(&mut reg.cycle),
                std::mem::take(&mut reg.shell),
                std::mem::take(&mut reg.tree_children),
            );
            cycle.clear();
            shell.clear();
            kids.clear();
            *reg = Region {
                cycle,
                shell,
                tree_children: kids,
                ..Region::new()
            };
        }
        self.live += 1;
        (self.live - 1) as u32
    }

    /// Handles events in time order until none is left.
    fn run(&mut self, g: &MatchingGraph) {
        while let Some(Reverse((t, key))) = self.queue.pop() {
            debug_assert!(t >= self.now, "events go forward in time");
            self.now = t;
            self.stats.events += 1;
            if key & REGION_EVENT != 0 {
                self.region_event(g, key & !REGION_EVENT);
            } else {
                self.vertex_event(g, key);
            }
        }
    }

    /// The matching's observables and weight: every top region's match, and inside every
    /// blossom the cycle's pairs that leave its entered child to the outside.
    fn read_out(&mut self) -> Matched {
        let mut out = Matched {
            obs: 0,
            weight: 0,
            complete: true,
        };
        let mut stack = std::mem::take(&mut self.nodes);
        stack.clear();
        for r in 0..self.live as u32 {
            let reg = &self.regions[r as usize];
            if !reg.alive || reg.blossom != NONE {
                continue;
            }
            let enter = match reg.partner {
                Partner::Boundary => {
                    out.obs ^= reg.match_edge.obs;
                    out.weight += reg.match_edge.weight;
                    reg.match_edge.a
                }
                Partner::Region(other) => {
                    if r < other {
                        out.obs ^= reg.match_edge.obs;
                        out.weight += reg.match_edge.weight;
                    }
                    reg.match_edge.a
                }
                Partner::None => {
                    out.complete = false;
                    NONE
                }
            };
            stack.push(r);
            stack.push(enter);
            while let (Some(enter), Some(region)) = (stack.pop(), stack.pop()) {
                self.expand(region, enter, &mut out, &mut stack);
            }
        }
        self.nodes = stack;
        out
    }

    /// Pairs a blossom's children around its cycle, leaving out the child that holds the
    /// defect `enter` (matched from outside), and queues every child to expand in turn.
    fn expand(&self, region: u32, enter: u32, out: &mut Matched, stack: &mut Vec<u32>) {
        let reg = &self.regions[region as usize];
        let k = reg.cycle.len();
        if k == 0 {
            return;
        }
        let i = if enter == NONE {
            out.complete = false;
            0
        } else {
            self.child_holding(region, enter)
        };
        stack.push(reg.cycle[i].0);
        stack.push(enter);
        let mut j = (i + 1) % k;
        while j != i {
            let (c, e) = reg.cycle[j];
            let next = reg.cycle[(j + 1) % k].0;
            out.obs ^= e.obs;
            out.weight += e.weight;
            stack.extend_from_slice(&[c, e.a, next, e.b]);
            j = (j + 2) % k;
        }
    }

    /// The index in `blossom`'s cycle of the child that holds the defect `v`.
    fn child_holding(&self, blossom: u32, v: u32) -> usize {
        let mut r = self.defect_region[v as usize];
        while self.regions[r as usize].blossom != blossom {
            r = self.regions[r as usize].blossom;
        }
        let cycle = &self.regions[blossom as usize].cycle;
        cycle
            .iter()
            .position(|&(c, _)| c == r)
            .expect("a child of the blossom holds the defect")
    }

    /// Clears what the shot touched.
    fn reset(&mut self) {
        for &v in &self.touched {
            let v = v as usize;
            self.top[v] = NONE;
            self.next_at[v] = NEVER;
            self.defect_region[v] = NONE;
        }
        self.touched.clear();
        self.queue.clear();
    }

    /// Whether every per-vertex array is at its reset value (for tests).
    #[cfg(test)]
    fn is_reset(&self) -> bool {
        self.top.iter().all(|&t| t == NONE)
            && self.next_at.iter().all(|&t| t == NEVER)
            && self.defect_region.iter().all(|&r| r == NONE)
            && self.touched.is_empty()
            && self.queue.is_empty()
    }
}

//! [`Metric`]: the window decoder's distances, as tables built once per model, so that a
//! window's cost follows its defects and not its graph (docs/streaming.md, "The metric").
//!
//! - **Pairs.** The distance between two kept detectors `(ja, ka)` and `(jb, kb)` (rounds
//!   `ja <= jb`) of a window is the shortest path between them in a *context graph*: the
//!   stream's rounds around them, boundary left out, with the stream's own head below when
//!   the window starts at round 0 and `ja` is a head round, its own tail above when the
//!   window ends with the final round and `jb` is a tail round, and `W` more bulk rounds on
//!   each other side. So the distance depends on `(context, ka, kb, jb - ja)` only, and one
//!   table per context holds every pair any window can ask for. Each entry also says which
//!   observables a path between the two flips: the same for every path (a cycle that
//!   avoids the boundary flips none, checked as each table is built).
//! - **Boundary.** Per window graph and vertex: the shortest distance to the boundary in
//!   the window graph (through its top, the future, too), the observables its path flips,
//!   and the round of the vertex where that path leaves.
//!
//! An entry is `dist | mask << 24`: the distance in weight units (`INF`: unreachable) and
//! the index of its observable mask in [`Metric::masks`].
#![forbid(unsafe_code)]

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::graph::{MatchingGraph, NO_EDGE};
use crate::{Error, Result};

use super::model::{StreamModel, WindowGraph, WindowKind};

/// An unreachable distance in an entry.
pub const INF: u32 = 0x00FF_FFFF;
/// Bits of an entry's distance.
pub const DIST_BITS: u32 = 24;

/// The distance of an entry.
#[inline]
pub fn dist(entry: u32) -> u32 {
    entry & INF
}

/// The observable-mask index of an entry.
#[inline]
pub fn mask(entry: u32) -> u32 {
    entry >> DIST_BITS
}

/// Distance tables of one stream model (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Metric {
    slots: u32,
    span: u32,
    head: u32,
    tail: u32,
    /// `((ctx * span + dt) * slots + ka) * slots + kb`, contexts `b * (tail + 1) + t` (b =
    /// `head`: bulk below; t = `tail`: bulk above).
    pairs: Vec<u32>,
    /// Per window graph: per vertex, the boundary entry, and the round where its path
    /// leaves the window.
    bounds: Vec<Vec<u32>>,
    exits: Vec<Vec<u32>>,
    masks: Vec<u64>,
    /// `lower[dt]`: no pair entry `dt` or more rounds apart is shorter (any context).
    lower: Vec<u32>,
}

/// How a window looks up its pairs' contexts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowPlace {
    /// Rounds in the window (the final one included).
    pub rounds: u32,
    /// The window starts at round 0: its first `head` rounds are the head's.
    pub from_start: bool,
    /// The window ends with the final round: its last `tail` rounds are the tail's.
    pub is_final: bool,
}

impl WindowPlace {
    pub fn of(w: &WindowGraph) -> WindowPlace {
        let (from_start, is_final) = match w.kind {
            WindowKind::First => (true, false),
            WindowKind::Bulk => (false, false),
            WindowKind::Final { from_start, .. } => (from_start, true),
        };
        WindowPlace {
            rounds: w.rounds,
            from_start,
            is_final,
        }
    }
}

struct Masks {
    list: Vec<u64>,
    index: HashMap<u64, u32>,
}

impl Masks {
    fn id(&mut self, m: u64) -> Result<u32> {
        if let Some(&i) = self.index.get(&m) {
            return Ok(i);
        }
        let i = self.list.len() as u32;
        if i > 255 {
            return Err(Error::InvalidSetting {
                key: "observables",
                detail: "the window decoder's tables hold at most 256 distinct observable masks"
                    .into(),
            });
        }
        self.list.push(m);
        self.index.insert(m, i);
        Ok(i)
    }
}

/// Shortest paths from `sources` (vertex, initial distance, initial mask) over the
/// detectors of `g` (the boundary left out): each vertex's distance (`INF`: none), mask and
/// the source it came from. Ties go to the lesser (distance, vertex) as the heap pops them.
fn dijkstra(g: &MatchingGraph, sources: &[(u32, u32, u64)]) -> (Vec<u32>, Vec<u64>, Vec<u32>) {
    let n = g.num_detectors();
    let (off, adj, w, obs) = (g.adj_offset(), g.adj_pairs(), g.edge_weight(), g.edge_obs());
    let b = g.boundary();
    let mut dist = vec![INF; n];
    let mut m = vec![0u64; n];
    let mut from = vec![u32::MAX; n];
    let mut heap = BinaryHeap::new();
    for &(v, d, mk) in sources {
        if d < dist[v as usize] {
            dist[v as usize] = d;
            m[v as usize] = mk;
            from[v as usize] = v;
            heap.push(Reverse((d, v)));
        }
    }
    let mut done = vec![false; n];
    while let Some(Reverse((d, x))) = heap.pop() {
        if std::mem::replace(&mut done[x as usize], true) {
            continue;
        }
        for &[e, y] in &adj[off[x as usize] as usize..off[x as usize + 1] as usize] {
            if y == b {
                continue;
            }
            let nd = (d + w[e as usize]).min(INF);
            if nd < dist[y as usize] {
                dist[y as usize] = nd;
                m[y as usize] = m[x as usize] ^ obs[e as usize];
                from[y as usize] = from[x as usize];
                heap.push(Reverse((nd, y)));
            }
        }
    }
    (dist, m, from)
}

/// Refuses a graph where two paths between the same detectors flip different observables
/// (`m` from one source must be a potential: every edge between reached detectors agrees).
fn check_potential(g: &MatchingGraph, dist: &[u32], m: &[u64]) -> Result<()> {
    let b = g.boundary();
    for e in 0..g.num_edges() {
        let (u, v) = (g.edge_u()[e], g.edge_v()[e]);
        if v == b || dist[u as usize] == INF || dist[v as usize] == INF {
            continue;
        }
        if m[u as usize] ^ g.edge_obs()[e] != m[v as usize] {
            return Err(Error::DecoderModel {
                file: g.source().into(),
                detail: "two paths between the same detectors flip different observables: \
                         the window decoder's tables need a model whose cycles away from the \
                         boundary flip none (a planar code's)"
                    .into(),
            });
        }
    }
    Ok(())
}

impl Metric {
    /// Builds the tables of `model` (its windows and templates are built).
    pub(super) fn build(model: &StreamModel) -> Result<Metric> {
        let k = model.kept_slots().len() as u32;
        let span = model.rounds_per_window();
        let (head, tail) = (model.head_rounds(), model.tail_rounds());
        let contexts = (head + 1) * (tail + 1);
        let mut me = Metric {
            slots: k,
            span,
            head,
            tail,
            pairs: vec![INF; (contexts * span * k * k) as usize],
            bounds: Vec::new(),
            exits: Vec::new(),
            masks: Vec::new(),
            lower: Vec::new(),
        };
        let mut masks = Masks {
            list: Vec::new(),
            index: HashMap::new(),
        };
        masks.id(0)?;
        // One long stream serves every context but head-and-tail: bulk rounds W beyond
        // whatever a window reaches on each side.
        let long = head + 3 * span + tail;
        let g = model.stream_graph(long)?;
        let top = long + 1 - tail; // the first tail round
        for ka in 0..k {
            for b in 0..=head {
                // Lower end in head round b, or (b = head) deep in the bulk.
                let ja = if b < head { b } else { head + span };
                let (d, m, _) = dijkstra(&g, &[(ja * k + ka, 0, 0)]);
                check_potential(&g, &d, &m)?;
                for dt in 0..span {
                    for kb in 0..k {
                        let v = ((ja + dt) * k + kb) as usize;
                        me.put(b, tail, dt, ka, kb, d[v], masks.id(m[v])?);
                    }
                }
            }
            for t in 0..tail {
                // Upper end (slot ka here) in tail round t; lower ends below it in the bulk.
                let jb = top + t;
                let (d, m, _) = dijkstra(&g, &[(jb * k + ka, 0, 0)]);
                for dt in 0..span.min(jb) {
                    for kl in 0..k {
                        let v = ((jb - dt) * k + kl) as usize;
                        me.put(head, t, dt, kl, ka, d[v], masks.id(m[v])?);
                    }
                }
            }
        }
        me.head_and_tail(model, &mut masks)?;
        for w in model.windows() {
            let (b, x) = boundary_table(&w.graph, w.slots, &mut masks)?;
            me.bounds.push(b);
            me.exits.push(x);
        }
        me.masks = masks.list;
        me.lower = vec![INF; span as usize];
        for ctx in 0..contexts {
            for dt in 0..span {
                let at = me.index(ctx, dt, 0, 0);
                let least = me.pairs[at..at + (k * k) as usize]
                    .iter()
                    .map(|&e| dist(e))
                    .min()
                    .unwrap_or(INF);
                me.lower[dt as usize] = me.lower[dt as usize].min(least);
            }
        }
        for dt in (0..span as usize - 1).rev() {
            me.lower[dt] = me.lower[dt].min(me.lower[dt + 1]);
        }
        Ok(me)
    }

    /// Pairs from a head round to a tail round: streams shorter than a window, each of its
    /// own length.
    fn head_and_tail(&mut self, model: &StreamModel, masks: &mut Masks) -> Result<()> {
        let (k, head, tail) = (self.slots, self.head, self.tail);
        for b in 0..head {
            for t in 0..tail {
                for dt in 0..self.span {
                    // Rounds b + dt - t + tail in all: syndrome rounds one fewer.
                    let Some(rounds) = (b + dt + tail).checked_sub(t + 1) else {
                        continue;
                    };
                    if rounds < model.min_rounds() || b + dt > rounds {
                        continue;
                    }
                    let g = model.stream_graph(rounds)?;
                    for ka in 0..k {
                        let (d, m, _) = dijkstra(&g, &[(b * k + ka, 0, 0)]);
                        for kb in 0..k {
                            let v = ((b + dt) * k + kb) as usize;
                            self.put(b, t, dt, ka, kb, d[v], masks.id(m[v])?);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn put(&mut self, b: u32, t: u32, dt: u32, ka: u32, kb: u32, d: u32, mask: u32) {
        let i = self.index(b * (self.tail + 1) + t, dt, ka, kb);
        self.pairs[i] = d.min(INF) | mask << DIST_BITS;
    }

    #[inline]
    fn index(&self, ctx: u32, dt: u32, ka: u32, kb: u32) -> usize {
        (((ctx * self.span + dt) * self.slots + ka) * self.slots + kb) as usize
    }

    /// The entry of vertices `a` and `b` of a window placed as `at`.
    #[inline]
    pub fn pair(&self, at: WindowPlace, a: u32, b: u32) -> u32 {
        let k = self.slots;
        self.pair_at(at, (a / k, a % k), (b / k, b % k))
    }

    /// [`Metric::pair`] of vertices given as (round, kept slot).
    #[inline]
    pub fn pair_at(&self, at: WindowPlace, a: (u32, u32), b: (u32, u32)) -> u32 {
        let ((ja, ka), (jb, kb)) = if a <= b { (a, b) } else { (b, a) };
        let bottom = if at.from_start && ja < self.head {
            ja
        } else {
            self.head
        };
        let top = if at.is_final && jb + self.tail >= at.rounds {
            jb + self.tail - at.rounds
        } else {
            self.tail
        };
        self.pairs[self.index(bottom * (self.tail + 1) + top, jb - ja, ka, kb)]
    }

    /// The boundary entry of vertex `v` of window graph `window`.
    #[inline]
    pub fn boundary(&self, window: usize, v: u32) -> u32 {
        self.bounds[window][v as usize]
    }

    /// The round where vertex `v`'s boundary path leaves window graph `window`.
    #[inline]
    pub fn exit_round(&self, window: usize, v: u32) -> u32 {
        self.exits[window][v as usize]
    }

    /// A lower bound of every pair's distance `dt` or more rounds apart.
    #[inline]
    pub fn lower(&self, dt: u32) -> u32 {
        self.lower.get(dt as usize).copied().unwrap_or(INF)
    }

    /// Kept slots per round.
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// The observable masks entries index.
    pub fn masks(&self) -> &[u64] {
        &self.masks
    }

    /// Every pair entry, contexts one after the other (see the module docs).
    pub fn pair_table(&self) -> &[u32] {
        &self.pairs
    }

    /// Window graph `window`'s boundary entries and exit rounds.
    pub fn boundary_table(&self, window: usize) -> (&[u32], &[u32]) {
        (&self.bounds[window], &self.exits[window])
    }

    /// Rounds a pair may span (W), and the number of contexts.
    pub fn span(&self) -> u32 {
        self.span
    }
    pub fn contexts(&self) -> u32 {
        (self.head + 1) * (self.tail + 1)
    }
}

/// Per vertex of `g`: its boundary entry and the round (vertex / `slots`) where its path
/// leaves.
fn boundary_table(
    g: &MatchingGraph,
    slots: u32,
    masks: &mut Masks,
) -> Result<(Vec<u32>, Vec<u32>)> {
    let (w, obs, bedge) = (g.edge_weight(), g.edge_obs(), g.boundary_edge());
    let sources: Vec<(u32, u32, u64)> = (0..g.num_detectors() as u32)
        .filter(|&v| bedge[v as usize] != NO_EDGE)
        .map(|v| {
            let e = bedge[v as usize] as usize;
            (v, w[e], obs[e])
        })
        .collect();
    let (d, m, from) = dijkstra(g, &sources);
    let mut entries = Vec::with_capacity(d.len());
    for (&dv, &mv) in d.iter().zip(&m) {
        entries.push(dv | masks.id(mv)? << DIST_BITS);
    }
    let exits = from
        .iter()
        .map(|&f| if f == u32::MAX { u32::MAX } else { f / slots })
        .collect();
    Ok((entries, exits))
}

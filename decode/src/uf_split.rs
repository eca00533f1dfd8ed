//! Split fast path of the union-find decoder: when the defects fall into groups that
//! provably never interact, the specification's output ([`UfScratch::decode_reference`],
//! decode/src/uf.rs) is the XOR of each group's output decoded alone, and each group of at
//! most `K` defects has its output, and the time its growth stopped, in the low-weight
//! table ([`super::uf_table`]). The device runs it as step 1d of device/decode.cu, after
//! the table and before the full decoder, with the same grouping (so a shot takes the same
//! path on both; [`decode_with_path`] counts them). It replaces the isolated-defects path,
//! which runs only where it is not tried: split mostly subsumes it (of the d = 5, p = 0.001
//! fixture shots above K = 4 defects, split answers 1 346 of the 1 354 that the isolated
//! path does, and 526 more), and at d = 7, where it does not, the isolated step cost each
//! shot that then went on to the full decoder ~4 600 cycles on the H200, in the latency's
//! tail (results/archive/h200-uf-potentials.txt). Measured below, on the models' observable
//! parts (the decoder's graph, [`super::observable_part`]): with K = 4 it keeps 99.8-99.9 %
//! of the d = 5, p = 0.001 shots and 99.5-99.6 % of the d = 7 ones off the growth (the
//! d = 7 part's K = 4 table, 56 M entries, is filled mostly from its own splits,
//! [`super::uf_table`]).
//!
//! # The test
//!
//! Notation: `S` the defects, split into groups `S_1 .. S_m`; `E_i` the specification run on
//! `S_i` alone, `T_i` its sum of `delta` (the end of its last round, when its last edge
//! filled; 0 if it had no round); `d(a, b)` the weighted shortest-path distance between
//! detectors in the matching graph *without* the boundary vertex `B` ([`Distances`]).
//!
//! **Theorem.** If `d(a, b) > T_i + T_j` for all `a` in `S_i`, `b` in `S_j`, `i != j`,
//! then the specification on `S` outputs `XOR_i output(E_i)`.
//!
//! Strict: with `d(a, b) = T_a + T_b` an edge between the groups can fill in the very round
//! in which both stop, and change the forest (`tests::equal_distance_is_not_enough`: `a`
//! alone takes its boundary edge at 300, `b` alone reaches the boundary through `c` at 750,
//! the edge `a-b` of weight 1050 fills at 750 when both decode together, and `b` then hangs
//! off `a`).
//!
//! **Growth from one side.** In a run, say edge `e = (x, y)` *grows from `x`* in a round if
//! `x` is in an active cluster and `e` is a frontier edge (it adds `delta` from that side:
//! step 2b adds `k * delta`, `k` the active ends); `h(e, x)` is what it has grown from `x`
//! so far. Until it fills, `growth[e] = h(e, x) + h(e, y)`; it fills (step 2b's clamp) in
//! the first round after which `h(e, x) + h(e, y) >= w(e)`, and then stays full.
//!
//! **Lemma 1 (reach).** In `E_i`, a vertex `x != B` that joins a cluster does so at a time
//! `J(x) >= d_i(x) = min over a in S_i of d(a, x)`, and `h(e, x) <= T_i - J(x)` for every
//! edge `e` at `x`, at any time. *Proof.* Defects join at 0. Another `x` joins (step 2c) in
//! the round in which an edge `(y, x)` fills with `x` in no cluster: `x` never grew it, so
//! `h(e, y) >= w(e)`, and `y` grows at most one unit per unit of time from `J(y)` on:
//! `J(x) >= J(y) + w(e)`. `y != B`: `B` is never in an active cluster, so an edge `(B, x)`
//! grows only from `x`, which is in no cluster. By induction `J(x)` is at least the length
//! of a path from a defect of `S_i` avoiding `B`. `x` grows only in rounds after `J(x)`,
//! all of which end by `T_i`. ∎
//!
//! **Lemma 2 (separation).** Under the test, the vertex sets `R_i` (vertices other than `B`
//! that ever join a cluster of `E_i`) are disjoint, and an edge `e = (x, y)` with `x` in
//! `R_i`, `y` in `R_j`, `i != j` has `h_i(e, x) + h_j(e, y) <= w(e) - 1` at all times.
//! *Proof.* A joint `x` would give `d(a, b) <= d_i(x) + d_j(x) <= T_i + T_j` (joins
//! happen by `T`) for the nearest `a`, `b`. For the edge, the path `a .. x - y .. b` avoids
//! `B`: `T_i + T_j < d(a, b) <= d_i(x) + w(e) + d_j(y)`, and Lemma 1 bounds `h_i + h_j` by
//! `T_i - d_i(x) + T_j - d_j(y) <= w(e) - 1`. ∎
//!
//! **Proof of the theorem.** Let `E` be the run on `S`, its rounds ending at
//! `0 = t_0 < t_1 < ...`. Read `E_i` at any time `t`: its clusters and flags as after its
//! last round ending by `t`, and the edges that grow in its round in progress at `g + k s`
//! after `s` units of it (below `w`: step 2a's `need = ceil((w - g) / k)` is at least the
//! round's `delta`, and `k (need - 1) < w - g`). Claim, by induction over the rounds of
//! `E`, at every `t_m`: (a) the clusters of `E` other than the boundary's are those of the
//! `E_i`, with their flags; the boundary cluster of `E` is `B` with every `E_i`'s boundary
//! cluster (flags `BOUNDARY`: inactive, as each of those is); (b) the growth of an edge in
//! `E` is its growth in the one `E_i` whose `R_i` holds an end of it (0 if none), or, for an
//! edge between `R_i` and `R_j`, `h_i + h_j < w`; (c) every round end of every `E_i`, up to
//! `T_i`, is some `t_m`.
//!
//! - *Frontier.* By (a) and (b) the frontier edges of `E` from a vertex `v` of an active
//!   cluster of `E_i` are those of `E_i` at `t_m` (same cluster, same other-end cluster or
//!   none, same fill state; an edge to `R_j` is not full in `E_i`, or its end would have
//!   joined `E_i`, and not full in `E` by (b)), growing from the same sides; only `k` of an
//!   edge between `R_i` and `R_j` may differ (2 in `E`, 1 in `E_i`). The boundary cluster
//!   being shared changes nothing: it is inactive in `E` and in every `E_i`, and an edge
//!   between two of its vertices grows in neither.
//! - *Step.* For an edge of `E_i` in its round `(t', t'']` growing at rate `k`, `need` at
//!   `t_m` is its `need` at `t'` minus `t_m - t'`, at least `t'' - t_m`, with equality for
//!   the edges that fill at `t''`; the `ceil` arithmetic gives the same fill time however
//!   the round is cut, since the growth before the last piece stays below `w`. Edges
//!   between groups have `need >= 1`. So `t_{m+1} = t_m + delta <= t''` for every `E_i`
//!   not finished: (c).
//! - *Fill.* In `E`'s round, an edge of `E_i` grows by `k delta`: to `E_i`'s interpolated
//!   growth, full exactly when `t_{m+1} = t''` and it fills in `E_i`'s round. An edge
//!   between groups grows from each side as it does in its own group's run, to
//!   `h_i + h_j <= w - 1` (Lemma 2): never full, whatever its `k`. So `fused` of `E` at
//!   `t_{m+1}` is the union of the `fused` of the `E_i` whose rounds end there.
//! - *Merge.* An end of such an edge is in no cluster of `E` iff in none of `E_i` (the
//!   `R_i` are disjoint; `B` is always in a cluster). The unions are those of `E_i`, a union
//!   with `E_i`'s boundary cluster being one with the shared boundary cluster: flags of
//!   every other cluster as in `E_i`, the boundary cluster inactive in both. The partition
//!   after a round does not depend on the order of its unions: (a) and (b) at `t_{m+1}`.
//! - *Stop.* A finished `E_i` has no frontier edge, so (frontier above) none of its
//!   vertices grows in `E`, including a cluster left odd with nothing to grow (an
//!   impossible syndrome). `E` stops when every `E_i` has, at `max T_i`.
//! - *Forest (step 3).* The full edges of `E` are the union of the `E_i`'s, none between
//!   two `R_i` (the cross edges never fill), and `verts` is the union of the `R_i`. In 3a
//!   the boundary's children are the union of each `E_i`'s, in index order, so each
//!   group's appear in its own order. Processing a vertex of `R_i` appends only unvisited
//!   vertices of `R_i` (its full edges stay in `R_i` and `B`, and `B` is visited), and only
//!   such processing marks them visited: by induction over the queue, the vertices of `R_i`
//!   in `order`, and their forest edges, are those of `E_i`'s 3a, whatever lies between
//!   them. In 3b every remaining cluster is a cluster of one `E_i` without the boundary;
//!   its tree is the BFS from its least vertex over its own full edges in both runs.
//! - *Peel (step 4).* An edge is in the correction iff the subtree below it holds an odd
//!   number of defects; every subtree lies in one `R_i`, whose defects are `S_i`. The
//!   correction of `E` is the disjoint union of the `E_i`'s, and so is its observable mask
//!   the XOR. ∎
//!
//! Stored values: distances as `min(d, SAT)` (a lower bound: the test stays sound) and
//! times as `min(T, SAT)` ([`SAT`] = 65535: a group whose growth ran that long fails every
//! test, as `d <= SAT <= SAT + T_j`). The times are [`UfScratch::decode_timed`]'s, equal to
//! the specification's sum of `delta` (tested on random graphs and every fixture shot).
//!
//! # Grouping
//!
//! Any grouping passing the test gives the right answer, so the grouping is a heuristic
//! and only the final check matters ([`split`]): every defect starts alone; each pass
//! looks up every group's `(obs, T)`, and links each defect that fails the test to the
//! nearest defect it fails it with; groups merge along the links ([`Grouping`]); a pass
//! where the test holds for every pair of defects of different groups is the answer, a
//! group above `K` defects (or more than [`MAX_SPLIT_DEFECTS`] defects in all) gives up.
//!
//! Two rules, tried in turn. [`Grouping::Links`] merges along every link: its first pass
//! closes each chain of neighbours into a group, and on the d = 7 fixture (observable
//! part, K = 4) every shot it answers takes two passes. But a lone defect's `T` runs until
//! it reaches the boundary, so in that first pass a defect links to most neighbours, and
//! two close pairs side by side become one group of 4 or 5 where each pair alone would
//! have settled in a few hundred units and passed. [`Grouping::Mutual`] merges only along
//! the links that are returned (pairs first). Of the fixture's 85 shots that `Links`
//! left to the growth, an exhaustive search over partitions into groups of at
//! most 4 finds a passing one for 48 (31 of them pairs and lone defects only); `Mutual`
//! answers 40 of those. It is no replacement: it leaves a defect beside a pair alone and
//! odd (its `T` long), needs a third or fourth pass for 18 % of the shots `Links` answers
//! in two, and misses 20 of them. Tried first on the H200 it slowed the split path's p90
//! from 5.9 to 8.2 us; so `Links` went first, and the device replays the
//! first pass's merge with `Mutual` (its look-ups and links are the same) only where it
//! gives up (`tests::each_grouping_answers_shots_the_other_does_not`).
//!
//! [`Grouping::Chains`] now goes first instead: `Links`, except that a chain it would close
//! into more than `K` defects merges along its returned links only. Where `Links` answers,
//! no chain is ever that long, so `Chains` answers the same way in the same two passes;
//! it also answers 19 of the 85 d = 7 Z shots that `Links` gives up (in 3-4 passes). Of
//! the 40 shots answered after `Links` fails, 37 take 3-4 passes in all with `Chains`
//! then `Mutual` (the replay counted as one pass less), against 24 in 4 and 16 in 5-6 with
//! `Links` then `Mutual` (the CPU model; the same 1 704 of the 1 749 shots of 5 to 32
//! defects answered either way).
//!
//! # Coverage on the fixtures
//!
//! Shares of shots by path, in the device's order (no defect; at most `K` defects: one
//! table entry; the split; every defect isolated, `UfScratch::isolated`, which runs only
//! where the split is not tried; the lanes' growth; the full decoder), on the models'
//! observable parts ([`super::observable_part`]: the decoder's graph; d5 72 of 120
//! detectors, d7 192 of 336), groups decoded on demand, the split tried up to 32 defects
//! (`tests::coverage`, every answer checked against the specification on the whole
//! model). Table sizes on the parts: d5 K = 4 1.09 M entries; d7 K = 3 1.18 M, K = 4 56 M
//! (on the whole d7 model, K = 4 would take 520 M).
//!
//! | model | p | basis | K | empty | table | split | lanes | full | without growth |
//! |---|---|---|---|---|---|---|---|---|---|
//! | d5 | 0.001 | Z | 2 | 58.87 | 32.15 | 7.48 | 1.50 | 0.00 | **98.50** |
//! | d5 | 0.001 | Z | 3 | 58.87 | 35.05 | 5.07 | 1.00 | 0.00 | **99.00** |
//! | d5 | 0.001 | Z | 4 | 58.87 | 39.78 | 1.26 | 0.09 | 0.00 | **99.91** |
//! | d5 | 0.001 | X | 4 | 54.08 | 43.88 | 1.86 | 0.18 | 0.00 | **99.81** |
//! | d7 | 0.001 | Z | 2 | 21.70 | 35.01 | 38.00 | 5.28 | 0.01 | **94.71** |
//! | d7 | 0.001 | Z | 3 | 21.70 | 41.74 | 32.47 | 4.08 | 0.01 | **95.91** |
//! | d7 | 0.001 | Z | 4 | 21.70 | 60.81 | 17.04 | 0.44 | 0.01 | **99.55** |
//! | d7 | 0.001 | X | 3 | 17.65 | 38.99 | 38.40 | 4.96 | 0.00 | **95.04** |
//! | d7 | 0.001 | X | 4 | 17.65 | 59.62 | 22.23 | 0.50 | 0.00 | **99.50** |
//! | d5 | 0.005 | Z | 4 | 6.58 | 48.96 | 36.79 | 7.61 | 0.07 | **92.33** |
//! | d7 | 0.005 | Z | 3 | 0.03 | 0.98 | 40.35 | 56.16 | 2.48 | **41.36** |
//! | d7 | 0.005 | Z | 4 | 0.03 | 2.41 | 67.11 | 28.14 | 2.31 | **69.55** |
//!
//! So at p = 0.001 the split path with K = 4 keeps 99.8-99.9 % of the d = 5 shots and
//! 99.5-99.6 % of the d = 7 ones away from the growth, which is what sets the latency's
//! tail (with [`Grouping::Links`] alone: 99.7-99.9 % and 98.8-99.2 %). On the whole
//! models (before the decoder kept only the observable part) the same K reached
//! 99.6-99.8 % at d = 5 and, with the largest table that could be built there (K = 3),
//! 92 % at d = 7: a memory experiment's detectors of the other basis added
//! defects to every group without changing any answer. Of the 45 d = 7 Z shots left
//! (lanes and full), 34 hold no partition into groups of at most 4 that passes the test,
//! 8 hold one that neither rule finds, and 3 have too many defects (over 11) to search
//! (the search of "Grouping").
//!
//! # Where the attempt stops paying
//!
//! An attempt that fails costs the shot its whole time (d = 7 on the H200: ~3 800 cycles,
//! ~1.9 us) before the growth answers it, and the shots it fails are the many-defect ones
//! in the latency's tail. So the device tries it only up to a defect count
//! ([`split_limit`]): `T`, where `T + 1` is the least defect count from which up fewer
//! than half of the shots (drawn from the model's own errors, [`super::sample`]) with more
//! than `K` defects are answered by it.
//! On the H200's trace of the d = 7 fixture (results/archive/h200-uf-lanes-growth.txt) the
//! attempt answers 73 % of the 8-defect shots, 49 % of those with 9, 28 % with 13 and none
//! from 19 up; from 9 up, 45 %. The drawn shots give the same limit, 8 (K = 2), and with it
//! the d = 7 round trip's p99 fell by 1.1-1.4 us (results/archive/h200-uf-split-limit.txt);
//! d = 5 with K = 4 keeps the attempt for every count (its limit is 32). On the observable
//! parts the d = 7 limit is 9 with K = 3 and 32 with K = 4 (of 20 000 drawn shots, 3 687
//! have more than 4 defects and the split answers 3 576 of them; 3 454 with
//! [`Grouping::Links`] alone).
#![forbid(unsafe_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::graph::MatchingGraph;
use super::sample::SyndromeSampler;
use super::uf::UfScratch;
use super::uf_lanes::{lane_growth, LANE_SLOTS};
use super::uf_table::UfTable;
use crate::{Error, Result};

/// Most defects the split path takes (a warp's lanes on the device).
pub const MAX_SPLIT_DEFECTS: usize = 32;
/// Largest model whose distance matrix is built (`n^2` u16: 32 MiB at this size).
pub const MAX_SPLIT_DETECTORS: usize = 4096;
/// A distance or a time that does not fit 16 bits: read as "at least this much" for a
/// distance (a lower bound keeps the test sound) and as "unbounded" for a time (a table
/// entry whose growth ran this long never passes the test).
pub const SAT: u32 = 0xFFFF;

/// Weighted shortest-path distances between detectors in the matching graph *without* the
/// boundary vertex (no path goes through `B`), `min(distance, SAT)`; [`SAT`] also between
/// detectors that no such path joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Distances {
    n: usize,
    d: Vec<u16>,
}

impl Distances {
    /// Dijkstra from every detector (a few ms at d = 7); refused above
    /// [`MAX_SPLIT_DETECTORS`] detectors (the matrix grows as `n^2`).
    pub fn build(g: &MatchingGraph) -> Result<Distances> {
        let n = g.num_detectors();
        if n > MAX_SPLIT_DETECTORS {
            return Err(Error::DecoderModel {
                file: g.source().to_string(),
                detail: format!(
                    "{n} detectors: the uf split path keeps an n x n distance matrix and \
                     takes at most {MAX_SPLIT_DETECTORS} detectors (decoding is unchanged \
                     without it)"
                ),
            });
        }
        let b = g.boundary();
        let (off, adj) = (g.adj_offset(), g.adj_nbr_weight());
        let mut d = vec![SAT as u16; n * n];
        let mut dist = vec![u64::MAX; n];
        let mut heap = BinaryHeap::new();
        for s in 0..n {
            dist.fill(u64::MAX);
            dist[s] = 0;
            heap.push(Reverse((0u64, s as u32)));
            while let Some(Reverse((dx, x))) = heap.pop() {
                let xu = x as usize;
                if dx > dist[xu] {
                    continue;
                }
                for &[y, w] in &adj[off[xu] as usize..off[xu + 1] as usize] {
                    if y == b {
                        continue;
                    }
                    let dy = dx + u64::from(w);
                    if dy < dist[y as usize] {
                        dist[y as usize] = dy;
                        heap.push(Reverse((dy, y)));
                    }
                }
            }
            for (out, &dx) in d[s * n..(s + 1) * n].iter_mut().zip(&dist) {
                *out = dx.min(u64::from(SAT)) as u16;
            }
        }
        Ok(Distances { n, d })
    }

    pub fn num_detectors(&self) -> usize {
        self.n
    }

    /// `min(distance(a, b), SAT)` without the boundary.
    #[inline]
    pub fn get(&self, a: u32, b: u32) -> u32 {
        u32::from(self.d[a as usize * self.n + b as usize])
    }

    /// Row-major `n x n` (the array the device reads).
    pub fn as_slice(&self) -> &[u16] {
        &self.d
    }
}

/// The specification's output and growth time of a group of defects decoded alone.
pub trait GroupDecoder {
    /// Most defects a group may have.
    fn max_defects(&self) -> usize;
    /// `(obs, time)` of the sorted, distinct `defects` decoded alone (time: [`SAT`] or less;
    /// [`SAT`] means "at least that"), or `None` if they are too many.
    fn group(&mut self, defects: &[u32]) -> Option<(u64, u32)>;
}

impl GroupDecoder for &UfTable {
    fn max_defects(&self) -> usize {
        UfTable::max_defects(self) as usize
    }

    fn group(&mut self, defects: &[u32]) -> Option<(u64, u32)> {
        self.entry(defects)
    }
}

/// Groups decoded on demand with the CPU uf (what a table of any `K` would hold): to
/// measure what a `K` would cover without building its table, and for tests.
#[derive(Debug)]
pub struct DecodeGroups<'a> {
    g: &'a MatchingGraph,
    scratch: UfScratch,
    dets: Vec<u8>,
    max: usize,
}

impl<'a> DecodeGroups<'a> {
    pub fn new(g: &'a MatchingGraph, max_defects: usize) -> DecodeGroups<'a> {
        DecodeGroups {
            g,
            scratch: UfScratch::new(g),
            dets: vec![0; g.num_detectors().div_ceil(8)],
            max: max_defects,
        }
    }
}

impl GroupDecoder for DecodeGroups<'_> {
    fn max_defects(&self) -> usize {
        self.max
    }

    fn group(&mut self, defects: &[u32]) -> Option<(u64, u32)> {
        if defects.len() > self.max {
            return None;
        }
        for &d in defects {
            self.dets[d as usize / 8] |= 1 << (d % 8);
        }
        let (obs, t) = self.scratch.decode_timed(self.g, &self.dets);
        for &d in defects {
            self.dets[d as usize / 8] = 0;
        }
        Some((obs, t.min(SAT)))
    }
}

/// Which way a shot is answered (the device's order of steps: decode/src/uf.rs and
/// device/decode.cu).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Path {
    /// No defect.
    Empty,
    /// At most `K` defects: one table entry.
    Table,
    /// Every defect settles in one step (`UfScratch::isolated`).
    Isolated,
    /// Independent groups of at most `K` defects each (this module).
    Split,
    /// Growth in the warp's registers (decode/src/uf_lanes.rs).
    Lanes,
    /// The full decoder in shared memory: where the lanes give up.
    Full,
}

impl Path {
    pub const ALL: [Path; 6] = [
        Path::Empty,
        Path::Table,
        Path::Isolated,
        Path::Split,
        Path::Lanes,
        Path::Full,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            Path::Empty => "empty",
            Path::Table => "table",
            Path::Isolated => "isolated",
            Path::Split => "split",
            Path::Lanes => "lanes",
            Path::Full => "full",
        }
    }
}

/// The split fast path on the sorted, distinct `defects` (module docs): `Some(obs)`, the
/// specification's output, when it finds groups of at most `groups.max_defects()` defects
/// that pass the distance test; `None` otherwise (more than [`MAX_SPLIT_DEFECTS`]
/// defects, a group too large, or no such grouping found). The grouping is a heuristic;
/// the answer rests only on the final test, which checks every cross pair.
///
/// Two groupings, as the device tries them ([`Grouping`]): [`Grouping::Chains`] first,
/// then, where it finds nothing, [`Grouping::Mutual`].
pub fn split(defects: &[u32], dist: &Distances, groups: &mut impl GroupDecoder) -> Option<u64> {
    split_timed(defects, dist, groups).map(|(obs, _)| obs)
}

/// [`split`] with the time the growth of all of `defects` stops: the latest of the
/// groups' (module docs, the theorem's proof: the run on all of them stops when every
/// group's has). A grouping passes the test only with every group's time below [`SAT`]
/// (a saturated time fails it), so the time is exact, and the pair is what the table
/// holds for `defects` ([`super::uf_table`] fills its entries of 3 and more defects so).
pub fn split_timed(
    defects: &[u32],
    dist: &Distances,
    groups: &mut impl GroupDecoder,
) -> Option<(u64, u32)> {
    GROUPINGS
        .iter()
        .find_map(|&rule| split_grouped(defects, dist, groups, rule))
}

/// The groupings [`split_timed`] tries, in order (the device's order too).
pub const GROUPINGS: [Grouping; 2] = [Grouping::Chains, Grouping::Mutual];

/// How a pass of the split path merges the groups that fail the test. Every defect starts
/// alone; each pass looks up every group's `(obs, T)` and links each defect `a` that fails
/// the test to the nearest defect `b` it fails it with (least `(distance, position)`);
/// then the groups merge along links (the merged group takes its least position as
/// label), and the next pass looks them up again. A pass without a failing pair is the
/// answer. Either way a pass merges two groups at least: the failing pair with the least
/// `(distance, lower position)` links both ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// Along the links that are returned (`a` links to `b` and `b` to `a`): pairs first.
    /// A lone defect's `T` runs until it reaches the boundary (it stays odd), so in the
    /// first pass a defect links to most of its neighbours; merging along every link then
    /// chains neighbouring pairs into one group above `K`, where each pair alone would
    /// have settled in a few hundred units and passed (module docs, "Grouping").
    Mutual,
    /// Along every link: the first pass closes each chain of neighbours into one group,
    /// which settles an odd chain (a pair and the lone defect beside it) at once, where
    /// `Mutual` pairs two of them and leaves the third alone and odd. (`Chains`
    /// answers every shot this rule does, the same way.)
    Links,
    /// `Links` where the chain it would close holds at most `K` defects; in a longer
    /// chain, along the returned links only (tried first).
    Chains,
}

/// [`split_timed`] with one grouping rule.
pub fn split_grouped(
    defects: &[u32],
    dist: &Distances,
    groups: &mut impl GroupDecoder,
    rule: Grouping,
) -> Option<(u64, u32)> {
    split_labelled(defects, dist, groups, rule, &mut [0; MAX_SPLIT_DEFECTS])
}

/// [`split_grouped`] with the grouping that passed: each defect's group label (the least
/// position in its group), what the device's step is checked against.
pub fn split_grouping(
    defects: &[u32],
    dist: &Distances,
    groups: &mut impl GroupDecoder,
    rule: Grouping,
) -> Option<((u64, u32), Vec<usize>)> {
    let mut label = [0; MAX_SPLIT_DEFECTS];
    let answer = split_labelled(defects, dist, groups, rule, &mut label)?;
    Some((answer, label[..defects.len()].to_vec()))
}

/// [`split_grouped`], the groups' labels left in `label` (no allocation: the table's fill
/// runs this for most of its entries).
fn split_labelled(
    defects: &[u32],
    dist: &Distances,
    groups: &mut impl GroupDecoder,
    rule: Grouping,
    label: &mut [usize; MAX_SPLIT_DEFECTS],
) -> Option<(u64, u32)> {
    let nd = defects.len();
    if nd > MAX_SPLIT_DEFECTS || nd == 0 {
        return None;
    }
    let kmax = groups.max_defects();
    // Per defect position: its group's label (least position in it), the group's time.
    let mut time = [0u32; MAX_SPLIT_DEFECTS];
    let mut link = [usize::MAX; MAX_SPLIT_DEFECTS];
    let mut members = [0u32; MAX_SPLIT_DEFECTS];
    for (i, l) in label[..nd].iter_mut().enumerate() {
        *l = i;
    }
    // Each pass with a failing pair merges two groups at least.
    for _pass in 0..nd {
        let mut obs = 0u64;
        for i in 0..nd {
            if label[i] != i {
                continue;
            }
            let mut m = 0;
            for j in i..nd {
                if label[j] == i {
                    if m == kmax {
                        return None;
                    }
                    members[m] = defects[j];
                    m += 1;
                }
            }
            let (o, t) = groups.group(&members[..m])?;
            obs ^= o;
            time[i] = t;
        }
        let mut failing = false;
        for i in 0..nd {
            let ti = time[label[i]];
            let mut best = (u32::MAX, usize::MAX);
            for j in 0..nd {
                if label[j] == label[i] {
                    continue;
                }
                let d = dist.get(defects[i], defects[j]);
                // The test: distance > T_i + T_j (sums of u16 values: no overflow).
                if d <= ti + time[label[j]] {
                    best = best.min((d, j));
                }
            }
            link[i] = best.1;
            failing |= best.1 != usize::MAX;
        }
        if !failing {
            let latest = (0..nd).filter(|&i| label[i] == i).map(|i| time[i]).max();
            return Some((obs, latest.unwrap_or(0)));
        }
        // `Chains`: the components that merging along every link would make, and their
        // defect counts.
        let mut big = [false; MAX_SPLIT_DEFECTS];
        if rule == Grouping::Chains {
            let mut comp = *label;
            union_along(&mut comp[..nd], &link[..nd], |_| true);
            for (i, b) in big[..nd].iter_mut().enumerate() {
                *b = comp[..nd].iter().filter(|&&c| c == comp[i]).count() > kmax;
            }
        }
        union_along(&mut label[..nd], &link[..nd], |i| match rule {
            Grouping::Links => true,
            Grouping::Mutual => link[link[i]] == i,
            Grouping::Chains => !big[i] || link[link[i]] == i,
        });
    }
    None
}

/// Merges the groups `label` (each its least position) along the links `link[i]` for which
/// `keep(i)`, in position order (labels stay least positions).
fn union_along(label: &mut [usize], link: &[usize], keep: impl Fn(usize) -> bool) {
    for i in 0..label.len() {
        let j = link[i];
        if j == usize::MAX || !keep(i) {
            continue;
        }
        let (a, b) = (label[i], label[j]);
        let (lo, hi) = (a.min(b), a.max(b));
        for l in label.iter_mut() {
            if *l == hi {
                *l = lo;
            }
        }
    }
}

/// The defects of the bit-packed syndrome `dets` of `n` detectors in index order, the
/// first `out.len()` of them into `out`: how many were written, and whether there were more.
fn defects_into(dets: &[u8], n: usize, out: &mut [u32]) -> (usize, bool) {
    let mut nd = 0usize;
    for (i, &byte) in dets.iter().enumerate().take(n.div_ceil(8)) {
        let mut m = byte;
        while m != 0 {
            let v = 8 * i + m.trailing_zeros() as usize;
            m &= m - 1;
            if v >= n {
                break;
            }
            if nd == out.len() {
                return (nd, true);
            }
            out[nd] = v as u32;
            nd += 1;
        }
    }
    (nd, false)
}

/// Shots [`split_limit`] draws by default (d = 7: ~0.2 s on one core).
pub const SPLIT_LIMIT_SHOTS: usize = 20_000;
/// Fewest drawn shots (from a defect count up) that decide where the attempt stops.
pub const SPLIT_LIMIT_MIN_SHOTS: u32 = 50;

/// Where the split attempt stops paying (module docs, "Where the attempt stops paying").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitLimit {
    /// The attempt is made for at most this many defects (at most [`MAX_SPLIT_DEFECTS`]).
    pub max_defects: usize,
    /// Per defect count (the index, `0 ..= MAX_SPLIT_DEFECTS`): drawn shots above `K` with
    /// that many defects, and how many of them the split path answered.
    pub tried: Vec<u32>,
    pub answered: Vec<u32>,
}

impl SplitLimit {
    /// The rule on given tallies (indexed by defect count): the least drawn count `c` from
    /// which up at least [`SPLIT_LIMIT_MIN_SHOTS`] shots were tried and fewer than half
    /// answered gives `c - 1`; none: [`MAX_SPLIT_DEFECTS`] (too few shots there to say).
    pub fn from_tallies(tried: Vec<u32>, answered: Vec<u32>) -> SplitLimit {
        let top = tried.len().min(MAX_SPLIT_DEFECTS + 1);
        let (mut t, mut a) = (0u32, 0u32);
        let mut max_defects = MAX_SPLIT_DEFECTS;
        for c in (1..top).rev() {
            t += tried[c];
            a += answered[c];
            // (Only counts that were drawn: below them the pool does not change.)
            if tried[c] > 0 && t >= SPLIT_LIMIT_MIN_SHOTS && 2 * a < t {
                max_defects = c - 1;
            }
        }
        SplitLimit {
            max_defects,
            tried,
            answered,
        }
    }
}

/// Draws `shots` shots from `g`'s errors (seed `seed`) and tallies, per defect count above
/// `K` = `groups.max_defects()`, how many the split path answers; the rule of
/// [`SplitLimit::from_tallies`] then sets the limit. Deterministic for a seed.
pub fn split_limit(
    g: &MatchingGraph,
    dist: &Distances,
    groups: &mut impl GroupDecoder,
    shots: usize,
    seed: u64,
) -> SplitLimit {
    let mut tried = vec![0u32; MAX_SPLIT_DEFECTS + 1];
    let mut answered = vec![0u32; MAX_SPLIT_DEFECTS + 1];
    let mut sampler = SyndromeSampler::new(g, seed);
    let n = g.num_detectors();
    let mut dets = vec![0u8; n.div_ceil(8)];
    let mut defects = [0u32; MAX_SPLIT_DEFECTS];
    let k = groups.max_defects();
    for _ in 0..shots {
        if sampler.draw(&mut dets) <= k {
            continue;
        }
        let (nd, many) = defects_into(&dets, n, &mut defects);
        if many {
            continue;
        }
        tried[nd] += 1;
        if split(&defects[..nd], dist, groups).is_some() {
            answered[nd] += 1;
        }
    }
    SplitLimit::from_tallies(tried, answered)
}

/// The shot's path and output with the table's `K` = `groups.max_defects()`, as the device
/// answers it: no defect, at most `K` defects (one group), the split path (with `dist`, at
/// most `split_max_defects` <= [`MAX_SPLIT_DEFECTS`] defects) or else isolated defects
/// (where there is no `dist`, or more than [`MAX_SPLIT_DEFECTS`] defects), the lanes'
/// growth ([`super::uf_lanes`]), else the full decoder. The output is always the
/// specification's.
pub fn decode_with_path(
    g: &MatchingGraph,
    scratch: &mut UfScratch,
    dist: Option<&Distances>,
    split_max_defects: usize,
    groups: &mut impl GroupDecoder,
    dets: &[u8],
) -> (u64, Path) {
    let mut defects = [0u32; MAX_SPLIT_DEFECTS + 1];
    let (nd, many) = defects_into(dets, g.num_detectors(), &mut defects);
    if nd == 0 {
        return (0, Path::Empty);
    }
    if !many && nd <= groups.max_defects() {
        if let Some((obs, _)) = groups.group(&defects[..nd]) {
            return (obs, Path::Table);
        }
    }
    if let (Some(dist), false) = (dist, many) {
        if nd <= split_max_defects {
            if let Some(obs) = split(&defects[..nd], dist, groups) {
                return (obs, Path::Split);
            }
        }
    } else if let Some((obs, _)) = scratch.isolated(g, dets) {
        // Only where the split path was not tried (see the module docs).
        return (obs, Path::Isolated);
    }
    // The device's order: the lanes first, the full decoder where they give up.
    match lane_growth(g, dets, LANE_SLOTS).result {
        Ok(obs) => (obs, Path::Lanes),
        Err(_) => (scratch.decode(g, dets), Path::Full),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EdgeSpec;
    use crate::uf::tests::{narrow_graph, syndrome_of};
    use crate::{Dem, Shots};
    use proptest::prelude::*;

    fn fixtures() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
    }

    fn fixture(name: &str) -> MatchingGraph {
        let path = fixtures().join(format!("{name}.dem"));
        MatchingGraph::from_dem(&Dem::from_path(&path).unwrap()).unwrap()
    }

    /// [`decode_with_path`] with the split path tried up to [`MAX_SPLIT_DEFECTS`].
    fn path_and_output(
        g: &MatchingGraph,
        s: &mut UfScratch,
        dist: &Distances,
        groups: &mut impl GroupDecoder,
        dets: &[u8],
    ) -> (u64, Path) {
        decode_with_path(g, s, Some(dist), MAX_SPLIT_DEFECTS, groups, dets)
    }

    /// The probability whose quantized weight is `w` (graph.rs: round(ln((1-p)/p) * 256)).
    fn p_of(w: u32) -> f64 {
        1.0 / (1.0 + (f64::from(w) / 256.0).exp())
    }

    fn edge(u: u32, v: Option<u32>, w: u32, obs: u64) -> EdgeSpec {
        EdgeSpec {
            u,
            v,
            p: p_of(w),
            observables: obs,
        }
    }

    fn packed(n: usize, defects: &[u32]) -> Vec<u8> {
        let mut d = vec![0u8; n.div_ceil(8)];
        for &v in defects {
            d[v as usize / 8] |= 1 << (v % 8);
        }
        d
    }

    /// A `cols x rows` grid, boundary edges on the left (observable L0) and right columns,
    /// weights from `ws` (cycled): sparse errors on it give separated groups of defects.
    fn grid(cols: u32, rows: u32, ws: &[u32]) -> MatchingGraph {
        let id = |c: u32, r: u32| r * cols + c;
        let mut e = Vec::new();
        let mut k = 0;
        let mut w = || {
            k += 1;
            ws[k % ws.len()]
        };
        for r in 0..rows {
            e.push(edge(id(0, r), None, w(), 1));
            e.push(edge(id(cols - 1, r), None, w(), 0));
            for c in 0..cols {
                if c + 1 < cols {
                    e.push(edge(id(c, r), Some(id(c + 1, r)), w(), 0));
                }
                if r + 1 < rows {
                    e.push(edge(
                        id(c, r),
                        Some(id(c, r + 1)),
                        w(),
                        u64::from(c % 3 == 1) << 1,
                    ));
                }
            }
        }
        MatchingGraph::from_edges(cols * rows, 2, &e).unwrap()
    }

    #[test]
    fn distances_avoid_the_boundary_and_saturate() {
        // 0 - 1 - 2 in a line (weights 100, 200), 0 and 2 also on the boundary (weight 10),
        // 3 alone: through B, 0 and 2 would be 20 apart.
        let g = MatchingGraph::from_edges(
            4,
            1,
            &[
                edge(0, Some(1), 100, 0),
                edge(1, Some(2), 200, 0),
                edge(0, None, 10, 1),
                edge(2, None, 10, 0),
            ],
        )
        .unwrap();
        let d = Distances::build(&g).unwrap();
        assert_eq!(
            (d.get(0, 1), d.get(1, 2), d.get(0, 2), d.get(2, 0)),
            (100, 200, 300, 300)
        );
        assert_eq!((d.get(1, 1), d.get(0, 3), d.get(3, 3)), (0, SAT, 0));
        assert_eq!(d.as_slice().len(), 16);
        // A long chain of heavy edges: saturated, never wrapped.
        let chain: Vec<EdgeSpec> = (0..9).map(|v| edge(v, Some(v + 1), 30_000, 0)).collect();
        let g = MatchingGraph::from_edges(10, 1, &chain).unwrap();
        let d = Distances::build(&g).unwrap();
        assert_eq!((d.get(0, 2), d.get(0, 3), d.get(9, 0)), (60_000, SAT, SAT));
    }

    #[test]
    fn large_models_are_refused_with_the_reason() {
        let n = MAX_SPLIT_DETECTORS as u32 + 1;
        let g = MatchingGraph::from_edges(n, 1, &[edge(0, None, 100, 1)]).unwrap();
        let e = Distances::build(&g).unwrap_err().to_string();
        assert!(
            e.contains("distance matrix") && e.contains(&n.to_string()),
            "{e}"
        );
    }

    /// Equal distance is not enough (why the test is strict; module docs): `a` alone goes
    /// to its boundary edge at `T_a = 300`; `b` alone through `c` to the boundary at
    /// `T_b = 400 + 350`; `d(a, b) = 1050 = T_a + T_b`. Together, edge `a-b` fills at 750
    /// with `c-B`, and `b` hangs off `a` in the forest: the correction is `{a-b}` (no flip),
    /// not `{a-B}` + `{b-c, c-B}` (L0).
    #[test]
    fn equal_distance_is_not_enough() {
        let (a, b, c) = (0u32, 1, 2);
        let g = MatchingGraph::from_edges(
            3,
            1,
            &[
                edge(a, None, 300, 1),
                edge(a, Some(b), 1050, 0),
                edge(b, Some(c), 400, 0),
                edge(c, None, 350, 0),
            ],
        )
        .unwrap();
        let mut r = UfScratch::new(&g);
        let (oa, ta) = r.decode_reference_timed(&g, &packed(3, &[a]));
        let (ob, tb) = r.decode_reference_timed(&g, &packed(3, &[b]));
        let dist = Distances::build(&g).unwrap();
        assert_eq!((ta, tb, dist.get(a, b)), (300, 750, 1050));
        let both = r.decode_reference(&g, &packed(3, &[a, b]));
        assert_ne!(both, oa ^ ob);
        // The split path does not take it (the pair fails the test, and a group of two is
        // above K = 1).
        let mut groups = DecodeGroups::new(&g, 1);
        assert_eq!(split(&[a, b], &dist, &mut groups), None);
        // One more unit of distance and it is right.
        let g2 = MatchingGraph::from_edges(
            3,
            1,
            &[
                edge(a, None, 300, 1),
                edge(a, Some(b), 1051, 0),
                edge(b, Some(c), 400, 0),
                edge(c, None, 350, 0),
            ],
        )
        .unwrap();
        let dist2 = Distances::build(&g2).unwrap();
        let mut groups2 = DecodeGroups::new(&g2, 1);
        let want = r.decode_reference(&g2, &packed(3, &[a, b]));
        assert_eq!(split(&[a, b], &dist2, &mut groups2), Some(want));
    }

    /// Sparse errors on a grid: every shot answers like the specification, and many take
    /// the split path (groups of up to K = 2 and 3, by table and by decoding on demand).
    #[test]
    fn grid_shots_split_like_the_reference() {
        let g = grid(12, 10, &[1700, 1800, 1900, 2000, 1750, 2100]);
        let n = g.num_detectors();
        let dist = Distances::build(&g).unwrap();
        let table = UfTable::build(&g, 2, 0).unwrap();
        let (mut s, mut r) = (UfScratch::new(&g), UfScratch::new(&g));
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut taken = [0usize; Path::ALL.len()];
        for shot in 0..600 {
            let mut dets = vec![0u8; n.div_ceil(8)];
            for _ in 0..1 + shot % 9 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let e = (x % g.num_edges() as u64) as usize;
                for v in [g.edge_u()[e], g.edge_v()[e]] {
                    if v != g.boundary() {
                        dets[v as usize / 8] ^= 1 << (v % 8);
                    }
                }
            }
            let want = r.decode_reference(&g, &dets);
            let (obs, path) = path_and_output(&g, &mut s, &dist, &mut &table, &dets);
            assert_eq!(obs, want, "shot {shot} ({path:?})");
            taken[path as usize] += 1;
            let mut groups = DecodeGroups::new(&g, 3);
            let (obs, _) = path_and_output(&g, &mut s, &dist, &mut groups, &dets);
            assert_eq!(obs, want, "shot {shot}, K = 3");
        }
        assert!(taken[Path::Split as usize] >= 50, "{taken:?}");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        /// Whenever the split path answers, it answers like the specification, with groups
        /// of any size limit; and the whole chain of paths always does.
        #[test]
        fn split_equals_reference(
            g in narrow_graph(40, 70),
            k in 1usize..=4,
            shots in proptest::collection::vec(proptest::collection::vec(any::<usize>(), 1..10), 1..12),
        ) {
            let dist = Distances::build(&g).unwrap();
            let (mut s, mut r) = (UfScratch::new(&g), UfScratch::new(&g));
            let mut groups = DecodeGroups::new(&g, k);
            let n = g.num_detectors();
            for errors in shots {
                let dets = syndrome_of(&g, &errors);
                let want = r.decode_reference(&g, &dets);
                let defects: Vec<u32> = (0..n as u32).filter(|&v| dets[v as usize / 8] >> (v % 8) & 1 == 1).collect();
                if let Some(obs) = split(&defects, &dist, &mut groups) {
                    prop_assert_eq!(obs, want, "{:?}", defects);
                }
                for rule in [Grouping::Links, Grouping::Chains, Grouping::Mutual] {
                    if let Some((obs, _)) = split_grouped(&defects, &dist, &mut groups, rule) {
                        prop_assert_eq!(obs, want, "{:?} {:?}", defects, rule);
                    }
                }
                let (obs, _) = path_and_output(&g, &mut s, &dist, &mut groups, &dets);
                prop_assert_eq!(obs, want, "{:?}", defects);
            }
        }
    }

    /// The groupings on the d = 7 fixture's observable part, K = 4 (the device's): every
    /// answer is the specification's; `Chains` answers every shot `Links` does and more;
    /// `Chains` and `Mutual` each answer shots the other does not, and [`split`] answers
    /// their union.
    #[test]
    fn each_grouping_answers_shots_the_other_does_not() {
        use crate::ObservablePart;
        let whole = fixture("surface_d7_r7_z_p001");
        let part = ObservablePart::of(&whole).unwrap().unwrap();
        let g = part.graph();
        let n = g.num_detectors();
        let dist = Distances::build(g).unwrap();
        let mut groups = DecodeGroups::new(g, 4);
        let mut r = UfScratch::new(g);
        let shots = Shots::read(
            &fixtures().join("surface_d7_r7_z_p001.b8"),
            whole.num_detectors(),
            None,
        )
        .unwrap();
        let mut dets = Vec::new();
        // (chains only, mutual only, both, chains but not links)
        let mut tally = (0, 0, 0, 0);
        for i in 0..shots.len() {
            part.compact(shots.row(i), &mut dets);
            let defects: Vec<u32> = (0..n as u32)
                .filter(|&v| dets[v as usize / 8] >> (v % 8) & 1 == 1)
                .collect();
            if defects.len() <= 4 || defects.len() > MAX_SPLIT_DEFECTS {
                continue;
            }
            let want = r.decode_reference_timed(g, &dets);
            let [links, chains, mutual] = [Grouping::Links, Grouping::Chains, Grouping::Mutual]
                .map(|rule| split_grouped(&defects, &dist, &mut groups, rule));
            for got in [links, chains, mutual].into_iter().flatten() {
                assert_eq!(got.0, want.0, "shot {i}");
                assert_eq!(got.1, want.1.min(SAT), "shot {i}");
            }
            if links.is_some() {
                assert_eq!(chains, links, "shot {i}");
            } else if chains.is_some() {
                tally.3 += 1;
            }
            assert_eq!(split_timed(&defects, &dist, &mut groups), chains.or(mutual));
            match (chains.is_some(), mutual.is_some()) {
                (true, false) => tally.0 += 1,
                (false, true) => tally.1 += 1,
                (true, true) => tally.2 += 1,
                (false, false) => {}
            }
        }
        println!("chains only, mutual only, both, chains but not links: {tally:?}");
        assert!(
            tally.0 >= 10 && tally.1 >= 10 && tally.2 >= 1000 && tally.3 >= 10,
            "{tally:?}"
        );
    }

    /// Every shot of the d = 5 and d = 7 fixtures at p = 0.001 (Z) and 0.005 (X), through
    /// the paths with K = 2: the specification's output, and the split path taken.
    #[test]
    fn fixture_shots_split_like_the_cpu_uf() {
        for (name, min_split) in [
            ("surface_d5_r5_z_p001", 0.01),
            ("surface_d7_r7_z_p001", 0.02),
            ("surface_d5_r5_x_p005", 0.03),
        ] {
            let g = fixture(name);
            let n = g.num_detectors();
            let shots = Shots::read(&fixtures().join(format!("{name}.b8")), n, None).unwrap();
            let dist = Distances::build(&g).unwrap();
            let mut s = UfScratch::new(&g);
            let mut r = UfScratch::new(&g);
            let mut groups = DecodeGroups::new(&g, 2);
            let mut split_shots = 0;
            for i in 0..shots.len() {
                let (obs, path) = path_and_output(&g, &mut s, &dist, &mut groups, shots.row(i));
                assert_eq!(
                    obs,
                    r.decode(&g, shots.row(i)),
                    "{name} shot {i} ({path:?})"
                );
                split_shots += usize::from(path == Path::Split);
            }
            let share = split_shots as f64 / shots.len() as f64;
            assert!(share >= min_split, "{name}: {share}");
        }
    }

    /// The rule: the least count from which up half or more fail (with enough shots) sets
    /// the limit one below; a count with too few shots decides nothing.
    #[test]
    fn split_limit_rule_on_tallies() {
        let lim = |tried: &[u32], answered: &[u32]| {
            let mut t = vec![0; MAX_SPLIT_DEFECTS + 1];
            let mut a = vec![0; MAX_SPLIT_DEFECTS + 1];
            t[..tried.len()].copy_from_slice(tried);
            a[..answered.len()].copy_from_slice(answered);
            SplitLimit::from_tallies(t, a).max_defects
        };
        // Nothing drawn, or every attempt answers: no limit.
        assert_eq!(lim(&[], &[]), MAX_SPLIT_DEFECTS);
        assert_eq!(
            lim(&[0, 0, 0, 100, 100], &[0, 0, 0, 100, 100]),
            MAX_SPLIT_DEFECTS
        );
        // From 5 up: 40 of 100 answered; from 4 up: 140 of 200.
        assert_eq!(lim(&[0, 0, 0, 100, 100, 100], &[0, 0, 0, 100, 100, 40]), 4);
        // Exactly half is not fewer than half.
        assert_eq!(
            lim(&[0, 0, 0, 100, 100], &[0, 0, 0, 100, 50]),
            MAX_SPLIT_DEFECTS
        );
        // 49 shots fail at 6 (too few alone); with 5's, 90 of 149 answered: no limit; with
        // 60 of 149, the limit is 4.
        let (t6, a6) = ([0, 0, 0, 0, 0, 100, 49], [0, 0, 0, 0, 0, 90, 0]);
        assert_eq!(lim(&t6, &a6), MAX_SPLIT_DEFECTS);
        assert_eq!(lim(&t6, &[0, 0, 0, 0, 0, 60, 0]), 4);
        assert_eq!(
            lim(&[0, 0, 0, 0, 0, 0, 49], &[0, 0, 0, 0, 0, 0, 0]),
            MAX_SPLIT_DEFECTS
        );
        // The pooled rate, not the last count's: 7 fails alone, 6 up passes (110 of 200).
        assert_eq!(
            lim(&[0, 0, 0, 0, 0, 0, 100, 100], &[0, 0, 0, 0, 0, 0, 90, 20]),
            6
        );
        assert_eq!(
            lim(&[0, 0, 0, 0, 0, 0, 100, 100], &[0, 0, 0, 0, 0, 0, 60, 20]),
            5
        );
    }

    /// The limit drawn from the model's errors against the one the fixture's own shots give
    /// (d = 7, p = 0.001, K = 2; d = 5, K = 4), and what it does on the fixture.
    #[test]
    fn split_limit_from_drawn_shots_matches_the_fixture() {
        for (name, k) in [("surface_d7_r7_z_p001", 2), ("surface_d5_r5_z_p001", 4)] {
            let g = fixture(name);
            let n = g.num_detectors();
            let dist = Distances::build(&g).unwrap();
            let mut groups = DecodeGroups::new(&g, k);
            let drawn = split_limit(&g, &dist, &mut groups, SPLIT_LIMIT_SHOTS, 1);
            let shots = Shots::read(&fixtures().join(format!("{name}.b8")), n, None).unwrap();
            let mut tried = vec![0u32; MAX_SPLIT_DEFECTS + 1];
            let mut answered = vec![0u32; MAX_SPLIT_DEFECTS + 1];
            let mut defects = [0u32; MAX_SPLIT_DEFECTS];
            for i in 0..shots.len() {
                let (nd, many) = defects_into(shots.row(i), n, &mut defects);
                if nd > k && !many {
                    tried[nd] += 1;
                    let answers = split(&defects[..nd], &dist, &mut groups).is_some();
                    answered[nd] += u32::from(answers);
                }
            }
            let fixture = SplitLimit::from_tallies(tried, answered);
            println!(
                "{name} K={k}: limit drawn {} (tried {:?}, answered {:?}), fixture {}",
                drawn.max_defects, drawn.tried, drawn.answered, fixture.max_defects
            );
            assert!(
                drawn.max_defects.abs_diff(fixture.max_defects) <= 2,
                "{name}: drawn {} vs fixture {}",
                drawn.max_defects,
                fixture.max_defects
            );
            // d = 7 with K = 2: a limit (the fixture's is 8); d = 5 with K = 4: none.
            assert_eq!(k == 2, drawn.max_defects < MAX_SPLIT_DEFECTS, "{name}");
            let again = split_limit(&g, &dist, &mut groups, SPLIT_LIMIT_SHOTS, 1);
            assert_eq!(again, drawn, "{name}: the same seed draws the same shots");
        }
    }

    /// Shares of shots by path for K = 2, 3, 4 (groups decoded on demand: no table is
    /// built), every answer checked against the specification; the numbers in the module
    /// docs. Release:
    /// `cargo test --release --lib uf_split::tests::coverage -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn coverage() {
        for name in [
            "surface_d5_r5_z_p001",
            "surface_d5_r5_x_p001",
            "surface_d7_r7_z_p001",
            "surface_d7_r7_x_p001",
            "surface_d5_r5_z_p005",
            "surface_d5_r5_x_p005",
            "surface_d7_r7_z_p005",
            "surface_d7_r7_x_p005",
        ] {
            // The decoder's graph: the model's observable part, checked against the
            // specification on the whole model.
            let whole = fixture(name);
            let part = crate::ObservablePart::of(&whole).unwrap().unwrap();
            let g = part.graph();
            let n = whole.num_detectors();
            let shots = Shots::read(&fixtures().join(format!("{name}.b8")), n, None).unwrap();
            let dist = Distances::build(g).unwrap();
            let mut s = UfScratch::new(g);
            let mut r = UfScratch::new(&whole);
            let mut dets = Vec::new();
            for k in [2usize, 3, 4] {
                let mut groups = DecodeGroups::new(g, k);
                let mut count = [0usize; Path::ALL.len()];
                for i in 0..shots.len() {
                    part.compact(shots.row(i), &mut dets);
                    let (obs, path) = path_and_output(g, &mut s, &dist, &mut groups, &dets);
                    assert_eq!(
                        obs,
                        r.decode_reference(&whole, shots.row(i)),
                        "{name} shot {i}"
                    );
                    count[path as usize] += 1;
                }
                let pct = |p: Path| 100.0 * count[p as usize] as f64 / shots.len() as f64;
                println!(
                    "{name:<22} K={k}: empty {:5.2} table {:5.2} isolated {:5.2} split {:5.2} \
                     lanes {:5.2} full {:5.2}  without growth {:6.2} %",
                    pct(Path::Empty),
                    pct(Path::Table),
                    pct(Path::Isolated),
                    pct(Path::Split),
                    pct(Path::Lanes),
                    pct(Path::Full),
                    100.0 - pct(Path::Lanes) - pct(Path::Full)
                );
            }
        }
    }
}

//! The window decoder: union-find on the window's *defects*, with distances from the
//! model's tables ([`super::metric`]), then exact matching inside each cluster and the
//! commit of the matches below the commit round (docs/streaming.md, "The window decoder").
//! Its cost follows the defects, not the graph.
//!
//! 1. Defects `0..m` in increasing vertex order; `B(a)` each one's boundary distance,
//!    `D(a, b)` a pair's distance. Only *candidate* pairs can ever meet: `D <= B(a) +
//!    B(b)` (a defect stops growing when its cluster reaches the boundary).
//! 2. Growth rounds. Every defect is a cluster (root: its least defect); a cluster is
//!    *active* when it holds an odd number of defects and has not reached the boundary.
//!    Each defect of an active cluster grows its radius `r` by `delta` per round, where
//!    `delta` is the least *need*: `B(a) - r(a)` for a defect of an active cluster, and
//!    `ceil((D - r(a) - r(b)) / k)` for a candidate pair in different clusters, `k` of
//!    them active (at least one). Then every candidate pair with `r(a) + r(b) >= D`
//!    merges its clusters, and a cluster with a defect at `r(a) >= B(a)` has reached the
//!    boundary. Until no cluster is active.
//! 3. Each cluster is matched exactly ([`super::matching`]) when it has at most
//!    [`MatchLimits::defects`] defects, else greedily.
//! 4. Commit: a match below the commit round flips its observables; one that crosses it
//!    commits its part below and carries an event into the commit round ([`commit`]).
//!
//! Every choice is a least index or an order-free count, so a warp that computes the same
//! sets in parallel (device/window.cu) commits the same flips.
#![forbid(unsafe_code)]

use super::matching::{ClusterMatcher, MatchLimits, Pick};
use super::metric::{dist, mask, Metric, WindowPlace, INF};
use super::model::WindowGraph;

/// "No cluster / no defect".
pub const NONE: u32 = u32::MAX;

/// Working memory of the window decoder; grows to the largest window it sees.
#[derive(Debug, Clone, Default)]
pub struct WindowScratch {
    bound: Vec<u32>,
    rad: Vec<u32>,
    parent: Vec<u32>,
    /// Per defect: its cluster's root, between growth rounds.
    root: Vec<u32>,
    /// Per defect: (round, kept slot).
    places: Vec<(u32, u32)>,
    /// Indices in `cand` of the pairs still between two clusters.
    live: Vec<u32>,
    /// Per root: odd parity (bit 0), reached the boundary (bit 1).
    flags: Vec<u8>,
    /// Candidate pairs `(a, b, D)`, `a < b`.
    cand: Vec<(u32, u32, u32)>,
    /// Defects by cluster: members in increasing order, clusters by root.
    order: Vec<u32>,
    /// The matches, as the matcher picked them.
    picks: Vec<Pick>,
    /// Events the last commit carried into the commit round (window vertices).
    pub carried: Vec<u32>,
    /// Growth rounds of the last decode.
    pub rounds: u32,
    /// Clusters matched exactly / greedily in the last decode.
    pub exact: u32,
    pub greedy: u32,
    pub limits: MatchLimits,
    matcher: ClusterMatcher,
}

const ODD: u8 = 1;
const BOUNDARY: u8 = 2;

impl WindowScratch {
    /// Scratch that matches clusters within `limits` exactly.
    pub fn new(limits: MatchLimits) -> WindowScratch {
        WindowScratch {
            limits,
            ..WindowScratch::default()
        }
    }

    fn find(&mut self, mut a: u32) -> u32 {
        while self.parent[a as usize] != a {
            let p = self.parent[a as usize];
            self.parent[a as usize] = self.parent[p as usize];
            a = p;
        }
        a
    }

    fn active(&self, root: u32) -> bool {
        self.flags[root as usize] == ODD
    }

    fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return;
        }
        let (lo, hi) = (ra.min(rb), ra.max(rb));
        self.parent[hi as usize] = lo;
        let f = self.flags[hi as usize];
        let l = &mut self.flags[lo as usize];
        *l = ((*l ^ f) & ODD) | ((*l | f) & BOUNDARY);
    }

    /// The matches of the last decode (indices into its defects).
    pub fn picks(&self) -> &[Pick] {
        &self.picks
    }

    /// Decodes window graph `index` of a model whose tables are `metric`, with defects
    /// `defects` (distinct vertices, increasing): returns the committed flips, and leaves
    /// in [`WindowScratch::carried`] the events the commit carries into the commit round.
    pub fn decode(
        &mut self,
        metric: &Metric,
        index: usize,
        window: &WindowGraph,
        defects: &[u32],
    ) -> u64 {
        self.rounds = 0;
        self.exact = 0;
        self.greedy = 0;
        self.carried.clear();
        if defects.is_empty() {
            return 0;
        }
        let at = WindowPlace::of(window);
        self.start(metric, index, at, defects);
        self.grow();
        self.clusters();
        self.picks.clear();
        let m = defects.len();
        let mut first = 0;
        while first < m {
            let root = self.root[self.order[first] as usize];
            let mut end = first + 1;
            while end < m && self.root[self.order[end] as usize] == root {
                end += 1;
            }
            let members = &self.order[first..end];
            let exact = self.matcher.run(
                self.limits,
                members,
                &self.bound,
                &self.cand,
                &mut self.picks,
            );
            if exact {
                self.exact += 1;
            } else {
                self.greedy += 1;
            }
            first = end;
        }
        let picks = std::mem::take(&mut self.picks);
        let flips = commit(
            metric,
            index,
            at,
            window,
            defects,
            &picks,
            &mut self.carried,
        );
        self.picks = picks;
        flips
    }

    /// Step 1: the defects' boundary distances and the candidate pairs. Defects are in
    /// increasing vertex order, so by round: a pair whose rounds are too far apart for any
    /// path to be short enough ends the scan of its first defect.
    fn start(&mut self, metric: &Metric, index: usize, at: WindowPlace, defects: &[u32]) {
        let m = defects.len();
        self.bound.clear();
        self.bound
            .extend(defects.iter().map(|&v| dist(metric.boundary(index, v))));
        self.rad.clear();
        self.rad.resize(m, 0);
        self.parent.clear();
        self.parent.extend(0..m as u32);
        self.root.clear();
        self.root.extend(0..m as u32);
        self.flags.clear();
        self.flags.resize(m, ODD);
        self.cand.clear();
        let most = self
            .bound
            .iter()
            .copied()
            .filter(|&b| b != INF)
            .max()
            .unwrap_or(0);
        let k = metric.slots();
        self.places.clear();
        self.places.extend(defects.iter().map(|&v| (v / k, v % k)));
        for a in 0..m {
            let (pa, ba) = (self.places[a], self.bound[a]);
            let reach = ba.saturating_add(most);
            for (b, &pb) in self.places.iter().enumerate().skip(a + 1) {
                if metric.lower(pb.0 - pa.0) > reach {
                    break;
                }
                let d = dist(metric.pair_at(at, pa, pb));
                if d != INF && d <= ba.saturating_add(self.bound[b]) {
                    self.cand.push((a as u32, b as u32, d));
                }
            }
        }
        self.live.clear();
        self.live.extend(0..self.cand.len() as u32);
    }

    /// Step 2: growth rounds until no cluster is active. `root` holds each defect's root
    /// between rounds, `live` the candidate pairs still between two clusters.
    fn grow(&mut self) {
        let m = self.rad.len();
        loop {
            let mut delta = INF;
            for a in 0..m {
                if self.active(self.root[a]) {
                    delta = delta.min(self.bound[a].saturating_sub(self.rad[a]));
                }
            }
            for &i in &self.live {
                let (a, b, d) = self.cand[i as usize];
                let (ra, rb) = (self.root[a as usize], self.root[b as usize]);
                let k = u32::from(self.active(ra)) + u32::from(self.active(rb));
                if k == 0 {
                    continue;
                }
                let gap = d - self.rad[a as usize] - self.rad[b as usize];
                delta = delta.min(gap.div_ceil(k));
            }
            if delta == INF {
                return;
            }
            self.rounds += 1;
            for a in 0..m {
                if self.active(self.root[a]) {
                    self.rad[a] += delta;
                }
            }
            for n in 0..self.live.len() {
                let (a, b, d) = self.cand[self.live[n] as usize];
                if self.rad[a as usize] + self.rad[b as usize] >= d {
                    self.union(a, b);
                }
            }
            for a in 0..m {
                self.root[a] = self.find(a as u32);
            }
            for a in 0..m {
                if self.rad[a] >= self.bound[a] {
                    let r = self.root[a] as usize;
                    self.flags[r] |= BOUNDARY;
                }
            }
            let (cand, root) = (&self.cand, &self.root);
            self.live.retain(|&i| {
                let (a, b, _) = cand[i as usize];
                root[a as usize] != root[b as usize]
            });
        }
    }

    /// The defects ordered by cluster (by root), members in increasing order.
    fn clusters(&mut self) {
        let m = self.rad.len() as u32;
        self.order.clear();
        self.order.extend(0..m);
        for a in 0..m {
            let r = self.find(a);
            self.parent[a as usize] = r;
        }
        let parent = &self.parent;
        self.order
            .sort_unstable_by_key(|&a| (parent[a as usize], a));
    }
}

/// Step 4: the flips of the matches `picks` (defect indices into `defects`) below the
/// commit round of window graph `index`; the events carried into the commit round go to
/// `carried`.
///
/// - A pair whose upper defect lies below the commit round: its mask. A pair or boundary
///   match whose lower defect lies at or above it: nothing (a later window decides it).
/// - A boundary match whose path leaves below the commit round: its mask.
/// - Otherwise the match crosses the commit round `C` from defect `a` below it to `b` (or
///   the boundary) above: the crossing vertex is the least slot `x` of round `C` with the
///   least `min_y (D(a, y) + w(y, x)) + D(x, b)` (or `+ B(x)`), `y` over round `C - 1`'s
///   neighbours of `x`; the commit flips `a`'s path to `x` and carries an event to `x`.
pub fn commit(
    metric: &Metric,
    index: usize,
    at: WindowPlace,
    window: &WindowGraph,
    defects: &[u32],
    picks: &[Pick],
    carried: &mut Vec<u32>,
) -> u64 {
    let c = window.commit_rounds;
    let k = window.slots;
    let masks = metric.masks();
    let mut flips = 0u64;
    for p in picks {
        let a = defects[p.a as usize];
        if a / k >= c {
            continue;
        }
        let far = match p.b {
            NONE => {
                let e = metric.boundary(index, a);
                if metric.exit_round(index, a) < c {
                    flips ^= masks[mask(e) as usize];
                    continue;
                }
                NONE
            }
            b => {
                let b = defects[b as usize];
                if b / k < c {
                    flips ^= masks[mask(metric.pair(at, a, b)) as usize];
                    continue;
                }
                b
            }
        };
        // (No way across: nothing is committed, the next window sees the defects again.)
        if let Some((x, m)) = crossing(metric, index, at, window, a, far) {
            flips ^= m;
            carried.push(x);
        }
    }
    flips
}

/// The vertex where a match from `a` (below the commit round) to `far` (above it, or the
/// boundary: NONE) crosses into the commit round, and the observables of `a`'s path to it.
fn crossing(
    metric: &Metric,
    index: usize,
    at: WindowPlace,
    window: &WindowGraph,
    a: u32,
    far: u32,
) -> Option<(u32, u64)> {
    let g = &window.graph;
    let (k, c) = (window.slots, window.commit_rounds);
    let (off, adj, w, obs) = (g.adj_offset(), g.adj_pairs(), g.edge_weight(), g.edge_obs());
    let masks = metric.masks();
    let mut best = (INF as u64 * 3, NONE, 0u64);
    let pa = (a / k, a % k);
    let pf = (far / k, far % k);
    let (below, b) = ((c - 1) * k, g.boundary());
    for x in c * k..(c + 1) * k {
        let rest = if far == NONE {
            dist(metric.boundary(index, x))
        } else {
            dist(metric.pair_at(at, (c, x - c * k), pf))
        };
        if rest == INF {
            continue;
        }
        // The least way up to x from round C - 1, and the observables of a's path to x.
        let mut up = (INF, 0u64);
        for &[e, y] in &adj[off[x as usize] as usize..off[x as usize + 1] as usize] {
            if y == b || y < below || y >= below + k {
                continue;
            }
            let ay = metric.pair_at(at, pa, (c - 1, y - below));
            if dist(ay) == INF {
                continue;
            }
            let d = dist(ay) + w[e as usize];
            if d < up.0 {
                up = (d, masks[mask(ay) as usize] ^ obs[e as usize]);
            }
        }
        if up.0 == INF {
            continue;
        }
        let total = u64::from(up.0) + u64::from(rest);
        if total < best.0 {
            best = (total, x, up.1);
        }
    }
    (best.1 != NONE).then_some((best.1, best.2))
}

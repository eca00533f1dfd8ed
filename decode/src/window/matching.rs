//! Matching inside one cluster of the window decoder ([`super::uf`], step 3;
//! docs/streaming.md, "The window decoder").
//!
//! The cluster's defects `0..m` (in increasing order), each with its boundary distance
//! `B(i)`, and the distances `D(i, j)` of its candidate pairs (the others count as
//! unreachable: such a pair never beats sending both to the boundary).
//!
//! - **Exact**, when `m <= MatchLimits::defects`: `f(S)` over subsets, `f(∅) = 0`, and for
//!   `i` the least of `S`, the least of `f(S - i) + B(i)` (tried first) and
//!   `f(S - i - j) + D(i, j)` for `j` in `S` ascending, the first least kept; the matches
//!   are read back from `f(all)`.
//! - **Greedy**, for larger clusters (or when `f(all)` is unreachable): repeatedly the
//!   pair of defects left that saves the most against sending both to the boundary (the
//!   least `D(i, j) - B(i) - B(j)`, then the least `i`, then `j`), while one saves
//!   anything; every defect left goes to the boundary (where it can).
#![forbid(unsafe_code)]

use std::collections::HashMap;

use super::metric::INF;
use super::uf::NONE;

/// The largest clusters matched exactly (default: [`MatchLimits::DEFAULT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatchLimits {
    /// Defects of a cluster matched exactly (the matching tries `2^defects` subsets);
    /// larger clusters are matched greedily, and 0 matches every cluster greedily.
    pub defects: u32,
}

impl MatchLimits {
    /// Most defects a cluster may have to be matched exactly: `2^MAX` subsets.
    pub const MAX_DEFECTS: u32 = 16;

    /// Every cluster matched greedily.
    pub const OFF: MatchLimits = MatchLimits { defects: 0 };

    /// Clusters of up to 16 defects matched exactly.
    pub const DEFAULT: MatchLimits = MatchLimits { defects: 16 };
}

impl Default for MatchLimits {
    fn default() -> MatchLimits {
        MatchLimits::DEFAULT
    }
}

/// One match: defect `a` with defect `b`, or with the boundary (`b == NONE`); indices
/// into the window's defects, `a < b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    pub a: u32,
    pub b: u32,
}

/// The matcher's working memory.
#[derive(Debug, Clone, Default)]
pub struct ClusterMatcher {
    /// `d[i * m + j]`: the cluster's pair distances (INF: not a candidate).
    d: Vec<u32>,
    b: Vec<u32>,
    /// `f(S)` and its choice, for the subsets reached.
    memo: HashMap<u32, (u32, u8)>,
    left: Vec<bool>,
    /// Per window defect: its index in the cluster being matched.
    local: Vec<u32>,
}

impl ClusterMatcher {
    /// Matches the cluster of window defects `members` (increasing), whose boundary
    /// distances are `bound[member]`, candidate pairs `cand` (the window's, `(a, b, D)`
    /// with `a < b`, sorted), appending the matches to `picks`. Returns whether it was
    /// matched exactly.
    pub fn run(
        &mut self,
        limits: MatchLimits,
        members: &[u32],
        bound: &[u32],
        cand: &[(u32, u32, u32)],
        picks: &mut Vec<Pick>,
    ) -> bool {
        let m = members.len();
        if self.local.len() < bound.len() {
            self.local.resize(bound.len(), NONE);
        }
        for (i, &a) in members.iter().enumerate() {
            self.local[a as usize] = i as u32;
        }
        self.d.clear();
        self.d.resize(m * m, INF);
        self.b.clear();
        self.b.extend(members.iter().map(|&a| bound[a as usize]));
        // The cluster's candidate pairs: those whose first defect is a member (the list
        // is sorted by it) and whose second is one too.
        let first = members[0];
        let from = cand.partition_point(|c| c.0 < first);
        let last = members[m - 1];
        for &(a, b, dist) in &cand[from..] {
            if a > last {
                break;
            }
            let (la, lb) = (self.local[a as usize], self.local[b as usize]);
            if la != NONE && lb != NONE {
                self.d[la as usize * m + lb as usize] = dist;
                self.d[lb as usize * m + la as usize] = dist;
            }
        }
        let exact = m <= limits.defects as usize && self.exact(members, picks);
        if !exact {
            self.greedy(members, picks);
        }
        for &a in members {
            self.local[a as usize] = NONE;
        }
        exact
    }

    /// The exact matching over subsets; false (nothing appended) when `f(all)` is
    /// unreachable. `f` is computed only for the subsets the recursion reaches (a pair
    /// that is not a candidate costs INF, so its subset is never needed): the same costs
    /// and choices as the whole table (device/window/match.cuh computes that), far fewer.
    fn exact(&mut self, members: &[u32], picks: &mut Vec<Pick>) -> bool {
        let m = members.len();
        let full = ((1u64 << m) - 1) as u32;
        self.memo.clear();
        if self.f(full, m) == INF {
            return false;
        }
        let mut set = full;
        while set != 0 {
            let i = set.trailing_zeros() as usize;
            let c = self.memo[&set].1 as usize;
            set &= !(1 << i);
            let b = if c == m {
                NONE
            } else {
                set &= !(1 << c);
                members[c]
            };
            picks.push(Pick { a: members[i], b });
        }
        true
    }

    /// `f(set)` (module docs), memoized with its choice.
    fn f(&mut self, set: u32, m: usize) -> u32 {
        if set == 0 {
            return 0;
        }
        if let Some(&(c, _)) = self.memo.get(&set) {
            return c;
        }
        let i = set.trailing_zeros() as usize;
        let rest = set & !(1 << i);
        let mut best = add(self.f(rest, m), self.b[i]);
        let mut choice = m as u8;
        let mut r = rest;
        while r != 0 {
            let j = r.trailing_zeros() as usize;
            r &= r - 1;
            let d = self.d[i * m + j];
            if d == INF {
                continue;
            }
            let c = add(self.f(rest & !(1 << j), m), d);
            if c < best {
                best = c;
                choice = j as u8;
            }
        }
        self.memo.insert(set, (best, choice));
        best
    }

    /// The greedy matching: the pairs that save the most first, then the boundary.
    fn greedy(&mut self, members: &[u32], picks: &mut Vec<Pick>) {
        let m = members.len();
        self.left.clear();
        self.left.resize(m, true);
        loop {
            // (saving offset by 2 INF, i, j): candidates are never worse than the boundary.
            let mut best = (u64::MAX, 0usize, 0usize);
            for i in (0..m).filter(|&i| self.left[i]) {
                for j in (i + 1..m).filter(|&j| self.left[j]) {
                    let d = self.d[i * m + j];
                    if d == INF {
                        continue;
                    }
                    let save = u64::from(d) + 2 * u64::from(INF)
                        - u64::from(self.b[i])
                        - u64::from(self.b[j]);
                    if save < 2 * u64::from(INF) && (save, i, j) < best {
                        best = (save, i, j);
                    }
                }
            }
            if best.0 == u64::MAX {
                break;
            }
            let (_, i, j) = best;
            self.left[i] = false;
            self.left[j] = false;
            picks.push(Pick {
                a: members[i],
                b: members[j],
            });
        }
        for (i, &a) in members.iter().enumerate() {
            if self.left[i] && self.b[i] != INF {
                picks.push(Pick { a, b: NONE });
            }
        }
    }
}

/// A sum of distances, unreachable when either is.
fn add(x: u32, y: u32) -> u32 {
    if x == INF || y == INF {
        INF
    } else {
        (x + y).min(INF - 1)
    }
}

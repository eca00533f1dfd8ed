//! Low-weight syndrome table for the union-find decoder: the `uf` output (observable flips)
//! of every syndrome with at most `K` defects, precomputed with the CPU decoder
//! ([`UfScratch::decode`], whose output is the specification's), so a lookup is
//! bit-identical to a decode by construction. The GPU `uf` (device/decode.cu) answers a
//! request with at most `K` defects with one load from this table and runs the full
//! decoder otherwise (the appliance's `gpu::decoder` uploads it).
//!
//! # Index
//!
//! Syndromes are ordered by defect count, then by the combinatorial number system over
//! their sorted detector indices: the `k` defects `d_0 < d_1 < ... < d_{k-1}` have rank
//! `C(d_0, 1) + C(d_1, 2) + ... + C(d_{k-1}, k)` among the `C(n, k)` syndromes of `k`
//! defects (ranks `0 .. C(n, k)` in colexicographic order), and index
//! `base[k] + rank` with `base[k] = C(n, 0) + ... + C(n, k - 1)`. An entry is the wire
//! result, `ceil(num_observables / 8)` bytes (1 up to 8 observables); beside it,
//! [`UfTable::times`] holds per entry the time its growth stopped (u16, saturated at
//! [`uf_split::SAT`]), which the split path's test reads ([`super::uf_split`]).
//!
//! # Filling it
//!
//! Level by level (syndromes of 1, 2, ... defects), each level on every core. An entry of
//! 2 and more defects that the split path's test cuts into independent groups
//! ([`uf_split::split_timed`], over the levels below) is the XOR of the groups' results
//! and the latest of their times, exactly the specification's by the split theorem
//! ([`super::uf_split`]); only the rest are decoded. Random syndromes of a few defects are
//! expensive decodes (their clusters grow far before they meet: ~7 us each for 4 defects
//! on the d = 7 part), and 78 % of the d = 7 part's 4-defect ones split (~0.2 us), so its
//! K = 4 table builds 2.4 times faster than by decoding every entry (59 s against 140 s on
//! the 2-core VM). Tested: filled and decoded tables are equal, results and times.
//!
//! # Size, and the shots it covers
//!
//! The decoder's graph is the model's observable part ([`super::observable_part`]), so
//! `n` below is its detectors. [`auto_max_defects`] picks the largest `K` whose table
//! holds at most [`AUTO_MAX_ENTRIES`] entries and whose precompute stays within
//! [`AUTO_MAX_WORK`]: the same `K` on every host. Where the split path is available (at
//! most [`uf_split::MAX_SPLIT_DETECTORS`] detectors), [`auto_max_defects_split`] raises
//! `K` further, up to [`AUTO_SPLIT_MAX_DEFECTS`], while the table holds at most
//! [`AUTO_SPLIT_MAX_ENTRIES`] entries and the precompute stays within
//! [`AUTO_SPLIT_WORK_PER_CORE`] per core of the host (about 10 s of a core's work): the
//! split path answers a shot whose interacting groups hold at most `K` defects each
//! ([`super::uf_split`] has the shares). [`auto_max_defects_here`] is the choice the GPU
//! upload makes. On the committed fixtures (circuit noise, rounds = d, memory Z), the
//! observable parts:
//!
//! | model | part: detectors, edges | K | entries | precompute | shots with at most K defects, p = 0.001 |
//! |---|---|---|---|---|---|
//! | surface d3, 3 rounds | 16, 55 | 16 (auto) | 65.5 k | 0.09 s (2-core VM) | 100 % |
//! | surface d5, 5 rounds | 72, 301 | 4 (auto) | 1.09 M | 0.44 s (2-core VM) | 98.7 % |
//! | surface d7, 7 rounds | 192, 883 | 3 (auto, < 13 cores) | 1.18 M | 1.3 s (2-core VM) | 63.4 % |
//! | surface d7, 7 rounds | 192, 883 | 4 (auto, >= 13 cores) | 56.1 M | 59 s (2-core VM), 16-21 s (16-core H200 host) | 82.5 % |
//!
//! The d7 K = 4 table is 56 MB of results and 112 MB of times on the device, and its
//! 16-21 s are paid at a backend's start (logged; tables are kept per process by graph
//! content, and on disk for the next process: [`super::uf_table_cache`]);
//! `--uf-table-max-defects 3` starts in about a second. It is
//! what brings d7's round trip p99 to about 10 us (9.1-10.4 through the forwarder, against
//! 10.6-12.6 with K = 3; 9.6 with the split path's second grouping): with it 0.8-1.2 % of
//! the p = 0.001 shots grow clusters (0.44-0.50 % with the second grouping), against
//! 4.5-5.6 % with K = 3 (results/archive/h200-uf-observable-part.txt,
//! results/archive/h200-uf-split-mutual.txt). On the whole models (before the observable
//! part) the auto choice was d5 K = 3-4 and d7 K = 2-3, and d7 K = 4 would have taken 520 M
//! entries.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use super::graph::MatchingGraph;
use super::uf::UfScratch;
use super::uf_split;
use crate::{Error, Result};

/// Most defects a table may cover.
pub const MAX_DEFECTS: u32 = 16;
/// Entries the automatic choice stays within.
pub const AUTO_MAX_ENTRIES: u64 = 16 << 20;
/// Precompute work the automatic choice stays within, in [`build_work`] units (syndrome
/// defects x graph edges: one decode of a random `k`-defect syndrome costs about
/// `k x edges x 10-20 ns`). 2e9: d3 K = 9 took 13 s, d5 K = 3 2.3 s and d7 K = 2 1.7 s on the
/// two cores of the (shared) development VM; expect a second or two on a 16-core host.
pub const AUTO_MAX_WORK: u64 = 2_000_000_000;
/// Largest `K` the split path's budget ([`auto_max_defects_split`]) raises the table to.
pub const AUTO_SPLIT_MAX_DEFECTS: u32 = 4;
/// Entries [`auto_max_defects_split`] stays within: 64 Mi, at most 192 MiB with their
/// times (1 + 2 bytes an entry with up to 8 observables).
pub const AUTO_SPLIT_MAX_ENTRIES: u64 = 64 << 20;
/// Precompute work per core of the host that [`auto_max_defects_split`] allows, in
/// [`build_work`] units: 16e9, about 10 s at the ~1.6e9 units per core-second measured for
/// the d = 7 model's observable part at K = 4 (197e9 units, 59 s on the 2-core VM), whose
/// entries mostly split and are filled from smaller ones ([`UfTable::build`]). So the d = 5
/// part takes K = 4 on any host and the d = 7 part (192 detectors) K = 3 below 13 cores and
/// K = 4 from 13 up (56 M entries; 16-21 s on the 16-core H200 host, whose threads build at
/// about half the VM's rate per core).
pub const AUTO_SPLIT_WORK_PER_CORE: u64 = 16_000_000_000;
/// Largest table an explicit `K` may ask for (entries; the device indexes with u32).
pub const MAX_ENTRIES: u64 = 1 << 30;

/// `C(n, k)`, saturating at `u64::MAX`.
pub fn binomial(n: u64, k: u64) -> u64 {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut c: u128 = 1;
    for i in 0..k {
        // C(n, i + 1) = C(n, i) * (n - i) / (i + 1), exact at every step.
        c = c * u128::from(n - i) / u128::from(i + 1);
        if c > u128::from(u64::MAX) {
            return u64::MAX;
        }
    }
    c as u64
}

/// Syndromes of at most `k` defects among `n` detectors: `C(n, 0) + ... + C(n, k)`,
/// saturating.
pub fn entries_upto(n: u64, k: u32) -> u64 {
    (0..=u64::from(k)).fold(0u64, |acc, j| acc.saturating_add(binomial(n, j)))
}

/// Estimated precompute work of a table of `K` for `n` detectors and `edges` edges:
/// `sum_k C(n, k) * k * edges`, saturating.
pub fn build_work(n: u64, edges: u64, k: u32) -> u64 {
    (1..=u64::from(k)).fold(0u64, |acc, j| {
        acc.saturating_add(
            binomial(n, j)
                .saturating_mul(j)
                .saturating_mul(edges.max(1)),
        )
    })
}

/// The largest `K <= MAX_DEFECTS` (and `<= n`) whose table holds at most
/// [`AUTO_MAX_ENTRIES`] entries and costs at most [`AUTO_MAX_WORK`] to build; 0 (no table)
/// when even `K = 1` does not fit.
pub fn auto_max_defects(n: usize, edges: usize) -> u32 {
    let (n, e) = (n as u64, edges as u64);
    let mut k = 0;
    while k < MAX_DEFECTS
        && u64::from(k) < n
        && entries_upto(n, k + 1) <= AUTO_MAX_ENTRIES
        && build_work(n, e, k + 1) <= AUTO_MAX_WORK
    {
        k += 1;
    }
    k
}

/// [`auto_max_defects`], raised for the split path (module docs) to at most
/// [`AUTO_SPLIT_MAX_DEFECTS`] while the table holds at most [`AUTO_SPLIT_MAX_ENTRIES`] entries
/// and its precompute stays within `cores` x [`AUTO_SPLIT_WORK_PER_CORE`]; never lower than
/// [`auto_max_defects`].
pub fn auto_max_defects_split(n: usize, edges: usize, cores: usize) -> u32 {
    let (nn, e) = (n as u64, edges as u64);
    let budget = AUTO_SPLIT_WORK_PER_CORE.saturating_mul(cores.max(1) as u64);
    let mut k = auto_max_defects(n, edges);
    while k < AUTO_SPLIT_MAX_DEFECTS
        && u64::from(k) < nn
        && entries_upto(nn, k + 1) <= AUTO_SPLIT_MAX_ENTRIES
        && build_work(nn, e, k + 1) <= budget
    {
        k += 1;
    }
    k
}

/// The automatic `K` for a table built by `workers`, as the GPU upload picks it:
/// [`auto_max_defects_split`] with their threads (the appliance gives the host's online
/// cores, not the calling thread's mask) when the model is small enough for the split
/// path's distance matrix, else [`auto_max_defects`].
pub fn auto_max_defects_here(n: usize, edges: usize, workers: &Workers) -> u32 {
    if n <= uf_split::MAX_SPLIT_DETECTORS {
        auto_max_defects_split(n, edges, workers.threads)
    } else {
        auto_max_defects(n, edges)
    }
}

/// Rank of the sorted, distinct `defects` among the syndromes of as many defects
/// (combinatorial number system: `sum C(d_i, i + 1)`).
pub fn rank(defects: &[u32]) -> u64 {
    defects
        .iter()
        .enumerate()
        .map(|(i, &d)| binomial(u64::from(d), i as u64 + 1))
        .sum()
}

/// The sorted defects of rank `r` among the syndromes of `out.len()` defects (inverse of
/// [`rank`]).
pub fn unrank(mut r: u64, out: &mut [u32]) {
    for i in (0..out.len()).rev() {
        let j = i as u64 + 1;
        // Largest d with C(d, j) <= r (d >= i: C(i, j) = 0).
        let (mut lo, mut hi) = (i as u64, i as u64 + 1);
        while binomial(hi, j) <= r {
            hi *= 2;
        }
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if binomial(mid, j) <= r {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        out[i] = lo as u32;
        r -= binomial(lo, j);
    }
}

/// Steps sorted `c` (detectors `< n`) to the next combination in colexicographic order
/// (rank + 1); false after the last one.
fn next_colex(c: &mut [u32], n: u32) -> bool {
    for i in 0..c.len() {
        let limit = if i + 1 < c.len() { c[i + 1] } else { n };
        if c[i] + 1 < limit {
            c[i] += 1;
            for (j, x) in c[..i].iter_mut().enumerate() {
                *x = j as u32;
            }
            return true;
        }
    }
    false
}

/// The threads a table build runs on: how many, and what each does first.
#[derive(Debug, Clone, Copy)]
pub struct Workers {
    /// Worker threads (at least one is used).
    pub threads: usize,
    /// Called first on each worker with its index. The appliance pins worker `t` to the
    /// `t`-th online core: started from a thread pinned to one core (the forwarding
    /// thread), the workers would otherwise inherit its mask, and so share its core.
    pub on_start: Option<fn(usize)>,
}

impl Workers {
    /// One unpinned worker per core the calling thread may run on
    /// (`std::thread::available_parallelism`).
    pub fn available() -> Workers {
        Workers::unpinned(0)
    }

    /// `threads` unpinned workers (0: [`Workers::available`]'s count).
    pub fn unpinned(threads: usize) -> Workers {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        Workers {
            threads,
            on_start: None,
        }
    }
}

/// The uf output of every syndrome of at most `max_defects` defects (module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UfTable {
    num_detectors: usize,
    max_defects: u32,
    entry_bytes: usize,
    /// `base[k]`: index of the first syndrome of `k` defects, `k = 0 ..= K + 1`.
    base: Vec<u64>,
    entries: Vec<u8>,
    /// Per entry, the time growth stopped (`UfScratch::decode_timed`), at most
    /// [`uf_split::SAT`] (which reads "at least that").
    times: Vec<u16>,
    build_time: Duration,
    threads: usize,
}

impl UfTable {
    /// Precomputes the table of `graph` for syndromes of at most `max_defects` defects
    /// (`1 ..= MAX_DEFECTS`, at most [`MAX_ENTRIES`] entries) with the CPU uf, on
    /// `threads` threads (0: one per available core; [`Workers::unpinned`]).
    pub fn build(graph: &MatchingGraph, max_defects: u32, threads: usize) -> Result<UfTable> {
        UfTable::build_on(graph, max_defects, &Workers::unpinned(threads))
    }

    /// [`UfTable::build`] on `workers`.
    pub fn build_on(graph: &MatchingGraph, max_defects: u32, workers: &Workers) -> Result<UfTable> {
        UfTable::build_filled(graph, max_defects, workers, true)
    }

    /// [`UfTable::build`]; `from_splits`: entries of 2 and more defects that split into
    /// independent groups are filled from the groups' entries (else every entry is decoded).
    fn build_filled(
        graph: &MatchingGraph,
        max_defects: u32,
        workers: &Workers,
        from_splits: bool,
    ) -> Result<UfTable> {
        let n = graph.num_detectors();
        if graph.is_wide() {
            return Err(Error::DecoderModel {
                file: graph.source().to_string(),
                detail: format!(
                    "{} observables: the uf table (the GPU's) holds at most 64",
                    graph.num_observables()
                ),
            });
        }
        let total = entries_upto(n as u64, max_defects);
        if max_defects == 0
            || max_defects > MAX_DEFECTS
            || max_defects as usize > n
            || total > MAX_ENTRIES
        {
            return Err(Error::InvalidSetting {
                key: "uf_table_max_defects",
                detail: format!(
                    "{max_defects} for {} ({n} detectors, {total} syndromes): expected 1 ..= \
                     {} and at most {MAX_ENTRIES} syndromes (0 turns the table off)",
                    graph.source(),
                    MAX_DEFECTS.min(n as u32)
                ),
            });
        }
        let t0 = Instant::now();
        let entry_bytes = graph.num_observables().div_ceil(8);
        let base = level_bases(n, max_defects);
        let (threads, on_start) = (workers.threads, workers.on_start);
        // The split path's distances, to fill entries from smaller ones (`fill`).
        let dist = (from_splits && max_defects >= 2 && n <= uf_split::MAX_SPLIT_DETECTORS)
            .then(|| uf_split::Distances::build(graph))
            .transpose()?;
        let mut entries = vec![0u8; total as usize * entry_bytes];
        let mut times = vec![0u16; total as usize];
        let mut used = 1;
        // Level by level (syndromes of k defects), each on all threads, reading the levels
        // below it.
        for k in 1..=max_defects as usize {
            let (first, end) = (base[k] as usize, base[k + 1] as usize);
            let (lower_e, level_e) = entries.split_at_mut(first * entry_bytes);
            let (lower_t, level_t) = times.split_at_mut(first);
            let level_e = &mut level_e[..(end - first) * entry_bytes];
            let level_t = &mut level_t[..end - first];
            let lower = Lower {
                n,
                base: &base[..k],
                entries: lower_e,
                times: lower_t,
                entry_bytes,
            };
            // At least 4096 syndromes per thread.
            let threads = threads.clamp(1, (end - first).div_ceil(4096));
            used = used.max(threads);
            let per = (end - first).div_ceil(threads);
            // (One defect: one group, nothing to split.)
            let dist = dist.as_ref().filter(|_| k >= 2);
            std::thread::scope(|s| {
                // Per thread, `per` entries and their times (entries of 0 bytes without
                // observables: the times are still needed).
                let mut rest = &mut level_e[..];
                for (t, tout) in level_t.chunks_mut(per).enumerate() {
                    let (out, r) = rest.split_at_mut(tout.len() * entry_bytes);
                    rest = r;
                    let mut lower = lower;
                    s.spawn(move || {
                        // One core each: a caller pinned to one core (the forwarding
                        // thread) would otherwise hand its mask, and so its core, to every
                        // worker.
                        if let Some(f) = on_start {
                            f(t);
                        }
                        fill(graph, k, (t * per) as u64, out, tout, dist, &mut lower)
                    });
                }
            });
        }
        let threads = used;
        Ok(UfTable {
            num_detectors: n,
            max_defects,
            entry_bytes,
            base,
            entries,
            times,
            build_time: t0.elapsed(),
            threads,
        })
    }

    /// A table from its arrays as [`UfTable::entries`] and [`UfTable::times`] give them
    /// (the on-disk cache's read, [`super::uf_table_cache`]), for `n` detectors; `took`:
    /// the time it took to get them. `None` when the sizes do not fit `n` and `K`.
    pub(crate) fn from_arrays(
        n: usize,
        max_defects: u32,
        entry_bytes: usize,
        entries: Vec<u8>,
        times: Vec<u16>,
        took: Duration,
    ) -> Option<UfTable> {
        if max_defects == 0 || max_defects > MAX_DEFECTS || max_defects as usize > n {
            return None;
        }
        let total = entries_upto(n as u64, max_defects);
        if total > MAX_ENTRIES
            || times.len() as u64 != total
            || entries.len() as u64 != total * entry_bytes as u64
        {
            return None;
        }
        let base = level_bases(n, max_defects);
        Some(UfTable {
            num_detectors: n,
            max_defects,
            entry_bytes,
            base,
            entries,
            times,
            build_time: took,
            threads: 1,
        })
    }

    /// Detectors of the graph the table is for.
    pub fn num_detectors(&self) -> usize {
        self.num_detectors
    }

    /// The sorted defects of entry `i` (`None` past the table).
    pub fn defects_of(&self, i: usize) -> Option<Vec<u32>> {
        let i = i as u64;
        let k = (0..=self.max_defects as usize).find(|&k| i < self.base[k + 1])?;
        let mut c = vec![0u32; k];
        unrank(i - self.base[k], &mut c);
        Some(c)
    }

    /// `K`: syndromes of at most this many defects are in the table.
    pub fn max_defects(&self) -> u32 {
        self.max_defects
    }

    /// Entries (syndromes).
    pub fn len(&self) -> usize {
        self.base[self.max_defects as usize + 1] as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of an entry: the wire result, `ceil(num_observables / 8)`.
    pub fn entry_bytes(&self) -> usize {
        self.entry_bytes
    }

    /// The entries, `entry_bytes` each, in index order (module docs).
    pub fn entries(&self) -> &[u8] {
        &self.entries
    }

    /// Per entry, in index order, the time growth stopped when its syndrome was decoded
    /// (the specification's sum of `delta`), at most [`uf_split::SAT`] ("at least that").
    pub fn times(&self) -> &[u16] {
        &self.times
    }

    /// `(obs, time)` of the sorted, distinct `defects` (`None`: more than `K`).
    pub fn entry(&self, defects: &[u32]) -> Option<(u64, u32)> {
        let i = self.index(defects)?;
        Some(read_entry(&self.entries, &self.times, self.entry_bytes, i))
    }

    /// Time the precompute took, and on how many threads.
    pub fn build_time(&self) -> (Duration, usize) {
        (self.build_time, self.threads)
    }

    /// Index of the syndrome with the sorted, distinct `defects` (`None`: more than `K`).
    pub fn index(&self, defects: &[u32]) -> Option<usize> {
        (defects.len() <= self.max_defects as usize)
            .then(|| (self.base[defects.len()] + rank(defects)) as usize)
    }

    /// The observable flips of a bit-packed syndrome (bits past the detectors ignored), or
    /// `None` when it has more than `K` defects.
    pub fn lookup(&self, dets: &[u8]) -> Option<u64> {
        let mut defects = Vec::with_capacity(self.max_defects as usize + 1);
        for (i, &b) in dets.iter().enumerate().take(self.num_detectors.div_ceil(8)) {
            let mut b = b;
            while b != 0 {
                let v = 8 * i as u32 + b.trailing_zeros();
                b &= b - 1;
                if (v as usize) < self.num_detectors {
                    if defects.len() == self.max_defects as usize {
                        return None;
                    }
                    defects.push(v);
                }
            }
        }
        self.entry(&defects).map(|(mask, _)| mask)
    }

    /// The index array device/decode.cu reads (u32): `base[k]` for `k = 0 ..= K`, then
    /// `C(v, j)` at `K + 1 + (j - 1) * n + v` for `j = 1 ..= K`, `v < n`.
    pub fn device_index(&self) -> Vec<u32> {
        let (n, k) = (self.num_detectors, self.max_defects as usize);
        let mut ix: Vec<u32> = self.base[..=k].iter().map(|&b| b as u32).collect();
        for j in 1..=k as u64 {
            // C(v, j) <= C(n - 1, j) < the table size, which fits u32 (MAX_ENTRIES).
            ix.extend((0..n as u64).map(|v| binomial(v, j) as u32));
        }
        ix
    }
}

/// How device/decode.cu computes the index of the sorted `defects` (`1 ..= K` of them)
/// from [`UfTable::device_index`]: kept here, beside its twin, so tests check the two agree.
pub fn device_index_of(ix: &[u32], n: usize, max_defects: u32, defects: &[u32]) -> u32 {
    let k = max_defects as usize;
    defects
        .iter()
        .enumerate()
        .fold(ix[defects.len()], |acc, (pos, &d)| {
            acc.wrapping_add(ix[k + 1 + pos * n + d as usize])
        })
}

/// `base[k]` for `k = 0 ..= K + 1`: the index of the first syndrome of `k` defects in a
/// table of `n` detectors (the last: the table's size).
fn level_bases(n: usize, max_defects: u32) -> Vec<u64> {
    (0..=max_defects + 1)
        .map(|k| {
            if k == 0 {
                0
            } else {
                entries_upto(n as u64, k - 1)
            }
        })
        .collect()
}

/// The levels of a table below the one being filled: a [`uf_split::GroupDecoder`] for
/// groups of fewer defects.
#[derive(Clone, Copy)]
struct Lower<'a> {
    n: usize,
    /// `base[j]` for `j < k`.
    base: &'a [u64],
    entries: &'a [u8],
    times: &'a [u16],
    entry_bytes: usize,
}

impl uf_split::GroupDecoder for Lower<'_> {
    fn max_defects(&self) -> usize {
        self.base.len() - 1
    }

    fn group(&mut self, defects: &[u32]) -> Option<(u64, u32)> {
        if defects.len() > self.max_defects() {
            return None;
        }
        debug_assert!(defects.iter().all(|&d| (d as usize) < self.n));
        let i = (self.base[defects.len()] + rank(defects)) as usize;
        Some(read_entry(self.entries, self.times, self.entry_bytes, i))
    }
}

/// Entry `i` of a table's arrays: its observable mask (the result's bytes, LSB first) and
/// its time.
fn read_entry(entries: &[u8], times: &[u16], entry_bytes: usize, i: usize) -> (u64, u32) {
    let mask = entries[i * entry_bytes..(i + 1) * entry_bytes]
        .iter()
        .enumerate()
        .fold(0u64, |m, (k, &b)| m | u64::from(b) << (8 * k));
    (mask, u32::from(times[i]))
}

/// Fills `out` (and `times`) with the entries of `k` defects from rank `first` on. With
/// `dist`, an entry whose defects split into independent groups of fewer defects
/// ([`uf_split::split_timed`] over the lower levels) is their XOR and their latest time,
/// the specification's output and time by the split theorem; the others, and every entry
/// without `dist`, are decoded. (On the d = 7 model's observable part, 192 detectors, most
/// 4-defect entries split: the K = 4 table builds several times faster.)
fn fill(
    graph: &MatchingGraph,
    k: usize,
    first: u64,
    out: &mut [u8],
    times: &mut [u16],
    dist: Option<&uf_split::Distances>,
    lower: &mut Lower<'_>,
) {
    let n = graph.num_detectors() as u32;
    let entry_bytes = lower.entry_bytes;
    let mut scratch = UfScratch::new(graph);
    let mut dets = vec![0u8; graph.num_detectors().div_ceil(8)];
    let mut c = vec![0u32; k];
    unrank(first, &mut c);
    let len = times.len();
    for (i, time) in times.iter_mut().enumerate() {
        let split = dist.and_then(|d| uf_split::split_timed(&c, d, lower));
        let (mask, t) = split.unwrap_or_else(|| {
            for &d in &c {
                dets[d as usize / 8] |= 1 << (d % 8);
            }
            let decoded = scratch.decode_timed(graph, &dets);
            for &d in &c {
                dets[d as usize / 8] = 0;
            }
            decoded
        });
        let entry = &mut out[i * entry_bytes..(i + 1) * entry_bytes];
        for (i, b) in entry.iter_mut().enumerate() {
            *b = (mask >> (8 * i)) as u8;
        }
        *time = t.min(uf_split::SAT) as u16;
        if !next_colex(&mut c, n) {
            debug_assert_eq!(i + 1, len, "the level ends with its last syndrome");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dem;
    use proptest::prelude::*;

    fn fixture(name: &str) -> MatchingGraph {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures")
            .join(format!("{name}.dem"));
        MatchingGraph::from_dem(&Dem::from_path(&path).unwrap()).unwrap()
    }

    fn packed(n: usize, defects: &[u32]) -> Vec<u8> {
        let mut d = vec![0u8; n.div_ceil(8)];
        for &v in defects {
            d[v as usize / 8] |= 1 << (v % 8);
        }
        d
    }

    #[test]
    fn binomials_and_sizes() {
        assert_eq!(binomial(5, 2), 10);
        assert_eq!(binomial(2, 5), 0);
        assert_eq!(binomial(120, 4), 8_214_570);
        assert_eq!(binomial(336, 3), 6_265_840);
        assert_eq!(binomial(65535, 16), u64::MAX);
        assert_eq!(entries_upto(24, 24), 1 << 24);
        // The fixtures' models: d3 (24 detectors, 78 edges), d5 (120, 502), d7 (336, 1558).
        assert_eq!(auto_max_defects(8, 21), 8);
        assert_eq!(auto_max_defects(24, 78), 9);
        assert_eq!(auto_max_defects(120, 502), 3);
        assert_eq!(auto_max_defects(336, 1558), 2);
        assert_eq!(auto_max_defects(336, 1 << 30), 0);
        assert_eq!(auto_max_defects(0, 10), 0);
        assert_eq!(build_work(120, 502, 4), 16_925_030_400);
        // With the split path, the whole models: d5 K = 4 and d7 K = 3 from 2 cores (d7
        // K = 4 is above the entries' cap), d3 unchanged.
        for (cores, d3, d5, d7) in [(1, 9, 3, 2), (2, 9, 4, 3), (16, 9, 4, 3), (1024, 9, 4, 3)] {
            assert_eq!(auto_max_defects_split(24, 78, cores), d3, "{cores} cores");
            assert_eq!(auto_max_defects_split(120, 502, cores), d5, "{cores} cores");
            assert_eq!(
                auto_max_defects_split(336, 1558, cores),
                d7,
                "{cores} cores"
            );
        }
        // Their observable parts (what the decoder loads): d3 16 detectors, 55 edges; d5
        // 72, 301: K = 4 on one core; d7 192, 883: K = 3, and K = 4 from 13 cores.
        assert_eq!(auto_max_defects_split(16, 55, 1), 16);
        assert_eq!(auto_max_defects_split(72, 301, 1), 4);
        assert_eq!(build_work(192, 883, 4), 196_911_316_992);
        for (cores, d7) in [(1, 3), (2, 3), (12, 3), (13, 4), (16, 4), (1024, 4)] {
            assert_eq!(auto_max_defects_split(192, 883, cores), d7, "{cores} cores");
        }
        let here = auto_max_defects_here(120, 502, &Workers::available());
        assert!((3..=4).contains(&here), "{here}");
    }

    #[test]
    fn colex_steps_through_ranks_in_order() {
        for k in 0..=4usize {
            let mut c: Vec<u32> = (0..k as u32).collect();
            let mut r = 0u64;
            loop {
                assert_eq!(rank(&c), r, "{c:?}");
                let mut u = vec![0; k];
                unrank(r, &mut u);
                assert_eq!(u, c);
                r += 1;
                if !next_colex(&mut c, 9) {
                    break;
                }
            }
            assert_eq!(r, binomial(9, k as u64));
        }
    }

    proptest! {
        #[test]
        fn rank_and_unrank_round_trip(
            (n, set) in prop_oneof![
                (Just(2000u32), proptest::collection::btree_set(0u32..2000, 0..=5)),
                (Just(64u32), proptest::collection::btree_set(0u32..64, 0..=MAX_DEFECTS as usize)),
            ]
        ) {
            let sorted: Vec<u32> = set.into_iter().collect();
            let r = rank(&sorted);
            prop_assert!(r < binomial(u64::from(n), sorted.len() as u64));
            let mut back = vec![0u32; sorted.len()];
            unrank(r, &mut back);
            prop_assert_eq!(back, sorted);
        }

        #[test]
        fn unrank_and_rank_round_trip(k in 1u64..=6, x in any::<u64>()) {
            let r = x % binomial(336, k);
            let mut c = vec![0u32; k as usize];
            unrank(r, &mut c);
            prop_assert!(c.windows(2).all(|w| w[0] < w[1]) && c[k as usize - 1] < 336);
            prop_assert_eq!(rank(&c), r);
        }
    }

    /// A model without observables still gets its times (entries of 0 bytes).
    #[test]
    fn times_without_observables() {
        let g = MatchingGraph::from_edges(
            3,
            0,
            &[
                crate::graph::EdgeSpec {
                    u: 0,
                    v: Some(1),
                    p: 0.1,
                    observables: 0,
                },
                crate::graph::EdgeSpec {
                    u: 1,
                    v: None,
                    p: 0.2,
                    observables: 0,
                },
            ],
        )
        .unwrap();
        let t = UfTable::build(&g, 2, 2).unwrap();
        assert_eq!(
            (t.entry_bytes(), t.entries().len(), t.times().len()),
            (0, 0, 7)
        );
        let mut s = UfScratch::new(&g);
        for defects in [&[0u32][..], &[1], &[0, 1], &[1, 2]] {
            let want = s.decode_reference_timed(&g, &packed(3, defects));
            assert_eq!(t.entry(defects), Some(want), "{defects:?}");
        }
    }

    #[test]
    fn bad_sizes_are_refused() {
        let g = fixture("surface_d3_r1_z_p005");
        for k in [0, 9, MAX_DEFECTS + 1] {
            let e = UfTable::build(&g, k, 1).unwrap_err().to_string();
            assert!(e.contains("uf_table_max_defects"), "{e}");
        }
    }

    /// Every syndrome of a small model (all 2^8 of them: K = n), against the specification
    /// (`decode_reference`, the one the GPU follows) through the index, the lookup and the
    /// device's index computation; split over threads as the build splits it.
    #[test]
    fn table_equals_the_reference_on_every_syndrome_of_small_models() {
        for name in ["surface_d3_r1_z_p005", "rep_d3_r3_p005"] {
            let g = fixture(name);
            let n = g.num_detectors();
            for threads in [1, 3] {
                let t = UfTable::build(&g, n as u32, threads).unwrap();
                assert_eq!(t.len(), 1 << n);
                let ix = t.device_index();
                let mut s = UfScratch::new(&g);
                for bits in 0u32..1 << n {
                    let defects: Vec<u32> = (0..n as u32).filter(|v| bits >> v & 1 == 1).collect();
                    let dets = packed(n, &defects);
                    let (want, time) = s.decode_reference_timed(&g, &dets);
                    assert_eq!(t.lookup(&dets), Some(want), "{name} {defects:?}");
                    assert_eq!(t.entry(&defects), Some((want, time)), "{name} {defects:?}");
                    if !defects.is_empty() {
                        assert_eq!(
                            device_index_of(&ix, n, t.max_defects(), &defects) as usize,
                            t.index(&defects).unwrap()
                        );
                    }
                }
            }
        }
    }

    /// d3 (24 detectors), every syndrome of at most 4 defects; d5 and d7, K = 2, and
    /// random syndromes of 1 ..= K defects plus some above K (not in the table).
    #[test]
    fn table_equals_the_reference_on_low_weight_syndromes() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (name, k, exhaustive) in [
            ("surface_d3_r3_z_p001", 4, true),
            ("surface_d5_r5_x_p001", 2, false),
            ("surface_d7_r7_z_p001", 2, false),
        ] {
            let g = fixture(name);
            let n = g.num_detectors();
            let t = UfTable::build(&g, k, 0).unwrap();
            assert_eq!(t.len() as u64, entries_upto(n as u64, k));
            assert_eq!(t.entries().len(), t.len() * t.entry_bytes());
            let ix = t.device_index();
            let mut s = UfScratch::new(&g);
            let mut check = |defects: &[u32]| {
                let dets = packed(n, defects);
                let (want, time) = s.decode_reference_timed(&g, &dets);
                if defects.len() <= k as usize {
                    assert_eq!(t.lookup(&dets), Some(want), "{name} {defects:?}");
                    let time = time.min(uf_split::SAT);
                    assert_eq!(t.entry(defects), Some((want, time)), "{name} {defects:?}");
                    assert_eq!(
                        device_index_of(&ix, n, k, defects) as usize,
                        t.index(defects).unwrap()
                    );
                } else {
                    assert_eq!(t.lookup(&dets), None);
                }
            };
            if exhaustive {
                for kk in 1..=k as usize {
                    let mut c: Vec<u32> = (0..kk as u32).collect();
                    loop {
                        check(&c);
                        if !next_colex(&mut c, n as u32) {
                            break;
                        }
                    }
                }
            } else {
                for i in 0..4000u64 {
                    let kk = 1 + (i % (u64::from(k) + 2));
                    let mut set = std::collections::BTreeSet::new();
                    while set.len() < kk as usize {
                        set.insert((next() % n as u64) as u32);
                    }
                    check(&set.into_iter().collect::<Vec<_>>());
                }
            }
        }
    }

    /// Entries filled from the split of their defects into independent groups equal the
    /// decoded ones, results and times, on every syndrome of the tables (d = 3 to 4
    /// defects; the d = 5 model's observable part, 72 detectors, to 3), and most are
    /// filled so.
    #[test]
    fn entries_filled_from_splits_equal_decoded_entries() {
        let d5 = crate::ObservablePart::of(&fixture("surface_d5_r5_z_p001"))
            .unwrap()
            .unwrap();
        for (g, k) in [
            (fixture("surface_d3_r3_z_p001"), 4),
            (d5.graph().clone(), 3),
        ] {
            let filled = UfTable::build_filled(&g, k, &Workers::available(), true).unwrap();
            let decoded = UfTable::build_filled(&g, k, &Workers::available(), false).unwrap();
            assert_eq!(filled.entries(), decoded.entries(), "{} K={k}", g.source());
            assert_eq!(filled.times(), decoded.times(), "{} K={k}", g.source());
            // The top level is mostly splits: the time of a split entry is its groups'
            // latest, which a decode agrees with (above); count how many split.
            let dist = uf_split::Distances::build(&g).unwrap();
            let n = g.num_detectors() as u32;
            let mut c: Vec<u32> = (0..k).collect();
            let (mut all, mut split) = (0u32, 0u32);
            loop {
                all += 1;
                split += u32::from(uf_split::split(&c, &dist, &mut &decoded).is_some());
                if !next_colex(&mut c, n) {
                    break;
                }
            }
            assert!(
                2 * split > all,
                "{} K={k}: {split} of {all} split",
                g.source()
            );
        }
    }

    /// The shares of fixture shots the automatic table covers (the module docs' table).
    #[test]
    fn fixture_shots_covered_by_the_automatic_table() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        for (name, k, want) in [
            ("surface_d3_r3_z_p001", 9, 1.0),
            ("surface_d3_r3_z_p005", 9, 0.999),
            ("surface_d5_r5_z_p001", 3, 0.808),
            ("surface_d5_r5_x_p001", 3, 0.799),
            ("surface_d7_r7_z_p001", 2, 0.256),
            ("surface_d7_r7_x_p001", 2, 0.258),
        ] {
            let g = fixture(name);
            assert_eq!(auto_max_defects(g.num_detectors(), g.num_edges()), k);
            let n = g.num_detectors();
            let shots = crate::Shots::read(&dir.join(format!("{name}.b8")), n, None).unwrap();
            let covered = (0..shots.len())
                .filter(|&i| (0..n).filter(|&v| shots.get(i, v)).count() <= k as usize)
                .count();
            let share = covered as f64 / shots.len() as f64;
            eprintln!(
                "{name}: K = {k}, {:.2} % of shots have at most K defects",
                100.0 * share
            );
            assert!((share - want).abs() < 0.001, "{name}: {share}");
        }
    }
}

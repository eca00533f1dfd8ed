//! Several GPUs of one host: requests routed to one backend per GPU by function.
//!
//! A [`RouteBackend`] owns one shard backend per GPU (a persistent kernel with its own
//! mailbox rings, a launch baseline, or, for tests and `topology = cpu`, host backends)
//! and hands each request to the shard that owns its `function_id` (a handler or decoder
//! name, i.e. a logical patch). The owner comes from a [`RouteMap`]:
//!
//! - an explicit map, function name -> GPU index (`--route patch0=1`, TOML `[route]`);
//!   a GPU not in `gpus`, or a name nothing is registered under, is a config error naming
//!   the entry;
//! - every function the map leaves out is dealt round-robin over the shards in
//!   registration order (the k-th unmapped registration goes to shard `k % N`), so N
//!   patches on N GPUs spread evenly without a map. A function_id nothing is registered
//!   under never reaches a backend (the forwarder answers `UNKNOWN_FUNCTION`); should one
//!   arrive, it goes to shard 0.
//!
//! Tokens: the forwarder's one token space is shared; a shard gets the forwarder's token
//! and echoes it in its completion (backends treat tokens as opaque), so nothing is
//! translated or allocated per message. A shard's refusal (`OVERLOAD`, `OVERSIZED`...)
//! goes back to the forwarder unchanged, which answers with it as for one backend.
//!
//! Per-shard counters (submitted, completed, rejected) are shared with the status line
//! through [`RouteCounters`]; only the forwarding thread writes them.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::backend::{Backend, Completion, Topology};
use crate::handler::{Handler, Registry};
use crate::stats::ShardCounts;
use crate::wire::{self, RequestHeader};
use crate::{Error, Result};

/// Which shard serves each function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMap {
    /// (function_id, shard) per registered function: a handful, scanned linearly.
    table: Vec<(u32, usize)>,
    /// (name, GPU index) per registered function, in registration order, for logs.
    names: Vec<(String, usize)>,
    gpus: Vec<usize>,
}

impl RouteMap {
    /// The map for `registry`'s functions over `gpus` (one shard each, in that order),
    /// with `routes` (name -> GPU index) pinning some; see the module docs.
    pub fn new(
        registry: &Registry,
        gpus: &[usize],
        routes: &BTreeMap<String, usize>,
    ) -> Result<RouteMap> {
        let names: Vec<&str> = registry.entries().iter().map(|e| e.name.as_str()).collect();
        RouteMap::from_names(&names, gpus, routes)
    }

    /// [`RouteMap::new`] from registration names alone (function_id = FNV-1a of each), so
    /// a configuration is checked before any decoder model is loaded.
    pub fn from_names(
        names: &[&str],
        gpus: &[usize],
        routes: &BTreeMap<String, usize>,
    ) -> Result<RouteMap> {
        if gpus.is_empty() {
            return Err(Error::InvalidSetting {
                key: "gpus",
                detail: "routing needs at least one GPU".into(),
            });
        }
        if let Some((i, g)) = gpus
            .iter()
            .enumerate()
            .find(|(i, g)| gpus[..*i].contains(g))
        {
            return Err(Error::InvalidSetting {
                key: "gpus",
                detail: format!("GPU {g} is listed twice (entry {})", i + 1),
            });
        }
        for (name, &gpu) in routes {
            if !gpus.contains(&gpu) {
                return Err(Error::RouteUnknownGpu {
                    name: name.clone(),
                    gpu,
                    gpus: list(gpus),
                });
            }
            if !names.contains(&name.as_str()) {
                return Err(Error::RouteUnknownFunction {
                    name: name.clone(),
                    gpu,
                    registered: names.join(", "),
                });
            }
        }
        let mut table = Vec::with_capacity(names.len());
        let mut described = Vec::with_capacity(names.len());
        let mut unmapped = 0usize;
        for &name in names {
            let shard = match routes.get(name) {
                Some(gpu) => gpus.iter().position(|g| g == gpu).unwrap_or(0),
                None => {
                    unmapped += 1;
                    (unmapped - 1) % gpus.len()
                }
            };
            table.push((wire::function_id(name), shard));
            described.push((name.to_string(), gpus[shard]));
        }
        Ok(RouteMap {
            table,
            names: described,
            gpus: gpus.to_vec(),
        })
    }

    /// The shard (index into [`RouteMap::gpus`]) serving `function_id`; 0 when unknown.
    #[inline]
    pub fn shard_of(&self, function_id: u32) -> usize {
        self.table
            .iter()
            .find(|e| e.0 == function_id)
            .map_or(0, |e| e.1)
    }

    /// The GPU indices, one per shard.
    pub fn gpus(&self) -> &[usize] {
        &self.gpus
    }

    pub fn shards(&self) -> usize {
        self.gpus.len()
    }

    /// (function name, GPU index) per registered function, in registration order.
    pub fn assignments(&self) -> &[(String, usize)] {
        &self.names
    }

    /// `patch0 -> GPU 0, patch1 -> GPU 1`, for the start-up line.
    pub fn describe(&self) -> String {
        self.names
            .iter()
            .map(|(n, g)| format!("{n} -> GPU {g}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn list(gpus: &[usize]) -> String {
    gpus.iter()
        .map(|g| g.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// One shard's counters, on its own cache line.
#[derive(Default)]
struct Cells {
    submitted: AtomicU64,
    completed: AtomicU64,
    rejected: AtomicU64,
}

/// One writer (the forwarding thread): a load and a store, no locked read-modify-write.
#[inline]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// A handle on a [`RouteBackend`]'s per-shard counters, readable while it runs.
#[derive(Clone)]
pub struct RouteCounters {
    cells: Arc<[CachePadded<Cells>]>,
    gpus: Arc<[usize]>,
}

impl RouteCounters {
    fn new(gpus: &[usize]) -> RouteCounters {
        RouteCounters {
            cells: gpus.iter().map(|_| CachePadded::default()).collect(),
            gpus: gpus.into(),
        }
    }

    /// The counters now, one per shard.
    pub fn snapshot(&self) -> Vec<ShardCounts> {
        let mut v = Vec::with_capacity(self.gpus.len());
        self.snapshot_into(&mut v);
        v
    }

    /// [`RouteCounters::snapshot`] into `out` (reusing its allocation).
    pub fn snapshot_into(&self, out: &mut Vec<ShardCounts>) {
        out.clear();
        out.extend(
            self.cells
                .iter()
                .zip(self.gpus.iter())
                .map(|(c, &gpu)| ShardCounts {
                    gpu,
                    submitted: c.submitted.load(Ordering::Relaxed),
                    completed: c.completed.load(Ordering::Relaxed),
                    rejected: c.rejected.load(Ordering::Relaxed),
                }),
        );
    }
}

/// A [`Backend`] over one shard backend per GPU; see the module docs.
pub struct RouteBackend<B: Backend> {
    shards: Vec<B>,
    map: RouteMap,
    counters: RouteCounters,
    max_arg_len: usize,
}

impl<B: Backend> RouteBackend<B> {
    /// `shards[i]` serves GPU `map.gpus()[i]`.
    pub fn new(shards: Vec<B>, map: RouteMap) -> Result<RouteBackend<B>> {
        if shards.len() != map.shards() || shards.is_empty() {
            return Err(Error::InvalidSetting {
                key: "gpus",
                detail: format!(
                    "{} shard backends for {} GPUs ({})",
                    shards.len(),
                    map.shards(),
                    list(map.gpus())
                ),
            });
        }
        let max_arg_len = shards.iter().map(B::max_arg_len).min().unwrap_or(0);
        Ok(RouteBackend {
            counters: RouteCounters::new(map.gpus()),
            shards,
            map,
            max_arg_len,
        })
    }

    /// A handle on the per-shard counters (for status lines on the same thread, or
    /// another).
    pub fn counters(&self) -> RouteCounters {
        self.counters.clone()
    }

    /// The per-shard counters now.
    pub fn shard_counts(&self) -> Vec<ShardCounts> {
        self.counters.snapshot()
    }

    pub fn map(&self) -> &RouteMap {
        &self.map
    }

    pub fn shards(&self) -> &[B] {
        &self.shards
    }

    /// The shards, e.g. to shut each one down after the loop.
    pub fn shards_mut(&mut self) -> &mut [B] {
        &mut self.shards
    }

    pub fn into_shards(self) -> Vec<B> {
        self.shards
    }

    #[inline]
    fn counted(
        &self,
        shard: usize,
        r: std::result::Result<(), i32>,
    ) -> std::result::Result<(), i32> {
        let c = &self.counters.cells[shard];
        match r {
            Ok(()) => bump(&c.submitted, 1),
            Err(_) => bump(&c.rejected, 1),
        }
        r
    }
}

impl<B: Backend> Backend for RouteBackend<B> {
    fn topology(&self) -> Topology {
        self.shards[0].topology()
    }

    #[inline]
    fn computes_in_submit(&self) -> bool {
        self.shards[0].computes_in_submit()
    }

    /// Without a header there is no function_id to route by: shard 0. The forwarder
    /// always calls [`Backend::submit_request`].
    #[inline]
    fn submit(
        &mut self,
        token: u32,
        handler: &Handler,
        arg: &[u8],
    ) -> std::result::Result<(), i32> {
        let r = self.shards[0].submit(token, handler, arg);
        self.counted(0, r)
    }

    #[inline]
    fn submit_request(
        &mut self,
        token: u32,
        header: &RequestHeader,
        handler: &Handler,
        arg: &[u8],
    ) -> std::result::Result<(), i32> {
        let s = self.map.shard_of(header.function_id);
        let r = self.shards[s].submit_request(token, header, handler, arg);
        self.counted(s, r)
    }

    #[inline]
    fn poll<F: FnMut(Completion<'_>)>(&mut self, mut done: F) -> usize {
        let mut total = 0;
        for (shard, cells) in self.shards.iter_mut().zip(self.counters.cells.iter()) {
            if shard.in_flight() == 0 {
                continue;
            }
            let n = shard.poll(&mut done);
            if n > 0 {
                bump(&cells.completed, n as u64);
                total += n;
            }
        }
        total
    }

    fn in_flight(&self) -> usize {
        self.shards.iter().map(B::in_flight).sum()
    }

    fn max_arg_len(&self) -> usize {
        self.max_arg_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::CpuBackend;
    use crate::wire::status;
    use proptest::prelude::*;

    fn routes(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
        pairs.iter().map(|(n, g)| (n.to_string(), *g)).collect()
    }

    fn header(name: &str, id: u32) -> RequestHeader {
        RequestHeader {
            function_id: wire::function_id(name),
            arg_len: 1,
            request_id: id,
            ptp_timestamp: 0,
        }
    }

    #[test]
    fn unmapped_functions_are_dealt_round_robin_and_the_map_pins_the_rest() {
        let names = ["p0", "p1", "p2", "p3", "d"];
        let m = RouteMap::from_names(&names, &[3, 5], &BTreeMap::new()).unwrap();
        let shards: Vec<usize> = names
            .iter()
            .map(|n| m.shard_of(wire::function_id(n)))
            .collect();
        assert_eq!(shards, vec![0, 1, 0, 1, 0]);
        assert_eq!(
            m.describe(),
            "p0 -> GPU 3, p1 -> GPU 5, p2 -> GPU 3, p3 -> GPU 5, d -> GPU 3"
        );
        // Pinned: d on GPU 5; the unmapped ones are dealt among themselves.
        let m = RouteMap::from_names(&names, &[3, 5], &routes(&[("d", 5), ("p0", 5)])).unwrap();
        let gpus: Vec<usize> = m.assignments().iter().map(|a| a.1).collect();
        assert_eq!(gpus, vec![5, 3, 5, 3, 5]);
        // Unknown function_id: shard 0.
        assert_eq!(m.shard_of(wire::function_id("nope")), 0);
        // One GPU: everything on it.
        let m = RouteMap::from_names(&names, &[1], &BTreeMap::new()).unwrap();
        assert!(names.iter().all(|n| m.shard_of(wire::function_id(n)) == 0));
    }

    #[test]
    fn bad_maps_name_the_entry() {
        let names = ["patch0", "patch1"];
        let e = RouteMap::from_names(&names, &[0, 1], &routes(&[("patch1", 2)]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("patch1=2") && e.contains("0,1"), "{e}");
        let e = RouteMap::from_names(&names, &[0, 1], &routes(&[("patch9", 1)]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("patch9=1") && e.contains("patch0, patch1"),
            "{e}"
        );
        let e = RouteMap::from_names(&names, &[0, 0], &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("gpus") && e.contains("twice"), "{e}");
        assert!(RouteMap::from_names(&names, &[], &BTreeMap::new()).is_err());
        let m = RouteMap::from_names(&names, &[0, 1], &BTreeMap::new()).unwrap();
        let one = vec![CpuBackend::new(4, 16)];
        assert!(RouteBackend::new(one, m).is_err());
    }

    #[test]
    fn tokens_come_back_from_their_shard_and_counters_add_up() {
        let names = ["a", "b", "c"];
        let m = RouteMap::from_names(&names, &[0, 1, 2], &routes(&[("c", 0)])).unwrap();
        // a -> 0, b -> 1, c -> 0 (pinned); GPU 2 gets nothing.
        let shards = (0..3).map(|_| CpuBackend::new(2, 16)).collect();
        let mut r = RouteBackend::new(shards, m).unwrap();
        assert_eq!(r.topology(), Topology::Cpu);
        assert_eq!(r.max_arg_len(), 16);
        let p = Handler::Parity;
        assert_eq!(r.submit_request(10, &header("a", 1), &p, &[1]), Ok(()));
        assert_eq!(r.submit_request(11, &header("b", 2), &p, &[3]), Ok(()));
        assert_eq!(r.submit_request(12, &header("c", 3), &p, &[7]), Ok(()));
        // Shard 0 holds two: a third is refused with the shard's own status.
        assert_eq!(
            r.submit_request(13, &header("a", 4), &p, &[1]),
            Err(status::OVERLOAD)
        );
        assert_eq!(
            r.submit_request(14, &header("b", 5), &p, &[0; 17]),
            Err(status::OVERSIZED)
        );
        assert_eq!(r.in_flight(), 3);
        assert_eq!(r.shards()[0].in_flight(), 2);
        let mut got = vec![];
        assert_eq!(r.poll(|c| got.push((c.token, c.result.to_vec()))), 3);
        got.sort();
        assert_eq!(got, vec![(10, vec![1]), (11, vec![0]), (12, vec![1])]);
        assert_eq!(r.in_flight(), 0);
        let counts = r.shard_counts();
        let want = |gpu, submitted, completed, rejected| ShardCounts {
            gpu,
            submitted,
            completed,
            rejected,
        };
        assert_eq!(
            counts,
            vec![want(0, 2, 2, 1), want(1, 1, 1, 1), want(2, 0, 0, 0)]
        );
        // Without a header: shard 0.
        assert_eq!(r.submit(20, &p, &[1]), Ok(()));
        assert_eq!(r.shards()[0].in_flight(), 1);
        let handle = r.counters();
        assert_eq!(r.poll(|_| {}), 1);
        assert_eq!(handle.snapshot()[0].completed, 3);
    }

    /// One step of a random schedule: submit to a function, or poll.
    #[derive(Debug, Clone)]
    enum Step {
        Submit(usize),
        Poll,
    }

    proptest! {
        /// Whatever the map and the interleaving, every accepted token completes exactly
        /// once, from the shard its function is routed to; refused ones never do; the
        /// counters add up.
        #[test]
        fn every_accepted_token_completes_exactly_once(
            n_gpus in 1usize..5,
            n_funcs in 1usize..7,
            pins in proptest::collection::vec((0usize..7, 0usize..5), 0..5),
            capacity in 1usize..4,
            steps in proptest::collection::vec(
                prop_oneof![3 => (0usize..7).prop_map(Step::Submit), 1 => Just(Step::Poll)],
                1..200,
            ),
        ) {
            let names: Vec<String> = (0..n_funcs).map(|i| format!("patch{i}")).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let gpus: Vec<usize> = (0..n_gpus).map(|g| g * 2 + 1).collect();
            let map: BTreeMap<String, usize> = pins
                .iter()
                .filter(|(f, g)| *f < n_funcs && *g < n_gpus)
                .map(|&(f, g)| (names[f].clone(), gpus[g]))
                .collect();
            let m = RouteMap::from_names(&refs, &gpus, &map).unwrap();
            for (f, g) in &map {
                prop_assert_eq!(m.gpus()[m.shard_of(wire::function_id(f))], *g);
            }
            let shards = (0..n_gpus).map(|_| CpuBackend::new(capacity, 8)).collect();
            let mut r = RouteBackend::new(shards, m.clone()).unwrap();
            // Tokens from one space, recycled as the forwarder does.
            let mut free: Vec<u32> = (0..16).rev().collect();
            let mut owner: Vec<Option<usize>> = vec![None; 16];
            let (mut accepted, mut refused, mut completed) = (0u64, 0u64, 0u64);
            let mut per_shard = vec![0u64; n_gpus];
            for step in steps.iter().chain(std::iter::repeat_n(&Step::Poll, 2)) {
                match step {
                    Step::Submit(f) => {
                        let f = f % n_funcs;
                        let Some(t) = free.pop() else { continue };
                        let h = header(&names[f], t);
                        match r.submit_request(t, &h, &Handler::Parity, &[f as u8]) {
                            Ok(()) => {
                                let s = m.shard_of(h.function_id);
                                owner[t as usize] = Some(s);
                                per_shard[s] += 1;
                                accepted += 1;
                            }
                            Err(code) => {
                                prop_assert_eq!(code, status::OVERLOAD);
                                free.push(t);
                                refused += 1;
                            }
                        }
                    }
                    Step::Poll => {
                        let mut seen = vec![];
                        r.poll(|c| seen.push(c.token));
                        for t in seen {
                            prop_assert!(owner[t as usize].take().is_some(), "token {} completed twice or never issued", t);
                            completed += 1;
                            free.push(t);
                        }
                    }
                }
            }
            prop_assert_eq!(r.in_flight(), 0);
            prop_assert!(owner.iter().all(Option::is_none));
            prop_assert_eq!(accepted, completed);
            let counts = r.shard_counts();
            prop_assert_eq!(counts.iter().map(|c| c.submitted).collect::<Vec<_>>(), per_shard);
            prop_assert_eq!(counts.iter().map(|c| c.completed).sum::<u64>(), completed);
            prop_assert_eq!(counts.iter().map(|c| c.rejected).sum::<u64>(), refused);
            prop_assert!(counts.iter().all(|c| c.submitted == c.completed));
            prop_assert_eq!(counts.iter().map(|c| c.gpu).collect::<Vec<_>>(), gpus);
        }
    }
}

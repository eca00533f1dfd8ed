//! Routing end to end: the forwarding loop over an in-process ring, requests for several
//! parity "patches" routed over 1, 2 and 3 shards, each shard a CPU backend or a mailbox
//! whose device side is the CPU double of the persistent kernel (one poller thread each,
//! yielding when idle). Every answer is checked against the request; the per-shard
//! counters must add up to what the forwarder answered, and follow the route map.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use qfwd::backend::{Backend, CpuBackend};
use qfwd::config::RunConfig;
use qfwd::forward::{ForwardConfig, Forwarder, IdlePolicy};
use qfwd::handler::{parity, Handler, Registry};
use qfwd::mailbox::{CpuDouble, Layout, MailboxBackend, RxCompletion};
use qfwd::route::{RouteBackend, RouteMap};
use qfwd::serve::Wiring;
use qfwd::stats::ShardCounts;
use qfwd::transport::{inproc, Client, TransportKind};
use qfwd::wire::{self, function_id, status};

const WAIT: Duration = Duration::from_secs(20);
const PATCHES: usize = 4;

fn patches() -> Vec<String> {
    (0..PATCHES).map(|i| format!("patch{i}")).collect()
}

fn registry() -> Registry {
    let mut r = Registry::default();
    for p in patches() {
        r.register(&p, Handler::Parity).unwrap();
    }
    r
}

fn forward_config() -> ForwardConfig {
    ForwardConfig {
        max_request_bytes: 256,
        idle: IdlePolicy::Yield,
        batch: 8,
        watchdog: Duration::from_secs(10),
        ..Default::default()
    }
}

fn double_shard() -> MailboxBackend<CpuDouble> {
    let rx = RxCompletion::Inline;
    let layout = Layout::new(16, Layout::req_slot_bytes_for(256, rx), 64, rx).unwrap();
    MailboxBackend::new(CpuDouble::start(layout, 1).unwrap())
}

/// Sends `n` requests (request k to patch k % PATCHES, a few in flight at once), checks
/// each answer, and returns the per-shard counters.
fn run<B: Backend>(backend: RouteBackend<B>, n: u32) -> (Vec<ShardCounts>, RouteBackend<B>) {
    let (mut client, server) = inproc::channel(64, 512).unwrap();
    let counters = backend.counters();
    let mut fwd = Forwarder::new(server, backend, registry(), forward_config());
    let names = patches();
    let mut buf = [0u8; 512];
    let mut rx = [0u8; 512];
    let mut answered = vec![false; n as usize];
    let (mut sent, mut got) = (0u32, 0u32);
    let deadline = Instant::now() + WAIT;
    while got < n {
        assert!(Instant::now() < deadline, "only {got} of {n} answers");
        // Up to 12 outstanding: fewer than one shard's 16 slots, so none is refused.
        while sent < n && sent - got < 12 {
            let arg: Vec<u8> = (0..1 + sent % 40).map(|i| (i * 7 + sent) as u8).collect();
            let fid = function_id(&names[sent as usize % PATCHES]);
            let len = wire::write_request(&mut buf, fid, sent, u64::from(sent) * 3, &arg).unwrap();
            assert!(client.send(&buf[..len]).unwrap());
            sent += 1;
        }
        if !fwd.poll_once().unwrap() {
            std::thread::yield_now();
        }
        while let Some(len) = client.try_recv(&mut rx).unwrap() {
            let r = wire::parse_response(&rx[..len]).unwrap();
            let id = r.header.request_id;
            assert_eq!(r.header.status, status::OK, "request {id}");
            assert_eq!(r.header.ptp_timestamp, u64::from(id) * 3);
            let arg: Vec<u8> = (0..1 + id % 40).map(|i| (i * 7 + id) as u8).collect();
            assert_eq!(r.result, &[parity(&arg)], "request {id}");
            assert!(!answered[id as usize], "request {id} answered twice");
            answered[id as usize] = true;
            got += 1;
        }
    }
    let stats = fwd.stats().clone();
    assert!(stats.adds_up());
    assert_eq!(stats.answered_ok, u64::from(n));
    let shards = counters.snapshot();
    assert_eq!(
        shards.iter().map(|s| s.completed).sum::<u64>(),
        u64::from(n)
    );
    assert_eq!(
        shards.iter().map(|s| s.submitted).sum::<u64>(),
        u64::from(n)
    );
    (shards, fwd.into_backend())
}

/// Requests each GPU should see: patch k gets n / PATCHES (n a multiple of PATCHES).
fn expected(map: &RouteMap, n: u64) -> Vec<u64> {
    let mut v = vec![0; map.shards()];
    for p in patches() {
        v[map.shard_of(function_id(&p))] += n / PATCHES as u64;
    }
    v
}

#[test]
fn one_two_and_three_shards_of_cpu_backends_answer_every_request() {
    for gpus in [vec![0], vec![0, 1], vec![0, 1, 2]] {
        let map = RouteMap::new(&registry(), &gpus, &BTreeMap::new()).unwrap();
        let want = expected(&map, 2_000);
        let shards = gpus.iter().map(|_| CpuBackend::new(8, 256)).collect();
        let (counts, _) = run(RouteBackend::new(shards, map).unwrap(), 2_000);
        let got: Vec<u64> = counts.iter().map(|c| c.completed).collect();
        assert_eq!(got, want, "gpus {gpus:?}");
        assert_eq!(counts.iter().map(|c| c.gpu).collect::<Vec<_>>(), gpus);
    }
}

#[test]
fn one_two_and_three_shards_of_mailboxes_with_the_cpu_double() {
    for gpus in [vec![0], vec![0, 1], vec![0, 1, 2]] {
        // Pin patch3 to the last GPU; the others are dealt round-robin.
        let routes = BTreeMap::from([("patch3".to_string(), *gpus.last().unwrap())]);
        let map = RouteMap::new(&registry(), &gpus, &routes).unwrap();
        let want = expected(&map, 1_200);
        let shards = gpus.iter().map(|_| double_shard()).collect();
        let (counts, mut backend) = run(RouteBackend::new(shards, map).unwrap(), 1_200);
        let got: Vec<u64> = counts.iter().map(|c| c.completed).collect();
        assert_eq!(got, want, "gpus {gpus:?}");
        for shard in backend.shards_mut() {
            let pollers = shard.shutdown(Duration::from_secs(5)).unwrap();
            assert_eq!(pollers.len(), 1);
        }
    }
}

#[test]
fn a_shard_that_refuses_answers_with_its_status_and_the_others_keep_serving() {
    // Shard 0 takes arguments of at most 1 byte; shard 1 up to 256.
    let gpus = [0, 1];
    let map = RouteMap::new(&registry(), &gpus, &BTreeMap::new()).unwrap();
    let backend =
        RouteBackend::new(vec![CpuBackend::new(8, 1), CpuBackend::new(8, 256)], map).unwrap();
    let counters = backend.counters();
    let (mut client, server) = inproc::channel(64, 512).unwrap();
    let mut fwd = Forwarder::new(server, backend, registry(), forward_config());
    let mut buf = [0u8; 64];
    // patch0 -> shard 0 (refuses 2 bytes); patch1 -> shard 1.
    for id in 0..4u32 {
        let n = wire::write_request(&mut buf, function_id("patch0"), id, 0, &[1, 2]).unwrap();
        client.send(&buf[..n]).unwrap();
        let n = wire::write_request(&mut buf, function_id("patch1"), 100 + id, 0, &[3, 1]).unwrap();
        client.send(&buf[..n]).unwrap();
    }
    for _ in 0..4 {
        fwd.poll_once().unwrap();
    }
    let mut answers = BTreeMap::new();
    let mut rx = [0u8; 64];
    while let Some(len) = client.try_recv(&mut rx).unwrap() {
        let r = wire::parse_response(&rx[..len]).unwrap();
        answers.insert(r.header.request_id, (r.header.status, r.result.to_vec()));
    }
    assert_eq!(answers.len(), 8, "{answers:?}");
    for id in 0..4u32 {
        assert_eq!(answers[&id], (status::OVERSIZED, vec![]));
        assert_eq!(answers[&(100 + id)], (status::OK, vec![1]));
    }
    let s = counters.snapshot();
    assert_eq!((s[0].submitted, s[0].completed, s[0].rejected), (0, 0, 4));
    assert_eq!((s[1].submitted, s[1].completed, s[1].rejected), (4, 4, 0));
    assert_eq!(fwd.stats().answered_with(status::OVERSIZED), 4);
    assert!(fwd.stats().adds_up());
}

#[test]
fn serve_routes_over_host_shards_and_reports_per_gpu_counters() {
    // topology cpu with `gpus`: host shards, no GPU needed (what CI runs).
    let config = RunConfig {
        handlers: patches().iter().map(|p| format!("parity:{p}")).collect(),
        gpus: vec![0, 1],
        route: BTreeMap::from([("patch0".to_string(), 1)]),
        idle: IdlePolicy::Yield,
        stats_interval_s: 0.0,
        transport: TransportKind::Inproc,
        ..RunConfig::default()
    };
    let (mut client, server) = inproc::channel(64, 512).unwrap();
    let running = qfwd::serve::start(&config, Wiring::Ring(server)).unwrap();
    assert!(
        running.description().contains("patch0 -> GPU 1"),
        "{}",
        running.description()
    );
    let mut buf = [0u8; 64];
    let mut rx = [0u8; 64];
    let mut got = 0;
    let deadline = Instant::now() + WAIT;
    for id in 0..400u32 {
        let fid = function_id(&format!("patch{}", id % 4));
        let n = wire::write_request(&mut buf, fid, id, 0, &[id as u8]).unwrap();
        while !client.send(&buf[..n]).unwrap() {
            std::thread::yield_now();
        }
        while got <= id {
            assert!(Instant::now() < deadline);
            match client.try_recv(&mut rx).unwrap() {
                Some(len) => {
                    let r = wire::parse_response(&rx[..len]).unwrap();
                    assert_eq!(r.header.status, status::OK);
                    assert_eq!(r.result, &[parity(&[r.header.request_id as u8])]);
                    got += 1;
                }
                None => std::thread::yield_now(),
            }
        }
    }
    running.stop();
    let stats = running.join().unwrap().stats;
    // patch0 pinned to GPU 1; patch1, patch2, patch3 dealt 0, 1, 0.
    let completed: Vec<(usize, u64)> = stats.shards.iter().map(|s| (s.gpu, s.completed)).collect();
    assert_eq!(completed, vec![(0, 200), (1, 200)]);
    assert!(stats.adds_up());
    assert!(stats
        .to_string()
        .contains("gpu 1: submitted 200, completed 200, rejected 0"));
}

/// Two GPUs, a persistent kernel and its own mailbox rings on each. Run on a host with at
/// least two GPUs: `cargo test --release --test route_e2e -- --ignored --nocapture`
/// (NVRTC on LD_LIBRARY_PATH as for the other GPU tests). Skips with a message otherwise.
#[test]
#[ignore = "needs two GPUs"]
fn two_gpus_each_run_a_persistent_kernel_and_share_the_load() {
    let found = match qfwd::gpu::probe() {
        Ok(Some(g)) => g.len(),
        _ => 0,
    };
    if found < 2 {
        eprintln!("skipped: needs 2 GPUs, this host has {found}");
        return;
    }
    let config = RunConfig {
        topology: qfwd::backend::Topology::GpuPersistent,
        handlers: patches().iter().map(|p| format!("parity:{p}")).collect(),
        gpus: vec![0, 1],
        idle: IdlePolicy::Yield,
        stats_interval_s: 0.0,
        transport: TransportKind::Inproc,
        ..RunConfig::default()
    };
    let (mut client, server) = inproc::channel(256, 512).unwrap();
    let running = qfwd::serve::start(&config, Wiring::Ring(server)).unwrap();
    eprintln!("{}", running.description());
    let n = 20_000u32;
    let mut buf = [0u8; 64];
    let mut rx = [0u8; 64];
    let (mut sent, mut got) = (0u32, 0u32);
    let deadline = Instant::now() + WAIT;
    while got < n {
        assert!(Instant::now() < deadline, "only {got} of {n} answers");
        while sent < n && sent - got < 64 {
            let fid = function_id(&format!("patch{}", sent % 4));
            let len = wire::write_request(&mut buf, fid, sent, 0, &[sent as u8]).unwrap();
            if !client.send(&buf[..len]).unwrap() {
                break;
            }
            sent += 1;
        }
        while let Some(len) = client.try_recv(&mut rx).unwrap() {
            let r = wire::parse_response(&rx[..len]).unwrap();
            assert_eq!(r.header.status, status::OK);
            assert_eq!(r.result, &[parity(&[r.header.request_id as u8])]);
            got += 1;
        }
    }
    running.stop();
    let stats = running.join().unwrap().stats;
    eprintln!("{stats}");
    let completed: Vec<u64> = stats.shards.iter().map(|s| s.completed).collect();
    assert_eq!(completed, vec![u64::from(n) / 2, u64::from(n) / 2]);
    assert!(stats.adds_up());
}

//! `gpu-direct` on a real ConnectX, in loopback through one RDMA device: the QPU side is the
//! `rdma` transport's `RdmaClient` (WRITE-with-immediate requests, SEND answers), qfwd's
//! side a `ConnectxLink` whose queues a device side serves itself.
//!
//! - `host_device_serves_a_connectx_queue_set`: no GPU needed. The test thread plays the
//!   device side on the NIC provider's own buffers, exactly as the kernel does (poll the
//!   receive CQE, read the request where `imm` says, poison what it read, return receives
//!   through the doorbell records, write inline SEND WQEs into the send queue and ring the
//!   UAR: 8-byte doorbell, then BlueFlame), so every address and format the kernel's link
//!   description carries is checked against the NIC.
//! - `gpu_direct_kernel_serves_connectx_links`: the kernel (`device/direct.cu`) on two
//!   ConnectX links, in every doorbell mode, with the receive buffers where `--rx-memory`
//!   puts them (GPU memory when dma-buf or nvidia_peermem work, and pinned host memory).
//!
//! - `qpu_side_against_a_running_qfwd`: the QPU side alone, toward a `qfwd run --transport
//!   rdma` (either data path) on this host or another, at `QFWD_CONTROL`: round trips,
//!   printed as percentiles.
//!
//! All are `#[ignore]`d: they need a RoCE-capable ConnectX with its port up (and the second
//! a GPU). On a lab host (`docs/lab-gpu-direct.md`):
//!
//! ```text
//! QFWD_RDMA_DEVICE=mlx5_0 cargo test --release --features rdma --test rdma_direct -- --ignored --nocapture --test-threads=1
//! ```
//!
//! (`QFWD_RDMA_PORT`, `QFWD_RDMA_GID_INDEX`, `QFWD_RDMA_QP=rc` and `QFWD_GPU` as for the
//! other hardware tests.)
#![forbid(unsafe_code)]
#![cfg(feature = "rdma")]

#[path = "gpu_common/mod.rs"]
mod gpu_common;

use std::net::SocketAddr;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use qfwd::direct::connectx::{ConnectxOptions, LinkAcceptor};
use qfwd::direct::{DirectOptions, DirectService, RxMemory};
use qfwd::handler::{parity, Handler, Registry};
use qfwd::mlx5::{opcode, CqCursor, CqeOpcode, Doorbell};
use qfwd::queues::direct::{
    check_request, completion, poll_cqe, CqePoll, CreditWindow, FunctionTable, RxPosition, Verdict,
    POISON,
};
use qfwd::queues::SoftNicConfig;
use qfwd::rdma::control::ControlSocket;
use qfwd::rdma::direct::{ConnectxLink, HostQueues, RxBuffers, RxPlacement};
use qfwd::rdma::verbs::Mr;
use qfwd::rdma::{RdmaClient, RdmaConfig};
use qfwd::shm::SharedRegion;
use qfwd::transport::Client;
use qfwd::wire::{self, status, HEADER_LEN};

fn rdma_config(control: SocketAddr) -> RdmaConfig {
    let nic = ConnectxOptions::from_env(control, RxMemory::Auto).expect("QFWD_RDMA_* settings");
    RdmaConfig {
        handshake_timeout: Duration::from_secs(10),
        slot_bytes: 1024,
        ..nic.rdma
    }
}

fn request(id: u32, arg: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_LEN + arg.len()];
    wire::write_request(&mut b, wire::function_id("parity"), id, u64::from(id), arg).unwrap();
    b
}

fn parity_registry() -> Registry {
    let mut r = Registry::default();
    r.register("parity", Handler::Parity).unwrap();
    r
}

/// Sends `n` parity requests of varied lengths with at most `window` unanswered, calling
/// `serve` whenever it waits, and checks every answer.
fn exchange(client: &mut RdmaClient, n: u32, window: u32, mut serve: impl FnMut()) {
    let mut buf = vec![0u8; 1024];
    let (mut sent, mut answered) = (0u32, 0u32);
    let deadline = Instant::now() + Duration::from_secs(60);
    let arg = |i: u32| -> Vec<u8> { (0..(i % 200) + 1).map(|k| (i * 7 + k) as u8).collect() };
    while answered < n {
        while sent < n && sent - answered < window {
            if !client.send(&request(sent, &arg(sent))).unwrap() {
                break;
            }
            sent += 1;
        }
        serve();
        if let Some(m) = client.try_recv(&mut buf).unwrap() {
            let r = wire::parse_response(&buf[..m]).expect("a CUQS answer");
            let id = r.header.request_id;
            assert_eq!(r.header.status, status::OK, "request {id}");
            assert_eq!(r.result, &[parity(&arg(id))], "request {id}");
            answered += 1;
        }
        assert!(Instant::now() < deadline, "{answered} of {n} answered");
    }
}

/// The control plane for `links`, on its own thread until `stop`.
fn control_plane(
    links: Vec<Arc<ConnectxLink>>,
    stop: Arc<AtomicBool>,
) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let mut socket = ControlSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let mut acceptor = LinkAcceptor::new(links.iter().map(|l| l.endpoint()).collect());
        let mut skipped = 0;
        while !stop.load(Ordering::Acquire) {
            let until = Instant::now() + Duration::from_millis(20);
            if let Some((msg, from)) = socket.recv_until(until, &mut skipped).unwrap() {
                let reply = acceptor.on_message(msg, from, |i, remote| links[i].connect(remote));
                if let Some(r) = reply {
                    socket.send(from, &r).unwrap();
                }
            }
        }
    });
    (addr, handle)
}

/// The kernel's steps, on the host, over a ConnectX's own buffers (receive buffers in
/// host memory).
struct HostDevice {
    q: HostQueues,
    rx_ring: SharedRegion,
    rx_slots: u32,
    slot_bytes: usize,
    sq_wqebbs: u32,
    qpn: u32,
    bf_size: u32,
    blueflame: bool,
    pos: RxPosition,
    credits: CreditWindow,
    table: FunctionTable,
    /// Send queue producer and consumer (WQEBBs), BlueFlame half, send CQ cursor.
    pi: u16,
    done: u16,
    half: usize,
    tx: CqCursor,
    bbs_at: Vec<u16>,
    posted: u64,
    torn: u64,
}

impl HostDevice {
    fn new(link: &ConnectxLink, slot_bytes: usize, blueflame: bool) -> HostDevice {
        let q = link.queues();
        let host = link.host_queues().unwrap();
        let rx_ring = host
            .rx_ring
            .clone()
            .expect("receive buffers in host memory");
        HostDevice {
            rx_ring,
            rx_slots: q.qp.rq.wqe_cnt,
            slot_bytes,
            sq_wqebbs: q.qp.sq.wqe_cnt,
            qpn: q.qp.qpn,
            bf_size: q.qp.bf_size,
            blueflame: blueflame && q.qp.bf_size > 0,
            pos: RxPosition::new(0, q.recv_cq.cqe_cnt, q.qp.rq.wqe_cnt),
            credits: CreditWindow::new(q.qp.rq.wqe_cnt),
            table: FunctionTable::new(&parity_registry()).unwrap(),
            pi: 0,
            done: 0,
            half: 0,
            tx: CqCursor::new(q.send_cq.cqe_cnt),
            bbs_at: vec![1; q.qp.sq.wqe_cnt as usize],
            posted: 0,
            torn: 0,
            q: host,
        }
    }

    /// Serves every request the NIC has completed; returns how many.
    fn serve(&mut self) -> u32 {
        let mut n = 0;
        while self.serve_one() {
            n += 1;
        }
        n
    }

    fn serve_one(&mut self) -> bool {
        let (cq, base) = (&self.q.rx_cq.0, self.q.rx_cq.1);
        let at = base + self.pos.cqe_slot() as usize * 64;
        let tail = cq.load_chunk(at + 48);
        let mut mid = cq.load_chunk(at + 32);
        let rc = match poll_cqe(&mid, &tail, self.pos.owner()) {
            CqePoll::Empty => return false,
            CqePoll::Stop => panic!("stop sentinel in a live CQ"),
            CqePoll::Torn => {
                self.torn += 1;
                mid = cq.load_chunk(at + 32);
                completion(&mid, &tail)
            }
            CqePoll::Ready(rc) => rc,
        };
        assert_eq!(rc.opcode, CqeOpcode::RespWrImm as u8, "{rc:?}");
        assert!(
            !rc.inline32,
            "a WRITE-with-immediate is never scattered into the CQE"
        );
        let slot = (rc.imm & (self.rx_slots - 1)) as usize * self.slot_bytes;
        let len = (rc.byte_cnt as usize).min(self.slot_bytes);
        let mut msg = vec![0u8; len.next_multiple_of(16)];
        for k in 0..len.div_ceil(16) {
            let mut c = self.rx_ring.load_chunk(slot + 16 * k);
            if c == POISON {
                self.torn += 1;
                c = self.rx_ring.load_chunk(slot + 16 * k);
            }
            msg[16 * k..16 * k + 16].copy_from_slice(&c);
            self.rx_ring.store_chunk(slot + 16 * k, POISON);
        }
        for k in 0..3 {
            cq.store_chunk(at + 16 * k, POISON);
        }
        let Verdict::Serve(h, _) = check_request(&msg[..len], rc.byte_cnt, 1000, &self.table)
        else {
            panic!("not a parity request: {rc:?}");
        };
        let arg = &msg[HEADER_LEN..HEADER_LEN + h.arg_len as usize];
        let mut out = vec![0u8; HEADER_LEN + 1];
        out[HEADER_LEN] = parity(arg);
        let header = wire::ResponseHeader {
            status: status::OK,
            result_len: 1,
            request_id: h.request_id,
            ptp_timestamp: h.ptp_timestamp,
        };
        wire::write_response_header(&mut out, &header).unwrap();
        self.post(&out);
        // Every store above lands before the NIC may reuse the receive.
        fence(Ordering::SeqCst);
        if self.credits.complete(self.pos.seq) {
            let (d, off) = (&self.q.rx_cq_dbrec.0, self.q.rx_cq_dbrec.1);
            d.store_be32(
                off,
                (self.credits.consumed() & 0xff_ffff) as u32,
                Ordering::Release,
            );
            let (d, off) = (&self.q.qp_dbrec.0, self.q.qp_dbrec.1);
            d.store_be32(
                off,
                (self.credits.posted() & 0xffff) as u32,
                Ordering::Release,
            );
        }
        self.pos.advance(1);
        true
    }

    /// An inline SEND: the WQE into the send queue, the doorbell record, then the UAR.
    fn post(&mut self, answer: &[u8]) {
        let signaled = (self.posted + 1) % 8 == 0;
        let wqe = opcode::SendInline::new(answer)
            .signaled(signaled)
            .build()
            .unwrap()
            .with_index(self.pi)
            .with_qpn(self.qpn);
        let bbs = wqe.wqebbs();
        let deadline = Instant::now() + Duration::from_secs(2);
        while u32::from(self.pi.wrapping_sub(self.done)) + u32::from(bbs) > self.sq_wqebbs {
            self.reap();
            assert!(Instant::now() < deadline, "the NIC completes no send");
        }
        let (sq, base) = (&self.q.sq.0, self.q.sq.1);
        for (k, bb) in wqe.as_wqebbs().chunks(64).enumerate() {
            let index = self.pi.wrapping_add(k as u16) as usize & (self.sq_wqebbs as usize - 1);
            sq.write(base + index * 64, bb);
        }
        self.bbs_at[self.pi as usize & (self.sq_wqebbs as usize - 1)] = bbs;
        self.pi = self.pi.wrapping_add(bbs);
        fence(Ordering::SeqCst);
        let (d, off) = (&self.q.qp_dbrec.0, self.q.qp_dbrec.1);
        d.store_be32(off + 4, u32::from(self.pi), Ordering::Release);
        fence(Ordering::SeqCst);
        let (bf, off) = (
            &self.q.bf.0,
            self.q.bf.1 + self.half * self.bf_size as usize,
        );
        if self.blueflame && wqe.as_wqebbs().len() <= self.bf_size as usize {
            for (k, c) in wqe.as_wqebbs().chunks(16).enumerate() {
                bf.store_chunk(off + 16 * k, c.try_into().unwrap());
            }
        } else {
            bf.store_u64(off, wqe.doorbell_word(), Ordering::Release);
        }
        fence(Ordering::SeqCst);
        if self.bf_size > 0 {
            self.half ^= 1;
        }
        self.posted += 1;
    }

    /// Takes send completions: the send queue's consumer moves past each signaled WQE.
    fn reap(&mut self) {
        let (cq, base) = (&self.q.tx_cq.0, self.q.tx_cq.1);
        loop {
            let at = base + self.tx.slot() * 64;
            // op_own first: the NIC writes it last, so the rest is read after it is seen.
            if !self.tx.owns(cq.load_chunk(at + 48)[15]) {
                break;
            }
            fence(Ordering::Acquire);
            let mut bytes = [0u8; 64];
            cq.read(at, &mut bytes);
            let Some(c) = self.tx.take(&bytes) else { break };
            assert_eq!(c.opcode, CqeOpcode::Req, "send completion {c:?}");
            let bbs = self.bbs_at[c.wqe_counter as usize & (self.sq_wqebbs as usize - 1)];
            self.done = c.wqe_counter.wrapping_add(bbs);
            let (d, off) = (&self.q.tx_cq_dbrec.0, self.q.tx_cq_dbrec.1);
            d.store_be32(off, self.tx.dbrec_value(), Ordering::Release);
        }
    }
}

/// A ConnectX queue set served by the test thread in place of the GPU.
#[test]
#[ignore = "needs a ConnectX: QFWD_RDMA_DEVICE=mlx5_0 cargo test --release --features rdma --test rdma_direct -- --ignored"]
fn host_device_serves_a_connectx_queue_set() {
    for blueflame in [false, true] {
        let sizes = SoftNicConfig {
            rx_slots: 16,
            rx_cqes: 32,
            rx_slot_bytes: 320,
            sq_wqebbs: 32,
            tx_cqes: 64,
            signal_every: 8,
            ..SoftNicConfig::default()
        };
        let cfg = rdma_config("127.0.0.1:0".parse().unwrap());
        let link = ConnectxLink::open(&cfg, &sizes, |pd, bytes| {
            let region = SharedRegion::heap(bytes)?;
            for at in (0..region.len()).step_by(16) {
                region.store_chunk(at, POISON);
            }
            Ok(RxBuffers {
                mr: Mr::register(pd, &region)?,
                nic_addr: region.host_addr(0),
                device_addr: region.host_addr(0),
                placement: RxPlacement::HostPinned,
                host: Some(region),
            })
        })
        .expect("a ConnectX queue set");
        println!(
            "{}: {:#x?} (scatter to CQE {})",
            link.device(),
            link.queues(),
            link.queues().scatter_to_cqe
        );
        let link = Arc::new(link);
        let stop = Arc::new(AtomicBool::new(false));
        let (control, plane) = control_plane(vec![Arc::clone(&link)], Arc::clone(&stop));
        let mut client = RdmaClient::connect(&cfg, control).expect("QPU side");
        let mut device = HostDevice::new(&link, 320, blueflame);
        // Ping-pong, then with requests in flight; both wrap every queue many times.
        let started = Instant::now();
        exchange(&mut client, 2000, 1, || {
            device.serve();
        });
        exchange(&mut client, 20_000, link.endpoint().slots, || {
            device.serve();
        });
        println!(
            "blueflame {blueflame}: 22000 requests in {:?}, {} torn reads, {} pending",
            started.elapsed(),
            device.torn,
            link.pending()
        );
        assert_eq!(device.posted, 22_000);
        assert_eq!(link.pending(), 0);
        client.stop().unwrap();
        stop.store(true, Ordering::Release);
        plane.join().unwrap();
    }
}

/// The GPU kernel on two ConnectX links.
#[test]
#[ignore = "needs a ConnectX and a GPU: QFWD_RDMA_DEVICE=mlx5_0 cargo test --release --features rdma --test rdma_direct -- --ignored"]
fn gpu_direct_kernel_serves_connectx_links() {
    let Some(_gpu) = gpu_common::gpu_or_skip("gpu_direct_kernel_serves_connectx_links") else {
        panic!("this test needs a GPU");
    };
    for (doorbell, rx_memory) in [
        (Doorbell::Regular, RxMemory::Auto),
        (Doorbell::BlueFlame, RxMemory::Auto),
        (Doorbell::CpuAssisted, RxMemory::Auto),
        (Doorbell::Regular, RxMemory::Host),
    ] {
        let mut o = DirectOptions::new(2, doorbell, 256);
        o.gpu = Some(qfwd::gpu::GpuOptions {
            device: gpu_common::gpu_index(),
            ..Default::default()
        });
        let cfg = rdma_config("127.0.0.1:0".parse().unwrap());
        let nic = ConnectxOptions {
            rdma: cfg.clone(),
            rx_memory,
        };
        let mut service =
            DirectService::start_rdma(&o, &parity_registry(), &nic).expect("gpu-direct");
        println!("{}", service.description());
        let control = service.control_addr().unwrap();
        let mut clients: Vec<RdmaClient> = (0..2)
            .map(|_| RdmaClient::connect(&cfg, control).expect("QPU side"))
            .collect();
        assert_eq!(service.connected_links(), 2);
        let started = Instant::now();
        for c in &mut clients {
            exchange(c, 2000, 1, || {});
            exchange(c, 20_000, 16, || {});
        }
        println!(
            "{doorbell} {rx_memory}: 44000 requests in {:?}; {}",
            started.elapsed(),
            service.status_line(Duration::from_secs(1), &mut 0)
        );
        for c in &mut clients {
            c.stop().unwrap();
        }
        let report = service.stop(Duration::from_secs(2)).unwrap();
        let s = &report.stats;
        assert_eq!((s.received, s.answered_ok), (44_000, 44_000), "{s}");
        assert_eq!(s.dropped_total() + s.answered_error_total(), 0, "{s}");
        assert_eq!((report.undrained, report.stalls), (0, 0));
        for (i, c) in report.per_link.iter().enumerate() {
            assert_eq!(c.get(qfwd::abi::CTR_POSTED), 22_000, "link {i}");
        }
    }
}

/// The QPU side toward a qfwd already running elsewhere: `QFWD_CONTROL` (its `--listen`),
/// `QFWD_REQUESTS` round trips (default 100000), one at a time, then as many again with 16
/// in flight.
#[test]
#[ignore = "a QPU side: QFWD_CONTROL=10.0.0.1:18515 QFWD_RDMA_DEVICE=mlx5_0 cargo test --release --features rdma --test rdma_direct qpu_side -- --ignored --nocapture"]
fn qpu_side_against_a_running_qfwd() {
    let control: SocketAddr = std::env::var("QFWD_CONTROL")
        .expect("QFWD_CONTROL=HOST:PORT of a running `qfwd run --transport rdma`")
        .parse()
        .expect("QFWD_CONTROL is HOST:PORT");
    let n: u32 = std::env::var("QFWD_REQUESTS")
        .ok()
        .map_or(100_000, |v| v.parse().expect("QFWD_REQUESTS is a number"));
    let any = if control.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let mut client = RdmaClient::connect(&rdma_config(any.parse().unwrap()), control)
        .expect("the QPU side connects");
    let mut buf = vec![0u8; 1024];
    let mut rtts = Vec::with_capacity(n as usize);
    for i in 0..n {
        let arg: Vec<u8> = (0..32).map(|k| (i + k) as u8).collect();
        let t0 = Instant::now();
        assert!(client.send(&request(i, &arg)).unwrap());
        let m = loop {
            if let Some(m) = client.try_recv(&mut buf).unwrap() {
                break m;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(1),
                "no answer to request {i}"
            );
        };
        rtts.push(t0.elapsed());
        let r = wire::parse_response(&buf[..m]).unwrap();
        assert_eq!((r.header.request_id, r.header.status), (i, status::OK));
        assert_eq!(r.result, &[parity(&arg)]);
    }
    rtts.sort();
    let at = |q: f64| rtts[((rtts.len() - 1) as f64 * q) as usize];
    println!(
        "{n} round trips, 32 B parity ({}): p50 {:?} p99 {:?} p99.9 {:?} max {:?}",
        client.describe(),
        at(0.5),
        at(0.99),
        at(0.999),
        at(1.0)
    );
    let started = Instant::now();
    exchange(&mut client, n, 16, || {});
    println!("{n} more with 16 in flight in {:?}", started.elapsed());
    client.stop().unwrap();
}

//! The soft NIC's queue semantics, driven from the host as libmlx5 would drive a
//! ConnectX: SQ and CQ wrap-around with owner parity, malformed WQEs turned into error
//! CQEs (and the NIC going on), BlueFlame half alternation, doorbell-record limits, CQ
//! overrun as backpressure, and requests landing in the ring with WRITE-with-imm CQEs.
#![forbid(unsafe_code)]

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use qfwd::mlx5::layout::opcodes;
use qfwd::mlx5::{opcode, Cqe, CqeOpcode, Doorbell, Syndrome, Wqe};
use qfwd::queues::layout::QP_DBREC;
use qfwd::softnic::{
    CqConsumer, ErrorPolicy, NicLayout, SendQueue, SharedRegion, SoftNic, SoftNicConfig,
};
use qfwd::transport::inproc::{self, InprocClient};
use qfwd::transport::Client;

const QPN: u32 = 0x0001c0;

fn wait<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut polls = 0u64;
    loop {
        if let Some(v) = f() {
            return v;
        }
        polls += 1;
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what} after {polls} polls"
        );
        std::thread::yield_now();
    }
}

struct Bench {
    client: InprocClient,
    nic: SoftNic,
    region: SharedRegion,
    layout: NicLayout,
    sq: SendQueue,
    rx: CqConsumer,
}

impl Bench {
    /// A NIC on an inproc wire, connected: one receive credit and one request, whose
    /// write-with-imm CQE is checked.
    fn new(cfg: SoftNicConfig) -> Bench {
        let layout = NicLayout::new(&cfg).unwrap();
        let region = SharedRegion::heap(layout.len).unwrap();
        let (mut client, wire) = inproc::channel(64, 8192).unwrap();
        let nic = SoftNic::start(&cfg, region.clone(), wire).unwrap();
        let mode = if cfg.doorbell == Doorbell::CpuAssisted {
            Doorbell::BlueFlame
        } else {
            cfg.doorbell
        };
        let sq = SendQueue::new(&region, &cfg, mode).unwrap();
        let mut rx = CqConsumer::rx(&region, &layout);
        region.store_be32(QP_DBREC, 1, Ordering::Release);
        assert!(client.send(b"connect").unwrap());
        let c = wait("the connect request's CQE", || rx.poll());
        assert_eq!(
            (c.opcode, c.imm, c.byte_cnt, c.qpn, c.wqe_counter),
            (CqeOpcode::RespWrImm, 0, 7, QPN, 0)
        );
        Bench {
            client,
            nic,
            region,
            layout,
            sq,
            rx,
        }
    }

    fn recv(&mut self) -> Vec<u8> {
        let mut buf = vec![0u8; 8192];
        let client = &mut self.client;
        let n = wait("a payload on the wire", || {
            client.try_recv(&mut buf).unwrap()
        });
        buf[..n].to_vec()
    }

    fn nothing_more(&mut self, within: Duration) {
        std::thread::sleep(within);
        let mut buf = vec![0u8; 8192];
        assert_eq!(
            self.client.try_recv(&mut buf).unwrap(),
            None,
            "unexpected payload"
        );
    }

    fn cqe(&mut self) -> Cqe {
        let sq = &mut self.sq;
        wait("a send CQE", || sq.next_cqe())
    }

    /// Writes a (possibly malformed) WQE as it is, publishes and rings.
    fn post_raw(&mut self, raw: &[u8]) -> u16 {
        let index = self.sq.pi();
        let w = self.sq.write_unstamped(Wqe::from_raw(raw).unwrap());
        self.sq.publish();
        self.sq.ring(&w);
        index
    }

    /// The bytes of `w` stamped for the next SQ position.
    fn stamped(&self, w: Wqe) -> Vec<u8> {
        w.with_index(self.sq.pi()).with_qpn(QPN).as_bytes().to_vec()
    }
}

fn payload(i: u32) -> Vec<u8> {
    const LENS: [usize; 8] = [1, 40, 44, 45, 100, 236, 237, 600];
    (0..LENS[i as usize % 8])
        .map(|k| (i.wrapping_mul(7) as usize + k) as u8)
        .collect()
}

fn wrap_around(mode: Doorbell) {
    let cfg = SoftNicConfig {
        sq_wqebbs: 8,
        tx_cqes: 4,
        signal_every: 1,
        max_response_bytes: 1024,
        ..SoftNicConfig::new(mode)
    };
    let mut b = Bench::new(cfg);
    const N: u32 = 1500;
    let mut index: u16 = 0;
    for i in 0..N {
        let p = payload(i);
        b.sq.post_send(&p).unwrap();
        assert_eq!(b.recv(), p, "payload {i}");
        let c = b.cqe();
        assert_eq!(c.opcode, CqeOpcode::Req, "CQE {i}: {c:?}");
        assert_eq!(c.wqe_counter, index, "CQE {i} names its WQE");
        assert_eq!(
            c.owner,
            (i / 4) % 2 == 1,
            "owner bit of CQE {i} is its lap's parity"
        );
        assert_eq!(
            (c.qpn, c.sop, c.byte_cnt),
            (QPN, opcodes::SEND, p.len() as u32)
        );
        let bbs = if p.len() <= 236 {
            (20 + p.len()).div_ceil(64) as u16
        } else {
            1
        };
        index = index.wrapping_add(bbs);
    }
    assert!(index as u32 > 20 * 8, "the SQ wrapped {} times", index / 8);
    let c = b.nic.counters();
    assert_eq!(c.wqes_executed, N as u64);
    assert_eq!(c.tx_cqes, N as u64);
    assert_eq!(c.error_cqes, 0);
    assert_eq!(c.sq_dma_reads, N as u64, "{c:?}");
    assert!(c.doorbells >= 1 && c.doorbells <= N as u64, "{c:?}");
}

#[test]
fn sq_and_cq_wrap_around_with_owner_parity_regular() {
    wrap_around(Doorbell::Regular);
}

#[test]
fn sq_and_cq_wrap_around_with_owner_parity_blueflame() {
    wrap_around(Doorbell::BlueFlame);
}

fn malformed(mode: Doorbell) {
    let cfg = SoftNicConfig {
        sq_wqebbs: 16,
        tx_cqes: 8,
        signal_every: 1,
        ..SoftNicConfig::new(mode)
    };
    let mut b = Bench::new(cfg);
    let good = |b: &mut Bench, text: &[u8]| {
        b.sq.post(opcode::SendInline::new(text).build().unwrap())
            .unwrap();
        assert_eq!(b.recv(), text);
        assert_eq!(b.cqe().opcode, CqeOpcode::Req);
    };
    good(&mut b, b"ok-1");

    type Make = Box<dyn Fn(&Bench) -> Vec<u8>>;
    // Each case is built for the SQ position it is posted at.
    let cases: Vec<(&str, Make, Syndrome, u8)> = vec![
        (
            "unknown opcode",
            Box::new(|b| {
                let mut raw = b.stamped(opcode::Nop::new().build());
                raw[3] = 0x1f;
                raw
            }),
            Syndrome::LocalQpOp,
            0x1f,
        ),
        (
            "inline length past the WQE",
            Box::new(|b| {
                let mut raw = b.stamped(opcode::SendInline::new(b"abcd").build().unwrap());
                raw[16..20].copy_from_slice(&(100u32 | 0x8000_0000).to_be_bytes());
                raw
            }),
            Syndrome::LocalLength,
            opcodes::SEND,
        ),
        (
            "wrong lkey",
            Box::new(|b| {
                b.stamped(
                    opcode::Send::new(b.region.host_addr(b.layout.tx_bufs), 0xbad, 16).build(),
                )
            }),
            Syndrome::LocalProt,
            opcodes::SEND,
        ),
        (
            "address outside the region",
            Box::new(|b| b.stamped(opcode::Send::new(0x10, b.layout.mkey, 16).build())),
            Syndrome::LocalProt,
            opcodes::SEND,
        ),
        (
            "wrong wqe_index",
            // The SQ holds a WQE whose index is not its position (a regular doorbell names
            // the right position; see below).
            Box::new(|b| {
                opcode::SendInline::new(b"x")
                    .build()
                    .unwrap()
                    .with_index(b.sq.pi() + 3)
                    .with_qpn(QPN)
                    .as_bytes()
                    .to_vec()
            }),
            Syndrome::LocalQpOp,
            opcodes::SEND,
        ),
        (
            "wrong qpn",
            Box::new(|b| {
                opcode::SendInline::new(b"x")
                    .build()
                    .unwrap()
                    .with_index(b.sq.pi())
                    .with_qpn(QPN + 1)
                    .as_bytes()
                    .to_vec()
            }),
            Syndrome::LocalQpOp,
            opcodes::SEND,
        ),
        (
            "RDMA WRITE to a peer without memory",
            Box::new(|b| {
                b.stamped(
                    opcode::Write::new(
                        0x1000,
                        7,
                        b.region.host_addr(b.layout.tx_bufs),
                        b.layout.mkey,
                        8,
                    )
                    .build(),
                )
            }),
            Syndrome::RemoteAccess,
            opcodes::RDMA_WRITE,
        ),
        (
            "ds 0",
            Box::new(|b| {
                let mut raw = b.stamped(opcode::Nop::new().build());
                raw[7] = 0;
                raw
            }),
            Syndrome::LocalQpOp,
            opcodes::NOP,
        ),
        (
            "reserved fm_ce_se bit",
            Box::new(|b| {
                let mut raw = b.stamped(opcode::Nop::new().build());
                raw[11] |= 0x01;
                raw
            }),
            Syndrome::LocalQpOp,
            opcodes::NOP,
        ),
    ];

    for (what, make, syndrome, op) in cases {
        let raw = make(&b);
        let index = if what == "wrong wqe_index" {
            // Corrupt SQ content, rung with the control word of a correct WQE.
            let index = b.sq.pi();
            let w = b.sq.write_unstamped(Wqe::from_raw(&raw).unwrap());
            let doorbell = opcode::SendInline::new(b"x")
                .build()
                .unwrap()
                .with_index(index)
                .with_qpn(QPN);
            assert_eq!(w.wqebbs(), doorbell.wqebbs());
            b.sq.publish();
            b.sq.ring(&doorbell);
            index
        } else {
            b.post_raw(&raw)
        };
        let c = b.cqe();
        assert_eq!(c.opcode, CqeOpcode::ReqErr, "{what}: {c:?}");
        assert_eq!(c.syndrome(), Some(syndrome), "{what}");
        assert_eq!((c.wqe_counter, c.qpn, c.sop), (index, QPN, op), "{what}");
        assert_eq!(b.sq.pi(), index.wrapping_add(1));
    }
    // The NIC goes on.
    good(&mut b, b"ok-2");
    b.nothing_more(Duration::from_millis(20));
    let c = b.nic.counters();
    assert_eq!(c.error_cqes, 9);
    assert_eq!(c.last_syndrome, Syndrome::LocalQpOp as u64);
    assert_eq!(c.wire_sent, 2);
}

#[test]
fn malformed_wqes_get_error_cqes_and_the_nic_keeps_going_regular() {
    malformed(Doorbell::Regular);
}

#[test]
fn malformed_wqes_get_error_cqes_and_the_nic_keeps_going_blueflame() {
    malformed(Doorbell::BlueFlame);
}

#[test]
fn flush_policy_moves_the_qp_to_error_like_hardware() {
    let cfg = SoftNicConfig {
        error_policy: ErrorPolicy::Flush,
        signal_every: 1,
        ..SoftNicConfig::new(Doorbell::Regular)
    };
    let mut b = Bench::new(cfg);
    let mut raw = b.stamped(opcode::Nop::new().build());
    raw[3] = 0x1f;
    b.post_raw(&raw);
    assert_eq!(b.cqe().syndrome(), Some(Syndrome::LocalQpOp));
    // Unsignaled, yet it completes: flushed WQEs always do.
    b.sq.post(
        opcode::SendInline::new(b"never")
            .signaled(false)
            .build()
            .unwrap(),
    )
    .unwrap();
    let c = b.cqe();
    assert_eq!(
        (c.opcode, c.syndrome()),
        (CqeOpcode::ReqErr, Some(Syndrome::WrFlush))
    );
    b.nothing_more(Duration::from_millis(20));
}

/// A ConnectX takes doorbells back to back; so does the soft NIC: a poster never reads
/// the register back, and a doorbell that overwrites an earlier one still sends both WQEs.
fn back_to_back(mode: Doorbell, alternate: bool) {
    let cfg = SoftNicConfig {
        sq_wqebbs: 256,
        tx_cqes: 256,
        signal_every: 64,
        ..SoftNicConfig::new(mode)
    };
    let mut b = Bench::new(cfg);
    b.sq.set_half_alternation(alternate);
    const N: u32 = 200;
    for i in 0..N {
        b.sq.post_send(&payload(i % 6)).unwrap();
    }
    for i in 0..N {
        assert_eq!(b.recv(), payload(i % 6), "message {i} in order");
    }
    let c = b.nic.counters();
    assert_eq!(c.wqes_executed, N as u64, "{c:?}");
    assert!(c.doorbells >= 1 && c.doorbells <= N as u64, "{c:?}");
    assert_eq!(b.sq.counters().doorbells, N as u64);
}

#[test]
fn doorbells_back_to_back_all_send_regular() {
    back_to_back(Doorbell::Regular, true);
}

#[test]
fn doorbells_back_to_back_all_send_blueflame() {
    back_to_back(Doorbell::BlueFlame, true);
}

#[test]
fn doorbells_back_to_back_into_one_half_all_send() {
    back_to_back(Doorbell::BlueFlame, false);
}

fn doorbell_record_limits(mode: Doorbell) {
    let cfg = SoftNicConfig {
        signal_every: 1,
        ..SoftNicConfig::new(mode)
    };
    let mut b = Bench::new(cfg);
    let w1 =
        b.sq.write_wqe(opcode::SendInline::new(b"one").build().unwrap());
    let _w2 =
        b.sq.write_wqe(opcode::SendInline::new(b"two").build().unwrap());
    let w3 =
        b.sq.write_wqe(opcode::SendInline::new(b"three").build().unwrap());
    // The record admits only the first WQE; the doorbell names the third.
    b.sq.publish_upto(w1.ctrl().wqe_index + w1.wqebbs());
    b.sq.ring(&w3);
    assert_eq!(b.recv(), b"one");
    b.nothing_more(Duration::from_millis(30));
    assert_eq!(
        b.nic.counters().wqes_executed,
        1,
        "nothing past the doorbell record"
    );
    // The record catches up: the doorbell already named them.
    b.sq.publish();
    assert_eq!(b.recv(), b"two");
    assert_eq!(b.recv(), b"three");
    // A WQE in the record but never rung stays put.
    let w4 =
        b.sq.write_wqe(opcode::SendInline::new(b"four").build().unwrap());
    b.sq.publish();
    b.nothing_more(Duration::from_millis(30));
    assert_eq!(
        b.nic.counters().wqes_executed,
        3,
        "no doorbell, no execution"
    );
    b.sq.ring(&w4);
    assert_eq!(b.recv(), b"four");
    for i in 0..4 {
        assert_eq!(b.cqe().wqe_counter, i);
    }
}

#[test]
fn nic_never_executes_past_the_doorbell_record_regular() {
    doorbell_record_limits(Doorbell::Regular);
}

#[test]
fn nic_never_executes_past_the_doorbell_record_blueflame() {
    doorbell_record_limits(Doorbell::BlueFlame);
}

#[test]
fn a_full_cq_is_backpressure_not_overwrite() {
    let cfg = SoftNicConfig {
        tx_cqes: 4,
        sq_wqebbs: 16,
        signal_every: 1,
        ..SoftNicConfig::new(Doorbell::Regular)
    };
    let mut b = Bench::new(cfg);
    let mut cq = CqConsumer::tx(&b.region, &b.layout);
    for i in 0..8u8 {
        b.sq.post(opcode::SendInline::new(&[i]).build().unwrap())
            .unwrap();
    }
    for i in 0..4u8 {
        assert_eq!(b.recv(), [i]);
    }
    let nic = &b.nic;
    wait("the NIC to find the CQ full", || {
        (nic.counters().cq_full_stalls > 0).then_some(())
    });
    b.nothing_more(Duration::from_millis(20));
    let first: Vec<Cqe> = (0..4).map(|_| cq.peek().expect("four CQEs")).collect();
    assert!(cq.peek().is_none());
    // Freeing the CQ lets the NIC go on; the next lap's CQEs carry owner 1.
    cq.update_dbrec();
    for i in 4..8u8 {
        assert_eq!(b.recv(), [i]);
    }
    let second: Vec<Cqe> = (0..4)
        .map(|_| wait("the second lap", || cq.peek()))
        .collect();
    for (k, c) in first.iter().chain(&second).enumerate() {
        assert_eq!(
            (c.opcode, c.wqe_counter, c.owner),
            (CqeOpcode::Req, k as u16, k >= 4)
        );
    }
}

#[test]
fn requests_land_in_the_ring_with_write_imm_cqes_and_wait_for_credit() {
    let cfg = SoftNicConfig {
        rx_slots: 4,
        rx_cqes: 4,
        rx_slot_bytes: 128,
        ..SoftNicConfig::new(Doorbell::Regular)
    };
    let mut b = Bench::new(cfg);
    let msg = |i: u32| -> Vec<u8> { format!("request {i}").into_bytes() };
    // No credit beyond the connect request's: the NIC leaves requests on the wire.
    for i in 1..=3 {
        assert!(b.client.send(&msg(i)).unwrap());
    }
    std::thread::sleep(Duration::from_millis(30));
    assert!(b.rx.poll().is_none());
    assert_eq!(b.nic.counters().rx_messages, 1);
    for i in 1..=13u32 {
        if i > 3 {
            assert!(b.client.send(&msg(i)).unwrap());
        }
        // One more receive WQE.
        b.region.store_be32(QP_DBREC, 1 + i, Ordering::Release);
        let rx = &mut b.rx;
        let c = wait("a write-with-imm CQE", || rx.poll());
        let slot = i % 4;
        assert_eq!(
            (c.opcode, c.imm, c.wqe_counter, c.qpn),
            (CqeOpcode::RespWrImm, slot, i as u16, QPN)
        );
        assert_eq!(c.owner, (i / 4) % 2 == 1, "owner parity of receive CQE {i}");
        assert_eq!(c.byte_cnt as usize, msg(i).len());
        let mut got = vec![0u8; msg(i).len()];
        b.region.read(b.layout.rx_slot(slot), &mut got);
        assert_eq!(got, msg(i));
    }
}

#[test]
fn the_nic_thread_stops_on_request() {
    let b = Bench::new(SoftNicConfig::default());
    assert!(b.nic.is_running());
    let c = b.nic.stop().unwrap();
    assert_eq!(c.rx_messages, 1);
}

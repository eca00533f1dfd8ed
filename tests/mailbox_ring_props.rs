//! Property test of the mailbox ring against the CPU double: any sequence of submits and
//! polls, any ring size, either rx_completion mode, one or two pollers, never loses or
//! duplicates a request, and every result is right, whatever the poller groups.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use qfwd::backend::Backend;
use qfwd::handler::{parity, Handler};
use qfwd::mailbox::{CpuDouble, Layout, MailboxBackend, RxCompletion};
use qfwd::wire::status;

#[derive(Debug, Clone)]
enum Op {
    Submit { len: usize, seed: u8 },
    Poll,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0usize..80, any::<u8>()).prop_map(|(len, seed)| Op::Submit { len, seed }),
        2 => Just(Op::Poll),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn submits_and_polls_never_lose_or_duplicate(
        slots in 1usize..8,
        inline in any::<bool>(),
        (pollers, per_slot) in prop_oneof![Just((1usize, 1usize)), Just((2, 2)), Just((2, 1)), Just((4, 2))],
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let rx = if inline { RxCompletion::Inline } else { RxCompletion::Buffer };
        let layout = Layout::new(slots, Layout::req_slot_bytes_for(48, rx), 64, rx).unwrap();
        let mut b = MailboxBackend::new(CpuDouble::start_grouped(layout, pollers, per_slot).unwrap());
        let max = b.max_arg_len();
        let mut expected: HashMap<u32, u8> = HashMap::new();
        let mut completed = 0usize;
        let mut next_token = 0u32;
        let check = |c: qfwd::backend::Completion<'_>,
                         expected: &mut HashMap<u32, u8>|
         -> Result<(), TestCaseError> {
            prop_assert_eq!(c.status, status::OK);
            let want = expected.remove(&c.token);
            prop_assert!(want.is_some(), "token {} unknown or completed twice", c.token);
            prop_assert_eq!(c.result, &[want.unwrap()][..]);
            Ok(())
        };
        for op in ops {
            match op {
                Op::Submit { len, seed } => {
                    let arg: Vec<u8> = (0..len).map(|i| seed.wrapping_add((i as u8).wrapping_mul(37))).collect();
                    let in_flight = b.in_flight();
                    match b.submit(next_token, &Handler::Parity, &arg) {
                        Ok(()) => {
                            prop_assert!(len <= max);
                            expected.insert(next_token, parity(&arg));
                            next_token += 1;
                        }
                        Err(code) if len > max => prop_assert_eq!(code, status::OVERSIZED),
                        Err(code) => {
                            prop_assert_eq!(code, status::OVERLOAD);
                            prop_assert!(in_flight >= 1);
                            if pollers == 1 {
                                // One poller serves in order: full means `slots` pending.
                                prop_assert_eq!(in_flight, slots);
                            }
                        }
                    }
                }
                Op::Poll => {
                    let mut results = Vec::new();
                    completed += b.poll(|c| results.push((c.token, c.status, c.result.to_vec())));
                    for (token, st, result) in results {
                        check(qfwd::backend::Completion { token, status: st, result: &result, sent_by_device: false }, &mut expected)?;
                    }
                }
            }
            prop_assert_eq!(b.in_flight(), expected.len());
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !expected.is_empty() {
            prop_assert!(Instant::now() < deadline, "{} requests never completed", expected.len());
            let mut results = Vec::new();
            completed += b.poll(|c| results.push((c.token, c.status, c.result.to_vec())));
            for (token, st, result) in results {
                check(qfwd::backend::Completion { token, status: st, result: &result, sent_by_device: false }, &mut expected)?;
            }
            std::thread::yield_now();
        }
        prop_assert_eq!(completed, next_token as usize);
        prop_assert_eq!(b.in_flight(), 0);
        let served: u64 = b.shutdown(Duration::from_secs(5)).unwrap().iter().map(|c| c.served).sum();
        prop_assert_eq!(served, next_token as u64);
    }
}

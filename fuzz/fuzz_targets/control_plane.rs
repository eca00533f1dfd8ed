//! Any bytes fed to the RoCE control-plane parser: it never panics, and a message that
//! parses re-encodes to exactly the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qfwd::rdma::control::{Message, MAX_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::parse(data) {
        let mut out = [0u8; MAX_LEN];
        let n = m.encode(&mut out).expect("a parsed message re-encodes");
        assert_eq!(n, m.len(), "encode length != len()");
        assert_eq!(&out[..n], data, "re-encoded message differs from the input");
        assert_eq!(
            Message::parse(&out[..n]).as_ref(),
            Ok(&m),
            "round trip changed the message"
        );
    }
});

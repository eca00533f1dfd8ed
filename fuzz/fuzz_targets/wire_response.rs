//! Any bytes fed to the CUQS response parser: a response that parses re-encodes to the
//! same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qfwd::wire::{parse_response, write_response, write_response_header, WireError, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    match parse_response(data) {
        Ok(view) => {
            let header = view.header;
            assert_eq!(
                view.result.len(),
                header.result_len as usize,
                "result.len() != header.result_len"
            );

            let mut out = vec![0u8; data.len()];
            let n = write_response(
                &mut out,
                header.status,
                header.request_id,
                header.ptp_timestamp,
                view.result,
            )
            .expect("write_response into a buffer of the input's size failed");
            assert_eq!(n, data.len(), "write_response length != input length");
            assert_eq!(
                &out[..n],
                data,
                "re-encoded response is not byte-identical to the input"
            );

            // The in-place path: result bytes already there, header written over them.
            let mut in_place = vec![0u8; data.len()];
            in_place[HEADER_LEN..].copy_from_slice(view.result);
            write_response_header(&mut in_place, &header)
                .expect("write_response_header failed for a parsed header");
            assert_eq!(
                &in_place[..],
                data,
                "in-place response is not byte-identical to the input"
            );
        }
        Err(e) => {
            assert!(
                matches!(
                    e,
                    WireError::TruncatedHeader { .. }
                        | WireError::BadMagic { .. }
                        | WireError::LengthMismatch { .. }
                ),
                "unexpected parse error {e:?}"
            );
            if e.header_parses() {
                assert!(
                    data.len() >= HEADER_LEN,
                    "header_parses() on a truncated datagram"
                );
            }
        }
    }
});

//! Any bytes fed to the CUQR request parser: a request that parses re-encodes to the
//! same bytes; a request whose header parses but body does not can still be answered.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qfwd::wire::{
    parse_request, parse_request_header, parse_response, status, write_error_response,
    write_request, WireError, HEADER_LEN,
};

fuzz_target!(|data: &[u8]| {
    let header_only = parse_request_header(data);
    match parse_request(data) {
        Ok(view) => {
            let header =
                header_only.expect("parse_request succeeded but parse_request_header failed");
            assert_eq!(
                view.header, header,
                "header from parse_request != parse_request_header"
            );
            assert_eq!(
                view.arg.len(),
                header.arg_len as usize,
                "arg.len() != header.arg_len"
            );

            let mut out = vec![0u8; data.len()];
            let n = write_request(
                &mut out,
                header.function_id,
                header.request_id,
                header.ptp_timestamp,
                view.arg,
            )
            .expect("write_request into a buffer of the input's size failed");
            assert_eq!(n, data.len(), "write_request length != input length");
            assert_eq!(
                &out[..n],
                data,
                "re-encoded request is not byte-identical to the input"
            );
        }
        Err(e) => {
            if e.header_parses() {
                let header = header_only
                    .expect("error says header_parses() but parse_request_header failed");
                assert_ne!(
                    header.arg_len as usize,
                    data.len() - HEADER_LEN,
                    "parse_request failed although arg_len matches the body"
                );
                let mut out = [0u8; HEADER_LEN];
                let n = write_error_response(&mut out, &header, e.status())
                    .expect("write_error_response failed for a parseable header");
                assert_eq!(n, HEADER_LEN);
                let resp = parse_response(&out[..n]).expect("error response does not parse");
                assert_eq!(resp.header.status, e.status());
                assert_eq!(resp.header.status, status::LENGTH_MISMATCH);
                assert_eq!(resp.header.request_id, header.request_id);
                assert_eq!(resp.header.ptp_timestamp, header.ptp_timestamp);
                assert_eq!(resp.header.result_len, 0);
                assert!(resp.result.is_empty());
            } else {
                // Truncated or bad magic: the header cannot be trusted either.
                assert_eq!(
                    header_only,
                    Err(e),
                    "header parser disagrees with the full parser"
                );
                assert!(
                    matches!(
                        e,
                        WireError::TruncatedHeader { .. } | WireError::BadMagic { .. }
                    ),
                    "unexpected unanswerable error {e:?}"
                );
            }
        }
    }
});

//! How the binaries behave as Unix processes.
//!
//! Rust ignores `SIGPIPE`, so a write to a closed pipe (`qfwd-latency report ... | head`)
//! is an error, and `println!` turns it into a panic. A command-line tool is expected to
//! end quietly there, as `cat` does: the reader asked for no more.
#![forbid(unsafe_code)]

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::{Error, Result};

/// Ends the process quietly, with the default action of `SIGPIPE`, when it writes to a
/// pipe whose reader has gone. Call first thing in `main`. Datagram sockets never raise
/// `SIGPIPE`, so the forwarder's transports are not affected.
pub fn end_quietly_on_closed_pipe() -> Result<()> {
    signal_hook::flag::register_conditional_default(
        signal_hook::consts::SIGPIPE,
        Arc::new(AtomicBool::new(true)),
    )
    .map(drop)
    .map_err(Error::Signal)
}

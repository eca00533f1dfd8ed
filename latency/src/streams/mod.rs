//! Stream measurements: many logical qubits streaming rounds of syndromes to a stream
//! engine (`qfwd::stream`), timed from each window's last round to its commit.
//!
//! - [`scenario`]: stream scenario files (`[service]`, `[streams]`, `[[sweep]]`);
//! - [`emulator`]: the QPU stream emulator (N streams, a cadence, links, Stim shots);
//! - [`sweep`]: runs each point, one CSV row and one reaction spectrum per point;
//! - [`record`]: the CSV row (`streams, distance, round_ns, reaction_p50_us, ...`);
//! - [`plot`]: reaction p99 against the number of streams, per engine.
#![forbid(unsafe_code)]

pub mod emulator;
pub mod plot;
pub mod record;
pub mod scenario;
pub mod sweep;

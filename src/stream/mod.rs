//! Streaming decoding: many logical qubits, each a stream of rounds of syndromes, decoded
//! in sliding windows whose commits go back as they are made.
//!
//! - [`protocol`]: the wire (CUQR functions `stream.enqueue_syndromes`,
//!   `stream.get_corrections`, `stream.reset_decoder`; 32-byte response records);
//!   docs/streaming-protocol.md has it byte by byte.
#![forbid(unsafe_code)]

pub mod dispatch;
pub mod link;
pub mod protocol;
pub mod service;
pub mod state;
pub mod worker;

pub use service::{
    describe, load_model, spawn, spawn_inproc, RunningStreams, ServiceOptions, StreamSettings,
    StreamStats,
};

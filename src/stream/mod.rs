//! Streaming decoding: many logical qubits, each a stream of rounds of syndromes, decoded
//! in sliding windows whose commits go back as they are made.
//!
//! - [`protocol`]: the wire (CUQR functions `stream.enqueue_syndromes`,
//!   `stream.get_corrections`, `stream.reset_decoder`; 32-byte response records);
//!   docs/streaming-protocol.md has it byte by byte.
//! - Two engines serve it: the CPU pool ([`service`]: a dispatcher and decoder threads,
//!   each owning a range of streams) and the batched engine ([`gpu_engine`]: a dispatcher,
//!   a batcher running every stream's [`ledger`], and one thread handing each batch of
//!   rounds to a [`batch::BatchDecoder`]: the GPU's persistent kernel ([`served`]), a
//!   launch per batch, or a CPU stand-in).
#![forbid(unsafe_code)]

pub mod batch;
pub mod dispatch;
pub mod gpu_engine;
pub mod ledger;
pub mod link;
pub mod protocol;
pub mod served;
pub mod service;
pub mod state;
pub mod worker;

pub use gpu_engine::{
    spawn_batched_inproc, spawn_batched_on, BatchedCounts, BatchedDecoder, GpuEngineOptions,
};
pub use service::{
    batched_engine, describe, load_model, spawn, spawn_inproc, spawn_inproc_links, spawn_on,
    RunningStreams, ServiceOptions, StreamEngine, StreamSettings, StreamStats,
};

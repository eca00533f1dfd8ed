//! Handlers: what a request's `function_id` asks the appliance to compute.
//!
//! A handler is an enum variant, not a trait object, so the hot path dispatches with a
//! `match` (no dynamic dispatch per message). The same handler exists as host code here
//! and as device code in `device/` for the GPU topologies; both must give identical
//! results.
#![forbid(unsafe_code)]

use std::sync::Arc;

use crate::decode::{BadPayload, Decoder, DecoderKind};
use crate::wire::{self, status};
use crate::{Error, Result};

/// The handlers the appliance can serve.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Handler {
    /// Argument: any number of bytes. Result: 1 byte, the XOR of every bit (0 or 1).
    /// The transport-floor workload: it costs next to nothing, so what is measured is
    /// the path, not the computation.
    Parity,
    /// A QEC decoder (`lut` or `uf`) loaded from a detector error model, see
    /// [`crate::decode`]. Argument: detection events bit-packed LSB first
    /// (`ceil(n/8)` bytes), then the number of detectors `n` as a u32 LE. Result: the
    /// observable flips bit-packed LSB first. A wrong length or count gets
    /// `status::BAD_ARGUMENT`; more defects than the decoder's budget,
    /// `status::OVER_BUDGET` ([`payload_status`]).
    Decoder(Arc<Decoder>),
}

/// Two handlers are equal when they compute the same thing: decoders only when they are
/// the same loaded instance.
impl PartialEq for Handler {
    fn eq(&self, other: &Handler) -> bool {
        match (self, other) {
            (Handler::Parity, Handler::Parity) => true,
            (Handler::Decoder(a), Handler::Decoder(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Handler {}

/// Largest result any shipped handler writes, in bytes.
pub const MAX_RESULT_LEN: usize = 4096;

impl Handler {
    /// Every handler `--handler` accepts by name.
    pub const NAMES: &'static [&'static str] = &["parity"];

    /// Looks a built-in handler up by name.
    pub fn by_name(name: &str) -> Result<Handler> {
        match name {
            "parity" => Ok(Handler::Parity),
            _ => Err(Error::UnknownHandler {
                name: name.to_string(),
                available: Self::NAMES.join(", "),
            }),
        }
    }

    /// A decoder handler: parses the Stim `.dem` at `dem` and builds a `kind` decoder.
    pub fn decoder(dem: &std::path::Path, kind: DecoderKind) -> Result<Handler> {
        Handler::decoder_with_budget(dem, kind, None)
    }

    /// [`Handler::decoder`] with its request budget set (`max_defects`: see
    /// [`Decoder::set_max_defects`]; `None`: the model's default).
    pub fn decoder_with_budget(
        dem: &std::path::Path,
        kind: DecoderKind,
        max_defects: Option<u32>,
    ) -> Result<Handler> {
        let mut d = Decoder::from_dem_path(dem, kind)?;
        d.set_max_defects(max_defects)?;
        tracing::info!(
            "decoder {kind} for {}: {} detectors, budget {} defects per request (0: none; \
             {:.2} expected per shot at the model's noise)",
            dem.display(),
            d.num_detectors(),
            d.max_defects(),
            crate::decode::budget::expected_defects(d.graph())
        );
        Ok(Handler::Decoder(Arc::new(d)))
    }

    /// The handler's default registration name.
    pub fn default_name(&self) -> &'static str {
        match self {
            Handler::Parity => "parity",
            Handler::Decoder(_) => "decode",
        }
    }

    /// Device-side handler code, as the GPU kernels dispatch on it: parity 1, lut 2, uf 3.
    pub fn device_code(&self) -> u32 {
        match self {
            Handler::Parity => crate::abi::CODE_PARITY,
            Handler::Decoder(d) => d.device_code(),
        }
    }

    /// Runs the handler on the host. Writes the result into `out`; returns its length,
    /// or a status code > 0 for a handler error.
    #[inline]
    pub fn run(&self, arg: &[u8], out: &mut [u8]) -> std::result::Result<usize, i32> {
        match self {
            Handler::Parity => {
                if out.is_empty() {
                    return Err(status::BAD_ARGUMENT);
                }
                out[0] = parity(arg);
                Ok(1)
            }
            Handler::Decoder(d) => d.run_payload(arg, out).map_err(payload_status),
        }
    }
}

/// The wire status of a decoder's refusal: `OVER_BUDGET` for a syndrome past its budget,
/// `BAD_ARGUMENT` for a payload that does not fit the model.
#[inline]
pub fn payload_status(why: BadPayload) -> i32 {
    match why {
        BadPayload::OverBudget => status::OVER_BUDGET,
        BadPayload::Length | BadPayload::DetectorCount | BadPayload::NoRoom => status::BAD_ARGUMENT,
    }
}

/// XOR of every bit of `bytes`: 0 or 1.
#[inline]
pub fn parity(bytes: &[u8]) -> u8 {
    let mut chunks = bytes.chunks_exact(8);
    let mut acc = 0u64;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        acc ^= u64::from_le_bytes(w);
    }
    let mut tail = 0u8;
    for &b in chunks.remainder() {
        tail ^= b;
    }
    ((acc.count_ones() + tail.count_ones()) & 1) as u8
}

/// One registered handler: the name it answers to and its function_id.
#[derive(Debug, Clone)]
pub struct Registration {
    pub name: String,
    pub function_id: u32,
    pub handler: Handler,
}

/// Handlers keyed by function_id (FNV-1a of the registration name).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    entries: Vec<Registration>,
}

impl Registry {
    /// A registry serving the parity handler under its default name.
    pub fn with_parity() -> Registry {
        let mut r = Registry::default();
        r.register("parity", Handler::Parity)
            .expect("an empty registry has no collision");
        r
    }

    /// Registers `handler` under `name`. Two names with the same FNV-1a hash are refused.
    pub fn register(&mut self, name: &str, handler: Handler) -> Result<u32> {
        let id = wire::function_id(name);
        if let Some(other) = self.entries.iter().find(|e| e.function_id == id) {
            return Err(Error::FunctionIdCollision {
                a: other.name.clone(),
                b: name.to_string(),
                id,
            });
        }
        self.entries.push(Registration {
            name: name.to_string(),
            function_id: id,
            handler,
        });
        Ok(id)
    }

    /// The handler for `function_id`, if any. A handful of entries: a linear scan
    /// over one cache line beats hashing.
    #[inline]
    pub fn lookup(&self, function_id: u32) -> Option<&Handler> {
        self.entries
            .iter()
            .find(|e| e.function_id == function_id)
            .map(|e| &e.handler)
    }

    /// Every registration, in registration order.
    pub fn entries(&self) -> &[Registration] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parity_of_known_bytes() {
        assert_eq!(parity(&[]), 0);
        assert_eq!(parity(&[1]), 1);
        assert_eq!(parity(&[3]), 0);
        assert_eq!(parity(&[0xff; 9]), 0);
        assert_eq!(parity(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x01]), 1);
    }

    #[test]
    fn registry_finds_by_fnv_and_refuses_duplicates() {
        let mut r = Registry::with_parity();
        assert_eq!(
            r.lookup(wire::function_id("parity")),
            Some(&Handler::Parity)
        );
        assert_eq!(r.lookup(wire::function_id("other")), None);
        assert!(matches!(
            r.register("parity", Handler::Parity),
            Err(Error::FunctionIdCollision { .. })
        ));
        assert!(Handler::by_name("nope")
            .unwrap_err()
            .to_string()
            .contains("parity"));
    }

    proptest! {
        #[test]
        fn parity_equals_bit_count_mod_2(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let ones: u32 = bytes.iter().map(|b| b.count_ones()).sum();
            prop_assert_eq!(parity(&bytes) as u32, ones % 2);
            let mut out = [0u8; 1];
            prop_assert_eq!(Handler::Parity.run(&bytes, &mut out), Ok(1));
            prop_assert_eq!(out[0] as u32, ones % 2);
        }
    }
}

//! The decoders' error type.
use std::path::PathBuf;

/// Everything the decoders can fail at, one variant per failing operation, with context.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing a file (a model, shots, a table cache).
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A detector error model that does not parse: its file and line.
    #[error("{file}:{line}: {detail}")]
    Dem {
        file: String,
        line: usize,
        detail: String,
    },
    /// A model the decoder cannot be built for (too many detectors, no observables...).
    #[error("decoder model {file}: {detail}")]
    DecoderModel { file: String, detail: String },
    /// A decoder name that is none of the decoders'.
    #[error("unknown decoder {name:?}; available: matching, uf, lut")]
    UnknownDecoder { name: String },
    /// A shot file that does not fit its format or the model.
    #[error("shots {path}: {detail}")]
    Shots { path: PathBuf, detail: String },
    /// A decode that could not run.
    #[error("decode: {detail}")]
    Decode { detail: String },
    /// A damaged or foreign file in the uf table cache.
    #[error("uf table cache {path}: {detail}")]
    UfTableCache { path: PathBuf, detail: String },
    /// A decoder setting out of range (`key` names it).
    #[error("invalid setting {key}: {detail}")]
    InvalidSetting { key: &'static str, detail: String },
}

/// The decoders' result type.
pub type Result<T> = std::result::Result<T, Error>;

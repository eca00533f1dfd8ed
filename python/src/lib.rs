//! `qfwd._qfwd`: the native half of the `qfwd` Python package (python/qfwd/__init__.py
//! holds the numpy-facing half). One class, `NativeDecoder`, over `qfwd_decode::Decoder`:
//! built from detector error model text, it decodes bit-packed syndromes (`bytes`, LSB
//! first, Stim's `b8` rows) into bit-packed observable flips, one shot or a batch, with
//! the interpreter's lock released while it decodes. The Python side packs and unpacks
//! numpy arrays around it.
//!
//! Errors: a model that does not parse or build raises `ValueError` with the decoder's
//! message (file, line, value, limit); a batch whose length is not a whole number of shots
//! raises `ValueError`.
#![forbid(unsafe_code)]

use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use qfwd_decode::{budget, BadPayload, Decoder, DecoderKind, Scratch};

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A decoder built from a Stim detector error model (see the module docs).
#[pyclass(module = "qfwd._qfwd", frozen)]
struct NativeDecoder {
    inner: Arc<Decoder>,
    /// Working memory of `decode` (one shot at a time; a batch makes its own).
    scratch: Mutex<Scratch>,
}

#[pymethods]
impl NativeDecoder {
    /// Parses `text` (a `.dem`; `source` names it in errors) and builds a `kind` decoder
    /// ("uf" or "lut"); `max_defects` sets the request budget of `run_payload` (None: the
    /// model's default, 0: none).
    #[new]
    #[pyo3(signature = (text, kind = "uf", source = "<detector error model>", max_defects = None))]
    fn new(
        py: Python<'_>,
        text: &str,
        kind: &str,
        source: &str,
        max_defects: Option<u32>,
    ) -> PyResult<NativeDecoder> {
        let kind: DecoderKind = kind.parse().map_err(value_error)?;
        let text = text.to_owned();
        let source = source.to_owned();
        let mut dec = py
            .allow_threads(|| Decoder::from_dem_text(&text, &source, kind))
            .map_err(value_error)?;
        dec.set_max_defects(max_defects).map_err(value_error)?;
        let scratch = Mutex::new(dec.new_scratch());
        Ok(NativeDecoder {
            inner: Arc::new(dec),
            scratch,
        })
    }

    #[getter]
    fn num_detectors(&self) -> usize {
        self.inner.num_detectors()
    }

    #[getter]
    fn num_observables(&self) -> usize {
        self.inner.num_observables()
    }

    #[getter]
    fn num_edges(&self) -> usize {
        self.inner.graph().num_edges()
    }

    /// Bytes of a bit-packed syndrome: `ceil(num_detectors / 8)`.
    #[getter]
    fn detector_bytes(&self) -> usize {
        self.inner.detector_bytes()
    }

    /// Bytes of a bit-packed result: `ceil(num_observables / 8)`.
    #[getter]
    fn result_bytes(&self) -> usize {
        self.inner.result_len()
    }

    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind().as_str()
    }

    /// The request budget of `run_payload` (0: none).
    #[getter]
    fn max_defects(&self) -> u32 {
        self.inner.max_defects()
    }

    /// Mean defects of a shot at the model's own noise.
    #[getter]
    fn expected_defects(&self) -> f64 {
        budget::expected_defects(self.inner.graph())
    }

    /// Decodes one bit-packed syndrome; returns the bit-packed observable flips.
    fn decode<'py>(&self, py: Python<'py>, dets: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let mut out = vec![0u8; self.inner.result_len()];
        let mut scratch = self
            .scratch
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.inner.decode_to(&mut scratch, dets, &mut out);
        Ok(PyBytes::new(py, &out))
    }

    /// Decodes `dets`, shots back to back (`detector_bytes` each), on `threads` workers;
    /// returns their flips back to back (`result_bytes` each).
    #[pyo3(signature = (dets, threads = 1))]
    fn decode_batch<'py>(
        &self,
        py: Python<'py>,
        dets: &[u8],
        threads: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let nb = self.inner.detector_bytes();
        let shots = match dets.len().checked_div(nb) {
            Some(s) if dets.len() % nb == 0 => s,
            Some(_) => {
                return Err(value_error(format!(
                    "{} bytes is not a whole number of {nb}-byte shots",
                    dets.len()
                )))
            }
            None => 0,
        };
        let mut out = vec![0u8; shots * self.inner.result_len()];
        let dec = &self.inner;
        py.allow_threads(|| dec.decode_batch(dets, &mut out, threads))
            .map_err(value_error)?;
        Ok(PyBytes::new(py, &out))
    }

    /// The wire payload of a bit-packed syndrome (the request argument the appliance's
    /// decoder handler takes: the syndrome then its detector count, u32 little-endian).
    fn payload<'py>(&self, py: Python<'py>, dets: &[u8]) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.payload(dets))
    }

    /// What the appliance's handler answers to a wire payload: `(status, result)`, status
    /// 0 (ok), 1 (bad argument) or 2 (over budget).
    fn run_payload<'py>(&self, py: Python<'py>, payload: &[u8]) -> (i32, Bound<'py, PyBytes>) {
        let mut out = vec![0u8; self.inner.result_len()];
        match self.inner.run_payload(payload, &mut out) {
            Ok(n) => (0, PyBytes::new(py, &out[..n])),
            Err(BadPayload::OverBudget) => (2, PyBytes::new(py, &[])),
            Err(_) => (1, PyBytes::new(py, &[])),
        }
    }
}

#[pymodule]
fn _qfwd(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeDecoder>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

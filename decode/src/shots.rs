//! Shot tables in Stim's six result formats (Stim's `doc/result_formats.md`).
//!
//! In memory a shot is always a bit-packed row like `b8` (and like the wire payload,
//! docs/protocol.md): `ceil(bits / 8)` bytes, bit `k` of the shot in byte `k / 8`, bit
//! `k % 8` (LSB first); padding bits are zero. A shot's bits are its detectors, then its
//! observables when they are appended ([`ShotLayout`]); only `dets` tells them apart.
//!
//! - `01`: one line per shot, one `0`/`1` character per bit.
//! - `b8`: the rows back to back, nothing else.
//! - `r8`: per shot, one byte per run of 0s before a 1 (255: 255 zeros and no 1), the last
//!   run ending at a 1 one past the shot's end.
//! - `ptb64`: groups of 64 shots; per bit, 8 bytes (a little-endian u64 whose bit `s` is
//!   shot `s`'s). The shots must be a multiple of 64.
//! - `hits`: one line per shot, the indices of its 1 bits, comma-separated (an empty line:
//!   none).
//! - `dets`: one line per shot, `shot` then ` D5` per detector and ` L0` per observable.
//!
//! [`ShotReader`] reads any of them from a stream one shot at a time and [`ShotWriter`]
//! writes them, as Stim writes them byte for byte; [`Shots`] holds a whole table. Readers
//! refuse what does not fit the format or the shot's size with the line (text) or the shot
//! (binary) and a likely cause; what they accept past Stim's own readers is noted on
//! [`ShotReader`].
#![forbid(unsafe_code)]

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::{Error, Result};

mod read;
mod write;

pub use read::ShotReader;
pub use write::ShotWriter;

/// Stim's result formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShotFormat {
    /// Bit-packed, `ceil(bits/8)` bytes per shot, LSB first.
    B8,
    /// Text, one line of `0`/`1` characters per shot.
    Zero1,
    /// Bit-packed runs of 0s, one byte per run.
    R8,
    /// Partially transposed: groups of 64 shots, 8 bytes per bit.
    Ptb64,
    /// Text, the indices of the 1 bits, comma-separated, one line per shot.
    Hits,
    /// Text, `shot D1 D5 L0`, one line per shot.
    Dets,
}

impl ShotFormat {
    /// Every format, in the order Stim's docs list them.
    pub const ALL: [ShotFormat; 6] = [
        ShotFormat::Zero1,
        ShotFormat::B8,
        ShotFormat::R8,
        ShotFormat::Ptb64,
        ShotFormat::Hits,
        ShotFormat::Dets,
    ];

    /// Stim's name for the format (`01`, `b8`, `r8`, `ptb64`, `hits`, `dets`).
    pub fn name(self) -> &'static str {
        match self {
            ShotFormat::Zero1 => "01",
            ShotFormat::B8 => "b8",
            ShotFormat::R8 => "r8",
            ShotFormat::Ptb64 => "ptb64",
            ShotFormat::Hits => "hits",
            ShotFormat::Dets => "dets",
        }
    }

    /// One line on what the format holds, for `--help`.
    pub fn description(self) -> &'static str {
        match self {
            ShotFormat::Zero1 => "text, a line of 0/1 characters per shot",
            ShotFormat::B8 => "bit-packed, ceil(bits/8) bytes per shot, LSB first",
            ShotFormat::R8 => "binary, one byte per run of 0s before each 1 (sparse)",
            ShotFormat::Ptb64 => {
                "binary, 64 shots at a time, 8 bytes per bit (shots: a multiple of 64)"
            }
            ShotFormat::Hits => "text, the indices of the 1s, comma-separated, a line per shot",
            ShotFormat::Dets => "text, `shot D1 D5 L0`, a line per shot",
        }
    }

    /// The format an extension names (`.01`, `.b8`, `.r8`, `.ptb64`, `.hits`, `.dets`).
    pub fn from_extension(path: &Path) -> Option<ShotFormat> {
        path.extension()?.to_str()?.parse().ok()
    }
}

impl fmt::Display for ShotFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ShotFormat {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<ShotFormat, String> {
        ShotFormat::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                format!("unknown shot format {s:?}: expected one of 01, b8, r8, ptb64, hits, dets")
            })
    }
}

/// What a shot's bits are: `detectors` detection events, then `observables` observable
/// flips (Stim's `append_observables`). `dets` names them `D0..` and `L0..`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShotLayout {
    pub detectors: usize,
    pub observables: usize,
}

impl ShotLayout {
    /// Shots of `n` detection events.
    pub fn detectors(n: usize) -> ShotLayout {
        ShotLayout {
            detectors: n,
            observables: 0,
        }
    }

    /// Shots of `n` observable flips (an observables file, predictions).
    pub fn observables(n: usize) -> ShotLayout {
        ShotLayout {
            detectors: 0,
            observables: n,
        }
    }

    /// Bits per shot.
    pub fn bits(&self) -> usize {
        self.detectors + self.observables
    }
}

/// Bit-packed shots of `bits` bits each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shots {
    bits: usize,
    row_bytes: usize,
    data: Vec<u8>,
    /// Shots held (counted apart: shots of 0 bits hold no bytes).
    count: usize,
}

impl Shots {
    /// No shots of `bits` bits.
    pub fn new(bits: usize) -> Shots {
        Shots {
            bits,
            row_bytes: bits.div_ceil(8),
            data: Vec::new(),
            count: 0,
        }
    }

    /// Bits per shot.
    pub fn bits(&self) -> usize {
        self.bits
    }

    /// Bytes per packed row: `ceil(bits / 8)`.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The packed row of shot `i`.
    pub fn row(&self, i: usize) -> &[u8] {
        &self.data[i * self.row_bytes..(i + 1) * self.row_bytes]
    }

    /// Bit `k` of shot `i`.
    pub fn get(&self, i: usize, k: usize) -> bool {
        assert!(k < self.bits, "bit {k} of a {}-bit shot", self.bits);
        self.row(i)[k / 8] >> (k % 8) & 1 == 1
    }

    /// Appends a packed row; padding bits are cleared.
    pub fn push_row(&mut self, row: &[u8]) {
        assert_eq!(row.len(), self.row_bytes, "row of the wrong size");
        self.data.extend_from_slice(row);
        self.count += 1;
        if self.bits % 8 != 0 {
            let last = self.data.len() - 1;
            self.data[last] &= (1u8 << (self.bits % 8)) - 1;
        }
    }

    /// Appends a shot given bit by bit.
    pub fn push_bits(&mut self, bits: &[bool]) {
        assert_eq!(bits.len(), self.bits, "shot of the wrong size");
        let start = self.data.len();
        self.data.resize(start + self.row_bytes, 0);
        self.count += 1;
        for (k, &b) in bits.iter().enumerate() {
            self.data[start + k / 8] |= (b as u8) << (k % 8);
        }
    }

    /// Keeps the first `n` shots.
    pub fn truncate(&mut self, n: usize) {
        self.data.truncate(n * self.row_bytes);
        self.count = self.count.min(n);
    }

    /// The `b8` bytes.
    pub fn as_b8(&self) -> &[u8] {
        &self.data
    }

    /// Reads `b8` bytes of `bits`-bit shots. Sizes that do not divide, and set padding bits
    /// (the sign of a file made for a model with more detectors), are errors. (Shots of 0
    /// bits hold no bytes: an empty file reads as none.)
    pub fn from_b8(bytes: Vec<u8>, bits: usize) -> std::result::Result<Shots, String> {
        let row_bytes = bits.div_ceil(8);
        let s = Shots {
            bits,
            row_bytes,
            count: bytes.len().checked_div(row_bytes).unwrap_or(0),
            data: bytes,
        };
        if s.row_bytes == 0 {
            if s.data.is_empty() {
                return Ok(s);
            }
            return Err("b8 shots of 0 bits hold no bytes; cannot count the shots".into());
        }
        if s.data.len() % s.row_bytes != 0 {
            return Err(format!(
                "{} bytes is not a whole number of {}-byte shots ({} bits per shot): \
                 is this file from another model?",
                s.data.len(),
                s.row_bytes,
                bits
            ));
        }
        if bits % 8 != 0 {
            let pad = !((1u8 << (bits % 8)) - 1);
            if let Some(i) = (0..s.len()).find(|&i| s.row(i)[s.row_bytes - 1] & pad != 0) {
                return Err(format!(
                    "shot {i} sets a bit past the {bits} bits per shot: \
                     is this file from a model with more detectors?"
                ));
            }
        }
        Ok(s)
    }

    /// Reads `01` text of `bits`-bit shots; errors name the (1-based) line.
    pub fn from_01(text: &str, bits: usize) -> std::result::Result<Shots, String> {
        let mut s = Shots::new(bits);
        let lines = text.strip_suffix('\n').unwrap_or(text);
        if text.is_empty() {
            return Ok(s);
        }
        s.data
            .reserve(lines.len() / (bits + 1) * s.row_bytes + s.row_bytes);
        for (i, line) in lines.split('\n').enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.len() != bits {
                return Err(format!(
                    "line {}: {} characters, expected {bits} (one 0/1 per bit)",
                    i + 1,
                    line.len()
                ));
            }
            let start = s.data.len();
            s.data.resize(start + s.row_bytes, 0);
            s.count += 1;
            for (k, c) in line.bytes().enumerate() {
                match c {
                    b'0' => {}
                    b'1' => s.data[start + k / 8] |= 1 << (k % 8),
                    _ => {
                        return Err(format!(
                            "line {}: character {} is {:?}, expected 0 or 1",
                            i + 1,
                            k + 1,
                            c as char
                        ))
                    }
                }
            }
        }
        Ok(s)
    }

    /// The `01` text.
    pub fn to_01(&self) -> String {
        let mut out = String::with_capacity(self.len() * (self.bits + 1));
        for i in 0..self.len() {
            let row = self.row(i);
            for k in 0..self.bits {
                out.push(if row[k / 8] >> (k % 8) & 1 == 1 {
                    '1'
                } else {
                    '0'
                });
            }
            out.push('\n');
        }
        out
    }

    /// Reads a shot file of `bits`-bit shots (detection events, for `dets`); `format =
    /// None` picks it from the extension, else `01`.
    pub fn read(path: &Path, bits: usize, format: Option<ShotFormat>) -> Result<Shots> {
        Shots::read_layout(path, ShotLayout::detectors(bits), format)
    }

    /// Reads a shot file of `layout` shots; `format = None` picks it from the extension,
    /// else `01`.
    pub fn read_layout(
        path: &Path,
        layout: ShotLayout,
        format: Option<ShotFormat>,
    ) -> Result<Shots> {
        let format = format
            .or_else(|| ShotFormat::from_extension(path))
            .unwrap_or(ShotFormat::Zero1);
        let file = std::fs::File::open(path).map_err(|e| Error::Io {
            what: format!("cannot read shots {}", path.display()),
            source: e,
        })?;
        let mut r = ShotReader::with_layout(std::io::BufReader::new(file), layout, format);
        let mut shots = Shots::new(layout.bits());
        let mut row = vec![0u8; shots.row_bytes];
        loop {
            match r.next_into(&mut row) {
                Ok(true) => shots.push_row(&row),
                Ok(false) => return Ok(shots),
                Err(detail) => {
                    return Err(Error::Shots {
                        path: PathBuf::from(path),
                        detail,
                    })
                }
            }
        }
    }

    /// Writes the shots in `format` (detection events, for `dets`).
    pub fn write(&self, path: &Path, format: ShotFormat) -> Result<()> {
        self.write_layout(path, ShotLayout::detectors(self.bits), format)
    }

    /// Writes the shots, `layout` shots (its bits are this table's), in `format`.
    pub fn write_layout(&self, path: &Path, layout: ShotLayout, format: ShotFormat) -> Result<()> {
        assert_eq!(layout.bits(), self.bits, "a layout of this table's bits");
        let io = |e| Error::Io {
            what: format!("cannot write shots {}", path.display()),
            source: e,
        };
        let file = std::fs::File::create(path).map_err(io)?;
        let mut w = ShotWriter::with_layout(std::io::BufWriter::new(file), layout, format);
        (0..self.len())
            .try_for_each(|i| w.write(self.row(i)))
            .and_then(|()| w.finish().map(drop))
            .map_err(io)
    }
}

#[cfg(test)]
mod tests;

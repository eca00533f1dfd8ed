//! Shot tables in Stim's `b8` and `01` formats.
//!
//! In memory a [`Shots`] is always bit-packed like `b8` (and like the wire payload,
//! docs/protocol.md): each shot is a row of `ceil(bits / 8)` bytes, bit `k` of the shot in
//! byte `k / 8`, bit `k % 8` (LSB first); padding bits are zero.
//!
//! - `b8`: the rows back to back, nothing else.
//! - `01`: one line per shot, one `0`/`1` character per bit, `\n` after each line.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// Stim shot file formats qfwd reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShotFormat {
    /// Bit-packed, `ceil(bits/8)` bytes per shot, LSB first.
    B8,
    /// Text, one line of `0`/`1` characters per shot.
    Zero1,
}

impl ShotFormat {
    /// `b8` for a `.b8` extension, `01` for `.01`, otherwise `None`.
    pub fn from_extension(path: &Path) -> Option<ShotFormat> {
        match path.extension()?.to_str()? {
            "b8" => Some(ShotFormat::B8),
            "01" => Some(ShotFormat::Zero1),
            _ => None,
        }
    }
}

/// Bit-packed shots of `bits` bits each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shots {
    bits: usize,
    row_bytes: usize,
    data: Vec<u8>,
}

impl Shots {
    /// No shots of `bits` bits.
    pub fn new(bits: usize) -> Shots {
        Shots {
            bits,
            row_bytes: bits.div_ceil(8),
            data: Vec::new(),
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
        self.data.len().checked_div(self.row_bytes).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
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
        for (k, &b) in bits.iter().enumerate() {
            self.data[start + k / 8] |= (b as u8) << (k % 8);
        }
    }

    /// Keeps the first `n` shots.
    pub fn truncate(&mut self, n: usize) {
        self.data.truncate(n * self.row_bytes);
    }

    /// The `b8` bytes.
    pub fn as_b8(&self) -> &[u8] {
        &self.data
    }

    /// Reads `b8` bytes of `bits`-bit shots. Sizes that do not divide, and set padding bits
    /// (the sign of a file made for a model with more detectors), are errors.
    pub fn from_b8(bytes: Vec<u8>, bits: usize) -> std::result::Result<Shots, String> {
        let s = Shots {
            bits,
            row_bytes: bits.div_ceil(8),
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

    /// Reads a shot file; `format = None` picks it from the extension (`.b8`, else `01`).
    pub fn read(path: &Path, bits: usize, format: Option<ShotFormat>) -> Result<Shots> {
        let format = format
            .or_else(|| ShotFormat::from_extension(path))
            .unwrap_or(ShotFormat::Zero1);
        let bytes = std::fs::read(path).map_err(|e| Error::Io {
            what: format!("cannot read shots {}", path.display()),
            source: e,
        })?;
        let shots = match format {
            ShotFormat::B8 => Shots::from_b8(bytes, bits),
            ShotFormat::Zero1 => match String::from_utf8(bytes) {
                Ok(text) => Shots::from_01(&text, bits),
                Err(_) => Err("not 01 text (not UTF-8); is it a b8 file?".to_string()),
            },
        };
        shots.map_err(|detail| Error::Shots {
            path: PathBuf::from(path),
            detail,
        })
    }

    /// Writes the shots in `format`.
    pub fn write(&self, path: &Path, format: ShotFormat) -> Result<()> {
        let r = match format {
            ShotFormat::B8 => std::fs::write(path, &self.data),
            ShotFormat::Zero1 => std::fs::write(path, self.to_01()),
        };
        r.map_err(|e| Error::Io {
            what: format!("cannot write shots {}", path.display()),
            source: e,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b8_and_01_agree_on_bit_order() {
        let s = Shots::from_01("1000000001\n0100000000\n", 10).unwrap();
        assert_eq!(s.as_b8(), &[0x01, 0x02, 0x02, 0x00]);
        assert!(s.get(0, 0) && s.get(0, 9) && s.get(1, 1) && !s.get(1, 9));
        assert_eq!(Shots::from_b8(s.as_b8().to_vec(), 10).unwrap(), s);
        assert_eq!(s.to_01(), "1000000001\n0100000000\n");
    }

    #[test]
    fn size_mismatches_are_errors() {
        assert!(Shots::from_b8(vec![0; 5], 10)
            .unwrap_err()
            .contains("whole number"));
        assert!(Shots::from_b8(vec![0, 0x04], 10)
            .unwrap_err()
            .contains("more detectors"));
        assert!(Shots::from_01("101\n10\n", 3)
            .unwrap_err()
            .starts_with("line 2"));
        assert!(Shots::from_01("1x1\n", 3).unwrap_err().contains("'x'"));
        assert_eq!(Shots::from_01("", 3).unwrap().len(), 0);
        assert_eq!(Shots::from_01("101\r\n", 3).unwrap().len(), 1);
    }
}

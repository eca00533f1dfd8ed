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

/// Reads shots one at a time from a stream (a file, a pipe, stdin) in `b8` or `01`, so a
/// pipeline never holds more than one shot: what `qfwd decode` reads. Its answers (shots
/// and errors) are those of [`Shots::from_b8`] and [`Shots::from_01`] on the same bytes;
/// a `01` line is read at most `bits + 2` bytes at a time, so a line with no end cannot
/// make it allocate more.
#[derive(Debug)]
pub struct ShotReader<R> {
    r: R,
    format: ShotFormat,
    bits: usize,
    row_bytes: usize,
    /// Shots read so far.
    shots: usize,
    line: Vec<u8>,
    done: bool,
}

impl<R: std::io::BufRead> ShotReader<R> {
    pub fn new(r: R, bits: usize, format: ShotFormat) -> ShotReader<R> {
        ShotReader {
            r,
            format,
            bits,
            row_bytes: bits.div_ceil(8),
            shots: 0,
            line: Vec::new(),
            done: false,
        }
    }

    /// Shots read so far.
    pub fn shots(&self) -> usize {
        self.shots
    }

    /// Reads the next shot into `row` (`ceil(bits / 8)` bytes, padding bits cleared):
    /// `Ok(false)` at the end of the stream. A shot that does not fit the format is an
    /// error naming it (1-based for `01` lines, 0-based shot index for `b8`, as
    /// [`Shots`]'s readers say).
    pub fn next_into(&mut self, row: &mut [u8]) -> std::result::Result<bool, String> {
        assert_eq!(row.len(), self.row_bytes, "row of the wrong size");
        if self.done {
            return Ok(false);
        }
        let more = match self.format {
            ShotFormat::B8 => self.next_b8(row),
            ShotFormat::Zero1 => self.next_01(row),
        };
        if !matches!(more, Ok(true)) {
            self.done = true;
        }
        more
    }

    fn next_b8(&mut self, row: &mut [u8]) -> std::result::Result<bool, String> {
        let io = |e: std::io::Error| format!("read error after {} shots: {e}", self.shots);
        if self.row_bytes == 0 {
            let empty = self.r.fill_buf().map_err(io)?.is_empty();
            return if empty {
                Ok(false)
            } else {
                Err("b8 shots of 0 bits hold no bytes; cannot count the shots".into())
            };
        }
        let mut got = 0;
        while got < row.len() {
            let n = match self.r.read(&mut row[got..]) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io(e)),
            };
            if n == 0 {
                break;
            }
            got += n;
        }
        if got == 0 {
            return Ok(false);
        }
        if got < row.len() {
            return Err(format!(
                "{} bytes is not a whole number of {}-byte shots ({} bits per shot): is this \
                 file from another model?",
                self.shots * self.row_bytes + got,
                self.row_bytes,
                self.bits
            ));
        }
        if self.bits % 8 != 0 && row[self.row_bytes - 1] & !((1u8 << (self.bits % 8)) - 1) != 0 {
            return Err(format!(
                "shot {} sets a bit past the {} bits per shot: is this file from a model with \
                 more detectors?",
                self.shots, self.bits
            ));
        }
        self.shots += 1;
        Ok(true)
    }

    fn next_01(&mut self, row: &mut [u8]) -> std::result::Result<bool, String> {
        use std::io::{BufRead, Read};
        let lineno = self.shots + 1;
        self.line.clear();
        // At most the bits, `\r` and `\n`: a longer line is an error without reading on.
        let limit = self.bits as u64 + 2;
        (&mut self.r)
            .take(limit)
            .read_until(b'\n', &mut self.line)
            .map_err(|e| format!("line {lineno}: read error: {e}"))?;
        if self.line.is_empty() {
            return Ok(false);
        }
        let ended = self.line.last() == Some(&b'\n');
        let mut text = &self.line[..];
        text = text.strip_suffix(b"\n").unwrap_or(text);
        text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.len() != self.bits {
            let shown = if !ended && self.line.len() as u64 == limit {
                format!("at least {limit}")
            } else {
                text.len().to_string()
            };
            return Err(format!(
                "line {lineno}: {shown} characters, expected {} (one 0/1 per bit)",
                self.bits
            ));
        }
        row.fill(0);
        for (k, &c) in text.iter().enumerate() {
            match c {
                b'0' => {}
                b'1' => row[k / 8] |= 1 << (k % 8),
                _ => {
                    return Err(format!(
                        "line {lineno}: character {} is {:?}, expected 0 or 1",
                        k + 1,
                        c as char
                    ))
                }
            }
        }
        self.shots += 1;
        Ok(true)
    }
}

/// Writes shots one at a time in `b8` or `01` (what `qfwd decode` writes predictions with).
#[derive(Debug)]
pub struct ShotWriter<W> {
    w: W,
    format: ShotFormat,
    bits: usize,
    line: Vec<u8>,
}

impl<W: std::io::Write> ShotWriter<W> {
    pub fn new(w: W, bits: usize, format: ShotFormat) -> ShotWriter<W> {
        ShotWriter {
            w,
            format,
            bits,
            line: Vec::with_capacity(bits + 1),
        }
    }

    /// Writes one shot, `row` bit-packed (`ceil(bits / 8)` bytes; padding bits are written
    /// as 0 in `b8`).
    pub fn write(&mut self, row: &[u8]) -> std::io::Result<()> {
        match self.format {
            ShotFormat::B8 => {
                let nb = self.bits.div_ceil(8);
                if self.bits % 8 == 0 {
                    return self.w.write_all(&row[..nb]);
                }
                self.w.write_all(&row[..nb - 1])?;
                self.w
                    .write_all(&[row[nb - 1] & ((1u8 << (self.bits % 8)) - 1)])
            }
            ShotFormat::Zero1 => {
                self.line.clear();
                self.line
                    .extend((0..self.bits).map(|k| b'0' + (row[k / 8] >> (k % 8) & 1)));
                self.line.push(b'\n');
                self.w.write_all(&self.line)
            }
        }
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.w.flush()?;
        Ok(self.w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shot and every error of the streaming reader, as the whole-file readers give.
    fn stream(bytes: &[u8], bits: usize, format: ShotFormat) -> std::result::Result<Shots, String> {
        let mut r = ShotReader::new(bytes, bits, format);
        let mut shots = Shots::new(bits);
        let mut row = vec![0u8; bits.div_ceil(8)];
        while r.next_into(&mut row)? {
            shots.push_row(&row);
        }
        Ok(shots)
    }

    #[test]
    fn the_stream_reader_agrees_with_the_whole_file_readers() {
        let cases: &[(&[u8], usize)] = &[
            (b"1000000001\n0100000000\n", 10),
            (b"101\r\n", 3),
            (b"101\r", 3),
            (b"10\r1\n", 3),
            (b"101\n10\n", 3),
            (b"1x1\n", 3),
            (b"", 3),
            (b"111", 3),
            (b"1111\n", 3),
            (b"11111111111111111111", 3),
            (b"\n", 0),
            (b"\n\n", 0),
            (&[0x01, 0x02, 0x02, 0x00], 10),
            (&[0, 0x04], 10),
            (&[0; 5], 10),
            (&[0xff; 4], 16),
        ];
        for &(bytes, bits) in cases {
            let whole_b8 = Shots::from_b8(bytes.to_vec(), bits);
            assert_eq!(
                stream(bytes, bits, ShotFormat::B8),
                whole_b8,
                "{bytes:?} b8"
            );
            if let Ok(text) = std::str::from_utf8(bytes) {
                let whole = Shots::from_01(text, bits);
                let got = stream(bytes, bits, ShotFormat::Zero1);
                match (&got, &whole) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b, "{text:?}"),
                    (Err(a), Err(b)) => {
                        let line = |e: &str| e.split(':').next().unwrap_or("").to_string();
                        assert_eq!(line(a), line(b), "{text:?}: {a} / {b}");
                    }
                    _ => panic!("{text:?}: stream {got:?}, whole {whole:?}"),
                }
            }
        }
    }

    /// Shots of 0 bits (a model without observables predicts them) are counted, though they
    /// hold no bytes: found by the `shots` fuzz target (`01` text "\n" of 0-bit shots read
    /// as 1 shot by the stream and 0 by the whole-file reader's count).
    #[test]
    fn zero_bit_shots_are_counted() {
        let s = Shots::from_01("\n\n\n", 0).unwrap();
        assert_eq!((s.len(), s.row_bytes(), s.as_b8().len()), (3, 0, 0));
        assert_eq!(stream(b"\n", 0, ShotFormat::Zero1).unwrap().len(), 1);
        assert_eq!(s.to_01(), "\n\n\n");
        let mut t = Shots::new(0);
        t.push_row(&[]);
        t.push_bits(&[]);
        assert_eq!(t.len(), 2);
        t.truncate(1);
        assert_eq!(t.len(), 1);
        assert!(Shots::from_b8(Vec::new(), 0).unwrap().is_empty());
    }

    #[test]
    fn the_writer_writes_what_the_readers_read() {
        let s = Shots::from_01("1000000001\n0100000000\n", 10).unwrap();
        for format in [ShotFormat::B8, ShotFormat::Zero1] {
            let mut w = ShotWriter::new(Vec::new(), 10, format);
            for i in 0..s.len() {
                w.write(s.row(i)).unwrap();
            }
            let bytes = w.finish().unwrap();
            assert_eq!(stream(&bytes, 10, format).unwrap(), s);
        }
    }

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

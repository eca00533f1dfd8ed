//! An output of `qfwd decode` that appears whole or not at all.
//!
//! A file is written to a hidden temporary file beside it (`.NAME.XXXXXX.qfwd-tmp`, with
//! the permissions an ordinary create gives, or the old file's) and renamed over it by
//! [`Output::commit`]: dropped before that (an error), it leaves the old file, or none; a
//! process killed midway leaves at most the hidden temporary file, never a partial NAME.
//! A symbolic link is followed (the file it names is replaced, the link stays). stdout, a
//! device or a FIFO cannot be taken back: they are written as they go, and the caller
//! checks its input first ([`Output::is_atomic`]).
#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::io::{is_stdio, shown};
use crate::decode;
use crate::{Error, Result};

/// An output that appears whole or not at all (see the module docs).
pub struct Output {
    sink: Sink,
    /// As messages name it.
    shown: String,
}

enum Sink {
    Stdout(BufWriter<std::io::Stdout>),
    /// A device or a FIFO: written as it goes.
    Direct(BufWriter<File>),
    /// A regular file: a temporary file beside it, renamed over it by [`Output::commit`].
    Atomic(BufWriter<tempfile::NamedTempFile>, PathBuf),
}

impl Output {
    /// An output to `path` (`-`: stdout); `what` names it in messages (`predictions`).
    pub fn create(path: &Path, what: &str) -> Result<Output> {
        let shown = format!("{what} {}", shown(path));
        let cannot = |e: std::io::Error| -> Error {
            decode::Error::Io {
                what: format!("cannot write {shown}"),
                source: e,
            }
            .into()
        };
        if is_stdio(path) {
            let out = BufWriter::with_capacity(1 << 16, std::io::stdout());
            return Ok(Output {
                sink: Sink::Stdout(out),
                shown,
            });
        }
        // Through a symbolic link to the file it names: the rename replaces that file.
        let dest = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let old = std::fs::metadata(&dest).ok();
        if old.as_ref().is_some_and(|m| m.is_dir()) {
            return Err(cannot(std::io::Error::other("it is a directory")));
        }
        if old.as_ref().is_some_and(|m| !m.is_file()) {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&dest)
                .map_err(cannot)?;
            return Ok(Output {
                sink: Sink::Direct(BufWriter::with_capacity(1 << 16, f)),
                shown,
            });
        }
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            let why = format!("no directory {}", dir.display());
            return Err(cannot(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                why,
            )));
        }
        let name = dest
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let prefix = format!(".{name}.");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".qfwd-tmp");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // What File::create gives (0666 less the umask).
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let tmp = builder.tempfile_in(dir).map_err(cannot)?;
        if let Some(m) = old {
            tmp.as_file()
                .set_permissions(m.permissions())
                .map_err(cannot)?;
        }
        Ok(Output {
            sink: Sink::Atomic(BufWriter::with_capacity(1 << 16, tmp), dest),
            shown,
        })
    }

    /// Whether what is written can be taken back (a file renamed into place at the end).
    pub fn is_atomic(&self) -> bool {
        matches!(self.sink, Sink::Atomic(..))
    }

    /// Writes the rest and puts the output in place. (Dropped without this, a file output
    /// leaves nothing.)
    pub fn commit(self) -> Result<()> {
        let cannot = |e: std::io::Error| -> Error {
            decode::Error::Io {
                what: format!("cannot write {}", self.shown),
                source: e,
            }
            .into()
        };
        match self.sink {
            Sink::Stdout(mut w) => quiet_on_closed_pipe(w.flush()).map_err(cannot),
            Sink::Direct(mut w) => w.flush().map_err(cannot),
            Sink::Atomic(w, dest) => {
                let tmp = w.into_inner().map_err(|e| cannot(e.into_error()))?;
                tmp.persist(&dest).map(drop).map_err(|e| cannot(e.error))
            }
        }
    }

    /// A write error as a qfwd error naming the output.
    pub fn error(&self, e: std::io::Error) -> Error {
        decode::Error::Io {
            what: format!("cannot write {}", self.shown),
            source: e,
        }
        .into()
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.sink {
            Sink::Stdout(w) => w.write(buf),
            Sink::Direct(w) => w.write(buf),
            Sink::Atomic(w, _) => w.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.sink {
            Sink::Stdout(w) => w.flush(),
            Sink::Direct(w) => w.flush(),
            Sink::Atomic(w, _) => w.flush(),
        }
    }
}

/// A reader of stdout that went away (a closed pipe) ends the output quietly.
fn quiet_on_closed_pipe(r: std::io::Result<()>) -> std::io::Result<()> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("qfwd-output-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(d: &Path) -> Vec<String> {
        let mut n: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    }

    #[test]
    fn a_file_appears_only_when_committed() {
        let d = dir("commit");
        let path = d.join("p.01");
        let mut out = Output::create(&path, "predictions").unwrap();
        assert!(out.is_atomic());
        out.write_all(b"0\n1\n").unwrap();
        out.flush().unwrap();
        assert!(!path.exists(), "not before the commit");
        assert_eq!(names(&d).len(), 1, "the hidden temporary file");
        assert!(names(&d)[0].starts_with(".p.01.") && names(&d)[0].ends_with(".qfwd-tmp"));
        drop(out);
        assert!(names(&d).is_empty(), "dropped: nothing left");

        let mut out = Output::create(&path, "predictions").unwrap();
        out.write_all(b"0\n1\n").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"0\n1\n");
        assert_eq!(names(&d), ["p.01"]);
    }

    #[test]
    fn an_old_file_keeps_its_permissions_and_its_link() {
        let d = dir("old");
        let target = d.join("t.01");
        std::fs::write(&target, "old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o604)).unwrap();
        let link = d.join("l.01");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut out = Output::create(&link, "predictions").unwrap();
        out.write_all(b"new").unwrap();
        drop(out);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
        let mut out = Output::create(&link, "predictions").unwrap();
        out.write_all(b"new").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o604);
    }

    #[test]
    fn devices_and_directories() {
        let mut out = Output::create(Path::new("/dev/null"), "predictions").unwrap();
        assert!(!out.is_atomic());
        out.write_all(b"x").unwrap();
        out.commit().unwrap();
        let d = dir("dir");
        let e = Output::create(&d, "predictions").err().unwrap().to_string();
        assert!(
            e.contains("cannot write predictions") && e.contains("directory"),
            "{e}"
        );
        let e = Output::create(&d.join("missing/p.01"), "the count")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("cannot write the count") && e.contains("missing"),
            "{e}"
        );
        assert!(!Output::create(Path::new("-"), "x").unwrap().is_atomic());
    }
}

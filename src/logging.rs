//! Log output for the binaries. Library code reports through `tracing`; `qfwd` and
//! `qfwd-latency` install [`init`], which prints each event as one plain line on stderr:
//! the program's prefix, `warning: ` or `error: ` for those levels, the target for debug
//! and trace, then the message. `QFWD_LOG` filters the events (`tracing_subscriber`'s
//! `EnvFilter` syntax: `debug`, `warn`, `qfwd::serve=debug`) [default: `info`].
#![forbid(unsafe_code)]

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// The environment variable that sets what is logged.
pub const LOG_ENV: &str = "QFWD_LOG";

/// Installs the plain stderr logger with `prefix` (`"qfwd: "`, or `""`). A second call,
/// or one after another subscriber was set, changes nothing.
pub fn init(prefix: &'static str) {
    let filter = EnvFilter::try_from_env(LOG_ENV).unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .event_format(Plain { prefix })
        .try_init();
}

/// One event, one line: `prefix`, the level where it is not plain information, the message.
pub struct Plain {
    pub prefix: &'static str,
}

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        write!(writer, "{}", self.prefix)?;
        match *meta.level() {
            Level::ERROR => write!(writer, "error: ")?,
            Level::WARN => write!(writer, "warning: ")?,
            Level::INFO => {}
            _ => write!(writer, "{}: ", meta.target())?,
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn events_are_plain_lines_named_by_level() {
        let buf = Buffer::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(EnvFilter::new("debug"))
            .with_writer(move || out.clone())
            .event_format(Plain { prefix: "qfwd: " })
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("serving parity on udp");
            tracing::warn!(core = 3, "cannot pin");
            tracing::error!("kernel did not stop");
            tracing::debug!(target: "qfwd::serve", "interval");
            tracing::trace!("not shown at debug");
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            "qfwd: serving parity on udp\n\
             qfwd: warning: cannot pin core=3\n\
             qfwd: error: kernel did not stop\n\
             qfwd: qfwd::serve: interval\n"
        );
    }
}

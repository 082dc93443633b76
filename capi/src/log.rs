//! The log callback: forwards the library's `log` records to C.

use std::ffi::{c_char, c_void};
use std::sync::{OnceLock, RwLock};

use super::boundary::{guard, Failure};
use super::status::dashrank_status;

/// Severity of a log message.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum dashrank_log_level {
    /// Errors.
    Error = 1,
    /// Warnings.
    Warn = 2,
    /// Progress (e.g. "loaded waco model …").
    Info = 3,
    /// Details.
    Debug = 4,
    /// Very verbose details.
    Trace = 5,
}

/// A log callback: `message` is NUL-terminated, `len` excludes the terminator, and both are
/// valid only during the call. Called on whichever thread logs, possibly on several threads
/// at once: it must be thread-safe, must not unwind, and must not call
/// `dashrank_set_log_callback`.
pub type dashrank_log_callback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        level: dashrank_log_level,
        message: *const c_char,
        len: usize,
    ),
>;

#[derive(Clone, Copy)]
struct Sink {
    callback: unsafe extern "C" fn(*mut c_void, dashrank_log_level, *const c_char, usize),
    user_data: usize,
}

static SINK: RwLock<Option<Sink>> = RwLock::new(None);
static INSTALLED: OnceLock<bool> = OnceLock::new();

struct Forwarder;

impl log::Log for Forwarder {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        SINK.read().map(|s| s.is_some()).unwrap_or(false)
    }

    fn log(&self, record: &log::Record<'_>) {
        let Some(sink) = SINK.read().ok().and_then(|s| *s) else {
            return;
        };
        let level = match record.level() {
            log::Level::Error => dashrank_log_level::Error,
            log::Level::Warn => dashrank_log_level::Warn,
            log::Level::Info => dashrank_log_level::Info,
            log::Level::Debug => dashrank_log_level::Debug,
            log::Level::Trace => dashrank_log_level::Trace,
        };
        let mut text = format!("{}: {}", record.target(), record.args()).into_bytes();
        text.retain(|&b| b != 0);
        let len = text.len();
        text.push(0);
        // SAFETY: the callback contract is documented on `dashrank_log_callback`.
        unsafe {
            (sink.callback)(
                sink.user_data as *mut c_void,
                level,
                text.as_ptr().cast(),
                len,
            )
        };
    }

    fn flush(&self) {}
}

static FORWARDER: Forwarder = Forwarder;

/// Sends the library's log messages up to `max_level` (a `dashrank_log_level`; 0 turns
/// logging off) to `callback` with `user_data`. A NULL `callback` turns logging off.
///
/// Logging is process-wide: the last call wins. The library installs itself as the
/// process's Rust `log` logger on first use; if a Rust host already installed another one,
/// this returns `DASHRANK_STATUS_LOGGER_UNAVAILABLE`. Records from the library's
/// dependencies (e.g. the ONNX backend) are forwarded too, prefixed with their target.
#[no_mangle]
pub unsafe extern "C" fn dashrank_set_log_callback(
    callback: dashrank_log_callback,
    user_data: *mut c_void,
    max_level: u32,
) -> dashrank_status {
    guard(|| {
        let filter = match max_level {
            0 => log::LevelFilter::Off,
            1 => log::LevelFilter::Error,
            2 => log::LevelFilter::Warn,
            3 => log::LevelFilter::Info,
            4 => log::LevelFilter::Debug,
            5 => log::LevelFilter::Trace,
            other => {
                return Err(Failure::new(
                    dashrank_status::InvalidArgument,
                    format!("max_level {other} is not a dashrank_log_level (0..=5)"),
                ))
            }
        };
        let installed = *INSTALLED.get_or_init(|| log::set_logger(&FORWARDER).is_ok());
        if !installed {
            return Err(Failure::new(
                dashrank_status::LoggerUnavailable,
                "another Rust logger is already installed in this process",
            ));
        }
        let sink = callback.map(|callback| Sink {
            callback,
            user_data: user_data as usize,
        });
        *SINK.write().unwrap_or_else(|p| p.into_inner()) = sink;
        log::set_max_level(if sink.is_some() {
            filter
        } else {
            log::LevelFilter::Off
        });
        Ok(())
    })
}

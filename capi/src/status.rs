//! Numbered statuses, their messages, and the per-thread detailed message of the last
//! failure.

use std::cell::RefCell;

use dashrank::{Error, ErrorKind};

/// The status every fallible `dashrank_*` function returns.
///
/// `DASHRANK_STATUS_OK` (0) is success. Errors are grouped in ranges of 100 per stage:
/// 1xx matrix input, 2xx model bundle, 3xx schedules, 4xx execution, 5xx ABI misuse,
/// 9xx internal. Numbers are stable: a code is never renumbered or reused; a retired code
/// stays below as a "reserved" comment. Unknown codes may appear in later minor versions
/// of the library; treat any code you do not know by its range.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum dashrank_status {
    /// Success.
    Ok = 0,

    // === 1xx: matrix input ===
    /// The sparsity pattern is structurally invalid or a matrix file is malformed.
    Pattern = 100,
    /// A file could not be read.
    Io = 101,

    // === 2xx: model bundle ===
    /// A bundle file is unreadable, malformed, or inconsistent with the format.
    Bundle = 200,
    /// The bundle's format version is outside the window this library reads.
    UnsupportedVersion = 201,
    /// The model has no head of that name.
    UnknownHead = 202,
    /// Loading a dense graph on the native engine would pass its load budget (a hostile or
    /// oversized graph; see `BundleLimits` in the Rust API).
    LoadBudget = 203,

    // === 3xx: schedules ===
    /// A candidate schedule failed to parse or validate (per-candidate status).
    Schedule = 300,
    /// The target has no schedule space for that kernel (SPADE or SparseTIR with SpMV).
    UnsupportedKernel = 301,
    /// A schedule's repacked layout of the matrix exceeds its size limit (TACO: dense levels
    /// under compressed ones store zeros).
    LayoutTooLarge = 302,

    // === 4xx: execution ===
    /// The dense-graph executor failed.
    Executor = 400,
    /// The requested backend is not compiled in or could not be initialised.
    BackendUnavailable = 401,
    /// The featurizer failed at a node.
    Featurizer = 402,

    // === 5xx: ABI misuse ===
    /// A required pointer argument is NULL.
    NullArgument = 500,
    /// An output buffer is too small; the size needed was reported.
    InsufficientSize = 501,
    /// An argument value is invalid (the detailed message says which).
    InvalidArgument = 502,
    /// A string argument is not valid UTF-8.
    InvalidUtf8 = 503,
    /// An index is out of range (head, candidate).
    IndexOutOfRange = 504,
    /// A `dashrank_load_options` was not initialised by `dashrank_load_options_init` of
    /// this ABI version.
    AbiMismatch = 505,
    /// The log callback could not be installed (another logger owns the process).
    LoggerUnavailable = 506,

    // === 9xx: internal ===
    /// A panic was caught at the ABI boundary; the library state is still consistent
    /// (handles are immutable), but please report it.
    Panic = 900,
    /// An error of a kind this version of the C ABI has no status for; the detailed message
    /// says what went wrong.
    Internal = 901,
}

impl dashrank_status {
    /// Every status, in numeric order.
    pub fn all() -> &'static [dashrank_status] {
        &ALL_STATUSES
    }

    /// The status with this number, if it exists.
    pub fn from_code(code: u32) -> Option<Self> {
        ALL_STATUSES.iter().copied().find(|s| *s as u32 == code)
    }

    /// The fixed one-line description of the status.
    pub fn message(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Pattern => "invalid sparsity pattern or malformed matrix file",
            Self::Io => "i/o error",
            Self::Bundle => "invalid model bundle",
            Self::UnsupportedVersion => "unsupported bundle format version",
            Self::UnknownHead => "the model has no head of that name",
            Self::LoadBudget => "a dense graph would pass the native engine's load budget",
            Self::Schedule => "invalid schedule",
            Self::UnsupportedKernel => "the target has no schedule space for that kernel",
            Self::LayoutTooLarge => "the schedule's repacked layout is too large",
            Self::Executor => "dense-graph execution failed",
            Self::BackendUnavailable => "backend unavailable",
            Self::Featurizer => "featurizer failed",
            Self::NullArgument => "a required pointer argument is NULL",
            Self::InsufficientSize => "output buffer too small",
            Self::InvalidArgument => "invalid argument",
            Self::InvalidUtf8 => "string argument is not valid UTF-8",
            Self::IndexOutOfRange => "index out of range",
            Self::AbiMismatch => "options struct not initialised for this ABI version",
            Self::LoggerUnavailable => "another logger is already installed",
            Self::Panic => "internal panic caught at the ABI boundary",
            Self::Internal => "an error this ABI version has no status for",
        }
    }

    /// The status for a library error.
    pub fn from_error(error: &Error) -> Self {
        match error.kind() {
            ErrorKind::Pattern { .. } => Self::Pattern,
            ErrorKind::Io { .. } => Self::Io,
            ErrorKind::Bundle { .. } => Self::Bundle,
            ErrorKind::LoadBudget { .. } => Self::LoadBudget,
            ErrorKind::UnsupportedVersion { .. } => Self::UnsupportedVersion,
            ErrorKind::Featurize { .. } => Self::Featurizer,
            ErrorKind::Schedule { .. } => Self::Schedule,
            ErrorKind::Executor { .. } => Self::Executor,
            ErrorKind::BackendUnavailable { .. } => Self::BackendUnavailable,
            ErrorKind::InvalidArgument { .. } => Self::InvalidArgument,
            ErrorKind::UnknownHead { .. } => Self::UnknownHead,
            ErrorKind::UnsupportedKernel { .. } => Self::UnsupportedKernel,
            ErrorKind::LayoutTooLarge { .. } => Self::LayoutTooLarge,
            // A kind newer than this ABI's statuses: the message says what it is.
            _ => Self::Internal,
        }
    }
}

const ALL_STATUSES: [dashrank_status; 22] = [
    dashrank_status::Ok,
    dashrank_status::Pattern,
    dashrank_status::Io,
    dashrank_status::Bundle,
    dashrank_status::UnsupportedVersion,
    dashrank_status::UnknownHead,
    dashrank_status::LoadBudget,
    dashrank_status::Schedule,
    dashrank_status::UnsupportedKernel,
    dashrank_status::LayoutTooLarge,
    dashrank_status::Executor,
    dashrank_status::BackendUnavailable,
    dashrank_status::Featurizer,
    dashrank_status::NullArgument,
    dashrank_status::InsufficientSize,
    dashrank_status::InvalidArgument,
    dashrank_status::InvalidUtf8,
    dashrank_status::IndexOutOfRange,
    dashrank_status::AbiMismatch,
    dashrank_status::LoggerUnavailable,
    dashrank_status::Panic,
    dashrank_status::Internal,
];

thread_local! {
    static LAST_ERROR: RefCell<Option<(dashrank_status, String)>> = const { RefCell::new(None) };
}

/// Records the detailed message of a failure on this thread.
pub(crate) fn set_last_error(status: dashrank_status, message: String) {
    // `try_with` fails only during thread teardown; the status is still returned then.
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = Some((status, message)));
}

/// Forgets this thread's last failure (every export that can fail calls this first).
pub(crate) fn clear_last_error() {
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = None);
}

/// This thread's last failure, if any.
pub(crate) fn last_error() -> Option<(dashrank_status, String)> {
    LAST_ERROR.try_with(|e| e.borrow().clone()).ok().flatten()
}

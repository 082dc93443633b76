"""The exceptions of dashrank: one class per kind of the Rust library's ``ErrorKind``.

Every error dashrank raises is a :class:`Error`; its message is the Rust library's, word for
word, and the kind's fields are attributes (``PatternError.line``,
``ScheduleError.field``, ``UnknownHeadError.available``, ...). Classes for bad input also
derive from ``ValueError`` (and ``IoError`` from ``OSError``), so generic handlers work too::

    >>> import dashrank
    >>> try:
    ...     dashrank.Model("no/such/bundle")
    ... except dashrank.IoError as e:
    ...     print(type(e).__name__, isinstance(e, OSError))
    IoError True

A wrong Python type (a float array of indices, an unknown matrix object) is a ``TypeError``.
"""

from __future__ import annotations

from typing import Any, List, Optional

__all__ = [
    "Error",
    "PatternError",
    "BundleError",
    "UnsupportedVersionError",
    "FeaturizeError",
    "ScheduleError",
    "ExecutorError",
    "BackendUnavailableError",
    "UnknownHeadError",
    "UnsupportedKernelError",
    "LayoutTooLargeError",
    "InvalidArgumentError",
    "IoError",
]


class Error(Exception):
    """Base class of every dashrank error; ``str(e)`` is the Rust library's message."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        for name, value in fields.items():
            setattr(self, name, value)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class PatternError(Error, ValueError):
    """A sparsity pattern is structurally invalid, or a matrix file is malformed."""

    line: Optional[int]
    """1-based line of a text file, when known."""
    reason: str


class BundleError(Error):
    """A model bundle file is unreadable, malformed, or inconsistent."""

    key: str
    """The metadata key, tensor or node the problem was found at."""
    reason: str


class UnsupportedVersionError(Error):
    """The bundle's format version is outside the window this library reads."""

    found: int
    min: int
    max: int


class FeaturizeError(Error):
    """The featurizer failed at a node (bad weights, shape mismatch, memory budget)."""

    node: str
    reason: str


class ScheduleError(Error, ValueError):
    """A schedule line failed to parse or to validate against the head's schema."""

    index: Optional[int]
    field: Optional[str]
    value: Optional[str]
    reason: str


class ExecutorError(Error):
    """A dense graph failed to run."""

    graph: str
    reason: str


class BackendUnavailableError(Error):
    """The requested backend was not compiled in or could not start."""

    backend: str
    reason: str


class UnknownHeadError(Error, ValueError):
    """The model has no head of this name; ``available`` lists its heads."""

    head: str
    available: List[str]


class UnsupportedKernelError(Error, ValueError):
    """A target has no schedule space for this kernel (e.g. SPADE with SpMV)."""

    target: str
    kernel: str
    supported: List[str]


class LayoutTooLargeError(Error):
    """A schedule's repacked layout of the matrix would exceed its size limit."""

    positions: int
    limit: int
    reason: str


class InvalidArgumentError(Error, ValueError):
    """An argument's value is invalid (a negative ``k``, an unknown strategy, ...)."""

    reason: str


class IoError(Error, OSError):
    """A file could not be read; ``path`` names it."""

    path: Optional[str]
    reason: str


def invalid_argument(reason: str) -> InvalidArgumentError:
    """The error the Rust library raises for a bad argument, made on the Python side."""
    return InvalidArgumentError(f"invalid argument: {reason}", reason=reason)

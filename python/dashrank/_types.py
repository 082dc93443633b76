"""What dashrank's calls return: model facts, ranked candidates, tuning and evaluation reports.

Reports keep the Rust library's data as is: ``to_dict()`` gives the JSON object the CLI
prints (``dashrank tune --format json``, ``dashrank eval --json-out``); ``to_pandas()`` a
table of its rows when pandas is installed.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pandas

__all__ = [
    "Status",
    "Scores",
    "HeadInfo",
    "ManifestFile",
    "Provenance",
    "Engine",
    "ModelInfo",
    "Ranked",
    "Measurement",
    "Skipped",
    "TuneReport",
    "EvalReport",
]


class Status(enum.IntEnum):
    """A candidate's status for a matrix (the codes of :attr:`Scores.status`)."""

    VALID = 0
    """Ranked."""
    DUPLICATE = 1
    """Behaves like an earlier candidate for this matrix; not ranked."""
    INVALID_FOR_MATRIX = 2
    """The toolchain rejects it for this matrix (e.g. a split larger than the matrix)."""
    REJECTED = 3
    """The model's schema rejects its line; it scores NaN."""


class Scores(NamedTuple):
    """Every candidate's score and status, in candidate order (``scores, status = ...``)."""

    scores: npt.NDArray[np.float32]
    """The model's scores; NaN for a candidate that is not ranked (rejected by the schema;
    in a space also a duplicate or one invalid for the matrix), the default excepted."""
    status: npt.NDArray[np.int8]
    """:class:`Status` codes; only ``Status.VALID`` candidates are ranked."""


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as e:  # pragma: no cover - exercised in the fresh-venv test
        raise ImportError("to_pandas() needs pandas: pip install pandas") from e
    return pandas


@dataclass(frozen=True)
class HeadInfo:
    """One head of a model: the schedules of one (target, kernel) it ranks."""

    name: str
    """E.g. ``cpu-taco/spmm``."""
    kernel: str
    """``spmm``, ``sddmm`` or ``spmv``."""
    target: str
    """``cpu-taco``, ``spade`` or ``gpu-sparsetir``."""
    polarity: str
    """``lower_is_better`` or ``higher_is_better``: which scores are predicted faster."""
    score_meaning: str
    schema: str
    """The name of the schedule schema its lines follow."""
    schedule_width: int
    schedule_embedding_dim: int


@dataclass(frozen=True)
class ManifestFile:
    """One file of the bundle's manifest, as verified at load."""

    name: str
    bytes: int
    sha256: str
    role: str
    head: Optional[str]


@dataclass(frozen=True)
class Provenance:
    """The weight hashes recorded in the bundle and the manifest checked at load."""

    featurizer_sha256: str
    mapper_sha256: str
    files: Tuple[ManifestFile, ...]
    overrides: Tuple[str, ...]
    """Provenance mismatches accepted with ``allow_provenance_mismatch=True``."""


@dataclass(frozen=True)
class Engine:
    """Which engine runs one dense graph of the bundle."""

    file: str
    engine: str
    note: Optional[str]


@dataclass(frozen=True)
class ModelInfo:
    """Facts about a loaded model (``Model.info``)."""

    family: str
    """E.g. ``waco`` or ``cognate``."""
    name: str
    format_version: int
    featurizer_dim: int
    matrix_embedding_dim: int
    backend: str
    simd: str
    """The instruction set of the native kernels (``avx512``, ``avx2``, ``scalar``)."""
    content_hash: str
    """16 hex digits identifying the bundle's files."""
    heads: Tuple[HeadInfo, ...]
    engines: Tuple[Engine, ...]
    provenance: Provenance

    @classmethod
    def _from_dict(cls, d: Dict[str, Any]) -> ModelInfo:
        p = d["provenance"]
        return cls(
            **{k: v for k, v in d.items() if k not in ("heads", "engines", "provenance")},
            heads=tuple(HeadInfo(**h) for h in d["heads"]),
            engines=tuple(Engine(*e) for e in d["engines"]),
            provenance=Provenance(
                featurizer_sha256=p["featurizer_sha256"],
                mapper_sha256=p["mapper_sha256"],
                files=tuple(ManifestFile(**f) for f in p["files"]),
                overrides=tuple(p["overrides"]),
            ),
        )

    @property
    def kernels(self) -> Tuple[str, ...]:
        """The kernels of the heads, each once, in head order."""
        return tuple(dict.fromkeys(h.kernel for h in self.heads))

    @property
    def targets(self) -> Tuple[str, ...]:
        """The targets of the heads, each once, in head order."""
        return tuple(dict.fromkeys(h.target for h in self.heads))

    def to_dict(self) -> Dict[str, Any]:
        """Every fact as plain Python values."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Ranked:
    """One reported candidate of :meth:`Model.top_k`."""

    rank: Optional[int]
    """1-based predicted rank; None for a default the schema rejects (it has no score)."""
    index: int
    """The candidate's position in its Candidates or Space."""
    score: Optional[float]
    """The model's score (a float32 value); None when the schema rejected the line."""
    is_default: bool
    """Whether it is the toolchain's default configuration (spaces only)."""
    status: str
    """``valid``, ``duplicate of #N``, ``invalid for this matrix: ...``, ``rejected by ...``."""
    line: str
    """The schedule line, as the head parsed it."""
    toolchain: Optional[str]
    """The candidate in its toolchain's form (TACO: a ``taco`` command line); None for lines."""

    def to_dict(self) -> Dict[str, Any]:
        """The entry as the CLI's JSON prints it."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Measurement:
    """One measurement of a tuning run, in the order taken."""

    rank: Optional[int]
    index: int
    score: Optional[float]
    is_default: bool
    status: str
    line: str
    toolchain: str
    """What ``measure`` was given: the rendered toolchain program."""
    round: int
    """0 for the default and the first ``k`` ranked, then the search round; the
    confirmation round comes last."""
    confirmation: bool
    """Whether this measures again a candidate measured earlier, in the confirmation round
    that makes the pick (``search``: the default and the 3 fastest, measured again in the last
    4 measurements of the budget)."""
    ms: Optional[float]
    """What ``measure`` returned; None when it failed."""
    baseline_ms: Optional[float]
    ratio: Optional[float]
    failure: Optional[str]
    """Why the measurement failed: the exception ``measure`` raised, as ``Type: message``."""
    elapsed_s: float
    """Seconds since tuning started, when the measurement ended."""


@dataclass(frozen=True)
class Skipped:
    """A candidate a tuning run passed over without measuring it, and why."""

    index: int
    reason: str


@dataclass(frozen=True)
class TuneReport:
    """A tuning run (``Model.tune``): the measurements, the fastest, the default."""

    matrix: str
    head: str
    space: str
    candidates: int
    ranked: int
    measurements: Tuple[Measurement, ...]
    skipped: Tuple[Skipped, ...]
    best_index: Optional[int]
    """The pick: after a confirmation round, its fastest candidate that beat the default by
    2 % in both of its measurements, else the default; otherwise the fastest measured (the
    default included). None when all failed."""
    best_ms: Optional[float]
    default_index: int
    default_ms: Optional[float]
    speedup_over_default: Optional[float]
    """``default_ms / best_ms``: never below 1 when the default was measured."""
    _raw: Dict[str, Any] = dataclasses.field(repr=False, compare=False)

    @classmethod
    def _from_dict(cls, d: Dict[str, Any]) -> TuneReport:
        fields = {k: v for k, v in d.items() if k not in ("measurements", "skipped")}
        return cls(
            **fields,
            measurements=tuple(Measurement(**m) for m in d["measurements"]),
            skipped=tuple(Skipped(**s) for s in d["skipped"]),
            _raw=d,
        )

    @property
    def best(self) -> Optional[Measurement]:
        """The fastest measurement (its confirmation when it had one), or None."""
        return next((m for m in reversed(self.measurements) if m.index == self.best_index), None)

    def to_dict(self) -> Dict[str, Any]:
        """The report as ``dashrank tune --format json`` prints it."""
        return copy.deepcopy(self._raw)

    def to_pandas(self) -> pandas.DataFrame:
        """One row per measurement, in the order taken (needs pandas)."""
        frame: pandas.DataFrame = _pandas().DataFrame(
            [dataclasses.asdict(m) for m in self.measurements]
        )
        return frame


class EvalReport:
    """A model evaluated against measured runtimes (``Model.eval``): the report
    ``dashrank eval --json-out`` writes, plus each matrix's points."""

    def __init__(self, report: Dict[str, Any], points: Dict[str, List[Tuple[int, float]]]):
        self._report = report
        self._points = points

    @property
    def passed(self) -> bool:
        """Whether every threshold check passed."""
        return bool(self._report["passed"])

    @property
    def failures(self) -> List[str]:
        """One message per failed threshold check."""
        return list(self._report["failures"])

    @property
    def matrices(self) -> List[Dict[str, Any]]:
        """One row per evaluated matrix (sorted by name): sizes, Kendall τ, Spearman ρ,
        pair accuracy, top-1/top-5 APE, ..."""
        return copy.deepcopy(self._report["matrices"])

    @property
    def aggregate(self) -> Dict[str, Any]:
        """Mean and median of every metric over the matrices."""
        return copy.deepcopy(self._report["aggregate"])

    @property
    def skipped(self) -> List[Dict[str, str]]:
        """Measured files that were not evaluated, and why."""
        return copy.deepcopy(self._report["skipped"])

    @property
    def points(self) -> Dict[str, List[Tuple[int, float]]]:
        """Per matrix, ``(predicted rank, measured ms)`` of every measured candidate."""
        return {m: list(p) for m, p in self._points.items()}

    def to_dict(self) -> Dict[str, Any]:
        """The report as ``dashrank eval --json-out`` writes it."""
        return copy.deepcopy(self._report)

    def to_pandas(self) -> pandas.DataFrame:
        """One row per matrix, indexed by its name (needs pandas)."""
        frame: pandas.DataFrame = _pandas().DataFrame(self._report["matrices"])
        return frame.set_index("matrix")

    def __repr__(self) -> str:
        verdict = "passed" if self.passed else f"{len(self.failures)} failures"
        return f"<dashrank.EvalReport: {len(self._report['matrices'])} matrices, {verdict}>"

"""``dashrank.Model``: load a model, embed matrices, prepare candidates, rank, tune, evaluate."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from . import _native
from ._errors import invalid_argument
from ._native import Candidates, Matrix, Space
from ._types import EvalReport, ModelInfo, Ranked, Scores, TuneReport

if TYPE_CHECKING:
    import scipy.sparse

__all__ = ["Model", "MatrixLike", "ShapeLike"]

_log = logging.getLogger("dashrank")

MatrixLike = Union[
    Matrix,
    str,
    "os.PathLike[str]",
    "scipy.sparse.sparray",
    "scipy.sparse.spmatrix",
    Tuple[npt.ArrayLike, npt.ArrayLike, Tuple[int, int]],
    npt.NDArray[Any],
]
"""What :meth:`Model.embed` accepts (see there)."""

ShapeLike = Union[Matrix, Tuple[int, int, int]]
"""A matrix's ``(rows, cols, nnz)``, or an embedded :class:`Matrix`."""

_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.uint32), np.dtype(np.uint64))


def _count(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise invalid_argument(f"{name} must be >= 0, got {value}")
    return int(value)


def _index_arrays(a: Any, b: Any, names: Tuple[str, str]) -> Tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Two integer arrays of one dtype the native module reads in place (numpy arrays of
    int32, int64, uint32 or uint64 are passed as they are)."""
    arrays = []
    for value, name in zip((a, b), names):
        array = np.asarray(value)
        if array.size == 0 and array.dtype.kind == "f":
            array = array.astype(np.int64)  # np.asarray([]) is float64
        if array.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integers, not {array.dtype}")
        arrays.append(array)
    x, y = arrays
    if x.dtype != y.dtype or x.dtype not in _INDEX_DTYPES:
        x, y = x.astype(np.int64), y.astype(np.int64)
    return x, y


def _dims(shape: Any) -> Tuple[int, int]:
    dims = tuple(shape)
    if len(dims) != 2:
        raise invalid_argument(f"a matrix shape has two dimensions, got {dims}")
    return _count(dims[0], "rows"), _count(dims[1], "cols")


def _scipy_format(m: Any) -> Optional[str]:
    if type(m).__module__.startswith("scipy.sparse") and hasattr(m, "format"):
        return str(m.format)
    return None


def _embed(native: _native.Model, m: Any, name: Optional[str]) -> Matrix:
    if isinstance(m, Matrix):
        return m
    if isinstance(m, (str, os.PathLike)):
        path = os.fspath(m)
        stem = os.path.splitext(os.path.basename(path))[0]
        return native.embed_path(path, name or stem)
    name = name or "matrix"
    if isinstance(m, tuple):
        if len(m) != 3:
            raise TypeError("a CSR triple is (indptr, indices, (rows, cols))")
        indptr, indices = _index_arrays(m[0], m[1], ("indptr", "indices"))
        return native.embed_csr(indptr, indices, *_dims(m[2]), name)
    if isinstance(m, np.ndarray):
        if m.ndim != 2:
            raise TypeError(f"a dense mask is two-dimensional, got {m.ndim} dimensions")
        return native.embed_dense(m, name)
    fmt = _scipy_format(m)
    if fmt in ("csr", "csc"):
        indptr, indices = _index_arrays(m.indptr, m.indices, ("indptr", "indices"))
        embed = native.embed_csr if fmt == "csr" else native.embed_csc
        return embed(indptr, indices, *_dims(m.shape), name)
    if fmt == "coo":
        row, col = _index_arrays(m.row, m.col, ("row", "col"))
        return native.embed_coo(row, col, *_dims(m.shape), name)
    if fmt is not None:
        raise TypeError(f"scipy.sparse '{fmt}' matrices are not read directly: pass m.tocsr()")
    raise TypeError(
        "a matrix is a scipy.sparse CSR, CSC or COO array or matrix, an (indptr, indices, "
        "(rows, cols)) triple, a .mtx or .csr path, a 2-D numpy mask or a dashrank.Matrix; "
        f"got {type(m).__name__}"
    )


class Model:
    """A learned cost model loaded from a bundle directory (see ``docs/bundle-format.md``).

    A model is immutable and safe to share between threads: every method may run in many
    threads at once, and long calls (embedding, scoring, preparing, tuning between
    measurements) release the GIL.

    Args:
        path: The bundle directory.
        threads: Threads for the featurizer and the dense graphs; None uses every core
            (concurrent calls share them); ``n`` gives the model a pool of ``n`` threads of
            its own, which its concurrent calls share.
        deterministic: Run ONNX Runtime graphs on one thread (the native engine is
            bit-identical on any thread count either way).
        matrix_cache: How many matrix embeddings to keep, keyed by pattern; 0 disables it.
        allow_provenance_mismatch: Load heads trained with another featurizer than the
            bundle's (experts only; corrupted files are refused either way).

    Raises:
        IoError: The directory or a file cannot be read.
        BundleError: A file is malformed or fails its manifest check.

    Example:
        >>> import dashrank
        >>> model = dashrank.Model("models/waco-spmm")
        >>> [h.name for h in model.info.heads]
        ['cpu-taco/spmm']
    """

    def __init__(
        self,
        path: Union[str, os.PathLike[str]],
        *,
        threads: Optional[int] = None,
        deterministic: bool = False,
        matrix_cache: int = 64,
        allow_provenance_mismatch: bool = False,
    ) -> None:
        if threads is not None and _count(threads, "threads") == 0:
            raise invalid_argument("threads must be at least 1 (None uses every core)")
        self._path = os.fspath(path)
        self._native = _native.Model(
            self._path, threads, deterministic, _count(matrix_cache, "matrix_cache"),
            allow_provenance_mismatch,
        )
        self._info = ModelInfo._from_dict(self._native.info())

    @property
    def path(self) -> str:
        """The bundle directory, as given."""
        return self._path

    @property
    def info(self) -> ModelInfo:
        """Facts about the model: heads (kernel, target, polarity, schema), dimensions,
        engines, and provenance (weight hashes, manifest).

        Example:
            >>> model = dashrank.Model("models/waco-spmm")
            >>> model.info.family, model.info.kernels, model.info.targets
            ('waco', ('spmm',), ('cpu-taco',))
        """
        return self._info

    def __repr__(self) -> str:
        heads = ", ".join(h.name for h in self._info.heads)
        return f"<dashrank.Model {self._path!r}: {self._info.family}, heads {heads}>"

    def embed(self, matrix: MatrixLike, *, name: Optional[str] = None) -> Matrix:
        """Embeds a matrix's sparsity pattern (values are ignored) with this model.

        Accepted forms:

        - a ``scipy.sparse`` CSR or CSC array or matrix: ``indptr`` and ``indices`` are
          read in place when they are int32, int64, uint32 or uint64 (other integer dtypes
          are converted); a repeated column within a row is a :class:`PatternError`;
        - a ``scipy.sparse`` COO array or matrix (repeated coordinates are one entry);
        - an ``(indptr, indices, (rows, cols))`` triple of CSR arrays;
        - a path (``str`` or ``os.PathLike``) to a Matrix Market ``.mtx`` or WACO ``.csr``
          file;
        - a two-dimensional numpy array: its nonzero (or ``True``) entries, in any layout;
        - a :class:`Matrix`, returned as it is (one embedded by another model is refused
          when it is used: :class:`InvalidArgumentError`).

        The call releases the GIL while the featurizer runs and returns at once on Ctrl-C
        (``KeyboardInterrupt``); the abandoned featurization finishes on its own thread.
        Embeddings are cached by pattern (``matrix_cache``).

        Args:
            matrix: The matrix, in any form above.
            name: The name TACO and SPADE candidates are rendered with; a file's stem, or
                ``"matrix"``, by default.

        Returns:
            The embedded matrix, for :meth:`score`, :meth:`top_k` and :meth:`tune`.

        Raises:
            PatternError: The structure is invalid (the message names the row and
                position).
            TypeError: An object of another kind, or index arrays that do not hold
                integers.

        Example:
            >>> import scipy.sparse as sp
            >>> m = model.embed(sp.random_array((500, 400), density=0.01, rng=0))
            >>> m.shape, m.embedding.dtype
            ((500, 400, 2000), dtype('float32'))
        """
        return _embed(self._native, matrix, name)

    def prepare(self, lines: Sequence[str], *, head: Optional[str] = None) -> Candidates:
        """Prepares schedule lines for a head once, for ranking them for any matrix.

        A line may end in ``= <ms>`` (WACO's collected files); the time is kept as
        :attr:`Candidates.measured_ms`. A line the head's schema rejects stays in the set
        (it scores NaN; :meth:`Candidates.status` says why).

        Args:
            lines: Schedule lines in the head's format (WACO: SuperSchedule tokens).
            head: The head; None for the model's only head.

        Raises:
            UnknownHeadError: The model has no such head.
            InvalidArgumentError: No head is named and the model has several.

        Example:
            >>> cands = model.prepare(["16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16 = 2.5",
            ...                        "1 1 1 i1 i0 k1 k0 j1 j0 1 1 0 1 i1 48 oops"])
            >>> len(cands), cands.valid_count, float(cands.measured_ms[0])
            (2, 1, 2.5)
        """
        if isinstance(lines, str):
            raise TypeError("lines is a sequence of schedule lines, not one string")
        return self._native.prepare(list(lines), head)

    def prepare_space(
        self,
        target: str,
        kernel: Optional[str] = None,
        shape: Optional[ShapeLike] = None,
        *,
        head: Optional[str] = None,
        feat_size: int = 128,
        max_split: Optional[int] = None,
    ) -> Space:
        """Prepares a toolchain's whole schedule space once for the head that ranks it.

        The space is enumerated for each matrix it is ranked for (cheap: only the shape's
        statuses are computed), and its default configuration is always reported.

        Args:
            target: ``taco`` (``cpu-taco``), ``spade`` or ``sparsetir`` (``gpu-sparsetir``).
            kernel: ``spmm``, ``sddmm`` or ``spmv``; None for the kernel of the model's one
                head for the target.
            shape: A matrix (or its ``(rows, cols, nnz)``) to enumerate the space for now,
                so that :meth:`Space.line`, :meth:`Space.status` and :meth:`Space.render`
                can be read; ranking works without it.
            head: The head; None for the model's one head for the target and kernel.
            feat_size: SparseTIR's feature size (dense columns of SpMM's B).
            max_split: Cut the TACO space's split and chunk lists at this value (WACO's
                SpMM space has 611,712 schedules; ``max_split=4`` leaves 7,776).

        Raises:
            InvalidArgumentError: An unknown target or kernel, no head or several heads
                for them, ``max_split`` for a space that is not TACO's.
            UnsupportedKernelError: The target has no space for the kernel.

        Example:
            >>> space = model.prepare_space("taco", "spmm", (1000, 1000, 5000), max_split=4)
            >>> space.name, len(space)  # 7,776 schedules, then TACO's CSR (chunk 32)
            ('taco-spmm', 7777)
            >>> space.line(space.default_index)
            '1 1 1 i1 i0 k1 k0 j1 j0 1 1 0 1 i1 48 32'
        """
        dims: Optional[Tuple[int, int, int]] = None
        if isinstance(shape, Matrix):
            dims = shape.shape
        elif shape is not None:
            r, c, n = shape
            dims = (_count(r, "rows"), _count(c, "cols"), _count(n, "nnz"))
        if max_split is not None:
            max_split = _count(max_split, "max_split")
        return self._native.prepare_space(
            target, kernel, dims, head, _count(feat_size, "feat_size"), max_split
        )

    def _candidates(self, candidates: Union[Candidates, Space, Sequence[str]]) -> Union[Candidates, Space]:
        if isinstance(candidates, (Candidates, Space)):
            return candidates
        if isinstance(candidates, str) or not isinstance(candidates, Sequence):
            raise TypeError(
                "candidates are a Candidates (Model.prepare), a Space (Model.prepare_space) "
                f"or a list of lines, not {type(candidates).__name__}"
            )
        return self.prepare(candidates)

    def score(self, matrix: MatrixLike, candidates: Union[Candidates, Space, Sequence[str]]) -> Scores:
        """Scores every candidate for a matrix.

        Args:
            matrix: Any form :meth:`embed` accepts.
            candidates: From :meth:`prepare` or :meth:`prepare_space`, or a list of lines
                (prepared for the model's only head).

        Returns:
            ``(scores, status)``: float32 scores in candidate order (which direction is
            better is the head's ``polarity``; NaN for a candidate that is not ranked, the
            default excepted), and :class:`Status` codes (only ``Status.VALID`` candidates
            are ranked).

        Example:
            >>> lines = ["16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16", "not a schedule"]
            >>> scores, status = model.score("../shared/data/waco/matrices/cca.csr", lines)
            >>> scores.dtype, bool(np.isnan(scores[1])), status.tolist()
            (dtype('float32'), True, [0, 3])
        """
        m = self.embed(matrix)
        c = self._candidates(candidates)
        if isinstance(c, Space):
            s, st = self._native.score_space(m, c)
        else:
            s, st = self._native.score_candidates(m, c)
        return Scores(s, st)

    def top_k(
        self,
        matrix: MatrixLike,
        candidates: Union[Candidates, Space, Sequence[str]],
        k: int = 10,
        *,
        with_default: bool = True,
        distinct: bool = False,
    ) -> List[Ranked]:
        """The ``k`` best candidates for a matrix, best first (ties broken by index).

        For a space, candidates the toolchain cannot run on this matrix (a TACO layout over
        its size limit) are passed over, as ``dashrank rank --space`` does, and the
        toolchain's default is reported after the ``k`` best when it is not among them.

        Args:
            matrix: Any form :meth:`embed` accepts.
            candidates: From :meth:`prepare` or :meth:`prepare_space`, or a list of lines.
            k: How many to report.
            with_default: Also report a space's default configuration (flagged
                ``is_default``) when it is not among the ``k`` best; a line set has none.
            distinct: Spaces only: pass over a candidate whose toolchain program (for TACO,
                its rendered command line) a better one already has.

        Returns:
            The entries, best first, then the default; each with its rank, index, score,
            status, line and toolchain program.

        Raises:
            InvalidArgumentError: A negative ``k``; ``distinct`` with a line set.

        Example:
            >>> space = model.prepare_space("taco", "spmm", max_split=4)
            >>> top = model.top_k("../shared/data/waco/matrices/cca.csr", space, 3)
            >>> [(e.rank, e.is_default) for e in top]  # TACO's own CSR is predicted fastest
            [(1, True), (2, False), (3, False)]
            >>> print(top[1].toolchain)  # doctest: +ELLIPSIS
            taco "C(i1,i0,j)=A(i1,i0,k)*B(k,j)" -f=C:ddd -f=A:dds ...
        """
        k = _count(k, "k")
        m = self.embed(matrix)
        c = self._candidates(candidates)
        if isinstance(c, Candidates):
            if distinct:
                raise invalid_argument("distinct compares toolchain programs: rank a Space")
            entries = self._native.top_k_candidates(m, c, k)
        else:
            report, passed = self._native.top_k_space(m, c, k, with_default, distinct)
            for index, reason in passed:
                _log.info("%s: candidate %d passed over: %s", m.name, index, reason)
            entries = report["entries"]
        return [Ranked(**e) for e in entries]

    def tune(
        self,
        matrix: MatrixLike,
        space: Space,
        k: int = 10,
        *,
        measure: Callable[[str], float],
        strategy: str = "search",
        budget: Optional[int] = None,
        budget_seconds: Optional[float] = None,
        distinct: bool = True,
        threads: Optional[int] = None,
    ) -> TuneReport:
        """Measures what the model ranks best and keeps the fastest (the model stays frozen).

        ``measure(program)`` gets each candidate's toolchain program (TACO: a stock ``taco``
        command line, see ``docs/taco.md``; SPADE: a CSV row; SparseTIR: JSON) and returns
        its runtime in milliseconds. An ``Exception`` it raises, or a value that is not a
        finite time >= 0, is a failed measurement, recorded with its text. Ctrl-C (or any
        other ``BaseException``) stops tuning and is raised. The GIL is released between
        measurements.

        Args:
            matrix: Any form :meth:`embed` accepts.
            space: From :meth:`prepare_space`.
            k: ``search``: the best-ranked candidates measured first (the seeds);
                ``top-k``: the candidates measured.
            measure: The measuring callable.
            strategy: ``search`` measures the default, the ``k`` seeds, then rounds of the
                neighbours of the fastest measured (TACO), and in its last 4 measurements the
                default and the 3 fastest again (a confirmation round: the best of many noisy
                times is partly luck), picking the fastest of those that beat the default by
                2 % in both of their measurements, else the default; ``top-k`` the ``k``
                best, then the default, each once.
            budget: Most measurements, the default's included; None: 50 for ``search``,
                ``k + 1`` for ``top-k``.
            budget_seconds: Wall time after which no measurement starts.
            distinct: Skip a candidate whose program a measured one already has.
            threads: OpenMP threads of the TACO programs; None: every core.

        Returns:
            Every measurement, the fastest, the default's time and the speedup over it.

        Example:
            >>> space = model.prepare_space("taco", "spmm", max_split=4)
            >>> def measure(program: str) -> float:
            ...     return 1.0 + len(program) % 7  # time `program` here
            >>> report = model.tune("../shared/data/waco/matrices/cca.csr", space, 3,
            ...                     measure=measure, strategy="top-k")
            >>> [m.ms for m in report.measurements], report.best_ms, report.speedup_over_default
            ([7.0, 3.0, 2.0, 3.0], 2.0, 3.5)
        """
        if not callable(measure):
            raise TypeError("measure must be callable: measure(program: str) -> float")
        if not isinstance(space, Space):
            raise TypeError(f"space is a Space (Model.prepare_space), not {type(space).__name__}")
        report = self._native.tune(
            self.embed(matrix), space, measure, strategy, _count(k, "k"),
            None if budget is None else _count(budget, "budget"), budget_seconds, distinct,
            None if threads is None else _count(threads, "threads"),
        )
        return TuneReport._from_dict(report)

    def eval(
        self,
        measured: Union[str, os.PathLike[str]],
        matrices: Union[str, os.PathLike[str]],
        *,
        head: Optional[str] = None,
        default: Optional[str] = None,
        min_tau: Optional[float] = None,
        min_rho: Optional[float] = None,
        max_top1_ape: Optional[float] = None,
        threads: Optional[int] = None,
    ) -> EvalReport:
        """Evaluates the model against measured runtimes: the report of ``dashrank eval``.

        ``measured`` holds one file per matrix, ``<matrix>.txt`` (WACO lines ``<schedule> =
        <ms>``) or ``<matrix>.csv``; ``matrices`` holds ``<matrix>.csr`` or ``.mtx``.

        Args:
            measured: The directory of measured files.
            matrices: The directory of matrices.
            head: The head; None for the model's only head.
            default: The toolchain's default schedule line, for speedups over it.
            min_tau: Fail a matrix whose Kendall τ is below this.
            min_rho: Fail a matrix whose Spearman ρ is below this.
            max_top1_ape: Fail a matrix whose top-1 pick is more than this many percent
                slower than the best measured.
            threads: Matrices evaluated in parallel; None: every core.

        Returns:
            The report: ``passed``, ``failures``, per-matrix rows, aggregates, points;
            ``to_dict()`` is the CLI's JSON, ``to_pandas()`` a table.

        Example:
            >>> report = model.eval("../shared/data/waco/collected/SpMM",
            ...                     "../shared/data/waco/matrices", min_tau=0.0)
            >>> frame = report.to_pandas()  # one row per matrix
            >>> "Trec6_16x16_9" in frame.index, report.passed
            (True, True)
        """
        out = self._native.eval(
            self._path, os.fspath(measured), os.fspath(matrices), head, default,
            (min_tau, min_rho, max_top1_ape),
            None if threads is None else _count(threads, "threads"),
        )
        return EvalReport(out["report"], out["points"])

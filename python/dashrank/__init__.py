"""dashrank: rank sparse-kernel schedules with learned cost models (WACO, DASH/COGNATE).

Load a model exported to a bundle, embed a matrix (scipy.sparse, CSR arrays, a dense numpy
mask, or a ``.mtx``/``.csr`` file), and rank schedule lines or a toolchain's whole space
(TACO, SPADE, SparseTIR), with the toolchain's default always reported::

    >>> import dashrank, scipy.sparse as sp
    >>> model = dashrank.Model("models/waco-spmm")
    >>> matrix = sp.random_array((2000, 2000), density=0.002, format="csr", rng=0)
    >>> space = model.prepare_space("taco", "spmm")
    >>> best = model.top_k(matrix, space, 5)
    >>> best[0].rank, best[-1].is_default
    (1, True)

``docs/python.md`` walks through a real matrix: ranking, plotting predicted against measured
runtimes, and tuning with a measuring callable.
"""

from ._errors import (
    BackendUnavailableError,
    BundleError,
    Error,
    ExecutorError,
    FeaturizeError,
    InvalidArgumentError,
    IoError,
    LayoutTooLargeError,
    PatternError,
    ScheduleError,
    UnknownHeadError,
    UnsupportedKernelError,
    UnsupportedVersionError,
)
from ._model import MatrixLike, Model, ShapeLike
from ._native import Candidates, Matrix, Space, __version__
from ._types import (
    Engine,
    EvalReport,
    HeadInfo,
    ManifestFile,
    Measurement,
    ModelInfo,
    Provenance,
    Ranked,
    Scores,
    Skipped,
    Status,
    TuneReport,
)

__all__ = [
    "Model",
    "Matrix",
    "Candidates",
    "Space",
    "MatrixLike",
    "ShapeLike",
    "Status",
    "Scores",
    "Ranked",
    "ModelInfo",
    "HeadInfo",
    "Engine",
    "Provenance",
    "ManifestFile",
    "TuneReport",
    "Measurement",
    "Skipped",
    "EvalReport",
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
    "__version__",
]

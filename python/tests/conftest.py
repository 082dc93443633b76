"""Fixtures of the dashrank wheel's tests: the repository, the real WACO data in ../shared,
the converted real models (scripts/setup.sh), the tiny fixtures, and the CLI built from the
same sources (for bit-for-bit comparisons)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Callable, List

import numpy as np
import pytest
import scipy.sparse as sp

import dashrank

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("DASHRANK_SHARED", REPO.parent / "shared")).resolve()
MATRICES = SHARED / "data" / "waco" / "matrices"
COLLECTED = SHARED / "data" / "waco" / "collected"
FIXTURES = REPO / "tests" / "data" / "fixtures"
BAD = REPO / "tests" / "data" / "bad"


# The Ctrl-C tests simulate it with `_thread.interrupt_main`, which does nothing while SIGINT
# is ignored, as it is for a background job of a non-interactive shell (`bash .ci/run &`):
# give the suite the handler an interactive Python has.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def target_dir() -> Path:
    return Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")).resolve()


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative paths (models/, ../shared) resolve as in the docs."""
    monkeypatch.chdir(REPO)


@pytest.fixture(scope="session")
def real_data() -> Path:
    if not (MATRICES / "Trec6_16x16_9.csr").exists() or not (REPO / "models/waco-spmm").exists():
        pytest.skip("needs ../shared/data/waco and models/ (bash scripts/setup.sh)")
    return MATRICES


@pytest.fixture(scope="session")
def spmm(real_data: Path) -> dashrank.Model:
    """The real WACO SpMM model."""
    return dashrank.Model(REPO / "models/waco-spmm")


@pytest.fixture(scope="session")
def tiny() -> dashrank.Model:
    """The seeded tiny WACO SpMM fixture (WACO's schema, random weights)."""
    return dashrank.Model(FIXTURES / "tiny-waco-spmm")


@pytest.fixture(scope="session")
def cognate() -> dashrank.Model:
    """The tiny COGNATE fixture: TACO, SPADE and SparseTIR heads."""
    return dashrank.Model(FIXTURES / "tiny-cognate")


def read_waco_csr(path: Path) -> sp.csr_array:
    """A WACO ``.csr`` file (int32 rows, cols, nnz, row_ptr, col_idx) with numpy alone."""
    a = np.fromfile(path, dtype="<i4")
    n, m, nnz = (int(v) for v in a[:3])
    indptr, indices = a[3 : 4 + n], a[4 + n :]
    assert len(indices) == nnz
    return sp.csr_array((np.ones(nnz, np.float32), indices, indptr), shape=(n, m))


@pytest.fixture(scope="session")
def trec(real_data: Path) -> sp.csr_array:
    return read_waco_csr(real_data / "Trec6_16x16_9.csr")


def banded(n: int, width: int = 1) -> sp.csr_array:
    """An n x n band of half-width ``width``."""
    return sp.diags_array([np.ones(n - abs(d)) for d in range(-width, width + 1)],
                          offsets=list(range(-width, width + 1)), format="csr")


@pytest.fixture(scope="session")
def cli() -> Path:
    """The `dashrank` binary of this checkout ($DASHRANK_CLI, else built with cargo)."""
    given = os.environ.get("DASHRANK_CLI")
    if given:
        return Path(given)
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "dashrank-cli"], cwd=REPO,
                   check=True)
    return target_dir() / "release" / "dashrank"


@pytest.fixture(scope="session")
def run_cli(cli: Path) -> Callable[..., Any]:
    def run(*args: str) -> Any:
        out = subprocess.run([str(cli), *args], cwd=REPO, check=True, capture_output=True,
                             text=True)
        return json.loads(out.stdout)
    return run


def schedule_lines(path: Path) -> List[str]:
    return [l for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")]

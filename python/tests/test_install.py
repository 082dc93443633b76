"""The wheel in a fresh venv: one `pip install` (numpy comes along, nothing else), then the
real WACO SpMM model ranks a real matrix's schedules from scipy.sparse."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Optional

import pytest

import dashrank
from conftest import REPO, target_dir

ONE_LINER = (
    "import dashrank, numpy as np, scipy.sparse as sp; "
    "a = np.fromfile('../shared/data/waco/matrices/Trec6_16x16_9.csr', '<i4'); n, c, z = a[:3]; "
    "A = sp.csr_array((np.ones(z), a[4 + n:], a[3:4 + n]), shape=(n, c)); "
    "m = dashrank.Model('models/waco-spmm'); "
    "top = m.top_k(A, m.prepare_space('taco', 'spmm'), 5); "
    "print([(e.rank, e.index, e.is_default) for e in top]); print(top[0].toolchain)"
)


def wheel() -> Path:
    given = os.environ.get("DASHRANK_WHEEL")
    if given:
        return Path(given)
    found = sorted((target_dir() / "wheels").glob("dashrank-*.whl"), key=lambda p: p.stat().st_mtime)
    if not found:
        pytest.fail("no wheel: bash scripts/python.sh builds it")
    return found[-1]


def test_the_wheel_is_the_installed_package() -> None:
    with zipfile.ZipFile(wheel()) as z:
        names = set(z.namelist())
        native = next(n for n in names if n.startswith("dashrank/_native") and n.endswith(".so"))
        assert native.endswith(".abi3.so")  # one wheel for every CPython >= 3.9
        assert {"dashrank/py.typed", "dashrank/_native.pyi", "dashrank/__init__.py"} <= names
        installed = Path(dashrank.__file__).parent / Path(native).name
        assert z.read(native) == installed.read_bytes()
        meta = z.read(next(n for n in names if n.endswith("/METADATA"))).decode()
    requires = [l for l in meta.splitlines() if l.startswith("Requires-Dist:") and "extra ==" not in l]
    assert requires == ["Requires-Dist: numpy>=1.22"]
    assert "Requires-Python: >=3.9" in meta


def interpreter(minor: int) -> Optional[str]:
    """A working CPython 3.<minor>: under pyenv, or on PATH."""
    pyenv = sorted(Path.home().glob(f".pyenv/versions/3.{minor}.*/bin/python3.{minor}"))
    for python in [*map(str, reversed(pyenv)), shutil.which(f"python3.{minor}")]:
        if python and subprocess.run([python, "-c", "import venv"], capture_output=True).returncode == 0:
            return python
    return None


@pytest.mark.parametrize("minor", [9, 13])
def test_one_wheel_for_every_cpython(minor: int, tmp_path: Path) -> None:
    """abi3: the oldest supported CPython and a recent one load the same wheel."""
    python = interpreter(minor)
    if python is None:
        pytest.skip(f"no CPython 3.{minor} on this machine")
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    str(wheel())], check=True)
    code = ("import sys, dashrank; m = dashrank.Model('tests/data/fixtures/tiny-cognate'); "
            "top = m.top_k('ffi-examples/data/band96.mtx', m.prepare_space('spade', 'spmm'), 2); "
            "print(sys.version_info[:2], [e.index for e in top])")
    out = subprocess.run([py, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    here = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.stdout.split(")", 1)[1] == here.stdout.split(")", 1)[1]
    assert out.stdout.startswith(f"(3, {minor})")


def test_fresh_venv(real_data: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py, pip = venv / "bin" / "python", [str(venv / "bin" / "python"), "-m", "pip", "install",
                                        "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, str(wheel())], check=True)

    def run(code: str) -> str:
        out = subprocess.run([str(py), "-c", code], cwd=REPO, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout

    # numpy alone: files, dense masks and CSR arrays work; pandas is asked for by name.
    out = run(
        "import dashrank, numpy as np, importlib.util as u; "
        "assert u.find_spec('scipy') is None and u.find_spec('pandas') is None; "
        "m = dashrank.Model('tests/data/fixtures/tiny-waco-spmm'); "
        "print(m.embed(np.eye(5, dtype=bool)).nnz); "
        "r = m.tune('ffi-examples/data/band96.mtx', m.prepare_space('taco', max_split=4), 2, "
        "measure=len, strategy='top-k')\n"
        "try: r.to_pandas()\n"
        "except ImportError as e: print(e)"
    )
    assert out.splitlines() == ["5", "to_pandas() needs pandas: pip install pandas"]
    subprocess.run([*pip, "scipy"], check=True)
    out = run(ONE_LINER).splitlines()
    ranked = eval(out[0])  # noqa: S307 - our own output
    assert [r for r, _, _ in ranked[:5]] == [1, 2, 3, 4, 5]
    assert sum(d for _, _, d in ranked) == 1
    assert out[1].startswith('taco "C(')
    # The same ranking as in the project's venv.
    same = subprocess.run([sys.executable, "-c", ONE_LINER], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout.splitlines()
    assert out == same

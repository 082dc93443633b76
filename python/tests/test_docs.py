"""The documentation runs and type-checks: docs/python.md's walk-through, every docstring
example, `mypy --strict` on both, the stub against the extension (mypy's stubtest), and
`help()` on the public API."""

from __future__ import annotations

import doctest
import inspect
import pydoc
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, List

import numpy as np
import pytest
import scipy.sparse as sp

import dashrank
from dashrank import _errors, _model, _types
from conftest import REPO, target_dir

DOCS = REPO / "docs" / "python.md"
MEASURER = REPO / "target" / "taco" / "dashrank-taco-measure"
MODULES = [dashrank, _model, _errors, _types]


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    """`mypy --strict`, with a cache shared by the runs (numpy's, scipy's and pandas' stubs
    take most of the time)."""
    cache = target_dir() / "mypy-cache"
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache),
                           *args], capture_output=True, text=True, cwd=REPO)


def walkthrough() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.S)
    assert len(blocks) >= 6
    return "\n".join(blocks)


def docstring_tests() -> Iterator[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    seen = set()
    for module in MODULES:
        for test in finder.find(module, module.__name__):
            if test.name not in seen and test.examples:
                seen.add(test.name)
                yield test


# What every docstring example may use without importing it.
PREAMBLE = """\
import numpy as np
import scipy.sparse as sp
import dashrank
model = dashrank.Model("models/waco-spmm")
"""


def test_the_walkthrough_runs(real_data: Path, tmp_path: Path) -> None:
    if not MEASURER.exists():
        pytest.skip(f"{MEASURER.relative_to(REPO)} missing: bash scripts/taco-tools.sh")
    plot = REPO / "target/python-docs/predicted-vs-measured.png"
    plot.unlink(missing_ok=True)
    script = tmp_path / "walkthrough.py"
    script.write_text(walkthrough())
    run = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "<dashrank.Model 'models/waco-spmm': waco, heads cpu-taco/spmm>" in out
    assert re.search(r"tau 0\.\d+ over \d+ schedules", out), out
    assert re.search(r"fastest: [\d.]+ ms, [\d.]+x TACO's CSR", out), out
    assert plot.stat().st_size > 10_000 and plot.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("test", list(docstring_tests()), ids=lambda t: t.name)
def test_docstring_examples_run(test: doctest.DocTest, real_data: Path) -> None:
    globs: dict[str, Any] = {}
    exec(PREAMBLE, globs)
    test.globs = globs
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: List[str] = []
    result = runner.run(test, out=out.append)
    assert result.failed == 0, "".join(out)


def test_every_public_callable_documents_itself() -> None:
    for name in ("embed", "prepare", "prepare_space", "score", "top_k", "tune", "eval"):
        text = pydoc.render_doc(getattr(dashrank.Model, name), renderer=pydoc.plaintext)
        assert "Args:" in text and "Example:" in text and ">>> " in text, name
    text = pydoc.render_doc(dashrank.Model.top_k, renderer=pydoc.plaintext)
    assert "top_k(self, matrix:" in text and "k: 'int' = 10" in text and "with_default" in text
    for cls in (dashrank.Matrix, dashrank.Candidates, dashrank.Space):
        assert cls.__doc__ and cls.__module__ == "dashrank"
        for attr, value in vars(cls).items():
            if not attr.startswith("_"):
                assert value.__doc__, f"{cls.__name__}.{attr}"
    for name in dashrank.__all__:
        obj = getattr(dashrank, name)
        if inspect.isclass(obj):
            assert obj.__doc__, name


def test_mypy_strict_on_the_documented_examples(tmp_path: Path) -> None:
    examples = [walkthrough()]
    for test in docstring_tests():
        body = "".join(e.source for e in test.examples)
        examples.append(f"def example_{len(examples)}() -> None:\n" + "\n".join(
            "    " + line for line in (PREAMBLE + body).splitlines()))
    (tmp_path / "examples.py").write_text("\n\n".join(examples) + "\n")
    run = mypy(str(tmp_path / "examples.py"))
    assert run.returncode == 0, run.stdout + run.stderr


def test_mypy_strict_on_the_package() -> None:
    run = mypy("python/dashrank")
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_stub_matches_the_extension(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "mypy.stubtest", "dashrank._native"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_wrong_call_fails_type_checking(tmp_path: Path) -> None:
    """The types say something: mypy rejects misuse the docs warn about."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import dashrank\n"
        "m = dashrank.Model('x')\n"
        "m.top_k('m.mtx', ['line'], k='3')\n"
        "m.tune('m.mtx', m.prepare_space('taco'), measure=lambda p: 'fast')\n"
        "s: str = m.score('m.mtx', ['l']).scores\n"
    )
    run = mypy(str(bad))
    assert run.returncode == 1
    lines = {int(m) for m in re.findall(r"bad\.py:(\d+): error:", run.stdout)}
    assert lines == {3, 4, 5}, run.stdout

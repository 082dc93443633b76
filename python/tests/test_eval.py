"""Model.eval: the report of `dashrank eval --json-out`, as dicts and pandas frames."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import dashrank
from conftest import REPO

MEASURED = "../shared/data/waco/collected/SpMM"
MATRICES = "../shared/data/waco/matrices"


@pytest.fixture(scope="module")
def report(real_data: Path) -> dashrank.EvalReport:
    return dashrank.Model("models/waco-spmm").eval(MEASURED, MATRICES, min_tau=0.3,
                                                   max_top1_ape=1.0)


def test_the_report_is_the_clis(report: dashrank.EvalReport, cli: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    run = subprocess.run([str(cli), "eval", "--model", "models/waco-spmm", "--measured", MEASURED,
                          "--matrices", MATRICES, "--min-tau", "0.3", "--max-top1-ape", "1",
                          "--json-out", str(out)], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == (0 if report.passed else 2), run.stderr
    assert report.to_dict() == json.loads(out.read_text())


def test_report_contents(report: dashrank.EvalReport) -> None:
    names = [r["matrix"] for r in report.matrices]
    assert names == sorted(names) and "Trec6_16x16_9" in names
    assert {s["measured_file"].rsplit("/", 1)[-1] for s in report.skipped} >= {"EX1_8x8_4.txt"}
    assert report.aggregate["matrices"] == len(names)
    # A 1 % top-1 limit fails somewhere on real data; each failure names its matrix.
    assert not report.passed and report.failures
    assert all(f.split(":")[0] in names for f in report.failures)
    frame = report.to_pandas()
    assert list(frame.index) == names
    assert frame.loc["Trec6_16x16_9", "candidates"] > 50
    assert -1.0 <= frame["kendall_tau"].min() <= frame["kendall_tau"].max() <= 1.0
    points = report.points["Trec6_16x16_9"]
    assert len(points) == frame.loc["Trec6_16x16_9", "candidates"]
    assert sorted(rank for rank, _ in points) == list(range(1, len(points) + 1))
    assert repr(report).startswith("<dashrank.EvalReport: ")


def test_eval_errors(tiny: dashrank.Model, tmp_path: Path, real_data: Path) -> None:
    with pytest.raises(dashrank.IoError):
        tiny.eval(tmp_path / "missing", tmp_path)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "a.txt").write_text("# nothing measured\n")
    with pytest.raises(dashrank.InvalidArgumentError,
                       match="nothing to evaluate in .*every measured file was skipped"):
        tiny.eval(tmp_path / "m", tmp_path)
    with pytest.raises(dashrank.ScheduleError) as e:
        tiny.eval(MEASURED, MATRICES, default="not a schedule")
    assert e.value.reason and str(e.value).startswith("invalid schedule")
    with pytest.raises(dashrank.InvalidArgumentError, match="threshold min_tau must be a finite"):
        tiny.eval(MEASURED, MATRICES, min_tau=float("nan"))
    # A file that fails is raised with the file and the stage named, as the CLI prints it.
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "bad.txt").write_text("1 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1 = 2\n")
    (tmp_path / "x" / "bad.csr").write_bytes(b"\x01\x00")
    with pytest.raises(dashrank.PatternError, match=r"^evaluating bad: reading matrix .*bad\.csr: "
                                                    r"invalid sparsity pattern: WACO \.csr"):
        tiny.eval(tmp_path / "x", tmp_path / "x")

"""prepare, prepare_space, score and top_k, and their scores against the Rust API's as the
CLI prints them (bit for bit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import scipy.sparse as sp

import dashrank
from conftest import COLLECTED, FIXTURES, REPO, banded, schedule_lines

DEFAULT_LINE = "1 1 1 i1 i0 k1 k0 j1 j0 1 1 0 1 i1 48 32"


def f32(x: Any) -> bytes:
    return np.float32(x).tobytes()


def test_prepare_lines(spmm: dashrank.Model) -> None:
    lines = ["16 256 1 k1 k0 i1 i0 j1 j0 1 0 0 0 i1 48 16 = 2.5",
             "1 1 1 i1 i0 k1 k0 j1 j0 1 1 0 1 i1 48 oops",
             DEFAULT_LINE]
    c = spmm.prepare(lines)
    assert (len(c), c.head, c.valid_count) == (3, "cpu-taco/spmm", 2)
    assert c.lines == [lines[0].split("=")[0].strip(), lines[1], lines[2]]
    assert c.measured_ms[0] == 2.5 and np.isnan(c.measured_ms[1:]).all()
    assert c.status_codes.tolist() == [dashrank.Status.VALID, dashrank.Status.REJECTED, 0]
    assert c.status(0) == "valid"
    assert c.status(1).startswith("rejected by the schema: invalid schedule #1 field 'parchunk'")
    assert c.errors == [(1, c.status(1).removeprefix("rejected by the schema: "))]
    assert repr(c) == "<dashrank.Candidates for cpu-taco/spmm: 3 lines, 2 valid>"
    with pytest.raises(dashrank.InvalidArgumentError, match=r"candidate index 3 out of range"):
        c.status(3)
    with pytest.raises(TypeError, match="not one string"):
        spmm.prepare(DEFAULT_LINE)
    with pytest.raises(dashrank.UnknownHeadError) as e:
        spmm.prepare([DEFAULT_LINE], head="spade/spmm")
    assert e.value.available == ["cpu-taco/spmm"] and e.value.head == "spade/spmm"
    assert str(e.value) == "the model has no head 'spade/spmm' (heads: cpu-taco/spmm)"


def test_several_heads_need_a_name(cognate: dashrank.Model) -> None:
    with pytest.raises(dashrank.InvalidArgumentError,
                       match="the model has 4 heads for any target; choose one"):
        cognate.prepare(["x"])
    assert len(cognate.prepare(["x"], head="spade/spmm")) == 1


def test_prepare_space(cognate: dashrank.Model, tiny: dashrank.Model) -> None:
    gpu = cognate.prepare_space("sparsetir", shape=(1000, 1000, 9000), feat_size=64)
    assert (gpu.name, gpu.head, gpu.target, gpu.kernel) == (
        "sparsetir-spmm-unified", "gpu-sparsetir/spmm", "gpu-sparsetir", "spmm")
    assert gpu.shape == (1000, 1000, 9000) and gpu.ranked_count > 0
    assert gpu.render(gpu.default_index).startswith('{"kernel":"spmm","row_tile":')
    spade = cognate.prepare_space("spade", "sddmm", tiny.embed(banded(64)))
    assert spade.shape == (64, 64, 190)
    assert spade.render(0, "band").startswith("band, ")
    statuses = {spade.status(i).split(":")[0] for i in range(len(spade))}
    assert "valid" in statuses and len(statuses) > 1  # some configurations are not for 64 cols
    taco = tiny.prepare_space("cpu-taco", "spmm", max_split=4)
    assert len(taco) == 7776 and taco.shape is None
    assert repr(taco) == "<dashrank.Space taco-spmm ranked by cpu-taco/spmm: 7776 candidates>"
    with pytest.raises(dashrank.InvalidArgumentError, match="prepared without a shape"):
        taco.line(0)


@pytest.mark.parametrize("call, error, message", [
    (lambda m: m.prepare_space("gpu"), dashrank.InvalidArgumentError, "unknown target 'gpu'"),
    (lambda m: m.prepare_space("taco", "spgemm"), dashrank.InvalidArgumentError,
     "unknown kernel 'spgemm'"),
    (lambda m: m.prepare_space("spade"), dashrank.InvalidArgumentError,
     "the model has 2 heads for target spade; choose one"),
    (lambda m: m.prepare_space("spade", "spmm", max_split=4), dashrank.InvalidArgumentError,
     "max_split cuts the TACO space; spade spaces are fixed"),
    (lambda m: m.prepare_space("taco", "spmm", (1, 1)), ValueError, "not enough values"),
    (lambda m: m.prepare_space("taco", feat_size=-1), dashrank.InvalidArgumentError,
     "feat_size must be >= 0, got -1"),
])
def test_prepare_space_errors(cognate: dashrank.Model, call: Callable[[dashrank.Model], Any],
                              error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call(cognate)


def test_unsupported_kernel() -> None:
    dash = dashrank.Model(FIXTURES / "tiny-dash")  # it has a spade/spmv head
    with pytest.raises(dashrank.UnsupportedKernelError) as e:
        dash.prepare_space("spade", "spmv")
    assert (e.value.target, e.value.kernel, e.value.supported) == ("spade", "spmv", ["spmm", "sddmm"])
    assert str(e.value) == ("target 'spade' has no schedule space for kernel 'spmv' "
                            "(it supports: spmm, sddmm)")


def test_score_and_top_k_of_lines(tiny: dashrank.Model) -> None:
    lines = ["1 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1", "bad", DEFAULT_LINE,
             "2 1 1 i1 i0 k1 k0 j1 j0 1 0 0 0 i1 48 1"]
    m = tiny.embed(banded(40))
    scores, status = tiny.score(m, tiny.prepare(lines))
    assert scores.dtype == np.float32 and np.isnan(scores[1]) and not np.isnan(scores[[0, 2, 3]]).any()
    assert status.tolist() == [0, 3, 0, 0]
    assert tiny.score(m, lines).scores.tobytes() == scores.tobytes()  # a list is prepared
    top = tiny.top_k(m, lines, 2)
    order = sorted([0, 2, 3], key=lambda i: (scores[i], i))  # WACO: lower is better
    assert [e.index for e in top] == order[:2] and [e.rank for e in top] == [1, 2]
    assert all(e.toolchain is None and not e.is_default and e.status == "valid" for e in top)
    assert [f32(e.score) for e in top] == [f32(scores[i]) for i in order[:2]]
    assert top[0].line == lines[order[0]]
    assert top[0].to_dict()["index"] == order[0]
    assert [e.index for e in tiny.top_k(m, lines, 100)] == order
    assert tiny.top_k(m, lines, 0) == []
    with pytest.raises(dashrank.InvalidArgumentError, match="k must be >= 0, got -1"):
        tiny.top_k(m, lines, -1)
    with pytest.raises(dashrank.InvalidArgumentError, match="distinct compares toolchain"):
        tiny.top_k(m, lines, 2, distinct=True)
    with pytest.raises(TypeError, match="candidates are a Candidates"):
        tiny.top_k(m, 3, 2)  # type: ignore[arg-type]


def test_space_statuses(cognate: dashrank.Model) -> None:
    m = cognate.embed(banded(64))  # column panels wider than 64 columns are duplicates
    space = cognate.prepare_space("spade", "spmm", m)
    scores, status = cognate.score(m, space)
    assert len(scores) == len(status) == len(space)
    assert set(status.tolist()) == {dashrank.Status.VALID, dashrank.Status.DUPLICATE}
    # Unranked candidates score NaN; the default is scored whatever its status.
    nan = np.isnan(scores)
    d = space.default_index
    assert (np.delete(nan, d) == np.delete(status != dashrank.Status.VALID, d)).all()
    assert not nan[d]
    assert space.status(int(np.flatnonzero(status == 1)[0])).startswith("duplicate of #")
    ranked = cognate.top_k(m, space, 10_000)
    assert {e.index for e in ranked if e.rank is not None and e.status == "valid"} == set(
        np.flatnonzero(status == 0).tolist())


def test_space_top_k_and_defaults(tiny: dashrank.Model) -> None:
    space = tiny.prepare_space("taco", "spmm", max_split=4)
    m = tiny.embed(banded(3))
    scores, status = tiny.score(m, space)
    assert len(scores) == len(space) + 1  # TACO's CSR (chunk 32) is not in the cut space
    top = tiny.top_k(m, space, 5)
    assert [e.rank for e in top[:5]] == [1, 2, 3, 4, 5]
    assert sum(e.is_default for e in top) == 1
    for e in top[:5]:
        assert status[e.index] == dashrank.Status.VALID and f32(e.score) == f32(scores[e.index])
        assert e.toolchain is not None and e.toolchain.startswith('taco "C(')
    d = next(e for e in top if e.is_default)
    assert d.line == DEFAULT_LINE
    without = tiny.top_k(m, space, 5, with_default=False)
    assert [e.index for e in without] == [e.index for e in top[:5]]
    distinct = tiny.top_k(m, space, 5, distinct=True)
    assert len({e.toolchain for e in distinct if not e.is_default}) == 5
    # The space follows the matrix: another shape, another enumeration.
    big = tiny.embed(banded(300))
    assert len(tiny.score(big, space).scores) == len(tiny.score(m, space).scores)
    assert tiny.top_k(big, space, 1)[0].index != -1


def test_another_models_matrix_is_refused(tiny: dashrank.Model) -> None:
    other = dashrank.Model(FIXTURES / "tiny-waco-spmm")
    m = other.embed(banded(10))
    with pytest.raises(dashrank.InvalidArgumentError, match="different model instance"):
        tiny.score(m, [DEFAULT_LINE])


def test_scores_equal_the_cli_bit_for_bit(spmm: dashrank.Model, real_data: Path,
                                          run_cli: Callable[..., Any]) -> None:
    matrix = real_data / "Trec6_16x16_9.csr"
    measured = COLLECTED / "SpMM" / "Trec6_16x16_9.txt"
    lines = schedule_lines(measured)
    cands = spmm.prepare(lines)
    scores, _ = spmm.score(matrix, cands)
    [report] = run_cli("rank", "--model", "models/waco-spmm", "--matrix", str(matrix),
                       "--candidates", str(measured), "--top", str(len(lines)), "--format", "json")
    assert len(report["top"]) == cands.valid_count > 50
    ours = spmm.top_k(matrix, cands, len(lines))
    assert [e["index"] for e in report["top"]] == [e.index for e in ours]
    for e in report["top"]:
        assert f32(e["score"]) == f32(scores[e["index"]])


@pytest.mark.parametrize("model, args", [
    ("models/waco-spmm", ["--space", "taco", "--max-split", "8"]),
    ("tests/data/fixtures/tiny-cognate", ["--space", "spade", "--kernel", "sddmm"]),
    ("tests/data/fixtures/tiny-cognate", ["--space", "sparsetir", "--feat-size", "64"]),
])
def test_space_ranking_equals_the_cli(real_data: Path, run_cli: Callable[..., Any], model: str,
                                      args: list[str]) -> None:
    matrix = real_data / "cavity24.csr"
    [report] = run_cli("rank", "--model", model, "--matrix", str(matrix), *args, "--top", "12",
                       "--format", "json")
    m = dashrank.Model(REPO / model)
    target = args[1]
    kernel = args[3] if args[2] == "--kernel" else None
    options: dict[str, Any] = {}
    if "--max-split" in args:
        options["max_split"] = 8
    if "--feat-size" in args:
        options["feat_size"] = 64
    space = m.prepare_space(target, kernel, **options)
    ours = m.top_k(matrix, space, 12)
    assert len(ours) == len(report["entries"]) >= 12
    for e, want in zip(ours, report["entries"]):
        got = e.to_dict()
        assert f32(got.pop("score")) == f32(want.pop("score"))
        assert got == want

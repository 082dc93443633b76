"""Model.tune: the core's tuning loop with a Python callable as the measurer."""

from __future__ import annotations

import _thread
import subprocess
from typing import Any, Callable, List

import numpy as np
import pytest

import dashrank
from conftest import REPO

BAND = REPO / "ffi-examples/data/band96.mtx"


@pytest.fixture(scope="module")
def space(tiny: dashrank.Model) -> dashrank.Space:
    return tiny.prepare_space("taco", "spmm", max_split=4)


def by_length(program: str) -> float:
    return float(len(program.encode()))


def test_top_k_measures_the_best_then_the_default(tiny: dashrank.Model,
                                                  space: dashrank.Space) -> None:
    seen: List[str] = []

    def measure(program: str) -> float:
        seen.append(program)
        return 10.0 - len(seen)  # each faster than the last: the default (last) wins

    r = tiny.tune(BAND, space, 4, measure=measure, strategy="top-k", distinct=False)
    top = tiny.top_k(BAND, space, 4)
    assert [m.index for m in r.measurements] == [e.index for e in top]
    assert [m.toolchain for m in r.measurements] == seen
    assert all(p.startswith('taco "C(') for p in seen)
    assert r.measurements[-1].is_default and r.best_index == r.default_index
    assert (r.best_ms, r.default_ms, r.speedup_over_default) == (5.0, 5.0, 1.0)
    assert r.best is r.measurements[-1]
    assert (r.matrix, r.space, r.head) == ("band96", "taco-spmm", "cpu-taco/spmm")
    assert [m.round for m in r.measurements] == [0] * 5
    d = r.to_dict()
    assert d["best_index"] == r.best_index and len(d["measurements"]) == 5
    frame = r.to_pandas()
    assert list(frame["index"]) == [m.index for m in r.measurements]


def test_failures_are_recorded(tiny: dashrank.Model, space: dashrank.Space) -> None:
    answers: List[Any] = [ValueError("does not compile"), None, -1.0, float("nan"), "3", 2.0]

    def measure(program: str) -> Any:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    r = tiny.tune(BAND, space, 5, measure=measure, strategy="top-k")
    failures = [m.failure for m in r.measurements]
    assert failures == [
        "ValueError: does not compile",
        "measure returned None, not a time in milliseconds",
        "measure returned -1 ms, not a finite time >= 0",
        "measure returned NaN ms, not a finite time >= 0",
        "measure returned '3', not a time in milliseconds",
        None,
    ]
    assert [m.ms for m in r.measurements][-1] == 2.0 and r.best_index == r.default_index


def test_search_equals_the_cli(tiny: dashrank.Model, space: dashrank.Space,
                               run_cli: Callable[..., Any]) -> None:
    """The same loop as `dashrank tune`: a command timing a program by its length gives the
    same measurements in the same order as a callable doing the same."""
    want = run_cli("tune", "--model", "tests/data/fixtures/tiny-waco-spmm", "--matrix", str(BAND),
                   "--space", "taco", "--max-split", "4", "--budget", "12", "--top", "3",
                   "--measure-cmd", "printf %s {} | wc -c", "--format", "json")
    got = tiny.tune(BAND, space, 3, measure=by_length, budget=12).to_dict()
    for report in (want, got):
        for m in report["measurements"]:
            del m["elapsed_s"]
            m["score"] = np.float32(m["score"]).tobytes()  # JSON prints the float32 shortest
    assert got == want
    assert len(got["measurements"]) == 12 and max(m["round"] for m in got["measurements"]) > 0
    assert got["skipped"], "distinct programs: some candidates repeat a measured program"


def test_budget_and_distinct(tiny: dashrank.Model, space: dashrank.Space) -> None:
    r = tiny.tune(BAND, space, 20, measure=by_length, strategy="top-k", budget=6, distinct=True)
    assert len(r.measurements) == 7 and r.measurements[-1].is_default  # always measured
    programs = [m.toolchain for m in r.measurements]
    assert len(set(programs)) == len(programs)
    assert all("the same program as candidate" in s.reason or "layout" in s.reason
               for s in r.skipped)
    timed = tiny.tune(BAND, space, 3, measure=by_length, budget_seconds=1e-9)
    assert [m.is_default for m in timed.measurements] == [True]  # the default, whatever the time


@pytest.mark.parametrize("kwargs, error, message", [
    ({"strategy": "random"}, dashrank.InvalidArgumentError,
     "unknown strategy 'random' (expected 'search' or 'top-k')"),
    ({"budget": 0}, dashrank.InvalidArgumentError, "budget must be at least 1"),
    ({"budget_seconds": -1.0}, dashrank.InvalidArgumentError, "budget_seconds must be a positive"),
    ({"measure": 3}, TypeError, "measure must be callable"),
])
def test_bad_options(tiny: dashrank.Model, space: dashrank.Space, kwargs: dict[str, Any],
                     error: type, message: str) -> None:
    args: dict[str, Any] = {"measure": by_length, **kwargs}
    with pytest.raises(error) as e:
        tiny.tune(BAND, space, 2, **args)
    assert message in str(e.value)


def test_keyboard_interrupt_stops_tuning(tiny: dashrank.Model, space: dashrank.Space) -> None:
    calls = []

    def measure(program: str) -> float:
        calls.append(program)
        if len(calls) == 3:
            _thread.interrupt_main()  # Ctrl-C while a measurement runs
        return 1.0

    with pytest.raises(KeyboardInterrupt):
        tiny.tune(BAND, space, 10, measure=measure, budget=40)
    assert len(calls) == 3


def test_system_exit_in_measure_propagates(tiny: dashrank.Model, space: dashrank.Space) -> None:
    def measure(program: str) -> float:
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        tiny.tune(BAND, space, 3, measure=measure)


def test_measure_runs_a_real_command(tiny: dashrank.Model, space: dashrank.Space) -> None:
    """What the docs do with stock TACO, with `sh` standing in for the measurer."""
    def measure(program: str) -> float:
        out = subprocess.run(["sh", "-c", 'printf "%s" "$1" | wc -c', "sh", program],
                             capture_output=True, text=True, check=True)
        return float(out.stdout)

    r = tiny.tune(BAND, space, 2, measure=measure, strategy="top-k")
    assert [m.ms for m in r.measurements] == [by_length(m.toolchain) for m in r.measurements]

"""`dashrank-export`: the console script dispatches to each command's module."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TESTDATA
from dashrank_onnx import cli
from dashrank_onnx.bundle import read_bundle


def test_usage_lists_every_command(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert f"  {name} " in out
    assert cli.main([]) == 2
    assert cli.main(["spgemm"]) == 2
    assert "unknown command 'spgemm'" in capsys.readouterr().err


def test_every_command_module_has_a_main():
    import importlib
    for module, _ in cli.COMMANDS.values():
        assert callable(importlib.import_module(f"dashrank_onnx.{module}").main)


def test_the_installed_script_writes_and_checks_a_bundle(tmp_path):
    exe = shutil.which("dashrank-export", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("dashrank-export not installed (pip install -e ./onnx)")
    out = tmp_path / "cognate"
    run = subprocess.run([exe, "cognate-random", "--out", str(out), "--heads", "spade/spmm",
                          "--seed", "3"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert read_bundle(out).heads.keys() == {"spade/spmm"}
    check = subprocess.run([exe, "manifest", str(out)], capture_output=True, text=True)
    assert check.returncode == 0 and "featurizer sha256:" in check.stdout
    bad = subprocess.run([exe, "manifest", str(TESTDATA / "bad" / "corrupted-weight")],
                         capture_output=True, text=True)
    assert bad.returncode != 0

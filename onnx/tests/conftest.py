from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data" / "waco"
TESTDATA = REPO / "tests" / "data"


@pytest.fixture
def shared():
    if not (SHARED / "weights").is_dir():
        pytest.skip(f"real WACO data not found at {SHARED} (../shared is absent)")
    return SHARED

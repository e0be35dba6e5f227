"""The data other tools wrote (``../shared/data`` beside the checkout: the
MCAP conformance suite, rosbag2's test bags, real datasets), which the
peers'-data tests read. Absent, those tests say so loudly (a warning and a
skip reason in capitals); under CI (the ``CI`` environment variable set, as
``.ci/run`` sets it), which always has the data, its absence is a failure,
never a quiet skip."""

import os
import pathlib
import warnings

import pytest

SHARED_DATA = pathlib.Path(__file__).resolve().parents[4] / "shared" / "data"


def require(path: pathlib.Path, what: str, module: bool = False) -> pathlib.Path:
    """``path`` if it is here; else a failure under CI, a loud skip elsewhere."""
    if path.exists():
        return path
    message = f"{path} is not here: {what} have nothing to read"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI always has ../shared/data beside the checkout", pytrace=False)
    warnings.warn(f"SHARED DATA ABSENT: {message}", stacklevel=2)
    pytest.skip(f"SHARED DATA ABSENT: {message}", allow_module_level=module)
    return path

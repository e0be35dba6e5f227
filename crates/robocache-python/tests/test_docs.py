"""The README's and docs/'s code blocks, run as written.

Every ```python and ```sh block is preceded by a marker comment:

- ``<!-- docs-test: run -->``: run here, in a working directory whose
  files have the names the docs use (``lift_ph.hdf5``, ``runs/`` and
  ``map.toml``, ``~/lerobot/aloha_sim``, ``aloha/``, ``act_episodes/``, ``pusht.zarr``, ``umi.zarr.zip``), made from the test
  fixtures by robocache and h5py (see ``world``). A Python block runs in one
  namespace per document, after the document's earlier blocks, with
  ``robocache``, ``torch`` and ``np`` imported; ``setup=NAME`` first runs a
  setup below that defines the arrays an illustrative block names. A shell
  block runs its ``robocache`` lines with the built CLI.
- ``<!-- docs-test: skip REASON; nearest: FILE::TEST -->``: a block that
  cannot run here (a GPU, a network store, the Hub, a download, a synopsis
  of options), with the test that runs its nearest CPU equivalent, checked
  to exist.
"""

import os
import pathlib
import re
import shlex
import shutil
import subprocess

import numpy as np
import pytest

import robocache

REPO = next((p for p in pathlib.Path(__file__).resolve().parents if (p / "README.md").is_file() and (p / "docs").is_dir()),
            None)
if REPO is None:  # the Python tests copied outside a checkout (the GPU bundle)
    pytest.skip("no checkout around the tests: no README.md and docs/ to run", allow_module_level=True)
DOCS = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
FIXTURES = REPO / "crates" / "robocache-datasets" / "tests" / "fixtures"
MARKER = re.compile(r"<!-- docs-test: (run|skip)\b(.*?)-->")
LANGS = {"python": "python", "sh": "sh", "bash": "sh", "shell": "sh"}


def blocks():
    """Every Python and shell block: (document, line, language, code, marker text or None)."""
    out = []
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        at = 0
        while at < len(lines):
            fence = re.match(r"^```(\w+)\s*$", lines[at])
            if fence and fence.group(1) in LANGS:
                end = next(k for k in range(at + 1, len(lines)) if lines[k].startswith("```"))
                before = next((lines[k] for k in range(at - 1, -1, -1) if lines[k].strip()), "")
                marker = MARKER.search(before)
                out.append((doc, at + 1, LANGS[fence.group(1)], "\n".join(lines[at + 1:end]), marker))
                at = end + 1
            elif lines[at].startswith("```"):
                at = next(k for k in range(at + 1, len(lines)) if lines[k].startswith("```")) + 1
            else:
                at += 1
    return out


BLOCKS = blocks()


def block_id(block):
    doc, line, lang, _, _ = block
    return f"{doc.relative_to(REPO)}:{line}"


def test_every_block_says_whether_it_runs():
    unmarked = [block_id(b) for b in BLOCKS if b[4] is None]
    assert not unmarked, f"blocks without a <!-- docs-test: run|skip ... --> marker: {unmarked}"
    assert len(BLOCKS) > 30


@pytest.mark.parametrize("block", [b for b in BLOCKS if b[4] and b[4].group(1) == "skip"], ids=block_id)
def test_a_skipped_block_names_its_nearest_test(block):
    reason = block[4].group(2)
    found = re.search(r"nearest: (\S+)::(\w+)", reason)
    assert found and reason.split(";")[0].strip(), f"{block_id(block)}: `skip REASON; nearest: FILE::TEST`"
    path, name = REPO / found.group(1), found.group(2)
    assert path.is_file(), f"{block_id(block)}: no {path}"
    assert re.search(rf"(def|fn) {name}\b", path.read_text()), f"{block_id(block)}: no test `{name}` in {path}"


# `map.toml`: the arm's joints and commands (its cameras are 8×6, too small
# for H.264, which the docs' conversions write).
MAPPING = """fps = 30
[streams."observation.state"]
topic = "/joint_states"
field = "position"
joints = ["j1", "j2", "j3"]
[streams.action]
topic = "/cmd"
field = "data"
"""
CAMERA = """[streams."observation.images.top"]
topic = "/scene/image"
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A working directory holding the files the docs name, and HOME for ``~``."""
    h5py = pytest.importorskip("h5py")
    import importlib.util

    root = tmp_path_factory.mktemp("docs")
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    make_fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_fixtures)
    make_fixtures.robomimic(str(root / "lift_ph.hdf5"))
    assert h5py.File(root / "lift_ph.hdf5", "r")["data"]
    (root / "runs").mkdir()
    shutil.copy(FIXTURES / "ros2" / "arm_mcap" / "arm_mcap.mcap", root / "runs" / "arm.mcap")
    shutil.copy(FIXTURES / "ros2" / "clouds_mcap" / "clouds_mcap.mcap", root / "runs" / "lidar.mcap")
    (root / "map.toml").write_text(MAPPING)
    home = root / "home"
    (home / "lerobot").mkdir(parents=True)
    # An ALOHA-like LeRobot root (a top camera, state, action), written by robocache from the arm bag.
    (root / "aloha.toml").write_text(MAPPING + CAMERA)
    arm = robocache.open(FIXTURES / "ros2" / "arm_mcap", mapping=str(root / "aloha.toml"))
    arm.to_lerobot(home / "lerobot" / "aloha_sim", fps=30, task="pick the cube", cameras="image")
    os.symlink(home / "lerobot" / "aloha_sim", root / "aloha")
    # A PushT-like one (`observation.image`, state, action) at 10 fps.
    pusht = (MAPPING + CAMERA).replace("observation.images.top", "observation.image").replace("fps = 30", "fps = 10")
    (root / "pusht.toml").write_text(pusht)
    robocache.open(FIXTURES / "ros2" / "arm_mcap", mapping=str(root / "pusht.toml")).to_lerobot(
        home / "lerobot" / "pusht", fps=10, task="push the T", cameras="image")
    # ALOHA/ACT episodes written by ACT's recording code: JPEG cameras where
    # OpenCV (its encoder) is installed, raw ones where not.
    spec = importlib.util.spec_from_file_location("make_aloha_fixtures", FIXTURES / "make_aloha_fixtures.py")
    make_aloha = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_aloha)
    make_aloha.write_real(str(root / "act_episodes"), 3, 12, compress=importlib.util.find_spec("cv2") is not None)
    # Replay buffers written by zarr-python (the committed fixtures).
    shutil.copytree(FIXTURES / "zarr" / "pusht_v2.zarr", root / "pusht.zarr")
    shutil.copy(FIXTURES / "zarr" / "umi_v2.zarr.zip", root / "umi.zarr.zip")
    return root, home


@pytest.fixture()
def in_world(world, monkeypatch):
    root, home = world
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(home))
    for made in ("out",):
        shutil.rmtree(root / made, ignore_errors=True)
    return root


SETUPS = {
    # docs/python.md's operations: arrays of the shapes the block's comments give.
    "ops": """
rng = np.random.default_rng(0)
data = rng.standard_normal((2, 40, 3)).astype(np.float32)
times = np.tile(np.linspace(0.0, 0.39, 40), (2, 1))
targets = np.tile(np.linspace(0.0, 0.38, 20), (2, 1))
q = rng.standard_normal((2, 40, 5)).astype(np.float32); t = times
joints, joint_t = data, times
camera, cam_t = rng.standard_normal((2, 12, 4)).astype(np.float32), np.tile(np.linspace(0.0, 0.39, 12), (2, 1))
gripper, grip_t = rng.integers(0, 2, (2, 5, 1)).astype(np.float32), np.tile(np.linspace(0.0, 0.4, 5), (2, 1))
points = rng.uniform(0.0, 3.0, (1000, 3)).astype(np.float32)
rgb = rng.uniform(0.0, 1.0, (1000, 3)).astype(np.float32)
cloud_index = np.repeat(np.arange(2, dtype=np.int32), 500); B = 2
""",
    # A PushT-like LeRobot root, as docs/python.md's LeRobot block names it.
    "pusht": """
root = os.path.expanduser("~/lerobot/pusht")
""",
    # One sample of each live stream, as the README's deployment block names them.
    "live": """
t, eef_pos, eef_quat = 1.0, np.zeros(3, np.float32), np.array([0.0, 0.0, 0.0, 1.0], np.float32)
""",
    # Two datasets' window counts and an epoch, as the MixtureSampler block names them.
    "sampler": """
a, b, epoch = range(120), range(300), 0
""",
}


def cli():
    for candidate in (REPO / "target" / "debug" / "robocache", REPO / "target" / "release" / "robocache"):
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("robocache")
    if found is None:
        pytest.skip("no robocache CLI built (cargo build -p robocache-cli)")
    return found


NAMESPACES = {}


@pytest.mark.parametrize("block", [b for b in BLOCKS if b[4] and b[4].group(1) == "run"], ids=block_id)
def test_a_block_runs_as_written(block, in_world):
    doc, line, lang, code, marker = block
    options = marker.group(2)
    if lang == "sh":
        for command in code.splitlines():
            command = command.split("#")[0].strip()
            if not command:
                continue
            argv = shlex.split(command)
            assert argv[0] == "robocache", f"{block_id(block)}: a run block runs robocache commands: {command}"
            done = subprocess.run([cli(), *argv[1:]], cwd=in_world, capture_output=True, text=True,
                                  env={**os.environ, "HOME": os.environ["HOME"]}, timeout=600)
            assert done.returncode == 0, f"{block_id(block)}: `{command}`:\n{done.stdout}\n{done.stderr}"
        return
    namespace = NAMESPACES.setdefault(doc, {"robocache": robocache, "np": np, "os": os,
                                            "torch": pytest.importorskip("torch")})
    setup = re.search(r"setup=(\w+)", options)
    if setup:
        exec(SETUPS[setup.group(1)], namespace)
    # `...` placeholders in loops are the reader's code: they run as `pass`.
    exec(compile(code, f"{block_id(block)}", "exec"), namespace)

"""Where this build of robocache runs: the wheel's platform tag and the
glibc its extension module needs, read from what is installed (the wheel's
``WHEEL`` file, the extension's ELF version needs), not from what a build
script was told."""

from __future__ import annotations

import functools
import struct
from typing import BinaryIO, List, Optional

# ELF: the section type of the GNU version needs (.gnu.version_r).
_SHT_GNU_VERNEED = 0x6FFFFFFE


@functools.lru_cache(maxsize=None)
def wheel_platform() -> Optional[str]:
    """The platform tag of the installed wheel (``manylinux_2_28_x86_64``,
    or ``linux_x86_64`` for a wheel built on this machine), or ``None``
    where robocache was not installed from a wheel."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution
    except ImportError:  # pragma: no cover (Python < 3.8)
        return None
    try:
        wheel = distribution("robocache").read_text("WHEEL")
    except (PackageNotFoundError, OSError):
        return None
    platforms: List[str] = []
    for line in (wheel or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Tag":
            platform = value.strip().split("-")[-1]
            if platform not in platforms:
                platforms.append(platform)
    return ".".join(platforms) or None


@functools.lru_cache(maxsize=None)
def required_glibc(path: str) -> Optional[str]:
    """The newest ``GLIBC_x.y`` symbol version the ELF file at ``path``
    needs: the oldest glibc it loads on (``None`` for a file that is not a
    64-bit little-endian ELF or needs no versioned glibc symbol). Reads the
    section headers, the version needs and their strings, not the whole
    file (the extension module is about 50 MB)."""
    try:
        with open(path, "rb") as f:
            return _newest_glibc(_version_needs(f))
    except (OSError, struct.error, IndexError, ValueError):
        return None


def _read(f: BinaryIO, offset: int, size: int) -> bytes:
    f.seek(offset)
    data = f.read(size)
    if len(data) != size:
        raise ValueError("truncated ELF file")
    return data


def _version_needs(f: BinaryIO) -> List[str]:
    """The names of every version an ELF64 little-endian file needs."""
    header = _read(f, 0, 64)
    if header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", header, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", header, 0x3A)
    table = _read(f, shoff, shentsize * shnum)
    sections = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
    names: List[str] = []
    for _name, kind, _flags, _addr, offset, size, link, info, _align, _entsize in sections:
        if kind != _SHT_GNU_VERNEED:
            continue
        needs = _read(f, offset, size)
        strings = _read(f, sections[link][4], sections[link][5])
        need = 0
        for _ in range(info):
            _version, count, _file, aux, next_need = struct.unpack_from("<HHIII", needs, need)
            entry = need + aux
            for _ in range(count):
                _hash, _flags2, _other, name, next_aux = struct.unpack_from("<IHHII", needs, entry)
                names.append(strings[name:strings.index(b"\0", name)].decode("ascii", "replace"))
                if not next_aux:
                    break
                entry += next_aux
            if not next_need:
                break
            need += next_need
    return names


def _newest_glibc(names: List[str]) -> Optional[str]:
    versions = []
    for name in names:
        if name.startswith("GLIBC_") and name[6:].replace(".", "").isdigit():
            versions.append(tuple(int(part) for part in name[6:].split(".")))
    return ".".join(str(part) for part in max(versions)) if versions else None

"""What the installed build has: the wheel `pip install` builds (and the
one these tests run on) has every CPU video decoder with its assembly."""

import platform

import robocache


def test_build_info_names_every_decoder_of_every_codec():
    info = robocache.build_info()
    assert info["version"] == robocache.__version__
    decoders = info["video_decoders"]
    assert sorted(decoders) == ["av1", "h264", "hevc"]
    assert [d["decoder"] for d in decoders["av1"]] == ["rav1d", "nvdec"]
    assert [d["decoder"] for d in decoders["h264"]] == ["openh264", "nvdec"]
    assert [d["decoder"] for d in decoders["hevc"]] == ["libde265", "nvdec"]
    for codec in decoders.values():
        assert codec[0]["device"] == "cpu" and codec[0]["assembly"] in (True, False, None)
        assert codec[1] == {"decoder": "nvdec", "device": "gpu", "assembly": None}
    assert robocache.info()["build"] == info


def test_build_info_says_where_the_build_runs():
    info = robocache.build_info()
    # The installed wheel's platform tag: the portable wheels are
    # manylinux_2_28, one built here is this machine's linux_<arch>.
    assert info["platform"] in (f"manylinux_2_28_{platform.machine()}", f"linux_{platform.machine()}"), info
    major, minor = (int(part) for part in info["glibc"].split(".")[:2])
    assert (major, minor) >= (2, 2), info
    libc = platform.libc_ver()
    if libc[0] == "glibc":
        # It loaded, so this glibc is at least the one it needs.
        assert tuple(int(p) for p in libc[1].split(".")[:2]) >= (major, minor), (libc, info)
    if info["platform"].startswith("manylinux_2_28"):
        assert (major, minor) <= (2, 28), info


def test_the_glibc_a_binary_needs_is_read_from_its_version_needs(tmp_path):
    from robocache import _platform

    python = tmp_path / "not-elf"
    python.write_bytes(b"#!/bin/sh\n")
    assert _platform.required_glibc(str(python)) is None
    assert _platform.required_glibc(str(tmp_path / "missing")) is None
    truncated = tmp_path / "truncated"
    truncated.write_bytes(b"\x7fELF\x02\x01" + b"\0" * 10)
    assert _platform.required_glibc(str(truncated)) is None
    # Python's own executable needs some glibc where the platform is glibc.
    import sys

    if platform.libc_ver()[0] == "glibc":
        assert _platform.required_glibc(sys.executable) is not None


def test_the_default_build_decodes_with_assembly():
    # The default features of the Python package are the fast decoders; a
    # build without NASM on x86-64 stops instead of giving a slow one.
    decoders = robocache.build_info()["video_decoders"]
    if platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64"):
        assert decoders["av1"][0]["assembly"] is True, decoders
        assert decoders["h264"][0]["assembly"] is True, decoders
    if platform.machine() in ("x86_64", "AMD64"):
        assert decoders["hevc"][0]["assembly"] is True, decoders
    else:
        # libde265 has no SIMD code for aarch64 (its NEON code is 32-bit ARM).
        assert decoders["hevc"][0]["assembly"] is None, decoders
    assert robocache.build_info()["cpu_video_decoders_have_assembly"] is True, decoders

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
        assert codec[0]["device"] == "cpu" and isinstance(codec[0]["assembly"], bool)
        assert codec[1] == {"decoder": "nvdec", "device": "gpu", "assembly": None}
    assert robocache.info()["build"] == info


def test_the_default_build_decodes_with_assembly():
    # The default features of the Python package are the fast decoders; a
    # build without NASM on x86-64 stops instead of giving a slow one.
    decoders = robocache.build_info()["video_decoders"]
    if platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64"):
        assert decoders["av1"][0]["assembly"] is True, decoders
        assert decoders["h264"][0]["assembly"] is True, decoders
    if platform.machine() in ("x86_64", "AMD64"):
        assert robocache.build_info()["cpu_video_decoders_have_assembly"] is True, decoders

"""ROS 2 bags that other tools wrote (rosbag2's own test bags and real
recordings, in ``../shared/data`` beside the checkout), read by robocache
and by ``rosbags`` as the oracle: every message of every topic that
``rosbags`` deserialises has the same fields, the same values bit for bit
and the same log time in ``robocache.bag_messages``; every topic robocache
cannot decode says why (``robocache.bag_decode``); and opening a bag gives
streams, or an error that says why, never an empty result without one."""

import dataclasses
import struct

import numpy as np
import pytest

import robocache
from shared_data import SHARED_DATA as SHARED, require
BAG_ROOTS = [SHARED / "mcap-conformance" / "real", SHARED / "real" / "ros2"]


def bag_files():
    files = []
    for root in BAG_ROOTS:
        if root.exists():
            files += sorted(p for p in root.rglob("*") if p.suffix in (".mcap", ".db3"))
    return files


def plain(value, typestore):
    """A rosbags value as robocache.bag_messages gives it: a message's
    fields (not its constants) by name, arrays as lists, numbers as Python's."""
    if dataclasses.is_dataclass(value):
        _, fields = typestore.fielddefs[value.__msgtype__]
        return {name: plain(getattr(value, name), typestore) for name, _ in fields}
    if isinstance(value, np.ndarray):
        return [plain(v, typestore) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [plain(v, typestore) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def same(a, b, path="value"):
    """Equal, floats bit for bit; an assertion naming the field where not."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, float) and isinstance(b, float), f"{path}: {a!r} vs {b!r}"
        assert struct.pack("<d", a) == struct.pack("<d", b), f"{path}: {a!r} vs {b!r}"
    elif isinstance(a, bytes):
        # A uint8/byte/char array: rosbags gives its numbers.
        # rosbags reads `byte` (rosidl's unsigned octet) as int8: the same bits.
        assert isinstance(b, list) and list(a) == [v & 0xFF for v in b], f"{path}: {a!r} vs {b!r}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), f"{path}: fields {list(a)} vs {list(b)}"
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: {len(a)} vs {len(b) if isinstance(b, list) else b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    else:
        assert type(a) is type(b) and a == b, f"{path}: {a!r} vs {b!r}"


def rosbags_messages(bag):
    """Per topic its rosbags-deserialised (log time, value), or why rosbags cannot read the bag or topic."""
    rosbags = pytest.importorskip("rosbags.highlevel")
    from rosbags.typesys import Stores, get_typestore

    try:
        reader = rosbags.AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_HUMBLE))
        reader.open()
    except Exception as error:  # rosbags refuses the whole bag (it cannot parse a service definition)
        return None, f"{type(error).__name__}: {error}"
    out, refused = {}, {}
    try:
        for connection, t, raw in reader.messages():
            if connection.topic in refused:
                continue
            try:
                value = reader.deserialize(raw, connection.msgtype)
            except Exception as error:  # no definition of the type, or a message it cannot read
                refused[connection.topic] = f"{type(error).__name__}: {error}"
                out.pop(connection.topic, None)
                continue
            out.setdefault(connection.topic, []).append((t, plain(value, reader.typestore)))
    finally:
        reader.close()
    return out, refused


@pytest.mark.parametrize("bag", bag_files(), ids=lambda p: str(p.relative_to(SHARED)))
def test_every_message_rosbags_reads_reads_the_same(bag):
    references, refused = rosbags_messages(bag)
    decoded = {t["topic"]: t for t in robocache.bag_decode(bag)}
    if references is None:
        # rosbags cannot open it: robocache reads it or says per topic why not.
        assert decoded, f"{bag}: {refused}"
        return
    compared = 0
    for topic, messages in references.items():
        report = decoded[topic]
        # rosbags decodes any message as CDR; robocache refuses a topic that
        # says it holds another encoding (rosbag2's `wrong_rmw_test`), with why.
        if report["error"] is not None and "robocache decodes ROS 2's cdr" in report["error"]:
            continue
        assert report["error"] is None, f"{bag} {topic}: rosbags reads it, robocache says {report['error']}"
        ours = robocache.bag_messages(bag, topic)
        assert len(ours) == len(messages), f"{bag} {topic}"
        for k, (mine, (t, value)) in enumerate(zip(ours, messages)):
            assert mine["log_time_ns"] == t, f"{bag} {topic} message {k}"
            same(mine["value"], value, f"{topic}[{k}]")
            compared += 1
    # Topics rosbags has no definition for: robocache says why too, or reads them.
    for topic in refused:
        report = decoded[topic]
        assert report["error"] is not None or report["messages"] > 0, f"{bag} {topic}"
    if not bag_files():
        pytest.skip(f"{SHARED} is not here")
    print(f"{bag.name}: {compared} messages equal")


@pytest.mark.parametrize("bag", bag_files(), ids=lambda p: str(p.relative_to(SHARED)))
def test_a_bag_opens_with_streams_or_says_why_not(bag):
    try:
        dataset = robocache.open(bag)
    except robocache.Error as error:
        message = str(error)
        assert str(bag.name) in message or "topic" in message, message
        return
    assert dataset.streams, f"{bag}: opened with no stream and no error"
    episode = dataset.episodes[0]
    assert episode["len"] >= 1 and episode["duration_s"] >= 0.0


def test_the_shared_data_is_here_or_the_tests_say_so():
    require(SHARED, "the third-party bag tests")
    assert len(bag_files()) > 30


def test_service_events_read_as_their_service_says():
    """rosbag2's service-event bags (Jazzy): the `.srv` text read as the event
    message rosidl generates. No other reader decodes them (rosbags cannot parse
    the `---`), so the service is the oracle: every AddTwoInts response is
    the sum of its request, matched by sequence number, and every event's
    stamp is within a minute of its log time."""
    bag = SHARED / "mcap-conformance" / "real" / "rosbag2_cpp" / "test" / "rosbag2_cpp" / "bags" / "only_services.mcap"
    require(bag, "the service-event tests")
    events = robocache.bag_messages(bag, "/add_two_ints/_service_event")
    assert len(events) == 12
    requests, sums = {}, {}
    for event in events:
        info = event["value"]["info"]
        stamp = info["stamp"]["sec"] * 10**9 + info["stamp"]["nanosec"]
        assert abs(stamp - event["log_time_ns"]) < 60 * 10**9, event
        assert len(info["client_gid"]) == 16
        for request in event["value"]["request"]:
            requests[info["sequence_number"]] = request["a"] + request["b"]
        for response in event["value"]["response"]:
            sums[info["sequence_number"]] = response["sum"]
    assert requests and requests == sums, (requests, sums)

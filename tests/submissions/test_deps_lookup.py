"""A lock's pins looked up on the index's JSON pages (PEP 691) instead of resolved again."""

from __future__ import annotations

import pytest

from submissions.deps.lookup import NotJson, locked_pins, lookup
from submissions.deps.resolve import ResolveFailed
from tests.stubs.index import LocalIndex


def test_only_a_set_of_exact_pins_is_looked_up() -> None:
    assert locked_pins(["tenacity==9.2.1", "rich==15.0.0"]) == [
        ("tenacity", "9.2.1"),
        ("rich", "15.0.0"),
    ]
    for loose in (
        ["tenacity>=9"],
        ["rich==15.*"],
        ["x==1; sys_platform == 'win32'"],
        ["x[socks]==1"],
    ):
        assert locked_pins(loose) is None


def test_each_pin_gets_the_index_wheels_of_its_version_only() -> None:
    with LocalIndex(json_api=True) as index:
        old, _ = index.add("alpha", "1.0")
        new, _ = index.add("alpha", "2.0")
        other, _ = index.add("alpha", "2.0", tag="cp311-cp311-manylinux_2_17_x86_64")
        index.yanked.add(other)
        resolved = lookup([("alpha", "2.0")], index_url=index.url, timeout=10)
    (pin,) = resolved.pins
    # Not 1.0's; the yanked one stays selectable for an exact pin (PEP 592).
    assert sorted(w.filename for w in pin.wheels) == sorted([new, other])
    assert pin.wheels[0].url.startswith(index.server.url + "/files/")  # made absolute
    assert pin.wheels[0].size and len(pin.wheels[0].sha256) == 64
    assert old not in {w.filename for w in pin.wheels}


def test_a_wheel_for_another_python_is_not_offered() -> None:
    with LocalIndex(json_api=True) as index:
        fn, _ = index.add("alpha", "1.0")
        index.requires_python[fn] = ">=3.99"
        with pytest.raises(ResolveFailed, match="has no wheels"):
            lookup([("alpha", "1.0")], index_url=index.url, timeout=10, python="3.11.2")
        assert lookup([("alpha", "1.0")], index_url=index.url, timeout=10).pins


def test_an_index_in_trouble_is_not_the_hand_ins_fault() -> None:
    from tests.stubs.servers import Handler, StubServer

    class Busy(Handler):
        def do_GET(self) -> None:
            self.send_json(503, {"detail": "maintenance"})

    with StubServer(Busy) as server, pytest.raises(ResolveFailed) as info:
        lookup([("alpha", "1.0")], index_url=f"{server.url}/simple", timeout=10)
    assert info.value.infrastructure and "503" in str(info.value)


def test_a_package_or_version_the_index_lacks_says_so() -> None:
    with LocalIndex(json_api=True) as index:
        index.add("alpha", "1.0")
        with pytest.raises(ResolveFailed, match="not found in the package registry") as info:
            lookup([("nope", "1.0")], index_url=index.url, timeout=10)
        assert not info.value.infrastructure  # the hand-in named it: fail, not error
        with pytest.raises(ResolveFailed, match=r"alpha==3\.0 has no wheels"):
            lookup([("alpha", "3.0")], index_url=index.url, timeout=10)


def test_an_index_without_json_pages_is_left_to_the_resolver() -> None:
    with LocalIndex() as index:
        index.add("alpha", "1.0")
        with pytest.raises(NotJson):
            lookup([("alpha", "1.0")], index_url=index.url, timeout=10)


def test_an_unreachable_index_is_a_resolve_failure_naming_the_cause() -> None:
    with pytest.raises(ResolveFailed, match="could not be reached: ConnectError"):
        lookup([("alpha", "1.0")], index_url="http://127.0.0.1:9/simple", timeout=5)


def test_a_dropped_connection_is_tried_again() -> None:
    from tests.stubs.index import _IndexHandler
    from tests.stubs.servers import StubServer

    class Flaky(_IndexHandler):
        drops = 1

        def do_GET(self) -> None:
            if Flaky.drops:
                Flaky.drops -= 1
                self.close_connection = True
                self.connection.shutdown(2)
                return
            super().do_GET()

    index = LocalIndex(json_api=True)
    index.add("alpha", "1.0")
    with StubServer(Flaky, index=index) as server:
        index.server = server
        (pin,) = lookup([("alpha", "1.0")], index_url=index.url, timeout=10).pins
    assert Flaky.drops == 0 and pin.wheels

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from triage.cassette import CassetteTransport
from triage.tools import ToolBox

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_network(monkeypatch):
    """Any connect or DNS lookup during replay is a bug: make it explode."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access during replay: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def tickets():
    return json.loads((REPO / "data" / "tickets.json").read_text(encoding="utf-8"))


@pytest.fixture
def toolbox():
    return ToolBox(REPO / "data")


@pytest.fixture
def replay():
    return CassetteTransport("replay", REPO / "cassettes")

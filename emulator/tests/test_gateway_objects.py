"""What the gateway stand-in reads from routes and Gateways (``standins/gateway/objects.py``):
durations, rules it cannot play (named, never ignored), HTTP listeners only."""

from __future__ import annotations

import pytest

from kubemu.standins.gateway.objects import (
    duration_s,
    gateway_status,
    listener_ports,
    unsupported,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("300s", 300), ("1m30s", 90), ("500ms", 0.5), ("1h", 3600), ("0s", None)],
)
def test_gateway_api_durations(text: str, seconds: float | None) -> None:
    assert duration_s(text) == seconds


def test_a_bad_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="not a Gateway API duration"):
        duration_s("5 minutes")


def test_rules_the_stand_in_cannot_play_are_named() -> None:
    rule = {
        "matches": [{"path": {"type": "RegularExpression", "value": "/v1/.*"}, "headers": [{}]}],
        "filters": [{"type": "RequestHeaderModifier"}],
        "timeouts": {"request": "10s", "backendRequest": "5s"},
    }
    assert unsupported(rule) == [
        "filters (1)",
        "matches.headers",
        "path type RegularExpression",
        "timeouts.backendRequest",
    ]
    assert unsupported({"matches": [{"path": {"type": "PathPrefix", "value": "/"}}]}) == []


def test_only_http_listeners_are_served_and_others_say_why() -> None:
    gateway = {
        "metadata": {"name": "gw", "generation": 1},
        "spec": {
            "listeners": [
                {"name": "http", "protocol": "HTTP", "port": 80},
                {"name": "tls", "protocol": "HTTPS", "port": 443},
            ]
        },
    }
    assert listener_ports(gateway) == [80]
    status = gateway_status(gateway, True, "10.0.0.1", 1)
    tls = next(lst for lst in status["listeners"] if lst["name"] == "tls")
    accepted = next(c for c in tls["conditions"] if c["type"] == "Accepted")
    assert accepted["status"] == "False"
    assert accepted["reason"] == "UnsupportedProtocol"
    assert status["addresses"] == [{"type": "IPAddress", "value": "10.0.0.1"}]

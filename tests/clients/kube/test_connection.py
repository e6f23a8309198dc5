"""Connecting: token from ${env:}, never a literal; kubeconfig errors are the user's to fix;
API errors translated into testbed's exception tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.clients.kube import ConnectionSpec, connect
from testbed.clients.kube.errors import from_status, translate
from testbed.core.errors import (
    ClusterAccessDenied,
    ClusterConflict,
    ClusterNotFound,
    ClusterUnreachable,
    InputError,
)


def test_server_and_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESTER_SERVICE_ACCOUNT_TOKEN", "s3cr3t")
    spec = ConnectionSpec(
        api_server="https://api.example:6443", token="${env:TESTER_SERVICE_ACCOUNT_TOKEN}"
    )
    api = connect(spec)
    config = api.configuration
    assert config.host == "https://api.example:6443"
    assert config.get_api_key_with_prefix("authorization") == "Bearer s3cr3t"
    assert "s3cr3t" not in spec.describe()
    assert "s3cr3t" not in repr(spec)


def test_literal_or_unset_tokens_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InputError, match="env:NAME"):
        connect(ConnectionSpec(api_server="https://k", token="literal"))
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    with pytest.raises(InputError, match="NOPE_TOKEN"):
        connect(ConnectionSpec(api_server="https://k", token="${env:NOPE_TOKEN}"))


def test_missing_kubeconfig_and_unknown_context(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no kubeconfig"):
        connect(ConnectionSpec(kubeconfig=str(tmp_path / "none")))
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
        "current-context: x\n"
    )
    assert (
        connect(ConnectionSpec(kubeconfig=str(config))).configuration.host == "http://127.0.0.1:1"
    )
    with pytest.raises(InputError, match=r"no context 'nope' \(its contexts: x\)"):
        connect(ConnectionSpec(kubeconfig=str(config), context="nope"))


def test_errors_are_translated_with_the_clusters_message() -> None:
    body = b'{"kind":"Status","message":"pods is forbidden: cannot create","reason":"Forbidden"}'
    denied = from_status(403, body, "create Pod x")
    assert isinstance(denied, ClusterAccessDenied)
    assert "pods is forbidden" in str(denied)
    assert "Role" in str(denied)
    assert isinstance(from_status(404, b"{}", "get"), ClusterNotFound)
    assert isinstance(from_status(409, b"{}", "create"), ClusterConflict)
    unreachable = translate(ConnectionRefusedError("refused"), "list Node")
    assert isinstance(unreachable, ClusterUnreachable)
    assert "list Node" in str(unreachable)

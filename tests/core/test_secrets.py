"""Secrets masked by what they are, not by their length (security suite): every value a
``${env:NAME}`` reference resolves to is hidden wherever it comes back, however short."""

from __future__ import annotations

import pytest

from testbed.core.secrets import MASK, mask, values

pytestmark = pytest.mark.security


@pytest.mark.parametrize("secret", ["ab1", "xy", "Q", "a much longer token-value"])
def test_a_secret_is_masked_whatever_its_length(
    secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHORT_SECRET", secret)
    found = values(["--token=${env:SHORT_SECRET}"])
    assert found == [secret]
    shown = mask(f"login failed for token {secret}: denied ({secret})", found)
    assert secret not in shown
    assert shown.count(MASK) == 2


def test_longer_secrets_go_first_and_references_are_redacted_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OUTER", "abc1")
    monkeypatch.setenv("INNER", "c1")
    monkeypatch.setenv("EMPTY", "")
    found = values(["${env:INNER} ${env:OUTER}", "${env:EMPTY} ${env:UNSET_ONE}"])
    assert found == ["abc1", "c1"]  # unset and empty variables reveal nothing
    assert mask("abc1 then c1, ${env:OUTER}", found) == "*** then ***, ***"
    assert mask("nothing to hide", []) == "nothing to hide"

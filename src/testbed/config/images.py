"""What an image can run, where that is knowable before a pod starts: testbed's own image
carries testbed's servers (sim, hf), its probes and its worker — never a server under test
(vLLM, TGI, TGIS). A campaign that names testbed's image for one is refused at validation
(exit 2, naming the field) instead of crash-looping in the cluster."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from testbed.config.server_kinds import kind_of

#: The repository of testbed's image when no ``backend.image`` names another.
OWN_REPOSITORY = "testbed"


def repository(image: str) -> str:
    """``registry/ns/name:tag@digest`` → ``registry/ns/name`` (a bare ``name:tag`` → ``name``)."""
    name = image.split("@", 1)[0]
    head, _, tail = name.rpartition("/")
    tail = tail.split(":", 1)[0]
    return f"{head}/{tail}" if head else tail


def own_image_refusals(
    deployments: Sequence[Any], own_image: str | None, server_image: str | None,
    images: Mapping[Any, str],
) -> list[tuple[str, tuple[int | str, ...]]]:  # fmt: skip
    """(message, field path) for each server under test whose image is testbed's own."""
    own = {OWN_REPOSITORY, *([repository(own_image)] if own_image else [])}
    found: list[tuple[str, tuple[int | str, ...]]] = []
    for i, d in enumerate(deployments):
        if not kind_of(d).under_test:
            continue
        given = getattr(d, "image", None)
        image = server_image or given or images.get(d.server)
        if not image or repository(image) not in own:
            continue
        at: tuple[int | str, ...] = (
            ("backend", "server_image") if server_image
            else ("deployments", i, "image") if given
            else ("backend", "images", d.server)
        )  # fmt: skip
        found.append(
            (
                f"{d.name} is a {d.server} server, but its image {image} is testbed's own, which"
                f" has no {d.server} in it — name a {d.server} image, or use server: sim or hf"
                " for testbed's own servers",
                at,
            )
        )
    return found

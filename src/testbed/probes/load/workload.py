"""What the load probe does differently per kind of dataset, in one place.

A plain dataset (synthetic, a prompts file) is a list of prompts encoded before the load
starts, sent by :class:`~testbed.probes.load.runner.LoadGenerator` in the profile's stages.
A trace (:mod:`.trace`) is such a list too, sent in one stage at the trace's own offsets.
Sessions (:mod:`.sessions`) have no prompt list: their requests are encoded as they are
sent, with the history so far, by :class:`~testbed.probes.load.session_runner.
SessionGenerator` — in this process or in every load child (the spec carries the
conversations).

The probe (:mod:`.probe`) and the load children (:mod:`.multiprocess`) call these
functions where they build prompts, plan stages and make a generator.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from testbed.clients.apis import APIS
from testbed.clients.http import ConnectionPool
from testbed.config.load import Dataset, LoadProbe
from testbed.config.workload import SessionDataset, TraceDataset
from testbed.probes.load import dataset, mix, profiles, sessions, trace
from testbed.probes.load.runner import LoadGenerator, Stage
from testbed.probes.load.session_runner import SessionGenerator, TurnEncoder
from testbed.probes.load.tokens import TokenCounter

#: Makes a generator: (sender, items, payloads, counter, write, options, **kwargs).
GeneratorFactory = Callable[..., LoadGenerator]


def items_of(ds: Dataset, counter: TokenCounter, seed: int, base_dir: Path) -> list[dataset.Item]:
    """The prompts encoded before the load: a plain dataset's, a trace's (in its order);
    none for sessions (each turn is encoded when it is sent)."""
    if isinstance(ds, TraceDataset):
        return trace.load(ds, counter, seed, base_dir).items
    if isinstance(ds, SessionDataset):
        return []
    return dataset.build(ds, counter, seed, base_dir)


def first_stages(config: LoadProbe, items: list[dataset.Item], base_dir: Path) -> list[Stage]:
    """The stages planned before any ran: a trace's one stage at its offsets, else the
    profile's (:func:`.profiles.first_stages`)."""
    ds = config.dataset
    if config.profile == "trace" and isinstance(ds, TraceDataset):
        offsets, period = trace.timing(ds, base_dir)  # the prompts are built already
        return [trace.stage(config, trace.Trace(items, offsets, period))]
    return profiles.first_stages(config)


def session_spec(
    config: LoadProbe, counter: TokenCounter, seed: int, base_dir: Path
) -> dict[str, Any] | None:
    """What a generator of sessions needs (this process or a load child), or None for
    datasets that are not sessions."""
    ds = config.dataset
    if not isinstance(ds, SessionDataset):
        return None
    conversations = sessions.build(ds, counter, seed, base_dir)
    # a model mix deals conversations, not turns: a session's history stays with its model
    models = mix.schedule(config.models, len(conversations)) if config.models else None
    return {
        "unit": ds.unit,
        "conversations": [c.to_json() for c in conversations],
        "models": models,
    }


def generator_factory(
    spec: dict[str, Any] | None,
    pool: ConnectionPool,
    *,
    api: str,
    model: str,
    stream: bool,
    ignore_eos: bool,
    extra_body: dict[str, Any] | None = None,
) -> GeneratorFactory:
    """:class:`LoadGenerator` for prompts; for sessions (``spec`` from
    :func:`session_spec`), a maker of :class:`SessionGenerator` with the same signature."""
    if spec is None:
        return LoadGenerator
    conversations = [sessions.Conversation.from_json(c) for c in spec["conversations"]]
    encoder = TurnEncoder(
        pool,
        api=APIS[api],
        model=model,
        stream=stream,
        ignore_eos=ignore_eos,
        extra_body=extra_body,
        models=spec["models"],
    )
    unit = spec["unit"]

    def make(sender: Any, _items: Any, _payloads: Any, *args: Any, **kwargs: Any) -> LoadGenerator:
        return SessionGenerator(sender, conversations, encoder, *args, unit=unit, **kwargs)

    return make


def factory_in_child(spec: dict[str, Any], pool: ConnectionPool) -> GeneratorFactory:
    """:func:`generator_factory` from a load child's spec (:mod:`.multiprocess`)."""
    return generator_factory(
        spec.get("sessions"),
        pool,
        api=spec["api"],
        model=spec["model"],
        stream=spec["stream"],
        ignore_eos=spec["ignore_eos"],
        extra_body=spec.get("extra_body"),
    )

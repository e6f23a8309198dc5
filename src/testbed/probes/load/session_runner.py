"""The load generator of multi-turn sessions: each turn's request carries the history.

A live session keeps its history as the server saw it: the chat messages so far (``api:
chat``: every user message and every answer that came back, in order) or the prompt grown
by each turn (completions, TGI, TGIS: ``prompt + answer + "\\n" + next message``), so a
server with prefix caching finds the whole history in its cache. A turn's request is
encoded when it is sent — its body depends on the answers before it — and its
``input_tokens`` are the history's: the previous turn's prompt, its answer (the client's
count) and the new message.

What the profile's concurrency and rate count (``dataset.unit``):

- ``sessions``: a closed-loop worker runs one session at a time, turn after turn, with
  ``think_time_s`` between an answer and the next turn; an open-loop arrival starts a
  session. A turn's lag is measured from the end of its think time.
- ``turns``: the load's slots and arrivals are turn requests; each takes the turn of a
  session whose think time is over (oldest first), or else starts a new session — so the
  slots never idle while sessions think.

A turn that fails ends its session (there is no answer to grow the history with). Sessions
are dealt to load processes round-robin, and start again from the first when every one
has run. Records carry ``session`` (the session's number in the run), ``turn`` (0 for the
first) and ``item`` (the conversation's index in the dataset).
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass, field, replace
from typing import Any

from testbed.clients.apis import Api
from testbed.clients.counts import Limits
from testbed.clients.http import ConnectionPool
from testbed.core.clock import monotonic_ns
from testbed.probes.load.dataset import Item, request_of
from testbed.probes.load.runner import LoadGenerator, Options, RecordSink, Sender, Stage, StageRun
from testbed.probes.load.schedule import PreciseTimer
from testbed.probes.load.sessions import Conversation
from testbed.probes.load.tokens import TokenCounter


@dataclass
class LiveSession:
    """A session in progress: its conversation, history and the next turn to send."""

    number: int  # the session's number in the run (records' ``session``)
    item: int  # its conversation's index in the dataset
    conversation: Conversation
    turn: int = 0
    input_tokens: int = 0  # the last request's prompt tokens (the history's, client-counted)
    prompt: str = ""  # the grown prompt (completions, tgi, tgis)
    messages: list[dict[str, str]] = field(default_factory=list)  # the history (chat)

    @property
    def done(self) -> bool:
        return self.turn >= len(self.conversation.turns)


class TurnEncoder:
    """A session's next turn as the API's wire bytes (encoded when it is sent)."""

    def __init__(
        self,
        pool: ConnectionPool,
        *,
        api: Api,
        model: str,
        stream: bool,
        ignore_eos: bool,
        extra_body: dict[str, Any] | None = None,
        models: list[str] | None = None,
    ) -> None:
        self._pool, self._api, self._model = pool, api, model
        self._stream, self._ignore_eos = stream, ignore_eos
        self._extra_body = extra_body or {}
        #: a model mix: each conversation's model (by its index), so a session stays on one
        self._models = models

    def next_request(self, live: LiveSession) -> tuple[Item, bytes]:
        """The item (prompt so far, its tokens, output asked) and the bytes of the turn."""
        api, turn = self._api, live.conversation.turns[live.turn]
        if api.chat:
            live.messages.append({"role": "user", "content": turn.text})
            prompt = turn.text
        else:
            live.prompt = f"{live.prompt}\n{turn.text}" if live.prompt else turn.text
            prompt = live.prompt
        model = self._models[live.item] if self._models else self._model
        item = Item(prompt, live.input_tokens + turn.tokens, turn.output_tokens, model or None)
        request = request_of(item, api, model, ignore_eos=self._ignore_eos)
        if api.chat:
            request = replace(request, messages=live.messages)
        body = api.merge(api.body(request), self._extra_body)
        return item, api.encode(self._pool, body, stream=self._stream)

    def answered(self, live: LiveSession, item: Item, answer: str, answer_tokens: int) -> None:
        """Grow the history by the answer; the next turn is due."""
        if self._api.chat:
            live.messages.append({"role": "assistant", "content": answer})
        else:
            live.prompt += answer
        live.input_tokens = item.input_tokens + answer_tokens
        live.turn += 1


class SessionGenerator(LoadGenerator):
    """Runs a stage of multi-turn sessions (see the module docstring)."""

    def __init__(
        self,
        pool: Sender,
        conversations: list[Conversation],
        encoder: TurnEncoder,
        counter: TokenCounter,
        write: RecordSink,
        options: Options,
        *,
        unit: str = "sessions",
        **kwargs: Any,
    ) -> None:
        super().__init__(pool, [], [], counter, write, options, **kwargs)
        self._conversations, self._encoder, self._unit = conversations, encoder, unit
        self._started = 0  # sessions this process started
        self._ready: collections.deque[LiveSession] = collections.deque()
        self._budget = -1  # turn requests this process may still send (-1: no count)
        self._stop_ns: int | None = None
        self._last_sent_ns = 0

    def _new_session(self) -> LiveSession:
        """The next session of this process's share (round-robin), from the start again
        when every conversation has run."""
        procs, proc = self._opt.procs, self._opt.proc
        index = (proc + self._started * procs) % len(self._conversations)
        live = LiveSession(proc + self._started * procs, index, self._conversations[index])
        self._started += 1
        return live

    def _may_send(self) -> bool:
        return self._budget != 0 and (self._stop_ns is None or monotonic_ns() < self._stop_ns)

    async def _turn(self, stage: str, live: LiveSession, scheduled: int, queued: int) -> bool:
        """Send the session's next turn; whether it was answered (a failure ends it)."""
        self._budget -= 1
        number = self._next
        self._next += self._opt.procs
        item, payload = self._encoder.next_request(live)
        response, record = await self._send(
            stage,
            scheduled,
            queued,
            number,
            item,
            payload,
            Limits(item.output_tokens),
            item=live.item,
            session=live.number,
            turn=live.turn,
        )
        self._last_sent_ns = max(self._last_sent_ns, response.t_sent_ns)
        if record["error"] is not None:
            live.turn = len(live.conversation.turns)
            return False
        self._encoder.answered(live, item, response.text, record["output_tokens"])
        return True

    def _begin(self, stage: Stage, t0: int) -> None:
        self._stop_ns = t0 + round(stage.duration_s * 1e9) if stage.duration_s else None
        budget = self._share(stage.max_requests) if stage.max_requests is not None else -1
        self._budget, self._last_sent_ns = budget, 0

    def _stopped_at(self) -> int:
        now = monotonic_ns()
        return min(self._stop_ns or now, self._last_sent_ns or now)

    # -- unit: turns (the base loops; each slot takes a ready turn or a new session) ------
    async def _one(self, stage: str, scheduled: int, queued: int) -> None:
        live = self._ready.popleft() if self._ready else self._new_session()
        if await self._turn(stage, live, scheduled, queued) and not live.done:
            think = live.conversation.think_s
            if think > 0:
                asyncio.get_running_loop().call_later(think, self._ready.append, live)
            else:
                self._ready.append(live)

    # -- unit: sessions -----------------------------------------------------------------
    async def _session(self, stage: str, live: LiveSession, due: int) -> None:
        """One whole session: its turns in order, each after the think time."""
        while self._may_send():
            if not await self._turn(stage, live, due, 0) or live.done:
                return
            due = monotonic_ns() + round(live.conversation.think_s * 1e9)
            await asyncio.sleep(max(0, due - monotonic_ns()) / 1e9)

    async def _closed_loop(self, stage: Stage, t0: int, run: StageRun) -> None:
        self._begin(stage, t0)
        if self._unit == "turns":
            await super()._closed_loop(stage, t0, run)
            return
        now = monotonic_ns()
        if now < t0:
            await asyncio.sleep((t0 - now) / 1e9)

        async def worker() -> None:
            while self._may_send():
                await self._session(stage.name, self._new_session(), max(t0, monotonic_ns()))

        async with asyncio.TaskGroup() as group:
            for _ in range(self._share(stage.concurrency or 1)):
                group.create_task(worker())
        run.sent = len(self.lags)
        run.t_stop_ns = self._stopped_at()

    async def _open_loop(self, stage: Stage, t0: int, offsets: list[int], run: StageRun) -> None:
        self._begin(stage, t0)
        if self._unit == "turns":
            await super()._open_loop(stage, t0, offsets, run)
            return
        mine = offsets[self._opt.proc :: self._opt.procs]
        run.requested_rate = len(offsets) / (offsets[-1] / 1e9) if len(offsets) > 1 else None
        timer = PreciseTimer()
        run.precise_timer = timer.precise
        try:
            async with asyncio.TaskGroup() as group:
                for offset in mine:
                    if not self._may_send():
                        break
                    await timer.sleep_until(t0 + offset)
                    group.create_task(self._session(stage.name, self._new_session(), t0 + offset))
        finally:
            timer.close()
        run.sent = len(self.lags)
        run.t_stop_ns = self._stopped_at()

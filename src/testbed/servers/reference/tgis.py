"""The TGIS protocol of the reference server: ``fmaas.GenerationService`` over gRPC.

TGIS is where tgis-tester's goldens came from; here the same transformers model answers the
same four methods. Greedy unless ``method`` is SAMPLE; ``max_new_tokens`` 0 means 20;
``min_new_tokens`` > 0 keeps generating past EOS (the engine's ``ignore_eos``, the nearest it
has); ``stop_sequences`` stop the text; ``response.generated_tokens`` lists each token with
its logprob (``token_logprobs``) and ``top_n_tokens`` alternatives. A stream sends the input
token count first, then one message per token; the stop reason comes on the last. Bad
requests are INVALID_ARGUMENT, like TGIS's validation errors.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any

from testbed.servers import grpc_server
from testbed.servers.reference.context import BadRequest, ServerContext, sampling
from testbed.servers.reference.engine import RequestTooLong, Step, TokenInfo
from testbed.servers.reference.sampling import SamplingParams

DEFAULT_MAX_NEW_TOKENS = 20
MAX_TOP_N = 20
_STOP = {"eos_token": "EOS_TOKEN", "stop_sequence": "STOP_SEQUENCE"}


def _parse(ctx: ServerContext, text: str, params: Any) -> tuple[list[int], SamplingParams]:
    stopping, options, sample = params.stopping, params.response, params.sampling
    top_n = options.top_n_tokens
    if top_n > MAX_TOP_N:
        raise BadRequest(f"top_n_tokens must be at most {MAX_TOP_N}")
    fields: dict[str, Any] = {"stop": list(stopping.stop_sequences)}
    if params.method == 1:  # SAMPLE
        fields["temperature"] = sample.temperature or 1.0
        if sample.top_p:
            fields["top_p"] = sample.top_p
        if sample.top_k:
            fields["top_k"] = sample.top_k
        if sample.HasField("seed"):
            fields["seed"] = sample.seed
    else:
        fields["temperature"] = 0.0
    fields["ignore_eos"] = stopping.min_new_tokens > 0
    wants = options.generated_tokens and (options.token_logprobs or top_n)
    settings = sampling(
        fields,
        max_tokens=stopping.max_new_tokens or DEFAULT_MAX_NEW_TOKENS,
        logprobs=top_n if wants else None,
    )
    return ctx.prompt_ids(text), settings


def _token(pb: Any, token: TokenInfo, options: Any) -> Any:
    info = pb.TokenInfo(text=token.text)
    if options.token_logprobs and token.logprob is not None:
        info.logprob = token.logprob
    for _, text, logprob in token.top[: options.top_n_tokens]:
        info.top_tokens.add(text=text, logprob=logprob)
    return info


def _finish(pb: Any, message: Any, step: Step) -> None:
    if step.finish_reason == "error":
        raise RuntimeError(step.error or "generation failed")
    name = _STOP.get(step.stop_kind or "", "MAX_TOKENS")
    message.stop_reason = pb.StopReason.Value(name)


class ReferenceServicer:
    """The four methods, answered by the reference server's engine (its loop)."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    async def _refuse(self, context: Any, exc: Exception) -> None:
        name = "INVALID_ARGUMENT" if isinstance(exc, BadRequest | RequestTooLong) else "INTERNAL"
        await context.abort(grpc_server.code(name), str(exc))

    async def GenerateStream(self, request: Any, context: Any) -> Any:
        _, pb, _ = grpc_server.modules()
        params, options = request.params, request.params.response
        try:
            prompt, settings = _parse(self.ctx, request.request.text, params)
        except (BadRequest, ValueError) as exc:
            await self._refuse(context, exc)
            return
        first = pb.GenerationResponse(input_token_count=len(prompt))
        if options.input_text:
            first.text = request.request.text
        yield first
        count = 0
        try:
            async with aclosing(self.ctx.engine.generate(prompt, settings)) as steps:
                async for step in steps:
                    message = pb.GenerationResponse(text=step.text)
                    if step.token is not None:
                        count += 1
                        if options.generated_tokens:
                            message.tokens.append(_token(pb, step.token, options))
                    message.generated_token_count = count
                    if step.finish_reason is not None:
                        _finish(pb, message, step)
                    yield message
        except (BadRequest, RequestTooLong, RuntimeError) as exc:
            await self._refuse(context, exc)

    async def _one(self, pb: Any, text: str, params: Any) -> Any:
        options = params.response
        prompt, settings = _parse(self.ctx, text, params)
        async with aclosing(self.ctx.engine.generate(prompt, settings)) as steps:
            collected = [s async for s in steps]
        tokens = [s.token for s in collected if s.token is not None]
        message = pb.GenerationResponse(
            input_token_count=len(prompt),
            generated_token_count=len(tokens),
            text=(text if options.input_text else "") + "".join(s.text for s in collected),
        )
        if options.generated_tokens:
            message.tokens.extend(_token(pb, t, options) for t in tokens)
        _finish(pb, message, collected[-1])
        return message

    async def Generate(self, request: Any, context: Any) -> Any:
        _, pb, _ = grpc_server.modules()
        try:  # the prompts of a batch go to the engine together, as TGIS batches them
            responses = await asyncio.gather(
                *(self._one(pb, r.text, request.params) for r in request.requests)
            )
        except (BadRequest, RequestTooLong, ValueError, RuntimeError) as exc:
            await self._refuse(context, exc)
            return None
        return pb.BatchedGenerationResponse(responses=responses)

    async def Tokenize(self, request: Any, context: Any) -> Any:
        _, pb, _ = grpc_server.modules()
        tokenizer = self.ctx.tokenizer
        out = []
        for item in request.requests:
            encoded = tokenizer(item.text, return_offsets_mapping=request.return_offsets)
            ids = list(encoded["input_ids"])
            response = pb.TokenizeResponse(token_count=len(ids))
            if request.return_tokens:
                response.tokens.extend(tokenizer.convert_ids_to_tokens(ids))
            if request.return_offsets:
                response.offsets.extend(
                    pb.TokenizeResponse.Offset(start=a, end=b) for a, b in encoded["offset_mapping"]
                )
            out.append(response)
        return pb.BatchedTokenizeResponse(responses=out)

    async def ModelInfo(self, request: Any, context: Any) -> Any:
        _, pb, _ = grpc_server.modules()
        seq2seq = self.ctx.engine.loaded.kind == "seq2seq"
        kind = (
            pb.ModelInfoResponse.ENCODER_DECODER if seq2seq else pb.ModelInfoResponse.DECODER_ONLY
        )
        return pb.ModelInfoResponse(
            model_kind=kind,
            max_sequence_length=self.ctx.max_len,
            max_new_tokens=self.ctx.max_len,
        )

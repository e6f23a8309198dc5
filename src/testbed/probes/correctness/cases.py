"""Case files: a YAML list of cases, each a request, its expected answer (or error), rules.

A case file is a list (or a mapping with ``cases:``) of::

    - name: capital-of-france
      request: {prompt: "The capital of France is", max_new_tokens: 8, logprobs: 2}
      expected: {text: " Paris.", completion_tokens: 3, finish_reason: stop}
      evaluate: [approx]            # the default; several evaluators must all pass
      skip: [single_shard_only, {when: {dtype: bfloat16}}]
      skip_check: false             # true: run it, check the stream, compare nothing

``expected`` may also be a mapping by protocol (``{openai: …, tgi: …, tgis: …}``) where the
protocols answer differently (stop sequences, finish reason names). ``error`` instead of
``expected`` says the server must refuse the request (``status``, ``message`` contained).
A case with ``api: embeddings`` is an embeddings case (:mod:`.embedding_cases`): its
request is ``input:``, its golden a vector. Mistakes are reported with file:line like the
campaign loader does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, ValidationError, field_validator, model_validator

from testbed.config.deployments import Strict
from testbed.config.diagnostics import describe_errors
from testbed.config.yamlsource import load_yaml
from testbed.core.errors import CampaignError
from testbed.probes.correctness.case_rules import (
    ExpectedError,
    ShardRule,
    SkipRule,
    UnlessRule,
    WhenRule,
    evaluators_shorthand,
    skip_shorthand,
)
from testbed.probes.correctness.embedding_cases import CASE_NAME, EmbeddingCase, load_golden

__all__ = [  # the skip rules and ExpectedError are read from here too
    "PROTOCOLS",
    "AnyCase",
    "ApproxEval",
    "ByProtocol",
    "Case",
    "CaseFile",
    "ContainsEval",
    "EmbeddingCase",
    "Evaluator",
    "ExactEval",
    "Expected",
    "ExpectedError",
    "JsonEval",
    "ProtocolName",
    "RegexEval",
    "RequestSpec",
    "ShardRule",
    "SimilarityEval",
    "SkipRule",
    "UnlessRule",
    "WhenRule",
    "load_case_file",
    "load_case_files",
]

ProtocolName = Literal["openai", "tgi", "tgis"]
PROTOCOLS: tuple[ProtocolName, ...] = ("openai", "tgi", "tgis")


class Message(Strict):
    role: str
    content: str


class RequestSpec(Strict):
    """A request in protocol-neutral terms; the runner maps it onto OpenAI or TGI bodies."""

    prompt: str | None = Field(None, description="completion prompt (both protocols)")
    messages: list[Message] | None = Field(None, description="chat messages (OpenAI only)")
    max_new_tokens: int | None = Field(None, description="tokens to generate at most")
    temperature: float = Field(0.0, description="0 is greedy decoding")
    seed: int | None = Field(None, description="sampling seed (needed when temperature > 0)")
    top_p: float | None = None
    top_k: int | None = None
    stop: list[str] | None = Field(None, description="stop sequences")
    logprobs: int | None = Field(
        None, description="alternatives per token to return (0: the chosen token's only)"
    )
    ignore_eos: bool | None = None
    extra: dict[str, Any] = Field(
        default_factory=dict,
        description="sent verbatim: OpenAI top-level fields, TGI parameters (e.g. a bad one)",
    )

    @field_validator("stop", mode="before")
    @classmethod
    def _one_stop(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _prompt_or_messages(self) -> RequestSpec:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of prompt: (completion) or messages: (chat)")
        return self

    @property
    def chat(self) -> bool:
        return self.messages is not None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


TopLogprobs = list[list[tuple[str, float]]]


class Expected(Strict):
    """What the answer must be; only the fields given are compared."""

    text: str | None = None
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    token_texts: list[str] | None = None
    logprobs: list[float] | None = Field(None, description="of each chosen token")
    top_logprobs: TopLogprobs | None = Field(
        None, description="per token: [text, logprob] pairs, most likely first"
    )


class ByProtocol(Strict):
    """Expected answers that differ by protocol."""

    openai: Expected | None = None
    tgi: Expected | None = None
    tgis: Expected | None = None


# -- evaluators ------------------------------------------------------------------------------
class ExactEval(Strict):
    kind: Literal["exact"]
    fields: list[str] | None = Field(None, description="expected fields compared (default all)")


class ApproxEval(Strict):
    kind: Literal["approx"]
    fields: list[str] | None = None
    rel: float | None = Field(None, ge=0, description="default: the probe's tolerance")
    abs: float | None = Field(None, ge=0)


class RegexEval(Strict):
    kind: Literal["regex"]
    pattern: str
    fullmatch: bool = False


class ContainsEval(Strict):
    kind: Literal["contains"]
    text: list[str] = Field(min_length=1)
    ignore_case: bool = False

    @field_validator("text", mode="before")
    @classmethod
    def _one(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class JsonEval(Strict):
    kind: Literal["json"]
    equals: Any = Field(None, description="the parsed value must equal this (optional)")


class SimilarityEval(Strict):
    kind: Literal["similarity"]
    threshold: float | None = Field(None, ge=-1, le=1, description="default: the probe's")
    to: str | None = Field(None, description="text compared with (default: expected text)")


Evaluator = Annotated[
    ExactEval | ApproxEval | RegexEval | ContainsEval | JsonEval | SimilarityEval,
    Field(discriminator="kind"),
]
_SHORT_FIELD = {"regex": "pattern", "contains": "text", "similarity": "threshold", "json": "equals"}


class Case(Strict):
    """One golden case."""

    name: str = Field(pattern=CASE_NAME)
    description: str = ""
    protocol: Literal["openai", "tgi", "tgis", "both"] | None = Field(
        None, description="protocols this case runs on (default: the probe's)"
    )
    request: RequestSpec
    expected: Expected | ByProtocol | None = None
    error: ExpectedError | None = None
    evaluate: list[Evaluator] | None = Field(None, description="default: [approx]")
    skip: list[SkipRule] = Field(default_factory=list)
    skip_check: bool = Field(False, description="run it (and check the stream), compare nothing")
    stream_twin: bool = Field(True, description="also run it streamed and compare")

    @field_validator("evaluate", mode="before")
    @classmethod
    def _evaluators(cls, value: Any) -> Any:
        return evaluators_shorthand(value, _SHORT_FIELD)

    @field_validator("skip", mode="before")
    @classmethod
    def _rules(cls, value: Any) -> Any:
        return skip_shorthand(value)

    @model_validator(mode="after")
    def _consistent(self) -> Case:
        if self.expected is not None and self.error is not None:
            raise ValueError("give expected: or error:, not both")
        if self.request.chat and self.protocol in ("tgi", "tgis"):
            raise ValueError(
                f"a chat case (messages:) needs the OpenAI protocol, not {self.protocol}"
            )
        if not self.request.greedy and self.request.seed is None and not self.skip_check:
            raise ValueError(
                "temperature > 0 without seed: is not reproducible — add seed: N,"
                " or skip_check: true"
            )
        return self

    def expected_for(self, protocol: ProtocolName) -> Expected | None:
        """The expectation of ``protocol``; TGIS (a fork of TGI, the same names) falls back
        on the ``tgi`` one when the case has none of its own."""
        if isinstance(self.expected, ByProtocol):
            found: Expected | None = getattr(self.expected, protocol)
            if found is None and protocol == "tgis":
                return self.expected.tgi
            return found
        return self.expected

    @property
    def evaluators(self) -> list[Evaluator]:
        return self.evaluate if self.evaluate is not None else [ApproxEval(kind="approx")]

    def needs_expected(self) -> bool:
        """True when an evaluator compares with a recorded answer."""
        if self.skip_check or self.error is not None:
            return False
        return any(
            isinstance(e, ExactEval | ApproxEval)
            or (isinstance(e, SimilarityEval) and e.to is None)
            for e in self.evaluators
        )


def _case_kind(value: Any) -> str:
    """The tag of a case mapping: ``embeddings`` for ``api: embeddings``, else generation
    (another ``api`` value is then refused as a field generation cases do not have)."""
    api = value.get("api") if isinstance(value, dict) else getattr(value, "api", None)
    return "embeddings" if api == "embeddings" else "generate"


AnyCase = Annotated[
    Annotated[Case, Tag("generate")] | Annotated[EmbeddingCase, Tag("embeddings")],
    Discriminator(_case_kind),
]


class CaseFileModel(Strict):
    cases: list[AnyCase] = Field(min_length=1)


@dataclass
class CaseFile:
    """A loaded case file: its generation cases, its embeddings cases (each with its golden
    vectors, read from their files), and where each case is written."""

    path: Path
    cases: list[Case]
    #: (case name, key of its request's ``extra``) → "file:line", for messages about it
    extra_places: dict[tuple[str, str], str] = field(default_factory=dict)
    embedding_cases: list[EmbeddingCase] = field(default_factory=list)
    #: an embeddings case's name → its golden vectors, one per input (when it has some)
    goldens: dict[str, list[list[float]]] = field(default_factory=dict)
    #: a case's name → "file:line" of the case
    places: dict[str, str] = field(default_factory=dict)


def load_case_file(
    path: Path, *, require_expected: bool = False, read_goldens: bool = True
) -> CaseFile:
    """Read and validate one case file; a CampaignError (exit 2) names file:line and fix.
    ``read_goldens=False`` leaves golden files unread (``testbed record`` writes them)."""
    data, prov = load_yaml(path)
    if isinstance(data, list):
        prov.copy_tree((), ("cases",))
        data = {"cases": data}
    if not isinstance(data, dict) or "cases" not in data:
        raise CampaignError(f"{path}: a case file is a list of cases (- name: …, request: …)")
    try:
        model = CaseFileModel.model_validate(data)
    except ValidationError as exc:
        raise CampaignError(describe_errors(exc, data, prov, CaseFileModel, str(path))) from None
    loaded = CaseFile(path, [c for c in model.cases if isinstance(c, Case)])
    problems = []
    for index, case in enumerate(model.cases):
        origin = prov.nearest(("cases", index))
        where = origin.place() if origin else str(path)
        if case.name in loaded.places:
            problems.append(f"{where}: case name '{case.name}' is repeated — names must be unique")
        loaded.places[case.name] = where
        if isinstance(case, EmbeddingCase):
            problems += _embedding_case(loaded, case, where, read_goldens=read_goldens)
            if require_expected and case.needs_expected() and case.expected is None:
                problems.append(
                    f"{where}: case '{case.name}' has no expected: embedding — record one with"
                    " `testbed record`, or evaluate it with ranking only"
                )
            continue
        for key in case.request.extra:
            at = prov.nearest(("cases", index, "request", "extra", key), key=True)
            loaded.extra_places[(case.name, key)] = at.place() if at else where
        if require_expected and case.needs_expected() and case.expected is None:
            problems.append(
                f"{where}: case '{case.name}' has no expected: answer — record one with"
                " `testbed record`, or evaluate it with regex/contains/json only"
            )
    if problems:
        raise CampaignError("\n".join(problems))
    return loaded


def _embedding_case(
    loaded: CaseFile, case: EmbeddingCase, where: str, *, read_goldens: bool
) -> list[str]:
    """Add ``case`` to ``loaded`` with its golden; the problems found (file:line first)."""
    loaded.embedding_cases.append(case)
    if not read_goldens:
        return []
    try:
        golden = load_golden(case, loaded.path.parent)
    except ValueError as exc:
        return [f"{where}: case '{case.name}': {exc}"]
    if golden is not None:
        loaded.goldens[case.name] = golden
    return []


def load_case_files(paths: Iterable[Path], *, require_expected: bool = False) -> list[CaseFile]:
    """Several case files; case names must be unique across them."""
    files = [load_case_file(p, require_expected=require_expected) for p in paths]
    owner: dict[str, Path] = {}
    for case_file in files:
        for name in case_file.places:
            if name in owner and owner[name] != case_file.path:
                raise CampaignError(
                    f"{case_file.path}: case '{name}' is also in {owner[name]} — rename one of them"
                )
            owner[name] = case_file.path
    return files

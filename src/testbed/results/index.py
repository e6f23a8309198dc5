"""The results index: runs, treatments and summary metrics of many runs, for history and
comparison (``testbed compare``, noise bands).

SQLAlchemy 2 over SQLite by default (``index.sqlite`` beside the run directories), or any URL
such as ``postgresql+psycopg://user:${env:PGPASSWORD}@host/db`` for a team. The URL is chosen
with this precedence: ``--index`` flag > ``TESTBED_INDEX_URL`` > the campaign's
``results.index`` > the default. ``${env:NAME}`` references in a URL are resolved when the
engine is created, and only the redacted form is ever shown.

Recording a run replaces what the index held for that run id, in one transaction: recording
twice (a re-rendered report, a resumed run) never duplicates rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sqlalchemy import (
    JSON,
    BigInteger,
    Engine,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
    create_engine,
    delete,
    select,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from testbed.core.errors import InfrastructureError, InputError, MissingDependency
from testbed.core.ids import short_hash
from testbed.core.secrets import redact, resolve
from testbed.results.provenance import PROVENANCE
from testbed.results.run_summary import RunSummary

ENV_URL = "TESTBED_INDEX_URL"
DEFAULT_FILE = "index.sqlite"

_BIGINT = BigInteger().with_variant(Integer(), "sqlite")  # SQLite autoincrements INTEGER only


class Base(DeclarativeBase):
    pass


class RunRow(Base):
    __tablename__ = "testbed_runs"

    run_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    campaign: Mapped[str] = mapped_column(String(200), index=True)
    campaign_hash: Mapped[str] = mapped_column(String(64), index=True)
    started: Mapped[str] = mapped_column(String(40), default="")  # wall-time label (sortable)
    status: Mapped[str] = mapped_column(String(20))
    testbed_version: Mapped[str] = mapped_column(String(40), default="")
    hostname: Mapped[str] = mapped_column(String(200), default="")
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class TreatmentRow(Base):
    __tablename__ = "testbed_treatments"
    __table_args__ = (
        ForeignKeyConstraint(["run_id"], ["testbed_runs.run_id"], ondelete="CASCADE"),
    )

    run_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    treatment_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    dir: Mapped[str] = mapped_column(String(400))
    probe: Mapped[str] = mapped_column(String(40))
    params_key: Mapped[str] = mapped_column(String(64), index=True)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text, default="")


class MetricRow(Base):
    __tablename__ = "testbed_metrics"
    __table_args__ = (
        ForeignKeyConstraint(
            ["run_id", "treatment_id"],
            ["testbed_treatments.run_id", "testbed_treatments.treatment_id"],
            ondelete="CASCADE",
        ),
        Index("ix_testbed_metrics_config_name", "config_hash", "name"),
    )

    id: Mapped[int] = mapped_column(_BIGINT, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(200))
    treatment_id: Mapped[str] = mapped_column(String(64))
    #: The hash of the treatment's fully resolved configuration (its id, in this version).
    config_hash: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200))
    value: Mapped[float] = mapped_column(Float)


@dataclass
class TreatmentEntry:
    """One treatment of a run, as the index keeps it."""

    id: str
    dir: str
    probe: str
    params_key: str  # hash of probe, deployments and params: pairs configs whose ids changed
    params: dict[str, Any]
    status: str
    reason: str = ""
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class RunEntry:
    """One run: what :meth:`ResultsIndex.add_run` stores."""

    run_id: str
    campaign: str
    campaign_hash: str
    started: str
    status: str
    testbed_version: str
    hostname: str
    meta: dict[str, Any] = field(default_factory=dict)
    treatments: list[TreatmentEntry] = field(default_factory=list)

    @classmethod
    def of(cls, summary: RunSummary) -> RunEntry:
        """What the index keeps of a run's summary."""
        run = summary.run
        return cls(
            run_id=run["run_id"],
            campaign=summary.campaign or "",
            campaign_hash=summary.campaign_hash or "",
            started=str(run.get("started") or ""),
            status=summary.status,
            testbed_version=summary.testbed_version or "",
            hostname=str(summary.machine.get("hostname") or ""),
            meta={
                "machine": summary.machine,
                "servers": [server.to_json() for server in summary.servers],
                # what testbed history names at a change point: the run's label and commit
                **{k: run[k] for k in PROVENANCE if run.get(k) is not None},
            },
            treatments=[
                TreatmentEntry(
                    id=row.id,
                    dir=row.dir,
                    probe=row.probe,
                    params_key=row.params_key,
                    params=row.params,
                    status=row.status,
                    reason=row.reason,
                    metrics=row.metrics,
                )
                for row in summary.treatments
            ],
        )


@dataclass(frozen=True)
class Point:
    """One historical value of a metric."""

    run_id: str
    started: str
    value: float


def params_key(probe: str, deployments: Iterable[str], params: Mapping[str, Any]) -> str:
    """What pairs two treatments whose ids differ (a changed default elsewhere in the
    resolved config): the same probe, deployments and factor values."""
    return short_hash({"probe": probe, "deployments": list(deployments), "params": params}, 16)


def resolve_url(flag: str | None, campaign: str | None, runs_dir: Path) -> str:
    """The index URL: flag > ``TESTBED_INDEX_URL`` > campaign ``results.index`` > SQLite
    file ``index.sqlite`` in ``runs_dir``."""
    chosen = flag or os.environ.get(ENV_URL) or campaign
    if chosen:
        return chosen
    return f"sqlite:///{(runs_dir / DEFAULT_FILE).resolve()}"


def shown(url: str) -> str:
    """``url`` as it may be printed: env references masked, a literal password hidden."""
    try:
        return redact(make_url(redact(url)).render_as_string(hide_password=True))
    except ArgumentError:
        return redact(url)


class ResultsIndex:
    """A connection to the results index; creates its tables when missing."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = _engine(url)
        try:
            Base.metadata.create_all(self.engine)
        except SQLAlchemyError as exc:
            self.engine.dispose()
            raise InfrastructureError(f"results index {shown(url)} is unusable: {exc}") from exc

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def add_run(self, run: RunEntry) -> None:
        """Store ``run``, replacing what the index held for the same run id."""
        try:
            with Session(self.engine) as session, session.begin():
                for table in (MetricRow, TreatmentRow, RunRow):  # children first: no cascade
                    session.execute(delete(table).where(table.run_id == run.run_id))
                session.add(_run_row(run))
                session.flush()
                session.add_all(
                    TreatmentRow(run_id=run.run_id, **_fields(t)) for t in run.treatments
                )
                session.flush()
                session.add_all(
                    MetricRow(
                        run_id=run.run_id,
                        treatment_id=t.id,
                        config_hash=t.id,
                        name=name,
                        value=value,
                    )
                    for t in run.treatments
                    for name, value in t.metrics.items()
                )
        except SQLAlchemyError as exc:
            raise InfrastructureError(
                f"recording run {run.run_id} in {shown(self.url)} failed: {exc}"
            ) from exc

    def runs(self, campaign: str | None = None) -> list[RunRow]:
        """Runs, oldest first, optionally of one campaign."""
        query = select(RunRow).order_by(RunRow.started, RunRow.run_id)
        if campaign is not None:
            query = query.where(RunRow.campaign == campaign)
        with Session(self.engine, expire_on_commit=False) as session:
            return list(session.scalars(query))

    def treatments(self, run_id: str) -> list[TreatmentRow]:
        query = select(TreatmentRow).where(TreatmentRow.run_id == run_id)
        with Session(self.engine, expire_on_commit=False) as session:
            return list(session.scalars(query.order_by(TreatmentRow.dir)))

    def history(
        self,
        metric: str,
        *,
        config_hash: str | None = None,
        params_key: str | None = None,
        campaign_hash: str | None = None,
        exclude: Iterable[str] = (),
    ) -> list[Point]:
        """Values of ``metric`` for one treatment configuration (by ``config_hash``, or by
        ``params_key`` when ids changed) over the runs of the index, oldest first, without
        the runs in ``exclude``."""
        if (config_hash is None) == (params_key is None):
            raise ValueError("give exactly one of config_hash or params_key")
        query = (
            select(RunRow.run_id, RunRow.started, MetricRow.value)
            .join(RunRow, RunRow.run_id == MetricRow.run_id)
            .where(MetricRow.name == metric)
            .order_by(RunRow.started, RunRow.run_id)
        )
        if config_hash is not None:
            query = query.where(MetricRow.config_hash == config_hash)
        else:
            query = query.join(
                TreatmentRow,
                (TreatmentRow.run_id == MetricRow.run_id)
                & (TreatmentRow.treatment_id == MetricRow.treatment_id),
            ).where(TreatmentRow.params_key == params_key)
        if campaign_hash is not None:
            query = query.where(RunRow.campaign_hash == campaign_hash)
        excluded = set(exclude)
        with Session(self.engine) as session:
            rows = session.execute(query).all()
        return [Point(r[0], r[1], float(r[2])) for r in rows if r[0] not in excluded]


def _run_row(run: RunEntry) -> RunRow:
    return RunRow(
        run_id=run.run_id,
        campaign=run.campaign,
        campaign_hash=run.campaign_hash,
        started=run.started,
        status=run.status,
        testbed_version=run.testbed_version,
        hostname=run.hostname,
        meta=run.meta,
    )


def _fields(t: TreatmentEntry) -> Mapping[str, Any]:
    return {
        "treatment_id": t.id,
        "dir": t.dir,
        "probe": t.probe,
        "params_key": t.params_key,
        "params": t.params,
        "status": t.status,
        "reason": t.reason,
    }


def _engine(url: str) -> Engine:
    """An engine for ``url`` (``postgresql://`` means psycopg 3, the driver testbed ships)."""
    real = resolve(url)
    try:
        parsed = make_url(real)
    except ArgumentError as exc:
        raise InputError(
            f"results index URL {shown(url)!r} is not a database URL; write e.g."
            " sqlite:///runs/index.sqlite or postgresql+psycopg://user@host/db"
        ) from exc
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    options: dict[str, Any] = {}
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:":
            try:
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InfrastructureError(f"results index {shown(url)}: {exc}") from exc
        options["connect_args"] = {"timeout": 30}  # concurrent runs wait for the write lock
    else:
        options["pool_pre_ping"] = True
    try:
        return create_engine(parsed, **options)
    except (NoSuchModuleError, ModuleNotFoundError) as exc:
        if parsed.get_backend_name() == "postgresql":
            raise MissingDependency("psycopg", "postgres") from exc
        raise InputError(f"results index {shown(url)}: no driver for {parsed.drivername}") from exc

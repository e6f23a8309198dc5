"""How testbed reaches a Kubernetes API: one function, :func:`connect`, builds the client.

Three ways, first that applies wins:

1. ``api_server`` (the API server's URL, a campaign's ``backend.server``) with a bearer
   ``token`` given as ``${env:NAME}`` — tgis-tester's ``TESTER_SERVICE_ACCOUNT_TOKEN`` flow.
   The variable is read at connect time; the token lives only in the client's memory, never
   in a log, a plan or a file testbed writes. (The campaign key keeps tgis-tester's name;
   in code ``server`` means testbed's server kind only.)
2. a kubeconfig: ``kubeconfig`` (a path), else ``$KUBECONFIG``, else ``~/.kube/config``,
   with ``context`` choosing one of its contexts.
3. the pod's service account, when testbed itself runs in a cluster
   (``KUBERNETES_SERVICE_HOST`` is set) and no kubeconfig exists.

Everything a user can get wrong here is an :class:`InputError` (exit 2) that says what to fix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.config.backend_settings import KubernetesSettings
from testbed.core.errors import InputError, MissingDependency
from testbed.core.secrets import is_reference, resolve

DEFAULT_KUBECONFIG = Path("~/.kube/config")


@dataclass(frozen=True)
class ConnectionSpec:
    """Where the API is and who testbed is there. ``token`` is a ``${env:NAME}`` reference."""

    context: str | None = None
    kubeconfig: str | None = None
    api_server: str | None = None  # the API server URL (the campaign's backend.server)
    token: str | None = None
    certificate_authority: str | None = None
    insecure_skip_tls_verify: bool = False

    @classmethod
    def from_backend(cls, backend: KubernetesSettings) -> ConnectionSpec:
        """The spec of a campaign's ``backend:`` section."""
        return cls(
            context=backend.context,
            kubeconfig=backend.kubeconfig,
            api_server=backend.server,
            token=backend.token,
            certificate_authority=backend.certificate_authority,
            insecure_skip_tls_verify=backend.insecure_skip_tls_verify,
        )

    def describe(self) -> str:
        """Where this spec points, for messages (never the token)."""
        if self.api_server:
            return f"API server {self.api_server}"
        path = self.kubeconfig_path()
        if path is not None:
            return f"kubeconfig {path}" + (f" context {self.context}" if self.context else "")
        return "the in-cluster service account"

    def kubeconfig_path(self, environ: Mapping[str, str] | None = None) -> Path | None:
        """The kubeconfig this spec reads, or None when none exists (in-cluster)."""
        env = os.environ if environ is None else environ
        if self.kubeconfig:
            return Path(self.kubeconfig).expanduser()
        if env.get("KUBECONFIG"):
            # kubectl merges a list; testbed reads the first file, as most tools do.
            return Path(env["KUBECONFIG"].split(os.pathsep)[0]).expanduser()
        default = DEFAULT_KUBECONFIG.expanduser()
        if default.exists() or not env.get("KUBERNETES_SERVICE_HOST"):
            return default
        return None


def connect(spec: ConnectionSpec | None = None) -> Any:
    """A ``kubernetes.client.ApiClient`` for ``spec`` (see the module docstring)."""
    try:
        from kubernetes import client, config
    except ImportError as exc:
        raise MissingDependency("kubernetes", "kubernetes") from exc
    spec = spec or ConnectionSpec()
    configuration = client.Configuration()
    if spec.api_server:
        _token_config(spec, configuration)
    else:
        path = spec.kubeconfig_path()
        try:
            if path is None:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                if not path.is_file():
                    raise InputError(
                        f"no kubeconfig at {path}; set KUBECONFIG, backend.kubeconfig, or"
                        " backend.server with backend.token: ${env:NAME}"
                    )
                _check_context(config, path, spec.context)
                config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=str(path), context=spec.context, client_configuration=configuration
                )
        except config.ConfigException as exc:
            raise InputError(f"cannot use {spec.describe()}: {exc}") from exc
    return client.ApiClient(configuration)


def _check_context(config: Any, path: Path, context: str | None) -> None:
    """An unknown context names the ones the kubeconfig has."""
    if context is None:
        return
    contexts, _ = config.list_kube_config_contexts(config_file=str(path))
    names = [str(c.get("name")) for c in contexts or []]
    if context not in names:
        raise InputError(
            f"kubeconfig {path} has no context {context!r} (its contexts: {', '.join(names)});"
            " choose one with --context NAME or backend.context"
        )


def _token_config(spec: ConnectionSpec, configuration: Any) -> None:
    if not spec.token:
        raise InputError(
            f"backend.server is {spec.api_server} but backend.token is not set; set"
            " backend.token: ${env:NAME} (e.g. ${env:TESTER_SERVICE_ACCOUNT_TOKEN})"
        )
    if not is_reference(spec.token):
        raise InputError(
            "backend.token must be an ${env:NAME} reference, never the token itself: a literal"
            " token would be written into the run directory"
        )
    configuration.host = spec.api_server.rstrip("/") if spec.api_server else ""
    configuration.api_key = {"authorization": resolve(spec.token)}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    if spec.certificate_authority:
        ca = Path(spec.certificate_authority).expanduser()
        if not ca.is_file():
            raise InputError(f"backend.certificate_authority {ca} does not exist")
        configuration.ssl_ca_cert = str(ca)
    configuration.verify_ssl = not spec.insecure_skip_tls_verify

"""API errors of the emulated Kubernetes server, answered as ``Status`` objects.

Each :class:`ApiError` carries the HTTP code, the machine-readable ``reason`` and the
``details`` the real API server puts in its ``Status`` (kubectl and the official client
print and branch on them), so a caller sees the same failure here as against a cluster.
"""

from __future__ import annotations

from typing import Any

from kubefacts.errors import Error


class ApiError(Error):
    """A request the emulated API server refuses; :meth:`status` is the body it answers."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(resource: str, group: str, name: str | None) -> dict[str, Any]:
    """StatusDetails: ``name``, ``group`` and ``kind`` are ``omitempty`` in the API's Go
    types, so an empty one (the core group, a nameless create) is left out."""
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if resource:
        details["kind"] = resource
    return details


#: The first words of a field error's body → its ``field.ErrorType`` (a cause's reason).
_CAUSE_TYPES = {
    "Required value": "FieldValueRequired",
    "Invalid value": "FieldValueInvalid",
    "Unsupported value": "FieldValueNotSupported",
    "Duplicate value": "FieldValueDuplicate",
    "Forbidden": "FieldValueForbidden",
    "Not found": "FieldValueNotFound",
    "Too long": "FieldValueTooLong",
    "Too many": "FieldValueTooMany",
    "Internal error": "InternalError",
}


def _cause_type(message: str) -> str:
    head = message.split(":", 1)[0]
    return _CAUSE_TYPES.get(head, "FieldValueInvalid")


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def _about(code: int, reason: str, resource: str, group: str, name: str, what: str) -> ApiError:
    """A refusal about one named object, worded as the server words it (``pods "x" what``)."""
    message = f'{_qualified(resource, group)} "{name}" {what}'
    return ApiError(code, reason, message, _details(resource, group, name))


def not_found(resource: str, group: str, name: str) -> ApiError:
    return _about(404, "NotFound", resource, group, name, "not found")


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return _about(409, "AlreadyExists", resource, group, name, "already exists")


def conflict(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": the object'
        " has been modified; please apply your changes to the latest version and try again",
        _details(resource, group, name),
    )


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 as ``errors.NewInvalid`` builds it: ``causes`` are (field path, error body)
    pairs, as ``field.ErrorList`` gives them; the message aggregates them (``[a, b]`` when
    more than one) after the qualified kind (``Deployment.apps "x" is invalid: …``)."""
    errors = [f"{field}: {message}" for field, message in causes]
    text = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    details = _details(kind, group, name)
    details["causes"] = [
        {"reason": _cause_type(message), "message": message, "field": field}
        for field, message in causes
    ]
    suffix = f": {text}" if errors else ""
    message = f'{_qualified(kind, group)} "{name}" is invalid{suffix}'
    return ApiError(422, "Invalid", message, details)


def entity_too_large(limit: int) -> ApiError:
    """413 as ``errors.NewRequestEntityTooLargeError`` words a body over the server's limit."""
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(resource: str, group: str, name: str, message: str) -> ApiError:
    return ApiError(403, "Forbidden", message, _details(resource, group, name))


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format: {content_type}",
    )

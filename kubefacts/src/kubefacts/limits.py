"""The API server's size limits, as kube-apiserver states them (a fact both sides use: the
emulator enforces them, the export checks what it writes against them).

- :data:`TOTAL_ANNOTATION_BYTES` — apimachinery's ``TotalAnnotationSizeLimitB`` (256 KiB):
  the sum of every annotation's key and value, in bytes (``ValidateAnnotationsSize``).
  ``kubectl apply`` (client-side) copies the whole object into the
  ``kubectl.kubernetes.io/last-applied-configuration`` annotation, so an object over this
  size cannot be applied that way (``kubectl apply --server-side`` keeps no such copy).
- :data:`MAX_DATA_BYTES` — ``core.MaxSecretSize`` (1 MiB): a ConfigMap's ``data`` and
  ``binaryData`` values together (``ValidateConfigMap``), a Secret's decoded ``data``
  (``ValidateSecret``).
- :data:`MAX_REQUEST_BODY_BYTES` — the generic API server's default
  ``MaxRequestBodyBytes`` (3 MiB): a larger request body is a 413.

The wording is the server's: ``field.TooLong`` gives :func:`too_long`'s text.
"""

from __future__ import annotations

from collections.abc import Mapping

TOTAL_ANNOTATION_BYTES = 256 * 1024
MAX_DATA_BYTES = 1024 * 1024
MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024
#: Where kubectl's client-side apply keeps its copy of the applied object.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def too_long(limit: int) -> str:
    """A ``FieldValueTooLong`` error's body (``field.TooLong``: the value is not shown)."""
    return f"Too long: must have at most {limit} bytes"


def annotations_size(annotations: Mapping[str, str]) -> int:
    """Bytes the annotations count against :data:`TOTAL_ANNOTATION_BYTES` (keys and values,
    UTF-8, as Go's ``len`` of a string counts)."""
    return sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items())

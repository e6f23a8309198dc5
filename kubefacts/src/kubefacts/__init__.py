"""What testbed and its emulator (kubemu) agree on, one module each: the one place it is stated.

:mod:`.quantity` parses and formats resource quantities (``"500m"``, ``"32Gi"``) and sums a
pod's requests; :mod:`.times` formats and parses RFC 3339 times as the API writes them;
:mod:`.gpu` names NVIDIA's resources and labels (``nvidia.com/gpu``, MIG slices in both the
campaign's and the device plugin's spelling); :mod:`.fit` answers "does this pod fit this
node" with the scheduler's filters; :mod:`.limits` states the API server's size limits
(annotations, ConfigMap and Secret data, request bodies). The backend, the scale probe and
the emulator all import these, so both sides of the seam agree by construction. No I/O, no
``kubernetes`` client.

Beside the Kubernetes facts: :mod:`.vllm_argv` (how vLLM reads a container's command line),
:mod:`.process_group` (a container's processes as one group), :mod:`.buckets` (S3 objects to
local files, boto3 lazily), :mod:`.ids` (canonical JSON and its hash) and :mod:`.errors` (the
exit-coded error base testbed's ``core.errors`` re-exports).
"""

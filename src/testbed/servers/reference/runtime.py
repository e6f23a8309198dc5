"""Process settings for torch and transformers: offline, quiet, a fixed number of threads.

Called at the start of every entry point of this package, before transformers is imported,
because transformers reads the offline variables once at import time.
"""

from __future__ import annotations

import os


def offline_environment() -> None:
    """Make sure nothing ever tries the model hub, and keep the log free of progress bars."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging

    logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    logging.set_verbosity_error()  # type: ignore[no-untyped-call]


def set_threads(threads: int) -> None:
    """torch's intra-op threads; 1 by default (on 2 shared cores 1 thread beat 2)."""
    import torch

    torch.set_num_threads(max(1, threads))

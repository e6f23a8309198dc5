"""A closed standard output is the reader's choice, not an error.

``testbed plan … | head`` closes the pipe after ten lines; the next write fails with EPIPE
(Python ignores SIGPIPE, so the write raises :class:`BrokenPipeError`, or rich's console
gives up with ``SystemExit(1)``). Well-behaved Unix tools end quietly with exit 0 then. As the
Python docs' "Note on SIGPIPE" says, the fix is not to restore SIGPIPE's default (that would
kill testbed when a *socket* to a server breaks) but to catch the error, point standard output
at ``os.devnull`` so the interpreter's last flush does not fail again, and exit.

The error must be about standard output: a :class:`BrokenPipeError` from a socket that
reached the command line untranslated is a bug, and stays one (:func:`reader_gone` tells the
two apart by asking the kernel whether standard output still has a reader).
"""

from __future__ import annotations

import os
import select
import sys

#: The identity of a file: (device, inode).
FileId = tuple[int, int]


def _stdout_fd() -> int | None:
    try:
        return sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a buffer (tests), or closed
        return None


def stdout_identity() -> FileId | None:
    """What file descriptor 1 refers to now (None when it refers to nothing)."""
    fd = _stdout_fd()
    if fd is None:
        return None
    try:
        found = os.fstat(fd)
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


def reader_gone() -> bool:
    """True when standard output is a pipe or socket whose reading end is closed: the kernel
    reports an error (or hang-up) condition on it instead of room to write."""
    fd = _stdout_fd()
    if fd is None or not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def silence() -> None:
    """Point standard output at ``os.devnull``: what is still buffered, and the interpreter's
    flush at exit, go nowhere instead of raising again."""
    fd = _stdout_fd()
    if fd is None:
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def flush() -> bool:
    """Flush standard output; True (and silenced) when its reader has gone."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        silence()
        return True
    except (AttributeError, ValueError):  # closed or replaced: nothing to flush
        return False
    return False


def gave_up_on_closed_pipe(before: FileId | None) -> bool:
    """True when a library met the closed pipe and put ``os.devnull`` in its place, as
    rich's console does before its ``SystemExit(1)``: descriptor 1 was something else when
    the command began and is the null device now."""
    now = stdout_identity()
    if now is None or now == before:
        return False
    null = os.stat(os.devnull)
    return now == (null.st_dev, null.st_ino)

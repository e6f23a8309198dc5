"""The cluster's storage: objects as dicts, resource versions, watches, admission, deletion.

The lowest layer of the emulator: :class:`~kubemu.storage.store.Store` and what it
applies on every write (admission and defaults, CRDs, the garbage collector, patches,
selectors), plus the API errors every layer raises. It imports nothing else of the emulator.
"""

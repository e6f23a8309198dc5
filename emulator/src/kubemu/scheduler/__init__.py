"""The scheduler of the emulated cluster: binds pending pods to nodes they fit.

:mod:`.scheduler` watches pods and binds them; :mod:`.capacity` keeps what each node has left.
"""

"""The one thing pyproject.toml cannot say without a warning: testbed's C extension.

The streamed response's per-read path (src/testbed/clients/_readpath.c) is optional: where no
C compiler is found, testbed installs without it and reads every response in Python.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "testbed.clients._readpath",
            ["src/testbed/clients/_readpath.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)

"""Build the Cython core. ``FASTLOCK_NO_EXTENSIONS=1`` installs the pure-Python core only;
``FASTLOCK_DEBUG=1`` builds with assertions, line tracing and an annotated HTML file."""

import os

from setuptools import Extension, setup

if os.environ.get("FASTLOCK_NO_EXTENSIONS"):
    ext_modules = []
else:
    from Cython.Build import cythonize

    debug = bool(os.environ.get("FASTLOCK_DEBUG"))
    ext_modules = cythonize(
        [
            Extension(
                "fastlock._core",
                ["src/fastlock/_core.pyx"],
                extra_compile_args=["-O0", "-g", "-UNDEBUG"] if debug else ["-O2"],
                define_macros=[("CYTHON_TRACE", "1")] if debug else [],
            )
        ],
        compiler_directives={
            "language_level": "3",
            "embedsignature": True,
            "linetrace": debug,
        },
        annotate=debug,
    )

setup(ext_modules=ext_modules)

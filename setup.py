"""Build the Cython core: one extension, ``fastlock._core``, from ``src/fastlock/_core.pyx``,
which includes the ``.pxi`` parts in ``src/fastlock/_coreparts/`` and declares what they share
in ``_core.pxd`` (all shipped in the sdist and the wheel). ``FASTLOCK_NO_EXTENSIONS=1`` installs
the pure-Python core only; ``FASTLOCK_DEBUG=1`` builds with invariant checks
(``fastlock._core.DEBUG``: write-buffer bounds, nothing unsent or unread between commands; a
broken one raises AssertionError), line tracing and an annotated HTML file.

The top-level ``lua/`` folder (and its subfolders) ships inside the wheel as the package
data of ``fastlock.lua``, readable with ``importlib.resources.files("fastlock") / "lua"``.
"""

import os
from pathlib import Path

from setuptools import Extension, find_packages, setup

lua_dirs = [Path("lua"), *sorted(p for p in Path("lua").rglob("*") if p.is_dir())]
lua_packages = {".".join(("fastlock", *d.parts)): d.as_posix() for d in lua_dirs}

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
                define_macros=[("CYTHON_TRACE", "1"), ("FASTLOCK_DEBUG", "1")] if debug else [],
            )
        ],
        compiler_directives={
            "language_level": "3",
            "embedsignature": True,
            "linetrace": debug,
        },
        annotate=debug,
    )

setup(
    ext_modules=ext_modules,
    packages=[*find_packages("src"), *lua_packages],
    package_dir={"": "src", **lua_packages},
    package_data={
        "fastlock": ["py.typed", "*.pyi", "*.pyx", "*.pxd"],
        "fastlock._coreparts": ["*.pxi"],
        "fastlock.tools": ["*.c"],
        **{name: ["*.lua"] for name in lua_packages},
    },
    include_package_data=False,
)

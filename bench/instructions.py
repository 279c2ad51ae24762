"""Client instructions per operation under callgrind: the deterministic perf gate.

``python bench/instructions.py`` measures every path and prints the counts, the ratios and
the gate's verdict; ``--update`` (re)writes this toolchain's budgets in ``budgets.toml``;
``--runs 3`` measures several times and prints the spread (the medians are gated or
written). ``tests/test_instructions.py`` runs the same measurement in the test suite.

The paths are ``instruction_paths.py`` here; how they are measured (callgrind, a private
server, a fixed child environment: :mod:`fastlock.tools.instructions`) is the package's, which
``python -m fastlock bench`` uses for its instructions column. This file holds the gate: the
toolchain key, the budgets and the same-run ratios of ``budgets.toml``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import platform
import re
import statistics
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastlock.tools import instructions
from fastlock.tools.instructions import NO_CORE, Measurement, Unavailable, unavailable

sys.path.insert(0, str(Path(__file__).parent))
from instruction_paths import (
    AIO_PATHS,
    CLUSTER_PATHS,
    GATED,
    OBSERVED_PATHS,
    PATHS,
    WAIT_PATHS,
    hiredis_command,
    raw_socket_hiredis,
)

__all__ = [
    "AIO_PATHS",
    "CLUSTER_PATHS",
    "GATED",
    "LOOP_PATHS",
    "NO_CORE",
    "OBSERVED_PATHS",
    "OPTIONAL_BUDGETS",
    "PATHS",
    "REQUIRE_ENV",
    "Unavailable",
    "budget_failures",
    "hiredis_command",
    "load_settings",
    "measure",
    "raw_socket_hiredis",
    "ratio_failures",
    "toolchain",
    "unavailable",
    "write_budgets",
]

BUDGETS = Path(__file__).with_name("budgets.toml")
REQUIRE_ENV = "FASTLOCK_REQUIRE_INSTRUCTION_GATE"
UPDATE = "python bench/instructions.py --update"
OPTIONAL_BUDGETS = frozenset(p.name for p in (*CLUSTER_PATHS, *OBSERVED_PATHS, *WAIT_PATHS))
"""The cluster, observed and wait paths: budgeted only where the toolchain's table has them
(``--update`` on that toolchain writes them), their ratios gated everywhere."""
LOOP_PATHS = frozenset(p.name for p in AIO_PATHS)
"""The asyncio paths: how many replies an event loop's iteration hands over varies a little
with timing, so their counts move more between runs than the others' (``loop_tolerance``)."""
LAYOUT_PATHS = frozenset({"encode: cython core"})
"""The shortest path (2.5k instructions a call) moves with the child's memory layout: 2,542
measured alone and 2,612 (+2.8%) in a full suite's run of the same wheel install (2026-12-07),
so it takes the asyncio paths' tolerance (``loop_tolerance``); its ratio to hiredis is gated too."""
BY_NAME = {p.name: p for p in GATED}


def measure(names: Sequence[str] | None = None, jobs: int = 1) -> Measurement:
    """Measure the gate's paths ``names`` (default: all of them) in ``jobs`` children."""
    chosen = [p.name for p in GATED] if names is None else names
    return instructions.measure(chosen, source=Path(__file__).with_name("instruction_paths.py"), jobs=jobs)


# --------------------------------------------------------------------------- toolchain and budgets


def _output(*command: str) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return "none"


def _extension_build() -> tuple[str, str]:
    """(gcc version, Cython version) recorded in the built extension's binary, or the system
    gcc and "none" without one."""
    spec = importlib.util.find_spec("fastlock._core")
    if spec is None or spec.origin is None:
        return _output("gcc", "-dumpfullversion"), "none"
    data = Path(spec.origin).read_bytes()
    gcc = re.search(rb"GCC: \([^)]*\) ([0-9][0-9.]*)", data)
    cython = re.search(rb"_cython_(\d+_\d+_\d+\w*)", data)
    return (
        gcc.group(1).decode() if gcc else "unknown",
        cython.group(1).decode().replace("_", ".") if cython else "unknown",
    )


def _os_release() -> str:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return platform.system().lower()
    fields = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', text, re.M))
    return f"{fields.get('ID', 'linux')}-{fields.get('VERSION_ID', '?')}"


def toolchain() -> str:
    """What the absolute counts depend on: interpreter (and its compiler), the compiler and
    Cython of the extension, glibc, valgrind, hiredis, the OS release."""
    gcc, cython = _extension_build()
    compiler = platform.python_compiler().lower().replace(" ", "-")
    libc = "-".join(platform.libc_ver()) or "libc-unknown"
    return " ".join(
        (
            f"{platform.python_implementation().lower()}-{platform.python_version()}({compiler})",
            f"ext-gcc-{gcc}",
            f"cython-{cython}",
            libc,
            _output("valgrind", "--version") or "valgrind-none",
            f"hiredis-{importlib.metadata.version('hiredis')}",
            _os_release(),
        )
    )


def load_settings() -> dict[str, Any]:
    """The ``[instructions]`` section of budgets.toml."""
    settings: dict[str, Any] = tomllib.loads(BUDGETS.read_text())["instructions"]
    return settings


def budget_failures(per_op: dict[str, float], budgets: dict[str, int], settings: dict[str, Any]) -> list[str]:
    """A message for each path above its budget by more than the tolerance, or so far under
    it that the budget must be lowered, or without a budget (unless in ``OPTIONAL_BUDGETS``)."""
    stale, failures = settings["stale_below"], []
    for name, count in per_op.items():
        wide = name in LOOP_PATHS or name in LAYOUT_PATHS
        tolerance = settings["loop_tolerance"] if wide else settings["tolerance"]
        budget = budgets.get(name)
        if budget is None and name in OPTIONAL_BUDGETS:
            continue  # reported, and its ratio gated, but not budgeted on this toolchain
        if budget is None:
            failures.append(f"{name}: {count:,.0f} instructions/op, no budget for it on this toolchain")
        elif count > budget * (1 + tolerance):
            failures.append(
                f"{name}: {count:,.0f} instructions/op is over its budget {budget:,} by "
                f"{count / budget - 1:+.1%} (tolerance {tolerance:.0%})"
            )
        elif count < budget * (1 - stale):
            failures.append(
                f"{name}: {count:,.0f} instructions/op is {1 - count / budget:.1%} under its budget"
                f" {budget:,} (more than {stale:.0%}): lower the budget ({UPDATE})"
            )
    return failures


def ratio_failures(per_op: dict[str, float], ratios: dict[str, list[Any]]) -> tuple[list[str], list[str]]:
    """(report lines, failures) of the same-run ratios; a ratio with an unmeasured side is
    reported as such."""
    lines, failures = [], []
    for label, (top, bottom, bound, limit) in ratios.items():
        if top not in per_op or bottom not in per_op:
            lines.append(f"{label}: not measured ({top!r} / {bottom!r})")
            continue
        ratio = per_op[top] / per_op[bottom]
        bad = ratio > limit if bound == "max" else ratio < limit
        line = (
            f"{label}: {top} / {bottom} = {per_op[top]:,.0f} / {per_op[bottom]:,.0f} = {ratio:.3f}"
            f" ({bound}imum {limit})"
        )
        lines.append(line + (" FAILED" if bad else " ok"))
        if bad:
            failures.append(line)
    return lines, failures


def write_budgets(key: str, per_op: dict[str, float], budgets: Path = BUDGETS) -> None:
    """Replace (or append) the table of toolchain ``key`` in ``budgets`` (its header and the
    ``"path" = count`` lines under it; comments and other tables stay)."""
    header = f'[instructions.budgets."{key}"]'
    table = [header] + [f'"{name}" = {round(count)}' for name, count in per_op.items()]
    lines = budgets.read_text().splitlines()
    if header in lines:
        start = lines.index(header)
        end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith('"')), len(lines))
        lines[start:end] = table
    else:
        lines += ["", *table]
    budgets.write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------- command line


def _report(runs: list[Measurement]) -> None:
    for name in runs[0].per_op:
        counts = [m.per_op[name] for m in runs]
        spread = (max(counts) - min(counts)) / min(counts)
        print(f"{name:40s} " + " ".join(f"{c:10,.0f}" for c in counts) + f"   spread {spread:.3%}")
    for name, why in runs[0].skipped.items():
        print(f"{name:40s} skipped: {why}")
    print(
        "seconds per run (wall / CPU): " + ", ".join(f"{m.seconds:.1f} / {m.cpu_seconds:.1f}" for m in runs)
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--update", action="store_true", help="write this toolchain's budgets to budgets.toml"
    )
    parser.add_argument("--runs", type=int, default=1, help="measure this many times, print the spread")
    parser.add_argument("--jobs", type=int, default=1, help="instrumented children run side by side")
    parser.add_argument(
        "-k", dest="select", action="append", help="only the paths whose name contains this (repeatable)"
    )
    options = parser.parse_args(argv)
    if options.update and options.select:
        parser.error("--update writes every path's budget: measure them all (no -k)")
    why = unavailable()
    if why:
        print(f"instruction gate cannot run: {why}")
        return 2
    key = toolchain()
    print(f"toolchain: {key}")
    try:
        names = [p for p in BY_NAME if any(k in p for k in options.select)] if options.select else None
        runs = [measure(names, jobs=options.jobs) for _ in range(options.runs)]
    except Unavailable as exc:
        print(f"instruction gate cannot run: {exc}")
        return 2
    _report(runs)
    settings = load_settings()
    median = {name: statistics.median(m.per_op[name] for m in runs) for name in runs[0].per_op}
    lines, failures = ratio_failures(median, settings["ratios"])
    print("\n".join(lines))
    if options.update:
        write_budgets(key, median)
        print(f"wrote budgets for {key} to {BUDGETS}")
        return 0
    budgets = settings.get("budgets", {}).get(key)
    if budgets is None:
        print(f"NO BUDGETS for this toolchain: absolute counts not checked ({key})")
    else:
        failures += budget_failures(median, budgets, settings)
        unbudgeted = [name for name in median if name in OPTIONAL_BUDGETS and name not in budgets]
        if unbudgeted:
            print(f"not budgeted on this toolchain (reported, ratios gated): {', '.join(unbudgeted)}")
    print("\n".join(failures) or "instruction gate: ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

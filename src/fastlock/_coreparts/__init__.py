"""The parts of the two cores, in one place (the naming rule: docs/architecture.md).

``<group>.pxi`` / ``<group>_<part>.pxi`` are the Cython parts ``_core.pyx`` includes (in its
include order, declared in ``_core.pxd``); ``<group>_py.py`` is the pure-Python twin of group
``<group>``, and ``_core_py.py`` assembles the twins as ``_core.pyx`` assembles the parts.
"""

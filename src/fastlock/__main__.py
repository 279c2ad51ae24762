"""``python -m fastlock``: the command line (:mod:`fastlock.tools.cli`)."""

from fastlock.tools.cli import main

raise SystemExit(main())

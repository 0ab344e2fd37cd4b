"""`python -m tools.bench`: see `tools/bench/cli.py` and docs/benchmarks.md."""

import sys

from tools.bench.cli import main

sys.exit(main())

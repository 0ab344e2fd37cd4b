"""`python -m tools.fuzz`: see `tools/fuzz/cli.py` and docs/testing.md."""

import sys

from tools.fuzz.cli import main

sys.exit(main())

"""`python -m tools.zoo`: see `tools/zoo/cli.py` and docs/zoo.md."""

import sys

from tools.zoo.cli import main

sys.exit(main())

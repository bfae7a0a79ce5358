"""``python -m edgeplan``."""

import sys

from edgeplan.cli.main import main

sys.exit(main())

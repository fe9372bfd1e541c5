"""``python -m loopscope`` runs the ``loopscope`` command."""

import sys

from .offline.cli import main

sys.exit(main())

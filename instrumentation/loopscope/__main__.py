"""``python -m loopscope`` runs the ``loopscope`` command."""

import sys

from .cli import main

sys.exit(main())

"""The exit codes of every ``loopscope`` command, stated once (the agent side, the collector's
and the dashboard's commands alike)."""

from typing import Final

EXIT_OK: Final = 0
"""Done; for a check (``eval``, ``analyze``), nothing failed."""
EXIT_BAD_INPUT: Final = 1
"""An input could not be read or used (a file, a store, a collector), or a check failed; the
message on standard error says which."""
EXIT_USAGE: Final = 2
"""The command line itself is wrong (an unknown option, a missing or malformed value)."""

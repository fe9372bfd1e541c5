"""``--against CHECKOUT``: import another checkout's package beside this one.

A benchmark that times "before" and "after" in one process, round by round, gets a ratio that
holds on a noisy machine. The package is imported under a name of its own; this works for
packages whose modules import one another relatively (loopscope and its core do).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_package(checkout: Path, path: str, name: str) -> ModuleType:
    """The package at ``checkout / path``, imported as ``name``; exits with a clear message
    when the checkout has no such package."""
    package = checkout / path
    if not (package / "__init__.py").is_file():
        raise SystemExit(f"--against: no package at {package}")
    spec = importlib.util.spec_from_file_location(
        name, package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

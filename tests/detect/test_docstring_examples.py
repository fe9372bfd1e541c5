"""The examples in the detection core's docstrings run, and say what the core does."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

import loopscope.detect

MODULES = [loopscope.detect] + [
    importlib.import_module(f"loopscope.detect.{info.name}")
    for info in pkgutil.iter_modules(loopscope.detect.__path__)
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples_run(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"


def test_the_package_example_is_there() -> None:
    """An example removed instead of mended would pass the test above."""
    assert doctest.testmod(loopscope.detect).attempted >= 4

"""The examples in the public API's docstrings run, and say what the code does: every module
of the three packages (the detection core's are also checked, with a floor, in
tests/detect/test_docstring_examples.py)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

import loopscope
import loopscope_collector
import loopscope_dashboard

_SKIP = ("loopscope_dashboard.app", "loopscope_dashboard.views", "loopscope_dashboard.sidebar")
"""Streamlit pages run when imported: not modules to import here (nor ``__main__``s)."""


def _modules() -> list[str]:
    names = []
    for package in (loopscope, loopscope_collector, loopscope_dashboard):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.startswith(_SKIP) and not info.name.endswith("__main__"):
                names.append(info.name)
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name: str) -> None:
    module: ModuleType = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"


def test_the_package_example_is_there() -> None:
    """An example removed instead of mended would pass the test above."""
    assert doctest.testmod(loopscope).attempted >= 3

"""Argument types the command lines share (the collector's, ``dashboard``'s and ``up``'s), so a
command of one package does not import another package's command module for them."""

from __future__ import annotations

import argparse
import ipaddress
import re


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 0 (any free port / off) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is out of range (0-65535)")
    return port


def byte_count(text: str) -> int:
    """An argparse type: a whole number of bytes, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of bytes: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a number of bytes is 0 or more, not {value}")
    return value


def memory_size(text: str) -> str:
    """An argparse type: an amount of memory as DuckDB reads it (``512MB``, ``2GiB``)."""
    if not re.fullmatch(r"\d+(\.\d+)?\s*([KMGT]i?B)", text.strip(), re.IGNORECASE):
        raise argparse.ArgumentTypeError(f"not an amount of memory: {text!r} (say 512MB or 2GB)")
    return text.strip()


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback name or address (the rule for binding without auth)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

"""The spike rule's command-line options, for ``loopscope collector``, ``loopscope alerts``
and ``export --prometheus-rules`` (light to import: the rule itself is ``manager``)."""

from __future__ import annotations

import argparse
from typing import Any


def add_alert_options(group: Any) -> None:
    """The spike rule's settings, for ``collector`` and ``export --prometheus-rules``."""
    group.add_argument("--alert-window", metavar="SECONDS", type=float, default=60.0,
                       help="rolling window of the no-progress rate (default 60)")
    group.add_argument("--alert-factor", metavar="X", type=float, default=3.0,
                       help="fire at X times the service's own baseline rate (default 3)")
    group.add_argument("--alert-threshold", metavar="RATE", type=float, default=0.5,
                       help="fire at this no-progress rate whatever the baseline (default 0.5)")
    group.add_argument("--alert-min-volume", metavar="N", type=int, default=20,
                       help="tool calls needed in the window before a rate can fire "
                            "(default 20)")
    group.add_argument("--alert-cooldown", metavar="SECONDS", type=float, default=300.0,
                       help="least time between two firings for one service (default 300)")


def alert_settings(args: argparse.Namespace) -> Any:
    """``AlertSettings`` from ``add_alert_options``' arguments (a ``ValueError`` names a bad
    one)."""
    from .manager import AlertSettings

    return AlertSettings(
        window_s=args.alert_window, bucket_s=min(5.0, args.alert_window),
        factor=args.alert_factor, threshold=args.alert_threshold,
        min_volume=args.alert_min_volume, cooldown_s=args.alert_cooldown)

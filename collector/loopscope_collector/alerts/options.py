"""The spike rule's command-line options, for ``loopscope collector``, ``loopscope alerts``
and ``export --prometheus-rules`` (light to import: the settings are ``settings``, standard
library only; the rule itself is ``manager``)."""

from __future__ import annotations

import argparse

from .settings import AlertSettings


def add_alert_options(group: argparse._ActionsContainer) -> None:
    """The spike rule's settings (defaults: ``AlertSettings``')."""
    d = AlertSettings()
    group.add_argument("--alert-window", metavar="SECONDS", type=float, default=d.window_s,
                       help=f"rolling window of the no-progress rate (default {d.window_s:g})")
    group.add_argument("--alert-factor", metavar="X", type=float, default=d.factor,
                       help="fire at X times the service's own baseline rate "
                            f"(default {d.factor:g})")
    group.add_argument("--alert-threshold", metavar="RATE", type=float, default=d.threshold,
                       help="fire at this no-progress rate whatever the baseline "
                            f"(default {d.threshold:g})")
    group.add_argument("--alert-min-volume", metavar="N", type=int, default=d.min_volume,
                       help="tool calls needed in the window before a rate can fire "
                            f"(default {d.min_volume})")
    group.add_argument("--alert-cooldown", metavar="SECONDS", type=float, default=d.cooldown_s,
                       help="least time between two firings for one service "
                            f"(default {d.cooldown_s:g})")


def alert_settings(args: argparse.Namespace) -> AlertSettings:
    """``AlertSettings`` from ``add_alert_options``' arguments (a ``ValueError`` names a bad
    one)."""
    return AlertSettings(
        window_s=args.alert_window, bucket_s=min(AlertSettings().bucket_s, args.alert_window),
        factor=args.alert_factor, threshold=args.alert_threshold,
        min_volume=args.alert_min_volume, cooldown_s=args.alert_cooldown)

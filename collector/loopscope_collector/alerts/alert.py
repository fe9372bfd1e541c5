"""An alert: one no-progress spike of a service, as ``AlertManager`` (``manager``) decides it
and the sinks (``sinks``) deliver it. Both import it from here, and neither imports the
other's way back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class Alert:
    """One no-progress spike of a service; a resolved alert keeps its id and ``fired_at``.

    Times are seconds since the epoch on the detector's clock (span time, see
    ``AlertManager``). ``rate``, ``volume`` and the episode counts are from the moment of
    the state change: at firing in a firing alert, at resolution in a resolved one.
    """

    id: str
    service: str
    state: Literal["firing", "resolved"]
    rate: float
    baseline: float | None
    volume: int
    episodes_in_streak: int
    episodes: int
    message: str
    fired_at: float
    resolved_at: float | None = None
    resolved_because: str | None = None
    """Why a resolved alert resolved, in plain words (the rate fell back, the calls stopped)."""

    def to_json(self) -> dict[str, Any]:
        """The fields as JSON values, times as ISO 8601 UTC."""
        return {
            "id": self.id, "service": self.service, "state": self.state,
            "rate": round(self.rate, 4),
            "baseline": None if self.baseline is None else round(self.baseline, 4),
            "volume": self.volume, "episodes_in_streak": self.episodes_in_streak,
            "episodes": self.episodes, "message": self.message,
            "fired_at": _iso(self.fired_at),
            "resolved_at": None if self.resolved_at is None else _iso(self.resolved_at),
            "resolved_because": self.resolved_because,
        }


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")

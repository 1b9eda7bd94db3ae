"""What the machine was doing while a bench ran: its figures mean little without it."""

from __future__ import annotations

import os


def load_average() -> float:
    """The 1-minute load average, rounded for the JSON."""
    return round(os.getloadavg()[0], 2)

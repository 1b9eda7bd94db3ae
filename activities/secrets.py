"""Secrets an activity reads when it needs them (so a rotated one is picked up): the settings name
only the environment variable or the file that holds each, never the secret."""

from __future__ import annotations

import os
from pathlib import Path


def read_secret(env: str, path: str | None) -> str:
    """The secret in file `path` (when set) or else in environment variable `env`; "" if none."""
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return ""
    return os.environ.get(env, "").strip()


def secret_source(env: str, path: str | None) -> str:
    """Where a secret is expected, for error messages (never the secret itself)."""
    return f"file {path}" if path else f"${env}"

"""logic ops (see the module docstring once filled)."""

from __future__ import annotations

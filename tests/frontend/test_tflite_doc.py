"""docs/frontends.md's table of TFLite builtins is scripts/tflite_table.py's output (generated
from the converter table, so it cannot drift)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_builtin_table_is_current():
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "tflite_table.py"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_table_names_every_tflm_builtin():
    sys.path.insert(0, str(ROOT / "scripts"))
    import tflite_table

    text = (ROOT / "docs" / "frontends.md").read_text()
    for name in tflite_table.TFLM_BUILTINS:
        assert f"| {name} | yes |" in text, name

"""What `aotc report` shows, as one dict: `aotc inspect --json`'s dict for the model, plus, with
a board, the numbers `aotc bench` prints for it (instructions per kernel, ELF sizes, stack)."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aotc.api import Bundle, ModelLike, describe
from aotc.compilation import Compilation, CompileOptions
from aotc.compiler import compile_model, emit
from aotc.errors import AotcError
from aotc.progress import QUIET, Progress
from aotc.verification.run import random_inputs
from aotc.version import __version__


def collect(model: ModelLike, board: str | None = None,
            inputs: Mapping[str, np.ndarray] | None = None, seed: int = 0, name: str = "model",
            input_shapes: Mapping[str, Sequence[int]] | None = None,
            progress: Progress = QUIET, **options: Any) -> dict[str, Any]:
    """inspect's dict for ``model`` compiled with ``options``, plus "bench" (None without a
    board) and "provenance". On a board the inputs default to bench's random ones (``seed``).
    Stages for ``progress``: compile, and with a board build and count."""
    with progress.stage("compile"):
        comp = compile_model(model, CompileOptions(
            name=name, input_shapes=dict(input_shapes or {}), **options), progress=progress)
    data = describe(comp)
    data["bench"] = None if board is None else _bench(comp, board, inputs, seed, progress)
    data["provenance"] = {"aotc_version": __version__, "model_sha256": comp.model_hash,
                          "command_line": comp.options.command_line, "board": board}
    return data


def _bench(comp: Compilation, board: str, inputs: Mapping[str, np.ndarray] | None,
           seed: int, progress: Progress) -> dict[str, Any]:
    """Build the bundle's firmware for ``board`` and count one inference (BoardRunner.bench)."""
    with tempfile.TemporaryDirectory(prefix="aotc_report_") as tmp:
        with progress.stage(f"build for {board}"):
            emit(comp, tmp)
            runner = Bundle(Path(tmp), comp.options.name, comp).load(board)
        if not hasattr(runner, "bench"):
            raise AotcError(f"--board {board}: no instruction counts on this runner; use a "
                            f"QEMU board or 'host'")
        msg = runner.fits()
        if msg:
            raise AotcError(msg)
        feeds = dict(inputs) if inputs is not None else random_inputs(runner.meta["inputs"], seed)
        with progress.stage(f"count instructions on {board}"):
            return runner.bench(feeds)

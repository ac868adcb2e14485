"""Run a bundle on an emulated board: build the firmware (cached by content), run it in QEMU,
return outputs; and measure it (instructions, flash/RAM, stack, fits check)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from aotc import boards
from aotc.errors import AotcError
from aotc.host import cache_dir


def _bundle_hash(bundle_dir: Path, board: str) -> str:
    h = hashlib.sha256(board.encode())
    for f in sorted(bundle_dir.glob("*")):
        if f.is_file():
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:24]


def _dominant(bundle_dir: Path) -> str:
    """The largest weights and the arena, to say what dominates a bundle that does not fit."""
    meta = json.loads((bundle_dir / "bundle.json").read_text())
    return (f"arena {meta['arena_bytes']} B, weights {meta.get('weights_bytes', 0)} B"
            + (f" (largest: {', '.join(meta['largest_weights'])})"
               if meta.get("largest_weights") else ""))


class BoardRunner:
    """Same interface as host.Runner: ``run({name: array}) -> {name: array}``."""

    def __init__(self, bundle_dir: str | os.PathLike[str], board: str) -> None:
        self.dir = Path(bundle_dir).resolve()
        self.meta = json.loads((self.dir / "bundle.json").read_text())
        try:
            self.board = boards.load_board(board)
        except (KeyError, FileNotFoundError, ValueError) as e:
            raise AotcError(f"unknown board {board!r} (boards: {', '.join(boards.list_boards())})"
                            f" [{e}]") from None
        self.build_dir = cache_dir() / "fw" / f"{self.board.name}_{_bundle_hash(self.dir, board)}"
        elf = self.build_dir / "aotc_app.elf"
        try:
            if not elf.exists():
                elf = boards.build_firmware(self.dir, self.board, self.build_dir)
        except RuntimeError as e:
            raise AotcError(f"{' '.join(str(e).split())[:400]}; {_dominant(self.dir)}") from None
        self.elf = elf

    def sizes(self) -> dict[str, Any]:
        return boards.elf_sizes(self.elf, self.board)

    def fits(self) -> str | None:
        msg = boards.fits_check(self.sizes(), self.board)
        return None if msg is None else f"{msg}; {_dominant(self.dir)}"

    def _inputs(self, inputs: Mapping[str, object]) -> list[np.ndarray]:
        arrs = []
        for spec in self.meta["inputs"]:
            if spec["name"] not in inputs:
                raise AotcError(f"missing input {spec['name']!r}")
            a = np.asarray(inputs[spec["name"]]).astype(spec["dtype"]).reshape(spec["shape"])
            arrs.append(a)
        return arrs

    def run(self, inputs: Mapping[str, object]) -> dict[str, np.ndarray]:
        try:
            outs = boards.run_firmware(self.elf, self.board, self._inputs(inputs))
        except (RuntimeError, ValueError) as e:
            raise AotcError(" ".join(str(e).split())[:400]) from None
        return {s["name"]: o for s, o in zip(self.meta["outputs"], outs)}

    def count_instructions(self, inputs: Mapping[str, object]) -> dict[str, Any]:
        try:
            return boards.count_instructions(self.elf, self.board, self._inputs(inputs))
        except (RuntimeError, ValueError) as e:
            raise AotcError(" ".join(str(e).split())[:400]) from None

    def stack(self) -> dict[str, Any]:
        return boards.stack_usage(self.build_dir)

"""Run a bundle on an emulated board: build the firmware (fast path, cached by content), check
that it fits the board's real part, run it in QEMU and return outputs; measure instructions,
flash/RAM and stack."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from aotc import paths
from aotc.errors import AotcError
from aotc.targets import boards, fastbuild


class DoesNotFit(AotcError):
    """The bundle's firmware needs more flash or RAM than the board's part has."""


def _firmware_key(bundle_dir: Path, board: boards.Board) -> str:
    """Everything the firmware depends on: the bundle's files, the board's recipe (flags,
    startup, runtime, compiler) and the harness template."""
    recipe = fastbuild.recipe_key(board, paths.runtime_dir(), "MinSizeRel")
    h = hashlib.sha256(f"{board.name} {recipe}".encode())
    h.update((paths.templates_dir() / "test_main.c.j2").read_bytes())
    for f in sorted(bundle_dir.glob("*")):
        if f.is_file():
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:24]


def _dominant(meta: dict[str, Any]) -> str:
    """The bundle's own view of what is big: the arena and the largest weights."""
    largest = meta.get("largest_weights") or []
    return (f"bundle arena {meta['arena_bytes']} B, weights {meta.get('weights_bytes', 0)} B"
            + (f" (largest: {', '.join(largest)})" if largest else ""))


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split())[:600]


class BoardRunner:
    """Same interface as host.Runner: ``run({name: array}) -> {name: array}``.

    The firmware is built once per content in aotc's cache (or in `build_dir` when given).
    With check_fit, a firmware that does not fit the board's real part (flash or RAM, stack and
    heap reservations included) raises DoesNotFit saying by how much and what dominates.
    """

    def __init__(self, bundle_dir: str | os.PathLike[str], board: str, *,
                 build_dir: str | os.PathLike[str] | None = None, check_fit: bool = True) -> None:
        self.dir = Path(bundle_dir).resolve()
        self.meta = json.loads((self.dir / "bundle.json").read_text())
        try:
            self.board = boards.load_board(board)
        except ValueError as e:
            raise AotcError(str(e)) from None
        try:
            if build_dir is not None:
                self.elf = fastbuild.build_firmware_fast(self.dir, self.board, build_dir)
            else:
                self.elf = self._cached_build()
        except boards.FirmwareTooBig as e:
            raise DoesNotFit(f"{e}; {_dominant(self.meta)}") from None
        except RuntimeError as e:
            raise AotcError(f"{_one_line(e)}; {_dominant(self.meta)}") from None
        self.build_dir = self.elf.parent
        # A streaming model's state (bundle.json "state"): kept here between runs, passed to
        # the firmware as state.bin and read back from it; None: the harness calls
        # <name>_reset first.
        self.state: bytes | None = None
        if check_fit:
            msg = self.fits()
            if msg is not None:
                raise DoesNotFit(msg)

    def _cached_build(self) -> Path:
        fw = paths.cache_dir() / "fw"
        final = fw / f"{self.board.name}_{_firmware_key(self.dir, self.board)}"
        if (final / "aotc_app.elf").is_file():
            return final / "aotc_app.elf"
        fw.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=fw, prefix=".tmp-"))
        try:
            fastbuild.build_firmware_fast(self.dir, self.board, tmp)
            with contextlib.suppress(OSError):  # another process built the same firmware
                tmp.rename(final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return final / "aotc_app.elf"

    def sizes(self) -> dict[str, Any]:
        return boards.elf_sizes(self.elf, self.board)

    def fits(self) -> str | None:
        """None when the firmware fits the board's part, else one line saying by how much and
        which symbols (arena, I/O buffers, weights) dominate."""
        msg = boards.fit_report(self.elf, self.board)
        return None if msg is None else f"{msg}; {_dominant(self.meta)}"

    def _inputs(self, inputs: Mapping[str, object]) -> list[np.ndarray]:
        arrs = []
        for spec in self.meta["inputs"]:
            if spec["name"] not in inputs:
                raise AotcError(f"missing input {spec['name']!r}")
            a = np.asarray(inputs[spec["name"]]).astype(spec["dtype"]).reshape(spec["shape"])
            arrs.append(a)
        return arrs

    def reset(self) -> None:
        """The next run starts from the initial state (the firmware calls <name>_reset)."""
        self.state = None

    def run(self, inputs: Mapping[str, object]) -> dict[str, np.ndarray]:
        try:
            if "state" not in self.meta:
                outs = boards.run_firmware(self.elf, self.board, self._inputs(inputs))
            else:
                with tempfile.TemporaryDirectory(prefix="aotc-run-") as tmp:
                    if self.state is not None:
                        (Path(tmp) / "state.bin").write_bytes(self.state)
                    outs = boards.run_firmware(self.elf, self.board, self._inputs(inputs), tmp)
                    self.state = (Path(tmp) / "state.bin").read_bytes()
        except (RuntimeError, ValueError) as e:
            raise AotcError(_one_line(e)) from None
        return {s["name"]: o for s, o in zip(self.meta["outputs"], outs)}

    def count_instructions(self, inputs: Mapping[str, object], cycles: bool = False
                           ) -> dict[str, Any]:
        """boards.count_instructions; with cycles, also the timing model's estimate."""
        try:
            return boards.count_instructions(self.elf, self.board, self._inputs(inputs),
                                             cycles=cycles)
        except (RuntimeError, ValueError) as e:
            raise AotcError(_one_line(e)) from None

    def stack(self) -> dict[str, Any]:
        """The deepest frame among the bundle's kernels ("max_bytes", "function"; never the
        harness's or startup's), the deepest chain from <name>_run ("path_bytes", library
        frames not counted: "library_calls"), and "recursion": the call cycles (none: [])."""
        return boards.stack_usage(self.build_dir, self.meta["kernels"], f"{self.meta['name']}_run")

    def kernel_flash(self) -> dict[str, int]:
        """Code bytes per kernel function in the ELF (boards.kernel_flash)."""
        return boards.kernel_flash(self.elf, self.board, self.meta["kernels"])

    def bench(self, inputs: Mapping[str, object]) -> dict[str, Any]:
        """What `aotc bench` prints: "instructions" per inference (from entering <name>_run to
        its return, libm and soft-float helpers included); per kernel, "kernels": inclusive
        counts (each call from entry to return, what it calls included: requantisation
        helpers, libm, soft-float helpers, memcpy) and "self": the instructions inside the
        kernel function only, both keyed as count_instructions keys them; "other": the rest of
        the inference (the run function's own instructions, inlined kernels included, and
        what it calls outside kernels), so kernels plus other is the inference; "run": the
        run function's own instructions (None when the host cannot tell); "inlined"
        kernels, the ELF's "sizes", code bytes per kernel ("kernel_flash") and "stack";
        "cycles": the timing model's estimate ({"model", "inference", "kernels", "run",
        "total"}, aotc.targets.cycles), None on a board without a model."""
        counts = self.count_instructions(inputs, cycles=True)
        kernels = counts["inclusive"]
        total = counts.get("inference") or (counts.get("run") or 0) + sum(kernels.values())
        return {"board": self.board.name, "instructions": total, "kernels": kernels,
                "self": counts["kernels"], "other": total - sum(kernels.values()),
                "run": counts.get("run"), "inlined": counts["inlined"], "sizes": self.sizes(),
                "kernel_flash": self.kernel_flash(), "stack": self.stack(),
                "cycles": counts.get("cycles")}


OTHER_ROW = "(run function)"  # bench's last row: the run function and its non-kernel calls


def bench_table(bench: dict[str, Any]) -> str:
    """bench's per-kernel table: instructions from entering each kernel until it returns
    (what it calls included), its share of the inference, and its own instructions ("self");
    the last row is the run function: its own instructions (self) and what it calls outside
    kernels. The rows add up to the inference."""
    total = max(bench["instructions"], 1)
    rows = [(k, n, bench["self"].get(k)) for k, n in bench["kernels"].items()]
    rows.append((OTHER_ROW, bench["other"], bench.get("run")))
    est = bench.get("cycles")
    cyc = {}
    if est:  # the run function's row: the inference's cycles outside kernel calls
        cyc = {**est["kernels"], OTHER_ROW: est["inference"] - sum(est["kernels"].values())}
    w = max(40, *(len(k) for k, _, _ in rows))  # "a=b=c": kernels gcc folded into one body
    lines = [f"{'kernel':<{w}} {'instructions':>14} {'share':>7} {'self':>14}"
             + (f" {'est. cycles':>14} {'share':>7}" if est else "")]
    lines += [f"{k:<{w}} {n:>14,} {100.0 * n / total:>6.1f}%"
              + (f" {own:>14,}" if own is not None else f" {'-':>14}" if est else "")
              + (f" {cyc.get(k, 0):>14,} {100.0 * cyc.get(k, 0) / max(est['inference'], 1):>6.1f}%"
                 if est else "") for k, n, own in rows]
    lines.append("instructions: from entering the kernel until it returns, what it calls "
                 "included (helpers, libm, soft-float, memcpy); self: inside the kernel only; "
                 f"{OTHER_ROW}: its own instructions and its calls outside kernels")
    if est:
        lines.append(f"est. cycles: an estimate from what QEMU executed, cycle model {est['model']}"
                     " (docs/cycles.md)")
    if bench["inlined"]:
        lines.append(f"inlined (counted in the run function): {', '.join(bench['inlined'])}")
    return "\n".join(lines)

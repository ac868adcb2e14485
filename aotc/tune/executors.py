"""Where measurement runs execute: local processes (the default, ``--jobs`` at a time) or a Ray
cluster (``--executor ray``: RAY_ADDRESS when set, else a local instance started for the run
and shut down after it). Both run aotc.tune.measure.run_job on plain data and return results in
submission order, so a tuning run's records do not depend on where it ran."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_all_start_methods, get_context
from pathlib import Path
from typing import Any

from aotc.errors import AotcError
from aotc.tune.measure import run_job

EXECUTORS = ("local", "ray")
# A bound on one run, compile and build included (QEMU runs have their own, --timeout): a run
# that hangs stops the tuning with an error instead of blocking it.
RUN_TIMEOUT = 900.0
_START = "fork" if "fork" in get_all_start_methods() else "spawn"


class LocalExecutor:
    """``jobs`` worker processes (jobs 1: in this process). Forked where the platform can
    (a script calling tune() needs no ``if __name__ == "__main__"`` guard), else spawned."""

    name = "local"

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, jobs)
        self._pool = (ProcessPoolExecutor(self.jobs, mp_context=get_context(_START))
                      if self.jobs > 1 else None)

    def model_payload(self, model: Path) -> str:
        return str(model)

    def map(self, jobs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        if self._pool is None:
            return [run_job(j) for j in jobs]
        try:
            return list(self._pool.map(run_job, jobs, timeout=RUN_TIMEOUT * len(jobs)))
        except TimeoutError:
            raise AotcError(f"a measurement run did not finish within {RUN_TIMEOUT:g} s") \
                from None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


class RayExecutor:
    """Ray tasks, one per measurement run, each asking for one CPU. Workers need aotc and the
    board's toolchain and QEMU; the model goes to them as the file's bytes."""

    name = "ray"

    def __init__(self, jobs: int) -> None:
        try:
            import ray
        except ImportError:
            raise AotcError("--executor ray needs Ray: pip install 'aotc[farm]'") from None
        self.ray = ray
        self.started = False
        if not ray.is_initialized():
            address = os.environ.get("RAY_ADDRESS") or None
            # A local instance's workers are this process's children: they import the same
            # aotc (PYTHONPATH) and share its cache directory.
            env = {k: os.environ[k] for k in ("PYTHONPATH", "AOTC_CACHE_DIR", "XDG_CACHE_HOME")
                   if k in os.environ}
            kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "runtime_env": {"env_vars": env} if env else None}
            if address is None:
                kw["num_cpus"] = max(1, jobs)
            try:
                ray.init(address=address, **kw)
            except Exception as e:
                raise AotcError(f"--executor ray: cannot start or reach Ray "
                                f"({address or 'a local instance'}): "
                                f"{' '.join(str(e).split())[:200]}") from None
            self.started = True
        self._task = ray.remote(num_cpus=1, max_retries=1)(run_job)

    def model_payload(self, model: Path) -> dict[str, Any]:
        return {"name": model.name, "bytes": model.read_bytes()}

    def map(self, jobs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        refs = [self._task.remote(j) for j in jobs]
        try:
            return list(self.ray.get(refs, timeout=RUN_TIMEOUT * len(jobs)))
        except self.ray.exceptions.GetTimeoutError:
            for r in refs:
                self.ray.cancel(r, force=True)
            raise AotcError(f"a measurement run on Ray did not finish within {RUN_TIMEOUT:g} s"
                            ) from None

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()
            self.started = False


def make(name: str, jobs: int) -> LocalExecutor | RayExecutor:
    if name == "local":
        return LocalExecutor(jobs)
    if name == "ray":
        return RayExecutor(jobs)
    raise AotcError(f"unknown executor {name!r}; known: {', '.join(EXECUTORS)}")

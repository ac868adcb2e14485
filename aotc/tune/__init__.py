"""The auto-tuner (`aotc tune`): measure each workload's schedules on a board and log them; and
the other side, applying a log's best valid schedule per workload to a compilation
(``--tuning-log``). docs/tuning.md describes both.

    tune(model, board, log, trials=..., jobs=..., executor="local" | "ray")  -> summary
    schedules_from_log(path, target, requant) -> Selection(schedules, notes)
"""

from aotc.tune.records import Selection
from aotc.tune.records import from_log as schedules_from_log
from aotc.tune.tuner import DEFAULT_TRIALS, tune

__all__ = ["DEFAULT_TRIALS", "Selection", "schedules_from_log", "tune"]

"""Keep PySpark's garbage collection between tasks short in a reused Python worker.

A reused PySpark worker runs a full ``gc.collect()`` after every task (``pyspark.daemon``), which
walks every object the process's collector tracks. A worker that has run a join holds about
80,000 of them, almost all made by importing streamjoin, PyArrow, NumPy and PySpark, and the walk
took 30-85 ms a task on the 2-core machine of the benchmarks, more than the task's own fixed work.
Those objects live as long as the process, so :func:`before_task`, called as a task starts, moves
every object alive then out of the collector's sight (``gc.freeze``) after one collection of its
own, whenever the process has imported modules since it last did (its first task, and the tasks
after one that imported more; a collection then walks only what is not frozen yet). Objects made
after that (a task's rows, its stores) are collected as before.

What is frozen is never collected as a cycle; an object freed by reference counting is freed as
usual. So that a reference cycle frozen with the rest (a store kept warm at a freeze, and closed
later) does not stay for the life of the process, every :data:`REFREEZE_TASKS`-th task unfreezes
everything, collects once and freezes again. A worker that Spark does not reuse
(``spark.python.worker.reuse=false``) runs one task and no collection after it: nothing is done.
"""

from __future__ import annotations

import gc
import os
import sys

__all__ = ["before_task", "REFREEZE_TASKS"]

#: Tasks between two full collections of everything (the frozen objects included).
REFREEZE_TASKS = 50

_state = {"modules": -1, "tasks": 0, "pid": -1}


def before_task() -> bool:
    """Freeze the process's long-lived objects if modules were imported since the last freeze, or
    unfreeze, collect and freeze again every :data:`REFREEZE_TASKS` tasks; whether it did. Only in
    a PySpark worker that is reused (``SPARK_REUSE_WORKER`` set), and never when the collector is
    disabled."""
    if not os.environ.get("SPARK_REUSE_WORKER") or not gc.isenabled():
        return False
    if _state["pid"] != os.getpid():   # a process forked from one that froze counts its own tasks
        _state.update(modules=-1, tasks=0, pid=os.getpid())
    _state["tasks"] += 1
    modules = len(sys.modules)
    if _state["tasks"] >= REFREEZE_TASKS:   # everything once: frozen cycles that are garbage now go
        gc.unfreeze()
        _state["tasks"] = 0
    elif modules == _state["modules"]:
        return False
    gc.collect()   # what is frozen already is not walked again
    gc.freeze()
    _state["modules"] = modules
    return True

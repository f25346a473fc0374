"""Which Python Spark's workers run: checked when a join is defined, so that a worker without
streamjoin is named on the driver, not by every task failing with ``ModuleNotFoundError``.

Classic PySpark starts its Python workers with the interpreter the ``SparkContext`` took from
``PYSPARK_PYTHON`` when it was created (``spark-submit`` sets it from ``spark.pyspark.python``),
by default ``python3`` on the ``PATH``: without an activated virtual environment, the system's
Python, which has no streamjoin. In local mode the workers run on this machine, so the check is
exact: an interpreter other than the driver's is asked once (a subprocess importing streamjoin,
cached per interpreter) and one that cannot import it is refused with what to set. On a cluster
the executors have their own Python, which the driver cannot see: nothing is refused there, and
a warning is logged once when ``PYSPARK_PYTHON`` is unset (the executors' ``python3``).
On Spark Connect the session has no ``SparkContext`` here: nothing is checked.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from typing import Any

from streamjoin.errors import JoinDefinitionError

__all__ = ["check_worker_python", "python_problem"]

#: interpreter -> what is wrong with it for a worker (None: it imports streamjoin)
_CHECKED: dict[str, str | None] = {}
#: the interpreters a cluster's workers run that this process warned about
_WARNED: set[str] = set()
log = logging.getLogger("streamjoin")


def check_worker_python(spark: Any) -> None:
    """Raise :class:`JoinDefinitionError` when ``spark`` is a classic local session whose Python
    workers would run an interpreter that cannot import streamjoin (see module)."""
    context = getattr(spark, "_sc", None)   # absent on Spark Connect
    if context is None:
        return
    worker = str(getattr(context, "pythonExec", None) or "python3")
    if not str(context.master).startswith("local"):
        if worker == "python3" and worker not in _WARNED:   # PYSPARK_PYTHON unset: cannot tell, so say it
            _WARNED.add(worker)
            log.warning("streamjoin: PYSPARK_PYTHON is not set, so Spark's executors run the python3 on "
                        "their PATH; each needs streamjoin installed there (or set PYSPARK_PYTHON to a "
                        "Python that has it, before the session starts)")
        return
    if worker not in _CHECKED:
        _CHECKED[worker] = python_problem(worker)
    problem = _CHECKED[worker]
    if problem is None:
        return
    raise JoinDefinitionError(
        f"Spark's Python workers run {worker!r} (PYSPARK_PYTHON when the session started; python3 on the "
        f"PATH when unset), which {problem}: every task of the join would fail with ModuleNotFoundError. "
        f"Start the session with the Python that has streamjoin: export PYSPARK_PYTHON={sys.executable} "
        f"(or activate its virtual environment) before creating the SparkSession (with spark-submit: "
        f"--conf spark.pyspark.python={sys.executable}); a running session keeps its workers' Python, so "
        "stop it (spark.stop()) and create it again")


def python_problem(python: str) -> str | None:
    """What keeps ``python`` (a path or a command on the ``PATH``) from running streamjoin's tasks,
    in words; None when it is this interpreter or imports streamjoin."""
    found = shutil.which(python) or (python if os.path.exists(python) else None)
    if found is None:
        return "is not found"
    if os.path.abspath(found) == os.path.abspath(sys.executable):   # not resolved: a venv's python links out
        return None
    try:
        done = subprocess.run([found, "-c", "import streamjoin"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot be started ({exc})"
    if done.returncode == 0:
        return None
    last = (done.stderr.strip().splitlines() or ["no message"])[-1]
    return f"cannot import streamjoin ({last})"

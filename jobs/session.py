"""The Spark session a job runs on: local (default), a cluster's master, or a Spark Connect server.

``--master spark://host:7077`` runs the job's Spark work on a cluster (its executors need the
streamjoin package; see the documentation's "Clusters and Spark Connect" page); ``--remote sc://host:15002`` runs it
through Spark Connect. Either way the job's driver-side checks read the inputs, outputs and
checkpoints by path, so ``--out`` must be a location this machine and the cluster share (a local
directory for a cluster on this machine, as in that page's recipe).
"""

from __future__ import annotations

import argparse
import os
import sys

from streamjoin.spark.settings import SPARK_SETTINGS

__all__ = ["add_session_options", "job_session", "session_from_args"]


def add_session_options(parser: argparse.ArgumentParser) -> None:
    """``--master`` and ``--remote``."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", default=None,
                       help="Spark master URL (default local[2]); e.g. spark://127.0.0.1:7077 for a standalone cluster")
    where.add_argument("--remote", default=None,
                       help="a Spark Connect server to run on instead, e.g. sc://127.0.0.1:15002")


def job_session(partitions: int, *, master: str | None = None, remote: str | None = None):
    """A session for a job with ``partitions`` shuffle partitions, UTC session time zone, quiet logs
    and the settings the joins run best with (``streamjoin.SPARK_SETTINGS``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    settings = {"spark.sql.shuffle.partitions": str(partitions), "spark.sql.session.timeZone": "UTC", **SPARK_SETTINGS}
    if remote is not None:
        spark = SparkSession.builder.remote(remote).getOrCreate()
        for key, value in settings.items():
            if key.startswith("spark.sql."):   # (the others are the server's, read when it starts)
                spark.conf.set(key, value)
        return spark
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master or "local[2]").appName("streamjoin-job")
               .config("spark.ui.showConsoleProgress", "false").config("spark.log.level", "ERROR"))
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def session_from_args(args: argparse.Namespace, partitions: int):
    """The session ``--master`` / ``--remote`` ask for; None when neither is given (the job then
    starts its own local session)."""
    if getattr(args, "master", None) is None and getattr(args, "remote", None) is None:
        return None
    return job_session(partitions, master=args.master, remote=args.remote)

"""``streamjoin demo``: the main job, the search-to-click pipeline (see :mod:`streamjoin.jobs.search_clicks`)."""

from __future__ import annotations

import argparse

from streamjoin.jobs import search_clicks
from streamjoin.jobs.common import help_text

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the search-to-click job: a left interval join of searches and clicks",
        description=help_text(search_clicks.__doc__ or ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    search_clicks.add_arguments(parser)
    parser.set_defaults(func=search_clicks.run)

"""``lookout report`` past one machine: the per-file step on a Dask cluster, summed as the
command sums it.

    pip install 'lookout[dask]'
    python integrations/dask_report.py /shared/transcripts --workers 8 > report.json
    python integrations/dask_report.py /shared/transcripts --scheduler tcp://10.0.0.5:8786 --by day

What runs where: the client lists the ``*.jsonl`` files under the paths given (the
agents' layout or any other), the workers run ``lookout_cli.fleet.scan.scan_many`` on batches of
them (``BATCH`` files a task, so the scheduler handles thousands of tasks, not millions),
and the client sums the rows with ``lookout_cli.fleet.aggregate.aggregate``: the same
function ``lookout report`` calls, so the totals are exactly the command's (a request held
by several files still counts once). A row is plain values, a few hundred bytes plus about
60 bytes a request, so gathering the rows of a million sessions stays within one machine's
memory. The workers must see the files at the same paths (a shared file system); for an
object store, read each object's bytes in the task and call ``scan(data, path=key)``.

In Python::

    from distributed import Client, LocalCluster
    from dask_report import report

    with LocalCluster(n_workers=4, processes=True) as cluster, Client(cluster) as client:
        result = report(["/shared/transcripts"], client, by="project")
    print(result["totals"]["cost_usd"])
"""

from __future__ import annotations

import argparse
import os
import sys

from lookout_cli.fleet.aggregate import BY, aggregate
from lookout_cli.fleet.index import walk
from lookout_cli.fleet.scan import scan_many

BATCH = 64  # files a task reads


def report(paths: list[str], client, by: str = "session", since: str | None = None, until: str | None = None,
           project: str | None = None, amber: float | None = None, red: float | None = None,
           batch: int = BATCH) -> dict:
    """The report (schema ``lookout.report/1``) of every transcript under ``paths``, the
    files read on ``client``'s cluster."""
    files = [path for path, _ in walk(paths)]
    batches = [files[i:i + batch] for i in range(0, len(files), batch)]
    futures = client.map(scan_many, batches, amber=amber, red=red, pure=False)
    rows = [row for part in client.gather(futures) for row in part]
    return aggregate(rows, by, since, until, project)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dask_report.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="transcripts or folders of them")
    ap.add_argument("--scheduler", help="a running scheduler's address (default: a local cluster)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local cluster's worker processes")
    ap.add_argument("--by", choices=BY, default="session")
    ap.add_argument("--since")
    ap.add_argument("--until")
    ap.add_argument("--project")
    args = ap.parse_args(argv)
    import orjson
    from distributed import Client, LocalCluster

    if args.scheduler:
        with Client(args.scheduler) as client:
            result = report(args.paths, client, args.by, args.since, args.until, args.project)
    else:
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True) as cluster, \
                Client(cluster) as client:
            result = report(args.paths, client, args.by, args.since, args.until, args.project)
    sys.stdout.buffer.write(orjson.dumps(result, option=orjson.OPT_INDENT_2) + b"\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The Dask recipe (integrations/dask_report.py) on a local cluster of worker processes gives
exactly the totals of ``lookout report``."""

from __future__ import annotations

import json
import os
import sys

import pytest
from conftest import REPO, SHARED_TRANSCRIPTS, run_lookout

distributed = pytest.importorskip("distributed", reason="dask is not installed (pip install 'lookout[dask]')")
sys.path.insert(0, str(REPO / "integrations"))
sys.path.insert(0, str(REPO))  # bench/ is a top-level folder of the repository, not installed
from dask_report import report

from bench.tree import build


def test_a_local_cluster_gives_the_totals_of_lookout_report(tmp_path):
    if not SHARED_TRANSCRIPTS.is_dir():
        pytest.skip(f"{SHARED_TRANSCRIPTS} is not here")
    build(tmp_path / "tree", SHARED_TRANSCRIPTS, 60, size=20_000, seed=11)
    (tmp_path / "tree" / "notes.jsonl").write_bytes(b"not a transcript\n")  # skipped alike
    env = dict(os.environ, LOOKOUT_CACHE_DIR=str(tmp_path / "cache"))
    result = run_lookout("report", "--json", "--by", "day", str(tmp_path / "tree"), env=env)
    assert result.returncode == 0, result.stderr.decode()
    theirs = json.loads(result.stdout)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        ours = report([str(tmp_path / "tree")], client, by="day", batch=8)
        workers = client.run(os.getpid)
    assert len(set(workers.values()) - {os.getpid()}) == 2  # the rows came from two other processes
    assert ours["totals"] == theirs["totals"]
    assert ours["rows"] == theirs["rows"]
    assert ours["skipped"] == theirs["skipped"] and len(ours["skipped"]) == 1
    assert ours["totals"]["requests"] > 100

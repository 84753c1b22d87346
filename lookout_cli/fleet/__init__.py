"""Every session at once (``lookout report``): one small row per transcript file, worked out
from the lines that record usage, and the rows summed by session, day, project and model.

``scan`` is the per-file step (a path or bytes to a row of plain values, so that any engine
can ship it: ``lookout report --jobs``, or Dask in ``integrations/dask_report.py``; ``row``
makes rows without loading the readers);
``aggregate`` sums rows into the report; ``index`` keeps each file's row for the next run
(an unchanged file costs a stat) and runs the step in worker processes; ``render`` writes the
report as a table, CSV or JSON. Imports ``meter`` (cost, meter colours) and below.
"""

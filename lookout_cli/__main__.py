"""The ``lookout`` command (and ``python -m lookout_cli``): a quiet measure of a file unchanged
since the same run is replayed (lookout_cli.meter.replay) before the CLI is even loaded, and
run again without it when the file changed."""

import sys


def main() -> None:
    # As cli.main sets it (why: there), from the start: importing lookout makes tens of thousands
    # of objects that live to the end, and the default collected 21 times over them (3-4 ms of a
    # prompt's re-measure).
    import gc

    gc.set_threshold(100_000, 20, 100)
    # Ctrl-C while the command line is still loading (click and a command take 0.05-0.1 s to
    # import) gets the same line and status as later on, not a traceback.
    try:
        from lookout_cli.meter.replay import recorded_flags, replay

        status = replay(sys.argv[1:])
        if status is not None:
            sys.exit(status)
        flags = recorded_flags()
        if flags is not None:  # the same invocation over a file that changed since: no click
            from lookout_cli.measure import measure_again

            leave(measure_again(flags))
        if sys.argv[1:2] == ["statusline"]:  # runs after every agent message: no click
            from lookout_cli.agents.status import main as status_line

            status = status_line(sys.argv[2:])
            if status is not None:
                sys.exit(status)
        if sys.argv[1:2] == ["hook"]:  # runs on every prompt: click only for what needs it
            from lookout_cli.agents.hooks import main as hook

            status = hook(sys.argv[2:])
            if status is not None:
                sys.exit(status)
        from lookout_cli.cli import main as run

        try:
            run()
        except SystemExit as done:
            if not isinstance(done.code, int):
                raise
            leave(int(done.code))
    except KeyboardInterrupt:
        sys.stderr.write("lookout: interrupted\n")
        sys.exit(130)


def leave(code: int) -> None:
    """Exit with ``code`` once the exit handlers have run and the output is out, without the
    interpreter freeing every object one at a time: a run over a long session keeps an object
    or two a line, and that teardown took 10-20 ms of a prompt's re-measure. A thread still at
    work (the interpreter waits for it) or a Python without the handlers' runner: the usual exit."""
    import atexit
    import os

    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    threading = sys.modules.get("threading")  # (not imported: no thread was started through it)
    if run_handlers is None or threading is not None and threading.active_count() > 1:
        sys.exit(code)
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (``| head``): as lookout says it anywhere
        from lookout_cli.core.errors import ExitCode, PipeClosed

        PipeClosed().show()
        code = ExitCode.BROKEN_PIPE
    run_handlers()
    try:
        sys.stderr.flush()
    except (AttributeError, OSError):  # standard error closed: nothing to say there
        pass
    os._exit(code)


if __name__ == "__main__":
    main()

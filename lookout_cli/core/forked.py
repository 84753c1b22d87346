"""A function run in a forked child while this process goes on (``Forked``): what it returns
comes back pickled through a pipe. For work that splits in two without sharing anything but
what the child was forked with (``Run._settle``: the first half of a long session's lines
read here, the second there). Where there is no fork, or the child fails, the caller does
the work itself: nothing here is the only way to a result."""

from __future__ import annotations

import os
from collections.abc import Callable

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (ARCHITECTURE.md)
if TYPE_CHECKING:
    from typing import Any


class Forked:
    """``function(*args)``, run in a child forked now; ``result()`` waits for what it returned."""

    def __init__(self, function: Callable[..., Any], *args: Any) -> None:
        import pickle  # (here, not on every command's path: a prompt's measure never forks)
        import signal

        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its value (None when it failed) down the pipe, then out
            os.close(read)
            try:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
                try:
                    data = pickle.dumps(function(*args), protocol=pickle.HIGHEST_PROTOCOL)
                except BaseException:  # noqa: BLE001 - whatever it was, the parent does the work itself
                    data = b""
                with open(write, "wb") as out:
                    out.write(data)
            finally:
                os._exit(0)  # (none of the parent's exit handlers, buffers or temporary files)
        os.close(write)
        self.pid, self.pipe = pid, read

    def ready(self) -> bool:
        """Whether the child is done (its value on the way)."""
        import select

        return bool(select.select([self.pipe], [], [], 0)[0])

    def get(self) -> Any:
        """``result()``, raising ``ChildFailed`` when it failed (as a pool's result raises)."""
        value = self.result()
        if value is None:
            raise ChildFailed("the forked process failed")
        return value

    def result(self) -> Any:
        """What the function returned; None when it failed (or returned None)."""
        import pickle

        try:
            with open(self.pipe, "rb") as pipe:
                data = pipe.read()
        finally:
            self.pipe = -1
            os.waitpid(self.pid, 0)
        return pickle.loads(data) if data else None

    def cancel(self) -> None:
        """Stop the child (the parent failed or was interrupted): no result is read."""
        import signal

        if self.pipe < 0:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        os.close(self.pipe)
        self.pipe = -1
        os.waitpid(self.pid, 0)


class ChildFailed(Exception):
    pass


def available() -> bool:
    return hasattr(os, "fork")

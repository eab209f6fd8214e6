"""Run a function in a forked child while this process goes on (POSIX; nested forks allowed)."""

from __future__ import annotations

import os
import pickle

_INTERRUPTED = b"interrupted"  # (not a pickle)


def in_child(fn, *args):
    """Start fn(*args) in a forked child; returns the function that waits for its result. Where
    forking is not possible, or the child fails or its result does not pickle, that function runs
    fn(*args) here instead: the result is the same, only later. The caller must call it (the child
    waits on the pipe until then)."""
    try:
        read, write = os.pipe()
    except OSError:
        return lambda: fn(*args)
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return lambda: fn(*args)
    if pid == 0:  # the child: never returns into the caller's code
        try:
            os.close(read)
            try:
                data = pickle.dumps(fn(*args))
            except Exception:  # noqa: BLE001 - the parent runs it itself
                data = b""
            except BaseException:  # (Ctrl-C reaches the child too: the parent stops, not runs it again)
                data = _INTERRUPTED
            with os.fdopen(write, "wb") as out:
                out.write(data)
        finally:
            os._exit(0)  # (no atexit handlers, no flush of the parent's buffered output)
    os.close(write)

    def collect():
        with os.fdopen(read, "rb") as f:
            data = f.read()
        os.waitpid(pid, 0)
        if data == _INTERRUPTED:
            raise KeyboardInterrupt
        return pickle.loads(data) if data else fn(*args)

    return collect

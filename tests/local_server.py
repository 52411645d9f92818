"""A server the tests start on loopback: a free port for it, and the wait until it answers."""

import socket
import time

import pytest


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_serving(process, answers, timeout, output):
    """Returns once `answers()` is true, polling every half second: it raises OSError while nothing listens yet. The
    test fails, with the server's `output()`, if `process` exits first or `timeout` seconds pass (stopped then)."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            pytest.fail(f"the server exited with {process.returncode}:\n{output()}")
        try:
            if answers():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:  # stopped first: a pipe's output reads to its end
            process.kill()
            process.wait()
            pytest.fail(f"the server did not answer within {timeout} s:\n{output()}")
        time.sleep(0.5)

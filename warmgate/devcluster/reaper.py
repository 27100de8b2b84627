"""Tear the dev cluster down when the process that started it dies without stopping it.

`python -m warmgate.devcluster.reaper FD` runs in its own session and blocks on the read end of
a pipe whose write end only the starting process holds. A normal stop writes ``done`` first; a
killed process just closes it (the kernel does), and the reaper then runs the teardown. It
inherits the machine lock, so the next cluster waits until the machine is clean.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from warmgate.devcluster.layout import Paths
from warmgate.devcluster.teardown import remove_tree, tear_down

LOG = Path("/tmp/warmgate-devcluster-reaper.log")


def main(argv: list[str]) -> int:
    fd = int(argv[0])
    data = b""
    while chunk := os.read(fd, 64):
        data += chunk
    if data == b"done":
        return 0
    with LOG.open("a") as log:

        def say(message: str) -> None:
            log.write(f"{time.strftime('%H:%M:%S')} {message}\n")
            log.flush()

        say("the process that started the dev cluster died: tearing it down")
        tear_down(Paths.default(), say)
        remove_tree(Path("/dev/shm/warmgate-devcluster-etcd"))
        say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

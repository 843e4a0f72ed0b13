"""The embedded default's broker folder: a message becomes visible to workers only once written whole.

kombu's filesystem transport creates a message's file and then writes it, and a worker listing the
folder in between took the empty file, failed to parse it and stopped ("Unrecoverable error:
JSONDecodeError"), losing the message. So senders write into an outbox folder, and every worker moves
into the inbox its transport reads the files that hold a whole message: a rename, atomic, puts each
in place at once. kombu's transport is used as shipped, configured through its documented options.
"""

import logging
import os
import threading
import time
from pathlib import Path

import orjson

logger = logging.getLogger(__name__)

# How often a worker looks for finished messages (seconds): the transport itself polls every second.
POLL_SECONDS = 0.05


def outbox_promote(outbox: Path, inbox: Path) -> int:
    """Move every message file in `outbox` that holds a whole JSON document into `inbox`; returns how many."""
    moved = 0
    for entry in os.scandir(outbox):
        if not entry.name.endswith(".msg"):
            continue
        try:
            orjson.loads(Path(entry.path).read_bytes())  # empty or cut short while its sender still writes it
            os.replace(entry.path, inbox / entry.name)
        except (orjson.JSONDecodeError, OSError):  # not whole yet, or another worker moved it first
            continue
        moved += 1
    return moved


def outbox_watch(outbox: Path, inbox: Path) -> threading.Thread:
    """Promote finished messages for as long as this process runs (a daemon thread, started once per worker)."""

    def watch():
        while True:
            try:
                outbox_promote(outbox, inbox)
            except OSError:  # the folder gone or unreadable for a moment: without this thread no job would run
                logger.exception("moving messages from %s to %s failed", outbox, inbox)
            time.sleep(POLL_SECONDS)

    thread = threading.Thread(target=watch, name="broker-outbox", daemon=True)
    thread.start()
    return thread

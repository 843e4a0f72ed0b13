"""Which job units still have a message in the broker, so that recovery re-queues only the lost ones.

With Redis, kombu pops a message (BRPOP) before it records it as unacknowledged: a worker killed
in between loses that message for good, and the visibility timeout cannot bring it back. Reading
the queue and the unacknowledged hash tells those units apart from the ones still waiting.

With the filesystem broker, a message is a file that a worker removes when it takes the message,
and what a worker has taken but not finished lives only in its memory: the units whose file is
still in the folder are waiting, and the others a killed worker lost.
"""

import base64
import json
import os

import redis

from simia_web.celery import app

UNIT_TASK = "simia_web.jobs.tasks.unit_execute"
_PRIORITY_SEPARATOR = "\x06\x16"  # kombu's Redis transport keeps other priorities in "<queue>\x06\x16<n>"
_PAGE = 1000


def units_with_messages() -> set[int] | None:
    """Units whose message waits in the queue or is held unacknowledged; None if the broker cannot be read."""
    conf = app.conf
    if conf.broker_url.startswith("filesystem://"):
        return _units_in_folder(conf.broker_transport_options["data_folder_in"], conf.task_default_queue)
    if not conf.broker_url.startswith(("redis://", "rediss://")):
        return None
    client = redis.Redis.from_url(conf.broker_url)
    queue = conf.task_default_queue
    units: set[int | None] = set()
    for key in [queue, *client.scan_iter(match=f"{queue}{_PRIORITY_SEPARATOR}*")]:
        start = 0
        while page := client.lrange(key, start, start + _PAGE - 1):
            units.update(_unit_id(json.loads(raw)) for raw in page)
            start += _PAGE
    for raw in client.hvals(conf.broker_transport_options.get("unacked_key", "unacked")):
        units.add(_unit_id(json.loads(raw)[0]))  # [message, exchange, routing key]
    units.discard(None)
    return units


def _units_in_folder(folder: str, queue: str) -> set[int]:
    units: set[int | None] = set()
    for name in os.listdir(folder):
        if name.partition(".")[2] != f"{queue}.msg":  # kombu's "<time>_<uuid>.<queue>.msg"
            continue
        try:
            with open(os.path.join(folder, name), "rb") as message:
                units.add(_unit_id(json.loads(message.read())))
        except FileNotFoundError:  # a running worker took it meanwhile: sent again, and still written once
            continue
    units.discard(None)
    return units


def _unit_id(message: dict) -> int | None:
    if (message.get("headers") or {}).get("task") != UNIT_TASK:
        return None
    body = message["body"]
    if message.get("properties", {}).get("body_encoding") == "base64":
        body = base64.b64decode(body)
    args, _kwargs, _embed = json.loads(body)
    return args[0]

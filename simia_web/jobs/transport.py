"""kombu's Redis and filesystem transports, with the mends the job engine relies on.

Redis: kombu builds a new redis.Redis for every acknowledgement and every delivered message, and
redis-py's constructor copies its table of ~250 response callbacks each time: about a tenth of a
busy worker's CPU went there. A Redis client is thread-safe and cheap to keep; it is rebuilt when
the channel replaces its connection pool (after a reconnect).

Redis again: kombu takes one message per BRPOP and records it as unacknowledged in a second round
trip, both on the worker's main thread, which on a busy threads-pool worker waits for the GIL after
each of them. A worker allowed 128 messages held about 50 and its threads went idle with the queue
still full. After each BRPOP the channel now takes as many more as its prefetch allows with one
RPOP and records them with one pipeline, then delivers them.

Filesystem (the embedded default): kombu creates a message file and then writes it, and a worker
listing the folder in between takes the empty file, fails to parse it and stops ("Unrecoverable
error: JSONDecodeError"), losing the message. Messages are written under a name consumers skip and
renamed into place, which is atomic.
"""

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from kombu.exceptions import ChannelError
from kombu.transport import filesystem, redis, virtual
from kombu.utils.json import dumps, loads

# At most this many messages are taken after one BRPOP (the prefetch allowance caps it too).
DELIVERY_BATCH = 64


class RedisQoS(redis.QoS):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._recorded: set[str] = set()  # delivery tags whose unacked record a batch has written

    @contextmanager
    def recorded(self, payloads: list[dict]) -> Iterator[None]:
        """Write the unacked records of messages in one round trip, for delivering them inside."""
        now, tags = time.time(), [payload["properties"]["delivery_tag"] for payload in payloads]
        with self.pipe_or_acquire() as pipe:
            for tag, payload in zip(tags, payloads, strict=True):
                info = payload["properties"]["delivery_info"]
                pipe.zadd(self.unacked_index_key, {tag: now})
                pipe.hset(self.unacked_key, tag, dumps([payload, info["exchange"], info["routing_key"]]))
            pipe.execute()
        self._recorded.update(tags)
        try:
            yield
        finally:
            self._recorded.difference_update(tags)  # a message restored later is recorded again

    def append(self, message, delivery_tag):
        if delivery_tag in self._recorded:
            virtual.QoS.append(self, message, delivery_tag)  # the bookkeeping without a second record
        else:
            super().append(message, delivery_tag)


class RedisChannel(redis.Channel):
    QoS = RedisQoS
    _sync_client = None

    def _create_client(self, asynchronous=False):
        if asynchronous:
            return super()._create_client(asynchronous=True)
        client = self._sync_client
        if client is None or client.connection_pool is not self.pool:
            client = self._sync_client = super()._create_client()
        return client

    def _brpop_read(self, **options):
        delivered = super()._brpop_read(**options)
        self._deliver_more()
        return delivered

    def _deliver_more(self) -> None:
        """Deliver what the prefetch allows from the queues' default priority level (where the app's
        messages go; other levels are left to BRPOP)."""
        allowance = self.qos.can_consume_max_estimate()
        allowance = DELIVERY_BATCH if allowance is None else min(allowance, DELIVERY_BATCH)
        for queue in self.active_queues:
            if allowance <= 0:
                return
            with self.conn_or_acquire() as client:
                items = client.rpop(queue, allowance)
            if not items:
                continue
            payloads = [loads(item) for item in items]
            with self.qos.recorded(payloads):
                for payload in payloads:
                    self.connection._deliver(payload, queue)
            allowance -= len(payloads)


class RedisTransport(redis.Transport):
    Channel = RedisChannel


class FilesystemChannel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        # Same name scheme as kombu's (its consumers take "<sortable time>_<id>.<queue>.msg" in name order).
        name = f"{round(time.monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        path = os.path.join(self.data_folder_out, name)
        partial = f"{path}.part"
        try:
            with open(partial, "wb") as file:
                file.write(dumps(payload).encode())
            os.replace(partial, path)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {path!r} to directory") from exc


class FilesystemTransport(filesystem.Transport):
    Channel = FilesystemChannel

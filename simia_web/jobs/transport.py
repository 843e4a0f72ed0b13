"""kombu's Redis and filesystem transports, with two mends the job engine relies on.

Redis: kombu builds a new redis.Redis for every acknowledgement and every delivered message, and
redis-py's constructor copies its table of ~250 response callbacks each time: about a tenth of a
busy worker's CPU went there. A Redis client is thread-safe and cheap to keep; it is rebuilt when
the channel replaces its connection pool (after a reconnect).

Filesystem (the embedded default): kombu creates a message file and then writes it, and a worker
listing the folder in between takes the empty file, fails to parse it and stops ("Unrecoverable
error: JSONDecodeError"), losing the message. Messages are written under a name consumers skip and
renamed into place, which is atomic.
"""

import os
import time
import uuid

from kombu.exceptions import ChannelError
from kombu.transport import filesystem, redis
from kombu.utils.json import dumps


class RedisChannel(redis.Channel):
    _sync_client = None

    def _create_client(self, asynchronous=False):
        if asynchronous:
            return super()._create_client(asynchronous=True)
        client = self._sync_client
        if client is None or client.connection_pool is not self.pool:
            client = self._sync_client = super()._create_client()
        return client


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

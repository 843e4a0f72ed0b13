"""kombu's Redis transport, with one reusable client per channel.

kombu builds a new redis.Redis for every acknowledgement and every delivered message, and redis-py's
constructor copies its table of ~250 response callbacks each time: about a tenth of a busy worker's
CPU went there. A Redis client is thread-safe and cheap to keep; it is rebuilt when the channel
replaces its connection pool (after a reconnect).
"""

from kombu.transport import redis


class Channel(redis.Channel):
    _sync_client = None

    def _create_client(self, asynchronous=False):
        if asynchronous:
            return super()._create_client(asynchronous=True)
        client = self._sync_client
        if client is None or client.connection_pool is not self.pool:
            client = self._sync_client = super()._create_client()
        return client


class Transport(redis.Transport):
    Channel = Channel

"""kombu's Redis transport with one Redis client per channel for its bookkeeping of unacknowledged messages.

With late acknowledgement, kombu notes every message a worker takes (a pipeline to Redis on the
consumer's thread) and strikes it out when the task ends. For each of the two it built a new redis-py
client over the channel's connection pool, and a client builds its table of reply parsers when it is
made: a quarter of the consumer thread's CPU per message, a tenth of a worker's, spent before any
command is sent. A redis-py client is safe to share between threads (each command, and each pipeline,
takes a connection from the pool), so the channel keeps one and hands it out instead. Everything else
is kombu's transport as shipped; a channel closed on a broker outage takes its client with it.
"""

from contextlib import contextmanager
from functools import cached_property

from kombu.transport import redis


class Channel(redis.Channel):
    @cached_property
    def bookkeeping_client(self):
        # As kombu makes its own: the pool's credential provider, if any, is handed to the client too.
        provider = self.pool.connection_kwargs.get("credential_provider")
        return self.Client(connection_pool=self.pool, **({"credential_provider": provider} if provider else {}))

    @contextmanager
    def conn_or_acquire(self, client=None):
        yield client or self.bookkeeping_client


class Transport(redis.Transport):
    Channel = Channel

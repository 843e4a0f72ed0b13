"""Database connections of worker threads that wait on other things, and connections a restart left dead.

A PostgreSQL restart ends every connection: the server sends each client a last error and closes the
socket. A thread that then uses its connection fails, which would cost a unit its work so far. So a
connection is looked at before it is used after a wait: a socket with something to read while no query
is running is one the server has written to on its own, which a live idle connection never is (the app
does not LISTEN); only then is the connection asked, with a query, whether it still works. Looking costs
one system call and no round trip, so it can be done before every use of the database after an LLM call.
"""

import logging
import select

import psycopg
from django.db import Error, connection
from psycopg_pool import ConnectionPool

logger = logging.getLogger(__name__)


def db_connection_give_back() -> None:
    """Return this thread's connection to the database pool (where there is one) before a long wait.

    A thread that waits on the LLM, or on a lock whose holder may need a connection, must not hold one
    of the pool's few: the others would wait for it, and the holder of the lock for them. Without a pool
    the connection is kept: opening one per wait would cost more than it saves.
    """
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        try:
            connection.close()
        except Error:  # a connection the server dropped: the pool discards it
            logger.debug("giving back a dead database connection", exc_info=True)


def db_connection_check() -> None:
    """Close this thread's connection if the server has ended it, so that the next query opens a new one."""
    raw = connection.connection
    if raw is None or connection.vendor != "postgresql" or connection.in_atomic_block:
        return
    if _server_spoke(raw) and not connection.is_usable():
        try:
            connection.close()
        except Error:
            logger.debug("closing a dead database connection", exc_info=True)


def pool_connection_check(conn) -> None:
    """The psycopg pool's check of a connection it hands out (raises if the connection is dead)."""
    if _server_spoke(conn):
        ConnectionPool.check_connection(conn)


# A pool waits ever longer between attempts to reconnect (1 s, doubling, until its reconnect_timeout): after a
# restart longer than a few seconds a process could stay without connections, answering 503, for half a minute.
# Attempts give up after POOL_RECONNECT_SECONDS instead, and pool_reconnect_again starts afresh at once.
POOL_RECONNECT_SECONDS = 4.0
# How long a thread waits for one of the pool's connections before its request fails (a web request then answers
# 503 with Retry-After): psycopg's 30 s default kept a page hanging for half a minute during an outage.
POOL_WAIT_SECONDS = 10.0


def pool_reconnect_again(pool) -> None:
    """The pool's reconnect_failed callback: grow it again now (check() starts a new attempt if none runs)."""
    pool.check()


def _server_spoke(conn) -> bool:
    """Whether an idle connection's socket has something to read (or is gone): the server ended it."""
    try:
        poller = select.poll()  # not select(): a worker with hundreds of threads has descriptors past 1024
        poller.register(conn.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError, psycopg.Error):  # the connection is closed already
        return True

"""Database connections of worker threads that wait on other things."""

from django.db import connection


def db_connection_give_back() -> None:
    """Return this thread's connection to the database pool (where there is one) before a long wait.

    A thread that waits on the LLM, or on a lock whose holder may need a connection, must not hold one
    of the pool's few: the others would wait for it, and the holder of the lock for them. Without a pool
    the connection is kept: opening one per wait would cost more than it saves.
    """
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()

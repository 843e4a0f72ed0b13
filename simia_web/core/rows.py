"""Inserts and reads on the job units' write path, as SQL written once per model and shape.

Through the ORM, each statement of a unit's write (save(), bulk_create(), get()) cost a busy worker 0.6-1.2 ms of
CPU in building and compiling the query, on the thread every other unit of the worker waits on for the GIL,
against about 0.15 ms to send the same statement as SQL; a rollout unit made a dozen. Here the SQL is built once
per model and number of rows from the model's own table and columns (like jobs.unit_rows), and values go through
each field's pre_save and get_db_prep_save as in Django's own insert, so the rows are the ones save() writes.

Where a model has pre_save or post_save receivers, its instances are saved one by one instead, so they hear of them.
"""

import functools
from typing import Any, cast

from django.db import connection
from django.db.models import Field, Model
from django.db.models.signals import post_save, pre_save


def quoted_table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def quoted_column(model: type[Model], name: str) -> str:
    """A field's column, quoted for the current database (for SQL written once from the models' names)."""
    return connection.ops.quote_name(cast(str, cast(Field, model._meta.get_field(name)).column))


@functools.cache
def _insert(vendor: str, model: type[Model], rows: int) -> tuple[list[Field], list[Field], str]:
    """(columns written, columns returned, the INSERT for `rows` rows) in `vendor`'s dialect."""
    quote = connection.ops.quote_name
    returned = list(model._meta.db_returning_fields)
    written = [f for f in model._meta.concrete_fields if f not in returned and not f.generated]
    row = f"({', '.join(['%s'] * len(written))})"
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(quote(cast(str, f.column)) for f in written)}) "
        f"VALUES {', '.join([row] * rows)}"
    )
    if returned:
        sql += f" RETURNING {', '.join(quote(cast(str, f.column)) for f in returned)}"
    return written, returned, sql


def rows_insert[M: Model](objs: list[M]) -> list[M]:
    """Insert new instances of one model (primary keys unset) in one statement; set on each the values the
    database returns (its primary key, generated columns) and mark it saved, as bulk_create does."""
    if not objs:
        return objs
    model = type(objs[0])
    if pre_save.has_listeners(model) or post_save.has_listeners(model):
        for obj in objs:
            obj.save(force_insert=True)  # its receivers hear of it
        return objs
    written, returned, sql = _insert(connection.vendor, model, len(objs))
    most = connection.features.max_query_params
    if not connection.features.can_return_rows_from_bulk_insert or (most and len(objs) * len(written) > most):
        return model._default_manager.bulk_create(objs)  # it splits the rows into batches the database takes
    params: list[Any] = []
    for obj in objs:
        params += [field.get_db_prep_save(field.pre_save(obj, True), connection) for field in written]
    if any(hasattr(value, "resolve_expression") for value in params):
        return model._default_manager.bulk_create(objs)  # an expression (F(), a database default) is compiled there
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall() if returned else [()] * len(objs)
    for obj, row in zip(objs, rows, strict=True):
        for field, value in zip(returned, row, strict=True):
            setattr(obj, field.attname, value)
        obj._state.adding = False
        obj._state.db = connection.alias
    return objs


@functools.cache
def _select(vendor: str, model: type[Model], names: tuple[str, ...]) -> tuple[list[Field], str]:
    quote = connection.ops.quote_name
    wanted = {cast(Field, model._meta.get_field(name)) for name in names}
    fields = [f for f in model._meta.concrete_fields if f in wanted]  # in the order from_db takes them
    columns = ", ".join(quote(cast(str, f.column)) for f in fields)
    pk = quote(cast(str, model._meta.pk.column))
    return fields, f"SELECT {columns} FROM {quote(model._meta.db_table)} WHERE {pk} = %s"


def row_by_pk[M: Model](model: type[M], pk: Any, names: tuple[str, ...]) -> M:
    """The row with primary key `pk` as an instance with only the fields `names` loaded (the rest deferred, as with
    .only()); DoesNotExist when there is none."""
    fields, sql = _select(connection.vendor, model, (model._meta.pk.name, *names))
    with connection.cursor() as cursor:
        cursor.execute(sql, [pk])
        row = cursor.fetchone()
    if row is None:
        raise cast(Any, model).DoesNotExist(f"no {model._meta.object_name} {pk}")  # each model's own class
    values = []
    for field, value in zip(fields, row, strict=True):
        from_db = getattr(field, "from_db_value", None)
        values.append(from_db(value, None, connection) if from_db is not None else value)
    return model.from_db(connection.alias, [f.attname for f in fields], values)

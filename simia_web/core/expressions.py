"""SQL expressions the ORM does not have."""

from django.db.models import BooleanField, Func


class AmongIds(Func):
    """`column` is one of `ids`, sent as one parameter: `column = ANY(%s::bigint[])` on PostgreSQL (which hashes a
    long array), `column IN (SELECT value FROM json_each(%s))` on SQLite, the ids written as the array's or JSON's
    text (the driver would adapt a list of thousands item by item). `column__in=ids` sends a parameter per id, and a
    database refuses a statement past its limit (65,535 on PostgreSQL, 32,766 on SQLite)."""

    output_field = BooleanField()
    conditional = True

    def __init__(self, column, ids):
        super().__init__(column)
        self.ids = [int(pk) for pk in ids]

    def as_sql(self, compiler, connection, **extra_context):  # type: ignore[override]
        column, params = compiler.compile(self.get_source_expressions()[0])
        listed = ",".join(map(str, self.ids))
        if connection.vendor == "postgresql":
            return f"{column} = ANY(%s::bigint[])", [*params, f"{{{listed}}}"]
        return f"{column} IN (SELECT value FROM json_each(%s))", [*params, f"[{listed}]"]

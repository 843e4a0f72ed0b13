"""What an import reports when it refuses a file: every problem with its file, line and field."""

from dataclasses import asdict, dataclass

from simia_web.core.errors import ApplicationError

MAX_REPORTED = 20


@dataclass(frozen=True)
class ImportIssue:
    file: str
    line: int | None
    field: str
    message: str
    record: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f", line {self.line}"
        if self.record is not None:
            where += f" (record {self.record})"
        return f"{where}: {self.field + ': ' if self.field else ''}{self.message}"


class ImportRejected(ApplicationError):
    """Nothing was written. `errors` holds the first 20 problems; `total` counts them all. Over REST, a 400 with
    them all: `{detail, total, errors: [{file, line, field, message, record}]}`."""

    code = "import_rejected"

    def __init__(self, errors: list[ImportIssue], detail: str = ""):
        self.total = len(errors)
        self.errors = errors[:MAX_REPORTED]
        super().__init__(detail or self.message())

    def body(self) -> dict:
        return {"detail": self.detail, "total": self.total, "errors": [issue.as_dict() for issue in self.errors]}

    def message(self) -> str:
        more = f" (showing the first {len(self.errors)})" if self.total > len(self.errors) else ""
        lines = [f"Import refused: {self.total} problem{'s' if self.total != 1 else ''}{more}; nothing was written."]
        lines += [f"  - {issue}" for issue in self.errors]
        return "\n".join(lines)


class Collected(Exception):
    """Raised inside the importer to stop reading once a file cannot be read at all."""

    def __init__(self, issue: ImportIssue):
        self.issue = issue
        super().__init__(str(issue))

"""The one error every converter raises for malformed input, naming the field it tripped on."""

from simia_web.core.errors import ValidationFailed


class FormatError(ValidationFailed, ValueError):
    """Over REST, a 400 naming the field (the conversation, `messages`, when it names none)."""

    def __init__(self, field: str, message: str):
        super().__init__(message, field=field)
        self.message = message

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message

    def body(self) -> dict:
        return {self.field or "messages": [self.message]}

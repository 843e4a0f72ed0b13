"""The one error every converter raises for malformed input, naming the field it tripped on."""


class FormatError(ValueError):
    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)

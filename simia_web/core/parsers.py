"""JSON request bodies through the input gate (DRF's DEFAULT_PARSER_CLASSES)."""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from .json_input import JsonInvalid, JsonLimits, JsonRefused, bytes_bounded, json_parse, stream_chunks


class GatedJSONParser(JSONParser):
    """DRF's JSON parser with the gate's limits: the body is counted as it is read, then parsed once."""

    def parse(self, stream, media_type=None, parser_context=None):
        limits = JsonLimits.from_settings()
        try:
            data = bytes_bounded(stream_chunks(stream), limit=limits.max_bytes, where="body")
            return json_parse(data, where="", limits=limits)
        except JsonInvalid as exc:
            raise ParseError(f"JSON parse error - {exc.message}") from None  # DRF's own wording
        except JsonRefused as exc:
            raise ParseError(exc.body()) from None

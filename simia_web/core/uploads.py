"""Request bodies bounded while they stream, before they reach memory or disk.

- At the server (`body_bounded`, which wsgi.py wraps the application in): a body whose Content-Length is over
  SIMIA_REQUEST_MAX_BYTES is answered 413 before a byte of it is read, and a chunked body (which Django would
  read as empty) 411. gunicorn.conf.py closes those connections, so the server does not read the rest of the
  body looking for the next request.
- In Django (`BoundedUploadHandler`, the first of FILE_UPLOAD_HANDLERS): a multipart body over the same limit is
  refused before it is read, and a file as soon as more than SIMIA_IMPORT_MAX_BYTES of it arrived, before the
  next handlers keep it in memory or write it to a temporary file.
- core.middleware.RefusalMiddleware answers such a refusal on a page with 413 naming the limit; the REST API
  answers 400 naming it (DRF's multipart parse error).
"""

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler
from django.http.multipartparser import MultiPartParserError


class UploadTooLarge(MultiPartParserError):
    """A request body or an uploaded file over its limit (a parse error to Django and to DRF alike)."""


def _request_limit_message(length: int) -> str:
    limit = settings.SIMIA_REQUEST_MAX_BYTES
    return f"the request body is {length:,} bytes; the limit is {limit:,} bytes (SIMIA_REQUEST_MAX_BYTES)"


class BoundedUploadHandler(FileUploadHandler):
    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if content_length > settings.SIMIA_REQUEST_MAX_BYTES:
            raise UploadTooLarge(_request_limit_message(content_length))

    def receive_data_chunk(self, raw_data, start):
        limit = settings.SIMIA_IMPORT_MAX_BYTES
        if start + len(raw_data) > limit:
            raise UploadTooLarge(f"{self.file_name} is larger than {limit:,} bytes (SIMIA_IMPORT_MAX_BYTES)")
        return raw_data

    def file_complete(self, file_size):
        return None  # the next handler makes the file


def body_refusal(content_length: str | None, transfer_encoding: str | None) -> tuple[str, str] | None:
    """(status, reason) for a body that is answered without being read, from its headers; None for the rest."""
    try:
        length = int(content_length or 0)
    except ValueError:
        length = 0
    if length > settings.SIMIA_REQUEST_MAX_BYTES:
        return "413 Content Too Large", _request_limit_message(length)
    if "chunked" in (transfer_encoding or "").lower():  # Django reads such a body as empty
        return "411 Length Required", "a request body needs a Content-Length"
    return None


def body_bounded(application):
    """The WSGI application, answering a body it would not read in full before reading any of it."""

    def bounded(environ, start_response):
        refusal = body_refusal(environ.get("CONTENT_LENGTH"), environ.get("HTTP_TRANSFER_ENCODING"))
        if refusal is None:
            return application(environ, start_response)
        status, reason = refusal
        body = f"Refused: {reason}\n".encode()
        start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
        return [body]

    return bounded

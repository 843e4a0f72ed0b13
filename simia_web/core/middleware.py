"""Refusals that pages answer in plain words: an upload or a filter over its limit, naming the limit, and any
refusal of a service a page does not explain itself."""

from django.http import HttpResponse, UnreadablePostError

from .errors import ApplicationError
from .uploads import UploadTooLarge


def _refusal(status: int, message: str) -> HttpResponse:
    return HttpResponse(f"Refused: {message}\n", status=status, content_type="text/plain; charset=utf-8")


class RefusalMiddleware:
    """An upload over its limit is answered 413 and a filter over the query length 400, each naming the limit; any
    other ApplicationError a page lets through, with its status and detail.

    A page's form body is read here, just before CSRF protection would read it, so that the upload handlers'
    refusal becomes this answer; the REST API's views parse their own bodies (DRF answers 400 naming it)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, callback, callback_args, callback_kwargs):
        if request.method != "POST" or getattr(callback, "csrf_exempt", False):
            return None
        try:
            request.POST  # noqa: B018 (parsing it is the point)
        except UploadTooLarge as exc:
            return _refusal(413, str(exc))
        except UnreadablePostError:  # the client went away: CSRF protection treats it as it always has
            pass
        return None

    def process_exception(self, request, exception):
        if isinstance(exception, ApplicationError):
            return _refusal(exception.status_code, str(exception))
        return None

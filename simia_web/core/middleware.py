"""Refusals that pages answer in plain words: an upload or a filter over its limit, naming the limit, and any
refusal of a service a page does not explain itself."""

from django.http import HttpResponse, UnreadablePostError
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme

from .errors import ApplicationError
from .uploads import UploadTooLarge


def _refusal(status: int, message: str, request=None) -> HttpResponse:
    """The refusal as a page of the site for a browser (with the way back), as plain text for anything else."""
    if request is not None and _wants_page(request):
        back = request.headers.get("referer", "")
        if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
            back = ""
        return render(request, "refusal.html", {"message": message, "status": status, "back": back}, status=status)
    return HttpResponse(f"Refused: {message}\n", status=status, content_type="text/plain; charset=utf-8")


def _wants_page(request) -> bool:
    """A browser asking for a page: it accepts HTML, it is not htmx swapping a part, and it is not the REST API."""
    return (
        "text/html" in request.headers.get("accept", "")
        and not request.headers.get("hx-request")
        and not request.path.startswith("/api/")
    )


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
            return _refusal(413, str(exc), request)
        except UnreadablePostError:  # the client went away: CSRF protection treats it as it always has
            pass
        return None

    def process_exception(self, request, exception):
        if isinstance(exception, ApplicationError):
            return _refusal(exception.status_code, str(exception), request)
        return None

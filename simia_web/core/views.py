"""Pages that belong to no app: the site's icon at the address browsers and other clients ask for by convention."""

from django.contrib.staticfiles import finders
from django.http import FileResponse, Http404
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

# static/favicon.ico: the 16, 32 and 48 px renderings of static/favicon.svg, which pages link to.
ICON = "favicon.ico"


@require_safe
@cache_control(public=True, max_age=7 * 24 * 3600)
def favicon(request):
    """`/favicon.ico`, public (a browser asks for it without a session, before any login)."""
    path = finders.find(ICON)
    if not path:
        raise Http404(ICON)
    return FileResponse(open(path, "rb"), content_type="image/x-icon")  # noqa: SIM115 (FileResponse closes it)

"""Token authentication that throttles guessing: each wrong token counts against the client's address."""

from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import Throttled

from .throttling import AttemptThrottle


class BadTokenThrottle(AttemptThrottle):
    """Wrong tokens per client address (rate SIMIA_THROTTLE_BAD_TOKEN), counted for every web process."""

    scope = "bad_token"

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class ThrottledTokenAuthentication(TokenAuthentication):
    """Token authentication where an address that sent too many wrong tokens gets 429, even for a right one."""

    def authenticate(self, request):
        if not get_authorization_header(request):
            return None
        throttle = BadTokenThrottle()
        attempt = throttle.attempt_begin(request)
        if attempt is None:
            raise Throttled(wait=throttle.wait())
        authenticated = super().authenticate(request)  # a wrong token raises, and its place stays taken
        throttle.attempt_succeeded(attempt)
        return authenticated

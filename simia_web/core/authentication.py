"""Token authentication that throttles guessing: each wrong token counts against the client's address."""

from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled

from .throttling import SharedRateThrottle


class BadTokenThrottle(SharedRateThrottle):
    """Failed token logins per client address (rate SIMIA_THROTTLE_BAD_TOKEN), counted for every web process."""

    scope = "bad_token"

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def locked(self, request) -> bool:
        """True while this address has used up its failures, without counting this request as one."""
        return not self.has_room(self.get_cache_key(request, None))


class ThrottledTokenAuthentication(TokenAuthentication):
    """Token authentication where an address that sent too many wrong tokens gets 429, even for a right one."""

    def authenticate(self, request):
        if not get_authorization_header(request):
            return None
        throttle = BadTokenThrottle()
        if throttle.locked(request):
            raise Throttled(wait=throttle.wait())
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            throttle.allow_request(request, None)  # counts the failure
            raise

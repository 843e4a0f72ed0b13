"""Token authentication that throttles guessing: each wrong token counts against the client's address."""

import hashlib

from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled

from .throttling import AttemptThrottle

# Digests of the Authorization headers that authenticated in this process (a bounded set, emptied when full).
_KNOWN_MAX = 10_000
_known: set[bytes] = set()


class BadTokenThrottle(AttemptThrottle):
    """Wrong tokens per client address (rate SIMIA_THROTTLE_BAD_TOKEN), counted for every web process."""

    scope = "bad_token"


class ThrottledTokenAuthentication(TokenAuthentication):
    """Token authentication where an address that sent too many wrong tokens gets 429, even for a right one.

    A token not seen to authenticate before is checked as a pending attempt (see AttemptThrottle), so that of
    many guesses at once no more are checked than the rate allows. A token that already authenticated in this
    process is checked without one: checking it again tells a guesser nothing."""

    def authenticate(self, request):
        header = get_authorization_header(request)
        if not header:
            return None
        digest = hashlib.sha256(header).digest()
        if digest in _known:
            return super().authenticate(request)
        throttle = BadTokenThrottle()
        attempt = throttle.attempt_begin(request)
        if attempt is None:
            raise Throttled(wait=throttle.wait())
        try:
            authenticated = super().authenticate(request)
        except AuthenticationFailed:
            throttle.attempt_end(request, attempt, failed=True)
            raise
        throttle.attempt_end(request, attempt, failed=False)
        if authenticated is not None:
            if len(_known) >= _KNOWN_MAX:
                _known.clear()
            _known.add(digest)
        return authenticated

"""This thread's `openai` client for a profile's endpoint, behind the endpoint's limits (see transport.py).

The client and the endpoint probes (capabilities.py) both send through it.
"""

import threading

import openai

from .keys import profile_api_key
from .limits import endpoint_limiter
from .models import EndpointProfile
from .services import llm_slot_rank
from .transport import LimitedTransport

_thread_clients = threading.local()  # .clients: {client key: (openai.OpenAI, chat completions URL)}

# The SDK's telemetry headers (its platform, and retry count and timeout, which are ours to keep):
# a dozen more headers to build, validate and send on every call, which no endpoint needs.
_DROPPED_HEADERS = {
    name: openai.Omit()
    for name in (
        "X-Stainless-Lang",
        "X-Stainless-Package-Version",
        "X-Stainless-OS",
        "X-Stainless-Arch",
        "X-Stainless-Runtime",
        "X-Stainless-Runtime-Version",
        "X-Stainless-Async",
    )
}
PER_REQUEST_DROPPED_HEADERS = {"X-Stainless-Retry-Count": openai.Omit(), "X-Stainless-Read-Timeout": openai.Omit()}


def endpoint_client(profile: EndpointProfile) -> tuple[openai.OpenAI, str]:
    """This thread's client for the profile's endpoint, and the endpoint's chat completions URL.

    The profile's limits are shared by all threads (and, through Redis, by every worker). The URL is
    absolute, so that the SDK does not join it to its base URL again on every request (a tenth of the
    SDK's own CPU per request).

    One client per worker thread, each with its own connection: a shared connection pool locks and
    polls every idle connection on each request, and on a busy worker each of those steps waits for
    the GIL while holding the pool lock and a slot, which cost a sixth of the endpoint's capacity.
    """
    api_key = profile_api_key(profile) or "not-needed"
    limits = (profile.max_concurrency, profile.requests_per_minute, profile.tokens_per_minute)
    key = (profile.pk, profile.base_url, api_key, profile.timeout_seconds, limits)
    clients = _thread_clients.__dict__.setdefault("clients", {})
    if key not in clients:
        transport = LimitedTransport(endpoint_limiter(profile), llm_slot_rank)
        # Retries are ours, so that every attempt is logged and counted.
        client = openai.OpenAI(
            base_url=profile.base_url or None,
            api_key=api_key,
            timeout=profile.timeout_seconds,
            max_retries=0,
            # openai drops a default header given as its Omit sentinel; the parameter's annotation says text only.
            default_headers=_DROPPED_HEADERS,  # type: ignore[arg-type]
            http_client=openai.DefaultHttpxClient(transport=transport),
        )
        clients[key] = client, str(client.base_url.join("chat/completions"))
    return clients[key]

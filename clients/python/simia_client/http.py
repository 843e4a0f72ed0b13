"""JSON over HTTP with the retries a busy server asks for: 429 and 503 are waited out and sent again."""

import asyncio
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

# Answers that mean "not processed, try later": sending the same request again is safe, even a step.
RETRY_STATUSES = frozenset({429, 503})


class ApiError(Exception):
    """An error answer from Simia or the policy server, after any retries."""

    def __init__(self, status: int, code: str, detail: str, url: str):
        super().__init__(f"{status} {code}: {detail} ({url})")
        self.status = status
        self.code = code
        self.detail = detail
        self.url = url

    @classmethod
    def from_response(cls, response: httpx.Response) -> "ApiError":
        try:
            body = response.json()
        except ValueError:
            body = response.text
        if isinstance(body, dict) and "error" in body:
            # Simia: {"error": code, "detail": ...}; OpenAI-compatible servers: {"error": {"type", "message"}}.
            error = body["error"]
            if isinstance(error, dict):
                code, detail = str(error.get("type") or "error"), str(error.get("message"))
            else:
                code, detail = str(error), str(body.get("detail", ""))
        else:  # a field-by-field validation answer, or not JSON at all
            code, detail = ("invalid_request" if response.status_code == 400 else "error"), str(body)
        return cls(response.status_code, code, detail, str(response.request.url))


@dataclass(frozen=True)
class Retry:
    """How long to keep asking: `attempts` sends in all; between them the server's Retry-After, else an
    exponential backoff from `backoff` seconds with jitter; never more than `max_wait` seconds at once."""

    attempts: int = 8
    backoff: float = 0.5
    max_wait: float = 60.0

    def wait(self, response: httpx.Response, attempt: int) -> float:
        asked = retry_after(response)
        if asked is None:
            asked = self.backoff * 2 ** (attempt - 1) * random.uniform(0.5, 1.0)
        return min(asked, self.max_wait)


def retry_after(response: httpx.Response) -> float | None:
    """Seconds the server asked to wait (Retry-After as seconds or as an HTTP date), if it said."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


async def request_json(
    http: httpx.AsyncClient, method: str, url: str, *, retry: Retry, headers: dict, json=None, params=None
):
    """The decoded JSON answer; ApiError for an error answer once retries are spent."""
    for attempt in range(1, retry.attempts + 1):
        response = await http.request(method, url, headers=headers, json=json, params=params)
        if response.status_code not in RETRY_STATUSES or attempt == retry.attempts:
            break
        await asyncio.sleep(retry.wait(response, attempt))
    if response.is_error:
        raise ApiError.from_response(response)
    return response.json()

"""The trainer client against a live server: the shop domain and scripted stages of the environment tests,
a token, and the policy answering as vLLM does."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from simia_web.accounts.services import user_token
from tests.environments.conftest import script, shop  # noqa: F401 (fixtures)

from .vllm_policy import policy


@pytest.fixture
def simia(live_server, users, shop, script):  # noqa: F811 (fixtures)
    """The live server's URL and a curator's token; the scripted stub also serves the policy."""
    script.agent = policy  # requests without a stage header are the policy's
    return {"url": live_server.url, "token": user_token(user=users["curator"])}


def in_thread(function, *args):
    """Run in a thread of its own, as a trainer's script runs: asyncio.run needs a thread without a running event
    loop, and Playwright's sync API (the browser tests) keeps one running in the main thread."""
    with ThreadPoolExecutor(1) as runner:
        return runner.submit(function, *args).result()

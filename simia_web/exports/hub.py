"""Publishing an export's files to a Hugging Face dataset repo, through huggingface_hub's public API.

Optional: without a token (HF_TOKEN) or a repo id it is skipped, saying which is missing; with
HF_HUB_OFFLINE set, or a Hub it cannot reach, it says so. Nothing here raises: the outcome is returned.
"""

from pathlib import Path

import httpx2
from django.conf import settings
from django.utils import timezone

PUSHED, SKIPPED, FAILED = "pushed", "skipped", "failed"


def _outcome(status: str, detail: str, repo: str = "", url: str = "") -> dict:
    return {"status": status, "detail": detail, "repo": repo, "url": url, "at": timezone.now().isoformat()}


def hub_push(*, folder: Path, names: list[str], repo: str, message: str) -> dict:
    """Upload `names` (paths inside `folder`) to the dataset repo `repo` (made, private, when it does not exist) in
    one commit; returns {status, detail, repo, url, at}."""
    if not settings.HF_TOKEN:
        return _outcome(SKIPPED, "not pushed: HF_TOKEN is not set", repo)
    if not repo:
        return _outcome(SKIPPED, "not pushed: no dataset repo (set SIMIA_HF_DATASET_REPO or the hub_repo option)")
    # huggingface_hub loads in the worker that publishes, not in every web process.
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    api = HfApi(endpoint=settings.HF_ENDPOINT, token=settings.HF_TOKEN)
    try:
        api.create_repo(repo, repo_type="dataset", private=True, exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo,
            repo_type="dataset",
            folder_path=folder,
            allow_patterns=names,
            commit_message=message,
        )
    except OfflineModeIsEnabled:
        return _outcome(SKIPPED, "not pushed: HF_HUB_OFFLINE is set (no network to the Hub)", repo)
    except httpx2.TransportError as exc:
        return _outcome(FAILED, f"not pushed: {settings.HF_ENDPOINT} could not be reached ({exc})", repo)
    except HfHubHTTPError as exc:
        return _outcome(FAILED, f"not pushed: the Hub refused it ({exc})"[:2000], repo)
    return _outcome(PUSHED, f"pushed {len(names)} files", repo, commit.commit_url)

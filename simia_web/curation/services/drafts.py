"""Editor drafts: the editor's form kept as the annotator left it, tied to the version they were editing."""

from simia_web.core.jsonutil import canonical_bytes
from simia_web.curation.models import EditorDraft, Trajectory

from .holds import ReviewError

# A draft repeats the editor's form; the editor opens documents up to EDIT_MAX_BYTES, so twice that is plenty.
DRAFT_MAX_BYTES = 1024 * 1024


def draft_save(*, trajectory: Trajectory, author, based_on_version: int, fields: dict[str, list[str]]) -> EditorDraft:
    """Keep the editor's form as `author` left it (saved as they type), tied to the version they were editing."""
    if len(canonical_bytes(fields)) > DRAFT_MAX_BYTES:
        raise ReviewError(f"A draft holds at most {DRAFT_MAX_BYTES // 1024} KiB.", field="draft")
    draft, _ = EditorDraft.objects.update_or_create(
        trajectory=trajectory, author=author, defaults={"based_on_version": based_on_version, "fields": fields}
    )
    return draft


def draft_discard(*, trajectory_id: int, author) -> bool:
    return bool(EditorDraft.objects.filter(trajectory_id=trajectory_id, author=author).delete()[0])

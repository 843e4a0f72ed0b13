"""Guidelines: the Markdown rules people decide by, per domain or as a workspace's default that domains without
their own follow. Saves are versioned (the writer names the version they edited; a stale one is refused) and kept as
revisions, so a version can be compared with the one before and brought back as the next version.

`guidelines_in_force` says which guidelines (and which version) a decision on a domain's item is made under."""

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Q, Subquery
from django.utils import timezone

from simia_web.accounts.models import owner_workspace_id
from simia_web.core.errors import ValidationFailed, VersionConflict
from simia_web.core.markdown import markdown_html
from simia_web.core.selectors import revision_list
from simia_web.core.services import audit_record, revision_record

from .models import Domain, Guidelines

# Guidelines are read beside every item: long enough for a handbook, short enough to send with every page.
GUIDELINES_MAX_CHARS = 100_000


@dataclass(frozen=True)
class InForce:
    """The guidelines a domain's items are decided under: the domain's own, the workspace's default, or none."""

    guidelines: Guidelines | None
    inherited: bool  # the workspace's default, the domain having none of its own

    @property
    def version(self) -> int | None:
        return self.guidelines.version if self.guidelines is not None else None

    @property
    def text(self) -> str:
        return self.guidelines.text if self.guidelines is not None else ""

    @property
    def html(self):
        return markdown_html(self.text)

    @property
    def stamp(self) -> dict:
        """The fields a decision or rating records: which guidelines, at which version."""
        guidelines = self.guidelines
        return {
            "guidelines_id": guidelines.pk if guidelines is not None else None,
            "guidelines_version": guidelines.version if guidelines is not None else None,
        }


NONE_IN_FORCE = InForce(None, False)


def guidelines_in_force(*, domain_id: int | None) -> InForce:
    """The guidelines in force on a domain (two rows at most read, one query)."""
    if domain_id is None:
        return NONE_IN_FORCE
    workspace = Domain.objects.filter(pk=domain_id).values("workspace_id")[:1]
    found = Guidelines.objects.filter(Q(domain_id=domain_id) | Q(workspace_id=Subquery(workspace), domain__isnull=True))
    rows = {row.domain_id: row for row in found}
    if domain_id in rows:
        return InForce(rows[domain_id], False)
    return InForce(rows[None], True) if None in rows else NONE_IN_FORCE


def guidelines_stamps(*, domain_ids: Iterable[int]) -> dict[int, dict]:
    """{domain id: the stamp of the guidelines in force there} for several domains, in two queries."""
    domain_ids = set(domain_ids)
    workspaces = dict(Domain.objects.filter(pk__in=domain_ids).values_list("pk", "workspace_id"))
    own = {g.domain_id: g for g in Guidelines.objects.filter(domain_id__in=domain_ids)}
    defaults = {
        g.workspace_id: g
        for g in Guidelines.objects.filter(workspace_id__in=set(workspaces.values()), domain__isnull=True)
    }
    stamps = {}
    for pk in domain_ids:
        guidelines = own.get(pk) or defaults.get(workspaces.get(pk))
        stamps[pk] = InForce(guidelines, pk not in own).stamp
    return stamps


@dataclass(frozen=True)
class ForceMap:
    """Which guidelines are in force where, over some workspaces: each domain with its own, and each workspace's
    default (in force on that workspace's other domains)."""

    own: dict[int, tuple[int, int]]  # {domain id: (guidelines id, version)}
    defaults: dict[int, tuple[int, int]]  # {workspace id: (guidelines id, version)}


def guidelines_force_map(*, workspace_ids: Iterable[int] | None = None) -> ForceMap:
    """The guidelines in force over the workspaces `workspace_ids` (every workspace when None): one query, a row
    per guidelines."""
    rows = Guidelines.objects.all()
    if workspace_ids is not None:
        rows = rows.filter(workspace_id__in=list(workspace_ids))
    own: dict[int, tuple[int, int]] = {}
    defaults: dict[int, tuple[int, int]] = {}
    for pk, workspace_id, domain_id, version in rows.values_list("pk", "workspace_id", "domain_id", "version"):
        if domain_id is None:
            defaults[workspace_id] = (pk, version)
        else:
            own[domain_id] = (pk, version)
    return ForceMap(own, defaults)


def guidelines_of(*, workspace_id: int, domain: Domain | None) -> Guidelines | None:
    """The guidelines row of a domain (its own), or of the workspace (its default) when `domain` is None."""
    if domain is not None:
        return Guidelines.objects.filter(domain=domain).select_related("updated_by").first()
    return (
        Guidelines.objects.filter(workspace_id=workspace_id, domain__isnull=True).select_related("updated_by").first()
    )


def text_diff(before: str, after: str) -> list[tuple[str, str]]:
    """Line diff of two texts as (kind, line), kind in {"add", "del", "ctx", "hunk"} (as core.display.json_diff)."""
    lines = []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=2):
        if line.startswith(("---", "+++")):
            continue
        lines.append(({"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx"), line))
    return lines


def guidelines_history(guidelines: Guidelines | None, *, limit: int) -> list[dict]:
    """The last `limit` versions, newest first, each with its line diff from the one before."""
    if guidelines is None:
        return []
    revisions = list(revision_list(obj=guidelines).order_by("-version")[: limit + 1])
    return [
        {
            "revision": revision,
            "diff": text_diff(previous.data.get("text", ""), revision.data.get("text", "")) if previous else [],
            "current": revision.version == guidelines.version,
        }
        for revision, previous in zip(revisions[:limit], [*revisions[1:], None], strict=False)
    ]


def domain_review_stage_set(*, domain: Domain, on: bool | None, actor) -> Domain:
    """Switch the reviewer stage on or off for one domain, or (None) let it follow its workspace's switch."""
    if domain.review_stage != on:
        previous = domain.review_stage
        Domain.objects.filter(pk=domain.pk).update(review_stage=on)
        domain.review_stage = on
        audit_record(actor=actor, action="domain.review_stage", target=domain, data={"from": previous, "to": on})
    return domain


def _text_checked(text) -> str:
    if not isinstance(text, str):
        raise ValidationFailed("must be text", field="text")
    if len(text) > GUIDELINES_MAX_CHARS:
        raise ValidationFailed(f"at most {GUIDELINES_MAX_CHARS} characters", field="text")
    return text.replace("\r\n", "\n")


@transaction.atomic
def guidelines_save(
    *, workspace_id: int, domain: Domain | None, text, expected_version: int, actor, note: str = ""
) -> Guidelines:
    """Save the guidelines of `domain` (its own; the workspace's default when None) as their next version.

    `expected_version` is the version the writer edited: 0 for guidelines not written yet. A version that moved on
    is refused with VersionConflict (nothing written); a version of guidelines that do not exist, with
    ValidationFailed."""
    text = _text_checked(text)
    if domain is not None and domain.workspace_id != workspace_id:
        raise ValidationFailed("The domain is not this workspace's.", field="domain")
    rows = Guidelines.objects.select_for_update()
    current = (
        rows.filter(domain=domain).first() if domain else rows.filter(workspace_id=workspace_id, domain=None).first()
    )
    if current is None:
        if expected_version != 0:
            raise ValidationFailed("There are no guidelines yet: write the first with version 0.", field="version")
        try:
            with transaction.atomic():
                current = Guidelines.objects.create(
                    workspace_id=workspace_id, domain=domain, text=text, version=1, updated_by=actor
                )
        except IntegrityError:  # someone wrote the first version meanwhile
            raced = Guidelines.objects.get(workspace_id=workspace_id, domain=domain)
            raise VersionConflict(raced, expected_version) from None
    else:
        if current.version != expected_version:
            raise VersionConflict(current, expected_version)
        current.text, current.version, current.updated_by = text, current.version + 1, actor
        current.updated_at = timezone.now()
        current.save(update_fields=["text", "version", "updated_by", "updated_at"])
    revision = revision_record(obj=current, data={"text": text}, author=actor, note=note or "saved")
    audit_record(
        actor=actor,
        action="guidelines.update",
        target=current,
        data={"version": current.version, "domain": domain.name if domain else None, "changes": len(revision.changes)},
    )
    return current


def guidelines_revert(*, guidelines: Guidelines, to_version: int, expected_version: int, actor) -> Guidelines:
    """Make version `to_version`'s text the current text, as the next version (history is kept)."""
    revision = revision_list(obj=guidelines).filter(version=to_version).first()
    if revision is None:
        raise ValidationFailed(f"There is no version {to_version} to go back to.", field="to_version")
    domain = Domain.objects.filter(pk=guidelines.domain_id).first() if guidelines.domain_id else None
    return guidelines_save(
        workspace_id=owner_workspace_id(guidelines),
        domain=domain,
        text=revision.data.get("text", ""),
        expected_version=expected_version,
        actor=actor,
        note=f"reverted to v{to_version}",
    )

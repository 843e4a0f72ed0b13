"""Near-duplicate tasks: the task corpus of the near-duplicate index (dedup), and the check synthesized tasks go
through (the index finds the candidates, their instructions are compared exactly)."""

from simia_web.dedup.corpora import Corpus
from simia_web.dedup.selectors import text_candidates
from simia_web.formats.rules import NEAR_DUPLICATE_THRESHOLD, shingles, similarity

from .models import Task, TaskStatus

TASKS = "task"

CORPUS = Corpus(
    name=TASKS,
    queryset=lambda: Task.objects.all(),
    fields=("instruction",),
    workspace="domain__workspace_id",
    text=lambda values: values["instruction"] or "",
)


def task_duplicate_of(*, domain, instruction: str) -> int | None:
    """The oldest valid task of the domain whose instruction this one near-duplicates, if any."""
    candidates = text_candidates(corpus=TASKS, workspace_id=domain.workspace_id, text=instruction)
    if not candidates:
        return None
    words = shingles(instruction)
    rows = Task.objects.filter(pk__in=candidates, domain_id=domain.pk, status=TaskStatus.VALID).order_by("pk")
    for pk, other in rows.values_list("pk", "instruction"):
        if similarity(words, shingles(other)) >= NEAR_DUPLICATE_THRESHOLD:
            return pk
    return None

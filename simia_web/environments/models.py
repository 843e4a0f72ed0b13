"""Simia-RL environment sessions: an episode served over HTTP, its limits, its steps and how it ended."""

import uuid

from django.conf import settings
from django.db import models

DEFAULT_MAX_STEPS = 30
DEFAULT_MAX_ERRORS = 5
DEFAULT_TOKEN_BUDGET = 200_000
DEFAULT_MAX_TOOL_CALLS_PER_STEP = 16


class TerminationReason(models.TextChoices):
    USER_DONE = "user_done", "The simulated user is done"
    MAX_STEPS = "max_steps", "Step limit reached"
    MAX_ERRORS = "max_errors", "Error limit reached"
    TOKEN_BUDGET = "token_budget", "Token budget spent"
    LLM_ERROR = "llm_error", "The user simulator could not answer"
    ABANDONED = "abandoned", "Abandoned by the client"
    IDLE_TIMEOUT = "idle_timeout", "Abandoned after too long without a step"


class EnvGroup(models.Model):
    """A GRPO group: every session created with the same key plays the same task.

    The unique key makes "the first create picks the task" safe when G creates race.
    """

    key = models.CharField(max_length=120, unique=True)
    domain = models.ForeignKey("catalog.Domain", on_delete=models.PROTECT, related_name="+")

    workspace_path = "domain__workspace"
    task = models.ForeignKey("catalog.Task", on_delete=models.PROTECT, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"group {self.key} (task {self.task_id})"


class EnvSession(models.Model):
    """One RL episode against the simulated environment, stepped one agent message at a time.

    `messages` is the canonical conversation (OpenAI chat format) and `steps` the simulator data per
    message index, exactly as on a Trajectory; `state` is the explicit world state after the last step.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    domain = models.ForeignKey("catalog.Domain", on_delete=models.PROTECT, related_name="env_sessions")

    workspace_path = "domain__workspace"
    task = models.ForeignKey("catalog.Task", on_delete=models.PROTECT, related_name="env_sessions")
    group = models.ForeignKey(EnvGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions")
    trajectory = models.OneToOneField(
        "curation.Trajectory", null=True, blank=True, on_delete=models.SET_NULL, related_name="env_session"
    )
    # Snapshots taken at creation, so later catalog edits do not change a running episode.
    tools = models.JSONField(default=list)
    api_specs = models.JSONField(default=dict)
    initial_state = models.JSONField(default=dict, blank=True)
    state = models.JSONField(default=dict, blank=True)
    messages = models.JSONField(default=list)
    steps = models.JSONField(default=dict, blank=True)
    step_count = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)
    tokens_used = models.PositiveIntegerField(default=0)
    llm_call_ids = models.JSONField(default=list, blank=True)
    max_steps = models.PositiveIntegerField(default=DEFAULT_MAX_STEPS)
    max_errors = models.PositiveIntegerField(default=DEFAULT_MAX_ERRORS)
    token_budget = models.PositiveIntegerField(default=DEFAULT_TOKEN_BUDGET)
    max_tool_calls_per_step = models.PositiveIntegerField(default=DEFAULT_MAX_TOOL_CALLS_PER_STEP)
    done = models.BooleanField(default=False, db_index=True)
    reward = models.FloatField(null=True, blank=True)
    reward_breakdown = models.JSONField(default=dict, blank=True)
    termination_reason = models.CharField(max_length=40, choices=TerminationReason.choices, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="env_sessions"
    )
    # Counted against its account's SIMIA_ENV_MAX_LIVE_SESSIONS: set once the session is written and counted.
    admitted = models.BooleanField(default=True)
    # Bumped on every write: steps run without a lock and store their result only if it is unchanged.
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["created_by", "done"])]

    def __str__(self):
        return f"env session {self.pk}"

    @property
    def limits(self) -> dict:
        return {
            "max_steps": self.max_steps,
            "max_errors": self.max_errors,
            "token_budget": self.token_budget,
            "max_tool_calls_per_step": self.max_tool_calls_per_step,
        }

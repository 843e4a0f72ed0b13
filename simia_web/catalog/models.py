"""The catalog: domains (policy, world state and its schema), their APIs (JSON Schema tools), tasks and imported
seed trajectories, each with its provenance and a version that every edit advances."""

from django.conf import settings
from django.db import models

from simia_web.accounts.models import owner_workspace_field

from .validation import STATE_PROBLEM_LABELS


class Provenance(models.Model):
    """Where a generated or imported row came from."""

    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    provenance = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64, blank=True, db_index=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class DomainSource(models.TextChoices):
    MANUAL = "manual", "Manual"
    SYNTHESIZED = "synthesized", "Synthesized"
    TAU2 = "tau2", "τ²-bench import"
    SEEDS = "seeds", "Seed import"
    MCP = "mcp", "MCP server import"
    OPENAPI = "openapi", "OpenAPI import"
    DEMO = "demo", "Demo data"


class Domain(Provenance):
    name = models.SlugField(max_length=80, unique=True)
    description = models.TextField(blank=True)
    policy = models.TextField(blank=True)
    state_schema = models.JSONField(default=dict, blank=True)
    initial_state = models.JSONField(default=dict, blank=True)
    state_errors = models.JSONField(default=list, blank=True)
    source = models.CharField(max_length=16, choices=DomainSource.choices, default=DomainSource.MANUAL)
    # Everything made from a domain (APIs, tasks, seeds, trajectories and what hangs off them) is its workspace's.
    workspace = owner_workspace_field(related_name="domains")
    # The reviewer stage on this domain's items: on, off, or (empty) as its workspace says.
    review_stage = models.BooleanField(
        null=True,
        blank=True,
        help_text="Annotators' decisions wait for a reviewer: yes, no, or empty for the workspace's setting.",
    )

    workspace_path = "workspace"

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def state_problems(self) -> list[str]:
        """The world state's own problems (schema, initial state); the rest of state_errors are the API set's."""
        return [e for e in self.state_errors if str(e).startswith(STATE_PROBLEM_LABELS)]


class ApiKind(models.TextChoices):
    READ = "read", "Read-only"
    WRITE = "write", "State-changing"


class Api(Provenance):
    """A tool of a domain: its JSON Schema parameters, return schema, and the state it touches."""

    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="apis")

    workspace_path = "domain__workspace"
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    parameters = models.JSONField(default=dict)
    returns = models.JSONField(default=dict, blank=True)
    kind = models.CharField(max_length=8, choices=ApiKind.choices, default=ApiKind.READ)
    touches = models.JSONField(default=list, blank=True)
    valid = models.BooleanField(default=True, db_index=True)
    errors = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["domain_id", "name", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["domain", "name"], condition=models.Q(valid=True), name="api_unique_valid_name"
            )
        ]

    def __str__(self):
        return f"{self.domain_id}:{self.name}"

    def as_tool(self) -> dict:
        """The OpenAI function-tool schema for this API."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class TaskStatus(models.TextChoices):
    VALID = "valid", "Valid"
    DUPLICATE = "duplicate", "Near-duplicate"
    REJECTED = "rejected", "Rejected"


class Task(Provenance):
    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="tasks")

    workspace_path = "domain__workspace"
    external_id = models.CharField(max_length=80, blank=True)
    instruction = models.TextField()
    user_scenario = models.JSONField(default=dict, blank=True)
    apis_needed = models.JSONField(default=list, blank=True)
    expected_outcome = models.TextField(blank=True)
    expected_actions = models.JSONField(default=list, blank=True)
    difficulty = models.CharField(max_length=16, blank=True)
    status = models.CharField(max_length=16, choices=TaskStatus.choices, default=TaskStatus.VALID, db_index=True)
    errors = models.JSONField(default=list, blank=True)
    duplicate_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["domain_id", "id"]

    def __str__(self):
        return f"task {self.pk} ({self.domain_id})"


class SeedFormat(models.TextChoices):
    TAU2 = "tau2", "τ²-bench"
    SHAREGPT = "sharegpt", "ShareGPT"
    OPENAI = "openai", "OpenAI chat"


class Seed(Provenance):
    """An imported trajectory in the canonical format, used as the pattern for amplification."""

    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="seeds")

    workspace_path = "domain__workspace"
    source_format = models.CharField(max_length=16, choices=SeedFormat.choices)
    source_name = models.CharField(max_length=300, blank=True)
    source_record = models.PositiveIntegerField(default=0)
    messages = models.JSONField(default=list)
    tools = models.JSONField(default=list, blank=True)
    usable = models.BooleanField(default=True, db_index=True)
    problems = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["domain_id", "id"]
        constraints = [models.UniqueConstraint(fields=["domain", "content_hash"], name="seed_unique_content")]

    def __str__(self):
        return f"seed {self.pk} ({self.domain_id})"


class DomainReference(models.Model):
    """The real implementation of a domain's APIs, as an MCP server (a command, or a streamable-HTTP URL):
    what fidelity measures the simulator against, and what a rollout can run against instead of it."""

    domain = models.OneToOneField(Domain, on_delete=models.CASCADE, related_name="reference")

    workspace_path = "domain__workspace"
    command = models.CharField(max_length=2000, blank=True, help_text="Run over stdio (admins only).")
    url = models.CharField(max_length=2000, blank=True, help_text="A streamable-HTTP MCP endpoint.")
    reset_tool = models.CharField(
        max_length=120, blank=True, help_text="A tool called with no arguments at the start of every session."
    )
    response_pointer = models.CharField(
        max_length=200, blank=True, help_text="A JSON Pointer to the API's response inside each tool answer."
    )
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"reference of {self.domain_id}"


class Guidelines(models.Model):
    """The written rules people decide by, in Markdown: a domain's own (`domain` set), or its workspace's default
    (`domain` empty), which every domain without its own follows. Every save is the next version, kept as a revision
    (core.Revision) so that it can be compared with and brought back."""

    workspace = owner_workspace_field(related_name="guidelines")
    domain = models.OneToOneField(Domain, null=True, blank=True, on_delete=models.CASCADE, related_name="guidelines")
    text = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=1)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    workspace_path = "workspace"

    class Meta:
        verbose_name_plural = "guidelines"
        constraints = [
            models.UniqueConstraint(
                fields=["workspace"], condition=models.Q(domain__isnull=True), name="guidelines_one_default"
            )
        ]

    def __str__(self):
        return f"guidelines of {self.domain_id or 'workspace'} v{self.version}"

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from simia_web.core.fields import DocumentJSONField

from .validation import profile_problems


class StructuredMode(models.TextChoices):
    AUTO = "auto", "Auto (json_schema, falling back)"
    JSON_SCHEMA = "json_schema", "response_format json_schema"
    JSON_OBJECT_SCHEMA = "json_object_schema", "response_format json_object with its schema"
    JSON_OBJECT = "json_object", "response_format json_object"
    PROMPT = "prompt", "Schema in the prompt only"


class ToolMode(models.TextChoices):
    AUTO = "auto", "Auto (native, falling back)"
    NATIVE = "native", "Native tool calls"
    PROMPT = "prompt", "Tool calls as JSON in the prompt"


class Stage(models.TextChoices):
    API_SYNTHESIS = "api_synthesis", "API synthesis"
    TASK_SYNTHESIS = "task_synthesis", "Task synthesis"
    AGENT = "agent", "Agent"
    SIMULATOR = "simulator", "Simulator"
    USER_SIMULATOR = "user_simulator", "User simulator"
    JUDGE = "judge", "Judge"
    AMPLIFY = "amplify", "Amplification"


class EndpointProfile(models.Model):
    """An OpenAI-compatible endpoint. Its API key is stored encrypted (llm.keys), or read from the environment
    variable it names."""

    name = models.CharField(max_length=80, unique=True)
    base_url = models.URLField(max_length=300, blank=True, help_text="Empty means the OpenAI default.")
    api_key_env = models.CharField(
        max_length=80,
        default="OPENAI_API_KEY",
        help_text="The environment variable holding the API key on the web and worker machines, when no key is "
        "stored on the profile.",
    )
    api_key_encrypted = models.TextField(
        blank=True,
        default="",
        help_text="The API key, encrypted with a key derived from SIMIA_SECRET_KEY_ENCRYPTION (or SECRET_KEY); "
        "empty: the key is read from the variable named in api_key_env.",
    )
    model = models.CharField(max_length=120)
    temperature = models.FloatField(default=0.7)
    max_tokens = models.PositiveIntegerField(
        default=2048, help_text="The most any stage asks for in one answer (each stage has its own default under it)."
    )
    stage_max_tokens = models.JSONField(
        default=dict,
        blank=True,
        help_text='Answer sizes per stage, overriding the defaults, e.g. {"user_simulator": 200, "judge": 600}.',
    )
    context_window = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Tokens the model takes in one call, prompt and answer together. Filled by 'Test endpoint' where "
        "the server reports it, or when it names it in a refusal; set it here otherwise (unknown: 8192 is assumed).",
    )
    chars_per_token = models.FloatField(
        default=2.5,
        help_text="Characters per prompt token, learned from the token counts the endpoint returns (starts low, "
        "so that prompts are sized conservatively).",
    )
    tokens_per_second = models.FloatField(
        null=True,
        blank=True,
        help_text="Answer tokens per second of a call at the slow end (queueing at the server included), learned "
        "from use: a stage's timeout grows with the time its longest answer takes at this rate.",
    )
    capabilities = models.JSONField(
        default=dict,
        blank=True,
        help_text="What 'Test endpoint' found (modes, context window and the evidence) and fallbacks learned in use.",
    )
    timeout_seconds = models.FloatField(default=60)
    max_concurrency = models.PositiveIntegerField(
        default=8, help_text="Requests in flight at once, across every worker process and machine."
    )
    requests_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Requests the endpoint takes per minute, across every worker (empty: no limit).",
    )
    tokens_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Tokens the endpoint takes per minute, across every worker, counted before each request as "
        "its prompt's bytes / 4 plus the most it may write (empty: no limit).",
    )
    structured_mode = models.CharField(max_length=24, choices=StructuredMode.choices, default=StructuredMode.AUTO)
    tool_mode = models.CharField(max_length=16, choices=ToolMode.choices, default=ToolMode.AUTO)
    price_input_per_mtok = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    price_output_per_mtok = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    cache_enabled = models.BooleanField(default=False)
    is_default = models.BooleanField(default=False)
    follows_environment = models.BooleanField(
        default=False,
        help_text="Take the base URL, model and key variable from OPENAI_BASE_URL, SIMIA_MODEL and OPENAI_API_KEY "
        "as they are set on each machine using the profile (the values shown are those it was made with). "
        "Untick and save to set them here instead.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"], condition=models.Q(is_default=True), name="one_default_profile"
            )
        ]

    def __str__(self):
        return f"{self.name} ({self.model})"

    def clean(self):
        if problems := profile_problems(base_url=self.base_url, api_key_env=self.api_key_env):
            raise ValidationError(problems)


class StageRoute(models.Model):
    """Which profile a pipeline stage uses when the job does not say."""

    stage = models.CharField(max_length=32, choices=Stage.choices, unique=True)
    profile = models.ForeignKey(EndpointProfile, on_delete=models.CASCADE)

    def __str__(self):
        return f"{self.stage} → {self.profile.name}"


class LLMCall(models.Model):
    """One HTTP attempt against an endpoint (or a cache hit), with what it cost."""

    stage = models.CharField(max_length=32, choices=Stage.choices, db_index=True)
    profile = models.ForeignKey(EndpointProfile, null=True, on_delete=models.SET_NULL)
    model = models.CharField(max_length=120)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="llm_calls")

    workspace_path = "job__workspace"
    request_hash = models.CharField(max_length=64, db_index=True)
    prompt_version = models.CharField(max_length=40, blank=True)
    request = DocumentJSONField()
    response = DocumentJSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    error_kind = models.CharField(max_length=40, blank=True, db_index=True)
    attempt = models.PositiveSmallIntegerField(default=1)
    mode = models.CharField(max_length=24, blank=True)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    cache_hit = models.BooleanField(default=False)
    # What was cut from the prompt to fit the context window: [{"what", "index", "chars"}].
    trimmed = models.JSONField(default=list, blank=True)
    # When the call was made: its row may be written later, at the end of its job unit.
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"{self.stage} {self.model} #{self.pk}"

    @property
    def ok(self) -> bool:
        return not self.error

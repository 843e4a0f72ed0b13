"""One settings module, configured from the environment.

With nothing set, everything runs on one machine: a SQLite file, a filesystem broker and a
worker started by `make run`. Point DATABASE_URL and CELERY_BROKER_URL at PostgreSQL and Redis
to share the load across worker machines.
"""

import ipaddress
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("SIMIA_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    # A key in the source signs nothing worth having: it is only good for a server no one else can reach.
    if not set(ALLOWED_HOSTS) <= LOCAL_HOSTS:
        raise RuntimeError("SECRET_KEY must be set when ALLOWED_HOSTS names hosts other than this machine")
    SECRET_KEY = "insecure-local-only-key-set-SECRET_KEY-in-production"
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",  # intcomma: counts with thousands separators
    "django.contrib.postgres",  # full-text search fields and lookups (unused on SQLite)
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "axes",
    "django_htmx",
    "simia_web.core",
    "simia_web.dedup",
    "simia_web.accounts",
    "simia_web.auditlog",
    "simia_web.llm",
    "simia_web.catalog",
    "simia_web.jobs",
    "simia_web.synthesis",
    "simia_web.curation",
    "simia_web.exports",
    "simia_web.environments",
    "simia_web.operations",
    "simia_web.fidelity",
    "simia_web.calibration",
    "simia_web.audits",
]

MIDDLEWARE = [
    # /healthz and /readyz, answered before anything else (no host check, HTTPS redirect, session or outage page).
    "simia_web.operations.probes.ProbeMiddleware",
    # Counts and times every other request for /metrics.
    "simia_web.operations.metrics.RequestMetricsMiddleware",
    # So that it sees every response: a request that met a database or Redis outage gets 503, not 500.
    "simia_web.core.outages.OutageMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "simia_web.core.middleware.RefusalMiddleware",  # before CSRF, which reads the body
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

ROOT_URLCONF = "simia_web.urls"
WSGI_APPLICATION = "simia_web.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

VAR_DIR.mkdir(parents=True, exist_ok=True)
# A connection kept between requests is checked before a request uses it (CONN_HEALTH_CHECKS): after a
# PostgreSQL restart each process opens a new one instead of failing its next request.
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'simia.sqlite3'}"),
        conn_max_age=60,
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL and IMMEDIATE transactions let the web process and worker threads share the file.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # The review queue's covering indexes (INCLUDE columns) are a PostgreSQL speed-up; SQLite builds them
    # without those columns, which is all the embedded default needs.
    SILENCED_SYSTEM_CHECKS = ["models.W040"]
elif os.environ.get("SIMIA_DB_POOL_SIZE"):
    # Workers with hundreds of threads (an endpoint allowing hundreds of concurrent requests) share a pool of
    # this many PostgreSQL connections: a thread gives its connection back while it waits on the LLM.
    # The pool looks at each connection it hands out (without a round trip unless the server has written to
    # it: simia_web.core.db), so that connections a restart ended are replaced instead of failing a query, and
    # tries to reconnect every few seconds while the server is away (not at ever longer intervals).
    from simia_web.core.db import (
        POOL_RECONNECT_SECONDS,
        POOL_WAIT_SECONDS,
        pool_connection_check,
        pool_reconnect_again,
    )

    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 2,
        "max_size": int(os.environ["SIMIA_DB_POOL_SIZE"]),
        "check": pool_connection_check,
        "timeout": POOL_WAIT_SECONDS,
        "reconnect_timeout": POOL_RECONNECT_SECONDS,
        "reconnect_failed": pool_reconnect_again,
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Login lockout (django-axes): after SIMIA_LOGIN_FAILURES wrong passwords for one username from one address,
# that pair is refused for SIMIA_LOGIN_COOLOFF_MINUTES, on /accounts/login/ and /admin/login/ alike.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("SIMIA_LOGIN_FAILURES", "10"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("SIMIA_LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]  # the address is REMOTE_ADDR (axes' default), not spoofable
AXES_RESET_ON_SUCCESS = True

# Single sign-on with the company's OpenID provider (docs/workspaces-and-sign-in.md): on when an issuer is set.
# The endpoints and keys come from the issuer's /.well-known/openid-configuration.
SIMIA_OIDC_ISSUER = os.environ.get("SIMIA_OIDC_ISSUER", "")
SIMIA_OIDC_CLIENT_ID = os.environ.get("SIMIA_OIDC_CLIENT_ID", "")
SIMIA_OIDC_CLIENT_SECRET = os.environ.get("SIMIA_OIDC_CLIENT_SECRET", "")
SIMIA_OIDC_SCOPES = os.environ.get("SIMIA_OIDC_SCOPES", "openid email profile")
SIMIA_OIDC_GROUPS_CLAIM = os.environ.get("SIMIA_OIDC_GROUPS_CLAIM", "groups")
# A JSON object: group name → list of "WORKSPACE:ROLE"; "*:admin" makes a site administrator.
SIMIA_OIDC_ROLE_MAP = os.environ.get("SIMIA_OIDC_ROLE_MAP", "{}")
# 0: local passwords sign in site administrators only; everyone else signs in with the OpenID provider.
SIMIA_PASSWORD_LOGIN = env_bool("SIMIA_PASSWORD_LOGIN", True)
# Audit events older than this are purged, at most once an hour, by the watchdog's beat.
SIMIA_AUDIT_RETENTION_DAYS = int(os.environ.get("SIMIA_AUDIT_RETENTION_DAYS", "400"))

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise serves from here after collectstatic
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
MEDIA_ROOT = Path(os.environ.get("SIMIA_MEDIA_ROOT", VAR_DIR / "media"))
EXPORTS_DIR = Path(os.environ.get("SIMIA_EXPORTS_DIR", MEDIA_ROOT / "exports"))
# Parquet snapshots: a shard ends at whichever limit it reaches first (rows, or bytes at a row-group boundary).
EXPORT_SHARD_ROWS = int(os.environ.get("SIMIA_EXPORT_SHARD_ROWS", "100000"))
EXPORT_SHARD_BYTES = int(os.environ.get("SIMIA_EXPORT_SHARD_BYTES", str(256 * 1024 * 1024)))
# A snapshot's records are built in ranges of about this many trajectories, one job unit each (exports.parts).
EXPORT_RANGE_RECORDS = max(1, int(os.environ.get("SIMIA_EXPORT_RANGE_RECORDS", "50000")))
# A rollup rebuild job's units are groups of whole domains of about this many trajectories (curation.rollups).
ROLLUP_UNIT_TRAJECTORIES = max(1, int(os.environ.get("SIMIA_ROLLUP_UNIT_TRAJECTORIES", "20000")))
# The dataset card: its `license` (a Hugging Face license id) and, to count tokens, a tokenizer.json (the
# `tokenizers` format of the model to be trained); without one the card counts characters.
DATASET_CARD_LICENSE = os.environ.get("SIMIA_DATASET_LICENSE", "unknown")
DATASET_CARD_TOKENIZER = os.environ.get("SIMIA_CARD_TOKENIZER", "")
# Publishing snapshots to the Hugging Face Hub (optional): a token, the dataset repo and the Hub's address.
HF_TOKEN = os.environ.get("HF_TOKEN", "")
HF_DATASET_REPO = os.environ.get("SIMIA_HF_DATASET_REPO", "")
HF_ENDPOINT = os.environ.get("HF_ENDPOINT", "https://huggingface.co")

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Served over HTTPS unless every allowed host is this machine (`make run`): secure cookies, a redirect from
# plain HTTP and HSTS. Behind a proxy that ends TLS, SIMIA_PROXY_SSL_HEADER names the header it sets
# (e.g. HTTP_X_FORWARDED_PROTO) so Django sees those requests as HTTPS.
SIMIA_HTTPS = env_bool("SIMIA_HTTPS", not set(ALLOWED_HOSTS) <= LOCAL_HOSTS)
if SIMIA_HTTPS and not DEBUG:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
# Prometheus may scrape over plain HTTP inside the network (the probes never reach the redirect, see above).
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
if os.environ.get("SIMIA_PROXY_SSL_HEADER"):
    SECURE_PROXY_SSL_HEADER = (os.environ["SIMIA_PROXY_SSL_HEADER"], "https")
# Scripts and styles come from our own static files only (no inline <script>, style="..." or CDN).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
# Django's cache, in Redis when SIMIA_CACHE_URL names one (shared by the web processes); REST throttles count in
# SIMIA_THROTTLE_STORAGE_URL, set below from the broker.
if os.environ.get("SIMIA_CACHE_URL"):
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": os.environ["SIMIA_CACHE_URL"]}
    }

SIMIA_QUERY_MAX_LENGTH = int(os.environ.get("SIMIA_QUERY_MAX_LENGTH", "500"))  # characters per query parameter
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "simia_web.core.authentication.ThrottledTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["simia_web.accounts.permissions.IsMember"],
    "DEFAULT_PARSER_CLASSES": [
        "simia_web.core.parsers.GatedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "simia_web.core.rest.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["simia_web.core.throttling.AnonThrottle", "simia_web.core.throttling.UserThrottle"],
    # Throttles count per client address: REMOTE_ADDR, or behind SIMIA_NUM_PROXIES proxies the address the
    # outermost one put in X-Forwarded-For (never the whole header, which a client could vary at will).
    "NUM_PROXIES": int(os.environ.get("SIMIA_NUM_PROXIES", "0")),
    "DEFAULT_THROTTLE_RATES": {
        "anon": os.environ.get("SIMIA_THROTTLE_ANON", "60/minute"),
        "user": os.environ.get("SIMIA_THROTTLE_USER", "3000/minute"),
        "bad_token": os.environ.get("SIMIA_THROTTLE_BAD_TOKEN", "20/hour"),
    },
    "DEFAULT_FILTER_BACKENDS": ["simia_web.core.rest.BoundedFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "simia_web.core.pagination.IdCursorPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Simia Web API",
    "DESCRIPTION": "Domains, APIs, tasks, seeds, trajectories, jobs, dataset snapshots and RL environments.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",  # Swagger UI from our static files: no CDN, works offline
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # Deep links would put a link inside each operation's button: a control nested in a control (WCAG 4.1.2).
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "simia_web.core.openapi.query_limits",
        "simia_web.core.openapi.error_responses",
    ],
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "TrajectoryKindEnum": "simia_web.curation.models.TrajectoryKind",
        "TrajectoryStatusEnum": "simia_web.curation.models.TrajectoryStatus",
        "DecisionEnum": "simia_web.curation.models.Decision",
        "RequestedDecisionEnum": "simia_web.curation.api.REQUESTED_DECISIONS",
        "ApiKindEnum": "simia_web.catalog.models.ApiKind",
        "TaskStatusEnum": "simia_web.catalog.models.TaskStatus",
        "SeedFormatEnum": "simia_web.catalog.models.SeedFormat",
        "JobStatusEnum": "simia_web.jobs.models.JobStatus",
        "ExportFormatEnum": "simia_web.exports.models.ExportFormat",
        "AuditStrategyEnum": "simia_web.audits.models.Strategy",
    },
}

# Celery: Redis in production, a filesystem broker that needs no server by default.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    # Senders write to the outbox; workers move whole messages into the inbox (see jobs.broker_folder).
    _broker_dir = VAR_DIR / "broker"
    for _folder in ("outbox", "inbox", "processed", "control"):
        (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "inbox"),
        "data_folder_out": str(_broker_dir / "outbox"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
else:
    if CELERY_BROKER_URL.startswith("redis://"):
        CELERY_BROKER_TRANSPORT = "simia_web.jobs.broker_redis:Transport"  # kombu's, sharing one client
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # A unit whose worker died is delivered again after this many seconds.
        "visibility_timeout": int(os.environ.get("CELERY_VISIBILITY_TIMEOUT", "3600")),
        # How often workers sweep for such messages: about interval x throttle seconds.
        "unacked_restore_interval": int(os.environ.get("CELERY_RESTORE_INTERVAL", "10")),
        "unacked_restore_throttle": int(os.environ.get("CELERY_RESTORE_THROTTLE", "10")),
        # A worker killed during a sweep holds its lock until this expires.
        "unacked_mutex_expire": int(os.environ.get("CELERY_RESTORE_LOCK_EXPIRE", "300")),
    }
# Celery closes database connections around every task unless told to reuse them; a unit is short
# and a new PostgreSQL connection costs more than most units' queries.
# With a pool (SIMIA_DB_POOL_SIZE), a finished task gives its connection back at once.
_DB_POOLED = bool(DATABASES["default"].get("OPTIONS", {}).get("pool"))
CELERY_DB_REUSE_MAX = int(os.environ.get("CELERY_DB_REUSE_MAX", "0" if _DB_POOLED else "1000"))
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Each thread holds one message in reserve, so a finished unit is replaced at once.
CELERY_WORKER_PREFETCH_MULTIPLIER = int(os.environ.get("CELERY_WORKER_PREFETCH_MULTIPLIER", "2"))
# Messages are JSON only and no result backend is set: both Celery's defaults, not restated here, since
# CELERY_TASK_SERIALIZER and the like are also Celery 3 names, which a worker would warn about at start.
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker whose broker is away waits for it however long it takes (Celery's default gives up after 100
# tries and the worker exits): its units go on meanwhile, and the job watchdog sends lost messages again.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# Every worker renews the leases of the units it holds this often (one UPDATE for all of them); a unit
# whose lease has run out for three periods, and whose message is not in the broker, is sent again by
# the job watchdog, which one worker of the cluster runs each period (see jobs.watchdog).
SIMIA_UNIT_HEARTBEAT_SECONDS = float(os.environ.get("SIMIA_UNIT_HEARTBEAT_SECONDS", "5"))
# A unit leased this long by a worker that has not started it (a wedged process) is taken back by the watchdog and
# sent again; longer than any unit waits in a healthy worker for a free thread or process.
SIMIA_UNIT_STALL_SECONDS = float(os.environ.get("SIMIA_UNIT_STALL_SECONDS", "180"))

# REST throttles (simia_web.core.throttling) count here, for every web process and machine: SIMIA_CACHE_URL, else the
# broker's Redis; without Redis each process counts on its own. The login lockout counts in the database.
_REDIS = ("redis://", "rediss://")
SIMIA_THROTTLE_STORAGE_URL = os.environ.get("SIMIA_CACHE_URL") or (
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(_REDIS) else "memory://"
)

# Default LLM endpoint; per-stage profiles live in the database.
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")
OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
# Variables an endpoint profile may name as its key besides those ending in _API_KEY.
SIMIA_ALLOWED_KEY_ENVS = env_list("SIMIA_ALLOWED_KEY_ENVS", "")
# Endpoint profiles may not point at link-local or cloud metadata addresses (169.254.169.254, fe80::/10) unless on.
SIMIA_ALLOW_LINK_LOCAL_ENDPOINTS = env_bool("SIMIA_ALLOW_LINK_LOCAL_ENDPOINTS", False)
# The secret API keys stored on endpoint profiles are encrypted under (empty: SECRET_KEY); changing it makes them
# unreadable, so that each must be entered again (simia_web/llm/keys.py).
SIMIA_SECRET_KEY_ENCRYPTION = os.environ.get("SIMIA_SECRET_KEY_ENCRYPTION", "")
SIMIA_MODEL = os.environ.get("SIMIA_MODEL", "gpt-4o-mini")
SIMIA_LLM_MAX_ATTEMPTS = int(os.environ.get("SIMIA_LLM_MAX_ATTEMPTS", "4"))
SIMIA_LLM_BACKOFF_BASE = float(os.environ.get("SIMIA_LLM_BACKOFF_BASE", "0.5"))
# Endpoint limits (a profile's max concurrency and rates per minute) hold across every worker through this
# Redis; without one (the embedded default), per process.
SIMIA_LLM_LIMITS_REDIS_URL = os.environ.get(
    "SIMIA_LLM_LIMITS_REDIS_URL", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else ""
)
# How long a worker's hold on one of an endpoint's concurrent requests lasts unless renewed: it renews its
# holds every third of this while their requests run, and a dead worker's holds are free this long after it died.
SIMIA_LLM_LEASE_SECONDS = float(os.environ.get("SIMIA_LLM_LEASE_SECONDS", "30"))
# Off: every profile keeps its max_concurrency in flight, whatever its latency does (a server whose capacity is known
# and fixed); on, the limit adapts to the endpoint's latency under that ceiling (llm.adaptive).
SIMIA_LLM_ADAPTIVE_CONCURRENCY = env_bool("SIMIA_LLM_ADAPTIVE_CONCURRENCY", True)
SIMIA_PROFILE_CACHE_SECONDS = float(os.environ.get("SIMIA_PROFILE_CACHE_SECONDS", "10"))
# How long a worker keeps a job's domain and APIs for its rollout units (edits are seen after at most this).
SIMIA_CATALOG_CACHE_SECONDS = float(os.environ.get("SIMIA_CATALOG_CACHE_SECONDS", "10"))
# MCP servers (API imports, reference environments): seconds to wait for a session to start and for each answer.
SIMIA_MCP_TIMEOUT_SECONDS = float(os.environ.get("SIMIA_MCP_TIMEOUT_SECONDS", "30"))

# Caps on job parameters: a job asking for more is refused, with the setting named, and nothing is written.
SIMIA_MAX_DOMAINS_PER_JOB = int(os.environ.get("SIMIA_MAX_DOMAINS_PER_JOB", "100"))
SIMIA_MAX_APIS_PER_DOMAIN = int(os.environ.get("SIMIA_MAX_APIS_PER_DOMAIN", "50"))
SIMIA_MAX_TASKS_PER_DOMAIN = int(os.environ.get("SIMIA_MAX_TASKS_PER_DOMAIN", "500"))
SIMIA_MAX_ROLLOUTS_PER_TASK = int(os.environ.get("SIMIA_MAX_ROLLOUTS_PER_TASK", "64"))
# Units of work one job may plan: synthesis and rollout units, or amplified trajectories.
SIMIA_MAX_UNITS_PER_JOB = int(os.environ.get("SIMIA_MAX_UNITS_PER_JOB", "100000"))

# Curation
SIMIA_RESERVATION_SECONDS = int(os.environ.get("SIMIA_RESERVATION_SECONDS", "120"))

# RL environment sessions: unfinished ones per user, and minutes without a step before one is abandoned.
SIMIA_ENV_MAX_LIVE_SESSIONS = int(os.environ.get("SIMIA_ENV_MAX_LIVE_SESSIONS", "1024"))
SIMIA_ENV_IDLE_MINUTES = float(os.environ.get("SIMIA_ENV_IDLE_MINUTES", "60"))
# Open transactions an LLM call may be made in: none (tests that wrap themselves in one allow theirs).
SIMIA_LLM_ATOMIC_BLOCKS_ALLOWED = 0

# Operations. /metrics answers scrapers from these networks (comma-separated addresses or CIDRs), or with
# `Authorization: Bearer <SIMIA_METRICS_TOKEN>`; nobody when neither is set.
SIMIA_METRICS_TOKEN = os.environ.get("SIMIA_METRICS_TOKEN", "")
SIMIA_METRICS_ALLOWED_IPS = [
    ipaddress.ip_network(item, strict=False) for item in env_list("SIMIA_METRICS_ALLOWED_IPS", "")
]
# How long /readyz and a scrape wait for the broker before calling it unreachable.
SIMIA_PROBE_TIMEOUT_SECONDS = float(os.environ.get("SIMIA_PROBE_TIMEOUT_SECONDS", "2"))
# Webhook deliveries: attempts, backoff (doubling from the first wait, up to the longest) and the request timeout.
SIMIA_WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("SIMIA_WEBHOOK_MAX_ATTEMPTS", "8"))
SIMIA_WEBHOOK_BACKOFF_SECONDS = float(os.environ.get("SIMIA_WEBHOOK_BACKOFF_SECONDS", "10"))
SIMIA_WEBHOOK_BACKOFF_MAX_SECONDS = float(os.environ.get("SIMIA_WEBHOOK_BACKOFF_MAX_SECONDS", "900"))
SIMIA_WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("SIMIA_WEBHOOK_TIMEOUT_SECONDS", "10"))
# A pending delivery whose attempt is overdue by this much lost its message (a broker outage): the watchdog sends it
# again.
SIMIA_WEBHOOK_SWEEP_SECONDS = float(os.environ.get("SIMIA_WEBHOOK_SWEEP_SECONDS", "60"))
# Shares of a job's trajectories reviewed (percent) that send a review.milestone event, once each per job.
SIMIA_WEBHOOK_REVIEW_MILESTONES = sorted(
    {int(item) for item in env_list("SIMIA_WEBHOOK_REVIEW_MILESTONES", "25,50,75,100") if 0 < int(item) <= 100}
)

# Seed imports
SIMIA_IMPORT_MAX_BYTES = int(os.environ.get("SIMIA_IMPORT_MAX_BYTES", str(50 * 1024 * 1024)))
SIMIA_IMPORT_MAX_RECORDS = int(os.environ.get("SIMIA_IMPORT_MAX_RECORDS", "100000"))
SIMIA_IMPORT_MAX_MESSAGES = int(os.environ.get("SIMIA_IMPORT_MAX_MESSAGES", "500"))  # per record
SIMIA_IMPORT_MAX_ZIP_MEMBERS = int(os.environ.get("SIMIA_IMPORT_MAX_ZIP_MEMBERS", "1000"))

# The JSON gate (simia_web.core.json_input): every JSON document that enters, whatever its path. Imports
# take SIMIA_IMPORT_MAX_BYTES as their byte limit; REST bodies, form fields and LLM answers this one.
SIMIA_JSON_MAX_BYTES = int(os.environ.get("SIMIA_JSON_MAX_BYTES", str(10 * 1024 * 1024)))
SIMIA_JSON_MAX_DEPTH = int(os.environ.get("SIMIA_JSON_MAX_DEPTH", "64"))
SIMIA_JSON_MAX_STRING = int(os.environ.get("SIMIA_JSON_MAX_STRING", str(1024 * 1024)))  # characters
SIMIA_JSON_MAX_KEYS = int(os.environ.get("SIMIA_JSON_MAX_KEYS", "50000"))  # per object
SIMIA_JSON_MAX_ITEMS = int(os.environ.get("SIMIA_JSON_MAX_ITEMS", "100000"))  # per array
# Values (items of arrays and objects) one document may hold: its byte limit / this, counted before parsing.
SIMIA_JSON_BYTES_PER_VALUE = int(os.environ.get("SIMIA_JSON_BYTES_PER_VALUE", "10"))
DATA_UPLOAD_MAX_MEMORY_SIZE = SIMIA_IMPORT_MAX_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# Request bodies are refused over this before they are read (at the server and in Django), uploaded files over
# SIMIA_IMPORT_MAX_BYTES as they stream, before memory or disk (simia_web.core.uploads).
SIMIA_REQUEST_MAX_BYTES = int(os.environ.get("SIMIA_REQUEST_MAX_BYTES", str(SIMIA_IMPORT_MAX_BYTES + 1024 * 1024)))
FILE_UPLOAD_HANDLERS = [
    "simia_web.core.uploads.BoundedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    "loggers": {"simia_web": {"level": os.environ.get("SIMIA_LOG_LEVEL", "INFO")}},
}

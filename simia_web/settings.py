"""One settings module, configured from the environment.

With nothing set, everything runs on one machine: a SQLite file, a filesystem broker and a
worker started by `make run`. Point DATABASE_URL and CELERY_BROKER_URL at PostgreSQL and Redis
to share the load across worker machines.
"""

import os
from pathlib import Path

import dj_database_url

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
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_filters",
    "django_htmx",
    "simia_web.core",
    "simia_web.accounts",
    "simia_web.llm",
    "simia_web.catalog",
    "simia_web.jobs",
    "simia_web.synthesis",
    "simia_web.curation",
    "simia_web.exports",
    "simia_web.environments",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
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
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'simia.sqlite3'}"), conn_max_age=60
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
elif os.environ.get("SIMIA_DB_POOL_SIZE"):
    # Workers with hundreds of threads (an endpoint allowing hundreds of concurrent requests) share a pool of
    # this many PostgreSQL connections: a thread gives its connection back while it waits on the LLM.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 2,
        "max_size": int(os.environ["SIMIA_DB_POOL_SIZE"]),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
]

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

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
if not DEBUG and env_bool("SIMIA_HTTPS", False):
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["simia_web.accounts.permissions.IsMember"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
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
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "TrajectoryKindEnum": "simia_web.curation.models.TrajectoryKind",
        "TrajectoryStatusEnum": "simia_web.curation.models.TrajectoryStatus",
        "ApiKindEnum": "simia_web.catalog.models.ApiKind",
        "TaskStatusEnum": "simia_web.catalog.models.TaskStatus",
        "SeedFormatEnum": "simia_web.catalog.models.SeedFormat",
        "JobKindEnum": "simia_web.jobs.models.JobKind",
        "JobStatusEnum": "simia_web.jobs.models.JobStatus",
        "ExportFormatEnum": "simia_web.exports.models.ExportFormat",
    },
}

# Celery: Redis in production, a filesystem broker that needs no server by default.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT = "simia_web.jobs.transport:FilesystemTransport"
    _broker_dir = VAR_DIR / "broker"
    (_broker_dir / "out").mkdir(parents=True, exist_ok=True)
    (_broker_dir / "processed").mkdir(parents=True, exist_ok=True)
    (_broker_dir / "control").mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
else:
    if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        CELERY_BROKER_TRANSPORT = "simia_web.jobs.transport:RedisTransport"
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
CELERY_DB_REUSE_MAX = int(os.environ.get("CELERY_DB_REUSE_MAX", "1000"))
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Each thread holds one message in reserve, so a finished unit is replaced at once.
CELERY_WORKER_PREFETCH_MULTIPLIER = int(os.environ.get("CELERY_WORKER_PREFETCH_MULTIPLIER", "2"))
# Messages are JSON only and no result backend is set: both Celery's defaults, not restated here, since
# CELERY_TASK_SERIALIZER and the like are also Celery 3 names, which a worker would warn about at start.
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# On start, a worker re-queues the units of running jobs that have no message left: with the
# filesystem broker, those a killed worker had taken; with Redis, those it had popped but not yet
# recorded as unacknowledged when it died (the rest come back after the visibility timeout).
SIMIA_RECOVER_ON_WORKER_START = env_bool("SIMIA_RECOVER_ON_WORKER_START", True)

# Default LLM endpoint; per-stage profiles live in the database.
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")
OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
SIMIA_MODEL = os.environ.get("SIMIA_MODEL", "gpt-4o-mini")
SIMIA_LLM_MAX_ATTEMPTS = int(os.environ.get("SIMIA_LLM_MAX_ATTEMPTS", "4"))
SIMIA_LLM_BACKOFF_BASE = float(os.environ.get("SIMIA_LLM_BACKOFF_BASE", "0.5"))
SIMIA_PROFILE_CACHE_SECONDS = float(os.environ.get("SIMIA_PROFILE_CACHE_SECONDS", "10"))
# How long a worker keeps a job's domain and APIs for its rollout units (edits are seen after at most this).
SIMIA_CATALOG_CACHE_SECONDS = float(os.environ.get("SIMIA_CATALOG_CACHE_SECONDS", "10"))

# Curation
SIMIA_RESERVATION_MINUTES = int(os.environ.get("SIMIA_RESERVATION_MINUTES", "15"))

# RL environment sessions: unfinished ones per user, and minutes without a step before one is abandoned.
SIMIA_ENV_MAX_LIVE_SESSIONS = int(os.environ.get("SIMIA_ENV_MAX_LIVE_SESSIONS", "1024"))
SIMIA_ENV_IDLE_MINUTES = float(os.environ.get("SIMIA_ENV_IDLE_MINUTES", "60"))
# Open transactions an LLM call may be made in: none (tests that wrap themselves in one allow theirs).
SIMIA_LLM_ATOMIC_BLOCKS_ALLOWED = 0

# Seed imports
SIMIA_IMPORT_MAX_BYTES = int(os.environ.get("SIMIA_IMPORT_MAX_BYTES", str(50 * 1024 * 1024)))
SIMIA_IMPORT_MAX_RECORDS = int(os.environ.get("SIMIA_IMPORT_MAX_RECORDS", "100000"))
DATA_UPLOAD_MAX_MEMORY_SIZE = SIMIA_IMPORT_MAX_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    "loggers": {"simia_web": {"level": os.environ.get("SIMIA_LOG_LEVEL", "INFO")}},
}

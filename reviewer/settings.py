"""Settings, read from environment variables; zero configuration boots the embedded default."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from reviewer.env import Env, default_storage_setting, load_or_create_secret_key
from submissions.net.endpoints import parse_endpoints
from submissions.sealed import parse_keys

env = Env()
BASE_DIR = Path(__file__).resolve().parent.parent

# Everything the app writes (SQLite file, archives, extracted trees, broker queue, dev key)
# lives under DATA_DIR, outside the repository.
DATA_DIR = env.path("DATA_DIR", Path.home() / ".local" / "share" / "cassette-review")

DEBUG = env.bool("DEBUG", True)
DEMO_MODE = env.bool("DEMO_MODE", False)

SECRET_KEY = env.str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DEBUG is off (production refuses to boot without it)"
        )
    SECRET_KEY = load_or_create_secret_key(DATA_DIR / "secret_key")

# Keys sealing secrets kept at rest (a repository's access token): Fernet keys, the first
# seals, all open (rotation). Unset: one derived from SECRET_KEY (and SECRET_KEY_FALLBACKS).
SECRET_STORE_KEYS = env.list("SECRET_STORE_KEYS", [])
parse_keys(SECRET_STORE_KEYS)

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", [])
SITE_NAME = env.str("SITE_NAME", "Cassette Review")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "csp",
    "reviewer",
    "submissions",
    "cassettes_app",
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
    "csp.middleware.CSPMiddleware",
    "reviewer.middleware.DemoReadOnlyMiddleware",
    "reviewer.middleware.NotFoundPageMiddleware",
]

ROOT_URLCONF = "reviewer.urls"
WSGI_APPLICATION = "reviewer.wsgi.application"
ASGI_APPLICATION = "reviewer.asgi.application"

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
                "reviewer.context.site",
            ],
        },
    }
]

# DATABASE_URL picks PostgreSQL (or anything dj-database-url knows); the default is SQLite.
SQLITE_PAGE_BYTES = 16384
_database_url = env.str("DATABASE_URL")
if _database_url:
    try:
        # Connections are kept for a minute and pinged before reuse (workers keep theirs
        # across jobs too: see reviewer/celery.py).
        DATABASES = {
            "default": dj_database_url.parse(
                _database_url, conn_max_age=60, conn_health_checks=True
            )
        }
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from None
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(DATA_DIR / "db.sqlite3"),
            # The embedded worker writes while the web process reads: WAL and a busy timeout
            # keep "database is locked" away.
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                # The page size, for a new database only (before WAL, which fixes it; an
                # existing one keeps its own until a VACUUM): bodies up to 64 KiB live in
                # their rows, and every page is written twice (the WAL, then the
                # checkpoint). The 4 KiB default split each body over a chain of pages:
                # analysing 10,000 recordings took 8.8 s with it, 8.0 s with 16 KiB.
                "init_command": (
                    f"PRAGMA page_size={SQLITE_PAGE_BYTES}; "
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                ),
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env.path("STATIC_ROOT", DATA_DIR / "static")

# Archives and bodies go through the storage API, so web and workers on different machines
# can share a volume or an S3-compatible store: STORAGE_BACKEND=s3 with S3_BUCKET,
# S3_ENDPOINT_URL, S3_REGION, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, S3_ADDRESSING_STYLE
# (reviewer/env.py), or the dotted path of any Django storage.
MEDIA_ROOT = env.path("MEDIA_ROOT", DATA_DIR / "media")
STORAGES = {
    "default": default_storage_setting(env),
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        ),
    },
}
# Extracted trees are a per-machine cache, re-derived from the stored archive when missing,
# bounded by bytes (least recently used out; never a tree a running job here holds).
WORK_DIR = env.path("WORK_DIR", DATA_DIR / "work")
TREE_CACHE_BYTES = env.int("TREE_CACHE_BYTES", 10 * 2**30, minimum=2**20)
# An upload is unpacked where it is received, to refuse a hostile archive while the uploader
# waits. Keep that tree for the jobs (one host, or workers beside the web), or not: a web host
# with no worker beside it sets 0, keeps nothing, and each worker unpacks from storage.
INTAKE_KEEP_TREE = env.bool("INTAKE_KEEP_TREE", True)
# Processes that read, parse and scan a large tree's recordings in one analysis (a small
# tree is parsed in the job's own process). Default: one per core.
ANALYSIS_PROCESSES = env.int("ANALYSIS_PROCESSES", os.cpu_count() or 1, minimum=1)
# The file viewer reads one file from the stored archive, never from WORK_DIR. An archive in a
# storage that is not a local folder (S3) is copied once per host into this cache, keyed by
# its sha256 and bounded by bytes, least recently used first out.
ARCHIVE_CACHE_DIR = env.path("ARCHIVE_CACHE_DIR", DATA_DIR / "archive-cache")
ARCHIVE_CACHE_BYTES = env.int("ARCHIVE_CACHE_BYTES", 2 * 2**30, minimum=2**20)

# Archive intake caps (bytes unless named otherwise).
INTAKE_MAX_UPLOAD_BYTES = env.int("INTAKE_MAX_UPLOAD_BYTES", 50 * 2**20, minimum=1)
INTAKE_MAX_TOTAL_BYTES = env.int("INTAKE_MAX_TOTAL_BYTES", 500 * 2**20, minimum=1)
INTAKE_MAX_FILE_BYTES = env.int("INTAKE_MAX_FILE_BYTES", 100 * 2**20, minimum=1)
INTAKE_MAX_FILES = env.int("INTAKE_MAX_FILES", 20_000, minimum=1)
INTAKE_MAX_RATIO = env.int("INTAKE_MAX_RATIO", 100, minimum=1)
INTAKE_MAX_DEPTH = env.int("INTAKE_MAX_DEPTH", 32, minimum=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 2**20
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 2**20

# Jobs and the queue.
REDIS_URL = env.str("REDIS_URL")
BROKER_DIR = env.path("BROKER_DIR", DATA_DIR / "broker")
JOB_MAX_ATTEMPTS = env.int("JOB_MAX_ATTEMPTS", 3, minimum=1)
JOB_SOFT_TIME_LIMIT = env.int("JOB_SOFT_TIME_LIMIT", 900, minimum=1)
JOB_TIME_LIMIT = env.int("JOB_TIME_LIMIT", 960, minimum=2)
JOB_HEARTBEAT_SECONDS = env.int("JOB_HEARTBEAT_SECONDS", 10, minimum=1)
JOB_STALE_SECONDS = env.int("JOB_STALE_SECONDS", 120, minimum=1)
# This host's name in runner ids and worker heartbeats: the machine's own name by default; set
# it when several hosts (containers) could share one, or on one machine to act as several.
HOST_NAME = env.str("HOST_NAME") or socket.gethostname()
# Each worker process publishes a heartbeat row this often; a host none of whose workers was
# seen for WORKER_STALE_SECONDS is dead, whichever host checks (its jobs are taken over).
WORKER_BEAT_SECONDS = env.int("WORKER_BEAT_SECONDS", 5, minimum=1)
WORKER_STALE_SECONDS = env.int("WORKER_STALE_SECONDS", 15, minimum=2)
# How often the one scheduler (beat) runs the reconciler that takes a dead host's jobs over.
# A killed host is judged dead within WORKER_STALE_SECONDS of its last beat and its jobs are
# queued again at the next tick: with these defaults, within about 25 s of the kill.
JOB_RECONCILE_SECONDS = env.int("JOB_RECONCILE_SECONDS", 10, minimum=1)
JOB_REQUEUE_AFTER_SECONDS = env.int("JOB_REQUEUE_AFTER_SECONDS", 60, minimum=0)
JOB_LOG_MAX_BYTES = env.int("JOB_LOG_MAX_BYTES", 64 * 1024, minimum=1024)
ENQUEUE_TIMEOUT_SECONDS = env.float("ENQUEUE_TIMEOUT_SECONDS", 3.0)
if WORKER_STALE_SECONDS <= WORKER_BEAT_SECONDS:
    raise ImproperlyConfigured("WORKER_STALE_SECONDS must be greater than WORKER_BEAT_SECONDS")
if JOB_TIME_LIMIT <= JOB_SOFT_TIME_LIMIT:
    raise ImproperlyConfigured("JOB_TIME_LIMIT must be greater than JOB_SOFT_TIME_LIMIT")

# Outbound requests to candidate stubs refuse loopback/private addresses unless listed here.
OUTBOUND_ALLOW = env.list("OUTBOUND_ALLOW", [])
TRACE_MAX_ROWS = env.int("TRACE_MAX_ROWS", 500, minimum=1)
TRACE_TIMEOUT_SECONDS = env.float("TRACE_TIMEOUT_SECONDS", 5.0)
TRACE_MAX_BYTES = env.int("TRACE_MAX_BYTES", 1_000_000, minimum=1024)

# Live spot checks: the team's model endpoints as JSON (submissions/net/endpoints.py). Each
# names the environment variable holding its key; the key is read only when a call is made.
SPOT_CHECK_ENDPOINTS = parse_endpoints(env.str("SPOT_CHECK_ENDPOINTS"))
SPOT_CHECK_TIMEOUT_SECONDS = env.float("SPOT_CHECK_TIMEOUT_SECONDS", 60.0, minimum=1.0)

# A hand-in's own dependencies: resolved (wheels only) against this index, on the host.
PACKAGE_INDEX_URL = env.str("PACKAGE_INDEX_URL", "https://pypi.org/simple")
DEPS_CACHE_DIR = env.path("DEPS_CACHE_DIR", DATA_DIR / "deps-cache")
DEPS_RESOLVE_TIMEOUT_SECONDS = env.float("DEPS_RESOLVE_TIMEOUT_SECONDS", 120.0, minimum=1.0)
# Wheels and installed environments: bound into the sandbox, so where its uids can traverse
# (not under a home folder). Shared by all submissions; environments are evicted LRU.
DEPS_DIR = env.path("DEPS_DIR", Path("/var/tmp/cassette-review-deps"))  # noqa: S108
DEPS_ENV_CACHE_BYTES = env.int("DEPS_ENV_CACHE_BYTES", 5 * 2**30, minimum=2**20)
DEPS_MAX_DOWNLOAD_BYTES = env.int("DEPS_MAX_DOWNLOAD_BYTES", 1 * 2**30, minimum=2**20)
DEPS_MAX_UNPACKED_BYTES = env.int("DEPS_MAX_UNPACKED_BYTES", 3 * 2**30, minimum=2**20)
# requires-python / .python-version the sandbox does not satisfy: "warn" runs anyway and
# says so; "skip" skips the replay with the reason.
DEPS_PYTHON_MISMATCH = env.str("DEPS_PYTHON_MISMATCH", "warn")
if DEPS_PYTHON_MISMATCH not in ("warn", "skip"):
    raise ImproperlyConfigured("DEPS_PYTHON_MISMATCH must be warn or skip")

# Sandbox. Candidate code never runs unsandboxed unless this loudly-named switch is on.
SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED = env.bool("SANDBOX_UNSAFE_DEV_RUN_UNSANDBOXED", False)
SANDBOX_BWRAP = env.str("SANDBOX_BWRAP", "/usr/bin/bwrap")
SANDBOX_RUNTIME = env.path("SANDBOX_RUNTIME", Path("/opt/cassette-review/sandbox-runtime"))
# Workspaces must sit where the sandbox uids can traverse (not under root's home).
SANDBOX_WORK_DIR = env.path(
    "SANDBOX_WORK_DIR",
    Path("/var/tmp/cassette-review-sandbox"),  # noqa: S108 - made 0711 and root-owned
)
SANDBOX_UID_BASE = env.int("SANDBOX_UID_BASE", 64000, minimum=1000)
SANDBOX_SLOTS = env.int("SANDBOX_SLOTS", 8, minimum=1)
SANDBOX_WALL_SECONDS = env.float("SANDBOX_WALL_SECONDS", 180.0)
SANDBOX_CPU_SECONDS = env.int("SANDBOX_CPU_SECONDS", 180, minimum=1)
SANDBOX_MEMORY_BYTES = env.int("SANDBOX_MEMORY_BYTES", 2 * 2**30, minimum=64 * 2**20)
SANDBOX_PROCESSES = env.int("SANDBOX_PROCESSES", 128, minimum=8)
SANDBOX_FILE_BYTES = env.int("SANDBOX_FILE_BYTES", 100 * 2**20, minimum=2**20)
SANDBOX_OPEN_FILES = env.int("SANDBOX_OPEN_FILES", 256, minimum=32)
SANDBOX_TMPFS_BYTES = env.int("SANDBOX_TMPFS_BYTES", 64 * 2**20, minimum=2**20)
SANDBOX_OUTPUT_BYTES = env.int("SANDBOX_OUTPUT_BYTES", 2**20, minimum=4096)
# How many of one replay's sandboxed runs may go at once (run 2 beside the missing-recording
# probes), each in its own slot and with its own limits; never more than the host's cores.
# 1 runs them one after another.
SANDBOX_PARALLEL_RUNS = env.int("SANDBOX_PARALLEL_RUNS", 4, minimum=1)
REPLAY_MISSING_PROBES = env.int("REPLAY_MISSING_PROBES", 1, minimum=0)
REPLAY_MISSING_PROBE_TRIES = env.int("REPLAY_MISSING_PROBE_TRIES", 3, minimum=1)
REPLAY_OUTPUT_MAX_BYTES = env.int("REPLAY_OUTPUT_MAX_BYTES", 5 * 2**20, minimum=1024)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", "INFO")},
}

# Production hardening: applies whenever DEBUG is off.
if not DEBUG:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
# No inline script or style anywhere: everything candidate-supplied is text, never markup.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}
# Login throttling: failed attempts per username and per client address, in a window.
LOGIN_MAX_FAILURES = env.int("LOGIN_MAX_FAILURES", 5, minimum=1)
LOGIN_FAILURE_WINDOW_SECONDS = env.int("LOGIN_FAILURE_WINDOW_SECONDS", 900, minimum=1)
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "cassette_review_cache",
    },
    # Rendered page parts, keyed by versions read from the database on each request (an
    # assignment's table generation, a submission's job states): a copy per process is as
    # correct as a shared one, and costs no query to read.
    "fragments": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "cassette-review-fragments",
        "OPTIONS": {"MAX_ENTRIES": 300},
    },
}
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

# Celery: Redis when REDIS_URL is set, else kombu's filesystem transport (no server needed).
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    # The visibility timeout must exceed the hard time limit, or a long job is redelivered
    # to a second worker while the first still runs it (Celery's Redis caveats).
    _visibility = {"visibility_timeout": 2 * JOB_TIME_LIMIT}
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        **_visibility,
        "socket_connect_timeout": 3,
        "socket_timeout": 10,
    }
    CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = _visibility
else:
    # The host part means nothing to this transport, but without one kombu warns "No hostname
    # was supplied. Reverting to default 'localhost'" on every publish: on the embedded
    # default that reads as a failed attempt to reach a server (every `ingest`, `seed_demo`).
    CELERY_BROKER_URL = "filesystem://localhost/"
    # kombu's transport, with messages written whole before a consumer can see them (see
    # reviewer/broker.py: a worker that read a half-written one died, its job never ran).
    CELERY_BROKER_TRANSPORT = "reviewer.broker:Transport"
    # kombu's filesystem transport expects its folders to exist.
    for _folder in ("queue", "control"):
        (BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
        # The worker looks for messages this often, and its one prefetch slot is full while a
        # job runs, so each job waits up to this long after the previous one: at 0.5 s a
        # 0.2 s job spent twice its run time waiting (bench/bench_workers.py). An idle
        # worker's listings at 0.05 s cost under 0.5 % of a core.
        "polling_interval": 0.05,
    }
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True  # paired with Job.attempts so a crash cannot loop
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = JOB_SOFT_TIME_LIMIT
CELERY_TASK_TIME_LIMIT = JOB_TIME_LIMIT
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_TIMEOUT = 3
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 1,
}
CELERY_WORKER_MAX_TASKS_PER_CHILD = 50
# Celery's Django fixup closes the database connection around every task unless this is set,
# so each job paid for a new PostgreSQL backend (~20 ms of CPU a job in
# bench/bench_workers.py, where an analysis takes ~200 ms). With it, the fixup closes only
# every 50 tasks, and reviewer/celery.py applies Django's own request rule (CONN_MAX_AGE,
# plus the health check) around each task.
CELERY_DB_REUSE_MAX = 50
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    "reconcile-jobs": {
        "task": "submissions.tasks.reconcile",
        "schedule": float(JOB_RECONCILE_SECONDS),
    },
    # Comparison tables a change did not get stored (the broker was down) or a deploy's new
    # code left unread (reviewer/cohort/table_cache.py).
    "store-comparison-tables": {
        "task": "reviewer.tasks.store_comparison_tables",
        "schedule": 600.0,
    },
    # Reference hand-ins whose period has passed get a live spot check (issue 29).
    "spot-check-references": {
        "task": "submissions.tasks.spot_check_references",
        "schedule": 3600.0,
    },
}
# One queue name per deployment (tests give each run its own, so parallel runs never share).
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_QUEUE", "celery")

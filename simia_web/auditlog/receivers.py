"""Audit events older than SIMIA_AUDIT_RETENTION_DAYS are purged on the watchdog's beat, at most once an hour for
the whole cluster (the last purge's time is kept in the cache, which the web and worker processes share)."""

import logging
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.dispatch import receiver

from simia_web.core.services import audit_purge
from simia_web.jobs.signals import watchdog_looked

logger = logging.getLogger("simia_web.auditlog")
LAST_PURGE_KEY = "simia:audit-log:last-purge"
PURGE_EVERY = timedelta(hours=1)


@receiver(watchdog_looked, dispatch_uid="auditlog-retention-purge")
def _purge_when_due(sender, now, **kwargs):
    # `add` sets the key only when it is absent: of the processes that look at once, one purges.
    if not cache.add(LAST_PURGE_KEY, now.isoformat(), timeout=int(PURGE_EVERY.total_seconds())):
        return
    purged = audit_purge(before=now - timedelta(days=settings.SIMIA_AUDIT_RETENTION_DAYS))
    if purged:
        logger.info("audit log: purged %d events older than %d days", purged, settings.SIMIA_AUDIT_RETENTION_DAYS)

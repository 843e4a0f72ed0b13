import os
import secrets

from django.core.management.base import BaseCommand, CommandError

from simia_web.accounts.models import Role, User
from simia_web.accounts.services import user_create
from simia_web.core.errors import ValidationFailed


class Command(BaseCommand):
    help = "Create the local admin account (a site administrator) if there is none, and print how to log in."

    def handle(self, *args, **opts):
        username = os.environ.get("SIMIA_ADMIN_USER", "admin")
        if User.objects.filter(username=username).exists():
            self.stdout.write(
                f"Admin login: {username} (password as set before; `manage.py changepassword {username}` resets it)"
            )
            return
        password = os.environ.get("SIMIA_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        try:
            user_create(username=username, role=Role.ADMIN, password=password, site_admin=True)
        except ValidationFailed as exc:
            raise CommandError(f"SIMIA_ADMIN_USER / SIMIA_ADMIN_PASSWORD: {'; '.join(exc.messages)}") from exc
        self.stdout.write(self.style.SUCCESS(f"Admin login: {username} / {password}"))

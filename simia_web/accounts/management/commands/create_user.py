"""`manage.py create_user USERNAME --role ROLE [--workspace SLUG ...] [--site-admin] [--password P] [--token]`."""

from django.core.management.base import BaseCommand, CommandError

from simia_web.accounts.models import Role, User
from simia_web.accounts.services import user_create, user_token
from simia_web.core.errors import ValidationFailed


class Command(BaseCommand):
    help = (
        "Create a user with a role in one or more workspaces (--workspace, repeatable; `default` when none is named); "
        "--site-admin makes a site administrator; --token prints an API token for it."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", choices=Role.values, required=True)
        parser.add_argument("--password", required=True)
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--workspace",
            action="append",
            dest="workspaces",
            metavar="SLUG",
            help="A workspace the user gets --role in; repeat for several (default: the `default` workspace).",
        )
        parser.add_argument(
            "--site-admin", action="store_true", help="A site administrator: creates workspaces, manages members."
        )
        parser.add_argument("--token", action="store_true", help="Print a REST API token for the user.")

    def handle(self, *args, username, role, password, email, workspaces, site_admin, token, **options):
        if User.objects.filter(username=username).exists():
            raise CommandError(f"User {username!r} already exists.")
        try:
            user = user_create(
                username=username,
                role=role,
                password=password,
                email=email,
                workspaces=workspaces,
                site_admin=site_admin,
            )
        except ValidationFailed as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        where = ", ".join(workspaces or ["default"])
        self.stdout.write(f"Created {role} {username} in {where}{' (site administrator)' if site_admin else ''}.")
        if token:
            self.stdout.write(user_token(user=user))

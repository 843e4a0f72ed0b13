from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from simia_web.accounts.models import Role, User
from simia_web.accounts.services import user_create, user_token


class Command(BaseCommand):
    help = "Create a user with a role; --token prints an API token for it."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", choices=Role.values, required=True)
        parser.add_argument("--password", required=True)
        parser.add_argument("--email", default="")
        parser.add_argument("--token", action="store_true", help="Print a REST API token for the user.")

    def handle(self, *args, username, role, password, email, token, **options):
        if User.objects.filter(username=username).exists():
            raise CommandError(f"User {username!r} already exists.")
        try:
            user = user_create(username=username, role=role, password=password, email=email)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(f"Created {role} {username}.")
        if token:
            self.stdout.write(user_token(user=user))

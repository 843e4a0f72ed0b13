from django.core.management.base import BaseCommand, CommandError

from simia_web.accounts.models import Role, User
from simia_web.accounts.services import user_role_set


class Command(BaseCommand):
    help = "Give a user another role (admin, curator, annotator); it takes effect on the user's next request."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("role", choices=Role.values)

    def handle(self, *args, username, role, **options):
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        before = user.role
        user_role_set(user=user, role=role)
        self.stdout.write(f"{username}: {before} -> {role}.")

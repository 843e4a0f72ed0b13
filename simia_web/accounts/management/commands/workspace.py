"""`manage.py workspace create SLUG [--name NAME]`, `workspace member SLUG USERNAME ROLE`,
`workspace remove SLUG USERNAME`."""

from django.core.management.base import BaseCommand, CommandError

from simia_web.accounts.models import Role, User
from simia_web.accounts.services import membership_remove, membership_set, workspace_create, workspace_get
from simia_web.core.errors import ValidationFailed


class Command(BaseCommand):
    help = "Create a workspace, give a user a role in one, or take a user out of one."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a workspace.")
        create.add_argument("slug")
        create.add_argument("--name", default="")
        member = sub.add_parser("member", help="Give USERNAME the role ROLE in the workspace SLUG.")
        member.add_argument("slug")
        member.add_argument("username")
        member.add_argument("role", choices=Role.values)
        remove = sub.add_parser("remove", help="Take USERNAME out of the workspace SLUG.")
        remove.add_argument("slug")
        remove.add_argument("username")

    def handle(self, *args, action, slug, **opts):
        try:
            if action == "create":
                workspace = workspace_create(slug=slug, name=opts["name"])
                self.stdout.write(f"Created workspace {workspace.slug} ({workspace.name}).")
                return
            workspace = workspace_get(slug=slug)
            user = User.objects.filter(username=opts["username"]).first()
            if user is None:
                raise CommandError(f"No user {opts['username']!r}.")
            if action == "member":
                membership_set(workspace=workspace, user=user, role=opts["role"])
                self.stdout.write(f"{user.username} is {opts['role']} in {workspace.slug}.")
            elif membership_remove(workspace=workspace, user=user):
                self.stdout.write(f"{user.username} removed from {workspace.slug}.")
            else:
                self.stdout.write(f"{user.username} was not a member of {workspace.slug}.")
        except ValidationFailed as exc:
            raise CommandError("; ".join(exc.messages)) from exc

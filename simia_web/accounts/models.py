"""Users, their role per workspace (annotator, curator, admin), and site administrators."""

from typing import ClassVar

from django.contrib.auth.models import AbstractUser
from django.contrib.auth.models import UserManager as DjangoUserManager
from django.db import models
from django.db.models import Q


class Role(models.TextChoices):
    ADMIN = "admin", "Admin"
    CURATOR = "curator", "Curator"
    REVIEWER = "reviewer", "Reviewer"
    ANNOTATOR = "annotator", "Annotator"


# Each role can do everything the roles below it can. A reviewer is an annotator who also takes the second look at
# annotators' decisions where the reviewer stage is on (curation: review_decide).
ROLE_RANK: dict[str, int] = {Role.ANNOTATOR: 1, Role.REVIEWER: 2, Role.CURATOR: 3, Role.ADMIN: 4}


DEFAULT_WORKSPACE = "default"


class Workspace(models.Model):
    """A team's corner of the deployment. People belong to it through memberships, each with a role."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    # The reviewer stage: an annotator's decision waits for a reviewer's confirmation before it counts. A domain may
    # say otherwise for itself (catalog.Domain.review_stage).
    review_stage = models.BooleanField(
        default=False, help_text="Annotators' decisions wait for a reviewer's confirmation before they count."
    )
    # The share of an annotator's stream given to gold items (curation.GoldItem) they have not answered yet.
    gold_rate = models.FloatField(default=0.05, help_text="Share of the review stream given to gold items (0 to 1).")
    # A qualification: an annotator whose accuracy over their last `qualify_window` gold answers is below
    # `qualify_accuracy` (or who has fewer answers) has their decisions go to the reviewer stage even where it is off.
    qualify_accuracy = models.FloatField(
        null=True, blank=True, help_text="Gold accuracy (0 to 1) an annotator needs for decisions to count unreviewed."
    )
    qualify_window = models.PositiveIntegerField(default=20, help_text="The last this many gold answers count.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self):
        return self.slug


def default_workspace_id() -> int:
    """The `default` workspace's id: the owner of anything made without naming a workspace (data from before
    workspaces, demo data, a command run without --workspace)."""
    workspace, _ = Workspace.objects.get_or_create(slug=DEFAULT_WORKSPACE, defaults={"name": "Default"})
    return workspace.pk


def owner_workspace_id(row) -> int:
    """The id of the workspace owning `row` (a model with an owner_workspace_field): never null, though the typing
    stubs read a foreign key with a default as optional."""
    return row.workspace_id


def owner_workspace_field(related_name: str = "+") -> models.ForeignKey:
    """The owner workspace of a team's row; the default workspace when the writer names none."""
    return models.ForeignKey(
        Workspace, on_delete=models.PROTECT, related_name=related_name, default=default_workspace_id
    )


class Membership(models.Model):
    """A user's role in one workspace: one row per user and workspace."""

    user = models.ForeignKey("accounts.User", on_delete=models.CASCADE, related_name="memberships")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    workspace_path = "workspace"

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "workspace"], name="membership_unique_user_workspace")]
        indexes = [models.Index(fields=["workspace", "user"], name="membership_workspace_user")]

    def __str__(self):
        return f"{self.user_id}@{self.workspace_id}:{self.role}"


class UserManager(DjangoUserManager):
    def create_superuser(self, username, email=None, password=None, **extra_fields):
        """A superuser is a site administrator with the admin role (Django's `createsuperuser` comes here)."""
        if extra_fields.setdefault("role", Role.ADMIN) != Role.ADMIN:
            raise ValueError("A superuser has the admin role.")
        extra_fields["is_site_admin"] = True
        return super().create_superuser(username, email, password, **extra_fields)


class User(AbstractUser):
    # The user's role in their current workspace (`current_workspace`), kept in step with that membership by
    # accounts.services (a switch, a membership change, a sign-in), so that every check made today
    # (`has_role`, `role_required`, the REST permissions) reads the role of the workspace the user works in.
    # Empty: a member of no workspace, who may do nothing.
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ANNOTATOR, blank=True)
    current_workspace = models.ForeignKey(Workspace, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # A site administrator creates workspaces, manages every membership and acts as an admin in every workspace.
    is_site_admin = models.BooleanField(
        "site administrator", default=False, help_text="Creates workspaces and manages every workspace's members."
    )
    # Django's flags follow the site administrator flag, derived by the database on every write (a form, the API,
    # a command, a bulk update): only site administrators log into the admin site, which shows every workspace.
    is_staff = models.GeneratedField(
        expression=Q(is_site_admin=True),  # type: ignore[arg-type]  # Django resolves a Q; the stubs ask an Expression
        output_field=models.BooleanField(),
        db_persist=True,
        verbose_name="staff status",
        help_text="Set by the site administrator flag: only they log into the admin site.",
    )
    is_superuser = models.GeneratedField(
        expression=Q(is_site_admin=True),  # type: ignore[arg-type]  # Django resolves a Q; the stubs ask an Expression
        output_field=models.BooleanField(),
        db_persist=True,
        verbose_name="superuser status",
        help_text="Set by the site administrator flag: site administrators have every permission.",
    )

    # Who the company's OpenID provider says this is (issuer and subject), for users who sign in with it.
    oidc_issuer = models.CharField(max_length=255, blank=True, default="")
    oidc_subject = models.CharField(max_length=255, blank=True, default="")

    objects: ClassVar[UserManager] = UserManager()

    class Meta(AbstractUser.Meta):
        constraints = [
            models.UniqueConstraint(
                fields=["oidc_issuer", "oidc_subject"], condition=~Q(oidc_subject=""), name="user_unique_oidc_identity"
            )
        ]

    def has_role(self, role: str) -> bool:
        """True when the user's role in their current workspace is `role` or ranks above it; a site administrator
        has every role."""
        if not self.is_active:
            return False
        if self.is_site_admin:
            return True
        return ROLE_RANK.get(self.role, 0) >= ROLE_RANK[role]

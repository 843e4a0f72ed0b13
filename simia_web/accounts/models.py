from typing import ClassVar

from django.contrib.auth.models import AbstractUser
from django.contrib.auth.models import UserManager as DjangoUserManager
from django.db import models
from django.db.models import Q


class Role(models.TextChoices):
    ADMIN = "admin", "Admin"
    CURATOR = "curator", "Curator"
    ANNOTATOR = "annotator", "Annotator"


# Each role can do everything the roles below it can.
ROLE_RANK: dict[str, int] = {Role.ANNOTATOR: 1, Role.CURATOR: 2, Role.ADMIN: 3}


class UserManager(DjangoUserManager):
    def create_superuser(self, username, email=None, password=None, **extra_fields):
        """A superuser is an admin (Django's `createsuperuser` comes here): the role sets the flags."""
        if extra_fields.setdefault("role", Role.ADMIN) != Role.ADMIN:
            raise ValueError("A superuser has the admin role.")
        return super().create_superuser(username, email, password, **extra_fields)


class User(AbstractUser):
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ANNOTATOR)
    # The role is the one fact: the database derives Django's flags from it on every write (a form, the API, a
    # command, a bulk update), so a demoted admin loses the admin site and every admin power on the next request.
    is_staff = models.GeneratedField(
        expression=Q(role=Role.ADMIN),  # type: ignore[arg-type]  # Django resolves a Q; the stubs ask an Expression
        output_field=models.BooleanField(),
        db_persist=True,
        verbose_name="staff status",
        help_text="Set by the role: only admins log into the admin site.",
    )
    is_superuser = models.GeneratedField(
        expression=Q(role=Role.ADMIN),  # type: ignore[arg-type]  # Django resolves a Q; the stubs ask an Expression
        output_field=models.BooleanField(),
        db_persist=True,
        verbose_name="superuser status",
        help_text="Set by the role: admins have every permission.",
    )

    objects: ClassVar[UserManager] = UserManager()

    def has_role(self, role: str) -> bool:
        """True when the user's role is `role` or ranks above it."""
        if not self.is_active:
            return False
        return ROLE_RANK.get(self.role, 0) >= ROLE_RANK[role]

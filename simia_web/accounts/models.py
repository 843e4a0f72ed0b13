from django.contrib.auth.models import AbstractUser
from django.db import models


class Role(models.TextChoices):
    ADMIN = "admin", "Admin"
    CURATOR = "curator", "Curator"
    ANNOTATOR = "annotator", "Annotator"


# Each role can do everything the roles below it can.
ROLE_RANK = {Role.ANNOTATOR: 1, Role.CURATOR: 2, Role.ADMIN: 3}


class User(AbstractUser):
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ANNOTATOR)

    def has_role(self, role: str) -> bool:
        """True when the user's role is `role` or ranks above it."""
        if not self.is_active:
            return False
        if self.is_superuser:
            return True
        return ROLE_RANK.get(self.role, 0) >= ROLE_RANK[role]

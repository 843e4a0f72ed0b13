from django.contrib.contenttypes.models import ContentType
from django.db import models

from .models import Revision


def revision_list(*, obj: models.Model):
    return Revision.objects.filter(
        content_type=ContentType.objects.get_for_model(obj), object_id=obj.pk
    ).select_related("author")

"""Every model of the project has an owner workspace (a `workspace_path` that ends at accounts.Workspace), or is
listed as deployment-wide with the reason: a new model cannot hold a team's data unscoped."""

from django.apps import apps
from django.core.exceptions import FieldDoesNotExist

from simia_web.accounts.models import Workspace
from simia_web.accounts.scoping import DEPLOYMENT_WIDE, DOMAIN_ID_COLUMN, workspace_path


def _project_models():
    return [m for m in apps.get_models() if m.__module__.startswith("simia_web.") and not m._meta.auto_created]


def _resolve(model, path: str):
    """The model the lookup path `path` ends at, following foreign keys from `model`."""
    for name in path.split("__"):
        field = model._meta.get_field(name)
        if not field.is_relation:
            raise AssertionError(f"{model._meta.label}.{name} in {path!r} is not a relation")
        model = field.related_model
    return model


def test_every_model_has_an_owner_workspace_or_a_reason():
    problems = []
    for model in _project_models():
        label = model._meta.label_lower
        path = workspace_path(model)
        if path is None:
            if label not in DEPLOYMENT_WIDE:
                problems.append(f"{label}: no workspace_path, and not listed in DEPLOYMENT_WIDE")
            continue
        if path == DOMAIN_ID_COLUMN:
            model._meta.get_field(DOMAIN_ID_COLUMN)  # a plain column of domain ids, read through catalog.Domain
            continue
        try:
            owner = _resolve(model, path)
        except (FieldDoesNotExist, AssertionError) as exc:
            problems.append(f"{label}: {path!r} does not resolve ({exc})")
            continue
        if owner is not Workspace:
            problems.append(f"{label}: {path!r} ends at {owner._meta.label}, not accounts.Workspace")
    assert not problems, "\n".join(problems)


def test_deployment_wide_list_names_only_models_that_exist_and_have_no_owner():
    labels = {m._meta.label_lower: m for m in _project_models()}
    for label in DEPLOYMENT_WIDE:
        assert label in labels, f"{label} is listed as deployment-wide but is no model"
        assert workspace_path(labels[label]) is None, f"{label} has an owner workspace and is listed as well"

"""One error family: services, selectors and the rule modules they call refuse with `simia_web.core.errors`
classes (ValidationFailed, NotFound, Conflict, ...), never with Django's or DRF's ValidationError.

Read with `ast`, so a module is checked without importing it. A serializer's, form's, field's or filter's own
methods may raise their framework's ValidationError in a rule module: that is how those frameworks collect a
refusal (a form's `clean_*`, a serializer's `validate`). Services and selectors get no such leave."""

import ast
from pathlib import Path

import pytest

from simia_web.core.errors import ValidationFailed, django_validation

PACKAGE = Path(__file__).resolve().parents[2] / "simia_web"

# Modules holding rules that services call (besides every services and selectors module).
RULE_MODULES = (
    "catalog/references.py",
    "catalog/api_imports.py",
    "jobs/parameters.py",
    "synthesis/params.py",
    "llm/validation.py",
    "curation/filters.py",
    "core/pagination.py",
    "exports/models.py",
)
# The framework classes whose own methods raise the framework's ValidationError, by the end of their base's name.
FRAMEWORK_BASES = ("Serializer", "Field", "Form", "Filter", "FilterSet")
# Where ValidationError comes from when it is Django's or DRF's.
FRAMEWORK_MODULES = (
    "django.core.exceptions",
    "django.forms",
    "rest_framework.exceptions",
    "rest_framework.serializers",
)
# Other libraries' ValidationError (a JSON Schema or msgspec finding) is no refusal of ours.
OTHER_LIBRARIES = ("jsonschema", "msgspec")


def _strict(path: Path) -> bool:
    """A services or selectors module (or package member): no framework ValidationError at all."""
    return path.stem in ("services", "selectors") or path.parent.name in ("services", "selectors")


def guarded_modules() -> list[Path]:
    found = {
        path
        for pattern in (
            "**/services.py",
            "**/services/*.py",
            "**/selectors.py",
            "**/selectors/*.py",
            "**/job_kinds.py",
            "**/job_kinds/*.py",
            "**/importers/*.py",
        )
        for path in PACKAGE.glob(pattern)
        if "migrations" not in path.parts
    }
    found.update(PACKAGE / name for name in RULE_MODULES)
    return sorted(found)


def _name_of(node: ast.expr) -> str:
    """`serializers.ValidationError` for an attribute chain, `ValidationError` for a name; "" otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _name_of(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


def _raised(node: ast.Raise) -> str:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    name = _name_of(exc) if exc is not None else ""
    if name.rsplit(".", 1)[-1] != "ValidationError" or name.split(".")[0] in OTHER_LIBRARIES:
        return ""
    return name


def _framework_class(node: ast.ClassDef) -> bool:
    return any(_name_of(base).endswith(FRAMEWORK_BASES) for base in node.bases)


def problems_in(path: Path, source: str) -> list[str]:
    """Each import or raise of Django's or DRF's ValidationError in the module, as "file:line: what"."""
    where = path.relative_to(PACKAGE.parent) if path.is_relative_to(PACKAGE.parent) else path
    strict = _strict(path)
    found = []

    def visit(node: ast.AST, in_framework_class: bool) -> None:
        if isinstance(node, ast.ImportFrom) and node.module in FRAMEWORK_MODULES:
            for alias in node.names:
                if alias.name == "ValidationError":
                    found.append(f"{where}:{node.lineno}: imports {node.module}.ValidationError")
        elif isinstance(node, ast.Raise) and (name := _raised(node)) and (strict or not in_framework_class):
            found.append(f"{where}:{node.lineno}: raises {name}")
        inside = in_framework_class or (isinstance(node, ast.ClassDef) and _framework_class(node))
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(ast.parse(source, filename=str(path)), False)
    return found


def test_services_selectors_and_rule_modules_refuse_only_with_core_errors():
    modules = guarded_modules()
    assert len(modules) > 30 and all(path.is_file() for path in modules)
    found = [problem for path in modules for problem in problems_in(path, path.read_text(encoding="utf-8"))]
    assert not found, (
        "Raise simia_web.core.errors classes (ValidationFailed(detail, field=...), ValidationFailed.of({...}), "
        "NotFound, Conflict, ...) instead; wrap Django's own validation in core.errors.django_validation():\n  "
        + "\n  ".join(found)
    )


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        (
            "simia_web/shop/services.py",
            "from django.core.exceptions import ValidationError\n\ndef f():\n    raise ValidationError({'a': 'b'})\n",
            [
                "simia_web/shop/services.py:1: imports django.core.exceptions.ValidationError",
                "simia_web/shop/services.py:4: raises ValidationError",
            ],
        ),
        (
            "simia_web/shop/selectors/lists.py",
            "from rest_framework import serializers\n\nclass S(serializers.Serializer):\n"
            "    def validate(self, data):\n        raise serializers.ValidationError('no')\n",
            ["simia_web/shop/selectors/lists.py:5: raises serializers.ValidationError"],
        ),
        (
            "simia_web/shop/params.py",
            "from rest_framework import serializers\n\nclass S(serializers.Serializer):\n"
            "    def validate(self, data):\n        raise serializers.ValidationError('no')\n\n"
            "def check():\n    raise serializers.ValidationError('no')\n",
            ["simia_web/shop/params.py:8: raises serializers.ValidationError"],
        ),
        (
            "simia_web/shop/services.py",
            "import jsonschema\n\ndef f():\n    raise jsonschema.ValidationError('no')\n",
            [],
        ),
    ],
)
def test_the_guard_names_file_and_line(path, source, expected):
    assert problems_in(PACKAGE.parent / path, source) == expected


def test_djangos_own_validation_is_refused_as_validation_failed():
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationFailed) as refused, django_validation(field="password"):
        raise ValidationError(["too short", "too common"])
    assert refused.value.body() == {"password": ["too short", "too common"]}
    with pytest.raises(ValidationFailed) as refused, django_validation():
        raise ValidationError({"name": ["taken"], "email": ["not an address"]})
    assert refused.value.errors == {"name": ["taken"], "email": ["not an address"]}
    assert refused.value.detail == "name: taken; email: not an address"

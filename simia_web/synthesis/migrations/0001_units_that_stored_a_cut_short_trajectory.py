"""A unit that stored a trajectory an LLM or internal error cut short ended in an error: its writer now says so in
its result (under "error", what the job engine counts), and this says it for the units written before."""

from django.db import migrations

CUT_SHORT = ("llm_error", "internal_error")


def units_errored(apps, schema_editor):
    JobUnit = apps.get_model("jobs", "JobUnit")
    RuleViolation = apps.get_model("curation", "RuleViolation")
    units = (
        JobUnit.objects.filter(status="done", trajectory__termination_reason__in=CUT_SHORT)
        .exclude(result__has_key="error")
        .select_related("trajectory")
    )
    for unit in units.iterator(chunk_size=500):
        reason = unit.trajectory.termination_reason
        violations = RuleViolation.objects.filter(trajectory=unit.trajectory, code=reason).exclude(detail="")
        unit.result = {**unit.result, "error": violations.values_list("detail", flat=True).first() or reason}
        unit.save(update_fields=["result"])


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0004_unit_leases"),
        ("curation", "0005_versioned_decisions"),
    ]

    operations = [migrations.RunPython(units_errored, migrations.RunPython.noop)]

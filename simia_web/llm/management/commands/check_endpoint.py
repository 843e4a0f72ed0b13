from django.core.management.base import BaseCommand, CommandError

from simia_web.llm.capabilities import endpoint_check
from simia_web.llm.models import EndpointProfile
from simia_web.llm.selectors import profile_as_used_here, profile_default


class Command(BaseCommand):
    help = (
        "Probe an endpoint profile with tiny requests: which structured-output and tool modes it honours, its "
        "context window, and its pace (requests at once, prompt and answer tokens per second, how long a 4k-token "
        "prompt and a small synthesis take). Records the results and the evidence on the profile, and starts the "
        "adaptive concurrency limit at the slots found."
    )

    def add_arguments(self, parser):
        parser.add_argument("profile", nargs="?", help="profile name or id (default: the default profile)")

    def handle(self, *args, profile=None, **options):
        profile = _profile(profile)
        found = endpoint_check(profile=profile)
        for probe in found["evidence"]:
            status = probe["status"] or "-"
            self.stdout.write(f"  {probe['name']:<28} {status!s:>4}  {probe['verdict']:<11} {probe['detail'][:90]}")
        window = found["context_window"] or "unknown (set it on the profile; 8192 is assumed)"
        self.stdout.write(
            f"structured output: {found['structured']}\ntools: {found['tools']}\n"
            f"context window: {window} ({found['context_window_source']})\n"
            f"pace: {found['concurrency'].get('summary') or 'not measured'}"
        )
        pace = found["concurrency"]
        if pace.get("slots"):
            self.stdout.write(
                f"concurrency: starts at {pace['slots']} in flight (the profile allows at most "
                f"{profile.max_concurrency}; the limit then follows the latency the endpoint shows)"
            )


def _profile(name_or_id: str | None) -> EndpointProfile:
    if name_or_id is None:
        return profile_default()
    lookup = {"pk": int(name_or_id)} if name_or_id.isdigit() else {"name": name_or_id}
    try:
        return profile_as_used_here(EndpointProfile.objects.get(**lookup))
    except EndpointProfile.DoesNotExist:
        raise CommandError(f"no endpoint profile {name_or_id!r}") from None

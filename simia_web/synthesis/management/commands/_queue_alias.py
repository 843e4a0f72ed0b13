"""The commands `synthesize`, `rollout` and `amplify` were replaced by `manage.py queue KIND --param NAME=VALUE`. They
stay as aliases for scripts written against them: each takes its old options, says on stderr (one line) which
`queue` command does the same, and runs that command. The kind's parameters serializer stays the one judge of the
values, so an alias accepts and refuses what `queue` does."""

import shlex
from dataclasses import dataclass, field

from django.core.management import call_command
from django.core.management.base import BaseCommand

from simia_web.jobs.kinds import job_kinds_queueable


@dataclass(frozen=True)
class OldOption:
    """One option of the old command and the parameter it sets (`file`: its value is a path whose text is the
    parameter's value, `@PATH` to the queue command)."""

    flag: str
    param: str
    arguments: dict = field(default_factory=dict)  # argparse's: type, action, required, choices, help
    file: bool = False


def integers(*params: str) -> tuple[OldOption, ...]:
    """`--max-steps N` for `max_steps`, and the like."""
    return tuple(OldOption(f"--{param.replace('_', '-')}", param, {"type": int}) for param in params)


class QueueAlias(BaseCommand):
    kind: str
    options: tuple[OldOption, ...]

    @property
    def name(self) -> str:
        return type(self).__module__.rsplit(".", 1)[-1]

    def add_arguments(self, parser):
        rules = job_kinds_queueable()[self.kind].parameters_serializer()().fields
        for option in self.options:
            arguments = {"dest": option.flag.lstrip("-").replace("-", "_"), **option.arguments}
            arguments.setdefault("help", str(rules[option.param].help_text or option.param))
            parser.add_argument(option.flag, **arguments)
        parser.add_argument(
            "--param",
            action="append",
            default=[],
            dest="pairs",
            metavar="NAME=VALUE",
            help=f"Any other parameter of the kind, as `manage.py queue {self.kind}` takes it.",
        )
        parser.add_argument("--wait", action="store_true", help="Show progress and a summary; fail if the job fails.")
        parser.add_argument("--workspace", metavar="SLUG", help="The workspace the job works in (default: default).")

    def queue_arguments(self, options: dict) -> list[str]:
        """The arguments of the `queue` command that does what these options asked."""
        pairs = []
        for option in self.options:
            value = options[option.flag.lstrip("-").replace("-", "_")]
            for item in value if isinstance(value, list) else [] if value is None else [value]:
                pairs.append(f"{option.param}=@{item}" if option.file else f"{option.param}={item}")
        arguments = [self.kind]
        for pair in [*pairs, *options["pairs"]]:
            arguments += ["--param", pair]
        workspace = ["--workspace", options["workspace"]] if options.get("workspace") else []
        return arguments + workspace + (["--wait"] if options["wait"] else [])

    def handle(self, *args, **options):
        arguments = self.queue_arguments(options)
        self.stderr.write(
            f"manage.py {self.name} is now manage.py queue {self.kind}; running: "
            f"manage.py queue {shlex.join(arguments)}"
        )
        call_command("queue", *arguments, stdout=self.stdout, stderr=self.stderr)

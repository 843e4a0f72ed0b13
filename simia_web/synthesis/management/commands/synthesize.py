from simia_web.synthesis.services import SYNTHESIZE

from ._queue_alias import OldOption, QueueAlias, integers


class Command(QueueAlias):
    help = "Queue a domain-first synthesis job (an alias of `manage.py queue synthesize`, kept for old scripts)."
    kind = SYNTHESIZE
    options = (
        OldOption("--domain", "domains", {"action": "append", "required": True, "help": "Domain name; repeat."}),
        OldOption("--description", "description"),
        OldOption("--policy-file", "policy", {"help": "Agent policy (Markdown) for new domains."}, file=True),
        *integers("apis", "tasks", "rollouts", "max_steps", "max_errors", "user_turns"),
    )

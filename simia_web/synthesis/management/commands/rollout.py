from simia_web.synthesis.services import ROLLOUT

from ._queue_alias import OldOption, QueueAlias, integers


class Command(QueueAlias):
    help = "Queue rollouts on a domain's valid tasks (an alias of `manage.py queue rollout`, kept for old scripts)."
    kind = ROLLOUT
    options = (
        OldOption("--domain", "domain", {"required": True}),
        *integers("tasks", "rollouts", "max_steps", "max_errors", "user_turns"),
    )

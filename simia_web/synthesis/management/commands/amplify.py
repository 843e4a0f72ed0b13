from simia_web.synthesis.amplify import STRATEGIES
from simia_web.synthesis.services import AMPLIFY

from ._queue_alias import OldOption, QueueAlias, integers


class Command(QueueAlias):
    help = "Queue a Simia-SFT amplification job (an alias of `manage.py queue amplify`, kept for old scripts)."
    kind = AMPLIFY
    options = (
        *integers("count", "rng_seed", "min_messages", "max_messages"),
        OldOption("--domain", "domain"),
        OldOption("--seed", "seed_ids", {"type": int, "action": "append", "help": "A seed id; repeat for more."}),
        OldOption("--strategy", "strategy", {"choices": STRATEGIES}),
    )

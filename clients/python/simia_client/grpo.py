"""GRPO with Simia episodes: advantages within a group, and a rollout function for TRL's GRPOTrainer."""

import asyncio
import hashlib
import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .client import Session, SimiaClient
from .http import Retry
from .policy import ChatPolicy, Completion


def advantages(rewards: list[float | None]) -> list[float]:
    """GRPO: each reward against its group's mean and spread; an unjudged episode (None) counts as the mean."""
    judged = [reward for reward in rewards if reward is not None]
    if not judged:
        return [0.0] * len(rewards)
    mean, spread = statistics.fmean(judged), statistics.pstdev(judged) or 1.0
    return [0.0 if reward is None else (reward - mean) / spread for reward in rewards]


@dataclass
class EpisodeTokens:
    """One episode as a training sample: the first prompt's tokens, then every later token, the policy's
    (mask 1, with their log-probabilities) and the environment's between its turns (mask 0)."""

    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)

    def add(self, turn: Completion) -> None:
        if not self.prompt_ids:
            self.prompt_ids = list(turn.prompt_token_ids)
        else:
            seen = self.prompt_ids + self.completion_ids
            if turn.prompt_token_ids[: len(seen)] != seen:
                raise ValueError(
                    "the policy server rendered the conversation differently from the tokens it generated, so the "
                    "episode is not one token sequence: serve the policy with a prefix-preserving chat template "
                    "(as TRL requires for multi-turn training)"
                )
            between = turn.prompt_token_ids[len(seen) :]
            self.completion_ids += between
            self.logprobs += [0.0] * len(between)
            self.env_mask += [0] * len(between)
        self.completion_ids += turn.token_ids
        self.logprobs += turn.logprobs
        self.env_mask += [1] * len(turn.token_ids)

    def truncate(self, length: int | None) -> None:
        if length is not None:
            del self.completion_ids[length:], self.logprobs[length:], self.env_mask[length:]


class TrlRollout:
    """TRL GRPOTrainer's `rollout_func`: each prompt entry is played as one Simia episode by the policy being
    trained, served by vLLM's OpenAI-compatible server, which returns each turn's token ids and log-probabilities.

    TRL hands the function every prompt `num_generations` times. The copies of a prompt in one generation batch
    form one Simia group (key `{run}-{train|eval}-{step}-{prompt digest}`), so they play the same task even when
    they are spread over several processes. `reset(prompt)` turns a dataset prompt into reset arguments: by default
    the prompt is them as JSON text, e.g. `'{"domain": "retail", "seed": 3}'`.

    Returns what GRPOTrainer needs (prompt_ids, completion_ids, logprobs, env_mask: 1 for the policy's tokens, 0 for
    the tool results and user turns between them; the completion cut at `max_completion_length`) and, for reward
    functions, simia_reward (None for an unjudged episode, which TRL leaves out of its group's mean and gives no
    advantage), simia_session and simia_termination: pass `judged_reward` as a reward function.
    """

    def __init__(
        self,
        *,
        model: str,
        policy_url: str | None = None,
        api_key: str | None = None,
        simia_url: str | None = None,
        token: str | None = None,
        run: str | None = None,
        reset: Callable[[Any], dict] = json.loads,
        max_turn_tokens: int | None = None,
        retry: Retry | None = None,
    ):
        self.model = model
        self.policy_url = policy_url
        self.api_key = api_key
        self.simia_url = simia_url
        self.token = token
        self.run = run
        self.reset = reset
        self.max_turn_tokens = max_turn_tokens
        self.retry = retry

    def __call__(self, prompts: list, trainer) -> dict[str, list]:
        return asyncio.run(self._rollout(prompts, trainer))

    async def _rollout(self, prompts: list, trainer) -> dict[str, list]:
        args = trainer.args
        policy_url = self.policy_url or (args.vllm_server_base_url and f"{args.vllm_server_base_url}/v1")
        if not policy_url:
            raise ValueError("give policy_url, or set GRPOConfig.vllm_server_base_url")
        sampling = {"temperature": args.temperature, "top_p": args.top_p}
        if self.max_turn_tokens is not None:
            sampling["max_tokens"] = self.max_turn_tokens
        mode = "train" if trainer.model.training else "eval"
        prefix = f"{self.run or args.run_name or args.output_dir}-{mode}-{trainer.state.global_step}"
        async with (
            SimiaClient(self.simia_url, self.token, retry=self.retry) as simia,
            ChatPolicy(policy_url, self.model, api_key=self.api_key, sampling=sampling, retry=self.retry) as policy,
            asyncio.TaskGroup() as episodes,  # one failing cancels the others, which abandon their sessions
        ):
            played = [
                episodes.create_task(_episode(simia, policy, group=f"{prefix}-{_digest(prompt)}", **self.reset(prompt)))
                for prompt in prompts
            ]
        sessions, samples = zip(*(task.result() for task in played), strict=True)
        for sample in samples:
            sample.truncate(args.max_completion_length)
        return {
            "prompt_ids": [sample.prompt_ids for sample in samples],
            "completion_ids": [sample.completion_ids for sample in samples],
            "logprobs": [sample.logprobs for sample in samples],
            "env_mask": [sample.env_mask for sample in samples],
            "simia_reward": [session.reward for session in sessions],
            "simia_session": [session.id for session in sessions],
            "simia_termination": [session.result.termination_reason for session in sessions],
        }


async def _episode(simia: SimiaClient, policy: ChatPolicy, **reset) -> tuple[Session, EpisodeTokens]:
    session = await simia.reset(**reset)
    sample = EpisodeTokens()

    async def act(messages: list[dict], tools: list[dict]) -> dict:
        turn = await policy.complete(messages, tools, token_ids=True)
        sample.add(turn)
        return turn.message

    await session.play(act)
    return session, sample


def _digest(prompt) -> str:
    text = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def judged_reward(completions: list, simia_reward: list[float | None], **kwargs) -> list[float | None]:
    """A GRPOTrainer reward function: Simia's judged reward of each episode, as the rollout function returned it."""
    return list(simia_reward)

"""Trainer side of the TRL test, run in the trainer venv: a GRPOTrainer (a tiny random model and a word-level
tokenizer, built offline) draws a generation batch from its own sampler and calls the Simia rollout function on it
as its generation step does; the judged_reward reward function then reads the rewards. Nothing is trained.

    trl_rollout.py SIMIA_URL POLICY_URL  (SIMIA_TOKEN in the environment; run in a scratch directory)
"""

import json
import sys

from datasets import Dataset
from simia_client import TrlRollout, judged_reward
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer


def tiny_trainer(simia_url: str, policy_url: str, output_dir: str) -> GRPOTrainer:
    words = Tokenizer(models.WordLevel({"[PAD]": 0, "[EOS]": 1, "[UNK]": 2}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, pad_token="[PAD]", eos_token="[EOS]", unk_token="[UNK]")
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=256,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            pad_token_id=0,
            eos_token_id=1,
        )
    )
    prompts = [json.dumps({"domain": "shop", "seed": seed, "max_steps": 6}) for seed in range(2)]
    return GRPOTrainer(
        model=model,
        reward_funcs=judged_reward,
        args=GRPOConfig(
            output_dir=output_dir,
            per_device_train_batch_size=4,
            num_generations=2,  # a batch holds 2 prompts, each twice: 2 GRPO groups
            max_completion_length=4096,
            report_to="none",
            use_cpu=True,
        ),
        train_dataset=Dataset.from_list([{"prompt": prompt} for prompt in prompts]),
        processing_class=tokenizer,
        rollout_func=TrlRollout(model="policy", policy_url=policy_url, simia_url=simia_url, run="trl-test"),
    )


if __name__ == "__main__":
    trainer = tiny_trainer(*sys.argv[1:3], output_dir="trainer")
    batch = next(iter(trainer.get_train_dataloader()))
    prompts = [example["prompt"] for example in batch]
    output = trainer.rollout_func(prompts, trainer)
    rewards = trainer.reward_funcs[0](prompts=prompts, completions=[""] * len(prompts), **output)
    print(json.dumps({"prompts": prompts, "output": output, "rewards": rewards}))

"""An episode as one training sample: its turns' tokens joined, the environment's masked out."""

import pytest
from simia_client import Completion, EpisodeTokens


def turn(prompt: list[int], generated: list[int]) -> Completion:
    return Completion({"role": "assistant", "content": ""}, prompt, generated, [-0.1 * t for t in generated])


def test_turns_join_into_the_first_prompt_and_one_masked_completion():
    sample = EpisodeTokens()
    sample.add(turn([1, 2], [3, 4]))
    sample.add(turn([1, 2, 3, 4, 5, 6], [7]))  # 5, 6: the tool result and the template's markers
    assert sample.prompt_ids == [1, 2]
    assert sample.completion_ids == [3, 4, 5, 6, 7]
    assert sample.env_mask == [1, 1, 0, 0, 1]
    assert sample.logprobs == pytest.approx([-0.3, -0.4, 0.0, 0.0, -0.7])
    sample.truncate(3)
    assert (sample.completion_ids, sample.env_mask, len(sample.logprobs)) == ([3, 4, 5], [1, 1, 0], 3)


def test_a_history_rendered_unlike_what_was_generated_is_refused():
    sample = EpisodeTokens()
    sample.add(turn([1, 2], [3, 4]))
    with pytest.raises(ValueError, match="prefix-preserving chat template"):
        sample.add(turn([1, 2, 3, 9, 5], [7]))

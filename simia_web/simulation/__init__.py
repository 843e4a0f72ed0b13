"""The episode engine shared by rollouts, RL sessions and curation's "judge again": the agent's turn, the
environment simulator, the user simulator, the judge, the state slice a call needs and the fitting of prompts.

It sits beneath the apps that drive it (synthesis, environments, curation) and imports none of them: only the
conversation (formats), the LLM client and the core helpers.
"""

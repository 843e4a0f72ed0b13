"""What the LLM layer tells the layers above it, without knowing who listens."""

from django.dispatch import Signal

# Rows of LLM calls were written: sent with `calls` (LLMCall instances with their profile) right after the
# statement that wrote them. Not in a transaction of its own, which would cost a unit two more round trips: a
# process that dies between the two leaves those calls written and not counted.
llm_calls_recorded = Signal()
# An answer already recorded as a success could not be used (bad JSON, wrong schema): sent with `call` and `kind`.
llm_call_invalidated = Signal()

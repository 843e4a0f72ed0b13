"""What the LLM layer tells the layers above it, without knowing who listens."""

from django.dispatch import Signal

# Rows of LLM calls were written: sent with `calls` (LLMCall instances with their profile) in the transaction
# that writes them, so that what receivers count is written exactly when the rows are.
llm_calls_recorded = Signal()
# An answer already recorded as a success could not be used (bad JSON, wrong schema): sent with `call` and `kind`.
llm_call_invalidated = Signal()

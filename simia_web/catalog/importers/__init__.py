"""Imports: seeds and benchmarks (τ²-bench folders, ShareGPT and OpenAI chat files), and a domain's APIs from an
OpenAPI 3 document or an MCP server."""

from .apis import API_FORMATS, apis_import
from .errors import ImportIssue, ImportRejected
from .service import FORMATS, ImportResult, seeds_import

__all__ = ["API_FORMATS", "FORMATS", "ImportIssue", "ImportRejected", "ImportResult", "apis_import", "seeds_import"]

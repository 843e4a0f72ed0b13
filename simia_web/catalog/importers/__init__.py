"""Seed and benchmark imports: τ²-bench folders, ShareGPT and OpenAI chat files."""

from .errors import ImportIssue, ImportRejected
from .service import FORMATS, ImportResult, seeds_import

__all__ = ["FORMATS", "ImportIssue", "ImportRejected", "ImportResult", "seeds_import"]

"""The kinds of items the near-duplicate index holds. Each app that owns one registers it when it is ready
(curation: trajectories, catalog: tasks), so the index names no app above it."""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Corpus:
    name: str  # stored on every signature and hashed into every band key
    queryset: Callable  # () -> the items' queryset
    fields: tuple[str, ...]  # what `text` reads of an item
    workspace: str  # the lookup of an item's owner workspace id, as `queryset().values()` reads it
    text: Callable[[dict], str]  # an item's values -> the text compared


_corpora: dict[str, Corpus] = {}


def corpus_register(corpus: Corpus) -> None:
    _corpora[corpus.name] = corpus


def corpus_get(name: str) -> Corpus:
    return _corpora[name]


def corpus_names() -> list[str]:
    return sorted(_corpora)

"""A registry of named entries (tools, prompts): registration order, unique
names, a generation counter for cached listings, and change callbacks."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

#: Called with the kind ("tools", "prompts"...) after the set changed.
ListChanged = Callable[[str], None]


class NamedEntry(Protocol):
    name: str
    definition: dict[str, Any]
    scopes: tuple[str, ...]


E = TypeVar("E", bound=NamedEntry)


class NamedRegistry(Generic[E]):
    """Entries by name; ``on_list_changed`` callbacks hear every change."""

    def __init__(self, kind: str, singular: str) -> None:
        self.kind = kind
        self.singular = singular
        self.on_list_changed: list[ListChanged] = []
        self._entries: dict[str, E] = {}
        #: The entry of that name, or ``None``: the dict's own ``get`` (changed
        #: in place only), which a ``tools/call`` asks without a frame of ours.
        self.find: Callable[[str], E | None] = self._entries.get
        self._definitions: list[dict[str, Any]] = []
        self._generation = 0
        self._lock = threading.Lock()

    @property
    def generation(self) -> int:
        """Changes whenever the set changes (cached listings compare it)."""
        return self._generation

    def add(self, entry: E) -> None:
        with self._lock:
            if entry.name in self._entries:
                raise ValueError(f"A {self.singular} named {entry.name!r} is already registered")
            self._entries[entry.name] = entry
            self._changed()
        self._announce()

    def remove(self, name: str) -> None:
        with self._lock:
            if self._entries.pop(name, None) is None:
                raise KeyError(f"No {self.singular} named {name!r}")
            self._changed()
        self._announce()

    def _changed(self) -> None:
        self._definitions = [entry.definition for entry in self._entries.values()]
        self._generation += 1

    def _announce(self) -> None:
        for callback in list(self.on_list_changed):
            callback(self.kind)

    def definitions(self) -> Sequence[dict[str, Any]]:
        """Every definition, in registration order."""
        return self._definitions

    def declared_scopes(self) -> set[str]:
        """Every scope an entry asks for (for protected resource metadata)."""
        return {scope for entry in list(self._entries.values()) for scope in entry.scopes}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

"""``subscriptions/listen`` (2026-07-28): which change notifications a listen
stream asked for, and how an event published by any worker becomes a
notification on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import InvalidParams, MissingClientCapability
from .jsonrpc import RequestId
from .task_records import TASKS_EXTENSION, extension_declared

SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"

#: In an offer: this server delivers ``notifications/resources/updated``.
RESOURCE_UPDATES = "resource_updates"
#: In an offer: this server delivers ``notifications/tasks`` (the tasks extension).
TASK_STATUS = "task_status"

#: Filter flag -> (event kind, notification method).
LIST_FLAGS = {
    "toolsListChanged": ("tools", "notifications/tools/list_changed"),
    "promptsListChanged": ("prompts", "notifications/prompts/list_changed"),
    "resourcesListChanged": ("resources", "notifications/resources/list_changed"),
}


def list_changed_event(kind: str) -> dict[str, Any]:
    """The bus message announcing that the ``kind`` list ("tools"...) changed."""
    return {"type": "list_changed", "kind": kind}


def resource_updated_event(uri: str) -> dict[str, Any]:
    return {"type": "resource_updated", "uri": uri}


@dataclass(frozen=True, slots=True)
class Listen:
    """One listen stream: its id (the request's id, type kept) and the part of
    its filter this server honours."""

    subscription_id: RequestId
    kinds: frozenset[str]
    resource_uris: tuple[str, ...]
    #: Tasks whose ``notifications/tasks`` this stream gets (the tasks extension).
    task_ids: tuple[str, ...] = ()
    #: Who opened the stream: only that caller's tasks are reported.
    principal: str | None = None

    @classmethod
    def from_request(
        cls,
        request_id: RequestId,
        params: dict[str, Any],
        offered: frozenset[str],
        *,
        principal: str | None = None,
        client_capabilities: dict[str, Any] | None = None,
    ) -> Listen:
        wanted = params.get("notifications")
        if not isinstance(wanted, dict):
            raise InvalidParams('subscriptions/listen needs params.notifications, e.g. {"toolsListChanged": true}.')
        kinds = frozenset(kind for flag, (kind, _) in LIST_FLAGS.items() if wanted.get(flag) is True)
        uris = wanted.get("resourceSubscriptions") or []
        if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
            raise InvalidParams("params.notifications.resourceSubscriptions must be a list of URIs.")
        honoured_uris = tuple(uris) if RESOURCE_UPDATES in offered else ()
        return cls(request_id, kinds & offered, honoured_uris, _task_ids(wanted, offered, client_capabilities),
                   principal)

    def _meta(self) -> dict[str, Any]:
        return {SUBSCRIPTION_ID_KEY: self.subscription_id}

    def acknowledgement(self) -> dict[str, Any]:
        """The first message of the stream: what will be delivered."""
        honoured: dict[str, Any] = {flag: True for flag, (kind, _) in LIST_FLAGS.items() if kind in self.kinds}
        if self.resource_uris:
            honoured["resourceSubscriptions"] = list(self.resource_uris)
        if self.task_ids:
            honoured["taskIds"] = list(self.task_ids)
        return {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": self._meta(), "notifications": honoured},
        }

    def notification_for(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The notification an event means for this stream, or ``None`` if it did
        not ask for it."""
        if event.get("type") == "list_changed":
            for kind, method in LIST_FLAGS.values():
                if kind == event.get("kind") and kind in self.kinds:
                    return {"jsonrpc": "2.0", "method": method, "params": {"_meta": self._meta()}}
            return None
        if event.get("type") == "task":
            task = event.get("task")
            mine = event.get("principal") == self.principal
            if isinstance(task, dict) and task.get("taskId") in self.task_ids and mine:
                return {"jsonrpc": "2.0", "method": "notifications/tasks", "params": {**task, "_meta": self._meta()}}
            return None
        uri = event.get("uri")
        if event.get("type") == "resource_updated" and isinstance(uri, str) and self._watches(uri):
            return {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": uri, "_meta": self._meta()},
            }
        return None

    def _watches(self, uri: str) -> bool:
        """A subscription covers the resource and its sub-resources."""
        return any(uri == base or uri.startswith(base.rstrip("/") + "/") for base in self.resource_uris)


def _task_ids(wanted: dict[str, Any], offered: frozenset[str], capabilities: dict[str, Any] | None) -> tuple[str, ...]:
    """The ``taskIds`` a stream asked for and will get: only from a request that
    declares the tasks extension (``-32021`` otherwise), and only where tasks are offered."""
    task_ids = wanted.get("taskIds")
    if task_ids is None:
        return ()
    if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
        raise InvalidParams("params.notifications.taskIds must be a list of task ids.")
    if task_ids and not extension_declared(capabilities or {}):
        raise MissingClientCapability(
            {"extensions": {TASKS_EXTENSION: {}}},
            "Task notifications need the tasks extension: declare extensions"
            f"[{TASKS_EXTENSION!r}] in the request's io.modelcontextprotocol/clientCapabilities.",
        )
    return tuple(dict.fromkeys(task_ids)) if TASK_STATUS in offered else ()

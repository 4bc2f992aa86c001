"""`veernet worker ... --ping` and `veernet reaper --ping`: a container's health check.

It pings, through the broker, exactly the Celery nodes the same command line starts (`celery inspect ping`
against each of them) and succeeds only if every one answers. A node answers from its main process, so a
worker busy with a nine-hour job answers; one stuck, crashed or cut off from the broker does not. Only a
broker with broadcast (Redis) can carry pings: the embedded one cannot.
"""

from __future__ import annotations

from collections.abc import Sequence

from api.cli.processes import Managed, celery_node

PING_TIMEOUT_S = 5.0  # a node answers in milliseconds; the broker's round trip is the slow part


def unanswered(nodes: Sequence[str], timeout_s: float = PING_TIMEOUT_S) -> list[str]:
    """The nodes of ``nodes`` that did not answer a ping within ``timeout_s``. ValueError on the embedded broker."""
    from api.settings import get_settings
    from worker.celery_app import get_celery

    if get_settings().uses_embedded_broker:
        raise ValueError("the embedded broker cannot broadcast, so Celery nodes cannot be pinged through it; "
                         "--ping needs BROKER_URL=redis://...")
    # With destinations given, Celery stops waiting as soon as each of them has answered.
    replies = get_celery().control.ping(destination=list(nodes), timeout=timeout_s)
    answered = {node for reply in replies for node in reply}
    return [node for node in nodes if node not in answered]


def ping_report(children: Sequence[Managed], timeout_s: float = PING_TIMEOUT_S) -> tuple[bool, str]:
    """(every node answered, one line saying so or naming the silent ones)."""
    nodes = [celery_node(child) for child in children]
    try:
        silent = unanswered(nodes, timeout_s)
    except ValueError as exc:
        return False, str(exc)
    except Exception as exc:  # kombu raises many types for a broker it cannot reach
        return False, f"cannot reach the broker to ping {', '.join(nodes)}: {type(exc).__name__}: {exc}"
    if silent:
        return False, (f"no answer within {timeout_s:g} s from {', '.join(silent)} (of {len(nodes)} node(s)): "
                       "down, stuck or cut off from the broker; their log says which")
    return True, f"{len(nodes)} node(s) answered: {', '.join(nodes)}"

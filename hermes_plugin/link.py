"""The process-wide link to one gateway address: client, breaker and supervisor together.

Why shared: whether the gateway is down is a fact about the gateway, not about one chat
session, so all providers in a process that talk to the same address share one breaker (one
failing session protects the others) and one supervisor (one start, one reference count).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .breaker import CircuitBreaker
from .client import GatewayClient
from .config import Settings
from .ownership import Ownership
from .state import shared
from .supervisor import GatewaySupervisor

log = logging.getLogger("hermes_memory_tencentdb")


def _log_change(settings: Settings, old: str, new: str) -> None:
    if new == "open" and old == "closed":
        log.warning(
            "memory_tencentdb: gateway %s unreachable; memory paused (turns kept on disk),"
            " retry in %.0f s",
            settings.base_url,
            settings.breaker_cooldown_s,
        )
    elif new == "closed":
        log.info("memory_tencentdb: gateway %s reachable again", settings.base_url)


@dataclass
class Gateway:
    settings: Settings
    breaker: CircuitBreaker
    client: GatewayClient
    supervisor: GatewaySupervisor


def connect(settings: Settings) -> Gateway:
    """The shared link for this address, created on first use (no network, no process)."""
    key = (
        settings.gateway_host,
        settings.gateway_port,
        settings.api_key,
        str(settings.expected_data_dir),
    )
    st = shared()
    with st.lock:
        gw = st.gateways.get(key)
        if gw is None:
            breaker = CircuitBreaker(
                settings.breaker_threshold,
                settings.breaker_cooldown_s,
                on_change=lambda old, new: _log_change(settings, old, new),
            )
            owner = Ownership(
                settings.base_url,
                settings.api_key,
                settings.expected_data_dir,
                settings.checks_data_dir,
            )
            client = GatewayClient(settings.base_url, settings.api_key, breaker, owner=owner)
            supervisor = GatewaySupervisor(settings, client)
            owner.started_pids = supervisor.started_pids
            gw = Gateway(settings, breaker, client, supervisor)
            st.gateways[key] = gw
        return gw

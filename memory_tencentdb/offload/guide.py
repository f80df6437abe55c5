"""What the model is told about the offload, so it can always get back what left its context."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TOOL_NAME = "memory_tencentdb_offload_read"

# The one definition of the read-back tool. The host adapters cannot import this package (they
# run in the host's process), so hermes_plugin/offload.py and openclaw_bridge/lib/offload_read.js
# carry copies, held equal to these by tests/test_host_adapter_copies.py.
TOOL_DESCRIPTION = (
    "Read back what context offload moved out of your context: the full original result of a "
    "tool call (by tool_call_id or result_ref, exactly as the tool returned it), the steps of a "
    "task-canvas node (by node_id, e.g. 003-N2), or a task canvas (by canvas file name, or "
    '"active"). Use it whenever a stub or a canvas node lacks a detail you need. Give exactly '
    "one of the four. A long text comes in pages: a page ends by naming the call for the next "
    "page (the same key with offset); the pages joined are the original exactly."
)

TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool_call_id": {
            "type": "string",
            "description": "id of the tool call whose result to read",
        },
        "result_ref": {"type": "string", "description": "refs/<file>.md named in a stub"},
        "node_id": {"type": "string", "description": "canvas node id, NNN-N<k>"},
        "canvas": {"type": "string", "description": 'canvas file (NNN-label.mmd) or "active"'},
        "offset": {
            "type": "integer",
            "minimum": 0,
            "description": "where the page starts, in characters (the previous page names it)",
        },
        "length": {
            "type": "integer",
            "minimum": 1,
            "description": "page size in characters (default: what fits this host)",
        },
    },
    "additionalProperties": False,
}

# What a host adapter offers its model: the same, less ``length``; the adapter chooses the page
# size itself, from its context window (each host caps what one tool result may hold).
HOST_TOOL_PARAMETERS: dict[str, Any] = {
    **TOOL_PARAMETERS,
    "properties": {k: v for k, v in TOOL_PARAMETERS["properties"].items() if k != "length"},
}


def text(scope_dir: Path, journal: Path) -> str:
    """Short on purpose: a host sends it with every model call once something was offloaded
    (every stub and canvas also says how to read its original back)."""
    return (
        "## Context offload\n"
        "Some tool results here are stubs and older steps may have left the context (a task"
        " canvas stands in); nothing is lost."
        f' `{TOOL_NAME}` returns the exact original: {{"tool_call_id": "..."}} (named in a stub),'
        ' {"node_id": "NNN-N<k>"} (a canvas step) or {"canvas": "active"}; a long one in'
        " pages, each naming the call for the next."
        f" Files: {scope_dir} (refs/, {journal.name}, mmds/)."
    )


def read_line(tool_call_id: str, path: object | None) -> str:
    """The stub's last line: the call that reads the original back (and its file)."""
    where = f" or open {path}" if path else ""
    return (
        f"Full result (in pages if long; each names the next): {TOOL_NAME}"
        f' {{"tool_call_id": "{tool_call_id}"}}{where}'
    )


def tool(scope_dir: Path, journal: Path) -> dict[str, Any]:
    return {
        "text": text(scope_dir, journal),
        "tool": {
            "name": TOOL_NAME,
            "description": TOOL_DESCRIPTION,
            "parameters": TOOL_PARAMETERS,
        },
        "data_dir": str(scope_dir),
    }

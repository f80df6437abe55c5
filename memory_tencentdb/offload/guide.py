"""What the model is told about the offload, so it can always get back what left its context."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TOOL_NAME = "memory_tencentdb_offload_read"

TOOL_DESCRIPTION = (
    "Read back what context offload moved out of your context: the full original result of a "
    "tool call (by tool_call_id or result_ref, exactly as the tool returned it), the steps of a "
    "task-canvas node (by node_id, e.g. 003-N2), or a task canvas (by canvas file name, or "
    '"active"). Use it whenever a stub or a canvas node lacks a detail you need.'
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
    },
    "additionalProperties": False,
}


def text(scope_dir: Path, journal: Path) -> str:
    return (
        "## Context offload\n"
        "Large tool results in this conversation may be replaced by a short stub, and older turns"
        " by a task canvas (a Mermaid flowchart inside <current_task_context> or"
        " <history_task_context>). Nothing is lost: call"
        f' `{TOOL_NAME}` with {{"tool_call_id": "..."}} or {{"result_ref": "refs/....md"}} for'
        ' the exact original result, {"node_id": "NNN-N<k>"} for the steps behind a canvas node,'
        ' or {"canvas": "active"} for the whole canvas.'
        f" The files are also on disk under {scope_dir}: refs/ (raw results),"
        f" {journal.name} (one JSON row per tool call: summary, node_id, result_ref), mmds/"
        " (canvases); your own file tools can read them."
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

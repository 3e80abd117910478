"""The proposers of python/proposers: the offline one answers as a function of the prompt alone
and reports what the prompt carried; the reference one speaks the chat-completions protocol
(against a local stand-in server here, never a real endpoint) and extracts what the tuner reads."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

PROPOSERS = Path(__file__).resolve().parents[1] / "proposers"
sys.path.insert(0, str(PROPOSERS))

import offline  # noqa: E402
import openai_chat  # noqa: E402

PROMPT = """# guidance: insight (the task (I1) and optimisation insights (I3))
# I1: task
Tune evoattn's `wgmma` attention forward kernel (bf16 head dim 128, mask none) on GPU (sm_90a), generation 3.
Levers and their values: block_n: 64|128|176; stages: 1|2|3; q_in_regs: 0|1
# I3: profile insights
tensor pipe 41%
"""


def test_offline_answers_a_lever_of_the_generation_and_reports_the_parts() -> None:
    line, seen = offline.propose(PROMPT)
    # generation 3 of 3 levers: the first lever again, its second value
    assert line == "block_n=128"
    assert seen == {"generation": 3, "guidance": "insight", "parts": ["I1", "I3"]}
    assert offline.propose(PROMPT.replace("generation 3", "generation 4"))[0] == "stages=2"
    assert offline.propose("no levers here")[0] is None


def test_offline_logs_each_call(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, str(PROPOSERS / "offline.py")], input=PROMPT, capture_output=True, text=True,
            env={"EVOATTN_PROPOSER_LOG": str(log)}, check=True,
        )  # fmt: skip
        assert out.stdout == "block_n=128\n"
    assert [json.loads(line)["parts"] for line in log.read_text().splitlines()] == [["I1", "I3"]] * 2


def test_extract_keeps_lever_lines_or_one_fenced_source() -> None:
    reply = "Try these:\nblock_n=128,stages=3\n`q_in_regs=1`\nstages = 2 is also worth a look\n"
    assert openai_chat.extract(reply) == "block_n=128,stages=3\nq_in_regs=1\n"
    source = 'Here:\n```cuda\nextern "C" __global__ void k() {}\n```\nblock_n=64\n'
    assert openai_chat.extract(source) == 'extern "C" __global__ void k() {}\n'
    assert openai_chat.extract("```cuda\nint x;\n```") == ""


class StandIn(BaseHTTPRequestHandler):
    """A chat-completions endpoint that records the request and answers `REPLY`."""

    seen: list[tuple[str, dict[str, str], dict[str, object]]] = []
    status = 200
    reply = {"choices": [{"message": {"role": "assistant", "content": "stages=3\nblock_n=64,stages=1"}}]}

    def do_POST(self) -> None:  # noqa: N802 (the http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        StandIn.seen.append((self.path, dict(self.headers), body))
        data = json.dumps(StandIn.reply).encode()
        self.send_response(StandIn.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> object:
    server = HTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    StandIn.seen, StandIn.status = [], 200
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/"
    server.shutdown()


def run_chat(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROPOSERS / "openai_chat.py")], input=PROMPT, capture_output=True, text=True, env=env
    )


def test_the_reference_proposer_posts_the_prompt_and_answers_the_levers(endpoint: str) -> None:
    env = {"EVOATTN_PROPOSER_URL": endpoint, "EVOATTN_PROPOSER_MODEL": "m", "EVOATTN_PROPOSER_KEY": "secret"}
    out = run_chat(env)
    assert (out.returncode, out.stdout) == (0, "stages=3\nblock_n=64,stages=1\n"), out.stderr
    path, headers, body = StandIn.seen[0]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer secret"
    assert body["model"] == "m" and body["messages"][-1] == {"role": "user", "content": PROMPT}


def test_the_reference_proposer_fails_with_one_line(endpoint: str) -> None:
    out = run_chat({"EVOATTN_PROPOSER_MODEL": "m"})
    assert out.returncode == 2 and "set EVOATTN_PROPOSER_URL" in out.stderr
    StandIn.status = 500
    out = run_chat({"EVOATTN_PROPOSER_URL": endpoint, "EVOATTN_PROPOSER_MODEL": "m"})
    assert out.returncode == 2 and "HTTP 500" in out.stderr and not out.stdout

#!/usr/bin/env python3
"""The reference proposer for `evoattn tune --proposer`: sends the tuner's prompt to an
OpenAI-compatible chat-completions endpoint and answers what the model proposes, as the tuner
reads it: config lines in --config syntax, or one whole kernel source.

    export EVOATTN_PROPOSER_URL=https://host/v1     # the API's base URL (…/chat/completions is added)
    export EVOATTN_PROPOSER_MODEL=model-name
    export EVOATTN_PROPOSER_KEY=...                 # sent as a bearer token; optional for local servers
    evoattn tune --preset seed --proposer 'python3 python/proposers/openai_chat.py' --guidance full

EVOATTN_PROPOSER_TIMEOUT (seconds, default 120) bounds one request. Only the standard library is
used. Exit 2 with one line on stderr when the environment is incomplete or the request fails (the
tuner then warns and goes on); exit 0 with nothing on stdout when the reply holds no proposal."""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.error
import urllib.request

SYSTEM = (
    "You tune a GPU attention kernel. Reply with lever settings, one candidate per line in the "
    "form lever=value,lever=value using only the levers and values the task lists, or with one "
    "complete CUDA kernel source in a ```cuda fenced block. No other text is needed."
)
DEFAULT_TIMEOUT_S = 120.0
# One candidate: comma-separated lever=value pairs and nothing else on the line.
CONFIG_LINE = re.compile(r"^[a-z_][a-z0-9_]*=[^\s,=]+(,[a-z_][a-z0-9_]*=[^\s,=]+)*$")
FENCED_SOURCE = re.compile(r"```(?:cuda|c\+\+|cpp|c)?\s*\n(.*?)```", re.S)


class ProposerError(Exception):
    pass


def extract(reply: str) -> str:
    """What the tuner should read from the model's reply: a fenced kernel source (one that
    defines a __global__ function), else the lines that are lever settings."""
    for block in FENCED_SOURCE.findall(reply):
        if "__global__" in block:
            return block.strip() + "\n"
    lines = [line.strip().strip("`") for line in reply.splitlines()]
    return "".join(f"{line}\n" for line in lines if CONFIG_LINE.match(line))


def request(prompt: str, env: dict[str, str]) -> str:
    """The model's reply to `prompt`, from the endpoint `env` names."""
    url, model = env.get("EVOATTN_PROPOSER_URL", ""), env.get("EVOATTN_PROPOSER_MODEL", "")
    if not url or not model:
        raise ProposerError("set EVOATTN_PROPOSER_URL (the API's base URL) and EVOATTN_PROPOSER_MODEL")
    try:
        timeout = float(env.get("EVOATTN_PROPOSER_TIMEOUT", DEFAULT_TIMEOUT_S))
    except ValueError:
        raise ProposerError(f"EVOATTN_PROPOSER_TIMEOUT={env['EVOATTN_PROPOSER_TIMEOUT']}: not a number") from None
    body = {"model": model, "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]}
    headers = {"Content-Type": "application/json"}
    if env.get("EVOATTN_PROPOSER_KEY"):
        headers["Authorization"] = f"Bearer {env['EVOATTN_PROPOSER_KEY']}"
    req = urllib.request.Request(
        url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            reply = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise ProposerError(f"{url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        raise ProposerError(f"{url}: {getattr(e, 'reason', e)}") from None
    except json.JSONDecodeError:
        raise ProposerError(f"{url}: the reply is not JSON") from None
    try:
        return str(reply["choices"][0]["message"]["content"])
    except (KeyError, IndexError, TypeError):
        raise ProposerError(f"{url}: no choices[0].message.content in the reply") from None


def main() -> int:
    try:
        answer = extract(request(sys.stdin.read(), dict(os.environ)))
    except ProposerError as e:
        print(f"openai_chat proposer: {e}", file=sys.stderr)
        return 2
    if not answer:
        print("openai_chat proposer: the reply held no lever line and no kernel source", file=sys.stderr)
    sys.stdout.write(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())

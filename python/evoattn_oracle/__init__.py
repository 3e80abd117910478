"""evoattn's oracle: a Python process that times PyTorch SDPA backends (and FlashAttention-4 when
it imports) with exactly the method `evoattn bench` uses for its own kernels, spoken to over JSON
lines on stdin/stdout. See PROTOCOL.md; `python3 -m evoattn_oracle --fake` runs without torch."""

# Bumped on any incompatible change to the requests or responses.
PROTOCOL_VERSION = 5

# Every peer the oracle knows, in the order `hello` lists them.
PEERS = ("sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "sdpa-math", "sdpa-auto", "fa4", "evoattn-torch", "cudnn-fp8")

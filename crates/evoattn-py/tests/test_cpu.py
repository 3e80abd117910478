"""What the installed wheel does on a machine without a GPU (CI): it imports without PyTorch or
CUDA, and every argument check that needs no device gives the library's message as the Python
exception a user expects, before anything could be launched."""

from __future__ import annotations

import pytest

import evoattn
from evoattn import _evoattn

# q as a BHSD view of BSHD memory (x.transpose(1, 2)), k and v dense BHSD with 2 KV heads.
Q = ((2, 8, 100, 64), (100 * 8 * 64, 64, 8 * 64, 1))
KV = ((2, 2, 300, 64), (2 * 300 * 64, 300 * 64, 64, 1))
O = ((2, 8, 100, 64), (8 * 100 * 64, 100 * 64, 64, 1))


def check(q=Q, k=KV, v=KV, o=O, dtypes=("bf16",) * 4, causal="none", scale=None, lse=False, impl="auto",
          config=None, layout="bhsd"):
    return _evoattn.check(layout, q, k, v, o, list(dtypes), causal, scale, lse, impl, config)


def test_a_valid_call_describes_its_problem():
    # (B, H, Hkv, Sq, Sk, D): GQA and Sq != Sk from the tensors' own sizes.
    assert check() == (2, 8, 2, 100, 300, 64)
    assert check(causal="bottom-right", scale=0.3, lse=True, impl="wgmma", config="block_n=128") == (2, 8, 2, 100, 300, 64)


def test_e4m3_inputs_write_a_bf16_o():
    assert check(dtypes=("e4m3", "e4m3", "e4m3", "bf16"), impl="wgmma") == check()


def test_the_same_memory_in_flash_attentions_layout_is_the_same_problem():
    q = ((2, 100, 8, 64), (100 * 8 * 64, 8 * 64, 64, 1))
    kv = ((2, 300, 2, 64), (2 * 300 * 64, 64, 300 * 64, 1))
    o = ((2, 100, 8, 64), (8 * 100 * 64, 64, 100 * 64, 1))
    assert check(q, kv, kv, o, layout="bshd") == check()


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"dtypes": ("f32", "f32", "f32", "f32")}, TypeError, "dtype f32 is not supported"),
        ({"dtypes": ("bf16", "f16", "bf16", "bf16")}, TypeError, "tensor k: dtype f16 does not match q's bf16"),
        ({"q": ((2, 8, 100), (1, 1, 1))}, ValueError, "tensor q: expected rank 4"),
        ({"v": ((2, 2, 301, 64), KV[1])}, ValueError, "tensor v: expected shape [2, 2, 300, 64]"),
        ({"o": ((2, 8, 100, 32), O[1])}, ValueError, "tensor o: expected shape"),
        # a transposed last two axes: the head dim is not the innermost
        ({"q": ((2, 8, 100, 64), (51200, 6400, 1, 100))}, ValueError, "innermost (head-dim) stride"),
        ({"k": ((2, 2, 300, 64), (38400, 19200, 60, 1))}, ValueError, "not a multiple of 8"),
        ({"q": ((2, 8, 100, 64), (-51200, 64, 512, 1))}, ValueError, "stride -51200 is negative"),
        ({"o": ((2, 8, 100, 64), (0, 6400, 64, 1))}, ValueError, "must not overlap itself"),
        ({"q": ((2, 8, 100, 0), (0, 0, 0, 1)), "k": ((2, 2, 300, 0), (0, 0, 0, 1)),
          "v": ((2, 2, 300, 0), (0, 0, 0, 1)), "o": ((2, 8, 100, 0), (0, 0, 0, 1))}, ValueError, "head dim D=0"),
        ({"k": ((2, 3, 300, 64), (57600, 19200, 64, 1)), "v": ((2, 3, 300, 64), (57600, 19200, 64, 1))},
         ValueError, "must be at least 1 and divide"),
        ({"scale": 0.0}, ValueError, "scale 0 must be finite and non-zero"),
        ({"scale": float("nan")}, ValueError, "must be finite"),
        ({"causal": "diagonal"}, ValueError, "expected False, True, 'top-left' or 'bottom-right'"),
        ({"impl": "cutlass"}, ValueError, "unknown implementation 'cutlass'"),
        ({"config": "block_n=64"}, ValueError, "config= needs a named impl="),
        ({"impl": "wgmma", "config": "warp_speed=9"}, ValueError, "warp_speed"),
        ({"layout": "sbhd"}, ValueError, "unknown layout"),
        ({"dtypes": ("e4m3",) * 4}, TypeError, "tensor o: dtype e4m3 does not match bf16 or f16, the output dtypes"),
        ({"dtypes": ("e4m3", "e4m3", "bf16", "bf16")}, TypeError, "tensor v: dtype bf16 does not match q's e4m3"),
    ],
)
def test_bad_arguments_raise_the_librarys_message(kwargs, error, words):
    with pytest.raises(error) as caught:
        check(**kwargs)
    message = str(caught.value)
    assert message.startswith("evoattn: ") and words in message, message
    assert "panicked" not in message


def test_a_huge_size_is_an_error_not_a_crash():
    huge = ((2**62, 8, 100, 64), (51200, 64, 512, 1))
    # The library refuses any size past the kernels' 32-bit ints before counting with it.
    with pytest.raises(ValueError, match=r"is too large: the kernels take sizes up to 2\^31-1"):
        check(q=huge, o=huge, k=((2**62, 2, 300, 64), KV[1]), v=((2**62, 2, 300, 64), KV[1]))
    with pytest.raises(OverflowError):
        check(q=((2**70, 8, 100, 64), Q[1]))


def test_empty_batches_are_problems_with_nothing_to_do():
    # B = 0: like SDPA, an empty output and no launch (the library returns before launching).
    e = lambda t: ((0,) + t[0][1:], t[1])  # noqa: E731
    assert check(q=e(Q), k=e(KV), v=e(KV), o=e(O)) == (0, 8, 2, 100, 300, 64)


def test_causal_arguments_follow_each_calls_model():
    # attention(): True is SDPA's is_causal (top-left); flash_attn_func: FlashAttention's.
    from evoattn._api import causal_name

    assert causal_name(True, "top-left") == "top-left"
    assert causal_name(True, "bottom-right") == "bottom-right"
    assert causal_name(False, "top-left") == causal_name(None, "top-left") == "none"
    assert causal_name("bottom-right", "top-left") == "bottom-right"
    with pytest.raises(ValueError, match="expected False, True"):
        causal_name(1, "top-left")


def test_flash_attn_func_refuses_what_it_cannot_do_instead_of_ignoring_it():
    for kwargs, words in [
        ({"dropout_p": 0.1}, "dropout_p must be 0.0"),
        ({"window_size": (128, 0)}, "sliding-window"),
        ({"softcap": 30.0}, "softcap"),
        ({"alibi_slopes": object()}, "ALiBi"),
        ({"return_attn_probs": True}, "return_attn_probs"),
    ]:
        with pytest.raises(ValueError, match=words):
            evoattn.flash_attn_func(None, None, None, **kwargs)


def test_no_nvrtc_is_one_clear_error(monkeypatch, tmp_path):
    # Only meaningful where this process has not loaded NVRTC yet and none is installed: the
    # error names what to install. Where one is found, its version is reported instead.
    try:
        (major, minor), path = _evoattn.nvrtc()
    except evoattn.UnavailableError as e:
        assert "pip install nvidia-cuda-nvrtc" in str(e) and "EVOATTN_NVRTC" in str(e)
    else:
        assert major >= 12 and "nvrtc" in path


def test_the_package_imports_without_pytorch_and_says_what_to_install():
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="install PyTorch"):
            evoattn.attention(1, 2, 3)
    else:
        pytest.skip("PyTorch is installed here; the GPU tests cover the calls")

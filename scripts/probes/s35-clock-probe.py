"""Session 35 probe (#37): do the block-to-block jumps of a long kernel's time at the power cap
follow the SM clock? cuDNN SDPA at two fa3 rows, eager launches after a 104 MB L2 flush, blocks of
5 with a pause between blocks like the lab's; NVML's SM clock read while each block runs and
after it; prints per block: median us, clocks, us x MHz (cycles) and the clock-event reasons."""
import ctypes, statistics as st, time, torch, torch.nn.functional as F
nvml = ctypes.CDLL("libnvidia-ml.so.1")
assert nvml.nvmlInit_v2() == 0
dev = ctypes.c_void_p()
assert nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) == 0
def clock():
    mhz = ctypes.c_uint()
    assert nvml.nvmlDeviceGetClockInfo(dev, 1, ctypes.byref(mhz)) == 0  # NVML_CLOCK_SM
    return mhz.value
def reasons():
    r = ctypes.c_ulonglong()
    nvml.nvmlDeviceGetCurrentClocksEventReasons(dev, ctypes.byref(r))
    return r.value
flush = torch.empty(104 << 20, dtype=torch.uint8, device="cuda")
for (b, h, s, d) in [(2, 16, 8192, 128), (1, 16, 16384, 128)]:
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    f = lambda: F.scaled_dot_product_attention(q, k, v)
    for _ in range(3): f()
    torch.cuda.synchronize()
    print(f"== {b},{h},{s},{d}")
    rows = []
    for blk in range(16):
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(5)]
        for a, z in ev:
            flush.zero_(); a.record(); f(); z.record()
        time.sleep(0.002); mid = clock()
        torch.cuda.synchronize(); end = clock(); why = reasons()
        us = st.median(a.elapsed_time(z) * 1000 for a, z in ev)
        rows.append((us, mid))
        print(f"block {blk:2d} {us:8.1f} us  clock mid {mid} end {end} MHz  us*MHz/1e6 {us*mid/1e6:7.3f}  reasons {why:#x}")
        time.sleep(0.05 if blk % 2 else 0.2)
    t = [u for u, _ in rows]; c = [u * m for u, m in rows]
    print(f"spread of us {max(t)/min(t)-1:+.1%}, of us*MHz {max(c)/min(c)-1:+.1%}")

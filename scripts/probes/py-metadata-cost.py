"""What reading a CUDA tensor's metadata costs from Python: the attribute calls the eager path
makes per tensor against one DLPack export (`torch._C._to_dlpack`, shape, strides, data, dtype and
device in one capsule). µs per tensor, median of 15 rounds of 20k."""
import statistics, time
import torch

q = torch.randn(4, 16, 512, 64, device="cuda", dtype=torch.float16)
to_dlpack = torch._C._to_dlpack


def attrs():
    return q.shape, q.stride(), q.data_ptr(), q.dtype, q.get_device()


def dl():
    return to_dlpack(q)


key = (q.shape, q.stride(), q.shape, q.stride(), q.shape, q.stride(), q.dtype, q.dtype, q.dtype, None, 0, "bhsd",
       "none", None, False, "auto", None)
table = {key: 1}


def keyed():
    return table.get((q.shape, q.stride(), q.shape, q.stride(), q.shape, q.stride(), q.dtype, q.dtype, q.dtype, None,
                      0, "bhsd", "none", None, False, "auto", None))


def empty():
    return None


N = 20000
for name, f in [("empty call", empty), ("shape+stride+data_ptr+dtype+get_device", attrs), ("_to_dlpack", dl),
                ("key of 3 tensors + lookup", keyed), ("empty_like", lambda: torch.empty_like(q))]:
    rounds = []
    for _ in range(15):
        t = time.perf_counter()
        for _ in range(N):
            f()
        rounds.append((time.perf_counter() - t) / N * 1e6)
    print(f"{name:<40} {statistics.median(rounds):6.3f} us  (min {min(rounds):.3f})")

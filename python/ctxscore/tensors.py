"""The case's buffers as an implementation receives them: numpy arrays
(bf16 widened to float32, exactly) or torch tensors (bf16, int32, fp32) on a
device, each a strided view into its own storage, as upstream's callers pass
them."""
import numpy as np

from .fixture import widen_bf16


def torch_available():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


class Buffers:
    """Builds views of the given kind: "numpy" or "torch" (on `device`)."""

    def __init__(self, kind, device="cpu"):
        if kind not in ("numpy", "torch"):
            raise ValueError(f"tensor kind {kind!r}, expected numpy or torch")
        self.kind, self.device = kind, device
        if kind == "torch":
            import torch

            self.torch = torch

    def view(self, storage, shape, strides, dtype):
        """A view over a copy of `storage` (1-D numpy: uint16 bf16 bits, or the
        dtype itself: float16, float32, int32, int64)."""
        if self.kind == "numpy":
            base = widen_bf16(storage) if dtype == "bf16" else np.array(storage, copy=True)
            return np.lib.stride_tricks.as_strided(base, shape, [s * base.itemsize for s in strides]), base
        torch = self.torch
        if dtype == "bf16":
            base = torch.from_numpy(np.ascontiguousarray(storage).view(np.int16).copy()).view(torch.bfloat16)
        else:
            base = torch.from_numpy(np.array(storage, copy=True))
        base = base.to(self.device)
        return torch.as_strided(base, tuple(shape), tuple(strides)), base

    def storage_bits(self, base, dtype):
        """A storage back on the host in its wire dtype (bf16 as uint16 bits)."""
        if dtype != "bf16":
            return np.ascontiguousarray(self.storage_values(base))
        if self.kind == "numpy":
            return (np.asarray(base).view(np.uint32) >> 16).astype(np.uint16)
        return base.detach().view(self.torch.int16).cpu().numpy().view(np.uint16)

    def storage_values(self, base):
        """A storage back on the host as numpy (float32 or int32)."""
        if self.kind == "numpy":
            return np.asarray(base)
        return base.detach().float().cpu().numpy() if base.dtype == self.torch.bfloat16 else base.detach().cpu().numpy()

    def synchronize(self):
        if self.kind == "torch" and str(self.device).startswith("cuda"):
            self.torch.cuda.synchronize()


def to_numpy(x):
    """Whatever an implementation returned, as a float32 numpy array."""
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=np.float32)

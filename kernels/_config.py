"""Block sizes for the fused log-prob / entropy kernels (frozen, validated)."""
from __future__ import annotations

import dataclasses
from typing import Optional

# Hardware tiles: 8 sublanes x 128 lanes (TPU vregs); Triton also wants
# powers of two, which ``validate_for`` checks per implementation.
SUBLANE = 8
LANE = 128
MAX_BLOCK_N = 8192
MAX_BLOCK_V = 65536
MAX_BLOCK_H = 8192
# VMEM budget for one Pallas TPU grid step (double-buffered x/w blocks plus
# the f32 logits tile and, in the backward, an f32 [block_n, H] accumulator).
TPU_VMEM_BUDGET_BYTES = 48 * 1024 * 1024

IMPLS = ("auto", "reference", "xla", "pallas_tpu", "pallas_gpu")


def _is_pow2(x: int) -> bool:
  return x > 0 and (x & (x - 1)) == 0


@dataclasses.dataclass(frozen=True)
class BlockSizes:
  """Tile sizes of the token (``block_n``), vocab (``block_v``) and hidden
  (``block_h``, Pallas GPU only) loops.

  ``block_n`` must be a multiple of 8 and ``block_v`` of 128 (TPU sublane and
  lane tiles). N is padded up to a multiple of ``block_n``; V is not padded:
  the last vocabulary block may be ragged and its columns past V are masked to
  ``-inf`` inside the kernel. ``block_h`` must divide ``H`` for the
  Pallas GPU kernel (H is not padded). The Pallas GPU (Triton) kernel further
  needs powers of two. Blocks larger than the padded problem are clamped to it.
  """
  block_n: int = 256
  block_v: int = 1024
  block_h: int = 64

  def __post_init__(self):
    for name, align, hi in (("block_n", SUBLANE, MAX_BLOCK_N), ("block_v", LANE, MAX_BLOCK_V),
                            ("block_h", 1, MAX_BLOCK_H)):
      val = getattr(self, name)
      if isinstance(val, bool) or not isinstance(val, int):
        raise ValueError(f"BlockSizes.{name} must be an int; got {val!r}")
      if val <= 0 or val > hi:
        raise ValueError(f"BlockSizes.{name} must be in [1, {hi}]; got {val}")
      if val % align:
        raise ValueError(f"BlockSizes.{name} must be a multiple of {align}; got {val}")

  def validate_for(self, impl: str, hidden_size: int, itemsize: int = 4) -> None:
    """Implementation-specific limits; raises ``ValueError`` naming the field."""
    if impl == "pallas_gpu":
      for name in ("block_n", "block_v", "block_h"):
        val = getattr(self, name)
        if not _is_pow2(val):
          raise ValueError(f"BlockSizes.{name} must be a power of two for impl='pallas_gpu'; got {val}")
      if self.block_n < 16 or self.block_h < 16:
        raise ValueError("BlockSizes.block_n and block_h must be >= 16 for impl='pallas_gpu' "
                         f"(tl.dot minimum); got {self.block_n}, {self.block_h}")
      if hidden_size % self.block_h:
        raise ValueError(f"BlockSizes.block_h={self.block_h} does not divide the hidden size "
                         f"H={hidden_size} (required by impl='pallas_gpu')")
    if impl == "pallas_tpu":
      bn, bv, h = self.block_n, self.block_v, hidden_size
      vmem = tpu_vmem_bytes(bn, bv, h, itemsize)
      if vmem > TPU_VMEM_BUDGET_BYTES:
        raise ValueError(
            f"BlockSizes(block_n={bn}, block_v={bv}) with H={h} needs ~{vmem / 2**20:.1f} MiB of "
            f"VMEM per grid step, over the {TPU_VMEM_BUDGET_BYTES / 2**20:.0f} MiB limit of "
            "impl='pallas_tpu'; use smaller blocks")


def tpu_vmem_bytes(block_n: int, block_v: int, hidden_size: int, itemsize: int) -> int:
  """VMEM of one Pallas TPU grid step: double-buffered ``x [bn, H]`` and ``w [H, bv]``
  blocks, three f32 ``[bn, bv]`` tiles and the f32 ``dX [bn, H]`` / ``dW [H, bv]`` accumulators."""
  bn, bv, h = block_n, block_v, hidden_size
  return 2 * (bn * h + h * bv) * itemsize + 3 * bn * bv * 4 + bn * h * 4 + h * bv * 4


def default_block_sizes(impl: str, platform: str = "cpu") -> BlockSizes:
  """Per-implementation defaults for the lowering ``platform`` (``"cpu"``, ``"gpu"``
  or ``"tpu"``; only the chunked XLA path differs by platform). Tokamax uses
  b=1024, v=2048 with h=512 tiles; our TPU kernel keeps all of H resident,
  hence smaller token blocks."""
  if impl == "pallas_tpu":
    return BlockSizes(block_n=256, block_v=512)
  if impl == "pallas_gpu":
    return BlockSizes(block_n=64, block_v=128, block_h=64)
  # Chunked XLA: large tiles keep the GEMMs efficient while the
  # [block_n, block_v] f32 tile stays small next to N x V (GPUs want bigger
  # GEMMs per loop step than CPUs).
  if platform == "gpu":
    return BlockSizes(block_n=4096, block_v=8192)
  # CPU: a 1 MiB f32 tile stays in L2; measured faster than 512x2048 and
  # 1024x4096 on a 2-core host (benchmarks/logprob_bench.py).
  return BlockSizes(block_n=256, block_v=1024)


def round_up(x: int, m: int) -> int:
  return -(-x // m) * m


def resolve_blocks(blocks: Optional[BlockSizes], impl: str, n: int, v: int, h: int,
                   itemsize: int, platform: str = "cpu") -> BlockSizes:
  """Validates user blocks (or picks ``platform``'s defaults) and clamps them to the problem."""
  if blocks is None:
    blocks = default_block_sizes(impl, platform)
  elif not isinstance(blocks, BlockSizes):
    raise ValueError(f"block_sizes must be a rljax.kernels.BlockSizes or None; got {type(blocks).__name__}")
  if impl == "pallas_gpu":  # alignment rules apply to the blocks as given
    blocks.validate_for(impl, h, itemsize)
  bn = min(blocks.block_n, round_up(n, SUBLANE))
  bv = min(blocks.block_v, round_up(v, LANE))
  if impl == "pallas_gpu":  # keep powers of two after clamping
    bn = min(blocks.block_n, max(16, 1 << (max(n, 1) - 1).bit_length()))
    bv = min(blocks.block_v, max(LANE, 1 << (max(v, 1) - 1).bit_length()))
  out = dataclasses.replace(blocks, block_n=bn, block_v=bv)
  out.validate_for(impl, h, itemsize)
  return out

"""``python -m rljax.models.info PATH [--dtype bfloat16]``: load a Hugging Face checkpoint
directory with rljax and print its ModelConfig and parameter count."""
import argparse
import dataclasses
import sys


def readable_count(n: int) -> str:
  """``107,072 (0.11 M)``, ``7,615,616,512 (7.62 B)``: the exact count and a rounded one in K, M or B."""
  for unit, scale, start in (("B", 1e9, 1e9), ("M", 1e6, 1e5), ("K", 1e3, 1e3)):
    if n >= start:
      return f"{n:,} ({n / scale:.2f} {unit})"
  return f"{n:,}"


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python -m rljax.models.info", description=__doc__)
  parser.add_argument("path", help="local Hugging Face checkpoint directory (config.json + safetensors)")
  parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
  args = parser.parse_args(argv)
  from rljax.models import from_pretrained, param_count  # pylint: disable=import-outside-toplevel
  try:
    model = from_pretrained(args.path, dtype=args.dtype)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  cfg = model.cfg
  print(f"checkpoint: {args.path}")
  print(f"architecture: {cfg.architecture}")
  for f in dataclasses.fields(cfg):
    print(f"  {f.name} = {getattr(cfg, f.name)!r}")
  n = param_count(model)
  print(f"parameters: {readable_count(n)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

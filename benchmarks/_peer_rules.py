"""How we compare: the rules every benchmark that runs a peer (TRL, transformers ``generate``, Tunix, verl) follows.

The rules are written once, in docs/benchmarks.md ("How we compare"); this module is their code:

* the peer's thread count defaults to the machine's cores (:func:`core_count`: the CPUs this process may run on);
  another count only by an explicit flag, or by an ``auto`` probe that runs only on a quiet machine and prints
  each probe's time with the load average at the time (:func:`probe_allowed`, :func:`probe_line`);
* the 1-min load average is read at the start (:class:`LoadGuard`); above the core count the report header says
  so and no ratio is printed unless ``--allow-load`` is given (raw times always are);
* a peer venv without the peer stops the benchmark before it prints anything else, with one line naming the
  command that makes the venv (:func:`require_peer`, :data:`INSTALL`).

Benchmarks import it as ``import _peer_rules`` (``python benchmarks/x.py`` puts ``benchmarks/`` on the path).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess

# the commands that make each peer's throwaway venv (peers are never rljax dependencies); the versions are those
# the published figures used (docs/benchmarks.md); ``{venv}``: the venv of the ``--*-python`` given
INSTALL = {
    "trl": "python3 -m venv {venv} && {venv}/bin/pip install torch==2.13.0 trl transformers accelerate gguf",
    "tunix": "python3 -m venv {venv} && {venv}/bin/pip install google-tunix",
    "verl": "python3 -m venv {venv} && {venv}/bin/pip install torch==2.13.0 && {venv}/bin/pip install --no-deps "
            "verl==0.9.1 && {venv}/bin/pip install \"transformers>=5.5.3,<5.11\" omegaconf ray codetiming "
            "\"tensordict>=0.8,<=0.10,!=0.9.0\" pyvers",
}
# what each peer venv must import (transformers' generate runs in the TRL venv)
IMPORTS = {"trl": ("torch", "transformers", "trl"), "tunix": ("tunix",), "verl": ("torch", "verl")}

ALLOW_LOAD_HELP = ("print the ratios even when the 1-min load average at the start is above the core count "
                   "(raw times are printed either way)")


def core_count() -> int:
  """The CPUs this process may run on (its affinity mask where the OS has one, else ``os.cpu_count()``)."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # no affinity masks (macOS)
    return os.cpu_count() or 1


def cpu_line() -> str:
  """The CPU this runs on and its bfloat16 matmul units (a peer's bfloat16 row depends on them: torch uses AMX /
  AVX512-BF16 where the CPU has them), from /proc/cpuinfo; the processor name alone elsewhere."""
  try:
    with open("/proc/cpuinfo") as f:
      info = f.read()
  except OSError:
    import platform  # pylint: disable=import-outside-toplevel
    return f"CPU {platform.processor() or 'unknown'}"
  field = lambda key: next((ln.split(":", 1)[1].strip() for ln in info.splitlines()
                            if ":" in ln and ln.split(":", 1)[0].strip() == key), "?")
  flags = set(field("flags").split())
  units = [u for u in ("amx_bf16", "avx512_bf16", "avx512f", "avx2") if u in flags]
  return (f"CPU {field('model name')} (family {field('cpu family')}, model {field('model')}); "
          f"SIMD/matrix units: {', '.join(units) or 'none of amx_bf16, avx512_bf16, avx512f, avx2'}")


def load_average() -> float:
  """The 1-min load average."""
  return os.getloadavg()[0]


@dataclasses.dataclass(frozen=True)
class LoadGuard:
  """The machine's load at a benchmark's start against its cores; decides whether ratios may be printed.

  ``loaded`` is ``load > cores`` (more runnable threads than cores: every timing is shared with someone else).
  """
  load: float
  cores: int
  allow_load: bool = False

  @classmethod
  def now(cls, allow_load: bool = False) -> "LoadGuard":
    return cls(load=load_average(), cores=core_count(), allow_load=allow_load)

  @property
  def loaded(self) -> bool:
    return self.load > self.cores

  @property
  def ratios_allowed(self) -> bool:
    return not self.loaded or self.allow_load

  def header(self) -> str:
    """The report header's line about the load."""
    head = f"load average {self.load:.2f} at start, {self.cores} cores"
    if not self.loaded:
      return head + ": a quiet machine\n" + cpu_line()
    if self.allow_load:
      return (f"LOADED MACHINE: {head} (load above the core count); ratios printed anyway (--allow-load), "
              "not for publication\n" + cpu_line())
    return (f"LOADED MACHINE: {head} (load above the core count); raw times only, no ratios "
            "(--allow-load prints them)\n" + cpu_line())

  def ratio(self, value: float, fmt: str = "{:.2f}x") -> str:
    """``value`` formatted with ``fmt``, or a placeholder saying why it is withheld."""
    return fmt.format(value) if self.ratios_allowed else "(ratio withheld: loaded machine)"


def add_rules_args(ap: argparse.ArgumentParser) -> None:
  """``--allow-load`` (every peer benchmark has it)."""
  ap.add_argument("--allow-load", action="store_true", help=ALLOW_LOAD_HELP)


def threads_flag(ap: argparse.ArgumentParser, flag: str, peer: str, auto: bool = False) -> None:
  """A peer thread-count flag whose default is :func:`core_count` (``auto``: also accepts ``auto``, a probe)."""
  n = core_count()
  what = f"torch threads of {peer} (default: this machine's {n} cores"
  what += ("; auto: one probe at 1, half and all the cores, printed with the load average, quiet machine only; "
           "on a loaded one the cores)") if auto else ")"
  ap.add_argument(flag, default=str(n) if auto else n, type=str if auto else int, help=what)


def probe_allowed(guard: LoadGuard) -> bool:
  """An ``auto`` thread probe runs only on a quiet machine (a probe under load chose 1 thread for TRL once, where 2
  are faster on a quiet one)."""
  return not guard.loaded


def probe_counts() -> list:
  """The thread counts an ``auto`` probe tries: 1, half the cores and all of them."""
  n = core_count()
  return sorted({1, max(1, n // 2), n})


def probe_line(peer: str, times: dict, chosen: int, unit: str = "s") -> str:
  """One printed line per probe: each count's time and the load average now."""
  return (f"{peer} thread probe (load average {load_average():.2f}, {core_count()} cores): "
          + ", ".join(f"{t} thread(s) {v:.2f} {unit}" for t, v in times.items()) + f"; using {chosen}")


def missing_peer(python: str, peer: str) -> str | None:
  """``None`` if ``python`` runs and imports the peer's modules; else the one line to print: what is missing and
  the command that makes the venv."""
  mods = IMPORTS[peer]
  if not os.path.exists(python):
    why = f"{python} not found"
  else:
    try:
      proc = subprocess.run([python, "-c", "import " + ", ".join(mods)], capture_output=True, text=True,
                            timeout=300, check=False, env={k: v for k, v in os.environ.items()
                                                            if k not in ("PYTHONPATH", "XLA_FLAGS")})
      ok = proc.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
      ok = False
    if ok:
      return None
    why = f"{python} cannot import {', '.join(mods)}"
  venv = os.path.dirname(os.path.dirname(os.path.abspath(python)))
  return f"no {peer} peer: {why}; make its venv with: {INSTALL[peer].format(venv=venv)}"


def require_peer(python: str, peer: str) -> None:
  """Stops the benchmark (exit code 1, the line on stderr, nothing else printed) if the peer venv lacks the peer."""
  line = missing_peer(python, peer)
  if line:
    raise SystemExit(line)

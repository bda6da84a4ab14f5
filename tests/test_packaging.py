"""`kernels/` ships as `rljax.kernels`, never as a top-level `kernels` package."""
import os
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_wheel_maps_kernels_into_rljax(tmp_path):
  proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                         "-w", str(tmp_path), ROOT], capture_output=True, text=True, timeout=300)
  if proc.returncode != 0:
    pytest.fail(proc.stderr[-2000:])
  (wheel,) = [f for f in os.listdir(tmp_path) if f.endswith(".whl")]
  names = zipfile.ZipFile(tmp_path / wheel).namelist()
  assert "rljax/kernels/__init__.py" in names
  assert not any(n.startswith("kernels/") for n in names)
  assert "rljax/types.py" in names


def test_installed_package_imports_kernels_as_subpackage():
  import rljax.kernels
  assert os.path.basename(os.path.dirname(rljax.kernels.__file__)) == "kernels"
  assert hasattr(rljax.kernels, "logprob_and_entropy")


def test_no_top_level_kernels_package_on_the_path():
  # transformers probes for Hugging Face's `kernels` package; ours must not shadow it.
  import importlib.util
  spec = importlib.util.find_spec("kernels")
  assert spec is None or os.path.dirname(spec.origin) != os.path.join(ROOT, "kernels")

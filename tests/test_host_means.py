"""``rljax.train._experiment.host_means``: the per-key means of an RL step's update metrics, computed on the host."""
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from rljax.train._experiment import host_means


def test_host_means_are_float32_means_of_each_key_on_replicated_arrays():
  """Three updates' metrics, replicated over two devices as the update's outputs are: each key's float32 mean
  (a float32 reduction of the values, then the float), an integer count included; every key kept."""
  mesh = Mesh(np.array(jax.devices()[:2]), ("fsdp",))
  rep = NamedSharding(mesh, PartitionSpec())
  rng = np.random.default_rng(0)
  values = {"loss": rng.normal(size=3).astype(np.float32) * 1e3, "clip_frac": rng.random(3).astype(np.float32),
            "num_skipped": np.array([0, 1, 3], np.int32)}
  metrics = [{k: jax.device_put(v[i], rep) for k, v in values.items()} for i in range(3)]
  got = host_means(metrics)
  assert sorted(got) == sorted(values)
  for k, v in values.items():
    want = (np.float32(v[0]) + np.float32(v[1]) + np.float32(v[2])) / np.float32(3)  # float32 arithmetic
    assert isinstance(got[k], float) and got[k] == float(want), (k, got[k], want)
  one = host_means(metrics[:1])  # one update: the values themselves
  assert one == {k: float(np.float32(v[0])) for k, v in values.items()}
  with jax.enable_x64(True):  # a float64 metric is averaged in float64, not cast to float32
    x = np.array([0.1, 0.2, 0.4])
    got64 = host_means([{"kl": jax.device_put(np.float64(v), rep)} for v in x])["kl"]
  assert got64 == (0.1 + 0.2 + 0.4) / 3 and got64 != float((np.float32(0.1) + np.float32(0.2) + np.float32(0.4)) / 3)

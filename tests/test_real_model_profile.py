"""The trace arithmetic of ``benchmarks/real_model_profile.py`` (the profile itself takes minutes on the real
model: ``python benchmarks/real_model_profile.py``)."""
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def profile():
  spec = importlib.util.spec_from_file_location("real_model_profile", ROOT / "benchmarks" / "real_model_profile.py")
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def _ev(name, ts, dur):
  return {"name": name, "ts": ts, "dur": dur, "ph": "X"}


def test_wall_shares_split_overlaps_and_label_idle_time(profile):
  # window [0, 100): D starts before it (clipped), A and D then A and B overlap, a gap after B, C, a gap after C
  events = [_ev("copy.2", -10, 15), _ev("ynn_fusion.1", 0, 40), _ev("add_fusion", 20, 40), _ev("dot.3", 70, 10),
            _ev("ynn_fusion.9", 120, 5)]  # after the window: ignored
  shares = profile.wall_shares(events, (0, 100), lambda e: profile.thunk_kind(e["name"]))
  # by hand: [0,5) A|D shared, [5,20) A, [20,40) A|B shared, [40,60) B, [60,70) idle after B, [70,80) C,
  # [80,100) idle after the dot C
  assert dict(shares) == pytest.approx({"matmul": 2.5 + 15 + 10 + 10, "copy": 2.5, "elementwise": 10 + 20,
                                        "no thunk": 10, "no thunk, after a dot": 20})
  assert sum(shares.values()) == pytest.approx(100)


def test_wall_shares_of_an_empty_window_is_idle(profile):
  assert dict(profile.wall_shares([], (5, 25), lambda e: "x")) == {"no thunk": 20}


def test_hlo_origin_and_op_names(profile):
  text = "\n".join([
      '  %ynn_fusion.5 = f32[2]{0} fusion(%a), kind=kCustom, metadata={op_name="jit(step)/while/body/'
      'transpose(jvp(logprob_and_entropy))/dot_general" stack_frame_id=1}',
      '  ROOT %add.1 = f32[] add(%x, %y)',
      '  %dot.7 = f32[4,4]{1,0} dot(%p, %q), metadata={op_name="jit(step)/while/body/transpose(jvp())/transpose"}',
  ])
  names = profile.hlo_op_names(text)
  assert names == {"ynn_fusion.5": "jit(step)/while/body/transpose(jvp(logprob_and_entropy))/dot_general",
                   "add.1": "", "dot.7": "jit(step)/while/body/transpose(jvp())/transpose"}
  assert [profile.hlo_origin(n) for n in names.values()] == ["log-prob head", "other", "backward"]
  assert profile.hlo_origin("jit(step)/optimizer/cond/add") == "optimizer"
  assert profile.hlo_origin("jit(step)/while/body/closed_call/jvp()/dot_general") == "forward"
  assert [profile.thunk_kind(n) for n in ("ynn_fusion.3", "dot.4", "wrapped_copy.1", "transpose.2", "add_fusion")] == [
      "matmul", "matmul", "copy", "copy", "elementwise"]


def test_log_prob_head_ops_carry_their_scope_forward_and_backward(profile):
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from rljax.kernels import logprob_and_entropy  # pylint: disable=import-outside-toplevel

  def loss(x, w):
    logp, ent = logprob_and_entropy(x, w, jnp.zeros((8,), jnp.int32), impl="xla")
    return logp.sum() + ent.sum()
  x, w = jnp.ones((8, 16)), jnp.ones((16, 256))
  names = profile.hlo_op_names(jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, w).compile().as_text()).values()
  dots = [n for n in names if n.endswith("dot_general")]
  assert any("transpose(jvp(logprob_and_entropy))" in n for n in dots)  # the backward's tiles
  assert {profile.hlo_origin(n) for n in dots} == {"log-prob head"}

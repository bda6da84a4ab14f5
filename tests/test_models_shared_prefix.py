"""``policy_outputs(shared_prefix_len=Tp, group_size=G)``: each group's prompt run once.

Invariant tested: the grouped layout gives the same log-probs, entropies and
parameter gradients as the ordinary call on the same ``[B, T]`` tokens (float32,
only the summation order differs), across GQA, sliding-window layers (window
shorter than the prompt), soft-capping, sandwich norms and QK-norm, remat,
and a train step. A grouped row whose prompts differ is *not* equal (the test
that shows the comparison can fail).
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from rljax import objectives as obj
from rljax.models import ModelConfig, PrefixGroups, Transformer, policy_outputs
from rljax.train import init_train_state, make_train_step, objective_loss
from rljax.types import TrainBatch

DENSE = ModelConfig(vocab_size=61, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8,
                    intermediate_size=64)
GEMMA2_LIKE = dataclasses.replace(
    DENSE, num_layers=3, layer_types=("sliding_attention", "full_attention", "sliding_attention"),
    sliding_window=4, attn_logit_softcap=20.0, final_logit_softcap=15.0, sandwich_norm=True, qk_norm=True)


def _tokens(b, g, t, tp, vocab, seed=1, common=0):
  """``[B, T]`` random tokens whose groups of ``g`` rows share ``tp`` prompt tokens, of which all rows share
  the first ``common``."""
  rng = np.random.default_rng(seed)
  tok = rng.integers(0, vocab, (b, t))
  tok[:, :tp] = np.repeat(rng.integers(0, vocab, (b // g, tp)), g, 0)
  tok[:, :common] = tok[0, :common]
  return jnp.asarray(tok, jnp.int32)


def _outputs_and_grads(cfg, tok, tp, g, weights, common=0):
  model = Transformer(cfg, rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(model)

  def run(st, shared):
    kw = dict(shared_prefix_len=tp, group_size=g, common_prefix_len=common) if shared else {}
    return policy_outputs(nnx.merge(graphdef, st), tok, **kw)

  def loss(st, shared):
    out = run(st, shared)
    return jnp.sum(out.logp * weights) + 0.3 * jnp.sum(out.entropy * weights)

  res = {}
  for shared in (False, True):
    out = jax.jit(run, static_argnums=1)(state, shared)
    grads = jax.jit(jax.grad(loss), static_argnums=1)(state, shared)
    res[shared] = (out, grads)
  return res


@pytest.mark.parametrize("cfg", [pytest.param(DENSE, marks=pytest.mark.long), pytest.param(GEMMA2_LIKE, marks=pytest.mark.long),
                                 dataclasses.replace(DENSE, remat="full")],
                         ids=["dense_gqa", "sliding_softcap_sandwich_qknorm", "remat"])
def test_shared_prefix_equals_per_row(cfg):
  b, g, t, tp = 6, 3, 13, 5
  tok = _tokens(b, g, t, tp, cfg.vocab_size)
  w = jnp.asarray(np.random.default_rng(2).normal(size=(b, t)), jnp.float32)
  res = _outputs_and_grads(cfg, tok, tp, g, w)
  (o0, g0), (o1, g1) = res[False], res[True]
  np.testing.assert_allclose(o1.logp, o0.logp, rtol=1e-5, atol=2e-6)
  np.testing.assert_allclose(o1.entropy, o0.entropy, rtol=1e-5, atol=2e-6)
  assert np.all(np.asarray(o1.logp[:, 0]) == 0)
  for a, c in zip(jax.tree.leaves(g0), jax.tree.leaves(g1)):
    scale = float(jnp.max(jnp.abs(a))) + 1e-12
    assert float(jnp.max(jnp.abs(a - c))) / scale < 1e-5


@pytest.mark.parametrize("cfg,common", [pytest.param(DENSE, 1, marks=pytest.mark.long),
                                        pytest.param(DENSE, 4, marks=pytest.mark.long), (GEMMA2_LIKE, 3),
                                        pytest.param(dataclasses.replace(DENSE, scan_layers=True), 2,
                                                     marks=pytest.mark.long)],
                         ids=["dense_c1", "dense_c4", "sliding_window_across_blocks", "scanned"])
def test_common_prefix_equals_per_row(cfg, common):
  """``common_prefix_len``: the batch's common tokens run once, each group's prompt tail once per group; the
  log-probs, entropies and gradients equal the per-row call's (a window of 4 crosses the common / prompt /
  continuation blocks; prompt scores on, so the common columns' scores are checked too)."""
  b, g, t, tp = 6, 3, 13, 5
  tok = _tokens(b, g, t, tp, cfg.vocab_size, seed=7, common=common)
  w = jnp.asarray(np.random.default_rng(8).normal(size=(b, t)), jnp.float32)
  res = _outputs_and_grads(cfg, tok, tp, g, w, common=common)
  (o0, g0), (o1, g1) = res[False], res[True]
  np.testing.assert_allclose(o1.logp, o0.logp, rtol=1e-5, atol=2e-6)
  np.testing.assert_allclose(o1.entropy, o0.entropy, rtol=1e-5, atol=2e-6)
  for a, c in zip(jax.tree.leaves(g0), jax.tree.leaves(g1)):
    scale = float(jnp.max(jnp.abs(a))) + 1e-12
    assert float(jnp.max(jnp.abs(a - c))) / scale < 1e-5


@pytest.mark.long
def test_common_prefix_detects_different_rows():
  """A row whose first tokens differ from row 0's: the common-prefix call reads row 0's, so that row (and only
  the rows of its group, whose prompt tail attends the common keys) differ from the per-row call."""
  b, g, t, tp, c = 4, 2, 9, 4, 2
  tok = np.array(_tokens(b, g, t, tp, DENSE.vocab_size, seed=9, common=c))
  tok[2:4, 1] = (tok[2:4, 1] + 1) % DENSE.vocab_size  # group 1 (rows 2-3) no longer shares token 1
  model = Transformer(DENSE, rngs=nnx.Rngs(0))
  a = policy_outputs(model, jnp.asarray(tok))
  d = policy_outputs(model, jnp.asarray(tok), shared_prefix_len=tp, group_size=g, common_prefix_len=c)
  assert float(jnp.max(jnp.abs(a.logp[2:] - d.logp[2:]))) > 1e-3
  np.testing.assert_allclose(d.logp[:2], a.logp[:2], rtol=1e-5, atol=2e-6)


def test_prompt_scores_off_scores_only_the_continuations():
  """``prompt_scores=False``: the continuation columns and the gradient of a loss on them equal the default call's;
  the shared prompt's columns are 0 (their LM-head rows are skipped)."""
  b, g, t, tp = 6, 3, 11, 5
  tok = _tokens(b, g, t, tp, DENSE.vocab_size, seed=5)
  model = Transformer(DENSE, rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(model)
  weights = jnp.asarray(np.random.default_rng(6).normal(size=(b, t)) * (np.arange(t) >= tp), jnp.float32)

  def loss(st, scores):
    out = policy_outputs(nnx.merge(graphdef, st), tok, shared_prefix_len=tp, group_size=g, prompt_scores=scores)
    return jnp.sum(out.logp * weights) + 0.3 * jnp.sum(out.entropy * weights), out

  (l_on, on), g_on = jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=1)(state, True)
  (l_off, off), g_off = jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=1)(state, False)
  np.testing.assert_allclose(off.logp[:, tp:], on.logp[:, tp:], rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(off.entropy[:, tp:], on.entropy[:, tp:], rtol=1e-6, atol=1e-6)
  assert np.all(np.asarray(off.logp[:, :tp]) == 0) and np.all(np.asarray(off.entropy[:, :tp]) == 0)
  assert np.all(np.abs(np.asarray(on.logp[:, 1:tp])) > 0)  # the default call does score the prompt
  assert float(l_off) == pytest.approx(float(l_on), rel=1e-6)
  for a, c in zip(jax.tree.leaves(g_on), jax.tree.leaves(g_off)):
    scale = float(jnp.max(jnp.abs(a))) + 1e-12
    assert float(jnp.max(jnp.abs(a - c))) / scale < 1e-5


@pytest.mark.long  # ~12 s: the fast suite keeps the equality tests and the batch check (_check_shared_prefix)
def test_shared_prefix_detects_different_prompts():
  """Rows of a group with different prompts: the grouped call uses the group's first prompt, so it differs."""
  b, g, t, tp = 4, 2, 9, 4
  tok = np.array(_tokens(b, g, t, tp, DENSE.vocab_size))
  tok[1, 2] = (tok[1, 2] + 1) % DENSE.vocab_size  # row 1's prompt no longer equals row 0's
  model = Transformer(DENSE, rngs=nnx.Rngs(0))
  a = policy_outputs(model, jnp.asarray(tok))
  c = policy_outputs(model, jnp.asarray(tok), shared_prefix_len=tp, group_size=g)
  assert float(jnp.max(jnp.abs(a.logp[1] - c.logp[1]))) > 1e-3
  np.testing.assert_allclose(c.logp[0], a.logp[0], rtol=1e-5, atol=2e-6)  # untouched rows still agree


@pytest.mark.long
def test_shared_prefix_train_step_matches():
  """One GRPO update (2 micro-batches) with the grouped forward = the per-row update.

  Plain SGD makes the parameter change ``-lr * gradient``, so the comparison is on the
  gradient (not on Adam's sign-like normalisation of tiny entries); the large lr keeps
  the change far above the float32 spacing of the parameters it is added to.
  """
  b, g, t, tp = 8, 4, 12, 5
  tok = _tokens(b, g, t, tp, DENSE.vocab_size, seed=3, common=2)
  rng = np.random.default_rng(4)
  mask = jnp.asarray(np.arange(t)[None, :] >= tp).repeat(b, 0)
  adv = jnp.asarray(rng.normal(size=(b, 1)), jnp.float32) * mask
  batch = TrainBatch(tokens=tok, loss_mask=mask, advantages=adv, group_id=jnp.repeat(jnp.arange(b // g), g),
                     logp_behavior=jnp.asarray(-rng.random((b, t)), jnp.float32) * mask)
  deltas, losses = {}, {}
  for tp_used, common in ((0, 0), (tp, 0), (tp, 2)):  # per row, per group, and the common 2 tokens per batch
    opt = optax.sgd(1e4)
    graphdef, state = init_train_state(Transformer(DENSE, rngs=nnx.Rngs(0)), opt, {})
    old = jax.tree.map(np.asarray, state.params)
    loss = objective_loss(obj.chain(obj.ppo_clip(0.2, 0.2), aggregate=obj.token_mean),
                          shared_prefix_len=tp_used, group_size=g, common_prefix_len=common)
    state, metrics = make_train_step(graphdef, loss, opt, num_microbatches=2, donate=False)(state, batch)
    deltas[tp_used, common] = jax.tree.map(lambda n, o: np.asarray(n) - o, state.params, old)
    losses[tp_used, common] = float(metrics["loss"])
  for shared in ((tp, 0), (tp, 2)):
    assert abs(losses[0, 0] - losses[shared]) < 1e-6
    for a, c in zip(jax.tree.leaves(deltas[0, 0]), jax.tree.leaves(deltas[shared])):
      assert np.max(np.abs(a)) > 0
      assert np.max(np.abs(a - c)) / np.max(np.abs(a)) < 1e-5


def test_shared_prefix_bad_input():
  model = Transformer(DENSE, rngs=nnx.Rngs(0))
  tok = _tokens(6, 3, 10, 4, DENSE.vocab_size)
  with pytest.raises(ValueError, match="shared_prefix_len"):
    policy_outputs(model, tok, shared_prefix_len=10, group_size=3)
  with pytest.raises(ValueError, match="group_size"):
    policy_outputs(model, tok, shared_prefix_len=4, group_size=4)
  with pytest.raises(ValueError, match="segment_ids"):
    policy_outputs(model, tok, shared_prefix_len=4, group_size=3, segment_ids=jnp.ones_like(tok))
  with pytest.raises(ValueError, match="not prefix_len"):
    model(tok[:2], jnp.zeros((2, 10), jnp.int32), prefix_groups=PrefixGroups(4, 4))
  with pytest.raises(ValueError, match="explicit positions"):
    model(tok[:2], prefix_groups=PrefixGroups(4, 3))
  with pytest.raises(ValueError, match="common_prefix_len"):
    policy_outputs(model, tok, shared_prefix_len=4, group_size=3, common_prefix_len=4)
  with pytest.raises(ValueError, match="needs shared_prefix_len"):
    policy_outputs(model, tok, common_prefix_len=2)
  with pytest.raises(ValueError, match="one row"):
    model(tok[:2], jnp.zeros((2, 10), jnp.int32), prefix_groups=PrefixGroups(1, 1, common_len=2, num_groups=2))
  with pytest.raises(ValueError, match="num_groups=3"):
    model(tok[:1], jnp.zeros((1, 10), jnp.int32), prefix_groups=PrefixGroups(1, 1, common_len=2, num_groups=3))
  moe = ModelConfig(vocab_size=61, hidden_size=32, num_layers=1, num_heads=4, num_kv_heads=2, head_dim=8,
                    intermediate_size=64, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16)
  with pytest.raises(ValueError, match="MoE"):
    policy_outputs(Transformer(moe, rngs=nnx.Rngs(0)), tok, shared_prefix_len=4, group_size=3)


def test_rl_loop_shares_prompt_only_when_groups_stay_whole():
  from types import SimpleNamespace  # pylint: disable=import-outside-toplevel

  from rljax.train import RLConfig  # pylint: disable=import-outside-toplevel
  from rljax.train._rl import _check_shared_prefix, _shared_prompt_len  # pylint: disable=import-outside-toplevel
  prompts = [[1] * 16, [2] * 14, [3] * 15]  # the shortest training prompt (14 tokens) is what groups share
  exp = SimpleNamespace(cfg=SimpleNamespace(progress=None), seq_len=20, train_problems=prompts,
                        codec=SimpleNamespace(prompt_ids=list))
  base = dict(num_prompts=4, group_size=4, max_new_tokens=6)  # rollout batch 16 rows
  assert _shared_prompt_len(exp, RLConfig(**base)) == 14
  assert _shared_prompt_len(exp, RLConfig(**base, share_prompt_forward=False)) == 0
  assert _shared_prompt_len(exp, RLConfig(**base, num_minibatches=2)) == 0  # rows are shuffled into mini-batches
  assert _shared_prompt_len(exp, RLConfig(**base, num_microbatches=8)) == 0  # 2-row micro-batches split groups
  assert _shared_prompt_len(exp, RLConfig(**base, num_microbatches=2)) == 14
  # the length build_experiment counted is read, not counted again (no codec needed)
  counted = SimpleNamespace(cfg=exp.cfg, seq_len=20, train_problems=prompts, codec=None, shortest_train_prompt=12)
  assert _shared_prompt_len(counted, RLConfig(**base)) == 12
  tok = np.zeros((8, 20), np.int32)
  tok[:, 14:] = np.arange(8)[:, None]  # continuations differ, prompts agree
  _check_shared_prefix(tok, 14, 4)
  tok[5, 3] = 1  # a row of the second group with a different prompt token
  with pytest.raises(ValueError, match="share_prompt_forward"):
    _check_shared_prefix(tok, 14, 4)


def test_rl_loop_common_prompt_len():
  """The tokens every training prompt starts with, at most the shared length - 1, on a one-device mesh only;
  the batch check refuses rows that differ there."""
  from types import SimpleNamespace  # pylint: disable=import-outside-toplevel

  from rljax.train._experiment import common_prompt_prefix  # pylint: disable=import-outside-toplevel
  from rljax.train._rl import _check_shared_prefix, _common_prompt_len  # pylint: disable=import-outside-toplevel
  prompts = [[5, 6, 7, 1, 1], [5, 6, 8, 2], [5, 6, 7, 3, 3, 3]]
  assert common_prompt_prefix(prompts) == (5, 6)
  assert common_prompt_prefix([[5, 6, 7], [5, 6, 7, 8]]) == (5, 6)  # the shortest keeps a token of its own
  assert common_prompt_prefix([[1, 2], [3, 2]]) == () and common_prompt_prefix([[4], [4, 1]]) == ()
  one, two = SimpleNamespace(devices=np.zeros((1, 1))), SimpleNamespace(devices=np.zeros((2, 1)))
  exp = SimpleNamespace(sampler_config=SimpleNamespace(common_prefix=common_prompt_prefix(prompts)))
  assert _common_prompt_len(exp, 4, one) == 2  # [5, 6]
  assert _common_prompt_len(exp, 2, one) == 1  # leaves each group at least one column of its own
  assert _common_prompt_len(exp, 1, one) == 0 and _common_prompt_len(exp, 0, one) == 0
  assert _common_prompt_len(exp, 4, two) == 0  # the one-row layout is not sharded over devices
  tok = np.tile(np.array([5, 6, 7, 1, 9, 9], np.int32), (4, 1))
  tok[2:, 2:4] = [8, 2]  # groups of 2 rows: group 1 has another prompt after the common [5, 6]
  _check_shared_prefix(tok, 4, 2, 2)
  with pytest.raises(ValueError, match="first 3 tokens"):
    _check_shared_prefix(tok, 4, 2, 3)


@pytest.mark.long
def test_rl_loop_rollouts_share_their_prompt_prefix():
  """On real rollouts of the demo task (completions start right after the prompt), the loop's shared length is
  the shortest prompt, the rows are the longest prompt plus the new tokens wide, and the grouped forward equals
  the per-row one."""
  from rljax.train import RunConfig, tiny_config  # pylint: disable=import-outside-toplevel
  from rljax.train._experiment import build_experiment  # pylint: disable=import-outside-toplevel
  from rljax.train._rl import _check_shared_prefix, _shared_prompt_len  # pylint: disable=import-outside-toplevel
  cfg = tiny_config()
  cfg = cfg.replace(task=dataclasses.replace(cfg.task, digits=RunConfig().task.digits))  # the demo's prompts
  exp = build_experiment(cfg)
  tp, g = _shared_prompt_len(exp, cfg.rl), cfg.rl.group_size
  assert tp >= 1
  lengths = {len(exp.codec.prompt_ids(p)) for p in exp.train_problems}
  assert min(lengths) == tp <= max(lengths) == exp.seq_len - cfg.rl.max_new_tokens
  graphdef, params, rest = nnx.split(exp.model, nnx.Param, ...)
  problems = sorted(exp.train_problems[:64], key=lambda p: len(exp.codec.prompt_ids(p)))[-4:]  # long prompts
  r = exp.sample_fn(graphdef, params, rest)([exp.codec.prompt_ids(p) for p in problems], n=g, greedy=False,
                                             temperature=1.0, key=jax.random.PRNGKey(0))
  tok = np.asarray(r.tokens)
  _check_shared_prefix(tok, tp, g)
  a = policy_outputs(exp.model, jnp.asarray(tok))
  c = policy_outputs(exp.model, jnp.asarray(tok), shared_prefix_len=tp, group_size=g)
  np.testing.assert_allclose(c.logp, a.logp, rtol=1e-5, atol=2e-6)
  np.testing.assert_allclose(c.entropy, a.entropy, rtol=1e-5, atol=2e-6)


@dataclasses.dataclass(frozen=True)
class _FewShotEcho:
  """A one-turn environment whose opening is a fixed few-shot preamble and the problem's own short prompt (as
  configs/gemma3_sequences.py's): the update shares the whole opening per group, and the preamble per batch."""
  stop_strings: tuple = ("\n",)
  max_turns: int = 1

  def problems(self, split, num, seed):
    from rljax.envs import Problem  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng([seed, split == "test"])
    return [Problem(prompt=str(int(k)), answer=str(int(k)), meta={}) for k in rng.integers(1, 10 ** 4, size=num)]

  def reset(self, problem, seed):
    del seed
    return problem.answer, "say 12: 12\nsay 345: 345\nsay " + problem.prompt + ":"

  def step(self, answer, action):
    from rljax.envs import StepResult  # pylint: disable=import-outside-toplevel
    return StepResult(answer, "", float(action.strip() == answer), True)


def _few_shot_echo():
  return _FewShotEcho()


def test_an_environments_openings_are_what_the_update_shares():
  """For ``task.name=env`` the shared columns are counted over every training problem's opening context (the
  env's ``reset``), not its ``prompt`` field: the shortest opening per group, the common preamble per batch; real
  episodes satisfy the shared-prompt check at those lengths, and the grouped forward equals the per-row one."""
  from types import SimpleNamespace  # pylint: disable=import-outside-toplevel

  from rljax.envs import start  # pylint: disable=import-outside-toplevel
  from rljax.train import TaskConfig, tiny_config  # pylint: disable=import-outside-toplevel
  from rljax.train._experiment import build_experiment, common_prompt_prefix  # pylint: disable=import-outside-toplevel
  from rljax.train._rl import (_check_shared_prefix, _common_prompt_len,  # pylint: disable=import-outside-toplevel
                                _shared_prompt_len)
  cfg = tiny_config()
  cfg = cfg.replace(task=TaskConfig(name="env", env=_few_shot_echo, num_train=40, num_test=4, max_obs_tokens=8),
                    sft=dataclasses.replace(cfg.sft, steps=0),
                    rl=dataclasses.replace(cfg.rl, num_prompts=2, group_size=3, max_new_tokens=4))
  exp = build_experiment(cfg)
  openings = [exp.codec.prompt_ids(start(exp.task.env, exp.task.env_problem(p), exp.task.seed(p)).context)
              for p in exp.train_problems]
  own = max(len(exp.codec.prompt_ids(p.prompt)) for p in exp.train_problems)
  assert exp.shortest_train_prompt == min(len(ids) for ids in openings) > own  # the opening, not the prompt field
  assert exp.common_train_prefix == len(common_prompt_prefix(openings)) >= len("say 12: 12\nsay 345: 345\nsay ")
  tp, g = _shared_prompt_len(exp, cfg.rl), cfg.rl.group_size
  common = _common_prompt_len(exp, tp, SimpleNamespace(devices=np.zeros((1, 1))))
  assert tp == exp.shortest_train_prompt and common == exp.common_train_prefix
  graphdef, params, rest = nnx.split(exp.model, nnx.Param, ...)
  problems = sorted(exp.train_problems, key=lambda p: len(p.prompt))[:1] + exp.train_problems[:1]
  tok = np.asarray(exp.episode_fn(graphdef, params, rest)(problems, n=g, greedy=False, temperature=1.0,
                                                            key=jax.random.PRNGKey(0)).tokens)
  _check_shared_prefix(tok, tp, g, common)
  a = policy_outputs(exp.model, jnp.asarray(tok))
  c = policy_outputs(exp.model, jnp.asarray(tok), shared_prefix_len=tp, group_size=g, common_prefix_len=common)
  np.testing.assert_allclose(c.logp, a.logp, rtol=1e-5, atol=2e-6)
  np.testing.assert_allclose(c.entropy, a.entropy, rtol=1e-5, atol=2e-6)
  off = build_experiment(cfg.replace(rl=dataclasses.replace(cfg.rl, share_prompt_forward=False)))
  assert off.shortest_train_prompt is None and off.common_train_prefix is None  # nothing started for it

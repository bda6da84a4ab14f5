"""The stages of one RL step and their calling conventions: what a recipe composes.

One RL step, as data flows (``rljax.train`` runs it; ``rljax.recipes.Recipe`` says which stages)::

    prompts --PromptFilter (DUMP/TAC draw; GRESO, Pilot-Commit, budgets)--> sampler --> Reward(s) (host)
      --> MultiReward (several rewards -> one reward, or straight to advantages)
      --> Shaping (phase "rollout": lengths, correctness)  --> Filter (phase "rewards"; may refill)
      --> policy forwards the recipe needs (proximal / reference log-probs, critic values, ...)
      --> Shaping (phase "forward": KL in the reward) --> Advantage (estimator, then transforms)
      --> Filter (phase "advantages") --> objective(hparams) --> update --> Controller(s)

Every stage reads a :class:`StepData` (host NumPy arrays of the step's rollouts and everything computed from
them so far) and returns what its kind returns (below). A stage declares the inputs it ``needs`` from the
vocabulary :data:`NEEDS`; the loop computes exactly those (no reference forward when nothing reads
``logp_ref``) and refuses, at start-up and before any compile, a recipe whose needs the run cannot meet,
naming the stage and the input.

Calling conventions (``data`` is a :class:`StepData`; ``metrics`` a dict whose scalar entries are logged as
``<stage name>/<key>``; arrays in it are ignored):

==============  =====================================================================================
kind            call
==============  =====================================================================================
Reward          ``fn(completions: list[str], problems: list[Problem]) -> [B]`` (host; wrapped in
                ``rljax.rewards.safe_reward``: a raise or NaN fails loudly, or scores 0 with
                ``task.lenient_rewards``)
MultiReward     ``fn(data) -> (values, metrics)`` reading ``data.reward_components [B, K]`` (several rewards
                without one: ``data.rewards`` is their sum);
                ``produces="rewards"``: ``values [B]`` is the reward; ``"advantages"``: the advantages
Shaping         ``fn(data) -> (rewards, metrics)``: new rewards ``[B]``, or token rewards ``[B, T]``
                (``data.rewards`` becomes their sum over tokens, as verl scores token rewards)
Filter          ``fn(data) -> (keep, metrics)``: ``keep [B]`` bool (dropped rows leave the batch: their
                loss mask is cleared and statistics skip them), or, in phase ``"advantages"``, ``[N]`` int
                row indices (a resampling of the batch, N <= B). ``refill=True``: dropped *groups* are
                replaced by newly sampled ones (DAPO dynamic sampling), up to ``rl.max_refills`` times
PromptFilter    ``init(num_dataset_prompts) -> state``; optional ``draw(state, prompts: PromptData, key) ->
                (index [P] int, state, metrics)``: the dataset prompts to roll out instead of the loader's
                candidates (a curriculum's sampler over the dataset; at most one stage of a recipe draws);
                optional ``select(state, prompts, key) -> (counts [P] int, state, metrics)``: rollouts per
                prompt, at most ``group_size`` (0 = skip: another candidate is drawn, up to
                ``rl.max_refills`` times); ``observe(state, data) -> (state, metrics)``: with
                ``observe_phase="rewards"`` on every sampled row before the forwards, with ``"advantages"``
                on the rows the update trains on, with their advantages (and ``task_gradients``), just
                before the update. ``pilot > 0``: ``select`` sees a scored pilot
                rollout of ``pilot`` samples per prompt (``prompts.pilot``) and returns the *commit* counts,
                at most ``group_size - pilot``; the pilot rows join their group (a commit of 0 keeps them)
Advantage       ``fn(data) -> (advantages [B] or [B, T], info)``; with ``init``: ``fn(data, state) ->
                (advantages, info, state)`` and the state is checkpointed. ``transform=True``: reads
                ``data.advantages`` (must follow an estimator). ``info["returns"]`` = critic targets
LossTerm        ``build(hparams) -> term`` with ``term(out, batch) -> (per_token_loss [B, T], metrics)``
                (``rljax.objectives.chain``); ``hparams`` maps its controller-movable arguments to
                hparam names (``eps_low -> clip_low``), so a controller changes them without recompiling
Replay          ``init() -> state`` (fixed-shape arrays: checkpointed); ``fn(data, state) -> (data, state,
                metrics)``: puts stored rows into the batch in place of fresh ones (marked
                ``data.replay_mask [B]``, ``with_extras``) and stores fresh rows; optional ``prompts(state, index [P],
                key) -> (index [P], slots [P], metrics)`` swaps prompts before the rollout (``slots``: the
                stored row each group will replay, -1 none; ``fn`` reads them as ``data.replay_slot``);
                optional ``hints(data, group_size, answer_key) -> (prompts [P], take [P], metrics)`` re-samples
                failed groups with a hinted prompt, trained behind the unhinted one (``rljax.hints``).
                ``phase`` ``"rewards"`` (before the forwards: replayed rows get advantages in their group) or
                ``"advantages"`` (after them: replayed rows keep their stored advantages)
Controller      ``init() -> state``; ``hparams(state) -> dict`` (values written into ``state.hparams``);
                ``update(state, inputs: ControlInputs) -> (state, metrics)`` after each step; optional
                ``temperature(state)`` (sampling temperature), ``wrap_policy(term, hparams)`` and
                ``policy_hparams(out, batch, hparams) -> dict``: hparams of the policy term chosen inside the
                loss on each (micro-)batch it is called on (BAPO's authors' placement); they override
                ``state.hparams`` there and the term is rebuilt with them
==============  =====================================================================================

A plain Python function in a recipe is the ``fn`` of a stage of the slot it is put in (a reward function
in ``rewards``, an advantage estimator in ``advantage``, ...), with no needs (a plain loss term is assumed to
read ``logp_old``); wrap it in the class to declare needs, a phase or state:
``Advantage(my_fn, needs=("answer_ids",))``.

At start-up every stage runs once on a synthetic batch of the run's shapes and its return is checked against this
table (``rljax.train._contracts``: tuple, dict keys, dtype, shape, finite values); loss terms are traced under
``jax.jit`` first. A violation names the slot, the stage, what it returned and what was expected.
"""
from rljax.stages._data import (BATCH_NEEDS, NEEDS, PRODUCERS, REPLAY_UNSTORED, ControlInputs, NeedError, PromptData,
                                RunFacts, StepData, TaskGradients, produced_by, scalar_metrics)
from rljax.stages._extras import EXTRAS, Extra
from rljax.stages._factories import checked, data_stage_factory, keyword, loss_term_factory, probe_step
from rljax.stages._factories import _input, _signature  # noqa: F401 (the rooms' stage adapters build on them)
from rljax.stages._kinds import _merge_hparams  # noqa: F401 (rljax.recipes merges the loss terms' hparams with it)
from rljax.stages._kinds import (Advantage, Aggregation, Controller, Filter, LossTerm, MultiReward, PromptFilter, Replay,
                                 Reward, Shaping, Stage, check_needs)

__all__ = [
    "NEEDS", "BATCH_NEEDS", "REPLAY_UNSTORED", "PRODUCERS", "produced_by", "EXTRAS", "Extra", "StepData",
    "PromptData", "RunFacts", "ControlInputs", "Stage", "TaskGradients", "Reward", "MultiReward", "Shaping", "Filter", "PromptFilter", "Replay", "Advantage", "LossTerm",
    "Aggregation", "Controller", "NeedError", "scalar_metrics", "check_needs", "loss_term_factory", "data_stage_factory",
    "keyword", "probe_step", "checked",
]

"""Fidelity-record text shared by several catalog rows: the peers' conventions around a loss (issue #51, sweep s1a).

Three things surround a peer's loss function and change its numbers without showing in the function itself:
which log-probs it is fed (the rollout temperature, top-k / top-p truncation), the denominator each micro-batch is
divided by, and whether the peer's default trainer reaches the function at all. The strings below are what the
records of ``rljax/objectives`` and ``rljax/rewards`` say about them; each names the lines read.

Ours, for every row: the RL loop builds its loss with ``objective_loss(..., temperature=1.0)``
(``rljax/train/_rl.py``), so the trainer's log-probs (``logp``, ``logp_old``, ``logp_ref``) and entropies are
untempered ``log softmax(z)`` whatever ``RLConfig.temperature`` (default 1.0, the sampler's own); the sampler's
``logp_behavior`` is untempered and untruncated too (``Rollout.logp_sampling``, the tempered and truncated one,
does not reach the ``TrainBatch``). ``make_train_step`` passes each micro-batch the step batch's aggregation
denominator (``rljax/train/_step.py``).
"""

# ---------------------------------------------------------------------------------------------- the temperature

T_NAME = "temperature in the log-probs"
T_OURS = ("none: the trainer's log-probs (logp, logp_old, logp_ref) and entropies are untempered log softmax(z) "
          "(the RL loop's objective_loss temperature=1.0); RLConfig.temperature (default 1.0) only samples")
T_VERL = ("verl actor_rollout_ref.rollout.temperature (default 1.0) divides the logits of the old, current and "
          "reference forwards (and their entropies)")
T_TRL = ("TRL temperature (default 1.0) divides the logits of the current, old and reference forwards (and the "
         "entropies)")
T_DEVIATION = ("every log-prob here is untempered; the peer's are computed from the logits ÷ the rollout temperature "
               "T, so at T ≠ 1 its ratios (and KL, entropy) are those of softmax(z/T) and differ from ours; equal at "
               "T = 1 (the peers' default and RLConfig's); no option gives theirs (the RL loop's trainer forward is "
               "untempered)")

READ_VERL_T = ("volcengine/verl@v0.7.0 (f9c855f7) verl/workers/actor/dp_actor.py:213, 298 (logits.div_(temperature)), "
               "verl/workers/fsdp_workers.py:1017, 1056 and verl/trainer/ppo/ray_trainer.py:1210 (temperature = "
               "rollout.temperature for the old, reference and update forwards), "
               "verl/trainer/config/rollout/rollout.yaml:11-17 (temperature 1.0, top_k −1, top_p 1), :77 "
               "(logprobs_mode processed_logprobs), :200 (calculate_log_probs False); the verl 0.9.1 PyPI wheel "
               "workers/engine/fsdp/transformer_impl.py:98-103 (logits ÷ temperature), "
               "trainer/ppo/v1/trainer_base.py:1655, 1701, 1856 (the old, reference and update forwards at "
               "rollout.temperature), trainer/config/rollout/rollout.yaml:17-23 (temperature 1.0, top_k −1, "
               "top_p 1), :93 (logprobs_mode processed_logprobs), :237 (calculate_log_probs True)")
READ_TRL_T = ("the TRL 1.9.0 PyPI wheel trl/trainer/grpo_trainer.py:1517-1519 (_get_per_token_logps_and_entropies "
              "divides the logits by temperature: current, old and reference log-probs, entropies), "
              "grpo_config.py:522-545 (temperature 1.0, top_p 1.0, top_k 0, min_p None)")
READ_TRL_VLLM = ("trl/generation/vllm_generation.py:365 and trl/scripts/vllm_serve.py:361 (vLLM "
                 "logprobs_mode='processed_logprobs'), grpo_config.py:577-578 (use_vllm False), "
                 "grpo_trainer.py:2558-2576 (old log-probs recomputed only when gradient_accumulation_steps % "
                 "(steps_per_generation × num_iterations) ≠ 0 or with use_vllm and the vLLM correction; else "
                 "per_token_logps.detach(), :3036-3037) and :2578-2621 (the vLLM IS ratio, use_vllm only)")

# the rollout side: vLLM processed_logprobs (temperature, then top-k / top-p, renormalised)
TOPP_NAME = "top-p / top-k in the rollout log-probs"
TOPP_OURS = "none: logp_behavior is the untempered, untruncated log softmax(z)[y]"
TOPP_VERL = ("verl rollout_log_probs = vLLM logprobs_mode 'processed_logprobs' (rollout.yaml): log softmax of the "
             "logits ÷ rollout.temperature after top_k (−1, off) / top_p (1, off), renormalised over the kept tokens")
TOPP_TRL = ("TRL sampling_per_token_logps = vLLM 'processed_logprobs' at temperature, top_p 1.0, top_k 0, min_p None "
            "(use_vllm only)")
TOPP_DEVIATION = ("the ratio against the rollout: the peer's rollout_log_probs is vLLM's processed_logprobs, the "
                  "log-prob of softmax(z/T) truncated to the top-k / top-p nucleus and renormalised, and its training "
                  "side is tempered (not truncated); ours are both untempered and untruncated, so at T ≠ 1 or top_p "
                  "< 1 / top_k > 0 a token's ratio differs (inside the nucleus theirs is lower by the nucleus mass) "
                  "and so does what is truncated, clipped or rejected; equal at T = 1, top_p = 1, top_k off (the "
                  "peers' defaults and RLConfig's); no built-in source gives theirs (Rollout.logp_sampling, the "
                  "sampler's tempered and truncated log-prob, does not reach the TrainBatch; the trainer's log-probs "
                  "are untempered)")

# ----------------------------------------------------------------------------------------- micro-batch denominators

READ_DENOM = ("micro-batch denominators (#51 sweep s1a): volcengine/verl@v0.7.0 verl/workers/actor/dp_actor.py:"
              "444-467, 541-543 (the default legacy worker: agg_loss without global counts on each micro-batch, the "
              "loss × 1/gradient_accumulation, or × rows / ppo_mini_batch_size with use_dynamic_bsz) and "
              "core_algos.py:772-827 agg_loss; the verl 0.9.1 PyPI wheel workers/utils/losses.py:57-67 (ppo_loss "
              "passes dp_size, batch_num_tokens, global_batch_size), workers/engine/fsdp/transformer_impl.py:729-735 "
              "(batch_num_tokens: the mini-batch's loss tokens all-reduced over dp); the TRL 1.9.0 PyPI wheel "
              "grpo_trainer.py:3124-3150 (the loss_type normalisers) and :2427 (num_items_in_batch: the generation "
              "batch's loss tokens gathered over the processes)")
DENOM_NAME = "micro-batch denominator"
DENOM_OURS_TOKEN_MEAN = ("token_mean: the step batch's loss-token count on every micro-batch (make_train_step's "
                         "global denominator)")
DENOM_VERL = ("verl v0.7.0 (legacy dp_actor, the default worker): each micro-batch's own count (token-mean: its "
              "tokens; seq-mean-*: its non-empty rows) × 1/gradient_accumulation; verl 0.9.1 (engine ppo_loss, the "
              "only worker): token-mean ÷ the mini-batch's global token count, seq-mean-* ÷ ppo_mini_batch_size × "
              "rollout.n")
DENOM_TRL = ("TRL by loss_type: dapo / cispo / vespo Σ ÷ num_items_in_batch (the generation batch's tokens; = one "
             "optimizer step's with the default steps_per_generation = gradient_accumulation_steps); bnpo each "
             "micro-batch's token mean, grpo / sapo its mean of row means, dr_grpo Σ ÷ (rows × "
             "max_completion_length), luspo (ℓ·|y|).mean() over its rows, each ÷ gradient_accumulation_steps")
DENOM_DEVIATION_TOKEN_MEAN = (
    "the micro-batch denominator: under token_mean ours divides every micro-batch by the step batch's token count, "
    "equal to verl 0.9.1's token-mean (global batch_num_tokens) and TRL's dapo / cispo / vespo (num_items_in_batch) "
    "for any micro-batching; verl v0.7.0's default legacy dp_actor and TRL's bnpo take each micro-batch's own token "
    "mean × 1/gradient_accumulation (a mean of micro-batch means; verl with use_dynamic_bsz × its rows / "
    "ppo_mini_batch_size): equal to ours only when every micro-batch (and dp rank) holds the same number of loss "
    "tokens (dynamic: the same tokens per row); under seq_mean_token_mean ours equals TRL's grpo / sapo, verl "
    "0.9.1's seq-mean-token-mean and verl v0.7.0's (fixed micro-batch size) when no row is empty")

# ------------------------------------------------------------------------------------- verl 0.9.1's v1 trainer, bypass

READ_V1_BYPASS = ("the verl 0.9.1 PyPI wheel's default trainer is the v1 trainer (trainer/config/ppo_trainer.yaml:232 "
                  "use_v1 true, trainer/main_ppo.py:183-191); in bypass mode its _compute_old_log_prob "
                  "(trainer/ppo/v1/trainer_base.py:1634-1647) only copies rollout_log_probs to old_log_probs and its "
                  "_compute_advantage skips the rollout correction (:1764-1772); apply_bypass_mode "
                  "(trainer/ppo/rollout_corr_helper.py:1109-1145: policy_loss.loss_mode = 'bypass_mode' with the "
                  "algorithm's rollout_correction) is called only by the legacy trainer/ppo/ray_trainer.py:1575-1583 "
                  "(use_v1 false), so on v1 the actor keeps actor.policy_loss.loss_mode (actor.yaml:61 'vanilla') and "
                  "actor.policy_loss.rollout_correction (workers/config/actor.py:94-101: a default "
                  "RolloutCorrectionConfig, rollout_is 'sequence', threshold 2.0, rollout_rs None, loss_type "
                  "'ppo_clip', config/algorithm.py:179-185)")
V1_BYPASS_NAME = "verl 0.9.1 trainer running the bypass_* presets"
V1_BYPASS_DEVIATION = ("verl 0.9.1's default v1 trainer does not run the bypass_* presets as configured: with "
                       "algorithm.rollout_correction.bypass_mode it only sets old_log_probs = rollout_log_probs and "
                       "skips the rollout correction, so the actor runs its own policy_loss.loss_mode (default "
                       "'vanilla': PPO clip against the rollout log-probs) with no IS weight, no rejection and no "
                       "loss_type 'reinforce' (bypass_ppo_clip alone comes out the same); "
                       "compute_policy_loss_bypass_mode runs there only with actor.policy_loss.loss_mode='bypass_mode', "
                       "reading actor.policy_loss.rollout_correction (rollout_is 'sequence', threshold 2.0, rollout_rs "
                       "None, loss_type 'ppo_clip' unless set); the legacy trainer (trainer.use_v1=false) runs the "
                       "presets as configured; the decoupled presets run on both")

"""Check a run fits a TPU slice before renting it: its programs compiled by XLA:TPU, with no TPU attached.

    rljax plan --target v5e:16x16 --set model.preset=qwen2.5-72b --set mesh.fsdp=-1 --prompt-len 1024

Python::

    from rljax.parallel import topology_mesh
    from rljax.plan import format_report, plan, plan_spec
    spec = plan_spec(cfg, prompt_len=1024)               # cfg: a rljax.train.RunConfig
    report = plan(spec, topology_mesh("v5e:16x16", cfg.mesh), "v5e:16x16")
    print(format_report(report))

Needs libtpu (``pip install -e ".[tpu]"``). See docs/scaling.md, "Before you rent a pod".
"""
from rljax.plan._estimate import Cost, matmul_params, token_flops
from rljax.plan._plan import (HEADROOM, PROGRAMS, PlanReport, ProgramPlan, format_report, kv_bound_rows,
                              max_rollout, plan, plan_model_config, plan_spec)
from rljax.plan._programs import PlanSpec, compile_input_forward, compile_rollout, compile_train_step

__all__ = ["Cost", "matmul_params", "token_flops", "HEADROOM", "PROGRAMS", "PlanReport", "ProgramPlan",
           "format_report", "kv_bound_rows", "max_rollout", "plan", "plan_model_config", "plan_spec", "PlanSpec",
           "compile_input_forward", "compile_rollout", "compile_train_step"]

"""Policy-side objective terms, composed with ``chain``.

Every term is built by a factory that closes over its hyper-parameters and
returns ``term(out: PolicyOutputs, batch: TrainBatch) -> (per_token_loss [B, T],
metrics)``; ``chain(*terms, aggregate=...)`` sums and aggregates them.
"""
from rljax.objectives import _corrections, _entropy, _kl, _ratio, _supervised, _value
from rljax.objectives._aggregation import (TECHNIQUES as _AGG_TECHNIQUES, get_aggregation, seq_mean_token_mean,
                                           seq_mean_token_sum, seq_mean_token_sum_norm, token_mean, token_sum)
from rljax.objectives._chain import Objective, chain, named
from rljax.objectives._statistics import StatisticTerm, call_with_statistics, has_statistics, with_statistics
from rljax.objectives._corrections import *  # noqa: F401,F403
from rljax.objectives._entropy import *  # noqa: F401,F403
from rljax.objectives._kl import *  # noqa: F401,F403
from rljax.objectives._ratio import *  # noqa: F401,F403
from rljax.objectives._supervised import *  # noqa: F401,F403
from rljax.objectives._value import *  # noqa: F401,F403

from rljax._technique import gather_room as _gather_room

# each module's rows declare their stage beside the function (``stage=loss_term_factory(fn, ...)``); a module not
# named here is found by _gather_room (its rows follow these, its ``__all__`` joins the room)
TECHNIQUES = _gather_room(globals(), _ratio.TECHNIQUES + _corrections.TECHNIQUES + _entropy.TECHNIQUES
                          + _kl.TECHNIQUES + _supervised.TECHNIQUES + _value.TECHNIQUES + _AGG_TECHNIQUES)[0]

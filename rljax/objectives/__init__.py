"""Policy-side objective terms, composed with ``chain`` (see ``_chain.py``)."""
from rljax.objectives._aggregation import (get_aggregation, seq_mean_token_mean, seq_mean_token_sum,
                                           seq_mean_token_sum_norm, token_mean, token_sum)
from rljax.objectives._chain import Objective, chain, named

TECHNIQUES = ()

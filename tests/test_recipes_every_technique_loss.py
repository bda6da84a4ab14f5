"""Every loss-side catalog technique (policy losses, corrections, KL, entropy, supervised, critic,
aggregations, controllers) trains end to end in its smallest recipe (see tests/_every_technique.py)."""
import pytest

from _every_technique import compile_cache, names, trains, warm_start  # noqa: F401 (fixtures)

pytestmark = pytest.mark.long  # ~40 short training runs; the catalog sweep covers every row in the fast loop


@pytest.mark.parametrize("name", names(loss_side=True))
def test_technique_trains(name, warm_start, tmp_path):  # noqa: F811
  trains(name, warm_start, str(tmp_path))

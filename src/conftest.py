"""What the docstring examples (run by ``make test`` as doctests) may take as given."""

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace):
    """``np`` and ``frames``: eight smooth 24x32 RGB frames that drift a little."""
    y, x = np.mgrid[0:24, 0:32]
    frames = np.stack(
        [np.dstack([(x * 4 + i) % 256, (y * 5) % 256, (x + y) % 256]) for i in range(8)]
    ).astype(np.uint8)
    doctest_namespace.update(np=np, frames=frames)

"""The closed sets of option values that the API, the store's format and the command line
share, written once: how a group is coded (``Tier``) and how frames stored whole are
coded (``Intra``). Nothing is imported here, so the command line's parsers read them
without loading numpy.
"""

from typing import Literal, get_args

Tier = Literal["lossless", "psnr", "keyframe"]
"""``"lossless"``: bit-exact; ``"psnr"``: each frame within a PSNR target; ``"keyframe"``:
the base only, every frame decodes to it."""
TIERS: frozenset[str] = frozenset(get_args(Tier))

Intra = Literal["gradient", "webp", "ffv1"]
"""``"gradient"``: a gradient predictor and zstd (fast); ``"webp"``: lossless WebP (RGB
stores); ``"ffv1"``: FFV1 keyframes through PyAV (stores of planes)."""
INTRAS: tuple[str, ...] = get_args(Intra)

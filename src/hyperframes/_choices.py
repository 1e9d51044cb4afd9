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


def check_intra(intra: str, *, planes: bool) -> None:
    """Refuse an intra coding that does not apply to the store's frames (it would be
    ignored silently)."""
    if intra == "webp" and planes:
        raise ValueError(
            "intra='webp' codes RGB frames, and these frames are a video's planes; pass "
            "intra='gradient' or 'ffv1', or store RGB (pix_fmt='rgb24' when packing)"
        )
    if intra == "ffv1" and not planes:
        raise ValueError(
            "intra='ffv1' codes a video's planes, and these frames are not; pass "
            "intra='gradient' or 'webp'"
        )

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

Intra = Literal["gradient", "webp", "ffv1", "x264"]
"""``"gradient"``: a gradient predictor and zstd (fast); ``"webp"``: lossless WebP (RGB
stores); ``"ffv1"``: FFV1 keyframes through PyAV (stores of planes); ``"x264"``: each group
as lossless H.264 through PyAV's libx264 (stores of planes: the size mode)."""
INTRAS: tuple[str, ...] = get_args(Intra)

GOP = 32
"""With ``intra="x264"``, frames from one keyframe to the next by default: a random frame
decodes 16.5 packets on average (see ``benchmarks/store_frontier.py`` for the trade-off)."""
MAX_GOP = 1024


def check_intra(intra: str, *, planes: bool) -> None:
    """Refuse an intra coding that does not apply to the store's frames (it would be
    ignored silently)."""
    if intra == "webp" and planes:
        raise ValueError(
            "intra='webp' codes RGB frames, and these frames are a video's planes; pass "
            "intra='gradient' or 'ffv1', or store RGB (pix_fmt='rgb24' when packing)"
        )
    if intra in ("ffv1", "x264") and not planes:
        raise ValueError(
            f"intra={intra!r} codes a video's planes, and these frames are not; pass "
            "intra='gradient' or 'webp'"
        )


def check_gop(gop: int | None, intra: str) -> int | None:
    """The keyframe distance of an ``intra`` coding: ``GOP`` by default for ``"x264"``,
    ``None`` for the others (which have no GOPs: passing one is refused)."""
    if intra != "x264":
        if gop is not None:
            raise ValueError(f"gop= applies to intra='x264' only, not intra={intra!r}")
        return None
    if gop is None:
        return GOP
    if isinstance(gop, bool) or not isinstance(gop, int) or not 1 <= gop <= MAX_GOP:
        raise ValueError(f"gop must be an int in 1..{MAX_GOP}, got {gop!r}; try {GOP}")
    return gop

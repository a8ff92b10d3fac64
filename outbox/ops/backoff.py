"""How long the relay waits after a failed round: exponential backoff with full jitter.

A pure function of the attempt number, the base, the cap and a random
source; it never sleeps and never reads a clock (the relay does both).
"""
import random as _random


def delay(attempt, base, cap, rand=_random.random):
    """Seconds to wait after the `attempt`-th failure in a row: uniform in [0, min(cap, base * 2**(attempt-1))).

    Full jitter (every wait drawn from zero up to the exponential bound) keeps
    several relays that failed together from retrying together. `attempt` is
    an int >= 1; `base` and `cap` are numbers >= 0; `rand()` returns a float
    in [0, 1). Anything else raises ValueError.
    """
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise ValueError("attempt must be an int >= 1, got %r" % (attempt,))
    for name, value in (("base", base), ("cap", cap)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
            raise ValueError("%s must be a finite number of seconds >= 0, got %r" % (name, value))
    # 2**(attempt-1) overflows a float near attempt 1025; past the cap it no longer matters.
    bound = cap if attempt > 64 else min(cap, base * 2.0 ** (attempt - 1))  # audit: G41
    draw = rand()
    if not 0.0 <= draw < 1.0:
        raise ValueError("rand() must return a float in [0, 1), got %r" % (draw,))
    return bound * draw

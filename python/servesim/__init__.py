"""servesim: simulate LLM serving clusters and plan GPU capacity against latency SLOs."""
from ._servesim import *  # noqa: F401,F403
from ._servesim import Error, __version__  # noqa: F401

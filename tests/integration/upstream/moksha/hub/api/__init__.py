# Stand-in (tests only): see tests/integration/upstream/README.md.
from moksha.hub.api.consumer import Consumer

__all__ = ["Consumer"]

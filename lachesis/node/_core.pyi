# The native simulator core (lachesis/node/native/, built at install): its names are read as Any here; the
# binding's signatures are in lachesis/node/native/bindings*.cpp and the Python reference is what they mirror.
from typing import Any

def __getattr__(name: str) -> Any: ...

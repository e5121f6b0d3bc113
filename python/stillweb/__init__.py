"""stillweb's Python side: a client for the native API, the tool definitions an agent harness
registers, and ``python -m stillweb fetch`` for the models and the demo corpus. The server and
indexer binaries (``stillweb-server``, ``stillweb-indexer``, ``stillweb-loadtest``) come in the
same wheel and are on ``PATH`` once it is installed.
"""

from .client import AsyncClient, Client, StillwebError
from .tools import AsyncToolAdapter, ToolAdapter, tool_specs

__all__ = [
    "AsyncClient",
    "AsyncToolAdapter",
    "Client",
    "StillwebError",
    "ToolAdapter",
    "tool_specs",
]

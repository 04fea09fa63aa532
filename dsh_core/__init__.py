"""dsh_core: errors and ``error_chain``, the LLM seam, the DeepSeek adapter, the agent loop and
the session log. No terminal code lives here; ``dsh_stdio`` drives it.
"""

from __future__ import annotations

from .chain import error_chain as error_chain
from .errors import FailureRecord as FailureRecord
from .errors import HarnessError as HarnessError
from .errors import LlmError as LlmError
from .errors import SessionLogError as SessionLogError
from .errors import UsageError as UsageError
from .llm import ChatModel as ChatModel
from .llm import ChatRequest as ChatRequest
from .llm import Event as Event
from .llm import Finish as Finish
from .llm import KeepAlive as KeepAlive
from .llm import Message as Message
from .llm import ReasoningDelta as ReasoningDelta
from .llm import RetryNotice as RetryNotice
from .llm import ScriptedModel as ScriptedModel
from .llm import TextDelta as TextDelta
from .llm import Usage as Usage

__version__ = "0.1.0"

__all__ = [
    "ChatModel",
    "ChatRequest",
    "Event",
    "FailureRecord",
    "Finish",
    "HarnessError",
    "KeepAlive",
    "LlmError",
    "Message",
    "ReasoningDelta",
    "RetryNotice",
    "ScriptedModel",
    "SessionLogError",
    "TextDelta",
    "Usage",
    "UsageError",
    "__version__",
    "error_chain",
]

"""dsh_core: errors and ``error_chain``, the LLM seam, the DeepSeek adapter, the agent loop and
the session log. No terminal code lives here; ``dsh_stdio`` drives it.
"""

from __future__ import annotations

from .approval import ApprovalPolicy as ApprovalPolicy
from .chain import error_chain as error_chain
from .deepseek import DeepSeekAdapter as DeepSeekAdapter
from .deepseek import RetryPolicy as RetryPolicy
from .errors import FailureRecord as FailureRecord
from .errors import HarnessError as HarnessError
from .errors import LlmError as LlmError
from .errors import SessionLogError as SessionLogError
from .errors import UsageError as UsageError
from .events import TurnEnd as TurnEnd
from .llm import AssistantMessage as AssistantMessage
from .llm import ChatModel as ChatModel
from .llm import ChatRequest as ChatRequest
from .llm import Event as Event
from .llm import Finish as Finish
from .llm import KeepAlive as KeepAlive
from .llm import Message as Message
from .llm import ReasoningDelta as ReasoningDelta
from .llm import RetryNotice as RetryNotice
from .llm import SystemMessage as SystemMessage
from .llm import TextDelta as TextDelta
from .llm import ToolCall as ToolCall
from .llm import ToolCallRequest as ToolCallRequest
from .llm import ToolMessage as ToolMessage
from .llm import ToolSpec as ToolSpec
from .llm import Usage as Usage
from .llm import UserMessage as UserMessage
from .loop import Conversation as Conversation
from .loop import PreTurnHook as PreTurnHook
from .loop import ToolFinished as ToolFinished
from .loop import ToolStarting as ToolStarting
from .loop import TurnFailed as TurnFailed
from .session import LoadReport as LoadReport
from .session import SessionEvent as SessionEvent
from .session import SessionLog as SessionLog
from .session import SessionStore as SessionStore
from .tools import Tool as Tool
from .tools import Toolbox as Toolbox
from .tools import ToolError as ToolError
from .tools import ToolOutput as ToolOutput
from .version import __version__ as __version__

__all__ = [
    "ApprovalPolicy",
    "AssistantMessage",
    "ChatModel",
    "ChatRequest",
    "Conversation",
    "DeepSeekAdapter",
    "Event",
    "FailureRecord",
    "Finish",
    "HarnessError",
    "KeepAlive",
    "LlmError",
    "LoadReport",
    "Message",
    "PreTurnHook",
    "ReasoningDelta",
    "RetryNotice",
    "RetryPolicy",
    "SessionEvent",
    "SessionLog",
    "SessionLogError",
    "SessionStore",
    "SystemMessage",
    "TextDelta",
    "Tool",
    "ToolCall",
    "ToolCallRequest",
    "ToolError",
    "ToolFinished",
    "ToolMessage",
    "ToolOutput",
    "ToolSpec",
    "ToolStarting",
    "Toolbox",
    "TurnEnd",
    "TurnFailed",
    "Usage",
    "UsageError",
    "UserMessage",
    "__version__",
    "error_chain",
]

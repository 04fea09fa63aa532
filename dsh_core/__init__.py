"""dsh_core: errors and ``error_chain``, the LLM seam, the DeepSeek adapter, the agent loop and
the session log. No terminal code lives here; ``dsh_stdio`` drives it.
"""

from __future__ import annotations

from .agent.approval import ApprovalPolicy as ApprovalPolicy
from .agent.loop import Conversation as Conversation
from .agent.loop import PreTurnHook as PreTurnHook
from .agent.loop import ToolFinished as ToolFinished
from .agent.loop import ToolStarting as ToolStarting
from .agent.loop import TurnFailed as TurnFailed
from .chain import error_chain as error_chain
from .errors import FailureRecord as FailureRecord
from .errors import HarnessError as HarnessError
from .errors import LlmError as LlmError
from .errors import SessionLogError as SessionLogError
from .errors import UsageError as UsageError
from .model.deepseek import DeepSeekAdapter as DeepSeekAdapter
from .model.deepseek import RetryPolicy as RetryPolicy
from .model.seam import AssistantMessage as AssistantMessage
from .model.seam import ChatModel as ChatModel
from .model.seam import ChatRequest as ChatRequest
from .model.seam import Event as Event
from .model.seam import Finish as Finish
from .model.seam import KeepAlive as KeepAlive
from .model.seam import Message as Message
from .model.seam import ReasoningDelta as ReasoningDelta
from .model.seam import RetryNotice as RetryNotice
from .model.seam import SystemMessage as SystemMessage
from .model.seam import TextDelta as TextDelta
from .model.seam import ToolCall as ToolCall
from .model.seam import ToolCallRequest as ToolCallRequest
from .model.seam import ToolMessage as ToolMessage
from .model.seam import ToolSpec as ToolSpec
from .model.seam import Usage as Usage
from .model.seam import UserMessage as UserMessage
from .session import LoadReport as LoadReport
from .session import SessionEvent as SessionEvent
from .session import SessionLog as SessionLog
from .session import SessionStore as SessionStore
from .session.events import TurnEnd as TurnEnd
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

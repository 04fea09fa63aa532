"""A subagent's conversation (SPEC 13): a fresh session linked to its parent's call, read-only
tools, nobody to ask."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dsh_core.agent.approval import ApprovalPolicy
from dsh_core.agent.loop import Conversation
from dsh_core.extensions.skills import SkillCatalog, SkillTool
from dsh_core.extensions.subagent import CHILD_TOOLS, SUBAGENT_WINDOW_ADVICE
from dsh_core.model.seam import ToolCall
from dsh_core.session import TOOL_OUTPUT_DIR, SessionLog
from dsh_core.tools import Toolbox, Workspace, builtin_tools, everyday_tools

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["SUBAGENT_NOBODY", "subagent"]

SUBAGENT_NOBODY = "a subagent cannot ask anyone"
"""Why a subagent's calls that need a person are refused, and its questions unanswered."""


def subagent(
    runtime: Runtime, parent: SessionLog, call: ToolCall, skills: SkillCatalog
) -> Conversation:
    """A subagent's conversation for ``call`` of the session ``parent`` (SPEC 13)."""
    config = runtime.config
    cwd = Path.cwd()
    log = runtime.store.create(cwd, parent=parent, call_id=call.id)
    workspace = Workspace.at(cwd, log.path.parent / TOOL_OUTPUT_DIR, dsh_home=config.home)
    tools = [tool for tool in builtin_tools(workspace) if tool.spec.name in CHILD_TOOLS]
    if skills.skills:
        tools.append(SkillTool(skills, workspace))
    # Its question can reach nobody: the tool says so, and the child decides (SPEC 16).
    tools += [
        tool
        for tool in everyday_tools(
            log, log.path.parent, jobs=None, asker=lambda: None, nobody=SUBAGENT_NOBODY
        )
        if tool.spec.name == "ask_user_question"
    ]
    toolbox = Toolbox(tools)
    parent_now = runtime.conversation  # /model and /think apply to its subagents too
    return Conversation(
        runtime.model,
        log,
        model_name=parent_now.model_name,
        max_tokens=config.max_tokens,
        max_steps=config.max_steps,
        context_window=parent_now.context_window,
        auto_compact=parent_now.auto_compact,
        window_advice=SUBAGENT_WINDOW_ADVICE,  # read by the parent's model
        thinking=parent_now.thinking,
        reasoning_effort=parent_now.reasoning_effort,
        toolbox=toolbox,
        # Nobody can be asked from inside a call: what needs a question is refused.
        approval=ApprovalPolicy(config.allow & {"read"}, None, unattended=SUBAGENT_NOBODY),
        system_prompt=runtime.system_prompt_for(cwd, toolbox, skills, warn=False),
    )

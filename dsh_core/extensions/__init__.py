"""What extends the built-in tools: MCP servers (:mod:`.mcp`), skills, subagents.

May import every layer below: the leaves, ``model``, ``session``, ``trust``, ``tools``, ``agent``.
"""

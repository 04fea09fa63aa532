"""One run of dsh: the session log, the model and the conversation tying them, and what a run
starts beside them (MCP servers, checkpoints, library log lines); where a resumed session runs.
"""

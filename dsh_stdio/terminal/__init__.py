"""The REPL on a terminal: the prompt_toolkit prompt loop and the approval question."""
